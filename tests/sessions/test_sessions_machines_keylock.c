/*
 * test_sessions_machines_keylock.c - the key lock of several workers on
 * one PostgreSQL store.
 *
 * Two `sbx` workers that share nothing but the store and the provider's
 * root (each its own HOME, XDG_STATE_HOME, XDG_RUNTIME_DIR and
 * configuration file) call create and destroy of one session key at the
 * same time. The provider is the keylocktest fixture (local, whose create
 * and destroy log themselves, hold a flock for their length and record
 * every overlap with another call, and sleep delay_ms first):
 *  - racing creates make exactly one sandbox;
 *  - a reconcile taking over a stale intent while its owner's create runs
 *    waits for that create before its own create and destroy;
 *  - two deletions' destroys take turns;
 *  - kill -9 of the worker inside a destroy lets the waiting one go on at
 *    once (the server ends the dead worker's lock connection);
 *  - a lock connection ended by the server mid-create fails the create,
 *    naming the lost key lock.
 * SBX_TEST_NO_KEY_LOCK=1 (SBX_TEST_HOOKS builds) turns the store's key
 * lock off: the overlap tests then fail. Needs SBX_TEST_PG_DSN.
 */
#include "cli_harness.h"
#include "scratch_db.h"

#include <criterion/criterion.h>

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

struct world {
    struct scratch_db db;
    struct cli_env w[2];
    char shared[512]; /* the provider root and the call log */
    char log[600];
};

static void worker_config(struct world *x, int i, int delay_ms)
{
    char yaml[8192];
    snprintf(yaml, sizeof yaml,
             "store: { driver: postgres }\n"
             "default_provider: keylocktest\nproviders:\n  keylocktest:\n"
             "    root: \"%s/ws\"\n    log: \"%s\"\n    delay_ms: %d\n",
             x->shared, x->log, delay_ms);
    cli_env_write_config(&x->w[i], yaml);
}

static void world_init(struct world *x)
{
    memset(x, 0, sizeof *x);
    char why[512] = "";
    int rc = scratch_create("postgres", &x->db, why, sizeof why);
    if (rc == SCRATCH_SKIP)
        cr_skip_test("%s", why);
    cr_assert_eq(rc, SCRATCH_OK, "scratch store: %s", why);
    for (int i = 0; i < 2; i++) {
        struct cli_env *e = &x->w[i];
        cli_env_init(e);
        size_t n = strlen(e->plugin_path);
        snprintf(e->plugin_path + n, sizeof e->plugin_path - n, ":%s",
                 SBX_TEST_SESSION_FIXTURE_DIR);
        char run[PATH_MAX + 8];
        snprintf(run, sizeof run, "%s/run", e->dir);
        cr_assert_eq(mkdir(run, 0700), 0);
        cli_env_setenv(e, "XDG_RUNTIME_DIR", run);
        cli_env_setenv(e, "SBX_STORE_DSN", x->db.target);
        const char *off = getenv("SBX_TEST_NO_KEY_LOCK");
        if (off)
            cli_env_setenv(e, "SBX_TEST_NO_KEY_LOCK", off);
    }
    cr_assert_lt(strlen(x->w[0].dir), 400);
    snprintf(x->shared, sizeof x->shared, "%.400s/shared", x->w[0].dir);
    cr_assert_eq(mkdir(x->shared, 0700), 0);
    snprintf(x->log, sizeof x->log, "%.500s/calls.log", x->shared);
    worker_config(x, 0, 0);
    worker_config(x, 1, 0);
}

static void world_fini(struct world *x)
{
    cli_env_fini(&x->w[1]);
    cli_env_fini(&x->w[0]);
    scratch_destroy(&x->db);
}

static long long count(struct world *x, const char *sql)
{
    long long v = -1;
    char why[512] = "";
    cr_assert_eq(scratch_query_int(&x->db, sql, &v, why, sizeof why), 0, "%s", why);
    return v;
}

static void run_ok(struct world *x, int i, const char *const *args)
{
    struct cli_result r;
    cli_run(&x->w[i], args, NULL, 60000, &r);
    cr_assert_eq(r.status, 0, "worker %d: sbx %s %s: status %d: %s", i, args[0],
                 args[1] ? args[1] : "", r.status, r.err);
    cli_result_free(&r);
}

