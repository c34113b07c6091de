/*
 * test_daytona_provider.c - the daytona provider through libsbx against
 * the fake (fake_daytona.py): credentials and their errors, the create
 * request (deterministic name, ownership labels, auto-stop, network
 * blocked, snapshot or image), idempotence across instances, a foreign
 * sandbox holding the name, start on attach, a sandbox stuck pending,
 * retries of idempotent calls only, faults (5xx, slow answers, cut
 * streams, sandboxes that vanish), destroy waiting for the deletion and
 * connection reuse.
 */
#include "fake_daytona.h"
#include "../support/provider_harness.h"

#include <sbx/sbx.h>

#include <criterion/criterion.h>

#include <pthread.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KEY "dt_test_key_0123"

static struct fake_service fake;
static char cfgpath[PH_PATH_MAX];
static sbx_ctx *ctx;
static sbx_provider *prov;

static void up(void)
{
    cr_assert_eq(fake_daytona_start(&fake, KEY), 0, "cannot start the fake");
    setenv("DAYTONA_API_KEY", KEY, 1);
}

static void close_ctx(void)
{
    ph_close(&ctx, &prov);
    ph_remove_config(cfgpath);
}

static void down(void)
{
    close_ctx();
    fake_stop(&fake);
}

/* Open a context whose daytona section points at the fake, plus extra
 * lines. */
static int open_ctx(const char *extra, sbx_error *err)
{
    ph_write_config(cfgpath, "/tmp/sbx-dt-test-XXXXXX",
                    "providers:\n  daytona:\n    api_url: \"%s/api\"\n    retries: 3\n%s",
                    fake.url, extra ? extra : "");
    return ph_open(cfgpath, "daytona", true, &ctx, &prov, err);
}

/* The sandbox id of a reference "daytona:<id>". */
static const char *ref_id(const char *ref)
{
    return strchr(ref, ':') + 1;
}

TestSuite(daytona_provider, .init = up, .fini = down, .timeout = 120);

Test(daytona_provider, missing_key_is_a_config_error_naming_the_variable)
{
    unsetenv("DAYTONA_API_KEY");
    sbx_error err;
    int rc = open_ctx(NULL, &err);
    cr_expect_eq(rc, SBX_E_CONFIG, "%d %s", rc, err.message);
    cr_expect(strstr(err.message, "DAYTONA_API_KEY"), "%s", err.message);
}

Test(daytona_provider, rejected_key_names_the_variable_not_the_value)
{
    setenv("DAYTONA_API_KEY", "wrong_secret_value", 1);
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    sbx_handle *h = NULL;
    int rc = ph_try_create(prov, "k1", &h, &err);
    cr_expect_eq(rc, SBX_E_CONFIG, "%d %s", rc, err.message);
    cr_expect(strstr(err.message, "DAYTONA_API_KEY"), "%s", err.message);
    cr_expect_null(strstr(err.message, "wrong_secret_value"), "%s", err.message);
}

