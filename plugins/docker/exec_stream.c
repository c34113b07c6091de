/*
 * exec_stream.c - the two directions of an exec's hijacked connection.
 *
 * Input: a thread copies the caller's stdin source to the socket and shuts
 * down its write side at the source's end, which the daemon turns into end
 * of file on the command's stdin. It can be told to stop (an eventfd next
 * to the source and the socket in its poll): it then shuts down its side
 * without reading further, so the command sees an end of input that is not
 * the source's end; `complete` tells the two apart afterwards.
 *
 * Output: the daemon multiplexes stdout and stderr as frames; they are
 * parsed as bytes arrive and each payload piece goes straight to its sink.
 * The one exception is a stdout that starts like the daemon's own start
 * error ("OCI runtime exec failed"): those first bytes are held until the
 * daemon, asked through exec inspect, says whether the exec got a process.
 * The decision comes from the daemon's record, never from the text, so a
 * command printing the same words loses nothing.
 */
#include "exec_internal.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

/* Bytes the stdin feeder moves per read and send. */
#define FEED_CHUNK (256 * 1024)
/* How the daemon's message about a command that could not start begins. */
#define START_ERROR_PREFIX "OCI runtime exec failed"

/* ---- stdin feeder ----------------------------------------------------- */

static int stop_requested(const struct exec_feeder *f)
{
    struct pollfd p = {f->stop_fd, POLLIN, 0};
    return poll(&p, 1, 0) > 0;
}

/*
 * Before each read, wait until the source has input (when it offers a
 * pollable fd), the connection ends (the command exited: the daemon closed
 * it) or we are told to stop. Then a quiet source that stays open never
 * keeps exec from returning. Returns 1 to read, 0 to wait again, -1 to
 * stop.
 */
static int wait_for_input(struct exec_feeder *f)
{
    int fd = f->in->poll_fd ? f->in->poll_fd(f->in->ctx) : -1;
    struct pollfd pfd[3] = {{.fd = f->stop_fd, .events = POLLIN},
                            {.fd = f->sock, .events = POLLRDHUP},
                            {.fd = fd, .events = POLLIN}};
    if (poll(pfd, fd >= 0 ? 3 : 2, fd >= 0 ? -1 : 0) < 0)
        return errno == EINTR ? 0 : 1;
    if (pfd[0].revents)
        return -1;
    if (pfd[1].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))
        return -1;
    if (fd < 0)
        return 1; /* not pollable: read may block until it has input */
    return pfd[2].revents != 0 ? 1 : 0;
}

/* Send all of buf. 0, or -1 when the connection is gone or we must stop. */
static int send_all(struct exec_feeder *f, const char *buf, size_t n)
{
    size_t off = 0;
    while (off < n) {
        ssize_t w = send(f->sock, buf + off, n - off, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            /* curl keeps the socket non-blocking: wait until writable */
            struct pollfd pfd[2] = {{f->sock, POLLOUT, 0}, {f->stop_fd, POLLIN, 0}};
            if (poll(pfd, 2, -1) < 0 && errno != EINTR)
                return -1;
            if (pfd[1].revents)
                return -1;
            continue;
        }
        if (w <= 0)
            return -1; /* the command is gone or stopped reading for good */
        off += (size_t)w;
    }
    return 0;
}

static void *feed_stdin(void *arg)
{
    struct exec_feeder *f = arg;
    char *buf = malloc(FEED_CHUNK);
    if (!buf)
        f->failed = 1;
    while (buf) {
        int wait = wait_for_input(f);
        if (wait < 0)
            break;
        if (wait == 0)
            continue;
        long n = f->in->read(f->in->ctx, buf, FEED_CHUNK);
        if (n < 0) {
            f->failed = 1;
            break;
        }
        /* told to stop while reading: what was read is not sent, so a
         * stopped feed never completes the input */
        if (stop_requested(f))
            break;
        if (n == 0) {
            f->complete = 1;
            break;
        }
        if ((size_t)n > FEED_CHUNK)
            n = FEED_CHUNK; /* a misbehaving read: never past the buffer */
        if (send_all(f, buf, (size_t)n) != 0)
            break;
    }
    shutdown(f->sock, SHUT_WR);
    free(buf);
    return NULL;
}

