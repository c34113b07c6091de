/*
 * test_daytona_pause.c - pause and resume (SBX_CAP_PAUSE) of the daytona
 * provider as stop and start, against the fake (fake_daytona.py): the
 * stopped sandbox's processes end and its workspace stays; both ops are
 * idempotent and act on the sandbox from any handle; every other op starts
 * a stopped sandbox first, with no extra request while it runs; faults:
 * 5xx, a truncated answer, a sandbox that stays "stopping" (a short
 * configured deadline), resume of a sandbox the service deleted.
 */
#include "fake_daytona.h"
#include "../support/provider_harness.h"

#include <sbx/sbx.h>

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define KEY "dt_test_key_0123"
#define AUTH "Authorization: Bearer " KEY

static struct fake_service fake;
static char cfgpath[PH_PATH_MAX];
static sbx_ctx *ctx;
static sbx_provider *prov;

static void open_with(const char *extra, int retries)
{
    ph_write_config(cfgpath, "/tmp/sbx-dt-pause-XXXXXX.yaml",
                    "providers:\n  daytona:\n    api_url: \"%s/api\"\n    retries: %d\n%s",
                    fake.url, retries, extra ? extra : "");
    ph_open_ok(cfgpath, "daytona", &ctx, &prov);
}

static void up(void)
{
    cr_assert_eq(fake_daytona_start(&fake, KEY), 0, "cannot start the fake");
    setenv("DAYTONA_API_KEY", KEY, 1);
}

static void down(void)
{
    ph_close(&ctx, &prov);
    fake_stop(&fake);
    ph_remove_config(cfgpath);
}

TestSuite(daytona_pause, .init = up, .fini = down, .timeout = 60);

/* Size of a workspace file as the fake keeps it (one sandbox per test),
 * read beside the provider so that looking does not start it; -1 when
 * absent. */
static long host_size(const char *name)
{
    char pat[512];
    snprintf(pat, sizeof pat, "%s/sbx-fake-daytona-*/home/daytona/workspace/%s", fake.dir,
             name);
    return ph_glob_size(pat);
}

static int state_is(sbx_handle *h, const char *want)
{
    char path[256];
    snprintf(path, sizeof path, "/api/sandbox/%s", ph_sid(h));
    long st = 0;
    char *doc = fake_http(&fake, "GET", path, NULL, AUTH, &st);
    char needle[64];
    snprintf(needle, sizeof needle, "\"state\": \"%s\"", want);
    int ok = doc && st == 200 && strstr(doc, needle);
    free(doc);
    return ok;
}

