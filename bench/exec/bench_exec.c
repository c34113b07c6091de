/*
 * bench_exec.c - the cost of running a trivial command through libsbx and
 * the local provider, against the least a caller could do by hand.
 *
 *   baseline: posix_spawn("/bin/true") with stdout and stderr on two pipes,
 *             both read to EOF, then waitpid
 *   sbx:      sbx_exec("/bin/true") in an existing local sandbox with two
 *             counting sinks
 *
 * The two alternate in one process (so both see the same machine state) and
 * the medians are compared. Target: sbx median <= 1.25 x baseline median.
 *
 *   bench_exec [ITERATIONS]   (default 1000 of each, after 50 warm-up runs)
 * Exit status 0 when the target is met, 1 when missed, 2 on errors.
 */
#include "bench_common.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define TARGET_RATIO 1.25
#define WARMUP 50

static const char *const true_argv[] = {"/bin/true", NULL};

static void fail(const char *what)
{
    fprintf(stderr, "bench_exec: %s: %s\n", what, strerror(errno));
    exit(2);
}

/* One baseline run; returns its wall time in seconds. */
static double run_baseline(void)
{
    static char *const empty_env[] = {NULL};
    double t0 = bench_now();
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0)
        fail("pipe2");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_adddup2(&fa, err[1], 2);
    pid_t pid;
    int rc = posix_spawn(&pid, true_argv[0], &fa, NULL, (char *const *)true_argv,
                         empty_env);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        errno = rc;
        fail("posix_spawn");
    }
    close(out[1]);
    close(err[1]);
    struct pollfd pfd[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
    int open_fds = 2;
    char buf[4096];
    while (open_fds > 0) {
        if (poll(pfd, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            fail("poll");
        }
        for (int i = 0; i < 2; i++) {
            if (pfd[i].fd < 0 || !pfd[i].revents)
                continue;
            ssize_t n = read(pfd[i].fd, buf, sizeof buf);
            if (n <= 0) {
                close(pfd[i].fd);
                pfd[i].fd = -1;
                open_fds--;
            }
        }
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            fail("waitpid");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "bench_exec: /bin/true failed (status %d)\n", status);
        exit(2);
    }
    return bench_now() - t0;
}

/* One run through libsbx; returns its wall time in seconds. */
static double run_sbx(sbx_handle *h)
{
    struct bench_exec r;
    bench_exec_counted(h, true_argv, &r);
    if (r.rc != SBX_OK || r.res.exit_code != 0) {
        fprintf(stderr, "bench_exec: sbx_exec /bin/true: %s (exit %d)\n",
                r.rc != SBX_OK ? r.err.message : "ok", r.res.exit_code);
        exit(2);
    }
    return r.seconds;
}

int main(int argc, char **argv)
{
    if (argc > 2) {
        fprintf(stderr, "usage: bench_exec [ITERATIONS]\n");
        return 2;
    }
    size_t n = argc == 2 ? bench_parse_count(argv[1], "iteration count") : 1000;
    struct bench_env b;
    bench_env_open(&b);

    for (int i = 0; i < WARMUP; i++) {
        run_baseline();
        run_sbx(b.sandbox);
    }
    double *base = malloc(n * sizeof *base), *sbx = malloc(n * sizeof *sbx);
    if (!base || !sbx)
        fail("malloc");
    for (size_t i = 0; i < n; i++) {
        /* Alternate which goes first so neither always runs on a warm cache. */
        if (i % 2) {
            base[i] = run_baseline();
            sbx[i] = run_sbx(b.sandbox);
        } else {
            sbx[i] = run_sbx(b.sandbox);
            base[i] = run_baseline();
        }
    }
    double mb = bench_median(base, n), ms = bench_median(sbx, n);
    double ratio = ms / mb;
    printf("exec /bin/true, %zu runs each (interleaved, after %d warm-up runs)\n", n,
           WARMUP);
    printf("  posix_spawn + 2 pipes + waitpid: median %8.1f us\n", mb * 1e6);
    printf("  sbx_exec (local provider):       median %8.1f us\n", ms * 1e6);
    printf("  ratio sbx/baseline: %.3f (target <= %.2f): %s\n", ratio, TARGET_RATIO,
           ratio <= TARGET_RATIO ? "PASS" : "FAIL");
    free(base);
    free(sbx);
    bench_env_close(&b);
    return ratio <= TARGET_RATIO ? 0 : 1;
}
