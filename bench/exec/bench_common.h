/*
 * bench_common.h - what the exec benchmarks share: a private local-provider
 * context, a timed exec into counting sinks, a clock, medians and the peak
 * resident set size.
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

/* Write <dir>/sbx.yaml (its path into path[len]) enabling only the local
 * provider, with workspaces under <dir>/ws; exits with a message on error. */
void bench_write_local_config(const char *dir, char *path, size_t len);

/* Remove dir and everything below it, as far as possible. */
void bench_remove_tree(const char *dir);

/* Open the context and create the sandbox; exits with a message on error. */
void bench_env_open(struct bench_env *b);

/* Destroy the sandbox, close the context, remove the directory. */
void bench_env_close(struct bench_env *b);

/* One timed sbx_exec whose stdout and stderr go to sinks that only count
 * bytes. */
struct bench_exec {
    int rc;                        /* what sbx_exec returned */
    sbx_error err;                 /* its error when rc != SBX_OK */
    struct sbx_exec_result res;
    uint64_t out_bytes, err_bytes; /* counted by the sinks */
    double seconds;                /* wall time of the sbx_exec call alone */
};

/* Run argv in h (stdin empty, no timeout) into *r; the caller checks the
 * outcome. */
void bench_exec_counted(sbx_handle *h, const char *const *argv, struct bench_exec *r);

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
