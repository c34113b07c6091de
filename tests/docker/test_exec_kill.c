/*
 * test_exec_kill.c - timeouts and cancellation stop a command within 1 s of
 * the deadline, and no process of it is left (looked for with ps inside
 * the container), also when the command keeps writing output (the stream
 * must be drained while it is killed) and when it has used up the
 * container's pids_limit (nothing can be forked in the container to kill
 * it).
 */
#include "harness.h"

#include <criterion/criterion.h>

#include <grp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static struct dh h;
static char key[64], hash[65], ref[SBX_REF_MAX];
static sbx_sandbox *sb;

static void setup(void)
{
    dh_require_daemon();
    static const char *const extra[] = {"pids_limit", "40", NULL};
    dh_open(&h, NULL, extra);
    dh_new_key(key, hash);
    sb = dh_create(&h, key, ref);
}

static void teardown(void)
{
    dh_sandbox_teardown(&h, key, ref, sb);
}

TestSuite(docker_exec_kill, .init = setup, .fini = teardown, .timeout = 240);

/* A tree that writes output as fast as it can: a background sleep, the
 * shell, and `yes` filling stdout. */
static const char chatty[] =
    "sleep 3601 & echo $$ > pid; exec yes 'sbx output line that keeps coming'";
/* Its processes as ps shows them (written not to match the listing). */
static const char chatty_ere[] = "slee[p] 3601|ye[s] sbx";

/* Counts stdout bytes (the command must not be starved of a sink). */
static int count_write(void *ctx, const void *p, size_t n)
{
    (void)p;
    *(uint64_t *)ctx += n;
    return 0;
}

static int run_counted(const char *script, int64_t timeout_ms, struct sbx_call *c,
                       struct sbx_exec_result *res, uint64_t *bytes)
{
    const char *argv[] = {"sh", "-c", script, NULL};
    struct sbx_sink so = SBX_SINK_INIT(bytes, count_write);
    struct sbx_exec_args a = {0};
    a.size = sizeof a;
    a.argv = argv;
    a.timeout_ms = timeout_ms;
    a.out = &so;
    a.err = &so;
    memset(res, 0, sizeof *res);
    res->size = sizeof *res;
    return h.ops->exec(sb, c, &a, res);
}

static void expect_gone(const char *ere, const char *after)
{
    char *left = dh_procs(&h, sb, ere);
    cr_expect_str_eq(left, "", "after %s these processes are left:\n%s", after, left);
    free(left);
}

Test(docker_exec_kill, timeout_of_a_command_writing_output_is_prompt)
{
    struct sbx_call c;
    dh_call_init(&c);
    struct sbx_exec_result res;
    uint64_t bytes = 0;
    double t0 = dh_now();
    int rc = run_counted(chatty, 1000, &c, &res, &bytes);
    double took = dh_now() - t0;
    cr_assert_eq(rc, SBX_OK, "%s: %s", sbx_strerror(rc), c.message);
    cr_expect_eq(res.timed_out, 1);
    cr_expect_eq(res.exit_code, -1);
    cr_expect_eq(res.term_signal, 9);
    cr_expect_gt(bytes, 0, "no output arrived before the timeout");
    fprintf(stderr, "[measured] chatty timeout 1000 ms: returned after %.0f ms\n", took);
    cr_expect_lt(took, 2000.0, "returned %.0f ms after the start (timeout 1000 ms)",
                 took);
    expect_gone(chatty_ere, "the timeout");
    dh_call_free(&c);
}

struct canceller {
    struct sbx_call *c;
    int delay_ms;
    double fired;
};

