/*
 * fake_bench.h - what the benchmarks of the remote providers share: a
 * fake service started on loopback, its connection count, clocks, medians
 * and peak RSS.
 */
#ifndef SBX_BENCH_FAKE_BENCH_H
#define SBX_BENCH_FAKE_BENCH_H

#include <curl/curl.h>
#include <stddef.h>

/* The API key the fakes are started with. */
#define BENCH_FAKE_KEY "bench_key"

/* The fake's port, once bench_fake_start returned. */
extern int bench_fake_port;

/* Name used in messages ("bench_e2b"); set before anything else. */
extern const char *bench_name;

double bench_now(void);
/* Sorts v. */
double bench_median(double *v, size_t n);
/* Print "<bench_name>: what: msg" and exit 1. */
void bench_die(const char *what, const char *msg);
/* A field of /proc/self/status in KiB ("VmHWM"), or -1. */
long bench_status_kib(const char *field);
/* Reset the peak RSS (VmHWM) to the current RSS. */
void bench_reset_peak(void);

/* Start the fake `script` (relative to the source tree) with a private
 * directory; exits on failure. */
void bench_fake_start(const char *script);
void bench_fake_stop(void);
/* Connections the fake has accepted so far (its /_fake/stats). */
int bench_fake_connections(CURL *c);

/* The fake's private directory (a place for the benchmark's own files). */
const char *bench_fake_dir(void);

/* A response body collected by bench_collect (a curl write callback);
 * NUL-terminated, the caller frees p. */
struct bench_buf {
    char *p;
    size_t len;
};
size_t bench_collect(char *d, size_t s, size_t n, void *ctx);

/* A curl write callback adding the byte count to *(size_t *)ctx. */
size_t bench_discard(char *d, size_t s, size_t n, void *ctx);

#endif
