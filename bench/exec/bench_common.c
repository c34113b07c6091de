/* bench_common.c - shared set-up and measurement helpers of the benchmarks. */
#include "bench_common.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef BENCH_PROVIDER_DIR
#error "BENCH_PROVIDER_DIR must name the build-tree provider directory"
#endif

static void die(const char *what, const sbx_error *err)
{
    fprintf(stderr, "bench: %s: %s\n", what, err ? err->message : strerror(errno));
    exit(2);
}

void bench_write_local_config(const char *dir, char *path, size_t len)
{
    snprintf(path, len, "%s/sbx.yaml", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        die(path, NULL);
    fprintf(f, "default_provider: local\nproviders:\n  local:\n    root: %s/ws\n", dir);
    if (fclose(f) != 0)
        die(path, NULL);
}

void bench_env_open(struct bench_env *b)
{
    memset(b, 0, sizeof *b);
    snprintf(b->dir, sizeof b->dir, "/tmp/sbx-bench-XXXXXX");
    if (!mkdtemp(b->dir))
        die("mkdtemp", NULL);
    char config[PATH_MAX + 16];
    bench_write_local_config(b->dir, config, sizeof config);

    struct sbx_options opts;
    memset(&opts, 0, sizeof opts);
    opts.size = sizeof opts;
    opts.config_path = config;
    opts.plugin_path = BENCH_PROVIDER_DIR;
    opts.provider = "local";
    opts.ignore_environment = true;
    sbx_error err;
    if (sbx_open(&opts, &b->ctx, &err) != SBX_OK)
        die("sbx_open", &err);
    if (sbx_provider_lookup(b->ctx, "local", &b->provider, &err) != SBX_OK)
        die("sbx_provider_lookup", &err);
    struct sbx_create_options copts;
    memset(&copts, 0, sizeof copts);
    copts.size = sizeof copts;
    if (sbx_create(b->provider, "bench", &copts, NULL, &b->sandbox, &err) != SBX_OK)
        die("sbx_create", &err);
}

static int remove_entry(const char *path, const struct stat *st, int flag,
                        struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

void bench_remove_tree(const char *dir)
{
    nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

void bench_env_close(struct bench_env *b)
{
    sbx_error err;
    char *ref = strdup(sbx_handle_ref(b->sandbox));
    sbx_release(b->sandbox);
    if (!ref || sbx_destroy(b->provider, "bench", ref, NULL, &err) != SBX_OK)
        fprintf(stderr, "bench: destroying the sandbox failed: %s\n",
                ref ? err.message : "out of memory");
    free(ref);
    sbx_close(b->ctx);
    bench_remove_tree(b->dir);
}

double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int count_write(void *ctx, const void *buf, size_t len)
{
    (void)buf;
    *(uint64_t *)ctx += len;
    return 0;
}

void bench_exec_counted(sbx_handle *h, const char *const *argv, struct bench_exec *r)
{
    memset(r, 0, sizeof *r);
    struct sbx_sink out = SBX_SINK_INIT(&r->out_bytes, count_write), err = SBX_SINK_INIT(&r->err_bytes, count_write);
    struct sbx_exec_args args;
    memset(&args, 0, sizeof args);
    args.size = sizeof args;
    args.argv = argv;
    args.out = &out;
    args.err = &err;
    r->res.size = sizeof r->res;
    double t0 = bench_now();
    r->rc = sbx_exec(h, &args, &r->res, NULL, &r->err);
    r->seconds = bench_now() - t0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

long bench_vmhwm_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    char line[256];
    long kib = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &kib) == 1)
            break;
    fclose(f);
    return kib;
}

unsigned long bench_parse_count(const char *text, const char *what)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(text, &end, 10);
    if (errno || end == text || *end || v == 0 || text[0] == '-') {
        fprintf(stderr, "bench: invalid %s '%s' (expected a positive integer)\n", what,
                text);
        exit(2);
    }
    return v;
}
