/*
 * test_opensandbox_provider.c - the opensandbox provider through libsbx
 * against the fake (fake_opensandbox.py): configuration and credentials,
 * what create sends, waiting for Running (and a sandbox stuck in Pending),
 * retries of idempotent calls only, faults (5xx, slow answers, cut
 * streams, vanished sandboxes), cancellation through DELETE /command, both
 * event framings, resume on attach, connection reuse.
 */
#include "../e2b/fake_service.h"
#include "../support/provider_harness.h"

#include <sbx/sbx.h>

#include <criterion/criterion.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define KEY "os_test_key_0123"

static struct fake_service fake;
static char cfgpath[PH_PATH_MAX];
static sbx_ctx *ctx;
static sbx_provider *prov;

static void start(void)
{
    cr_assert_eq(fake_start_script(&fake, "tests/opensandbox/fake_opensandbox.py", NULL, KEY), 0,
                 "cannot start the fake");
    setenv("OPEN_SANDBOX_API_KEY", KEY, 1);
    unsetenv("OPEN_SANDBOX_DOMAIN");
}

static void up(void)
{
    unsetenv("FAKE_OS_SSE_DATA");
    start();
}

static void down(void)
{
    ph_close(&ctx, &prov);
    fake_stop(&fake);
    ph_remove_config(cfgpath);
}

/* A context whose opensandbox section points at the fake (api_url NULL:
 * none), plus extra lines. */
static int open_ctx_url(const char *url, const char *extra, sbx_error *err)
{
    char api[128] = "";
    if (url)
        snprintf(api, sizeof api, "    api_url: \"%s\"\n", url);
    ph_write_config(cfgpath, "/tmp/sbx-os-test-XXXXXX",
                    "providers:\n  opensandbox:\n%s    workspace: /home/user/workspace\n%s%s", api,
                    extra && strstr(extra, "retries:") ? "" : "    retries: 3\n", extra ? extra : "");
    return ph_open(cfgpath, "opensandbox", true, &ctx, &prov, err);
}

static int open_ctx(const char *extra, sbx_error *err)
{
    return open_ctx_url(fake.url, extra, err);
}

static void destroy(sbx_handle *h, const char *key)
{
    sbx_error err;
    cr_expect_eq(sbx_destroy(prov, key, sbx_handle_ref(h), NULL, &err), SBX_OK, "%s",
                 err.message);
    sbx_release(h);
}

TestSuite(opensandbox_provider, .init = up, .fini = down, .timeout = 120);

Test(opensandbox_provider, no_server_is_a_config_error)
{
    sbx_error err;
    int rc = open_ctx_url(NULL, NULL, &err);
    cr_expect_eq(rc, SBX_E_CONFIG, "%d %s", rc, err.message);
    cr_expect(strstr(err.message, "api_url") && strstr(err.message, "OPEN_SANDBOX_DOMAIN"), "%s",
              err.message);
}

Test(opensandbox_provider, domain_from_the_environment)
{
    setenv("OPEN_SANDBOX_DOMAIN", strstr(fake.url, "127.0.0.1"), 1);
    sbx_error err;
    cr_assert_eq(open_ctx_url(NULL, NULL, &err), SBX_OK, "%s", err.message);
    sbx_handle *h = ph_create(prov, "k-domain");
    destroy(h, "k-domain");
}

Test(opensandbox_provider, rejected_key_names_the_variable_not_the_value)
{
    setenv("OPEN_SANDBOX_API_KEY", "wrong_secret_value", 1);
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    sbx_handle *h = NULL;
    int rc = ph_try_create(prov, "k1", &h, &err);
    cr_expect_eq(rc, SBX_E_CONFIG, "%d %s", rc, err.message);
    cr_expect(strstr(err.message, "OPEN_SANDBOX_API_KEY"), "%s", err.message);
    cr_expect_null(strstr(err.message, "wrong_secret_value"), "%s", err.message);
}