Test(daytona_provider, create_request_name_labels_network_and_autostop)
{
    sbx_error err;
    cr_assert_eq(open_ctx("    snapshot: snap-1\n    auto_stop_minutes: 7\n    target: eu\n", &err),
                 SBX_OK, "%s", err.message);
    sbx_handle *h = ph_create(prov, "session-key-secret");
    char hash[SBX_KEY_HASH_LEN + 1], name[64];
    cr_assert_eq(sbx_key_hash("session-key-secret", hash), SBX_OK);
    snprintf(name, sizeof name, "\"name\": \"sbx-%.32s\"", hash);
    char *s = fake_stats(&fake);
    cr_expect(strstr(s, name), "no deterministic name %s in %.2000s", name, s);
    char owner[128];
    snprintf(owner, sizeof owner, "\"sbx.owner\": \"%s\"", hash);
    cr_expect(strstr(s, owner), "owner label not sent");
    cr_expect(strstr(s, "\"sbx.managed\": \"true\""), "managed label not sent");
    cr_expect(strstr(s, "\"networkBlockAll\": true"), "network not blocked");
    cr_expect(strstr(s, "\"autoStopInterval\": 7"), "auto-stop not sent");
    cr_expect(strstr(s, "\"snapshot\": \"snap-1\""), "snapshot not sent");
    cr_expect(strstr(s, "\"target\": \"eu\""), "target not sent");
    cr_expect_null(strstr(s, "session-key-secret"), "the session key was sent");
    cr_expect_null(strstr(s, KEY), "the API key landed in a request body");
    free(s);
    /* idempotent: a second create, and one from a new instance after the
     * first "crashed" (handle dropped, no destroy), adopt the same one */
    char ref[SBX_REF_MAX];
    snprintf(ref, sizeof ref, "%s", sbx_handle_ref(h));
    sbx_handle *h2 = ph_create(prov, "session-key-secret");
    cr_expect_str_eq(sbx_handle_ref(h2), ref);
    sbx_release(h2);
    sbx_release(h);
    close_ctx();
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    fake_reset(&fake);
    h = ph_create(prov, "session-key-secret");
    cr_expect_str_eq(sbx_handle_ref(h), ref);
    s = fake_stats(&fake);
    cr_expect_eq(ph_count(s, "\"method\": \"POST\", \"path\": \"/api/sandbox\""), 0,
                 "a second sandbox was requested: %.2000s", s);
    free(s);
    cr_expect_eq(sbx_destroy(prov, "session-key-secret", ref, NULL, &err), SBX_OK, "%s",
                 err.message);
    /* destroy waited for the deletion: the sandbox is gone now */
    s = fake_stats(&fake);
    cr_expect(strstr(s, "\"sandboxes\": 0"), "sandbox still there after destroy");
    free(s);
    sbx_release(h);
}

Test(daytona_provider, network_and_image_settings)
{
    sbx_error err;
    cr_assert_eq(open_ctx("    network: true\n    image: \"debian:bookworm-slim\"\n", &err),
                 SBX_OK, "%s", err.message);
    sbx_handle *h = ph_create(prov, "k-img");
    char *s = fake_stats(&fake);
    cr_expect(strstr(s, "\"networkBlockAll\": false"), "network blocked although asked for");
    cr_expect(strstr(s, "\"dockerfileContent\": \"FROM debian:bookworm-slim\\n\""),
              "no build from the image: %.2000s", s);
    free(s);
    sbx_destroy(prov, "k-img", sbx_handle_ref(h), NULL, &err);
    sbx_release(h);
}

Test(daytona_provider, snapshot_and_image_together_are_refused)
{
    sbx_error err;
    int rc = open_ctx("    snapshot: a\n    image: b\n", &err);
    cr_expect_eq(rc, SBX_E_CONFIG, "%d %s", rc, err.message);
    cr_expect(strstr(err.message, "snapshot or image"), "%s", err.message);
}

Test(daytona_provider, a_foreign_sandbox_with_the_name_is_denied)
{
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    char hash[SBX_KEY_HASH_LEN + 1], body[256], auth[64];
    cr_assert_eq(sbx_key_hash("k-foreign", hash), SBX_OK);
    snprintf(body, sizeof body, "{\"name\":\"sbx-%.32s\",\"labels\":{\"team\":\"other\"}}", hash);
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", KEY);
    long st;
    free(fake_http(&fake, "POST", "/api/sandbox", body, auth, &st));
    cr_assert_eq(st, 200);
    sbx_handle *h = NULL;
    int rc = ph_try_create(prov, "k-foreign", &h, &err);
    cr_expect_eq(rc, SBX_E_DENIED, "%d %s", rc, err.message);
    cr_expect(strstr(err.message, "labels"), "%s", err.message);
}

