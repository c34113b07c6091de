/*
 * bench_sessions.c - what a session costs on top of the provider: for one
 * existing session on the local provider, acquire-existing
 * (sbx_session_attach: a store lookup plus the provider's attach) + exec of
 * /bin/true + release, against a bare sbx_exec of /bin/true on a handle of
 * the same workspace that the baseline holds throughout. The two alternate
 * call by call; the medians of the single-call times are compared. Then 8
 * worker processes, each with its own session, report the throughput of
 * attach + exec + release.
 *
 *   bench_sessions [N]   (21 * N calls of each kind; default N = 50)
 *
 * Runs on SQLite, and on PostgreSQL when SBX_TEST_PG_DSN is set. Targets:
 * ratio <= 1.5 (sqlite), <= 2.5 (postgres); exits 1 when one is missed.
 */
#include "bench_common.h"
#include "scratch_db.h"

#include <sbx/session.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define ROUNDS 21
#define WARMUP 20

static void die(const char *what, const sbx_error *err)
{
    fprintf(stderr, "bench_sessions: %s: %s\n", what, err ? err->message : "");
    exit(2);
}

/* A context over the configuration cfg and a session manager over db;
 * exits on error. */
static sbx_sessions *open_sessions(const char *cfg, const struct scratch_db *db,
                                   sbx_ctx **ctx)
{
    struct sbx_options opts;
    memset(&opts, 0, sizeof opts);
    opts.size = sizeof opts;
    opts.config_path = cfg;
    opts.plugin_path = BENCH_PROVIDER_DIR;
    opts.ignore_environment = true;
    sbx_error err;
    if (sbx_open(&opts, ctx, &err) != SBX_OK)
        die("sbx_open", &err);
    struct sbx_sessions_options so;
    memset(&so, 0, sizeof so);
    so.size = sizeof so;
    so.store_driver = db->driver;
    so.store_target = db->target;
    so.ignore_environment = true;
    sbx_sessions *m;
    if (sbx_sessions_open(*ctx, &so, &m, &err) != SBX_OK)
        die("sbx_sessions_open", &err);
    return m;
}

static void exec_true(sbx_handle *h)
{
    static const char *const argv[] = {"/bin/true", NULL};
    struct sbx_exec_args args;
    memset(&args, 0, sizeof args);
    args.size = sizeof args;
    args.argv = argv;
    struct sbx_exec_result res;
    memset(&res, 0, sizeof res);
    res.size = sizeof res;
    sbx_error err;
    if (sbx_exec(h, &args, &res, NULL, &err) != SBX_OK || res.exit_code != 0)
        die("exec /bin/true", &err);
}

/* Throughput of WORKERS processes, each with its own context, manager and
 * session, each doing `iters` attach + exec /bin/true + release. Returns
 * calls per second over the wall time of the slowest worker. */
#define WORKERS 8
static double throughput(const char *cfg, const struct scratch_db *db,
                         unsigned long iters)
{
    int ready[2], go[2];
    if (pipe(ready) != 0 || pipe(go) != 0) {
        perror("pipe");
        exit(2);
    }
    pid_t pids[WORKERS];
    for (int w = 0; w < WORKERS; w++) {
        pids[w] = fork();
        if (pids[w] < 0) {
            perror("fork");
            exit(2);
        }
        if (pids[w] > 0)
            continue;
        /* Child: a worker of its own, as on a real deployment. */
        sbx_ctx *ctx;
        sbx_sessions *m = open_sessions(cfg, db, &ctx);
        sbx_error err;
        char key[32];
        snprintf(key, sizeof key, "bench-worker-%d", w);
        sbx_handle *h;
        if (sbx_session_acquire(m, key, NULL, NULL, &h, NULL, &err) != SBX_OK)
            die("acquire", &err);
        sbx_release(h);
        char c = 'r';
        if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) != 1)
            _exit(2);
        for (unsigned long i = 0; i < iters; i++) {
            if (sbx_session_attach(m, key, NULL, &h, &err) != SBX_OK)
                die("attach", &err);
            exec_true(h);
            sbx_release(h);
        }
        sbx_session_delete(m, key, NULL, &err);
        sbx_sessions_close(m);
        sbx_close(ctx);
        _exit(0);
    }
    close(ready[1]);
    close(go[0]);
    char c;
    for (int w = 0; w < WORKERS; w++)
        if (read(ready[0], &c, 1) != 1) {
            fprintf(stderr, "bench_sessions: a worker failed to start\n");
            exit(2);
        }
    double t0 = bench_now();
    char gobuf[WORKERS];
    memset(gobuf, 'g', sizeof gobuf);
    if (write(go[1], gobuf, sizeof gobuf) != (ssize_t)sizeof gobuf) {
        perror("write");
        exit(2);
    }
    int failed = 0;
    for (int w = 0; w < WORKERS; w++) {
        int st;
        waitpid(pids[w], &st, 0);
        failed |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    double secs = bench_now() - t0;
    close(ready[0]);
    close(go[1]);
    if (failed) {
        fprintf(stderr, "bench_sessions: a worker failed\n");
        exit(2);
    }
    return (double)(WORKERS * iters) / secs;
}

