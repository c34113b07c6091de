/*
 * test_sessions_lifecycle.c - session-level pause and resume, idle
 * eviction, max_sandboxes and fork through the C API, each on SQLite and
 * (with SBX_TEST_PG_DSN) PostgreSQL, on the local provider and the
 * pausetest fixture (local declared with SBX_CAP_PAUSE, logging pauses and
 * resumes). Competing workers are child processes with managers of their
 * own, as separate sbx processes would be.
 */
#include <sbx/session.h>

#include "scratch_db.h"

#include <criterion/criterion.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct env {
    char dir[PATH_MAX];
    char log[PATH_MAX + 16];
    char cfg[PATH_MAX + 16];
    struct scratch_db db;
    sbx_ctx *ctx;
    sbx_sessions *m;
};

/* honour_env: the manager reads the environment (SBX_TEST_CRASH_AT). */
static void open_manager_env(struct env *e, bool honour_env)
{
    struct sbx_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.config_path = e->cfg;
    o.plugin_path = SBX_TEST_PROVIDER_DIR ":" SBX_TEST_SESSION_FIXTURE_DIR;
    o.ignore_environment = true;
    sbx_error err;
    cr_assert_eq(sbx_open(&o, &e->ctx, &err), SBX_OK, "%s", err.message);
    struct sbx_sessions_options so;
    memset(&so, 0, sizeof so);
    so.size = sizeof so;
    so.store_driver = e->db.driver;
    so.store_target = e->db.target;
    so.ignore_environment = !honour_env;
    so.wait_ms = 20000;
    cr_assert_eq(sbx_sessions_open(e->ctx, &so, &e->m, &err), SBX_OK, "%s", err.message);
}

static void open_manager(struct env *e)
{
    open_manager_env(e, false);
}

/* extra: more YAML under providers.pausetest and providers.local. Skips
 * the test when the driver is postgres without a server. */
static void env_open(struct env *e, const char *driver, const char *pause_extra,
                     const char *local_extra)
{
    memset(e, 0, sizeof *e);
    char why[512] = "";
    int s = scratch_create(driver, &e->db, why, sizeof why);
    if (s == SCRATCH_SKIP)
        cr_skip_test("%s", why);
    cr_assert_eq(s, SCRATCH_OK, "%s", why);
    snprintf(e->dir, sizeof e->dir, "/tmp/sbx-lifecycle-XXXXXX");
    cr_assert_not_null(mkdtemp(e->dir));
    snprintf(e->log, sizeof e->log, "%s/pause.log", e->dir);
    snprintf(e->cfg, sizeof e->cfg, "%s/sbx.yaml", e->dir);
    FILE *f = fopen(e->cfg, "w");
    cr_assert_not_null(f);
    fprintf(f,
            "default_provider: local\nproviders:\n  local:\n    root: %s/ws\n%s"
            "  pausetest:\n    root: %s/pws\n    log: %s\n%s",
            e->dir, local_extra ? local_extra : "", e->dir, e->log,
            pause_extra ? pause_extra : "");
    fclose(f);
    open_manager(e);
}

static int rm_entry(const char *p, const struct stat *st, int fl, struct FTW *ftw)
{
    (void)st;
    (void)fl;
    (void)ftw;
    remove(p);
    return 0;
}

