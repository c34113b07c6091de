/*
 * test_opensandbox_pause.c - pause and resume (SBX_CAP_PAUSE) and pools
 * (SBX_CAP_POOL) of the opensandbox provider against the fake
 * (fake_opensandbox.py: Pausing and Paused, SIGSTOP of the sandbox's
 * processes, requests to a paused sandbox held unanswered): processes
 * really stop and continue; both ops idempotent from any handle; every
 * other op resumes first (paused from this machine: the marker in
 * state_dir, no lookup on a running sandbox's exec; paused by a client
 * that does not share state_dir: found when the request times out);
 * hostile and fault cases: a sandbox deleted by another process, a 5xx
 * during pause (retried; reported; the docker runtime's 500 for a sandbox
 * paused already), resume racing from two instances, pause racing resume,
 * a sandbox stuck in Pausing past a short ready_timeout_ms.
 */
#include "../e2b/fake_service.h"
#include "../support/provider_harness.h"

#include <sbx/sbx.h>

#include <criterion/criterion.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define KEY "os_pause_key_0123"

static struct fake_service fake;
static char statedir[64];
static char cfgpaths[4][PH_PATH_MAX];
static int ncfg;

static void up(void)
{
    cr_assert_eq(fake_start_script(&fake, "tests/opensandbox/fake_opensandbox.py", NULL, KEY), 0,
                 "cannot start the fake");
    setenv("OPEN_SANDBOX_API_KEY", KEY, 1);
    unsetenv("OPEN_SANDBOX_DOMAIN");
    snprintf(statedir, sizeof statedir, "/tmp/sbx-osp-state-XXXXXX");
    cr_assert_not_null(mkdtemp(statedir));
}

static int rm_tree(const char *dir)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd);
}

static void down(void)
{
    fake_stop(&fake);
    for (int i = 0; i < ncfg; i++)
        ph_remove_config(cfgpaths[i]);
    ncfg = 0;
    if (statedir[0])
        (void)rm_tree(statedir);
    statedir[0] = '\0';
}

TestSuite(opensandbox_pause, .init = up, .fini = down, .timeout = 60);

/* A context (as another process would open it) whose opensandbox section
 * points at the fake, with state_dir (NULL: the shared one) and extra. */
static sbx_provider *open_prov(sbx_ctx **ctx, const char *state, const char *extra)
{
    cr_assert_lt(ncfg, 4);
    char *path = cfgpaths[ncfg++];
    ph_write_config(path, "/tmp/sbx-osp-XXXXXX.yaml",
                    "providers:\n  opensandbox:\n    api_url: \"%s\"\n"
                    "    workspace: /home/user/workspace\n    proc_dir: /home/user/.sbx-procs\n"
                    "    retries: 2\n    state_dir: \"%s\"\n%s",
                    fake.url, state ? state : statedir, extra ? extra : "");
    sbx_provider *p = NULL;
    ph_open_ok(path, "opensandbox", ctx, &p);
    return p;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* A lifecycle call to the fake as another client (the SDK, a console). */
static long lifecycle(const char *method, sbx_handle *h, const char *suffix, char **body)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/sandboxes/%s%s", ph_sid(h), suffix);
    long st = 0;
    char *doc = fake_http(&fake, method, path, NULL, "OPEN-SANDBOX-API-KEY: " KEY, &st);
    if (body)
        *body = doc;
    else
        free(doc);
    return st;
}

static int fake_state_is(sbx_handle *h, const char *want)
{
    char *doc = NULL;
    long st = lifecycle("GET", h, "", &doc);
    char needle[64];
    snprintf(needle, sizeof needle, "\"state\": \"%s\"", want);
    int ok = doc && st == 200 && strstr(doc, needle);
    free(doc);
    return ok;
}

static void wait_state(sbx_handle *h, const char *want)
{
    for (int i = 0; i < 200 && !fake_state_is(h, want); i++)
        ph_nap(0.02);
    cr_assert(fake_state_is(h, want), "the sandbox never became %s", want);
}

