/*
 * test_stdin_feeder.c - the stdin feeder thread (shared/stdin_feeder.c):
 * everything reaches the command, a command that stops reading or a stop
 * request ends the feed promptly, a failing source is reported, a stopped
 * feed never looks complete, and sockets are shut down, not closed.
 */
#include "stdin_feeder.h"

#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* A source of `total` bytes of a repeating pattern; fails at `fail_at`
 * when set; `poll_fd` >= 0 makes it pollable through that fd. */
struct pattern_src {
    size_t total, given, fail_at;
    int poll_fd;
};

static long pattern_read(void *ctx, void *buf, size_t cap)
{
    struct pattern_src *p = ctx;
    if (p->fail_at && p->given >= p->fail_at)
        return -1;
    size_t n = p->total - p->given;
    if (n > cap)
        n = cap;
    for (size_t i = 0; i < n; i++)
        ((unsigned char *)buf)[i] = (unsigned char)((p->given + i) % 251);
    p->given += n;
    return (long)n;
}

static int pattern_poll_fd(void *ctx)
{
    return ((struct pattern_src *)ctx)->poll_fd;
}

static struct sbx_source source_of(struct pattern_src *p)
{
    struct sbx_source s = SBX_SOURCE_INIT(p, pattern_read);
    s.poll_fd = pattern_poll_fd;
    return s;
}

static long long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000LL + t.tv_nsec / 1000000;
}

static void make_pipe(int p[2])
{
    cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
    cr_assert_eq(fcntl(p[1], F_SETFL, O_NONBLOCK), 0);
}

Test(stdin_feeder, pipe_gets_everything_then_end_of_file)
{
    int p[2];
    make_pipe(p);
    struct pattern_src ps = {.total = 3 * 1024 * 1024 + 17, .poll_fd = -1};
    struct sbx_source src = source_of(&ps);
    struct sbxs_feeder *f;
    cr_assert_eq(sbxs_feeder_start(&f, &src, p[1], 0, 64 * 1024), 0);
    unsigned char buf[8192];
    size_t got = 0;
    int bad = 0;
    for (;;) {
        ssize_t n = read(p[0], buf, sizeof buf);
        cr_assert_geq(n, 0);
        if (n == 0)
            break; /* the feeder closed the write end */
        for (ssize_t i = 0; i < n; i++)
            bad |= buf[i] != (unsigned char)((got + (size_t)i) % 251);
        got += (size_t)n;
    }
    cr_assert_eq(got, ps.total);
    cr_assert_eq(bad, 0, "the bytes arrived changed");
    struct pollfd d = {sbxs_feeder_done_fd(f), POLLIN, 0};
    cr_assert_eq(poll(&d, 1, 2000), 1, "done fd never became readable");
    int complete = 0;
    cr_assert_eq(sbxs_feeder_finish(f, &complete), 0);
    cr_assert_eq(complete, 1);
    close(p[0]);
}

Test(stdin_feeder, command_that_stops_reading_ends_the_feed)
{
    int p[2];
    make_pipe(p);
    /* Far more than a pipe holds: the feeder must block, then see EPIPE
     * (not die of SIGPIPE) when the reader goes away. */
    struct pattern_src ps = {.total = 64 * 1024 * 1024, .poll_fd = -1};
    struct sbx_source src = source_of(&ps);
    struct sbxs_feeder *f;
    cr_assert_eq(sbxs_feeder_start(&f, &src, p[1], 0, 64 * 1024), 0);
    usleep(50 * 1000);
    close(p[0]);
    struct pollfd d = {sbxs_feeder_done_fd(f), POLLIN, 0};
    cr_assert_eq(poll(&d, 1, 2000), 1, "the feed did not end");
    int complete = 1;
    cr_assert_eq(sbxs_feeder_finish(f, &complete), 0);
    cr_assert_eq(complete, 0, "an input cut short counted as complete");
    cr_assert_lt(ps.given, ps.total);
}