/* One driver: returns the ratio, or -1 when skipped. */
static double run_driver(const char *driver, unsigned long iters)
{
    struct scratch_db db;
    memset(&db, 0, sizeof db);
    char why[512] = "";
    int rc = scratch_create(driver, &db, why, sizeof why);
    if (rc == SCRATCH_SKIP) {
        printf("%-8s skipped: %s\n", driver, why);
        return -1;
    }
    if (rc != SCRATCH_OK) {
        fprintf(stderr, "bench_sessions: %s store: %s\n", driver, why);
        exit(2);
    }
    char dir[] = "/tmp/sbx-bench-sessions.XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        exit(2);
    }
    char cfg[PATH_MAX];
    bench_write_local_config(dir, cfg, sizeof cfg);
    sbx_ctx *ctx;
    sbx_sessions *m = open_sessions(cfg, &db, &ctx);
    sbx_error err;

    /* The session under test. The baseline holds one handle of the same
     * workspace and only execs, so the difference is the session's part. */
    sbx_handle *h, *bare;
    if (sbx_session_acquire(m, "bench-session", NULL, NULL, &bare, NULL, &err) !=
        SBX_OK)
        die("acquire", &err);
    for (int i = 0; i < WARMUP; i++) {
        exec_true(bare);
        if (sbx_session_attach(m, "bench-session", NULL, &h, &err) != SBX_OK)
            die("attach", &err);
        exec_true(h);
        sbx_release(h);
    }
    /* The two alternate call by call, so that a change of load on the
     * machine hits both alike; medians of the single-call times. */
    size_t n = (size_t)ROUNDS * iters;
    double *base = calloc(n, sizeof *base), *sess = calloc(n, sizeof *sess);
    double *att = calloc(n, sizeof *att);
    if (!base || !sess || !att) {
        fprintf(stderr, "bench_sessions: out of memory\n");
        exit(2);
    }
    for (size_t i = 0; i < n; i++) {
        double t0 = bench_now();
        exec_true(bare);
        double t1 = bench_now();
        if (sbx_session_attach(m, "bench-session", NULL, &h, &err) != SBX_OK)
            die("attach", &err);
        exec_true(h);
        sbx_release(h);
        double t2 = bench_now();
        /* The session's own part alone: acquire-existing + release. */
        if (sbx_session_attach(m, "bench-session", NULL, &h, &err) != SBX_OK)
            die("attach", &err);
        sbx_release(h);
        double t3 = bench_now();
        base[i] = (t1 - t0) * 1e6;
        sess[i] = (t2 - t1) * 1e6;
        att[i] = (t3 - t2) * 1e6;
    }
    double mb = bench_median(base, n), ms = bench_median(sess, n);
    double ma = bench_median(att, n);
    free(base);
    free(sess);
    free(att);
    double ratio = ms / mb;
    printf("%-8s bare exec %8.1f us   attach+exec+release %8.1f us   ratio %.2f   "
           "(attach+release alone %.1f us)\n",
           driver, mb, ms, ratio, ma);

    sbx_release(bare);
    double tput = throughput(cfg, &db, iters * 4);
    printf("%-8s %d concurrent workers (attach+exec+release): %.0f calls/s\n",
           driver, WORKERS, tput);
    sbx_session_delete(m, "bench-session", NULL, &err);
    sbx_sessions_close(m);
    sbx_close(ctx);
    bench_remove_tree(dir);
    scratch_destroy(&db);
    return ratio;
}

int main(int argc, char **argv)
{
    unsigned long iters = 50;
    if (argc > 1) {
        char *end;
        iters = strtoul(argv[1], &end, 10);
        if (*end || iters == 0) {
            fprintf(stderr, "usage: bench_sessions [ITERATIONS_PER_ROUND]\n");
            return 2;
        }
    }
    printf("acquire-existing + exec /bin/true + release vs bare exec, local "
           "provider, %lu calls each, medians\n", (unsigned long)ROUNDS * iters);
    int status = 0;
    double r = run_driver("sqlite", iters);
    if (r > 1.5) {
        printf("sqlite: ratio %.2f misses the target 1.5\n", r);
        status = 1;
    }
    r = run_driver("postgres", iters);
    if (r > 2.5) {
        printf("postgres: ratio %.2f misses the target 2.5\n", r);
        status = 1;
    }
    return status;
}
