/*
 * bench_pools.c - time to first command through the library on docker: a
 * new session's sbx_session_acquire + sbx_exec of `true`, with a warm pool
 * of one member (refilled by sbx_pools_reconcile outside the timed part)
 * and without pools, side by side in each round with `docker run --rm
 * --network none IMAGE true` through the docker CLI and with sbx_exec of
 * `true` on the handle of an existing session. Each new session is deleted
 * (its container destroyed) outside the timed part. The pooled acquire is
 * timed twice: with the claim's health check (the default) and with
 * SBX_POOL_CHECK_FRESH_MS=60000 (the member, checked by the refill just
 * before, is only attached).
 *
 *   DOCKER_HOST=unix:///path/docker.sock [SBX_BENCH_IMAGE=sbx-test:busybox] \
 *       build/ci/bench/bench_pools [ROUNDS]      (default 15)
 *
 * Prints per-round figures and the medians; targets (with a pool <= 50 ms
 * and <= 1.5x of the existing-session exec, without <= 1.0x of docker run)
 * are reported, and the exit status is 1 when one is missed.
 */
#include "bench_common.h"

#include <sbx/session.h>

#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static void die(const char *what, const sbx_error *err)
{
    fprintf(stderr, "bench_pools: %s: %s\n", what, err ? err->message : "");
    exit(2);
}

/* <dir>/<name>.yaml: the docker provider, a SQLite store in dir, and a
 * pool `warm` of pool_size members when pool_size > 0. */
static void write_config(const char *dir, const char *name, const char *host,
                         const char *image, int pool_size, char *path, size_t len)
{
    snprintf(path, len, "%s/%s.yaml", dir, name);
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        exit(2);
    }
    fprintf(f,
            "default_provider: docker\n"
            "store: { driver: sqlite, path: %s/db }\n"
            "providers:\n"
            "  docker: { host: \"%s\", image: \"%s\", resource_dir: %s/res }\n",
            dir, host, image, dir);
    if (pool_size > 0)
        fprintf(f, "pools:\n  warm: { provider: docker, size: %d }\n", pool_size);
    if (fclose(f) != 0) {
        perror(path);
        exit(2);
    }
}

static sbx_sessions *open_sessions(const char *cfg, sbx_ctx **ctx)
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
    sbx_sessions *m;
    if (sbx_sessions_open(*ctx, &so, &m, &err) != SBX_OK)
        die("sbx_sessions_open", &err);
    return m;
}

static void exec_true(sbx_handle *h)
{
    static const char *const argv[] = {"true", NULL};
    struct sbx_exec_args args;
    memset(&args, 0, sizeof args);
    args.size = sizeof args;
    args.argv = argv;
    struct sbx_exec_result res;
    memset(&res, 0, sizeof res);
    res.size = sizeof res;
    sbx_error err;
    if (sbx_exec(h, &args, &res, NULL, &err) != SBX_OK || res.exit_code != 0)
        die("exec true", &err);
}

/* Seconds for acquire of the new session key + exec `true`; *pooled says
 * whether the sandbox came from the pool. The session is deleted after the
 * clock stops. */
static double acquire_exec(sbx_sessions *m, const char *key, bool *pooled)
{
    struct sbx_acquire_info info;
    memset(&info, 0, sizeof info);
    info.size = sizeof info;
    sbx_error err;
    sbx_handle *h;
    double t0 = bench_now();
    if (sbx_session_acquire(m, key, NULL, NULL, &h, &info, &err) != SBX_OK)
        die("sbx_session_acquire", &err);
    exec_true(h);
    double t = bench_now() - t0;
    *pooled = info.pooled;
    sbx_release(h);
    if (sbx_session_delete(m, key, NULL, &err) != SBX_OK)
        die("sbx_session_delete", &err);
    return t;
}

/* Seconds for `docker -H host run --rm --network none image true`. */
static double docker_run(const char *host, const char *image)
{
    char *const argv[] = {"docker", "-H", (char *)host, "run", "--rm", "--network",
                          "none", (char *)image, "true", NULL};
    double t0 = bench_now();
    pid_t pid;
    if (posix_spawnp(&pid, "docker", NULL, NULL, argv, environ) != 0) {
        perror("docker");
        exit(2);
    }
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "bench_pools: docker run failed\n");
        exit(2);
    }
    return bench_now() - t0;
}

/* The first line of /proc/loadavg (with its newline), or "?\n". */
static const char *loadavg(void)
{
    static char buf[128];
    FILE *f = fopen("/proc/loadavg", "r");
    if (!f || !fgets(buf, sizeof buf, f))
        snprintf(buf, sizeof buf, "?\n");
    if (f)
        fclose(f);
    return buf;
}

static void reconcile(sbx_sessions *m)
{
    struct sbx_pool_report rep;
    memset(&rep, 0, sizeof rep);
    rep.size = sizeof rep;
    sbx_error err;
    if (sbx_pools_reconcile(m, NULL, &rep, &err) != SBX_OK)
        die("sbx_pools_reconcile", &err);
}