Test(stdin_feeder, stop_ends_a_quiet_pollable_source_at_once)
{
    int p[2], quiet[2];
    make_pipe(p);
    cr_assert_eq(pipe2(quiet, O_CLOEXEC), 0); /* never written: never readable */
    struct pattern_src ps = {.total = 10, .poll_fd = quiet[0]};
    struct sbx_source src = source_of(&ps);
    struct sbxs_feeder *f;
    cr_assert_eq(sbxs_feeder_start(&f, &src, p[1], 0, 4096), 0);
    usleep(20 * 1000);
    long long t0 = now_ms();
    int complete = 1;
    cr_assert_eq(sbxs_feeder_finish(f, &complete), 0);
    cr_assert_lt(now_ms() - t0, 500);
    cr_assert_eq(complete, 0);
    cr_assert_eq(ps.given, 0, "the source was read although it had no input");
    char c;
    cr_assert_eq(read(p[0], &c, 1), 0, "the write end was not closed");
    close(p[0]);
    close(quiet[0]);
    close(quiet[1]);
}

Test(stdin_feeder, failing_source_is_reported)
{
    int p[2];
    make_pipe(p);
    struct pattern_src ps = {.total = 1 << 20, .fail_at = 8192, .poll_fd = -1};
    struct sbx_source src = source_of(&ps);
    struct sbxs_feeder *f;
    cr_assert_eq(sbxs_feeder_start(&f, &src, p[1], 0, 4096), 0);
    struct pollfd d = {sbxs_feeder_done_fd(f), POLLIN, 0};
    cr_assert_eq(poll(&d, 1, 2000), 1);
    cr_assert_neq(sbxs_feeder_failed(f), 0);
    int complete = 1;
    cr_assert_neq(sbxs_feeder_finish(f, &complete), 0);
    cr_assert_eq(complete, 0);
    close(p[0]);
}

Test(stdin_feeder, socket_is_shut_down_not_closed_and_hangup_stops)
{
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    cr_assert_eq(fcntl(sv[0], F_SETFL, O_NONBLOCK), 0);
    struct pattern_src ps = {.total = 1000, .poll_fd = -1};
    struct sbx_source src = source_of(&ps);
    struct sbxs_feeder *f;
    cr_assert_eq(sbxs_feeder_start(&f, &src, sv[0], SBXS_FEED_SOCKET, 4096), 0);
    char buf[2048];
    size_t got = 0;
    ssize_t n;
    while ((n = read(sv[1], buf, sizeof buf)) > 0)
        got += (size_t)n;
    cr_assert_eq(n, 0);
    cr_assert_eq(got, 1000);
    int complete = 0;
    cr_assert_eq(sbxs_feeder_finish(f, &complete), 0);
    cr_assert_eq(complete, 1);
    /* Still open: the other direction works. */
    cr_assert_eq(write(sv[1], "x", 1), 1);
    cr_assert_eq(read(sv[0], buf, 1), 1);
    close(sv[1]);

    /* A peer that hangs up ends a feed whose source would go on for ever. */
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv + 0), 0);
    cr_assert_eq(fcntl(sv[0], F_SETFL, O_NONBLOCK), 0);
    struct pattern_src big = {.total = (size_t)1 << 40, .poll_fd = -1};
    struct sbx_source bsrc = source_of(&big);
    cr_assert_eq(sbxs_feeder_start(&f, &bsrc, sv[0], SBXS_FEED_SOCKET, 4096), 0);
    usleep(20 * 1000);
    close(sv[1]);
    struct pollfd d = {sbxs_feeder_done_fd(f), POLLIN, 0};
    cr_assert_eq(poll(&d, 1, 2000), 1, "a hang-up did not end the feed");
    cr_assert_eq(sbxs_feeder_finish(f, &complete), 0);
    cr_assert_eq(complete, 0);
    close(sv[0]);
}
