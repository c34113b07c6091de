/*
 * bench_memory_docker.c - memory stores attached to docker sessions: what
 * the steps around a command cost.
 *
 *   SBX_BENCH_DOCKER_HOST=unix:///... bench_memory_docker [ROUNDS]
 *   SBX_BENCH_DOCKER_HOST=unix:///... bench_memory_docker --rss
 *
 * 1. The check after a command that changed nothing, with a 10 000-file
 *    store attached read-write: `true` in that session against `true` in a
 *    session without memory (the difference is what memory adds, the steps
 *    before and after), beside `tar -cf /dev/null` and `tar -c | cat >
 *    /dev/null` of the same tree on the host, alternating, medians of
 *    ROUNDS (default 15). Target: <= 0.25x tar -c.
 * 2. A command changing one file (a commit of one file) with a 10 000-file
 *    store against the same with a 10-file store. Target: <= 1.5x.
 * 3. (--rss) Peak RSS growth of this process (host and provider in one)
 *    while a 1 GiB store (1 024 files of 1 MiB) is loaded into a session,
 *    a command changes one file of it and the change is committed.
 *    Target: <= 16 MiB. The SQLite store's memory map is turned off (it
 *    counts page cache as RSS, store/sqlite.c).
 * Needs SBX_BENCH_DOCKER_HOST (a daemon on this machine: the trees are host
 * directories) and the image of SBX_BENCH_DOCKER_IMAGE (sbx-test:busybox).
 */
#include "store/memory_trees.h"
#include "sessions/internal.h"
#include "store/driver.h"
#include "fake_bench.h"

#include <sbx/memory.h>
#include <sbx/sbx.h>
#include <sbx/session.h>

#include <openssl/evp.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what, const sbx_error *err)
{
    bench_die(what, err ? err->message : "");
}

/* ---- filling a store in one commit -------------------------------------- */

struct fill {
    size_t n;
    size_t file_bytes;
    char *data;
    char (*paths)[32];
};

static int fill_load(void *ud, size_t i, const void **data, size_t *len, sbx_error *err)
{
    (void)err;
    struct fill *f = ud;
    snprintf(f->data, f->file_bytes, "file %zu\n", i);
    *data = f->data;
    *len = f->file_bytes;
    return SBX_OK;
}

static void make_store(sbx_sessions *m, const char *slug, size_t files, size_t bytes,
                       size_t per_commit)
{
    struct sbx_mstore_limits lim = {(int64_t)bytes + 1, (int64_t)files + 10,
                                    (int64_t)(files * bytes) + 4096};
    sbx_error err;
    if (sbxh_mstore_create(m->store, slug, &lim, &err) != SBX_OK)
        die("memory create", &err);
    struct fill f = {0, bytes, malloc(bytes), calloc(per_commit, sizeof *f.paths)};
    struct sbx_mstore_change *ch = calloc(per_commit, sizeof *ch);
    memset(f.data, 'x', bytes);
    for (size_t done = 0; done < files; done += per_commit) {
        size_t n = files - done < per_commit ? files - done : per_commit;
        for (size_t i = 0; i < n; i++) {
            snprintf(f.paths[i], sizeof f.paths[i], "d%03zu/f%05zu.md", (done + i) / 100,
                     done + i);
            ch[i] = (struct sbx_mstore_change){f.paths[i], 0, false};
        }
        struct sbx_mstore_commit c = {slug, "bench", ch, n, fill_load, NULL, &f};
        if (sbxh_mstore_commit(m->store, &c, NULL, NULL, NULL, &err) != SBX_OK)
            die("memory commit", &err);
    }
    free(ch);
    free(f.paths);
    free(f.data);
}

/* ---- sessions ------------------------------------------------------------ */

static sbx_handle *session(sbx_sessions *m, const char *key, const char *slug)
{
    struct sbx_memory_attachment a = {sizeof a, SBX_MEMORY_READ_WRITE, slug};
    struct sbx_session_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.size = sizeof spec;
    spec.provider = "docker";
    if (slug) {
        spec.memory = &a;
        spec.nmemory = 1;
    }
    sbx_handle *h;
    sbx_error err;
    if (sbx_session_acquire(m, key, &spec, NULL, &h, NULL, &err) != SBX_OK)
        die("acquire", &err);
    return h;
}