Test(daytona_provider, attach_starts_a_stopped_or_paused_sandbox)
{
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    const char *states[] = {"stopped", "paused"};
    for (int i = 0; i < 2; i++) {
        sbx_handle *h = ph_create(prov, "k-stop");
        char ref[SBX_REF_MAX], body[256];
        snprintf(ref, sizeof ref, "%s", sbx_handle_ref(h));
        sbx_release(h);
        snprintf(body, sizeof body, "{\"id\":\"%s\",\"state\":\"%s\"}", ref_id(ref), states[i]);
        free(fake_http(&fake, "POST", "/_fake/state", body, NULL, NULL));
        fake_reset(&fake);
        h = NULL;
        cr_assert_eq(sbx_attach(prov, "k-stop", ref, NULL, &h, &err), SBX_OK, "%s: %s",
                     states[i], err.message);
        char *s = fake_stats(&fake);
        cr_expect_eq(ph_count(s, "/start\""), 1, "%s: not started once: %.1500s", states[i], s);
        free(s);
        struct sbx_exec_result res;
        sbx_capture out;
        sbx_capture_init(&out, 64, 0);
        cr_expect_eq(ph_exec_sh(h, "echo up", &res, &out, &err), SBX_OK, "%s", err.message);
        char *t = sbx_capture_text(&out);
        cr_expect_str_eq(t, "up\n");
        free(t);
        sbx_capture_free(&out);
        /* another key may not attach */
        sbx_handle *o = NULL;
        cr_expect_eq(sbx_attach(prov, "k-other", ref, NULL, &o, &err), SBX_E_DENIED, "%s",
                     err.message);
        cr_expect_eq(sbx_destroy(prov, "k-stop", ref, NULL, &err), SBX_OK, "%s", err.message);
        sbx_release(h);
    }
}

Test(daytona_provider, a_sandbox_stuck_pending_times_out_naming_its_state)
{
    sbx_error err;
    cr_assert_eq(open_ctx("    start_timeout_ms: 800\n", &err), SBX_OK, "%s", err.message);
    cr_assert_eq(fake_faults(&fake, "[{\"match\":\"/sandbox\",\"kind\":\"stuck\"}]"), 0);
    sbx_handle *h = NULL;
    int rc = ph_try_create(prov, "k-stuck", &h, &err);
    cr_expect_eq(rc, SBX_E_TIMEOUT, "%d %s", rc, err.message);
    cr_expect(strstr(err.message, "pending_build"), "%s", err.message);
}

Test(daytona_provider, transient_failures_are_retried_for_idempotent_calls_only)
{
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    /* the lookup by name (GET) fails twice with 503, then works */
    cr_assert_eq(fake_faults(&fake, "[{\"match\":\"/api/sandbox/\",\"kind\":\"status\","
                                    "\"status\":503,\"times\":2}]"),
                 0);
    sbx_handle *h = ph_create(prov, "k-retry");
    /* an idempotent toolbox call (permissions) is repeated too */
    cr_assert_eq(fake_faults(&fake, "[{\"match\":\"/toolbox/files/permissions\",\"kind\":"
                                    "\"status\",\"status\":502,\"times\":2}]"),
                 0);
    struct sbx_memory_source m = {(const unsigned char *)"abc", 3, 0};
    struct sbx_source src = sbx_memory_source(&m);
    cr_expect_eq(sbx_write(h, "f.txt", &src, 0644, NULL, &err), SBX_OK, "%s", err.message);
    /* running a command is not: one 502 on the session exec fails it */
    fake_reset(&fake);
    cr_assert_eq(fake_faults(&fake, "[{\"match\":\"/toolbox/process/session/\",\"kind\":"
                                    "\"status\",\"status\":502}]"),
                 0);
    struct sbx_exec_result res;
    sbx_capture out;
    sbx_capture_init(&out, 64, 0);
    int rc = ph_exec_sh(h, "echo once >> ran.txt", &res, &out, &err);
    cr_expect_eq(rc, SBX_E_UNAVAILABLE, "%d %s", rc, err.message);
    cr_expect(strstr(err.message, "502"), "%s", err.message);
    sbx_capture_free(&out);
    sbx_capture_init(&out, 64, 0);
    cr_expect_eq(ph_exec_sh(h, "cat ran.txt 2>/dev/null; true", &res, &out, &err), SBX_OK, "%s",
                 err.message);
    char *t = sbx_capture_text(&out);
    cr_expect_str_eq(t, "", "the failed command ran anyway: %s", t);
    free(t);
    sbx_capture_free(&out);
    /* POST /sandbox is not retried: one 502 fails the create */
    cr_assert_eq(fake_faults(&fake, "[{\"match\":\"/api/sandbox\",\"kind\":\"status\","
                                    "\"method\":\"POST\",\"status\":502,\"body\":{\"statusCode\":502,\"message\":"
                                    "\"bad gateway\"}}]"),
                 0);
    sbx_handle *h2 = NULL;
    rc = ph_try_create(prov, "k-post", &h2, &err);
    cr_expect_eq(rc, SBX_E_UNAVAILABLE, "%d %s", rc, err.message);
    cr_expect(strstr(err.message, "502"), "%s", err.message);
    sbx_destroy(prov, "k-retry", sbx_handle_ref(h), NULL, &err);
    sbx_release(h);
}

