/*
 * bench_metrics.c - the cost of the op sample spool (shared/op_samples.h).
 *
 *  1. sbxs_op_sample_record alone, N times, while this process holds the
 *     spool's server lock (every call appends a record; files rotate at
 *     4 MiB), and with no server (the call returns after a name check and
 *     a clock read; the lock is looked at every 5 s).
 *  2. sbx_exec of /bin/true on the local provider, in child processes that
 *     alternate: without a server (nothing recorded) and with one (each
 *     exec appends its record). The medians are compared.
 *
 *   bench_metrics [N]   (default 200000 records; 2000 execs per side)
 *
 * Target: recording costs microseconds, not milliseconds: exits 1 when a
 * record costs more than 20 us or an exec more than 50 us extra.
 */
#include "bench_common.h"
#include "op_samples.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define EXEC_ROUNDS 10   /* child processes per side */
#define EXECS_PER_ROUND 200

static int lock_server(const char *spool)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", spool, SBXS_OP_SPOOL_SERVER);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) != 0) {
        perror("bench_metrics: server lock");
        exit(2);
    }
    return fd;
}

static double record_ns(unsigned long n)
{
    sbxs_op_sample_reset();
    double t0 = bench_now();
    for (unsigned long i = 0; i < n; i++)
        sbxs_op_sample_record("local", "exec", 0, 1000 + i);
    return (bench_now() - t0) * 1e9 / (double)n;
}

/* A child: EXECS_PER_ROUND timed execs; writes the median (us) to fd. */
static void exec_round(int fd)
{
    struct bench_env b;
    bench_env_open(&b);
    static const char *const argv[] = {"/bin/true", NULL};
    double t[EXECS_PER_ROUND];
    for (size_t i = 0; i < EXECS_PER_ROUND; i++) {
        struct bench_exec r;
        bench_exec_counted(b.sandbox, argv, &r);
        if (r.rc != SBX_OK) {
            fprintf(stderr, "bench_metrics: exec: %s\n", r.err.message);
            _exit(2);
        }
        t[i] = r.seconds * 1e6;
    }
    double m = bench_median(t, EXECS_PER_ROUND);
    bench_env_close(&b);
    if (write(fd, &m, sizeof m) != (ssize_t)sizeof m)
        _exit(2);
    _exit(0);
}

static double run_round(bool with_server)
{
    int p[2];
    if (pipe(p) != 0)
        exit(2);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        if (!with_server)
            setenv("SBX_METRICS_DIR", "off", 1);
        exec_round(p[1]);
    }
    close(p[1]);
    double m = -1;
    if (read(p[0], &m, sizeof m) != (ssize_t)sizeof m)
        m = -1;
    close(p[0]);
    int st;
    waitpid(pid, &st, 0);
    if (m < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "bench_metrics: an exec round failed\n");
        exit(2);
    }
    return m;
}

static size_t spool_bytes(const char *spool)
{
    char cmd[4300];
    snprintf(cmd, sizeof cmd, "du -sb '%s' | cut -f1", spool);
    FILE *f = popen(cmd, "r");
    size_t n = 0;
    if (f) {
        if (fscanf(f, "%zu", &n) != 1)
            n = 0;
        pclose(f);
    }
    return n;
}

/* The baseline: the same 64-byte O_APPEND write(2) with nothing around it. */
static double raw_write_ns(const char *spool, unsigned long n)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/raw.bin", spool);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0)
        exit(2);
    struct sbxs_op_sample s;
    memset(&s, 0, sizeof s);
    double t0 = bench_now();
    for (unsigned long i = 0; i < n; i++)
        if (write(fd, &s, sizeof s) != (ssize_t)sizeof s)
            exit(2);
    double ns = (bench_now() - t0) * 1e9 / (double)n;
    close(fd);
    unlink(path);
    return ns;
}

int main(int argc, char **argv)
{
    unsigned long n = argc > 1 ? bench_parse_count(argv[1], "N") : 200000;
    char spool[] = "/tmp/sbx-bench-metrics-XXXXXX";
    if (!mkdtemp(spool)) {
        perror("mkdtemp");
        return 2;
    }
    setenv("SBX_METRICS_DIR", spool, 1);

    double off_ns = record_ns(n); /* no server yet */
    int lock = lock_server(spool);
    double on_ns = record_ns(n);
    sbxs_op_sample_reset(); /* closes this process's file */
    size_t bytes = spool_bytes(spool);
    double raw_ns = raw_write_ns(spool, n);
    printf("record, server running: %.0f ns per sample (%lu samples, %zu bytes in the spool)\n",
           on_ns, n, bytes);
    printf("baseline, a bare 64-byte O_APPEND write(2): %.0f ns\n", raw_ns);
    printf("record, no server:      %.0f ns per sample\n", off_ns);

    double with[EXEC_ROUNDS], without[EXEC_ROUNDS];
    for (size_t i = 0; i < EXEC_ROUNDS; i++) {
        without[i] = run_round(false);
        with[i] = run_round(true);
    }
    double mw = bench_median(with, EXEC_ROUNDS), mo = bench_median(without, EXEC_ROUNDS);
    printf("exec /bin/true (local), median of %d rounds x %d: %.1f us without a server, "
           "%.1f us with one (%+.1f us)\n",
           EXEC_ROUNDS, EXECS_PER_ROUND, mo, mw, mw - mo);
    close(lock);
    bench_remove_tree(spool);
    bool complete = bytes >= n * sizeof(struct sbxs_op_sample);
    if (!complete)
        printf("FAIL: samples were lost (%zu bytes for %lu samples)\n", bytes, n);
    bool ok = complete && on_ns < 20000 && mw - mo < 50;
    printf("%s: a record costs microseconds (target < 20 us per record, < 50 us per exec)\n",
           ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
}