/* Lines of the call log starting with `what` ("begin create", "overlap"). */
static int log_count(struct world *x, const char *what)
{
    FILE *f = fopen(x->log, "r");
    if (!f)
        return 0;
    char line[256];
    int n = 0;
    while (fgets(line, sizeof line, f))
        n += strncmp(line, what, strlen(what)) == 0;
    fclose(f);
    return n;
}

static void log_dump(struct world *x, char *buf, size_t cap)
{
    buf[0] = '\0';
    FILE *f = fopen(x->log, "r");
    if (!f)
        return;
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
    fclose(f);
}

/* Wait (10 s at most) until the log has `n` lines starting with `what`. */
static void await_log(struct world *x, const char *what, int n)
{
    for (long long end = cli_now_ms() + 10000; cli_now_ms() < end; usleep(10000))
        if (log_count(x, what) >= n)
            return;
    cr_assert_fail("no \"%s\" in the call log", what);
}

static bool still_running(const struct cli_proc *p)
{
    int st;
    return waitpid(p->pid, &st, WNOHANG) == 0;
}

static void assert_no_overlap(struct world *x)
{
    char all[8192];
    log_dump(x, all, sizeof all);
    cr_assert_eq(log_count(x, "overlap"), 0,
                 "two workers' create/destroy calls of one key overlapped:\n%s", all);
}

static const char *run_key(const char *base)
{
    static char keys[4][64];
    static int next;
    char *k = keys[next++ % 4];
    snprintf(k, sizeof keys[0], "%s-%ld", base, (long)getpid());
    return k;
}

static int workspaces(struct world *x)
{
    char ws[PATH_MAX + 8];
    snprintf(ws, sizeof ws, "%s/ws", x->shared);
    int n = cli_dir_entries(ws);
    return n < 0 ? 0 : n;
}

TestSuite(sessions_machines_keylock, .timeout = 120);

Test(sessions_machines_keylock, racing_creates_make_one_sandbox)
{
    struct world x;
    world_init(&x);
    worker_config(&x, 0, 300);
    worker_config(&x, 1, 300);
    const char *key = run_key("race");
    struct cli_proc p[2];
    for (int i = 0; i < 2; i++)
        cli_spawn(&x.w[i], (const char *[]){"create", key, NULL}, CLI_STDIN_NULL, &p[i]);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(cli_wait(&p[i], 60000), 0, "worker %d's create failed", i);
    cr_assert_eq(log_count(&x, "begin create"), 1);
    assert_no_overlap(&x);
    cr_assert_eq(count(&x, "SELECT count(*) FROM bindings"), 1);
    cr_assert_eq(workspaces(&x), 1);
    run_ok(&x, 1, (const char *[]){"destroy", key, NULL});
    cr_assert_eq(workspaces(&x), 0);
    world_fini(&x);
}

/* Worker 0's create is slow; worker 1's reconcile (a lease shorter than
 * the create) takes the intent over and cleans it: create (idempotent)
 * and destroy, both after worker 0's create returned. */
Test(sessions_machines_keylock, a_takeover_waits_for_the_create_it_takes_over)
{
    struct world x;
    world_init(&x);
    worker_config(&x, 0, 1500);
    const char *key = run_key("takeover");
    struct cli_proc a;
    cli_spawn(&x.w[0], (const char *[]){"create", key, NULL}, CLI_STDIN_NULL, &a);
    await_log(&x, "begin create", 1);
    usleep(200 * 1000); /* the intent is older than the lease below */
    run_ok(&x, 1, (const char *[]){"reconcile", "--lease", "100ms", NULL});
    cli_wait(&a, 60000); /* its intent was taken over: either outcome */
    assert_no_overlap(&x);
    cr_assert_geq(log_count(&x, "begin destroy"), 1, "the takeover destroyed nothing");
    /* nothing left behind: what a binding names exists, nothing else */
    run_ok(&x, 1, (const char *[]){"reconcile", "--lease", "100ms", NULL});
    cr_assert_eq(count(&x, "SELECT count(*) FROM intents"), 0);
    cr_assert_eq(workspaces(&x), (int)count(&x, "SELECT count(*) FROM bindings"));
    world_fini(&x);
}

