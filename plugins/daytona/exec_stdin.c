/*
 * exec_stdin.c - a command's stdin, fed while it runs. The toolbox cannot
 * stream bytes into a process (session input is text and cannot be
 * closed), so a thread uploads the caller's source in chunks of up to
 * FEED_CHUNK bytes as <dir>/in.N (uploaded under another name and renamed
 * when complete), then <dir>/eof at its end; the command's wrapper (exec.c)
 * pipes them into the command through a FIFO as they appear. Feeding
 * stops when the command exits, whether or not the source has ended; a
 * source that offers a poll fd is waited on next to that stop signal. See
 * daytona.h.
 */
#include "daytona.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FEED_CHUNK (256 * 1024)

struct daytona_feed {
    sbx_sandbox *sb;
    const struct sbx_source *in;
    const char *dir;
    int stop_pipe[2];
    int failed;       /* the source failed: the host knows why */
    pthread_t thread;
    char dirbuf[96];
};

struct membuf {
    const unsigned char *p;
    size_t len, off;
};

static long mem_read(void *ctx, void *buf, size_t cap)
{
    struct membuf *m = ctx;
    size_t n = m->len - m->off < cap ? m->len - m->off : cap;
    memcpy(buf, m->p + m->off, n);
    m->off += n;
    return (long)n;
}

static int64_t mem_length(void *ctx)
{
    struct membuf *m = ctx;
    return (int64_t)(m->len - m->off);
}

/* Poll the source's fd (when it has one) next to the stop pipe: 1 when
 * readable, 0 to stop, within wait_ms (-1: forever; 0 returns 2 when
 * nothing is ready yet). */
static int readable(struct daytona_feed *f, int wait_ms)
{
    int fd = f->in->size >= SBX_SOURCE_SIZE_1_0 && f->in->poll_fd ? f->in->poll_fd(f->in->ctx)
                                                                   : -1;
    struct pollfd p[2] = {{f->stop_pipe[0], POLLIN, 0}, {fd, POLLIN, 0}};
    for (;;) {
        int n = poll(p, fd >= 0 ? 2 : 1, fd >= 0 ? wait_ms : 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 || p[0].revents)
            return 0;
        if (fd < 0 || p[1].revents)
            return 1;
        return 2;
    }
}

/* Upload len bytes as <dir>/<name>, complete before it is visible. */
static int put_chunk(struct daytona_feed *f, const unsigned char *data, size_t len,
                     const char *name, int seq)
{
    char tmp[160], fin[160];
    snprintf(tmp, sizeof tmp, "%s/p.%d", f->dir, seq);
    snprintf(fin, sizeof fin, "%s/%s", f->dir, name);
    struct membuf m = {data, len, 0};
    struct sbx_source src = SBX_SOURCE_INIT(&m, mem_read);
    src.length = mem_length;
    sbxp_http_error err;
    int rc = daytona_tb_upload(f->sb, NULL, tmp, &src, &err);
    if (rc == SBX_OK)
        rc = daytona_tb_move(f->sb, NULL, tmp, fin, &err);
    return rc;
}

static void *feeder(void *arg)
{
    struct daytona_feed *f = arg;
    unsigned char *buf = malloc(FEED_CHUNK);
    if (!buf)
        return NULL;
    sbxp_http_error err;
    if (daytona_tb_mkdir(f->sb, NULL, f->dir, 0700, &err) != SBX_OK) {
        free(buf);
        return NULL;
    }
    for (int seq = 0;; seq++) {
        if (!readable(f, -1))
            break;
        size_t len = 0;
        int eof = 0;
        /* Gather what is there (never waiting once a byte came), up to a
         * chunk. */
        while (len < FEED_CHUNK) {
            long n = f->in->read(f->in->ctx, buf + len, FEED_CHUNK - len);
            if (n < 0) {
                f->failed = 1;
                break;
            }
            if (n == 0) {
                eof = 1;
                break;
            }
            len += (size_t)n;
            int r = readable(f, 0);
            if (r != 1)
                break;
        }
        if (f->failed)
            break;
        char name[32];
        snprintf(name, sizeof name, "in.%d", seq);
        if (len && put_chunk(f, buf, len, name, seq) != SBX_OK)
            break;
        if (eof) {
            put_chunk(f, buf, 0, "eof", seq + 1);
            break;
        }
        if (!readable(f, 0))
            break;
    }
    free(buf);
    return NULL;
}

int daytona_feed_start(sbx_sandbox *sb, sbx_call *call, const struct sbx_source *in,
                       const char *dir, struct daytona_feed **out)
{
    *out = NULL;
    struct daytona_feed *f = calloc(1, sizeof *f);
    if (!f)
        return daytona_error(sb->st, call, SBX_E_NOMEM, "out of memory");
    f->sb = sb;
    f->in = in;
    snprintf(f->dirbuf, sizeof f->dirbuf, "%s", dir);
    f->dir = f->dirbuf;
    if (pipe2(f->stop_pipe, O_CLOEXEC) != 0) {
        int e = errno;
        free(f);
        return daytona_error(sb->st, call, SBX_E_IO, DT ": exec: pipe: %s", strerror(e));
    }
    if (pthread_create(&f->thread, NULL, feeder, f) != 0) {
        close(f->stop_pipe[0]);
        close(f->stop_pipe[1]);
        free(f);
        return daytona_error(sb->st, call, SBX_E_INTERNAL, DT ": exec: cannot start a thread");
    }
    *out = f;
    return SBX_OK;
}

int daytona_feed_stop(struct daytona_feed *f)
{
    if (!f)
        return 0;
    if (write(f->stop_pipe[1], "x", 1) < 0) {
        /* the feeder also stops when its calls fail */
    }
    pthread_join(f->thread, NULL);
    close(f->stop_pipe[0]);
    close(f->stop_pipe[1]);
    int failed = f->failed;
    free(f);
    return failed;
}
