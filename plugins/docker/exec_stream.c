/*
 * exec_stream.c - the two directions of an exec's hijacked connection.
 *
 * Input is fed by shared/stdin_feeder.c (exec_run.c starts it): it shuts
 * down the socket's write side at the source's end, which the daemon turns
 * into end of file on the command's stdin.
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

#include <stdlib.h>
#include <string.h>

/* How the daemon's message about a command that could not start begins. */
#define START_ERROR_PREFIX "OCI runtime exec failed"

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

int docker_exec_demux_feed(struct exec_demux *d, const char *p, size_t n)
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

int docker_exec_demux_finish(struct exec_demux *d, int start_failed)
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
