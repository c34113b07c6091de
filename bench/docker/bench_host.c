/* bench_host.c - the docker benchmarks' host table, clock and median. */
#include "bench_host.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *cfg_host, *cfg_image, *cfg_resource_dir;
/* extra keys per host table: ctx points at a NULL-terminated key/value list */

static void hlog(const struct sbx_host *h, int level, const char *fmt, ...)
{
    (void)h, (void)level, (void)fmt;
}

static int hset(const struct sbx_host *h, sbx_call *c, int st, const char *fmt, ...)
{
    (void)h;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->message, sizeof c->message, fmt, ap);
    va_end(ap);
    return st;
}

static const char *hget(const struct sbx_host *h, const char *key)
{
    for (const char *const *kv = h->ctx; kv && *kv; kv += 2)
        if (!strcmp(kv[0], key))
            return kv[1];
    if (!strcmp(key, "host"))
        return cfg_host;
    if (!strcmp(key, "image"))
        return cfg_image;
    if (!strcmp(key, "resource_dir"))
        return cfg_resource_dir;
    return NULL;
}

static int hentry(const struct sbx_host *h, const char *k, size_t i, const char **n,
                  const char **v)
{
    (void)h, (void)k, (void)i, (void)n, (void)v;
    return 0;
}

static int hcancelled(const struct sbx_host *h, const sbx_call *c)
{
    (void)h, (void)c;
    return 0;
}

static int hcancel_fd(const struct sbx_host *h, const sbx_call *c)
{
    (void)h, (void)c;
    return -1;
}

void bench_host_init(struct sbx_host *host, const char *docker_host,
                     const char *image, const char *resource_dir)
{
    cfg_host = docker_host;
    cfg_image = image;
    cfg_resource_dir = resource_dir;
    memset(host, 0, sizeof *host);
    host->size = sizeof *host;
    host->abi_minor = SBX_ABI_MINOR;
    host->log = hlog;
    host->set_error = hset;
    host->config_get = hget;
    host->config_entry = hentry;
    host->cancelled = hcancelled;
    host->cancel_fd = hcancel_fd;
}

double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double bench_median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void bench_die(const char *prog, const char *what, int rc, const sbx_call *c)
{
    fprintf(stderr, "%s: %s: %s: %s\n", prog, what, sbx_strerror(rc), c->message);
    exit(1);
}