Test(daytona_pause, stop_ends_processes_and_keeps_the_workspace)
{
    open_with(NULL, 2);
    sbx_handle *h = ph_create(prov, "k-stop");
    sbx_error err;
    cr_assert_eq(ph_sh(h, "echo kept > kept.txt", &err), SBX_OK, "%s", err.message);
    const char *argv[] = {"sh", "-c", "while :; do echo x >> ticks; sleep 0.02; done", NULL};
    struct sbx_proc_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.size = sizeof spec;
    spec.argv = argv;
    char id[SBX_PROC_ID_MAX];
    cr_assert_eq(sbx_proc_start(h, &spec, id, NULL, &err), SBX_OK, "%s", err.message);
    for (int i = 0; i < 200 && host_size("ticks") <= 0; i++)
        ph_nap(0.02);
    cr_assert_gt(host_size("ticks"), 0, "the ticker never wrote");
    cr_assert_eq(sbx_pause(h, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect(state_is(h, "stopped"));
    ph_nap(0.1);
    long a = host_size("ticks");
    ph_nap(0.3);
    cr_expect_eq(host_size("ticks"), a, "the ticker ran while stopped");
    cr_assert_eq(sbx_resume(h, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect(state_is(h, "started"));
    ph_nap(0.3);
    /* Stop semantics: the process ended with the stop. */
    cr_expect_eq(host_size("ticks"), a, "the ticker survived a stop");
    cr_expect_eq(ph_sh(h, "test \"$(cat kept.txt)\" = kept", &err), SBX_OK,
                 "the workspace did not survive: %s", err.message);
    sbx_destroy(prov, "k-stop", sbx_handle_ref(h), NULL, &err);
    sbx_release(h);
}

Test(daytona_pause, pause_and_resume_are_idempotent_from_any_handle)
{
    open_with(NULL, 2);
    sbx_handle *h = ph_create(prov, "k-idem");
    sbx_handle *h2 = NULL;
    sbx_error err;
    cr_assert_eq(sbx_attach(prov, "k-idem", sbx_handle_ref(h), NULL, &h2, &err), SBX_OK, "%s",
                 err.message);
    cr_expect_eq(sbx_resume(h, NULL, &err), SBX_OK, "resume of a running one: %s",
                 err.message);
    cr_assert_eq(sbx_pause(h, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect_eq(sbx_pause(h2, NULL, &err), SBX_OK, "second pause: %s", err.message);
    cr_expect(state_is(h, "stopped"));
    cr_expect_eq(sbx_resume(h2, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect(state_is(h, "started"));
    cr_expect_eq(sbx_resume(h, NULL, &err), SBX_OK, "second resume: %s", err.message);
    sbx_release(h2);
    sbx_destroy(prov, "k-idem", sbx_handle_ref(h), NULL, &err);
    sbx_release(h);
}

Test(daytona_pause, ops_start_a_stopped_sandbox_and_the_hot_path_pays_nothing)
{
    open_with(NULL, 2);
    sbx_handle *h = ph_create(prov, "k-trans");
    sbx_error err;
    cr_assert_eq(ph_sh(h, "echo kept > kept.txt", &err), SBX_OK, "%s", err.message);
    cr_assert_eq(sbx_pause(h, NULL, &err), SBX_OK, "%s", err.message);
    fake_reset(&fake);
    cr_expect_eq(ph_sh(h, "test \"$(cat kept.txt)\" = kept", &err), SBX_OK, "exec: %s",
                 err.message);
    char *s = fake_stats(&fake);
    cr_expect_eq(ph_count(s, "/start\""), 1, "one start: %s", s);
    free(s);
    cr_expect(state_is(h, "started"));

    fake_reset(&fake);
    cr_expect_eq(ph_sh(h, "true", &err), SBX_OK, "%s", err.message);
    s = fake_stats(&fake);
    cr_expect_eq(ph_count(s, "\"path\": \"/api/"), 0, "the API on the hot path: %s", s);
    free(s);

    /* Stopped through another handle (another process, or auto-stop). */
    sbx_handle *h2 = NULL;
    cr_assert_eq(sbx_attach(prov, "k-trans", sbx_handle_ref(h), NULL, &h2, &err), SBX_OK, "%s",
                 err.message);
    cr_assert_eq(sbx_pause(h2, NULL, &err), SBX_OK, "%s", err.message);
    sbx_capture out;
    sbx_capture_init(&out, 64, 0);
    struct sbx_sink sink = sbx_capture_sink(&out);
    cr_expect_eq(sbx_read(h, "kept.txt", &sink, NULL, &err), SBX_OK, "read: %s", err.message);
    char *t = sbx_capture_text(&out);
    cr_expect_str_eq(t, "kept\n");
    free(t);
    sbx_capture_free(&out);
    cr_assert_eq(sbx_pause(h2, NULL, &err), SBX_OK, "%s", err.message);
    struct sbx_file_info fi;
    memset(&fi, 0, sizeof fi);
    fi.size = sizeof fi;
    cr_expect_eq(sbx_file_stat(h, "kept.txt", &fi, NULL, &err), SBX_OK, "stat: %s",
                 err.message);
    cr_assert_eq(sbx_pause(h2, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect_eq(ph_sh(h, "true", &err), SBX_OK, "exec: %s", err.message);
    cr_expect(state_is(h, "started"));
    sbx_release(h2);
    sbx_destroy(prov, "k-trans", sbx_handle_ref(h), NULL, &err);
    sbx_release(h);
}

Test(daytona_pause, service_errors_are_reported_naming_the_step)
{
    open_with(NULL, 2);
    sbx_handle *h = ph_create(prov, "k-5xx");
    sbx_error err;
    /* One 503 on stop: the idempotent call is repeated. */
    cr_assert_eq(fake_faults(&fake, "[{\"match\":\"/api/sandbox/\",\"kind\":\"status\","
                                    "\"status\":503,\"method\":\"POST\"}]"),
                 0);
    cr_expect_eq(sbx_pause(h, NULL, &err), SBX_OK, "%s", err.message);
    /* A truncated answer to start, every time: reported. */
    cr_assert_eq(fake_faults(&fake, "[{\"match\":\"/api/sandbox/\",\"kind\":\"truncate\","
                                    "\"method\":\"POST\",\"times\":10}]"),
                 0);
    int rc = sbx_resume(h, NULL, &err);
    cr_expect_neq(rc, SBX_OK, "a truncated answer was accepted");
    cr_expect(strstr(err.message, "starting sandbox"), "%s", err.message);
    fake_reset(&fake);
    cr_expect_eq(sbx_resume(h, NULL, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(fake_faults(&fake, "[{\"match\":\"/api/sandbox/\",\"kind\":\"status\","
                                    "\"status\":500,\"method\":\"POST\",\"times\":10}]"),
                 0);
    rc = sbx_pause(h, NULL, &err);
    cr_expect_neq(rc, SBX_OK);
    cr_expect(strstr(err.message, "stopping sandbox") && strstr(err.message, "500"), "%s",
              err.message);
    fake_reset(&fake);
    sbx_destroy(prov, "k-5xx", sbx_handle_ref(h), NULL, &err);
    sbx_release(h);
}

Test(daytona_pause, sandbox_that_stays_stopping_times_out)
{
    open_with("    start_timeout_ms: 500\n", 2);
    sbx_handle *h = ph_create(prov, "k-stuck");
    sbx_error err;
    cr_assert_eq(fake_faults(&fake, "[{\"match\":\"/api/sandbox/\",\"kind\":\"stuck_stop\"}]"),
                 0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = sbx_pause(h, NULL, &err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double took = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    cr_expect_eq(rc, SBX_E_TIMEOUT, "%d %s", rc, err.message);
    cr_expect_lt(took, 3.0, "the deadline of 500 ms took %.1f s", took);
    cr_expect(strstr(err.message, "still stopping") && strstr(err.message, "start_timeout_ms"),
              "%s", err.message);
    sbx_destroy(prov, "k-stuck", sbx_handle_ref(h), NULL, &err);
    sbx_release(h);
}

Test(daytona_pause, resume_of_a_deleted_sandbox_is_not_found)
{
    open_with(NULL, 2);
    sbx_handle *h = ph_create(prov, "k-gone");
    sbx_error err;
    cr_assert_eq(sbx_pause(h, NULL, &err), SBX_OK, "%s", err.message);
    char path[256];
    snprintf(path, sizeof path, "/api/sandbox/%s", ph_sid(h));
    long st = 0;
    free(fake_http(&fake, "DELETE", path, NULL, AUTH, &st));
    cr_assert_eq(st, 200);
    ph_nap(0.3);
    int rc = sbx_resume(h, NULL, &err);
    cr_expect_eq(rc, SBX_E_NOT_FOUND, "%d %s", rc, err.message);
    cr_expect(strstr(err.message, "no longer exists"), "%s", err.message);
    rc = sbx_pause(h, NULL, &err);
    cr_expect_eq(rc, SBX_E_NOT_FOUND, "%d %s", rc, err.message);
    rc = ph_sh(h, "true", &err);
    cr_expect_eq(rc, SBX_E_NOT_FOUND, "%d %s", rc, err.message);
    sbx_release(h);
}

/* SBX_CAP_POOL: found by its key_hash alone, nothing of the key inside;
 * stopped while it waits (auto-stop), started by the claim's attach. */
Test(daytona_pause, pooled_sandbox_carries_only_the_key_hash)
{
    open_with(NULL, 2);
    const char *secret = "pool-member-key-0123456789";
    sbx_handle *h = ph_create(prov, secret);
    sbx_error err;
    char cmd[256];
    snprintf(cmd, sizeof cmd, "! env | grep -q %s", secret);
    cr_expect_eq(ph_sh(h, cmd, &err), SBX_OK, "the key reached the sandbox: %s", err.message);
    char path[256];
    snprintf(path, sizeof path, "/api/sandbox/%s", ph_sid(h));
    long st = 0;
    char *doc = fake_http(&fake, "GET", path, NULL, AUTH, &st);
    cr_expect(doc && !strstr(doc, secret), "the key is in the sandbox's record: %s", doc);
    free(doc);
    cr_assert_eq(sbx_pause(h, NULL, &err), SBX_OK, "%s", err.message);
    sbx_handle *h2 = NULL;
    cr_expect_eq(sbx_attach(prov, secret, sbx_handle_ref(h), NULL, &h2, &err), SBX_OK, "%s",
                 err.message);
    cr_expect(state_is(h, "started"));
    sbx_release(h2);
    h2 = NULL;
    cr_expect_eq(sbx_attach(prov, "another-key", sbx_handle_ref(h), NULL, &h2, &err),
                 SBX_E_DENIED);
    sbx_destroy(prov, secret, sbx_handle_ref(h), NULL, &err);
    sbx_release(h);
}
