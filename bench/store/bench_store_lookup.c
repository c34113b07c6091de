/*
 * bench_store_lookup.c - cost of looking up a binding by session key
 * (sbxh_store_get_binding) in a store holding 1 000 bindings versus one
 * holding 100 000, on each driver. The target is a ratio of at most 1.5:
 * a lookup must stay an index probe, whatever the number of sessions.
 *
 *   bench_store_lookup [--driver sqlite|postgres|all] [--small N] [--large N]
 *                      [--lookups N] [--rounds N]
 *
 * PostgreSQL is measured when SBX_TEST_PG_DSN names a server (a scratch
 * database is created there and dropped afterwards); otherwise it is
 * reported as skipped. Both stores are filled with plain SQL in one
 * statement (the store's own migrations created the schema); lookups go
 * through the store API. Rounds alternate between the two sizes so drift
 * on a busy machine affects both; the median round is reported.
 * Exit status: 0 when every measured ratio meets the target, 1 otherwise,
 * 2 on setup errors.
 */
#include "scratch_db.h"
#include "store/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TARGET_RATIO 1.5

struct bench_opts {
    const char *driver;
    long small, large, lookups, rounds;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A scratch database with n bindings named session-00000001.. */
static int fill(const char *driver, long n, struct scratch_db *db)
{
    char why[1024];
    int rc = scratch_create(driver, db, why, sizeof why);
    if (rc != SCRATCH_OK) {
        fprintf(stderr, "%s: %s\n", driver, why);
        return rc;
    }
    /* Let the store create its schema. */
    sbx_error err = {0};
    struct sbx_store *s = NULL;
    if (sbxh_store_open(driver, db->target, &s, &err) != SBX_OK) {
        fprintf(stderr, "%s\n", err.message);
        return SCRATCH_FAIL;
    }
    sbxh_store_close(s);
    char sql[1024];
    if (strcmp(driver, "sqlite") == 0)
        snprintf(sql, sizeof sql,
                 "BEGIN;"
                 "INSERT INTO sessions WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL "
                 "SELECT i + 1 FROM n WHERE i < %ld) "
                 "SELECT printf('session-%%08d', i), 'active', 0, 0 FROM n;"
                 "INSERT INTO bindings SELECT session_key, 'local', "
                 "'ws-' || substr(session_key, 9), 'spec', 0 FROM sessions;"
                 "COMMIT; ANALYZE;",
                 n);
    else
        snprintf(sql, sizeof sql,
                 "INSERT INTO sessions SELECT 'session-' || lpad(i::text, 8, '0'), "
                 "'active', 0, 0 FROM generate_series(1, %ld) i;"
                 "INSERT INTO bindings SELECT session_key, 'local', "
                 "'ws-' || substr(session_key, 9), 'spec', 0 FROM sessions;"
                 "ANALYZE sessions; ANALYZE bindings;",
                 n);
    if (scratch_exec(db, sql, why, sizeof why) != 0) {
        fprintf(stderr, "%s: filling %ld bindings: %s\n", driver, n, why);
        return SCRATCH_FAIL;
    }
    return SCRATCH_OK;
}

/* Mean seconds per lookup of `count` random existing keys of a store
 * holding n bindings. */
static double measure(struct sbx_store *s, long n, long count, unsigned *seed)
{
    char key[32];
    sbx_error err = {0};
    double t0 = now_s();
    for (long i = 0; i < count; i++) {
        long k = 1 + (long)(rand_r(seed) % n);
        snprintf(key, sizeof key, "session-%08ld", k);
        struct sbx_binding b;
        if (sbxh_store_get_binding(s, key, &b, &err) != SBX_OK) {
            fprintf(stderr, "lookup of %s failed: %s\n", key, err.message);
            exit(2);
        }
        sbxh_binding_clear(&b);
    }
    return (now_s() - t0) / (double)count;
}

/* Returns 0 (met), 1 (missed), 2 (error), 3 (skipped). */
static int bench_driver(const char *driver, const struct bench_opts *o)
{
    struct scratch_db small = {0}, large = {0};
    int rc = fill(driver, o->small, &small);
    if (rc == SCRATCH_OK)
        rc = fill(driver, o->large, &large);
    if (rc != SCRATCH_OK) {
        scratch_destroy(&small);
        scratch_destroy(&large);
        if (rc == SCRATCH_SKIP) {
            printf("%-9s skipped (SBX_TEST_PG_DSN is not set)\n", driver);
            return 3;
        }
        return 2;
    }
    sbx_error err = {0};
    struct sbx_store *ss = NULL, *sl = NULL;
    if (sbxh_store_open(driver, small.target, &ss, &err) != SBX_OK ||
        sbxh_store_open(driver, large.target, &sl, &err) != SBX_OK) {
        fprintf(stderr, "%s\n", err.message);
        return 2;
    }
    long count = o->lookups > 0 ? o->lookups : strcmp(driver, "sqlite") == 0 ? 8000 : 1000;
    unsigned seed = 12345;
    /* Warm-up: one pass over each store. */
    measure(ss, o->small, count / 5 + 1, &seed);
    measure(sl, o->large, count / 5 + 1, &seed);
    double *ts = calloc((size_t)o->rounds, sizeof *ts);
    double *tl = calloc((size_t)o->rounds, sizeof *tl);
    for (long r = 0; r < o->rounds; r++) {
        ts[r] = measure(ss, o->small, count, &seed);
        tl[r] = measure(sl, o->large, count, &seed);
    }
    qsort(ts, (size_t)o->rounds, sizeof *ts, cmp_double);
    qsort(tl, (size_t)o->rounds, sizeof *tl, cmp_double);
    double ms = ts[o->rounds / 2], ml = tl[o->rounds / 2];
    double ratio = ml / ms;
    printf("%-9s %9ld %12.2f\n", driver, o->small, ms * 1e6);
    printf("%-9s %9ld %12.2f\n", driver, o->large, ml * 1e6);
    printf("%-9s ratio %ld/%ld: %.2f (target <= %.1f): %s\n", driver, o->large, o->small,
           ratio, TARGET_RATIO, ratio <= TARGET_RATIO ? "met" : "MISSED");
    fflush(stdout);
    free(ts);
    free(tl);
    sbxh_store_close(ss);
    sbxh_store_close(sl);
    scratch_destroy(&small);
    scratch_destroy(&large);
    return ratio <= TARGET_RATIO ? 0 : 1;
}

static long arg_long(const char *name, const char *v)
{
    char *end;
    long n = v ? strtol(v, &end, 10) : 0;
    if (!v || *end || n < 1) {
        fprintf(stderr, "bench_store_lookup: %s needs a positive number\n", name);
        exit(2);
    }
    return n;
}

int main(int argc, char **argv)
{
    struct bench_opts o = {.driver = "all", .small = 1000, .large = 100000, .rounds = 31};
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--driver") == 0 && v)
            o.driver = argv[++i];
        else if (strcmp(argv[i], "--small") == 0)
            o.small = arg_long(argv[i], v), i++;
        else if (strcmp(argv[i], "--large") == 0)
            o.large = arg_long(argv[i], v), i++;
        else if (strcmp(argv[i], "--lookups") == 0)
            o.lookups = arg_long(argv[i], v), i++;
        else if (strcmp(argv[i], "--rounds") == 0)
            o.rounds = arg_long(argv[i], v), i++;
        else {
            fprintf(stderr,
                    "usage: %s [--driver sqlite|postgres|all] [--small N] [--large N] "
                    "[--lookups N] [--rounds N]\n",
                    argv[0]);
            return 2;
        }
    }
    if (strcmp(o.driver, "all") != 0 && strcmp(o.driver, "sqlite") != 0 &&
        strcmp(o.driver, "postgres") != 0) {
        fprintf(stderr, "bench_store_lookup: unknown driver '%s'\n", o.driver);
        return 2;
    }
    printf("binding lookup by key (sbxh_store_get_binding), random existing keys,\n"
           "median of %ld rounds\n",
           o.rounds);
    printf("%-9s %9s %12s\n", "driver", "bindings", "us/lookup");
    int worst = 0;
    const char *drivers[] = {"sqlite", "postgres"};
    for (size_t i = 0; i < 2; i++) {
        if (strcmp(o.driver, "all") != 0 && strcmp(o.driver, drivers[i]) != 0)
            continue;
        int rc = bench_driver(drivers[i], &o);
        if (rc == 2)
            return 2;
        if (rc == 1)
            worst = 1;
    }
    return worst;
}