Test(opensandbox_provider, create_sends_image_limits_owner_and_deny_policy)
{
    sbx_error err;
    cr_assert_eq(open_ctx("    image: python:3.12-slim\n    cpu: 250m\n    memory: 256Mi\n",
                          &err),
                 SBX_OK, "%s", err.message);
    sbx_handle *h = ph_create(prov, "session-key-secret");
    char hash[SBX_KEY_HASH_LEN + 1];
    cr_assert_eq(sbx_key_hash("session-key-secret", hash), SBX_OK);
    hash[63] = '\0'; /* label values hold 63 characters */
    char *s = fake_stats(&fake);
    cr_expect(strstr(s, hash), "owner hash not sent");
    cr_expect_null(strstr(s, "session-key-secret"), "the session key was sent");
    cr_expect(strstr(s, "\"uri\": \"python:3.12-slim\""), "%s", s);
    cr_expect(strstr(s, "\"entrypoint\": [\"tail\", \"-f\", \"/dev/null\"]"), "%s", s);
    cr_expect(strstr(s, "\"cpu\": \"250m\"") && strstr(s, "\"memory\": \"256Mi\""), "%s", s);
    cr_expect(strstr(s, "\"networkPolicy\": {\"defaultAction\": \"deny\", \"egress\": []}"),
              "%s", s);
    cr_expect_null(strstr(s, KEY), "the API key landed in a request body");
    free(s);
    /* idempotent: a second create adopts the same sandbox */
    sbx_handle *h2 = ph_create(prov, "session-key-secret");
    cr_expect_str_eq(sbx_handle_ref(h), sbx_handle_ref(h2));
    sbx_release(h2);
    destroy(h, "session-key-secret");
}

Test(opensandbox_provider, stuck_in_pending_times_out_naming_the_state)
{
    sbx_error err;
    cr_assert_eq(open_ctx("    ready_timeout_ms: 600\n", &err), SBX_OK, "%s", err.message);
    cr_assert_eq(fake_faults(&fake, "[{\"match\":\"/v1/sandboxes\",\"kind\":\"stuck\"}]"), 0);
    sbx_handle *h = NULL;
    int rc = ph_try_create(prov, "k-stuck", &h, &err);
    cr_expect_eq(rc, SBX_E_TIMEOUT, "%d %s", rc, err.message);
    cr_expect(strstr(err.message, "last state Pending"), "%s", err.message);
}

Test(opensandbox_provider, transient_failures_are_retried_for_idempotent_calls_only)
{
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(fake_faults(&fake, "[{\"match\":\"/v1/sandboxes\",\"kind\":\"status\","
                                    "\"status\":503,\"times\":2}]"),
                 0);
    sbx_handle *h = ph_create(prov, "k-retry");
    destroy(h, "k-retry");
    free(fake_http(&fake, "POST", "/_fake/reset", "", NULL, NULL));
    /* GET /sandboxes (the owner lookup) works, then POST meets a 502 */
    cr_assert_eq(fake_faults(&fake, "[{\"match\":\"/v1/sandboxes\",\"kind\":"
                                    "\"status\",\"status\":200,\"body\":{\"items\":[],"
                                    "\"pagination\":{\"page\":1,\"pageSize\":50,"
                                    "\"totalItems\":0,\"totalPages\":1,\"hasNextPage\":false}}},"
                                    "{\"match\":\"/v1/sandboxes\",\"kind\":\"status\","
                                    "\"status\":502,\"body\":{\"code\":\"BAD_GATEWAY\","
                                    "\"message\":\"bad gateway\"}}]"),
                 0);
    int rc = ph_try_create(prov, "k-post", &h, &err);
    cr_expect_eq(rc, SBX_E_UNAVAILABLE, "%d %s", rc, err.message);
    cr_expect(strstr(err.message, "502"), "%s", err.message);
    char *s = fake_stats(&fake);
    cr_expect_eq(ph_count(s, "\"method\": \"POST\", \"path\": \"/v1/sandboxes\""), 0,
                 "the failed POST was repeated: %s", s);
    free(s);
}

