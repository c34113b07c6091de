/*
 * bench_host.h - what both docker benchmarks need to drive the provider
 * through its ABI without libsbx: a minimal host table, a clock, medians.
 */
#ifndef SBX_BENCH_DOCKER_HOST_H
#define SBX_BENCH_DOCKER_HOST_H

#include <sbx/provider.h>

#include <stddef.h>

/* The per-call context the benchmarks hand to provider ops. */
struct sbx_call {
    char message[2048];
};

/* Fill a host table whose config answers host, image and resource_dir
 * with these strings (borrowed: they must outlive the provider), logs
 * nothing and never cancels. */
void bench_host_init(struct sbx_host *host, const char *docker_host,
                     const char *image, const char *resource_dir);

/* More keys for one host table (host->ctx): a NULL-terminated list of
 * key, value pairs that take precedence ("agent", "false"). */
#define bench_host_keys(host, kv) ((host)->ctx = (void *)(kv))

/* Monotonic seconds. */
double bench_now(void);

/* Median of v[0..n) (sorts v). */
double bench_median(double *v, size_t n);

/* Print "prog: what: status: message" and exit 1. */
_Noreturn void bench_die(const char *prog, const char *what, int rc,
                         const sbx_call *c);

#endif