static double run_sh(sbx_handle *h, const char *script)
{
    const char *argv[] = {"sh", "-c", script, NULL};
    struct sbx_exec_args a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.argv = argv;
    a.timeout_ms = 600000;
    struct sbx_exec_result r;
    memset(&r, 0, sizeof r);
    r.size = sizeof r;
    sbx_error err;
    double t0 = bench_now();
    if (sbx_exec(h, &a, &r, NULL, &err) != SBX_OK)
        die(script, &err);
    if (r.exit_code != 0)
        die(script, NULL);
    return bench_now() - t0;
}

static double run_host(const char *cmd)
{
    double t0 = bench_now();
    if (system(cmd) != 0)
        die(cmd, NULL);
    return bench_now() - t0;
}

static sbx_sessions *open_all(const char *dir, sbx_ctx **ctx)
{
    const char *host = getenv("SBX_BENCH_DOCKER_HOST");
    const char *image = getenv("SBX_BENCH_DOCKER_IMAGE");
    if (!host || !*host) {
        fprintf(stderr, "bench_memory_docker: set SBX_BENCH_DOCKER_HOST\n");
        exit(2);
    }
    char cfg[512], yaml[1024];
    snprintf(cfg, sizeof cfg, "%s/sbx.yaml", dir);
    snprintf(yaml, sizeof yaml,
             "providers:\n  docker:\n    host: \"%s\"\n    image: \"%s\"\n"
             "    resource_dir: \"%s/res\"\n",
             host, image && *image ? image : "sbx-test:busybox", dir);
    FILE *f = fopen(cfg, "w");
    if (!f || fputs(yaml, f) < 0 || fclose(f) != 0)
        die("config", NULL);
    struct sbx_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.config_path = cfg;
    sbx_error err;
    if (sbx_open(&o, ctx, &err) != SBX_OK)
        die("open", &err);
    char db[512];
    snprintf(db, sizeof db, "%s/sessions.db", dir);
    struct sbx_sessions_options so;
    memset(&so, 0, sizeof so);
    so.size = sizeof so;
    so.store_driver = "sqlite";
    so.store_target = db;
    so.ignore_environment = true;
    sbx_sessions *m;
    if (sbx_sessions_open(*ctx, &so, &m, &err) != SBX_OK)
        die("sessions", &err);
    ((struct sbx_store_impl *)m->store)->prims->query(m->store, "PRAGMA mmap_size = 0", NULL,
                                                     0, NULL, NULL, &err);
    return m;
}

static void drop(sbx_sessions *m, sbx_handle *h, const char *key)
{
    sbx_release(h);
    sbx_error err;
    sbx_session_delete(m, key, NULL, &err);
}