Test(opensandbox_provider, output_streams_and_exit_codes)
{
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    sbx_handle *h = ph_create(prov, "k-stream");
    struct sbx_exec_result res;
    sbx_capture out;
    sbx_capture_init(&out, 4096, 0);
    int rc = ph_exec_sh(h, "echo first; sleep 1; echo second; echo err >&2; exit 7", &res, &out, &err);
    cr_expect_eq(rc, SBX_OK, "%s", err.message);
    cr_expect_eq(res.exit_code, 7);
    cr_expect_eq(res.err_bytes, 4);
    char *t = sbx_capture_text(&out);
    cr_expect_str_eq(t, "first\nsecond\n");
    free(t);
    sbx_capture_free(&out);
    destroy(h, "k-stream");
}

Test(opensandbox_provider, data_framing_is_read_too)
{
    fake_stop(&fake);
    setenv("FAKE_OS_SSE_DATA", "1", 1);
    start();
    unsetenv("FAKE_OS_SSE_DATA");
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    sbx_handle *h = ph_create(prov, "k-data");
    struct sbx_exec_result res;
    sbx_capture out;
    sbx_capture_init(&out, 4096, 0);
    int rc = ph_exec_sh(h, "printf 'a\\n\\nb'; exit 3", &res, &out, &err);
    cr_expect_eq(rc, SBX_OK, "%s", err.message);
    cr_expect_eq(res.exit_code, 3);
    char *t = sbx_capture_text(&out);
    cr_expect_str_eq(t, "a\n\nb");
    free(t);
    sbx_capture_free(&out);
    destroy(h, "k-data");
}

