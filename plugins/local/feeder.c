/*
 * feeder.c - the stdin feeder of a `local` command: a thread that reads the
 * caller's source and writes it into the command's stdin pipe.
 *
 * Why a thread: a source may block until its own input arrives (a terminal,
 * a socket). Reading it from the output loop would stop stdout and stderr
 * from streaming meanwhile, so the feeder runs beside that loop.
 *
 * SIGPIPE: the thread blocks it for itself, so writing to a pipe whose
 * reader is gone fails with EPIPE instead of killing the host; the signal
 * then stays pending on this thread only and is discarded when it exits.
 */
#include "feeder.h"

#include "local.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct local_feeder {
    const struct sbx_source *src;
    int fd;      /* the pipe's write end (non-blocking), closed by the thread */
    int stop_fd; /* eventfd: the exec loop asks the thread to stop */
    int done_fd; /* eventfd: the thread has finished */
    atomic_int failed;
    unsigned char *buf;
    pthread_t thread;
};

/* Write all of buf, waiting for room in the pipe or a stop request.
 * Returns 0, or -1 when the command stopped reading or a stop came. */
static int write_all(struct local_feeder *f, const unsigned char *buf,
                     size_t len)
{
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(f->fd, buf + off, len - off);
        if (w > 0) {
            off += (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN) {
            struct pollfd pfd[2] = {{.fd = f->fd, .events = POLLOUT},
                                    {.fd = f->stop_fd, .events = POLLIN}};
            if (poll(pfd, 2, -1) < 0 && errno != EINTR)
                return -1;
            if (pfd[1].revents != 0)
                return -1;
            continue;
        }
        /* EPIPE: the command closed its stdin, which is its right; the
         * rest of the input is dropped. */
        return -1;
    }
    return 0;
}

/*
 * Before each read, wait until the source has input (when it offers a
 * pollable fd) or a stop comes: then a quiet source that stays open never
 * keeps exec from returning after the command exited. Returns 1 to read,
 * 0 to wait again, -1 to stop.
 */
static int wait_for_input(struct local_feeder *f)
{
    int fd = f->src->poll_fd ? f->src->poll_fd(f->src->ctx) : -1;
    if (fd < 0)
        return 1; /* not pollable: read may block until it has input */
    struct pollfd pfd[2] = {{.fd = fd, .events = POLLIN},
                            {.fd = f->stop_fd, .events = POLLIN}};
    if (poll(pfd, 2, -1) < 0)
        return errno == EINTR ? 0 : 1;
    if (pfd[1].revents != 0)
        return -1;
    return pfd[0].revents != 0 ? 1 : 0;
}

static void *feeder_main(void *arg)
{
    struct local_feeder *f = arg;
    sigset_t pipe_set;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, NULL);

    for (;;) {
        int wait = wait_for_input(f);
        if (wait < 0)
            break; /* stop requested: the command is done with stdin */
        if (wait == 0)
            continue;
        long n = f->src->read(f->src->ctx, f->buf, LOCAL_CHUNK);
        if (n < 0) {
            /* The host has set the call's error already. */
            atomic_store(&f->failed, 1);
            break;
        }
        if (n == 0 || (size_t)n > LOCAL_CHUNK)
            break;
        if (write_all(f, f->buf, (size_t)n) != 0)
            break;
    }
    /* End of input for the command. */
    close(f->fd);
    f->fd = -1;
    (void)eventfd_write(f->done_fd, 1);
    return NULL;
}

int local_feeder_start(struct local_feeder **out, const struct sbx_source *src,
                       int fd)
{
    struct local_feeder *f = calloc(1, sizeof *f);
    if (f == NULL) {
        close(fd);
        return ENOMEM;
    }
    f->src = src;
    f->fd = fd;
    f->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    f->done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    f->buf = malloc(LOCAL_CHUNK);
    atomic_init(&f->failed, 0);
    int err = 0;
    if (f->stop_fd < 0 || f->done_fd < 0)
        err = errno;
    else if (f->buf == NULL)
        err = ENOMEM;
    else
        err = pthread_create(&f->thread, NULL, feeder_main, f);
    if (err != 0) {
        close(f->fd);
        if (f->stop_fd >= 0)
            close(f->stop_fd);
        if (f->done_fd >= 0)
            close(f->done_fd);
        free(f->buf);
        free(f);
        return err;
    }
    *out = f;
    return 0;
}

int local_feeder_done_fd(const struct local_feeder *f)
{
    return f->done_fd;
}

int local_feeder_failed(const struct local_feeder *f)
{
    return atomic_load(&f->failed);
}

int local_feeder_stop(struct local_feeder *f)
{
    if (f == NULL)
        return 0;
    (void)eventfd_write(f->stop_fd, 1);
    pthread_join(f->thread, NULL);
    int failed = atomic_load(&f->failed);
    close(f->stop_fd);
    close(f->done_fd);
    free(f->buf);
    free(f);
    return failed;
}
