/*
 * stream_pipe.c - a provider's pushed stream read as a source
 * (stream_pipe.h).
 */
#include "api/stream_pipe.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int sock_write(void *ctx, const void *buf, size_t len)
{
    struct sbx_stream_pipe *p = ctx;
    const char *b = buf;
    while (len > 0) {
        ssize_t n = send(p->write_fd, b, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            p->sink_failed = true;
            return SBX_E_IO;
        }
        b += n;
        len -= (size_t)n;
    }
    return 0;
}

static void *run_producer(void *arg)
{
    struct sbx_stream_pipe *p = arg;
    struct sbx_sink sink = SBX_SINK_INIT(p, sock_write);
    sbx_error_clear(&p->err);
    p->status = p->produce(p->ud, &sink, &p->err);
    close(p->write_fd); /* the end of the stream for the reader */
    p->write_fd = -1;
    return NULL;
}

static long sock_read(void *ctx, void *buf, size_t cap)
{
    struct sbx_stream_pipe *p = ctx;
    for (;;) {
        ssize_t n = recv(p->read_fd, buf, cap, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            p->read_errno = errno;
            return -1;
        }
        return (long)n;
    }
}

int sbxh_stream_pipe_start(struct sbx_stream_pipe *p, sbx_pipe_producer produce, void *ud,
                           sbx_error *err)
{
    memset(p, 0, sizeof *p);
    p->produce = produce;
    p->ud = ud;
    p->status = SBX_OK;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        p->read_fd = p->write_fd = -1;
        return sbx_error_set(err, SBX_E_IO, "socketpair: %s", strerror(errno));
    }
    p->write_fd = sv[0];
    p->read_fd = sv[1];
    if (pthread_create(&p->thread, NULL, run_producer, p) != 0) {
        close(sv[0]);
        close(sv[1]);
        p->read_fd = p->write_fd = -1;
        return sbx_error_set(err, SBX_E_NOMEM, "cannot start a thread");
    }
    return SBX_OK;
}

struct sbx_source sbxh_stream_pipe_source(struct sbx_stream_pipe *p)
{
    struct sbx_source src = SBX_SOURCE_INIT(p, sock_read);
    return src;
}

void sbxh_stream_pipe_drain(struct sbx_stream_pipe *p)
{
    char drain[4096];
    while (sock_read(p, drain, sizeof drain) > 0)
        ;
}

void sbxh_stream_pipe_abort(struct sbx_stream_pipe *p)
{
    shutdown(p->read_fd, SHUT_RDWR);
}

void sbxh_stream_pipe_join(struct sbx_stream_pipe *p)
{
    pthread_join(p->thread, NULL);
    close(p->read_fd);
    p->read_fd = -1;
}