Test(opensandbox_provider, cut_stream_is_a_protocol_error)
{
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    sbx_handle *h = ph_create(prov, "k-cut");
    struct sbx_exec_result res;
    sbx_capture out;
    sbx_capture_init(&out, 4096, 0);
    cr_assert_eq(fake_faults(&fake, "[{\"match\":\"/command\",\"kind\":\"cut\"}]"), 0);
    int rc = ph_exec_sh(h, "echo hello; sleep 1; echo more", &res, &out, &err);
    cr_expect_eq(rc, SBX_E_PROTOCOL, "cut: %d %s", rc, err.message);
    rc = ph_exec_sh(h, "exit 0", &res, &out, &err);
    cr_expect_eq(rc, SBX_OK, "%s", err.message);
    /* a download cut halfway */
    const char *big = "head -c 300000 /dev/zero > big.bin";
    cr_assert_eq(ph_exec_sh(h, big, &res, &out, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(fake_faults(&fake, "[{\"match\":\"/files/download\",\"kind\":\"cut\"}]"), 0);
    sbx_capture f;
    sbx_capture_init(&f, 16, 0);
    struct sbx_sink sink = sbx_capture_sink(&f);
    rc = sbx_read(h, "big.bin", &sink, NULL, &err);
    cr_expect_eq(rc, SBX_E_PROTOCOL, "cut download: %d %s", rc, err.message);
    sbx_capture_free(&f);
    sbx_capture_free(&out);
    destroy(h, "k-cut");
}

Test(opensandbox_provider, vanished_sandbox_is_not_found)
{
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    sbx_handle *h = ph_create(prov, "k-vanish");
    char ref[SBX_REF_MAX];
    snprintf(ref, sizeof ref, "%s", sbx_handle_ref(h));
    cr_assert_eq(fake_faults(&fake, "[{\"match\":\"/files/info\",\"kind\":\"vanish\"}]"), 0);
    sbx_capture out;
    sbx_capture_init(&out, 64, 0);
    struct sbx_sink sink = sbx_capture_sink(&out);
    int rc = sbx_read(h, "x.txt", &sink, NULL, &err);
    cr_expect_eq(rc, SBX_E_NOT_FOUND, "%d %s", rc, err.message);
    cr_expect(strstr(err.message, "no longer exists"), "%s", err.message);
    sbx_capture_free(&out);
    sbx_release(h);
    h = NULL;
    rc = sbx_attach(prov, "k-vanish", ref, NULL, &h, &err);
    cr_expect_eq(rc, SBX_E_NOT_FOUND, "%d %s", rc, err.message);
    cr_expect_eq(sbx_destroy(prov, "k-vanish", ref, NULL, &err), SBX_OK, "%s", err.message);
}

Test(opensandbox_provider, slow_answers_time_out)
{
    sbx_error err;
    cr_assert_eq(open_ctx("    request_timeout_ms: 300\n    retries: 0\n", &err), SBX_OK, "%s",
                 err.message);
    sbx_handle *h = ph_create(prov, "k-slow");
    cr_assert_eq(fake_faults(&fake, "[{\"match\":\"/files/info\",\"kind\":\"slow\","
                                    "\"delay_ms\":1500}]"),
                 0);
    sbx_capture out;
    sbx_capture_init(&out, 64, 0);
    struct sbx_sink sink = sbx_capture_sink(&out);
    int rc = sbx_read(h, "x.txt", &sink, NULL, &err);
    cr_expect_eq(rc, SBX_E_TIMEOUT, "%d %s", rc, err.message);
    sbx_capture_free(&out);
    destroy(h, "k-slow");
}

static void *fire_later(void *arg)
{
    struct timespec ts = {0, 500 * 1000000L};
    nanosleep(&ts, NULL);
    sbx_cancel_fire(arg);
    return NULL;
}

Test(opensandbox_provider, cancel_interrupts_the_command)
{
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    sbx_handle *h = ph_create(prov, "k-cancel");
    sbx_cancel *c = NULL;
    cr_assert_eq(sbx_cancel_new(&c), SBX_OK);
    pthread_t th;
    pthread_create(&th, NULL, fire_later, c);
    struct sbx_exec_result res;
    sbx_capture out;
    sbx_capture_init(&out, 64, 0);
    int rc = ph_exec_sh_cancel(h, "sleep 30", &res, &out, c, &err);
    pthread_join(th, NULL);
    cr_expect_eq(rc, SBX_E_CANCELLED, "%d %s", rc, err.message);
    char *s = fake_stats(&fake);
    cr_expect(strstr(s, "\"method\": \"DELETE\", \"path\": \"/sandboxes/"), "%s", s);
    cr_expect(strstr(s, "/command?id="), "no DELETE /command?id=: %s", s);
    free(s);
    sbx_capture_free(&out);
    sbx_cancel_free(c);
    destroy(h, "k-cancel");
}

Test(opensandbox_provider, paused_sandbox_is_resumed_on_attach)
{
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    sbx_handle *h = ph_create(prov, "k-pause");
    char ref[SBX_REF_MAX], path[256];
    snprintf(ref, sizeof ref, "%s", sbx_handle_ref(h));
    sbx_release(h);
    snprintf(path, sizeof path, "/v1/sandboxes/%s/pause", strchr(ref, ':') + 1);
    long st;
    free(fake_http(&fake, "POST", path, NULL, "OPEN-SANDBOX-API-KEY: " KEY, &st));
    cr_assert_eq(st, 202);
    h = NULL;
    cr_assert_eq(sbx_attach(prov, "k-pause", ref, NULL, &h, &err), SBX_OK, "%s", err.message);
    struct sbx_exec_result res;
    sbx_capture out;
    sbx_capture_init(&out, 64, 0);
    cr_expect_eq(ph_exec_sh(h, "exit 4", &res, &out, &err), SBX_OK, "%s", err.message);
    cr_expect_eq(res.exit_code, 4);
    char *s = fake_stats(&fake);
    cr_expect(strstr(s, "/resume"), "not resumed: %s", s);
    cr_expect(strstr(s, "/renew-expiration"), "expiration not renewed on attach: %s", s);
    free(s);
    sbx_capture_free(&out);
    destroy(h, "k-pause");
}

Test(opensandbox_provider, connections_are_reused)
{
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    sbx_handle *h = ph_create(prov, "k-reuse");
    char *s = fake_stats(&fake);
    int before = atoi(strstr(s, "\"connections\": ") + strlen("\"connections\": "));
    free(s);
    for (int i = 0; i < 30; i++) {
        struct sbx_exec_result res;
        sbx_capture out;
        sbx_capture_init(&out, 64, 0);
        cr_assert_eq(ph_exec_sh(h, "echo x", &res, &out, &err), SBX_OK, "%s", err.message);
        sbx_capture_free(&out);
    }
    s = fake_stats(&fake);
    int after = atoi(strstr(s, "\"connections\": ") + strlen("\"connections\": "));
    free(s);
    cr_expect_leq(after - before, 3, "30 execs opened %d connections", after - before);
    destroy(h, "k-reuse");
}

/* Output text with escapes the event's JSON must carry: quotes,
 * backslashes, control characters, NUL, non-ASCII (the fake escapes it as
 * \uXXXX, astral characters as surrogate pairs). Byte-exact. */
Test(opensandbox_provider, output_text_is_byte_exact)
{
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    sbx_handle *h = ph_create(prov, "k-text");
    struct sbx_exec_result res;
    sbx_capture out;
    sbx_capture_init(&out, 4096, 0);
    int rc = ph_exec_sh(h, "printf 'a\"b\\\\c\\t\\001\\000z \\303\\251 \\360\\237\\230\\200/'", &res, &out,
                 &err);
    cr_expect_eq(rc, SBX_OK, "%s", err.message);
    static const char want[] = "a\"b\\c\t\001\000z \303\251 \360\237\230\200/";
    cr_expect_eq(out.total, sizeof want - 1, "%llu bytes", (unsigned long long)out.total);
    char *t = sbx_capture_text(&out);
    cr_expect(t && !memcmp(t, want, sizeof want - 1), "got %s", t ? t : "?");
    free(t);
    sbx_capture_free(&out);
    destroy(h, "k-text");
}

/* A sandbox of the key made by another worker that crashed before
 * recording it: create finds it by its owner metadata and adopts it. */
Test(opensandbox_provider, create_adopts_the_sandbox_a_crashed_worker_made)
{
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    char hash[SBX_KEY_HASH_LEN + 1], body[1024];
    cr_assert_eq(sbx_key_hash("k-adopt", hash), SBX_OK);
    snprintf(body, sizeof body,
             "{\"image\":{\"uri\":\"ubuntu:22.04\"},\"entrypoint\":[\"tail\",\"-f\",\"/dev/null\"],"
             "\"resourceLimits\":{\"cpu\":\"500m\",\"memory\":\"512Mi\"},\"timeout\":3600,"
             "\"metadata\":{\"sbx.managed\":\"true\",\"sbx.owner\":\"%.63s\"}}",
             hash);
    long st;
    char *made = fake_http(&fake, "POST", "/v1/sandboxes", body,
                           "OPEN-SANDBOX-API-KEY: " KEY, &st);
    cr_assert_eq(st, 202, "%s", made ? made : "?");
    char id[64] = "";
    const char *p = made ? strstr(made, "\"id\": \"") : NULL;
    cr_assert(p && sscanf(p + 7, "%63[^\"]", id) == 1, "%s", made);
    free(made);
    sbx_handle *h = ph_create(prov, "k-adopt");
    cr_expect(strstr(sbx_handle_ref(h), id), "adopted %s, not %s", sbx_handle_ref(h), id);
    char *s = fake_stats(&fake);
    cr_expect(strstr(s, "\"sandboxes\": 1"), "a second sandbox was made: %.300s", s);
    free(s);
    destroy(h, "k-adopt");
}
