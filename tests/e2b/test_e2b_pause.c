/*
 * test_e2b_pause.c - pause and resume (SBX_CAP_PAUSE) of the e2b provider
 * and, built again with SBX_TEST_CUBE, of the cube provider, against the
 * fake (fake_e2b.py): a paused sandbox's processes really stop (SIGSTOP in
 * the fake, as a VM paused with its memory snapshot) and continue after
 * resume; both ops are idempotent and act on the sandbox from any handle;
 * every other op resumes first, with no extra request while it runs;
 * faults: 5xx, a truncated answer, a pause that never finishes (a short
 * configured deadline), resume of a sandbox the service deleted.
 */
#include "fake_service.h"
#include "../support/provider_harness.h"

#include <sbx/sbx.h>

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifdef SBX_TEST_CUBE
#define PROV "cube"
#define MODE "cube"
#define KEY NULL
#define RESUME_PATH "/resume\""
#define SUITE cube_pause
#else
#define PROV "e2b"
#define MODE "e2b"
#define KEY "e2b_test_key_0123"
#define RESUME_PATH "/connect\""
#define SUITE e2b_pause
#endif

static struct fake_service fake;
static char cfgpath[PH_PATH_MAX];
static sbx_ctx *ctx;
static sbx_provider *prov;

static void open_with_retries(const char *extra, int retries)
{
#ifdef SBX_TEST_CUBE
    ph_write_config(cfgpath, "/tmp/sbx-e2b-pause-XXXXXX.yaml",
                    "providers:\n  cube:\n    api_url: \"%s\"\n    template: tpl\n"
                    "    proxy_address: 127.0.0.1\n    proxy_port: %d\n    retries: %d\n%s",
                    fake.url, fake.port, retries, extra ? extra : "");
#else
    ph_write_config(cfgpath, "/tmp/sbx-e2b-pause-XXXXXX.yaml",
                    "providers:\n  e2b:\n    api_url: \"%s\"\n    envd_url: \"%s\"\n"
                    "    domain: e2b.local\n    retries: %d\n%s",
                    fake.url, fake.url, retries, extra ? extra : "");
#endif
    ph_open_ok(cfgpath, PROV, &ctx, &prov);
}

static void open_with(const char *extra)
{
    open_with_retries(extra, 2);
}

static void up(void)
{
    cr_assert_eq(fake_start(&fake, MODE, KEY), 0, "cannot start the fake");
    const char *key = KEY;
    if (key)
        setenv("E2B_API_KEY", key, 1);
}

static void down(void)
{
    ph_close(&ctx, &prov);
    fake_stop(&fake);
    ph_remove_config(cfgpath);
}

TestSuite(SUITE, .init = up, .fini = down, .timeout = 60);

/* The header the fake's control plane wants ("" without a key). */
static void api_key_header(char *buf, size_t cap)
{
    const char *key = KEY;
    snprintf(buf, cap, "%s%s", key ? "X-API-Key: " : "", key ? key : "");
}

/* Size of a workspace file as the fake keeps it on this machine (read
 * beside the provider, so that looking does not resume the sandbox);
 * -1 when absent. */
static long host_size(sbx_handle *h, const char *name)
{
    char pat[512];
    snprintf(pat, sizeof pat, "%s/sbx-fake-%s-*/home/user/workspace/%s", fake.dir, ph_sid(h),
             name);
    return ph_glob_size(pat);
}

/* The control plane's state of the sandbox ("running", "paused"). */
static int fake_state_is(sbx_handle *h, const char *want)
{
    char path[256];
    snprintf(path, sizeof path, "/sandboxes/%s", ph_sid(h));
    long st = 0;
    char hdr[128] = "";
    api_key_header(hdr, sizeof hdr);
    char *doc = fake_http(&fake, "GET", path, NULL, hdr[0] ? hdr : NULL, &st);
    char needle[64];
    snprintf(needle, sizeof needle, "\"state\": \"%s\"", want);
    int ok = doc && st == 200 && strstr(doc, needle);
    free(doc);
    return ok;
}

/* A process writing a line every 20 ms into ticks. */
static void start_ticker(sbx_handle *h, char id[SBX_PROC_ID_MAX])
{
    const char *argv[] = {"sh", "-c", "while :; do echo x >> ticks; sleep 0.02; done", NULL};
    struct sbx_proc_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.size = sizeof spec;
    spec.argv = argv;
    sbx_error err;
    cr_assert_eq(sbx_proc_start(h, &spec, id, NULL, &err), SBX_OK, "%s", err.message);
    for (int i = 0; i < 200 && host_size(h, "ticks") <= 0; i++)
        ph_nap(0.02);
    cr_assert_gt(host_size(h, "ticks"), 0, "the ticker never wrote");
}

