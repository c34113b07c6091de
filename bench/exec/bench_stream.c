/*
 * bench_stream.c - streaming a large output through exec: memory stays
 * bounded and throughput stays close to a plain pipe.
 *
 *   sbx:      sbx_exec("head -c SIZE /dev/zero") in a local sandbox, stdout
 *             into a sink that only counts bytes
 *   baseline: sh -c 'head -c SIZE /dev/zero | cat > /dev/null'
 *
 * Runs alternate (3 of each by default) and medians are compared.
 * Targets: peak RSS growth (VmHWM after the sbx runs minus VmHWM before
 * them, read from /proc/self/status) <= 8 MiB; sbx throughput >= 0.5 x the
 * baseline's.
 *
 *   bench_stream [MIB [RUNS]]   (default 256 MiB, 3 runs)
 * Exit status 0 when both targets are met, 1 when one is missed, 2 on errors.
 */
#include "bench_common.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define TARGET_RSS_KIB (8 * 1024)
#define TARGET_THROUGHPUT 0.5

static void fail(const char *what)
{
    fprintf(stderr, "bench_stream: %s: %s\n", what, strerror(errno));
    exit(2);
}

/* The pipeline baseline; returns its wall time in seconds. */
static double run_baseline(unsigned long long bytes)
{
    char script[128];
    snprintf(script, sizeof script, "head -c %llu /dev/zero | cat > /dev/null", bytes);
    char *const argv[] = {(char *)"/bin/sh", (char *)"-c", script, NULL};
    char *const envp[] = {(char *)"PATH=/usr/local/bin:/usr/bin:/bin", NULL};
    double t0 = bench_now();
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], NULL, NULL, argv, envp);
    if (rc != 0) {
        errno = rc;
        fail("posix_spawn");
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            fail("waitpid");
    double t = bench_now() - t0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "bench_stream: the baseline pipeline failed (status %d)\n",
                status);
        exit(2);
    }
    return t;
}

/* One streamed exec; returns its wall time in seconds. */
static double run_sbx(sbx_handle *h, unsigned long long bytes)
{
    char size[32];
    snprintf(size, sizeof size, "%llu", bytes);
    const char *const argv[] = {"head", "-c", size, "/dev/zero", NULL};
    struct bench_exec r;
    bench_exec_counted(h, argv, &r);
    if (r.rc != SBX_OK || r.res.exit_code != 0 || r.out_bytes != bytes ||
        r.res.out_bytes != bytes) {
        fprintf(stderr,
                "bench_stream: sbx_exec head: %s (exit %d, %llu bytes counted, "
                "%llu reported, %llu expected)\n",
                r.rc != SBX_OK ? r.err.message : "ok", r.res.exit_code,
                (unsigned long long)r.out_bytes, (unsigned long long)r.res.out_bytes,
                bytes);
        exit(2);
    }
    return r.seconds;
}

/* Reset VmHWM to the current RSS (Linux >= 4.0), so that the growth seen
 * afterwards is the streaming's own. Returns whether it worked. */
static bool reset_peak_rss(void)
{
    int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    bool ok = write(fd, "5", 1) == 1;
    close(fd);
    return ok;
}

int main(int argc, char **argv)
{
    if (argc > 3) {
        fprintf(stderr, "usage: bench_stream [MIB [RUNS]]\n");
        return 2;
    }
    unsigned long mib = argc >= 2 ? bench_parse_count(argv[1], "size in MiB") : 256;
    size_t runs = argc >= 3 ? bench_parse_count(argv[2], "run count") : 3;
    unsigned long long bytes = (unsigned long long)mib << 20;

    struct bench_env b;
    bench_env_open(&b);
    run_sbx(b.sandbox, 1 << 20); /* warm up: buffers, page cache, binaries */
    run_baseline(1 << 20);

    double *base = malloc(runs * sizeof *base), *sbx = malloc(runs * sizeof *sbx);
    if (!base || !sbx)
        fail("malloc");
    bool reset = reset_peak_rss();
    long hwm_before = bench_vmhwm_kib();
    for (size_t i = 0; i < runs; i++) {
        /* The baseline runs in child processes: our RSS is unaffected. */
        sbx[i] = run_sbx(b.sandbox, bytes);
        base[i] = run_baseline(bytes);
    }
    long hwm_after = bench_vmhwm_kib();
    if (hwm_before < 0 || hwm_after < 0) {
        fprintf(stderr, "bench_stream: VmHWM is not available in /proc/self/status\n");
        return 2;
    }
    double tb = bench_median(base, runs), ts = bench_median(sbx, runs);
    double mib_s_base = (double)mib / tb, mib_s_sbx = (double)mib / ts;
    double ratio = mib_s_sbx / mib_s_base;
    long growth = hwm_after - hwm_before;
    bool rss_ok = growth <= TARGET_RSS_KIB, tp_ok = ratio >= TARGET_THROUGHPUT;

    printf("stream %lu MiB of stdout, %zu runs each\n", mib, runs);
    printf("  head | cat > /dev/null:      median %7.3f s  %8.1f MiB/s\n", tb, mib_s_base);
    printf("  sbx_exec -> counting sink:   median %7.3f s  %8.1f MiB/s\n", ts, mib_s_sbx);
    printf("  throughput ratio sbx/cat: %.3f (target >= %.2f): %s\n", ratio,
           TARGET_THROUGHPUT, tp_ok ? "PASS" : "FAIL");
    printf("  peak RSS growth: %ld KiB (VmHWM %ld -> %ld KiB%s; target <= %d KiB): %s\n",
           growth, hwm_before, hwm_after, reset ? ", peak reset first" : "",
           TARGET_RSS_KIB, rss_ok ? "PASS" : "FAIL");
    free(base);
    free(sbx);
    bench_env_close(&b);
    return rss_ok && tp_ok ? 0 : 1;
}