Test(sessions_machines_keylock, destroys_of_two_workers_take_turns)
{
    struct world x;
    world_init(&x);
    const char *key = run_key("destroys");
    run_ok(&x, 0, (const char *[]){"create", key, NULL});
    worker_config(&x, 0, 1000);
    struct cli_proc a, b;
    cli_spawn(&x.w[0], (const char *[]){"destroy", key, NULL}, CLI_STDIN_NULL, &a);
    await_log(&x, "begin destroy", 1);
    cli_spawn(&x.w[1], (const char *[]){"destroy", key, NULL}, CLI_STDIN_NULL, &b);
    int sa = cli_wait(&a, 60000), sb = cli_wait(&b, 60000);
    cr_assert(sa == 0 || sb == 0, "both destroys failed: %d, %d", sa, sb);
    assert_no_overlap(&x);
    cr_assert_eq(count(&x, "SELECT count(*) FROM bindings"), 0);
    cr_assert_eq(workspaces(&x), 0);
    world_fini(&x);
}

Test(sessions_machines_keylock, kill_9_of_the_holder_lets_the_other_go_on)
{
    struct world x;
    world_init(&x);
    const char *key = run_key("killed");
    run_ok(&x, 0, (const char *[]){"create", key, NULL});
    worker_config(&x, 0, 30000);
    struct cli_proc a, b;
    cli_spawn(&x.w[0], (const char *[]){"destroy", key, NULL}, CLI_STDIN_NULL, &a);
    await_log(&x, "begin destroy", 1);
    cli_spawn(&x.w[1], (const char *[]){"destroy", key, NULL}, CLI_STDIN_NULL, &b);
    usleep(700 * 1000);
    cr_assert(still_running(&b), "worker 1's destroy did not wait for worker 0's");
    assert_no_overlap(&x);
    cr_assert_eq(kill(a.pid, SIGKILL), 0);
    long long t0 = cli_now_ms();
    cr_assert_eq(cli_wait(&a, 10000), CLI_KILLED_BY + SIGKILL);
    cr_assert_eq(cli_wait(&b, 20000), 0, "worker 1's destroy failed");
    cr_assert_lt(cli_now_ms() - t0, 3000, "worker 1 went on %lld ms after the kill",
                 cli_now_ms() - t0);
    assert_no_overlap(&x);
    cr_assert_eq(count(&x, "SELECT count(*) FROM bindings"), 0);
    cr_assert_eq(workspaces(&x), 0);
    world_fini(&x);
}

Test(sessions_machines_keylock, a_lost_lock_connection_fails_the_create)
{
    struct world x;
    world_init(&x);
    if (getenv("SBX_TEST_NO_KEY_LOCK"))
        cr_skip_test("the key lock is off");
    worker_config(&x, 0, 1500);
    const char *key = run_key("lost");
    struct cli_proc a;
    cli_spawn(&x.w[0], (const char *[]){"create", key, NULL}, CLI_STDIN_NULL, &a);
    await_log(&x, "begin create", 1);
    /* the server ends the worker's lock connection mid-call */
    cr_assert_geq(count(&x, "SELECT count(pg_terminate_backend(pid)) FROM "
                            "pg_stat_activity WHERE application_name = 'sbx-lock' AND "
                            "datname = current_database()"),
                  1, "no lock connection held during the create");
    char err[4096] = "";
    cli_read_err(&a, err, sizeof err, 60000);
    cr_assert_neq(cli_wait(&a, 60000), 0, "the create succeeded without its lock");
    cr_assert(strstr(err, "key lock was lost during create"), "stderr: %s", err);
    /* what it made is cleaned up by the next reconcile */
    run_ok(&x, 1, (const char *[]){"reconcile", "--lease", "1ms", NULL});
    cr_assert_eq(count(&x, "SELECT count(*) FROM intents"), 0);
    cr_assert_eq(workspaces(&x), (int)count(&x, "SELECT count(*) FROM bindings"));
    world_fini(&x);
}