static void *cancel_later(void *arg)
{
    struct canceller *k = arg;
    struct timespec ts = {k->delay_ms / 1000, (k->delay_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    k->fired = dh_now();
    dh_call_cancel(k->c);
    return NULL;
}

Test(docker_exec_kill, cancel_of_a_command_writing_output_is_prompt)
{
    struct sbx_call c;
    dh_call_init(&c);
    struct canceller k = {&c, 1000, 0};
    pthread_t th;
    pthread_create(&th, NULL, cancel_later, &k);
    struct sbx_exec_result res;
    uint64_t bytes = 0;
    int rc = run_counted(chatty, 0, &c, &res, &bytes);
    double back = dh_now();
    pthread_join(th, NULL);
    cr_expect_eq(rc, SBX_E_CANCELLED, "%s: %s", sbx_strerror(rc), c.message);
    fprintf(stderr, "[measured] chatty cancel: returned %.0f ms after the cancel\n",
            back - k.fired);
    cr_expect_lt(back - k.fired, 1000.0, "returned %.0f ms after the cancel",
                 back - k.fired);
    expect_gone(chatty_ere, "the cancellation");
    dh_call_free(&c);
}

/* Forks until the pids limit refuses, then keeps trying: nothing more can
 * start in the container, not even a killer. The forking runs in a
 * subshell, which a refused fork ends, and the leader then spins on
 * builtins (it can fork nothing either): the command keeps running until
 * its timeout or cancellation instead of exiting early. */
static const char fill_pids[] =
    "echo $$ > pid; (while :; do sleep 3602 & done) 2>/dev/null; while :; do :; done";
static const char fill_ere[] = "slee[p] 3602|echo \\$\\$ > pi[d]";

Test(docker_exec_kill, timeout_when_the_pids_limit_is_reached)
{
    struct sbx_call c;
    dh_call_init(&c);
    struct sbx_exec_result res;
    uint64_t bytes = 0;
    double t0 = dh_now();
    int rc = run_counted(fill_pids, 1500, &c, &res, &bytes);
    double took = dh_now() - t0;
    cr_assert_eq(rc, SBX_OK, "%s: %s", sbx_strerror(rc), c.message);
    cr_expect_eq(res.timed_out, 1);
    fprintf(stderr, "[measured] pids-full timeout 1500 ms: returned after %.0f ms\n",
            took);
    cr_expect_lt(took, 2500.0, "returned %.0f ms after the start (timeout 1500 ms)",
                 took);
    expect_gone(fill_ere, "the timeout of a command that filled the pids limit");
    dh_call_free(&c);
}

Test(docker_exec_kill, cancel_when_the_pids_limit_is_reached)
{
    struct sbx_call c;
    dh_call_init(&c);
    struct canceller k = {&c, 1500, 0};
    pthread_t th;
    pthread_create(&th, NULL, cancel_later, &k);
    struct sbx_exec_result res;
    uint64_t bytes = 0;
    int rc = run_counted(fill_pids, 0, &c, &res, &bytes);
    double back = dh_now();
    pthread_join(th, NULL);
    cr_expect_eq(rc, SBX_E_CANCELLED, "%s: %s", sbx_strerror(rc), c.message);
    fprintf(stderr, "[measured] pids-full cancel: returned %.0f ms after the cancel\n",
            back - k.fired);
    cr_expect_lt(back - k.fired, 1000.0, "returned %.0f ms after the cancel",
                 back - k.fired);
    expect_gone(fill_ere, "the cancellation of a command that filled the pids limit");
    dh_call_free(&c);
}

/* A descendant that leaves the command's session and scrubs nothing is
 * still found by its tag; one that scrubs its environment but stays in the
 * session is found by its session, even when the session's leader dropped
 * the tag too. */
static const char scrubbed[] = "setsid sleep 3603 & env -i /bin/sleep 3604 & "
                               "exec env -i /bin/sh -c 'sleep 3605'";
static const char scrubbed_ere[] = "slee[p] 360[345]";

Test(docker_exec_kill, setsid_and_scrubbed_environment_descendants_are_killed)
{
    struct sbx_call c;
    dh_call_init(&c);
    struct sbx_exec_result res;
    uint64_t bytes = 0;
    const char *script = scrubbed;
    double t0 = dh_now();
    int rc = run_counted(script, 800, &c, &res, &bytes);
    double took = dh_now() - t0;
    cr_assert_eq(rc, SBX_OK, "%s: %s", sbx_strerror(rc), c.message);
    cr_expect_eq(res.timed_out, 1);
    fprintf(stderr, "[measured] setsid/env -i timeout 800 ms: returned after %.0f ms\n",
            took);
    cr_expect_lt(took, 1800.0, "returned %.0f ms after the start", took);
    expect_gone(scrubbed_ere, "the timeout");
    dh_call_free(&c);
}

/* ---- when the host may not kill: the in-container killer -------------- */

/* In a child running as nobody in the socket's group (a docker-group user,
 * not root): the container's processes are root's, so the host can neither
 * read their environment nor signal them, and the killer exec in the
 * container must do it. Exit status: 0 fine, 2 prompt but wrong, 3 late,
 * 10+ setup. */
enum fallback_case { FB_CHATTY, FB_SCRUBBED, FB_PIDS_FULL };

static int fallback_child(const char *k, const char *r, const char *res_dir,
                          enum fallback_case what)
{
    int want_killed = what != FB_PIDS_FULL;
    struct dh hc;
    /* The killer exec's deadline (providers.docker.kill_timeout, 0.6 s by
     * default) is a docker exec round trip: on a loaded machine it is
     * stretched as every other bound here (dh_slack). */
    char kill_timeout[32];
    snprintf(kill_timeout, sizeof kill_timeout, "%.3f", dh_slack(600.0) / 1000.0);
    const char *extra[] = {"resource_dir", res_dir, "agent", "false", "kill_timeout",
                           kill_timeout, NULL};
    if (dh_try_open(&hc, NULL, extra, NULL, 0) != SBX_OK)
        return 10;
    sbx_sandbox *s2 = NULL;
    char msg[2048];
    if (dh_attach(&hc, k, r, &s2, msg, sizeof msg) != SBX_OK) {
        fprintf(stderr, "fallback child: attach: %s\n", msg);
        return 11;
    }
    const char *argv[] = {"sh", "-c",
                          what == FB_CHATTY     ? chatty
                          : what == FB_SCRUBBED ? scrubbed
                                                : fill_pids,
                          NULL};
    uint64_t bytes = 0;
    struct sbx_sink so = SBX_SINK_INIT(&bytes, count_write);
    struct sbx_exec_args a = {0};
    a.size = sizeof a;
    a.argv = argv;
    a.timeout_ms = 1000;
    a.out = &so;
    a.err = &so;
    struct sbx_exec_result res = {sizeof res, 0, 0, 0, 0, 0};
    struct sbx_call c;
    dh_call_init(&c);
    double t0 = dh_now();
    int rc = hc.ops->exec(s2, &c, &a, &res);
    double took = dh_now() - t0;
    fprintf(stderr, "fallback child: exec returned %d after %.0f ms: %s\n", rc, took,
            c.message);
    if (took > 1000.0 + dh_slack(1000.0))
        return 3;
    if (want_killed)
        return rc == SBX_OK && res.timed_out ? 0 : 2;
    /* pids full and no host kill: the failure must be reported, precisely */
    return rc == SBX_E_UNAVAILABLE && strstr(c.message, "could not all be killed") &&
                   strstr(c.message, "killer exec")
               ? 0
               : 2;
}

static void run_fallback(enum fallback_case what)
{
    dh_require_daemon();
    if (geteuid() != 0)
        cr_skip_test("needs root to drop to an unprivileged user");
    struct group *docker = getgrnam("docker");
    struct stat sock;
    const char *uri = getenv("SBX_TEST_DOCKER_HOST");
    if (!docker || strncmp(uri, "unix://", 7) != 0 || stat(uri + 7, &sock) != 0 ||
        sock.st_gid != docker->gr_gid)
        cr_skip_test("the test daemon's socket does not belong to group docker");
    char res_dir[] = "/tmp/sbx-fallback-res-XXXXXX";
    cr_assert_not_null(mkdtemp(res_dir));
    /* the in-container killer is the Engine API path's */
    const char *extra[] = {"resource_dir", res_dir, "pids_limit", "40", "agent", "false", NULL};
    dh_open(&h, NULL, extra);
    dh_new_key(key, hash);
    sb = dh_create(&h, key, ref);
    /* the provider's own directories must be the unprivileged user's */
    cr_assert_eq(dh_system("chown -R 65534:%d %s", (int)docker->gr_gid, res_dir), 0);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        gid_t g = docker->gr_gid;
        if (setgroups(1, &g) != 0 || setgid(65534) != 0 || setuid(65534) != 0)
            _exit(20);
        _exit(fallback_child(key, ref, res_dir, what));
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "the unprivileged child reported %d (2: wrong result, 3: late)",
              WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    if (what == FB_CHATTY)
        expect_gone(chatty_ere, "the in-container killer");
    if (what == FB_SCRUBBED)
        expect_gone(scrubbed_ere, "the in-container killer");
    dh_system("rm -rf %s", res_dir);
}

Test(docker_exec_fallback, killer_exec_in_the_container_when_the_host_may_not,
     .timeout = 120, .fini = teardown)
{
    run_fallback(FB_CHATTY);
}

Test(docker_exec_fallback, in_container_killer_gets_the_exec_session, .timeout = 120,
     .fini = teardown)
{
    run_fallback(FB_SCRUBBED);
}

Test(docker_exec_fallback, failure_to_kill_is_reported_precisely, .timeout = 120,
     .fini = teardown)
{
    run_fallback(FB_PIDS_FULL);
}