int exec_feeder_start(struct exec_feeder *f, const struct sbx_source *in, int sock)
{
    memset(f, 0, sizeof *f);
    f->in = in;
    f->sock = sock;
    f->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (f->stop_fd < 0 || sock < 0)
        goto fail;
    if (pthread_create(&f->thread, NULL, feed_stdin, f) != 0)
        goto fail;
    f->running = 1;
    return SBX_OK;
fail:
    if (f->stop_fd >= 0)
        close(f->stop_fd);
    f->stop_fd = -1;
    return SBX_E_INTERNAL;
}

void exec_feeder_stop(struct exec_feeder *f)
{
    if (f->running) {
        uint64_t one = 1;
        ssize_t w = write(f->stop_fd, &one, sizeof one);
        (void)w; /* a counter that is already non-zero is just as readable */
    }
}

void exec_feeder_join(struct exec_feeder *f)
{
    if (!f->running)
        return;
    pthread_join(f->thread, NULL);
    f->running = 0;
    close(f->stop_fd);
    f->stop_fd = -1;
}

/* ---- frame demultiplexing ------------------------------------------- */

static int write_out(struct exec_demux *d, const char *p, size_t n)
{
    d->oc->out_bytes += n;
    const struct sbx_sink *s = d->spec->out;
    if (d->discard || !s || !s->write || n == 0)
        return 0;
    return s->write(s->ctx, p, n);
}

static void keep_daemon_text(struct exec_demux *d, const char *p, size_t n)
{
    char *msg = d->oc->start_msg;
    size_t have = strlen(msg);
    size_t room = sizeof d->oc->start_msg - 1 - have;
    size_t take = n < room ? n : room;
    memcpy(msg + have, p, take);
    msg[have + take] = '\0';
}

/* Deliver what was held, then decide nothing more. */
static int release(struct exec_demux *d)
{
    d->hold = 2;
    size_t n = d->held_len;
    d->held_len = 0;
    return write_out(d, d->held, n);
}

static int deliver_stdout(struct exec_demux *d, const char *p, size_t n)
{
    if (d->daemon_text) {
        keep_daemon_text(d, p, n);
        return 0;
    }
    if (d->hold == 2)
        return write_out(d, p, n);
    /* still undecided: does stdout begin like the daemon's message? */
    const size_t plen = sizeof START_ERROR_PREFIX - 1;
    while (n > 0 && d->held_len < plen) {
        if (*p != START_ERROR_PREFIX[d->held_len]) {
            int rc = release(d);
            return rc ? rc : write_out(d, p, n);
        }
        d->held[d->held_len++] = *p++;
        n--;
        d->hold = 1;
    }
    if (d->held_len < plen)
        return 0; /* a prefix of it so far: wait for more */
    if (!d->started || d->started(d->started_ctx)) {
        int rc = release(d);
        return rc ? rc : write_out(d, p, n);
    }
    d->daemon_text = 1;
    d->hold = 2;
    keep_daemon_text(d, d->held, d->held_len);
    d->held_len = 0;
    keep_daemon_text(d, p, n);
    return 0;
}

static int deliver(struct exec_demux *d, const char *p, size_t n)
{
    if (d->stream == 1)
        return deliver_stdout(d, p, n);
    d->oc->err_bytes += n;
    const struct sbx_sink *s = d->spec->err;
    if (d->discard || !s || !s->write)
        return 0;
    return s->write(s->ctx, p, n);
}

int exec_demux_feed(struct exec_demux *d, const char *p, size_t n)
{
    while (n > 0) {
        if (d->left == 0) {
            size_t take = 8 - d->hdr_len;
            if (take > n)
                take = n;
            memcpy(d->hdr + d->hdr_len, p, take);
            d->hdr_len += take;
            p += take;
            n -= take;
            if (d->hdr_len < 8)
                return 0;
            d->hdr_len = 0;
            if (d->hdr[0] > 3 || d->hdr[1] || d->hdr[2] || d->hdr[3])
                return -1;
            d->stream = d->hdr[0] == 1 ? 1 : 2;
            d->left = (uint32_t)d->hdr[4] << 24 | (uint32_t)d->hdr[5] << 16 |
                      (uint32_t)d->hdr[6] << 8 | (uint32_t)d->hdr[7];
            continue;
        }
        size_t take = n < d->left ? n : d->left;
        int rc = deliver(d, p, take);
        d->left -= (uint32_t)take;
        p += take;
        n -= take;
        if (rc != 0)
            return rc;
    }
    return 0;
}

int exec_demux_finish(struct exec_demux *d, int start_failed)
{
    if (d->held_len == 0)
        return 0;
    if (start_failed) {
        keep_daemon_text(d, d->held, d->held_len);
        d->held_len = 0;
        return 0;
    }
    return release(d);
}