Test(SUITE, paused_processes_stop_and_continue_after_resume)
{
    open_with(NULL);
    sbx_handle *h = ph_create(prov, "k-freeze");
    char id[SBX_PROC_ID_MAX];
    start_ticker(h, id);
    sbx_error err;
    cr_assert_eq(sbx_pause(h, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect(fake_state_is(h, "paused"));
    ph_nap(0.1);
    long a = host_size(h, "ticks");
    ph_nap(0.4);
    long b = host_size(h, "ticks");
    cr_expect_eq(a, b, "the ticker ran while paused: %ld then %ld bytes", a, b);
    cr_assert_eq(sbx_resume(h, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect(fake_state_is(h, "running"));
    ph_nap(0.4);
    long c = host_size(h, "ticks");
    cr_expect_gt(c, b, "the ticker did not continue after resume (%ld bytes)", c);
    /* The same process, not a new one: it is still known and signalled. */
    cr_expect_eq(sbx_proc_signal(h, id, 9, NULL, &err), SBX_OK, "%s", err.message);
    sbx_destroy(prov, "k-freeze", sbx_handle_ref(h), NULL, &err);
    sbx_release(h);
}

Test(SUITE, pause_and_resume_are_idempotent_and_act_on_the_sandbox)
{
    open_with(NULL);
    sbx_handle *h = ph_create(prov, "k-idem");
    sbx_handle *h2 = NULL;
    sbx_error err;
    cr_assert_eq(sbx_attach(prov, "k-idem", sbx_handle_ref(h), NULL, &h2, &err), SBX_OK, "%s",
                 err.message);
    cr_expect_eq(sbx_resume(h, NULL, &err), SBX_OK, "resume of a running one: %s",
                 err.message);
    cr_assert_eq(sbx_pause(h, NULL, &err), SBX_OK, "%s", err.message);
    /* Paused already (the service answers 409): what was asked. */
    cr_expect_eq(sbx_pause(h2, NULL, &err), SBX_OK, "second pause: %s", err.message);
    cr_expect_eq(sbx_pause(h, NULL, &err), SBX_OK, "third pause: %s", err.message);
    cr_expect(fake_state_is(h, "paused"));
    /* The other handle resumes what this one paused. */
    cr_expect_eq(sbx_resume(h2, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect(fake_state_is(h, "running"));
    cr_expect_eq(sbx_resume(h2, NULL, &err), SBX_OK, "second resume: %s", err.message);
    sbx_release(h2);
    sbx_destroy(prov, "k-idem", sbx_handle_ref(h), NULL, &err);
    sbx_release(h);
}

/* Every op on a paused sandbox resumes it first: paused by this handle,
 * the resume request comes before the op's own; paused by another, the
 * proxy's answer is followed by one resume and the op repeated. A running
 * sandbox's exec costs no control plane request at all. */
Test(SUITE, ops_resume_a_paused_sandbox_and_the_hot_path_pays_nothing)
{
    open_with(NULL);
    sbx_handle *h = ph_create(prov, "k-trans");
    sbx_error err;
    cr_assert_eq(ph_sh(h, "echo kept > kept.txt", &err), SBX_OK, "%s", err.message);
    cr_assert_eq(sbx_pause(h, NULL, &err), SBX_OK, "%s", err.message);
    fake_reset(&fake);
    cr_expect_eq(ph_sh(h, "test \"$(cat kept.txt)\" = kept", &err), SBX_OK, "exec: %s",
                 err.message);
    char *s = fake_stats(&fake);
    cr_expect_eq(ph_count(s, RESUME_PATH), 1, "one resume: %s", s);
    cr_expect_eq(ph_count(s, "\"GET\", \"path\": \"/sandboxes/"), 0,
                 "no lookup: this handle knew it paused it: %s", s);
    free(s);
    cr_expect(fake_state_is(h, "running"));

    /* Running: exec goes to envd alone. */
    fake_reset(&fake);
    cr_expect_eq(ph_sh(h, "true", &err), SBX_OK, "%s", err.message);
    s = fake_stats(&fake);
    cr_expect_eq(ph_count(s, "\"path\": \"/sandboxes"), 0, "control plane on the hot path: %s", s);
    free(s);

    /* Paused through another handle (another process): a file read, a
     * file op and a process op each find it paused and resume it. */
    sbx_handle *h2 = NULL;
    cr_assert_eq(sbx_attach(prov, "k-trans", sbx_handle_ref(h), NULL, &h2, &err), SBX_OK, "%s",
                 err.message);
    cr_assert_eq(sbx_pause(h2, NULL, &err), SBX_OK, "%s", err.message);
    fake_reset(&fake);
    sbx_capture out;
    sbx_capture_init(&out, 64, 0);
    struct sbx_sink sink = sbx_capture_sink(&out);
    cr_expect_eq(sbx_read(h, "kept.txt", &sink, NULL, &err), SBX_OK, "read: %s", err.message);
    char *t = sbx_capture_text(&out);
    cr_expect_str_eq(t, "kept\n");
    free(t);
    sbx_capture_free(&out);
    s = fake_stats(&fake);
    cr_expect_eq(ph_count(s, RESUME_PATH), 1, "one resume: %s", s);
    free(s);
    cr_assert_eq(sbx_pause(h2, NULL, &err), SBX_OK, "%s", err.message);
    struct sbx_file_info fi;
    memset(&fi, 0, sizeof fi);
    fi.size = sizeof fi;
    cr_expect_eq(sbx_file_stat(h, "kept.txt", &fi, NULL, &err), SBX_OK, "stat: %s",
                 err.message);
    cr_expect(fake_state_is(h, "running"));
    cr_assert_eq(sbx_pause(h2, NULL, &err), SBX_OK, "%s", err.message);
    char id[SBX_PROC_ID_MAX];
    const char *argv[] = {"true", NULL};
    struct sbx_proc_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.size = sizeof spec;
    spec.argv = argv;
    cr_expect_eq(sbx_proc_start(h, &spec, id, NULL, &err), SBX_OK, "proc_start: %s",
                 err.message);
    cr_expect(fake_state_is(h, "running"));
    sbx_release(h2);
    sbx_destroy(prov, "k-trans", sbx_handle_ref(h), NULL, &err);
    sbx_release(h);
}

Test(SUITE, attach_resumes_a_paused_sandbox)
{
    open_with(NULL);
    sbx_handle *h = ph_create(prov, "k-attach");
    sbx_error err;
    cr_assert_eq(sbx_pause(h, NULL, &err), SBX_OK, "%s", err.message);
    sbx_handle *h2 = NULL;
    cr_assert_eq(sbx_attach(prov, "k-attach", sbx_handle_ref(h), NULL, &h2, &err), SBX_OK,
                 "%s", err.message);
    cr_expect_eq(ph_sh(h2, "true", &err), SBX_OK, "%s", err.message);
    cr_expect(fake_state_is(h, "running"));
    sbx_release(h2);
    sbx_destroy(prov, "k-attach", sbx_handle_ref(h), NULL, &err);
    sbx_release(h);
}

Test(SUITE, service_errors_are_retried_then_reported)
{
    open_with(NULL);
    sbx_handle *h = ph_create(prov, "k-5xx");
    sbx_error err;
    /* One 503: the idempotent pause is repeated and succeeds. */
    cr_assert_eq(fake_faults(&fake, "[{\"match\":\"/sandboxes/\",\"kind\":\"status\","
                                    "\"status\":503}]"),
                 0);
    cr_expect_eq(sbx_pause(h, NULL, &err), SBX_OK, "%s", err.message);
    /* A truncated answer to the resume: a protocol error, named. */
    cr_assert_eq(fake_faults(&fake, "[{\"match\":\"/sandboxes/\",\"kind\":\"truncate\"}]"), 0);
    int rc = sbx_resume(h, NULL, &err);
    cr_expect_eq(rc, SBX_E_PROTOCOL, "%d %s", rc, err.message);
    cr_expect(strstr(err.message, "resuming sandbox") && strstr(err.message, "truncated"), "%s",
              err.message);
    /* The sandbox did resume: asking again finds it running. */
    cr_expect_eq(sbx_resume(h, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect(fake_state_is(h, "running"));
    /* 500 every time: reported, naming what was attempted. */
    cr_assert_eq(fake_faults(&fake, "[{\"match\":\"/sandboxes/\",\"kind\":\"status\","
                                    "\"status\":500,\"times\":10}]"),
                 0);
    rc = sbx_pause(h, NULL, &err);
    cr_expect_neq(rc, SBX_OK);
    cr_expect(strstr(err.message, "pausing sandbox") && strstr(err.message, "500"), "%s",
              err.message);
    fake_reset(&fake);
    sbx_destroy(prov, "k-5xx", sbx_handle_ref(h), NULL, &err);
    sbx_release(h);
}

/* A pause the service never finishes ends at the configured deadline. */
Test(SUITE, pause_that_never_finishes_times_out)
{
    open_with_retries("    pause_timeout_ms: 400\n", 0);
    sbx_handle *h = ph_create(prov, "k-stuck");
    sbx_error err;
    cr_assert_eq(fake_faults(&fake, "[{\"match\":\"/sandboxes/\",\"kind\":\"stuck\"}]"), 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = sbx_pause(h, NULL, &err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double took = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    cr_expect_eq(rc, SBX_E_TIMEOUT, "%d %s", rc, err.message);
    cr_expect_lt(took, 3.0, "the deadline of 400 ms took %.1f s", took);
    cr_expect(strstr(err.message, "pausing sandbox"), "%s", err.message);
    sbx_destroy(prov, "k-stuck", sbx_handle_ref(h), NULL, &err);
    sbx_release(h);
}

Test(SUITE, resume_of_a_deleted_sandbox_is_not_found)
{
    open_with(NULL);
    sbx_handle *h = ph_create(prov, "k-gone");
    sbx_error err;
    cr_assert_eq(sbx_pause(h, NULL, &err), SBX_OK, "%s", err.message);
    char path[256], hdr[128] = "";
    snprintf(path, sizeof path, "/sandboxes/%s", ph_sid(h));
    api_key_header(hdr, sizeof hdr);
    long st = 0;
    free(fake_http(&fake, "DELETE", path, NULL, hdr[0] ? hdr : NULL, &st));
    cr_assert_eq(st, 204);
    int rc = sbx_resume(h, NULL, &err);
    cr_expect_eq(rc, SBX_E_NOT_FOUND, "%d %s", rc, err.message);
    cr_expect(strstr(err.message, "no longer exists"), "%s", err.message);
    rc = sbx_pause(h, NULL, &err);
    cr_expect_eq(rc, SBX_E_NOT_FOUND, "%d %s", rc, err.message);
    cr_expect(strstr(err.message, "no longer exists"), "%s", err.message);
    /* The next op also says so (its transparent resume found it gone). */
    rc = ph_sh(h, "true", &err);
    cr_expect_eq(rc, SBX_E_NOT_FOUND, "%d %s", rc, err.message);
    sbx_release(h);
}

/* SBX_CAP_POOL: a sandbox made under one key is found by its key_hash
 * alone, and nothing of the creating key reaches its commands. */
Test(SUITE, pooled_sandbox_carries_only_the_key_hash)
{
    open_with(NULL);
    const char *secret = "pool-member-key-0123456789";
    sbx_handle *h = ph_create(prov, secret);
    sbx_error err;
    char cmd[256];
    snprintf(cmd, sizeof cmd, "! env | grep -q %s", secret);
    cr_expect_eq(ph_sh(h, cmd, &err), SBX_OK, "the key reached the sandbox: %s", err.message);
    char path[256], hdr[128] = "";
    snprintf(path, sizeof path, "/sandboxes/%s", ph_sid(h));
    api_key_header(hdr, sizeof hdr);
    long st = 0;
    char *doc = fake_http(&fake, "GET", path, NULL, hdr[0] ? hdr : NULL, &st);
    cr_expect(doc && !strstr(doc, secret), "the key is in the metadata: %s", doc);
    free(doc);
    /* Paused while it waits in the pool, then claimed: attach resumes. */
    cr_assert_eq(sbx_pause(h, NULL, &err), SBX_OK, "%s", err.message);
    sbx_handle *h2 = NULL;
    cr_expect_eq(sbx_attach(prov, secret, sbx_handle_ref(h), NULL, &h2, &err), SBX_OK, "%s",
                 err.message);
    cr_expect(fake_state_is(h, "running"));
    sbx_release(h2);
    h2 = NULL;
    cr_expect_eq(sbx_attach(prov, "another-key", sbx_handle_ref(h), NULL, &h2, &err),
                 SBX_E_DENIED);
    sbx_destroy(prov, secret, sbx_handle_ref(h), NULL, &err);
    sbx_release(h);
}