Test(daytona_provider, cut_streams_are_protocol_errors)
{
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    sbx_handle *h = ph_create(prov, "k-cut");
    cr_assert_eq(fake_faults(&fake, "[{\"match\":\"/toolbox/files/download\",\"kind\":\"cut\","
                                    "\"min_size\":100000}]"),
                 0);
    struct sbx_exec_result res;
    sbx_capture out;
    sbx_capture_init(&out, 4096, 0);
    int rc = ph_exec_sh(h, "head -c 1000000 /dev/zero", &res, &out, &err);
    cr_expect_eq(rc, SBX_E_PROTOCOL, "exec: %d %s", rc, err.message);
    sbx_capture_free(&out);
    sbx_capture_init(&out, 64, 0);
    cr_expect_eq(ph_exec_sh(h, "head -c 1000000 /dev/zero > big.bin", &res, &out, &err), SBX_OK, "%s",
                 err.message);
    sbx_capture_free(&out);
    cr_assert_eq(fake_faults(&fake, "[{\"match\":\"/toolbox/files/download\",\"kind\":\"cut\","
                                    "\"min_size\":100000}]"),
                 0);
    sbx_capture_init(&out, 64, 0);
    struct sbx_sink sink = sbx_capture_sink(&out);
    rc = sbx_read(h, "big.bin", &sink, NULL, &err);
    cr_expect_eq(rc, SBX_E_PROTOCOL, "read: %d %s", rc, err.message);
    sbx_capture_free(&out);
    /* and the next command works again */
    sbx_capture_init(&out, 64, 0);
    cr_expect_eq(ph_exec_sh(h, "exit 0", &res, &out, &err), SBX_OK, "%s", err.message);
    sbx_capture_free(&out);
    sbx_destroy(prov, "k-cut", sbx_handle_ref(h), NULL, &err);
    sbx_release(h);
}