int main(int argc, char **argv)
{
    unsigned long rounds = argc > 1 ? bench_parse_count(argv[1], "ROUNDS") : 15;
    const char *host = getenv("DOCKER_HOST");
    const char *image = getenv("SBX_BENCH_IMAGE");
    if (!host || !*host) {
        fprintf(stderr, "bench_pools: set DOCKER_HOST to the daemon socket\n");
        return 2;
    }
    if (!image || !*image)
        image = "sbx-test:busybox";
    char dir[] = "/tmp/sbx-bench-pools.XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 2;
    }
    char res[PATH_MAX + 8];
    snprintf(res, sizeof res, "%s/res", dir);
    if (mkdir(res, 0700) != 0) {
        perror(res);
        return 2;
    }
    char pcfg[PATH_MAX], ccfg[PATH_MAX];
    write_config(dir, "pool", host, image, 1, pcfg, sizeof pcfg);
    write_config(dir, "cold", host, image, 0, ccfg, sizeof ccfg);
    sbx_ctx *pctx, *cctx;
    sbx_sessions *pm = open_sessions(pcfg, &pctx);
    sbx_sessions *cm = open_sessions(ccfg, &cctx);

    sbx_error err;
    sbx_handle *existing;
    if (sbx_session_acquire(cm, "bench-existing", NULL, NULL, &existing, NULL, &err) !=
        SBX_OK)
        die("acquire bench-existing", &err);
    exec_true(existing);

    double *pool = calloc(rounds, sizeof *pool), *cold = calloc(rounds, sizeof *cold);
    double *dock = calloc(rounds, sizeof *dock), *exe = calloc(rounds, sizeof *exe);
    double *fresh = calloc(rounds, sizeof *fresh);
    if (!pool || !cold || !dock || !exe || !fresh) {
        fprintf(stderr, "bench_pools: out of memory\n");
        return 2;
    }
    printf("load average %s", loadavg());
    printf("%5s %12s %12s %12s %12s %12s   (ms)\n", "round", "pool", "pool fresh",
           "no pool", "docker run", "exec");
    unsigned long unpooled = 0;
    for (unsigned long i = 0; i < rounds; i++) {
        char key[64];
        bool pooled;
        reconcile(pm);
        snprintf(key, sizeof key, "bench-pool-%lu", i);
        pool[i] = acquire_exec(pm, key, &pooled) * 1e3;
        unpooled += !pooled;
        setenv("SBX_POOL_CHECK_FRESH_MS", "60000", 1);
        reconcile(pm);
        snprintf(key, sizeof key, "bench-fresh-%lu", i);
        fresh[i] = acquire_exec(pm, key, &pooled) * 1e3;
        unsetenv("SBX_POOL_CHECK_FRESH_MS");
        unpooled += !pooled;
        snprintf(key, sizeof key, "bench-cold-%lu", i);
        cold[i] = acquire_exec(cm, key, &pooled) * 1e3;
        dock[i] = docker_run(host, image) * 1e3;
        double t0 = bench_now();
        exec_true(existing);
        exe[i] = (bench_now() - t0) * 1e3;
        printf("%5lu %12.1f %12.1f %12.1f %12.1f %12.1f\n", i + 1, pool[i], fresh[i],
               cold[i], dock[i], exe[i]);
        fflush(stdout);
    }
    double mp = bench_median(pool, rounds), mc = bench_median(cold, rounds);
    double md = bench_median(dock, rounds), me = bench_median(exe, rounds);
    double mf = bench_median(fresh, rounds);
    printf("load average %s", loadavg());
    printf("median ms over %lu rounds: acquire+exec with pool %.1f (fresh %.1f), "
           "without %.1f, docker run --rm %.1f, exec in an existing session %.1f\n",
           rounds, mp, mf, mc, md, me);
    printf("with pool / exec %.2fx, fresh / exec %.2fx (target <= 1.5x); with pool "
           "%.1f ms, fresh %.1f ms (target <= 50); without pool / docker run %.2fx "
           "(target <= 1.0x)\n",
           mp / me, mf / me, mp, mf, mc / md);
    if (unpooled)
        printf("warning: %lu pooled rounds fell back to a cold create\n", unpooled);

    sbx_release(existing);
    sbx_session_delete(cm, "bench-existing", NULL, &err);
    /* Empty the pool: its member is a container too. */
    sbx_sessions_close(pm);
    sbx_close(pctx);
    write_config(dir, "pool", host, image, 0, pcfg, sizeof pcfg);
    FILE *f = fopen(pcfg, "a");
    if (f) {
        fputs("pools:\n  warm: { provider: docker, size: 0 }\n", f);
        fclose(f);
    }
    pm = open_sessions(pcfg, &pctx);
    reconcile(pm);
    sbx_sessions_close(pm);
    sbx_close(pctx);
    sbx_sessions_close(cm);
    sbx_close(cctx);
    bench_remove_tree(dir);
    free(pool);
    free(cold);
    free(dock);
    free(exe);
    free(fresh);
    int missed = mp > 50 || mp > 1.5 * me || mc > md;
    return missed ? 1 : 0;
}
