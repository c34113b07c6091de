/*
 * bench_memory.c - memory stores in the session store.
 *
 *   bench_memory [DRIVER] [COMMITS]   DRIVER sqlite (default) or postgres
 *                                     (needs SBX_TEST_PG_DSN)
 *
 * 1. A commit of one changed file (based on its head) in a store of 10 000
 *    files against the same commit in a store of 10 files, alternating,
 *    medians of COMMITS (default 50) each. Target: ratio <= 1.5.
 * 2. Peak RSS growth while 1 024 files of 1 MiB (1 GiB) are committed, one
 *    commit of 64 files at a time, then each read back through a counting
 *    sink and the store listed. Target: <= 16 MiB. SQLite reads through a
 *    memory map of the database file (mmap_size, store/sqlite.c), whose
 *    pages count in RSS although they are the page cache's; BENCH_NO_MMAP=1
 *    turns the map off to show the process's own memory.
 */
#include "store/memory_trees.h"
#include "store/driver.h"
#include "scratch_db.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static long maxrss_kib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

static void die(const char *what, const sbx_error *err)
{
    fprintf(stderr, "bench_memory: %s: %s\n", what, err->message);
    exit(1);
}

/* Content generated per file: `size` bytes derived from the index. */
struct gen {
    unsigned char *buf;
    size_t size;
    unsigned salt;
};

static int gen_load(void *ud, size_t i, const void **data, size_t *len, sbx_error *err)
{
    (void)err;
    struct gen *g = ud;
    for (size_t k = 0; k < g->size; k += 64)
        g->buf[k] = (unsigned char)(i + k + g->salt);
    *data = g->buf;
    *len = g->size;
    return SBX_OK;
}

/* Commit n new files "dir<i%100>/f<first+i>" of `size` bytes. */
static void add_files(struct sbx_store *s, const char *slug, size_t first, size_t n,
                      size_t size)
{
    struct sbx_mstore_change *ch = calloc(n, sizeof *ch);
    char (*names)[64] = calloc(n, sizeof *names);
    struct gen g = {malloc(size ? size : 1), size, 0};
    memset(g.buf, 'x', size);
    for (size_t i = 0; i < n; i++) {
        snprintf(names[i], sizeof names[i], "dir%zu/f%zu", (first + i) % 100, first + i);
        ch[i] = (struct sbx_mstore_change){names[i], 0, false};
    }
    struct sbx_mstore_commit c = {.slug = slug, .author = "bench", .changes = ch,
                                  .nchanges = n, .load = gen_load, .ud = &g};
    sbx_error err;
    if (sbxh_mstore_commit(s, &c, NULL, NULL, NULL, &err) != SBX_OK)
        die("commit", &err);
    free(g.buf);
    free(names);
    free(ch);
}

/* One commit changing dir0/f0, based on its head; returns seconds. */
static double change_one(struct sbx_store *s, const char *slug, int64_t *base, unsigned salt)
{
    struct sbx_mstore_change ch = {"dir0/f0", *base, false};
    unsigned char buf[256];
    struct gen g = {buf, sizeof buf, salt};
    struct sbx_mstore_commit c = {.slug = slug, .author = "bench", .changes = &ch,
                                  .nchanges = 1, .load = gen_load, .ud = &g};
    sbx_error err;
    double t0 = now_s();
    if (sbxh_mstore_commit(s, &c, base, NULL, NULL, &err) != SBX_OK)
        die("one-file commit", &err);
    return now_s() - t0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int count_sink(void *ctx, const void *buf, size_t n)
{
    (void)buf;
    *(uint64_t *)ctx += n;
    return 0;
}

struct paths {
    char (*p)[64];
    size_t n, cap;
};

static int collect(void *ud, const struct sbx_mstore_file *f, sbx_error *err)
{
    (void)err;
    struct paths *ps = ud;
    if (ps->n == ps->cap) {
        ps->cap = ps->cap ? ps->cap * 2 : 1024;
        ps->p = realloc(ps->p, ps->cap * sizeof *ps->p);
    }
    snprintf(ps->p[ps->n++], 64, "%s", f->path);
    return SBX_OK;
}

int main(int argc, char **argv)
{
    const char *driver = argc > 1 ? argv[1] : "sqlite";
    int commits = argc > 2 ? atoi(argv[2]) : 50;
    struct scratch_db db;
    char why[512];
    if (scratch_create(driver, &db, why, sizeof why) != SCRATCH_OK) {
        fprintf(stderr, "bench_memory: %s\n", why);
        return 2;
    }
    struct sbx_store *s = NULL;
    sbx_error err;
    if (sbxh_store_open(driver, db.target, &s, &err) != SBX_OK)
        die("open", &err);
    if (getenv("BENCH_NO_MMAP") && !strcmp(driver, "sqlite"))
        ((struct sbx_store_impl *)s)->prims->query(s, "PRAGMA mmap_size = 0", NULL, 0, NULL,
                                                   NULL, &err);
    struct sbx_mstore_limits big = {0, 0, INT64_C(2) << 30};
    if (sbxh_mstore_create(s, "small", NULL, &err) != SBX_OK ||
        sbxh_mstore_create(s, "large", NULL, &err) != SBX_OK ||
        sbxh_mstore_create(s, "gib", &big, &err) != SBX_OK)
        die("create", &err);
    add_files(s, "small", 0, 10, 256);
    for (size_t i = 0; i < 10000; i += 1000)
        add_files(s, "large", i, 1000, 256);

    double *ts = calloc((size_t)commits, sizeof *ts), *tl = calloc((size_t)commits, sizeof *tl);
    int64_t bs = 1, bl = 1;
    for (int i = 0; i < commits; i++) {
        ts[i] = change_one(s, "small", &bs, (unsigned)i);
        tl[i] = change_one(s, "large", &bl, (unsigned)i);
    }
    qsort(ts, (size_t)commits, sizeof *ts, cmp_double);
    qsort(tl, (size_t)commits, sizeof *tl, cmp_double);
    double ms = ts[commits / 2] * 1e3, ml = tl[commits / 2] * 1e3;
    printf("%s: one-file commit, 10 files: %.3f ms; 10 000 files: %.3f ms; ratio %.2f "
           "(target <= 1.5)\n",
           driver, ms, ml, ml / ms);

    long rss0 = maxrss_kib();
    double t0 = now_s();
    for (size_t i = 0; i < 1024; i += 64)
        add_files(s, "gib", i, 64, 1 << 20);
    double tw = now_s() - t0;
    struct paths ps = {NULL, 0, 0};
    if (sbxh_mstore_heads(s, "gib", 0, collect, &ps, &err) != SBX_OK)
        die("heads", &err);
    uint64_t got = 0;
    struct sbx_sink sink = SBX_SINK_INIT(&got, count_sink);
    t0 = now_s();
    for (size_t i = 0; i < ps.n; i++)
        if (sbxh_mstore_read(s, "gib", ps.p[i], 0, &sink, NULL, &err) != SBX_OK)
            die("read", &err);
    double tr = now_s() - t0;
    long rss1 = maxrss_kib();
    printf("%s: 1 GiB store (%zu files): written in %.1f s, read back %llu bytes in %.1f s; "
           "peak RSS growth %ld KiB (target <= 16384)\n",
           driver, ps.n, tw, (unsigned long long)got, tr, rss1 - rss0);
    free(ps.p);
    free(ts);
    free(tl);
    sbxh_store_close(s);
    scratch_destroy(&db);
    return 0;
}
