/*
 * stdin_feeder.c - the stdin feeder thread (stdin_feeder.h).
 *
 * SIGPIPE: the thread blocks it for itself, so writing to a pipe whose
 * reader is gone fails with EPIPE instead of killing the process; the
 * signal then stays pending on this thread only and is discarded when it
 * exits. Sockets are written with MSG_NOSIGNAL anyway.
 */
#include "stdin_feeder.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

struct sbxs_feeder {
    const struct sbx_source *src;
    int fd;
    unsigned flags;
    size_t chunk;
    int stop_fd; /* eventfd: readable once the feeder must stop */
    int done_fd; /* eventfd: readable once the feed has ended */
    atomic_int failed;
    int complete; /* read after the join */
    unsigned char *buf;
    pthread_t thread;
};

static int stop_requested(const struct sbxs_feeder *f)
{
    struct pollfd p = {f->stop_fd, POLLIN, 0};
    return poll(&p, 1, 0) > 0;
}

/* The command can no longer read: the peer hung up (socket) or the
 * pipe's read end is closed (POLLERR on a pipe's write end). */
static int hung_up(const struct pollfd *p)
{
    return (p->revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

/*
 * Before each read, wait until the source has input (when it offers a
 * pollable fd), the command can no longer read, or a stop comes: then a
 * quiet source that stays open never keeps exec from returning after the
 * command exited. Returns 1 to read, 0 to wait again, -1 to stop.
 */
static int wait_for_input(struct sbxs_feeder *f)
{
    int fd = f->src->poll_fd ? f->src->poll_fd(f->src->ctx) : -1;
    struct pollfd pfd[3] = {
        {.fd = f->stop_fd, .events = POLLIN},
        {.fd = f->fd, .events = (f->flags & SBXS_FEED_SOCKET) ? POLLRDHUP : 0},
        {.fd = fd, .events = POLLIN}};
    if (poll(pfd, fd >= 0 ? 3 : 2, fd >= 0 ? -1 : 0) < 0)
        return errno == EINTR ? 0 : 1;
    if (pfd[0].revents || hung_up(&pfd[1]))
        return -1;
    if (fd < 0)
        return 1; /* not pollable: read may block until it has input */
    return pfd[2].revents != 0 ? 1 : 0;
}

/* Write all of buf, waiting for room or a stop. 0, or -1 when the command
 * stopped reading (its right: the rest of the input is dropped) or a stop
 * came. */
static int write_all(struct sbxs_feeder *f, const unsigned char *buf, size_t n)
{
    size_t off = 0;
    while (off < n) {
        ssize_t w = (f->flags & SBXS_FEED_SOCKET)
                        ? send(f->fd, buf + off, n - off, MSG_NOSIGNAL)
                        : write(f->fd, buf + off, n - off);
        if (w > 0) {
            off += (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd pfd[2] = {{.fd = f->fd, .events = POLLOUT},
                                    {.fd = f->stop_fd, .events = POLLIN}};
            if (poll(pfd, 2, -1) < 0 && errno != EINTR)
                return -1;
            if (pfd[1].revents != 0)
                return -1;
            continue;
        }
        return -1;
    }
    return 0;
}

static void *feeder_main(void *arg)
{
    struct sbxs_feeder *f = arg;
    sigset_t pipe_set;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, NULL);
    for (;;) {
        int wait = wait_for_input(f);
        if (wait < 0)
            break;
        if (wait == 0)
            continue;
        long n = f->src->read(f->src->ctx, f->buf, f->chunk);
        if (n < 0) {
            /* The host has set the call's error already. */
            atomic_store(&f->failed, 1);
            break;
        }
        if (stop_requested(f))
            break; /* what was read is not written: never a false end */
        if (n == 0) {
            f->complete = 1;
            break;
        }
        if ((size_t)n > f->chunk)
            n = (long)f->chunk; /* a misbehaving read: never past the buffer */
        if (write_all(f, f->buf, (size_t)n) != 0)
            break;
    }
    /* End of input for the command. */
    if (f->flags & SBXS_FEED_SOCKET) {
        shutdown(f->fd, SHUT_WR);
    } else {
        close(f->fd);
    }
    f->fd = -1;
    (void)eventfd_write(f->done_fd, 1);
    return NULL;
}

int sbxs_feeder_start(struct sbxs_feeder **out, const struct sbx_source *src,
                      int fd, unsigned flags, size_t chunk)
{
    *out = NULL;
    struct sbxs_feeder *f = calloc(1, sizeof *f);
    int err = f ? 0 : ENOMEM;
    if (f) {
        f->src = src;
        f->fd = fd;
        f->flags = flags;
        f->chunk = chunk;
        atomic_init(&f->failed, 0);
        f->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        f->done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        f->buf = malloc(chunk);
        if (f->stop_fd < 0 || f->done_fd < 0)
            err = errno;
        else if (!f->buf || chunk == 0)
            err = ENOMEM;
        else
            err = pthread_create(&f->thread, NULL, feeder_main, f);
    }
    if (err == 0) {
        *out = f;
        return 0;
    }
    if (!(flags & SBXS_FEED_SOCKET) && fd >= 0)
        close(fd);
    if (f) {
        if (f->stop_fd >= 0)
            close(f->stop_fd);
        if (f->done_fd >= 0)
            close(f->done_fd);
        free(f->buf);
        free(f);
    }
    return err;
}

int sbxs_feeder_done_fd(const struct sbxs_feeder *f)
{
    return f->done_fd;
}

int sbxs_feeder_failed(const struct sbxs_feeder *f)
{
    return atomic_load(&f->failed);
}

void sbxs_feeder_stop(struct sbxs_feeder *f)
{
    if (f)
        (void)eventfd_write(f->stop_fd, 1);
}

int sbxs_feeder_finish(struct sbxs_feeder *f, int *complete)
{
    if (!f)
        return 0;
    sbxs_feeder_stop(f);
    pthread_join(f->thread, NULL);
    int failed = atomic_load(&f->failed);
    if (complete)
        *complete = f->complete;
    close(f->stop_fd);
    close(f->done_fd);
    free(f->buf);
    free(f);
    return failed;
}
