/*
 * bench_common.h - what the exec benchmarks share: a private local-provider
 * context, a clock, medians and the peak resident set size.
 */
#ifndef SBX_BENCH_COMMON_H
#define SBX_BENCH_COMMON_H

#include <sbx/sbx.h>

#include <limits.h>
#include <stddef.h>

/* A local-provider context whose workspaces live in a temporary directory
 * (removed by bench_env_close), with plugins from the build tree. */
struct bench_env {
    char dir[PATH_MAX];
    sbx_ctx *ctx;
    sbx_provider *provider;
    sbx_handle *sandbox; /* one sandbox under a fixed benchmark key */
};

/* Open the context and create the sandbox; exits with a message on error. */
void bench_env_open(struct bench_env *b);

/* Destroy the sandbox, close the context, remove the directory. */
void bench_env_close(struct bench_env *b);

/* Seconds on the monotonic clock. */
double bench_now(void);

/* Median of v[0..n) (sorts v in place). */
double bench_median(double *v, size_t n);

/* VmHWM (peak resident set) of this process in KiB, from /proc/self/status;
 * -1 when unavailable. */
long bench_vmhwm_kib(void);

/* Parse "--name=N"-style unsigned option values; exits on a bad value. */
unsigned long bench_parse_count(const char *text, const char *what);

#endif