/* Size of a workspace file as the fake keeps it (read beside the
 * provider, so that looking does not resume); -1 when absent. One
 * sandbox per test. */
static long host_size(const char *name)
{
    char pat[512];
    snprintf(pat, sizeof pat, "%s/sbx-fake-*/home/user/workspace/%s", fake.dir, name);
    return ph_glob_size(pat);
}

static int marker(sbx_handle *h)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s/paused", statedir, ph_sid(h));
    struct stat s;
    return lstat(p, &s) == 0;
}

static void start_ticker(sbx_handle *h, char id[SBX_PROC_ID_MAX])
{
    const char *argv[] = {"sh", "-c", "while :; do echo x >> ticks; sleep 0.02; done", NULL};
    struct sbx_proc_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.size = sizeof spec;
    spec.argv = argv;
    sbx_error err;
    cr_assert_eq(sbx_proc_start(h, &spec, id, NULL, &err), SBX_OK, "%s", err.message);
    for (int i = 0; i < 200 && host_size("ticks") <= 0; i++)
        ph_nap(0.02);
    cr_assert_gt(host_size("ticks"), 0, "the ticker never wrote");
}

Test(opensandbox_pause, processes_stop_while_paused_and_continue_after_resume)
{
    sbx_ctx *ctx;
    sbx_provider *p = open_prov(&ctx, NULL, NULL);
    sbx_handle *h = ph_create(p, "k-freeze");
    char id[SBX_PROC_ID_MAX];
    start_ticker(h, id);
    sbx_error err;
    cr_assert_eq(sbx_pause(h, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect(fake_state_is(h, "Paused"));
    cr_expect(marker(h), "no marker after pause");
    ph_nap(0.1);
    long a = host_size("ticks");
    ph_nap(0.5);
    long b = host_size("ticks");
    cr_expect_eq(a, b, "the ticker ran while paused: %ld then %ld bytes", a, b);
    cr_assert_eq(sbx_resume(h, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect(fake_state_is(h, "Running"));
    cr_expect(!marker(h), "the marker outlived the resume");
    ph_nap(0.4);
    long c = host_size("ticks");
    cr_expect_gt(c, b, "the ticker did not continue after resume (%ld bytes)", c);
    /* the same process, still known */
    cr_expect_eq(sbx_proc_signal(h, id, 9, NULL, &err), SBX_OK, "%s", err.message);
    sbx_destroy(p, "k-freeze", sbx_handle_ref(h), NULL, &err);
    sbx_release(h);
    sbx_close(ctx);
}

Test(opensandbox_pause, pause_and_resume_are_idempotent_from_any_handle)
{
    sbx_ctx *c1, *c2;
    sbx_provider *p1 = open_prov(&c1, NULL, NULL);
    sbx_provider *p2 = open_prov(&c2, NULL, NULL);
    sbx_handle *h = ph_create(p1, "k-idem");
    sbx_handle *h2 = NULL;
    sbx_error err;
    cr_assert_eq(sbx_attach(p2, "k-idem", sbx_handle_ref(h), NULL, &h2, &err), SBX_OK, "%s",
                 err.message);
    cr_expect_eq(sbx_resume(h, NULL, &err), SBX_OK, "resume of a running one: %s", err.message);
    cr_assert_eq(sbx_pause(h, NULL, &err), SBX_OK, "%s", err.message);
    fake_reset(&fake);
    /* paused already: the server answers 409, which is what was asked */
    cr_expect_eq(sbx_pause(h2, NULL, &err), SBX_OK, "second pause: %s", err.message);
    cr_expect_eq(sbx_pause(h, NULL, &err), SBX_OK, "third pause: %s", err.message);
    char *s = fake_stats(&fake);
    cr_expect_geq(ph_count(s, "/pause\""), 2, "%s", s);
    free(s);
    cr_expect(fake_state_is(h, "Paused"));
    cr_expect_eq(sbx_resume(h2, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect(fake_state_is(h, "Running"));
    cr_expect_eq(sbx_resume(h2, NULL, &err), SBX_OK, "second resume: %s", err.message);
    cr_expect_eq(sbx_resume(h, NULL, &err), SBX_OK, "third resume: %s", err.message);
    sbx_release(h2);
    sbx_destroy(p1, "k-idem", sbx_handle_ref(h), NULL, &err);
    sbx_release(h);
    sbx_close(c2);
    sbx_close(c1);
}

/* Paused from this machine (this handle, or another process with the same
 * state_dir): the next op resumes first with one resume request and no
 * lookup; a running sandbox's exec costs no lifecycle request. */
Test(opensandbox_pause, ops_resume_first_and_the_hot_path_pays_nothing)
{
    sbx_ctx *c1, *c2;
    sbx_provider *p1 = open_prov(&c1, NULL, NULL);
    sbx_provider *p2 = open_prov(&c2, NULL, NULL);
    sbx_handle *h = ph_create(p1, "k-trans");
    sbx_error err;
    cr_assert_eq(ph_sh(h, "echo kept > kept.txt", &err), SBX_OK, "%s", err.message);
    cr_assert_eq(sbx_pause(h, NULL, &err), SBX_OK, "%s", err.message);
    fake_reset(&fake);
    cr_expect_eq(ph_sh(h, "test \"$(cat kept.txt)\" = kept", &err), SBX_OK, "exec: %s",
                 err.message);
    char *s = fake_stats(&fake);
    cr_expect_eq(ph_count(s, "/resume\""), 1, "one resume: %s", s);
    free(s);
    cr_expect(fake_state_is(h, "Running"));

    fake_reset(&fake);
    cr_expect_eq(ph_sh(h, "true", &err), SBX_OK, "%s", err.message);
    s = fake_stats(&fake);
    cr_expect_eq(ph_count(s, "\"service\": \"lifecycle\""), 0, "lifecycle on the hot path: %s", s);
    free(s);

    /* Paused by another process of this machine: read, stat, proc_start
     * and a port each resume it. */
    sbx_handle *h2 = NULL;
    cr_assert_eq(sbx_attach(p2, "k-trans", sbx_handle_ref(h), NULL, &h2, &err), SBX_OK, "%s",
                 err.message);
    cr_assert_eq(sbx_pause(h2, NULL, &err), SBX_OK, "%s", err.message);
    sbx_capture out;
    sbx_capture_init(&out, 64, 0);
    struct sbx_sink sink = sbx_capture_sink(&out);
    double t0 = now_s();
    cr_expect_eq(sbx_read(h, "kept.txt", &sink, NULL, &err), SBX_OK, "read: %s", err.message);
    cr_expect_lt(now_s() - t0, 2.0, "the read waited for a frozen execd");
    char *t = sbx_capture_text(&out);
    cr_expect_str_eq(t, "kept\n");
    free(t);
    sbx_capture_free(&out);
    cr_assert_eq(sbx_pause(h2, NULL, &err), SBX_OK, "%s", err.message);
    struct sbx_file_info fi;
    memset(&fi, 0, sizeof fi);
    fi.size = sizeof fi;
    cr_expect_eq(sbx_file_stat(h, "kept.txt", &fi, NULL, &err), SBX_OK, "stat: %s", err.message);
    cr_expect(fake_state_is(h, "Running"));
    cr_assert_eq(sbx_pause(h2, NULL, &err), SBX_OK, "%s", err.message);
    char id[SBX_PROC_ID_MAX];
    const char *argv[] = {"true", NULL};
    struct sbx_proc_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.size = sizeof spec;
    spec.argv = argv;
    cr_expect_eq(sbx_proc_start(h, &spec, id, NULL, &err), SBX_OK, "proc_start: %s",
                 err.message);
    cr_expect(fake_state_is(h, "Running"));
    cr_expect(!marker(h));
    sbx_release(h2);
    sbx_destroy(p1, "k-trans", sbx_handle_ref(h), NULL, &err);
    sbx_release(h);
    sbx_close(c2);
    sbx_close(c1);
}

/* Paused by a client that shares nothing with this machine (the SDK):
 * the request to the frozen execd gets no answer; at request_timeout_ms
 * the provider looks, resumes and sends it again. */
Test(opensandbox_pause, paused_elsewhere_is_resumed_when_a_request_times_out)
{
    sbx_ctx *ctx;
    sbx_provider *p = open_prov(&ctx, NULL, "    request_timeout_ms: 1000\n");
    sbx_handle *h = ph_create(p, "k-foreign");
    sbx_error err;
    cr_assert_eq(ph_sh(h, "echo x > f.txt", &err), SBX_OK, "%s", err.message);
    cr_assert_eq(lifecycle("POST", h, "/pause", NULL), 202);
    wait_state(h, "Paused");
    struct sbx_file_info fi;
    memset(&fi, 0, sizeof fi);
    fi.size = sizeof fi;
    double t0 = now_s();
    cr_expect_eq(sbx_file_stat(h, "f.txt", &fi, NULL, &err), SBX_OK, "stat: %s", err.message);
    double took = now_s() - t0;
    cr_expect(took >= 0.9 && took < 5.0, "took %.2f s", took);
    cr_expect(fake_state_is(h, "Running"));
    /* a streaming op (a download) is lost once, the next one works */
    cr_assert_eq(lifecycle("POST", h, "/pause", NULL), 202);
    wait_state(h, "Paused");
    sbx_capture out;
    sbx_capture_init(&out, 64, 0);
    struct sbx_sink sink = sbx_capture_sink(&out);
    int rc = sbx_read(h, "f.txt", &sink, NULL, &err);
    if (rc != SBX_OK)
        cr_expect(strstr(err.message, "paused elsewhere: resumed"), "%s", err.message);
    cr_expect(fake_state_is(h, "Running"));
    cr_expect_eq(ph_sh(h, "true", &err), SBX_OK, "%s", err.message);
    sbx_capture_free(&out);
    sbx_destroy(p, "k-foreign", sbx_handle_ref(h), NULL, &err);
    sbx_release(h);
    sbx_close(ctx);
}

Test(opensandbox_pause, a_sandbox_deleted_by_another_process_is_not_found)
{
    sbx_ctx *ctx;
    sbx_provider *p = open_prov(&ctx, NULL, NULL);
    sbx_handle *h = ph_create(p, "k-gone");
    sbx_error err;
    /* deleted while running: pause says so */
    cr_assert_eq(lifecycle("DELETE", h, "", NULL), 204);
    int rc = sbx_pause(h, NULL, &err);
    cr_expect_eq(rc, SBX_E_NOT_FOUND, "%d %s", rc, err.message);
    cr_expect(strstr(err.message, "no longer exists"), "%s", err.message);
    cr_expect(!marker(h), "a marker for a sandbox that is gone");
    rc = sbx_resume(h, NULL, &err);
    cr_expect_eq(rc, SBX_E_NOT_FOUND, "%d %s", rc, err.message);
    sbx_release(h);

    /* deleted while paused: resume, pause and the next op say so */
    h = ph_create(p, "k-gone2");
    cr_assert_eq(sbx_pause(h, NULL, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(lifecycle("DELETE", h, "", NULL), 204);
    rc = sbx_resume(h, NULL, &err);
    cr_expect_eq(rc, SBX_E_NOT_FOUND, "%d %s", rc, err.message);
    cr_expect(strstr(err.message, "no longer exists"), "%s", err.message);
    rc = sbx_pause(h, NULL, &err);
    cr_expect_eq(rc, SBX_E_NOT_FOUND, "%d %s", rc, err.message);
    rc = ph_sh(h, "true", &err);
    cr_expect_eq(rc, SBX_E_NOT_FOUND, "%d %s", rc, err.message);
    cr_expect_eq(sbx_destroy(p, "k-gone2", sbx_handle_ref(h), NULL, &err), SBX_OK, "%s",
                 err.message);
    sbx_release(h);
    sbx_close(ctx);
}

Test(opensandbox_pause, a_5xx_during_pause_is_retried_or_reported)
{
    sbx_ctx *ctx;
    sbx_provider *p = open_prov(&ctx, NULL, NULL);
    sbx_handle *h = ph_create(p, "k-5xx");
    sbx_error err;
    char f[256];
    /* one 503: the idempotent pause is sent again and succeeds */
    snprintf(f, sizeof f, "[{\"match\":\"/v1/sandboxes/%s/pause\",\"kind\":\"status\","
                          "\"status\":503}]", ph_sid(h));
    cr_assert_eq(fake_faults(&fake, f), 0);
    cr_expect_eq(sbx_pause(h, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect(fake_state_is(h, "Paused"));
    cr_assert_eq(sbx_resume(h, NULL, &err), SBX_OK, "%s", err.message);
    /* 500 every time on a running sandbox: reported, naming the step; not
     * paused, so no marker and no resume before the next exec */
    snprintf(f, sizeof f, "[{\"match\":\"/v1/sandboxes/%s/pause\",\"kind\":\"status\","
                          "\"status\":500,\"times\":20}]", ph_sid(h));
    cr_assert_eq(fake_faults(&fake, f), 0);
    int rc = sbx_pause(h, NULL, &err);
    cr_expect_neq(rc, SBX_OK);
    cr_expect(strstr(err.message, "pausing sandbox") && strstr(err.message, "500"), "%s",
              err.message);
    cr_expect(fake_state_is(h, "Running"));
    cr_expect(!marker(h), "a refused pause left the marker");
    fake_reset(&fake);
    cr_expect_eq(ph_sh(h, "true", &err), SBX_OK, "%s", err.message);
    char *s = fake_stats(&fake);
    cr_expect_eq(ph_count(s, "/resume\""), 0, "%s", s);
    free(s);
    /* paused already and the server answers 500 (the docker runtime:
     * `docker pause` of a paused container fails): what was asked */
    cr_assert_eq(lifecycle("POST", h, "/pause", NULL), 202);
    wait_state(h, "Paused");
    cr_assert_eq(fake_faults(&fake, f), 0);
    cr_expect_eq(sbx_pause(h, NULL, &err), SBX_OK, "%s", err.message);
    /* a 500 on resume: reported; the sandbox stays paused, the marker too */
    snprintf(f, sizeof f, "[{\"match\":\"/v1/sandboxes/%s/resume\",\"kind\":\"status\","
                          "\"status\":500,\"times\":20}]", ph_sid(h));
    fake_reset(&fake);
    cr_assert_eq(fake_faults(&fake, f), 0);
    rc = sbx_resume(h, NULL, &err);
    cr_expect_neq(rc, SBX_OK);
    cr_expect(strstr(err.message, "resuming sandbox") && strstr(err.message, "500"), "%s",
              err.message);
    cr_expect(marker(h), "the marker went although the sandbox is paused");
    fake_reset(&fake);
    cr_expect_eq(ph_sh(h, "true", &err), SBX_OK, "after the faults: %s", err.message);
    cr_expect(!marker(h));
    sbx_destroy(p, "k-5xx", sbx_handle_ref(h), NULL, &err);
    sbx_release(h);
    sbx_close(ctx);
}

struct racer {
    sbx_handle *h;
    int pause; /* 1 pause, 0 resume */
    int rounds;
    int failures;
    char msg[sizeof(((sbx_error *)0)->message)];
};

static void *race(void *arg)
{
    struct racer *r = arg;
    for (int i = 0; i < r->rounds; i++) {
        sbx_error err;
        int rc = r->pause ? sbx_pause(r->h, NULL, &err) : sbx_resume(r->h, NULL, &err);
        if (rc != SBX_OK) {
            r->failures++;
            memcpy(r->msg, err.message, sizeof r->msg);
        }
    }
    return NULL;
}

/* Two instances that share nothing (two state_dirs) resume one paused
 * sandbox at once: both succeed (the loser's 409 is looked up), and it
 * runs, with its processes. */
Test(opensandbox_pause, resume_racing_from_two_instances)
{
    char other[64];
    snprintf(other, sizeof other, "/tmp/sbx-osp-other-XXXXXX");
    cr_assert_not_null(mkdtemp(other));
    sbx_ctx *c1, *c2;
    sbx_provider *p1 = open_prov(&c1, NULL, NULL);
    sbx_provider *p2 = open_prov(&c2, other, NULL);
    sbx_handle *h = ph_create(p1, "k-race");
    sbx_handle *h2 = NULL;
    sbx_error err;
    cr_assert_eq(sbx_attach(p2, "k-race", sbx_handle_ref(h), NULL, &h2, &err), SBX_OK, "%s",
                 err.message);
    char id[SBX_PROC_ID_MAX];
    start_ticker(h, id);
    for (int round = 0; round < 3; round++) {
        cr_assert_eq(sbx_pause(h, NULL, &err), SBX_OK, "%s", err.message);
        struct racer a = {h, 0, 1, 0, ""}, b = {h2, 0, 1, 0, ""};
        pthread_t ta, tb;
        pthread_create(&ta, NULL, race, &a);
        pthread_create(&tb, NULL, race, &b);
        pthread_join(ta, NULL);
        pthread_join(tb, NULL);
        cr_expect_eq(a.failures + b.failures, 0, "round %d: %s%s", round, a.msg, b.msg);
        cr_expect(fake_state_is(h, "Running"), "round %d", round);
        cr_expect(!marker(h), "round %d: the marker outlived the resumes", round);
    }
    long t1 = host_size("ticks");
    ph_nap(0.3);
    cr_expect_gt(host_size("ticks"), t1, "the ticker does not run after the racing resumes");
    sbx_release(h2);
    sbx_destroy(p1, "k-race", sbx_handle_ref(h), NULL, &err);
    sbx_release(h);
    sbx_close(c2);
    sbx_close(c1);
    (void)rm_tree(other);
}

/* Pause and resume racing from two processes of this machine: each call
 * succeeds or says why, and in the end the marker says what the server
 * says (present exactly when Paused); the next exec works. */
Test(opensandbox_pause, pause_racing_resume_leaves_the_marker_true)
{
    sbx_ctx *c1, *c2;
    sbx_provider *p1 = open_prov(&c1, NULL, NULL);
    sbx_provider *p2 = open_prov(&c2, NULL, NULL);
    sbx_handle *h = ph_create(p1, "k-pr");
    sbx_handle *h2 = NULL;
    sbx_error err;
    cr_assert_eq(sbx_attach(p2, "k-pr", sbx_handle_ref(h), NULL, &h2, &err), SBX_OK, "%s",
                 err.message);
    for (int round = 0; round < 3; round++) {
        struct racer a = {h, 1, 3, 0, ""}, b = {h2, 0, 3, 0, ""};
        pthread_t ta, tb;
        pthread_create(&ta, NULL, race, &a);
        pthread_create(&tb, NULL, race, &b);
        pthread_join(ta, NULL);
        pthread_join(tb, NULL);
        cr_expect_eq(a.failures + b.failures, 0, "round %d: %s%s", round, a.msg, b.msg);
        cr_expect_eq(fake_state_is(h, "Paused"), marker(h), "round %d: marker %d", round,
                     marker(h));
    }
    cr_expect_eq(ph_sh(h2, "echo ok", &err), SBX_OK, "%s", err.message);
    cr_expect(fake_state_is(h, "Running") && !marker(h));
    sbx_release(h2);
    sbx_destroy(p1, "k-pr", sbx_handle_ref(h), NULL, &err);
    sbx_release(h);
    sbx_close(c2);
    sbx_close(c1);
}

/* A pause the server never finishes ends at ready_timeout_ms, naming the
 * state; the sandbox can still be destroyed. */
Test(opensandbox_pause, stuck_in_pausing_past_the_deadline)
{
    sbx_ctx *ctx;
    sbx_provider *p = open_prov(&ctx, NULL, "    ready_timeout_ms: 500\n");
    sbx_handle *h = ph_create(p, "k-stuck");
    sbx_error err;
    cr_assert_eq(fake_faults(&fake, "[{\"match\":\"/v1/sandboxes\",\"kind\":\"stuck_pause\"}]"),
                 0);
    double t0 = now_s();
    int rc = sbx_pause(h, NULL, &err);
    double took = now_s() - t0;
    cr_expect_eq(rc, SBX_E_TIMEOUT, "%d %s", rc, err.message);
    cr_expect(took >= 0.45 && took < 3.0, "the deadline of 500 ms took %.2f s", took);
    cr_expect(strstr(err.message, "pausing sandbox") && strstr(err.message, "Pausing") &&
                  strstr(err.message, "ready_timeout_ms"),
              "%s", err.message);
    cr_expect(fake_state_is(h, "Pausing"));
    /* it may still pause: the marker stays, resume is bounded as well */
    cr_expect(marker(h));
    t0 = now_s();
    rc = sbx_resume(h, NULL, &err);
    cr_expect_eq(rc, SBX_E_TIMEOUT, "%d %s", rc, err.message);
    cr_expect_lt(now_s() - t0, 3.0);
    cr_expect_eq(sbx_destroy(p, "k-stuck", sbx_handle_ref(h), NULL, &err), SBX_OK, "%s",
                 err.message);
    char *s = fake_stats(&fake);
    cr_expect(strstr(s, "\"sandboxes\": 0"), "%s", s);
    free(s);
    sbx_release(h);
    sbx_close(ctx);
}

/* SBX_CAP_POOL: made under one key, claimed under another with the first
 * key's hash; nothing of the first key reaches the sandbox; a paused pool
 * member is resumed by the claim. */
Test(opensandbox_pause, pooled_sandbox_is_handed_over_by_key_hash)
{
    sbx_ctx *ctx;
    sbx_provider *p = open_prov(&ctx, NULL, NULL);
    const char *member = "pool-member-key-0123456789";
    sbx_handle *h = ph_create(p, member);
    sbx_error err;
    char ref[SBX_REF_MAX];
    snprintf(ref, sizeof ref, "%s", sbx_handle_ref(h));
    char *doc = NULL;
    cr_assert_eq(lifecycle("GET", h, "", &doc), 200);
    cr_expect(doc && !strstr(doc, member), "the key is in the metadata: %s", doc);
    free(doc);
    cr_assert_eq(sbx_pause(h, NULL, &err), SBX_OK, "%s", err.message);
    sbx_release(h);
    char hash[SBX_KEY_HASH_LEN + 1];
    cr_assert_eq(sbx_key_hash(member, hash), SBX_OK);
    sbx_handle *hb = NULL;
    cr_assert_eq(sbx_attach_pooled(p, "the-session-key", hash, ref, NULL, &hb, &err), SBX_OK,
                 "%s", err.message);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "! (env; hostname; cat /proc/1/environ) 2>/dev/null | grep -q %s",
             member);
    cr_expect_eq(ph_sh(hb, cmd, &err), SBX_OK, "the key reached the sandbox: %s", err.message);
    sbx_release(hb);
    hb = NULL;
    char wrong[SBX_KEY_HASH_LEN + 1];
    cr_assert_eq(sbx_key_hash("another-member", wrong), SBX_OK);
    cr_expect_eq(sbx_attach_pooled(p, "the-session-key", wrong, ref, NULL, &hb, &err),
                 SBX_E_DENIED, "%s", err.message);
    cr_expect_eq(sbx_destroy_pooled(p, "the-session-key", hash, ref, NULL, &err), SBX_OK, "%s",
                 err.message);
    cr_expect_eq(sbx_attach_pooled(p, "the-session-key", hash, ref, NULL, &hb, &err),
                 SBX_E_NOT_FOUND, "%s", err.message);
    sbx_close(ctx);
}