static int bench_times(const char *dir, int rounds)
{
    sbx_ctx *ctx;
    sbx_sessions *m = open_all(dir, &ctx);
    make_store(m, "big", 10000, 100, 10000);
    make_store(m, "small", 10, 100, 10);
    sbx_handle *plain = session(m, "bench-plain", NULL);
    sbx_handle *big = session(m, "bench-big", "big");
    sbx_handle *small = session(m, "bench-small", "small");
    /* first commands: the initial loads */
    run_sh(plain, "true");
    run_sh(big, "true");
    run_sh(small, "true");
    /* the big tree on the host: the bind's source */
    char tree_cmd[1024];
    snprintf(tree_cmd, sizeof tree_cmd, "ls -d %s/res/*/memory/big", dir);
    FILE *p = popen(tree_cmd, "r");
    char tree[768] = "";
    if (!p || !fgets(tree, sizeof tree, p))
        die("finding the tree", NULL);
    pclose(p);
    tree[strcspn(tree, "\n")] = '\0';
    char tar_null[1024], tar_read[1024];
    snprintf(tar_null, sizeof tar_null, "tar -C %s -cf /dev/null .", tree);
    snprintf(tar_read, sizeof tar_read, "tar -C %s -cf - . | cat > /dev/null", tree);

    double *t_plain = calloc((size_t)rounds, sizeof(double));
    double *t_big = calloc((size_t)rounds, sizeof(double));
    double *t_small = calloc((size_t)rounds, sizeof(double));
    double *c_big = calloc((size_t)rounds, sizeof(double));
    double *c_small = calloc((size_t)rounds, sizeof(double));
    double *tn = calloc((size_t)rounds, sizeof(double));
    double *tr = calloc((size_t)rounds, sizeof(double));
    for (int i = 0; i < rounds; i++) {
        char change[128];
        snprintf(change, sizeof change, "echo %d > /mnt/memory/big/d000/f00000.md", i);
        char change_small[128];
        snprintf(change_small, sizeof change_small,
                 "echo %d > /mnt/memory/small/d000/f00000.md", i);
        t_plain[i] = run_sh(plain, "true");
        t_big[i] = run_sh(big, "true");
        t_small[i] = run_sh(small, "true");
        tn[i] = run_host(tar_null);
        tr[i] = run_host(tar_read);
        c_big[i] = run_sh(big, change);
        c_small[i] = run_sh(small, change_small);
    }
    double mp = bench_median(t_plain, (size_t)rounds), mb = bench_median(t_big, (size_t)rounds),
           ms = bench_median(t_small, (size_t)rounds), mn = bench_median(tn, (size_t)rounds), mr = bench_median(tr, (size_t)rounds),
           cb = bench_median(c_big, (size_t)rounds), cs = bench_median(c_small, (size_t)rounds);
    double check = mb - mp > 0 ? mb - mp : 0;
    printf("medians of %d rounds, 10 000-file store (100 B each) on docker\n", rounds);
    printf("  exec true, no memory            %8.2f ms\n", mp * 1e3);
    printf("  exec true, 10 000-file store rw %8.2f ms (memory adds %.2f ms)\n", mb * 1e3,
           check * 1e3);
    printf("  exec true, 10-file store rw     %8.2f ms\n", ms * 1e3);
    printf("  tar -cf /dev/null of the tree   %8.2f ms\n", mn * 1e3);
    printf("  tar -cf - | cat > /dev/null     %8.2f ms\n", mr * 1e3);
    printf("  no-change check / tar -cf /dev/null = %.3fx (target <= 0.25)\n", check / mn);
    printf("  no-change check / tar -c | cat      = %.3fx\n", check / mr);
    printf("  one-file commit: 10 000 files %8.2f ms, 10 files %8.2f ms: %.3fx (target "
           "<= 1.5)\n",
           cb * 1e3, cs * 1e3, cb / cs);
    printf("  what memory adds to that command: %.2f ms (10 000) vs %.2f ms (10)\n",
           (cb - mp) * 1e3, (cs - mp) * 1e3);
    drop(m, plain, "bench-plain");
    drop(m, big, "bench-big");
    drop(m, small, "bench-small");
    sbx_sessions_close(m);
    sbx_close(ctx);
    return 0;
}

static int bench_rss(const char *dir)
{
    sbx_ctx *ctx;
    sbx_sessions *m = open_all(dir, &ctx);
    make_store(m, "huge", 1024, 1 << 20, 16);
    sbx_handle *h = session(m, "bench-huge", "huge");
    long before = bench_status_kib("VmHWM");
    double t0 = bench_now();
    run_sh(h, "true"); /* loads 1 GiB */
    double load = bench_now() - t0;
    t0 = bench_now();
    run_sh(h, "echo changed > /mnt/memory/huge/d000/f00000.md");
    double commit = bench_now() - t0;
    run_sh(h, "cat /mnt/memory/huge/d000/f00000.md >/dev/null");
    long after = bench_status_kib("VmHWM");
    printf("1 GiB store (1 024 x 1 MiB) on docker: load %.2f s, one-file commit %.2f s\n",
           load, commit);
    printf("  peak RSS %ld KiB before the load, %ld KiB after: growth %.1f MiB (target <= "
           "16)\n",
           before, after, (double)(after - before) / 1024.0);
    drop(m, h, "bench-huge");
    sbx_sessions_close(m);
    sbx_close(ctx);
    return 0;
}

int main(int argc, char **argv)
{
    bench_name = "bench_memory_docker";
    char dir[] = "/tmp/sbx-bench-memory-XXXXXX";
    if (!mkdtemp(dir))
        die("mkdtemp", NULL);
    int rc;
    if (argc > 1 && !strcmp(argv[1], "--rss"))
        rc = bench_rss(dir);
    else
        rc = bench_times(dir, argc > 1 ? atoi(argv[1]) : 15);
    char rm[600];
    snprintf(rm, sizeof rm, "rm -rf %s", dir);
    if (system(rm) != 0)
        fprintf(stderr, "bench_memory_docker: could not remove %s\n", dir);
    return rc;
}
