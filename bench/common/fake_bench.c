/*
 * fake_bench.c - the shared parts of the remote providers' benchmarks
 * (fake_bench.h).
 */
#include "fake_bench.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
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

void bench_die(const char *what, const char *msg)
{
    fprintf(stderr, "%s: %s: %s\n", bench_name, what, msg);
    exit(1);
}

long bench_status_kib(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t fl = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, field, fl) && line[fl] == ':')
            v = atol(line + fl + 1);
    if (f)
        fclose(f);
    return v;
}

void bench_reset_peak(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (f) {
        fputs("5", f);
        fclose(f);
    }
}

/* ---- the fake --------------------------------------------------------- */
static pid_t fake_pid;
int bench_fake_port;
const char *bench_name = "bench";
static char dir[64] = "/tmp/sbx-bench-fake-XXXXXX";

void bench_fake_start(const char *script_rel)
{
    if (!mkdtemp(dir))
        bench_die("mkdtemp", "failed");
    char pf[128], script[1024];
    snprintf(pf, sizeof pf, "%s/port", dir);
    snprintf(script, sizeof script, "%s/%s", SBX_BENCH_SOURCE_DIR, script_rel);
    fake_pid = fork();
    if (fake_pid == 0) {
        execlp("python3", "python3", script, "--port-file", pf, "--api-key", BENCH_FAKE_KEY, "--dir", dir,
               (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 200 && !bench_fake_port; i++) {
        FILE *f = fopen(pf, "r");
        if (f) {
            if (fscanf(f, "%d", &bench_fake_port) != 1)
                bench_fake_port = 0;
            fclose(f);
        }
        usleep(50000);
    }
    if (!bench_fake_port)
        bench_die("fake", "did not start");
}

void bench_fake_stop(void)
{
    kill(fake_pid, SIGTERM);
    waitpid(fake_pid, NULL, 0);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "%s: could not remove %s\n", bench_name, dir);
}

const char *bench_fake_dir(void)
{
    return dir;
}

size_t bench_collect(char *d, size_t s, size_t n, void *ctx)
{
    struct bench_buf *b = ctx;
    b->p = realloc(b->p, b->len + s * n + 1);
    memcpy(b->p + b->len, d, s * n);
    b->len += s * n;
    b->p[b->len] = 0;
    return s * n;
}

int bench_fake_connections(CURL *c)
{
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/_fake/stats", bench_fake_port);
    struct bench_buf b = {NULL, 0};
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, bench_collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L);
    if (curl_easy_perform(c) != CURLE_OK || !b.p)
        bench_die("stats", "request failed");
    char *p = strstr(b.p, "\"connections\": ");
    int n = p ? atoi(p + 15) : -1;
    free(b.p);
    return n;
}

size_t bench_discard(char *d, size_t s, size_t n, void *ctx)
{
    (void)d;
    *(size_t *)ctx += s * n;
    return s * n;
}