static void env_close(struct env *e)
{
    sbx_sessions_close(e->m);
    sbx_close(e->ctx);
    scratch_destroy(&e->db);
    nftw(e->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static const char *pause_log(const struct env *e)
{
    static char buf[4096];
    buf[0] = '\0';
    FILE *f = fopen(e->log, "r");
    if (f) {
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = '\0';
        fclose(f);
    }
    return buf;
}

static struct sbx_session_spec spec_of(const char *provider)
{
    struct sbx_session_spec s;
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    s.provider = provider;
    return s;
}

static void acquire(struct env *e, const char *key, const char *provider)
{
    struct sbx_session_spec s = spec_of(provider);
    sbx_handle *h;
    sbx_error err;
    cr_assert_eq(sbx_session_acquire(e->m, key, &s, NULL, &h, NULL, &err), SBX_OK, "%s",
                 err.message);
    sbx_release(h);
}

struct buf {
    char data[4096];
    size_t len;
};

static int buf_write(void *ctx, const void *p, size_t n)
{
    struct buf *b = ctx;
    size_t room = sizeof b->data - 1 - b->len;
    if (n > room)
        n = room;
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return SBX_OK;
}

/* Run `sh -c script` in the session (attached: a use); its stdout into
 * out (may be NULL). Returns the exit code. */
static int sh(sbx_sessions *m, const char *key, const char *script, struct buf *out)
{
    sbx_handle *h;
    sbx_error err;
    cr_assert_eq(sbx_session_attach(m, key, NULL, &h, &err), SBX_OK, "%s", err.message);
    const char *argv[] = {"sh", "-c", script, NULL};
    struct sbx_sink sink = SBX_SINK_INIT(out, buf_write);
    struct sbx_exec_args a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.argv = argv;
    a.out = out ? &sink : NULL;
    if (out)
        out->len = 0, out->data[0] = '\0';
    struct sbx_exec_result r;
    memset(&r, 0, sizeof r);
    r.size = sizeof r;
    int rc = sbx_exec(h, &a, &r, NULL, &err);
    sbx_release(h);
    cr_assert_eq(rc, SBX_OK, "%s", err.message);
    return r.exit_code;
}

static struct sbx_session_state state_of(struct env *e, const char *key)
{
    struct sbx_session_state st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    sbx_error err;
    cr_assert_eq(sbx_session_state(e->m, key, &st, &err), SBX_OK, "%s", err.message);
    return st;
}

static struct sbx_evict_report evict(struct env *e)
{
    struct sbx_evict_report r;
    memset(&r, 0, sizeof r);
    r.size = sizeof r;
    sbx_error err;
    int rc = sbx_sessions_evict(e->m, NULL, &r, &err);
    cr_assert_eq(rc, SBX_OK, "%s", err.message);
    return r;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Both drivers for each case. */
#define BOTH(suite, name)                                                        \
    static void name(const char *driver);                                        \
    Test(suite, name##_sqlite, .timeout = 60) { name("sqlite"); }                \
    Test(suite, name##_postgres, .timeout = 60) { name("postgres"); }            \
    static void name(const char *driver)

/* ---- pause and resume ------------------------------------------------- */

BOTH(lifecycle, pause_marks_and_any_use_resumes)
{
    struct env e;
    env_open(&e, driver, NULL, NULL);
    acquire(&e, "p1", "pausetest");
    sbx_error err;
    cr_assert_eq(sbx_session_pause(e.m, "p1", NULL, &err), SBX_OK, "%s", err.message);
    cr_expect(strstr(pause_log(&e), "pause"), "the provider was asked to pause");
    cr_expect(state_of(&e, "p1").paused);
    /* idempotent */
    cr_assert_eq(sbx_session_pause(e.m, "p1", NULL, &err), SBX_OK, "%s", err.message);

    /* a command from another worker (a process with its own manager)
     * clears the mark */
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        struct env c = e;
        open_manager(&c);
        struct buf out;
        int code = sh(c.m, "p1", "echo hi", &out);
        _exit(code == 0 && !strcmp(out.data, "hi\n") ? 0 : 3);
    }
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
    cr_expect_not(state_of(&e, "p1").paused, "a use clears the paused mark");

    /* unpause: the provider's resume, the mark cleared */
    cr_assert_eq(sbx_session_pause(e.m, "p1", NULL, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(sbx_session_unpause(e.m, "p1", NULL, &err), SBX_OK, "%s", err.message);
    cr_expect(strstr(pause_log(&e), "resume"));
    cr_expect_not(state_of(&e, "p1").paused);

    /* resume-with-manifest resumes a paused session too */
    cr_assert_eq(sbx_session_pause(e.m, "p1", NULL, &err), SBX_OK, "%s", err.message);
    sbx_handle *h;
    cr_assert_eq(sbx_session_resume(e.m, "p1", NULL, NULL, &h, &err), SBX_OK, "%s",
                 err.message);
    sbx_release(h);
    cr_expect_not(state_of(&e, "p1").paused);

    /* a provider without the capability: refused, naming it */
    acquire(&e, "l1", "local");
    cr_assert_eq(sbx_session_pause(e.m, "l1", NULL, &err), SBX_E_UNSUPPORTED);
    cr_expect(strstr(err.message, "\"local\"") && strstr(err.message, "pause"), "%s",
              err.message);
    cr_assert_eq(sbx_session_pause(e.m, "nobody", NULL, &err), SBX_E_NOT_FOUND);
    env_close(&e);
}

/* ---- idle eviction ---------------------------------------------------- */

BOTH(lifecycle, eviction_never_touches_a_running_command)
{
    struct env e;
    env_open(&e, driver, "    idle_pause: 1ms\n", "    idle_destroy: 1ms\n");
    acquire(&e, "busy-p", "pausetest");
    acquire(&e, "busy-l", "local");
    /* two long commands in another process */
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        /* fork before opening: a store connection is one process's */
        pid_t other = fork();
        struct env c = e;
        open_manager(&c);
        const char *key = other == 0 ? "busy-l" : "busy-p";
        /* local runs on the host: the command marks its start in e.dir */
        char script[PATH_MAX + 64];
        snprintf(script, sizeof script, ": > '%s/started-%s'; sleep 2; echo done", c.dir,
                 key);
        int code = sh(c.m, key, script, NULL);
        if (other > 0) {
            int st;
            waitpid(other, &st, 0);
            _exit(code == 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 3);
        }
        _exit(code == 0 ? 0 : 3);
    }
    /* both commands running (however loaded the machine) before evicting */
    for (int waited = 0;; waited += 10) {
        char a[PATH_MAX + 32], b[PATH_MAX + 32];
        snprintf(a, sizeof a, "%s/started-busy-l", e.dir);
        snprintf(b, sizeof b, "%s/started-busy-p", e.dir);
        if (access(a, F_OK) == 0 && access(b, F_OK) == 0)
            break;
        cr_assert_lt(waited, 30000, "the commands did not start");
        sleep_ms(10);
    }
    struct sbx_evict_report r = evict(&e);
    cr_expect_eq(r.in_use, 2, "in use: %zu (paused %zu, destroyed %zu)", r.in_use, r.paused,
                 r.destroyed);
    cr_expect_eq(r.paused + r.destroyed, 0);
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "the commands were disturbed: status %d", status);
    sleep_ms(20);
    r = evict(&e);
    cr_expect_eq(r.paused, 1, "paused %zu", r.paused);
    cr_expect_eq(r.destroyed, 1, "destroyed %zu", r.destroyed);
    cr_expect(state_of(&e, "busy-p").paused);
    sbx_handle *h;
    sbx_error err;
    cr_expect_eq(sbx_session_attach(e.m, "busy-l", NULL, &h, &err), SBX_E_NOT_FOUND,
                 "the idle local session is gone");
    /* a paused session is not paused again */
    r = evict(&e);
    cr_expect_eq(r.paused, 0);
    env_close(&e);
}

BOTH(lifecycle, a_use_resets_the_idle_clock)
{
    struct env e;
    env_open(&e, driver, NULL, "    idle_destroy: 1500ms\n");
    acquire(&e, "idle", "local");
    sleep_ms(900);
    sh(e.m, "idle", "true", NULL);
    sleep_ms(900);
    struct sbx_evict_report r = evict(&e);
    cr_expect_eq(r.seen, 1);
    cr_expect_eq(r.destroyed, 0, "used 0.9 s ago: kept");
    sleep_ms(800);
    r = evict(&e);
    cr_expect_eq(r.destroyed, 1, "idle 1.7 s: destroyed");
    env_close(&e);
}

/* ---- max_sandboxes ---------------------------------------------------- */

#define RACERS 6

BOTH(lifecycle, max_sandboxes_holds_under_racing_workers)
{
    struct env e;
    env_open(&e, driver, NULL, "    max_sandboxes: 2\n");
    int pipes[RACERS][2];
    pid_t pids[RACERS];
    for (int i = 0; i < RACERS; i++) {
        cr_assert_eq(pipe(pipes[i]), 0);
        pids[i] = fork();
        cr_assert_geq(pids[i], 0);
        if (pids[i] == 0) {
            struct env c = e;
            open_manager(&c);
            char key[32];
            snprintf(key, sizeof key, "racer-%d", i);
            struct sbx_session_spec s = spec_of("local");
            sbx_handle *h = NULL;
            sbx_error err = {0};
            int rc = sbx_session_acquire(c.m, key, &s, NULL, &h, NULL, &err);
            sbx_release(h);
            char msg[600];
            int n = snprintf(msg, sizeof msg, "%d %s", rc, rc ? err.message : "");
            if (write(pipes[i][1], msg, (size_t)n) < 0)
                _exit(4);
            _exit(0);
        }
        close(pipes[i][1]);
    }
    int won = 0, refused = 0;
    for (int i = 0; i < RACERS; i++) {
        char msg[600] = "";
        ssize_t n = read(pipes[i][0], msg, sizeof msg - 1);
        close(pipes[i][0]);
        int st;
        waitpid(pids[i], &st, 0);
        cr_assert_gt(n, 0);
        msg[n] = '\0';
        int rc = atoi(msg);
        if (rc == SBX_OK) {
            won++;
        } else {
            cr_expect_eq(rc, SBX_E_UNAVAILABLE, "%s", msg);
            cr_expect(strstr(msg, "\"local\"") && strstr(msg, "max_sandboxes (2)"), "%s",
                      msg);
            refused++;
        }
    }
    cr_expect_eq(won, 2, "%d admitted", won);
    cr_expect_eq(refused, RACERS - 2);
    /* a deletion makes room */
    sbx_error err;
    bool gone = false;
    for (int i = 0; i < RACERS && !gone; i++) {
        char key[32];
        snprintf(key, sizeof key, "racer-%d", i);
        gone = sbx_session_delete(e.m, key, NULL, &err) == SBX_OK;
    }
    cr_assert(gone);
    acquire(&e, "after", "local");
    /* another provider has no limit */
    acquire(&e, "other", "pausetest");
    env_close(&e);
}

/* ---- fork ------------------------------------------------------------- */

BOTH(lifecycle, a_fork_copies_the_workspace_and_shares_nothing)
{
    struct env e;
    env_open(&e, driver, NULL, NULL);
    acquire(&e, "orig", "local");
    cr_assert_eq(sh(e.m, "orig", "mkdir -p d && echo one > d/f && printf x > 'é ü'", NULL), 0);
    sbx_error err;
    cr_assert_eq(sbx_session_fork(e.m, "orig", "copy", NULL, NULL, NULL, &err), SBX_OK,
                 "%s", err.message);
    struct buf out;
    cr_assert_eq(sh(e.m, "copy", "cat d/f 'é ü'", &out), 0);
    cr_expect_str_eq(out.data, "one\nx");
    cr_expect_str_neq(state_of(&e, "copy").reference, state_of(&e, "orig").reference,
                      "its own sandbox");
    /* later writes stay on their side */
    sh(e.m, "copy", "echo fork > d/f; echo new > only-fork", NULL);
    sh(e.m, "orig", "echo orig > d/f; echo new > only-orig", NULL);
    sh(e.m, "orig", "cat d/f; ls", &out);
    cr_expect(strstr(out.data, "orig\n") && !strstr(out.data, "only-fork"), "%s", out.data);
    sh(e.m, "copy", "cat d/f; ls", &out);
    cr_expect(strstr(out.data, "fork\n") && !strstr(out.data, "only-orig"), "%s", out.data);

    /* to an existing key: a clear error, the existing session untouched */
    cr_assert_eq(sbx_session_fork(e.m, "orig", "copy", NULL, NULL, NULL, &err),
                 SBX_E_EXISTS);
    cr_expect(strstr(err.message, "already exists"), "%s", err.message);
    sh(e.m, "copy", "cat d/f", &out);
    cr_expect_str_eq(out.data, "fork\n");
    cr_assert_eq(sbx_session_fork(e.m, "orig", "orig", NULL, NULL, NULL, &err),
                 SBX_E_INVALID);
    cr_assert_eq(sbx_session_fork(e.m, "nobody", "x", NULL, NULL, NULL, &err),
                 SBX_E_NOT_FOUND);
    env_close(&e);
}

BOTH(lifecycle, a_paused_source_is_paused_again_after_a_fork)
{
    struct env e;
    env_open(&e, driver, NULL, NULL);
    acquire(&e, "ps", "pausetest");
    cr_assert_eq(sh(e.m, "ps", "echo kept > f", NULL), 0);
    sbx_error err;
    cr_assert_eq(sbx_session_pause(e.m, "ps", NULL, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(sbx_session_fork(e.m, "ps", "pf", NULL, NULL, NULL, &err), SBX_OK, "%s",
                 err.message);
    /* the copy needed the source awake; it sleeps again afterwards */
    cr_expect(state_of(&e, "ps").paused, "the source lost its paused mark to the fork");
    const char *log = pause_log(&e);
    size_t n = strlen(log);
    cr_expect(n >= 6 && !strcmp(log + n - 6, "pause\n"),
              "the provider's last call was not a pause: %s", log);
    struct buf out;
    cr_assert_eq(sh(e.m, "pf", "cat f", &out), 0);
    cr_expect_str_eq(out.data, "kept\n");
    cr_expect_not(state_of(&e, "pf").paused, "the fork is a new, running session");
    /* a running source stays running */
    cr_assert_eq(sbx_session_fork(e.m, "pf", "pf2", NULL, NULL, NULL, &err), SBX_OK, "%s",
                 err.message);
    cr_expect_not(state_of(&e, "pf").paused);
    env_close(&e);
}

BOTH(lifecycle, a_hostile_workspace_forks_safely)
{
    struct env e;
    env_open(&e, driver, NULL, NULL);
    acquire(&e, "hostile", "local");
    char victim[PATH_MAX + 16];
    snprintf(victim, sizeof victim, "%s/victim", e.dir);
    FILE *f = fopen(victim, "w");
    cr_assert_not_null(f);
    fputs("host secret\n", f);
    fclose(f);
    char script[PATH_MAX * 2];
    snprintf(script, sizeof script, "ln -s %s out && mkfifo pipe && echo ok > ok", victim);
    cr_assert_eq(sh(e.m, "hostile", script, NULL), 0);
    sbx_error err;
    int rc = sbx_session_fork(e.m, "hostile", "hfork", NULL, NULL, NULL, &err);
    /* a workspace with a symlink or a FIFO is refused at the save, naming
     * the entry; nothing is made and nothing on the host is touched */
    cr_assert_eq(rc, SBX_E_INVALID, "fork gave %d: %s", rc, err.message);
    cr_expect(strstr(err.message, "out") || strstr(err.message, "pipe"), "%s",
              err.message);
    sbx_handle *h;
    cr_expect_eq(sbx_session_attach(e.m, "hfork", NULL, &h, &err), SBX_E_NOT_FOUND);
    f = fopen(victim, "r");
    char line[64] = "";
    cr_assert_not_null(f);
    cr_expect_not_null(fgets(line, sizeof line, f));
    fclose(f);
    cr_expect_str_eq(line, "host secret\n");
    env_close(&e);
}

BOTH(lifecycle, a_fork_killed_midway_leaves_no_session)
{
    struct env e;
    env_open(&e, driver, NULL, NULL);
    acquire(&e, "src", "local");
    sh(e.m, "src", "echo data > f", NULL);
    const char *steps[] = {"fork-after-save", "after-create", "before-publish"};
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
            setenv("SBX_TEST_CRASH_AT", steps[i], 1);
            struct env c = e;
            open_manager_env(&c, true);
            sbx_error err;
            sbx_session_fork(c.m, "src", "half", NULL, NULL, NULL, &err);
            _exit(7); /* not killed: the crash point was not reached */
        }
        int status;
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
                  "%s: status %d", steps[i], status);
        sbx_handle *h;
        sbx_error err;
        cr_expect_eq(sbx_session_attach(e.m, "half", NULL, &h, &err), SBX_E_NOT_FOUND,
                     "%s: no half-made session", steps[i]);
        struct sbx_reconcile_report rep;
        cr_assert_eq(sbx_sessions_reconcile(e.m, 0, NULL, &rep, &err), SBX_OK, "%s",
                     err.message);
        if (strcmp(steps[i], "fork-after-save") != 0)
            cr_expect_eq(rep.intents_cleaned, 1, "%s: cleaned %zu", steps[i],
                         rep.intents_cleaned);
        /* the key is free for a fork that finishes */
    }
    sbx_error err;
    cr_assert_eq(sbx_session_fork(e.m, "src", "half", NULL, NULL, NULL, &err), SBX_OK, "%s",
                 err.message);
    struct buf out;
    sh(e.m, "half", "cat f", &out);
    cr_expect_str_eq(out.data, "data\n");
    env_close(&e);
}
