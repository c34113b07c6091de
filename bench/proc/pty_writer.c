/*
 * pty_writer.c - the writer of bench_pty's throughput run: N zero bytes
 * to stdout in writes of CHUNK bytes (default 128 KiB, what coreutils
 * `cat` uses for a large file), then exit 0.
 *
 * Linked statically, so that one binary runs on both sides of the
 * comparison: on the benchmark's own PTY on the host, and copied into the
 * sandbox (a busybox container has no C library) on the sandbox's PTY.
 * With a different writer on each side (the host's coreutils `head` and
 * the container's busybox `head`, which writes 1 KiB per call on a
 * terminal through stdio) the ratio measured the writers, not sbx.
 *
 * Usage: pty_writer N [CHUNK]
 */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    unsigned long long n = strtoull(argv[1], NULL, 10);
    size_t chunk = argc > 2 ? strtoul(argv[2], NULL, 10) : (size_t)128 << 10;
    static char buf[1 << 20];
    if (chunk == 0 || chunk > sizeof buf)
        return 2;
    while (n) {
        size_t k = n < chunk ? (size_t)n : chunk;
        ssize_t w = write(1, buf, k);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return 1;
        n -= (unsigned long long)w;
    }
    return 0;
}