Test(daytona_provider, vanished_sandbox_is_not_found)
{
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    sbx_handle *h = ph_create(prov, "k-vanish");
    char ref[SBX_REF_MAX];
    snprintf(ref, sizeof ref, "%s", sbx_handle_ref(h));
    cr_assert_eq(fake_faults(&fake, "[{\"match\":\"/toolbox/process/session\",\"kind\":"
                                    "\"vanish\"}]"),
                 0);
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

Test(daytona_provider, slow_answers_time_out)
{
    sbx_error err;
    cr_assert_eq(open_ctx("    request_timeout_ms: 300\n", &err), SBX_OK, "%s", err.message);
    sbx_handle *h = ph_create(prov, "k-slow");
    cr_assert_eq(fake_faults(&fake, "[{\"match\":\"/toolbox/process/session\","
                                    "\"kind\":\"slow\",\"delay_ms\":1500}]"),
                 0);
    sbx_capture out;
    sbx_capture_init(&out, 64, 0);
    struct sbx_sink sink = sbx_capture_sink(&out);
    int rc = sbx_read(h, "x.txt", &sink, NULL, &err);
    cr_expect_eq(rc, SBX_E_TIMEOUT, "%d %s", rc, err.message);
    sbx_capture_free(&out);
    sbx_destroy(prov, "k-slow", sbx_handle_ref(h), NULL, &err);
    sbx_release(h);
}

Test(daytona_provider, connections_are_reused)
{
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    sbx_handle *h = ph_create(prov, "k-reuse");
    char *s = fake_stats(&fake);
    int before = atoi(strstr(s, "\"connections\": ") + strlen("\"connections\": "));
    free(s);
    for (int i = 0; i < 20; i++) {
        struct sbx_exec_result res;
        sbx_capture out;
        sbx_capture_init(&out, 64, 0);
        cr_assert_eq(ph_exec_sh(h, "echo x", &res, &out, &err), SBX_OK, "%s", err.message);
        sbx_capture_free(&out);
    }
    s = fake_stats(&fake);
    int after = atoi(strstr(s, "\"connections\": ") + strlen("\"connections\": "));
    free(s);
    cr_expect_leq(after - before, 3, "20 execs (120 requests) opened %d connections",
                  after - before);
    sbx_destroy(prov, "k-reuse", sbx_handle_ref(h), NULL, &err);
    sbx_release(h);
}

/* Stopped under a held handle (auto-stop after idling): the next command
 * starts it first (SBX_CAP_PAUSE's transparent resume) and runs. */
Test(daytona_provider, a_stopped_sandbox_under_a_held_handle_is_started_by_the_next_command)
{
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    sbx_handle *h = ph_create(prov, "k-idle");
    char ref[SBX_REF_MAX], body[256];
    snprintf(ref, sizeof ref, "%s", sbx_handle_ref(h));
    /* it stopped on its own (auto-stop after idling) */
    snprintf(body, sizeof body, "{\"id\":\"%s\",\"state\":\"stopped\"}", ref_id(ref));
    free(fake_http(&fake, "POST", "/_fake/state", body, NULL, NULL));
    struct sbx_exec_result res;
    sbx_capture out;
    sbx_capture_init(&out, 64, 0);
    int rc = ph_exec_sh(h, "echo x", &res, &out, &err);
    cr_expect_eq(rc, SBX_OK, "%d %s", rc, err.message);
    cr_expect_eq(res.exit_code, 0);
    sbx_capture_free(&out);
    /* stopped again: attaching again starts it as well */
    free(fake_http(&fake, "POST", "/_fake/state", body, NULL, NULL));
    sbx_release(h);
    /* attaching again starts it */
    h = NULL;
    cr_assert_eq(sbx_attach(prov, "k-idle", ref, NULL, &h, &err), SBX_OK, "%s", err.message);
    sbx_capture_init(&out, 64, 0);
    cr_expect_eq(ph_exec_sh(h, "echo x", &res, &out, &err), SBX_OK, "%s", err.message);
    sbx_capture_free(&out);
    cr_expect_eq(sbx_destroy(prov, "k-idle", ref, NULL, &err), SBX_OK, "%s", err.message);
    sbx_release(h);
}

Test(daytona_provider, shared_directories_fall_back_to_the_sandbox_user)
{
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    /* a toolbox without the rights to make /mnt/session/outputs: the
     * provider tries as the sandbox user (sudo -n), which cannot either in
     * the fake, and says what both attempts gave */
    cr_assert_eq(fake_faults(&fake, "[{\"match\":\"/toolbox/files/folder\",\"kind\":\"status\","
                                    "\"query\":\"/mnt/session\",\"status\":400,\"body\":{\"statusCode\":400,"
                                    "\"message\":\"mkdir /mnt/session: permission denied\"}}]"),
                 0);
    sbx_handle *h = NULL;
    int rc = ph_try_create(prov, "k-norights", &h, &err);
    cr_expect_eq(rc, SBX_E_IO, "%d %s", rc, err.message);
    cr_expect(strstr(err.message, "/mnt/session/outputs"), "%s", err.message);
    cr_expect(strstr(err.message, "permission denied"), "%s", err.message);
    char *s = fake_stats(&fake);
    cr_expect(strstr(s, "sudo -n mkdir"), "no attempt as the sandbox user");
    free(s);
}

/* Two instances (two contexts, as two workers) creating one key at once. */
struct racer {
    sbx_provider *p;
    char ref[SBX_REF_MAX];
    int rc;
    char msg[sizeof(((sbx_error *)0)->message)];
};

static void *race(void *arg)
{
    struct racer *r = arg;
    sbx_error err;
    sbx_handle *h = NULL;
    struct sbx_create_options co = {sizeof co, NULL, 0, NULL, NULL, NULL};
    r->rc = sbx_create(r->p, "k-race", &co, NULL, &h, &err);
    snprintf(r->msg, sizeof r->msg, "%s", err.message);
    if (r->rc == SBX_OK)
        snprintf(r->ref, sizeof r->ref, "%s", sbx_handle_ref(h));
    sbx_release(h);
    return NULL;
}

Test(daytona_provider, racing_creates_end_with_one_sandbox)
{
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    sbx_ctx *ctx2 = NULL;
    sbx_provider *p2 = NULL;
    char path[128];
    snprintf(path, sizeof path, "%s", cfgpath);
    struct sbx_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.config_path = path;
    o.plugin_path = SBX_TEST_PROVIDER_DIR;
    o.ignore_environment = true;
    cr_assert_eq(sbx_open(&o, &ctx2, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(sbx_provider_lookup(ctx2, "daytona", &p2, &err), SBX_OK, "%s", err.message);
    struct racer a = {prov, "", -1, ""}, b = {p2, "", -1, ""};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, race, &a);
    pthread_create(&tb, NULL, race, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    cr_expect_eq(a.rc, SBX_OK, "%s", a.msg);
    cr_expect_eq(b.rc, SBX_OK, "%s", b.msg);
    cr_expect_str_eq(a.ref, b.ref);
    char *s = fake_stats(&fake);
    cr_expect(strstr(s, "\"sandboxes\": 1"), "not exactly one sandbox: %.300s", s);
    free(s);
    cr_expect_eq(sbx_destroy(prov, "k-race", a.ref, NULL, &err), SBX_OK, "%s", err.message);
    sbx_close(ctx2);
}

Test(daytona_provider, text_that_is_not_utf8_is_refused_up_front)
{
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    sbx_handle *h = ph_create(prov, "k-latin1");
    /* commands and names travel as JSON text: Latin-1 cannot */
    struct sbx_memory_source m = {(const unsigned char *)"latin", 5, 0};
    struct sbx_source src = sbx_memory_source(&m);
    int rc = sbx_write(h, "caf\xe9.txt", &src, 0644, NULL, &err);
    cr_expect_eq(rc, SBX_E_INVALID, "%d %s", rc, err.message);
    cr_expect(strstr(err.message, "UTF-8"), "%s", err.message);
    struct sbx_exec_result res;
    sbx_capture out;
    sbx_capture_init(&out, 64, 0);
    rc = ph_exec_sh(h, "echo caf\xe9", &res, &out, &err);
    cr_expect_eq(rc, SBX_E_INVALID, "%d %s", rc, err.message);
    cr_expect(strstr(err.message, "argument 2"), "%s", err.message);
    sbx_capture_free(&out);
    /* and UTF-8 names work */
    m.pos = 0;
    cr_expect_eq(sbx_write(h, "caf\xc3\xa9.txt", &src, 0644, NULL, &err), SBX_OK, "%s",
                 err.message);
    sbx_capture_init(&out, 64, 0);
    cr_expect_eq(ph_exec_sh(h, "cat caf\xc3\xa9.txt", &res, &out, &err), SBX_OK, "%s", err.message);
    char *t = sbx_capture_text(&out);
    cr_expect_str_eq(t, "latin");
    free(t);
    sbx_capture_free(&out);
    sbx_destroy(prov, "k-latin1", sbx_handle_ref(h), NULL, &err);
    sbx_release(h);
}
