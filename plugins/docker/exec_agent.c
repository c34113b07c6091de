/*
 * exec_agent.c - exec through the container's sbx-agent.
 *
 * One connection: the request (argv, env, cwd, timeout) and then one poll
 * loop. The agent's output frames go to the sinks as they arrive; the
 * caller's stdin is read by the shared feeder thread into a pipe and sent
 * on as frames from here (this thread is the only writer of the socket).
 * The agent enforces the timeout and reports the wait status: an exit code
 * or the terminating signal. A cancellation or a refusing sink shuts the
 * write side of the connection, which the agent takes as "kill the whole
 * tree and report"; the rest of its output is drained and dropped. Every
 * wait is bounded: the command's timeout plus kill_timeout plus a second
 * of grace for the agent's report, after which the connection is dropped
 * (the agent then kills the tree by itself) and exec fails.
 */
#include "docker.h"

#include "agent_proto/proto.h"
#include "stdin_feeder.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct ax {
    struct docker_agent_conn c;
    const struct sbx_exec_args *args;
    struct sbxs_feeder *feeder;
    int in_fd;          /* the feeder's pipe, -1 once ended */
    int in_sent_end;
    unsigned char *obuf; /* the stdin frame being sent */
    size_t o_len, o_off;
    unsigned char *ibuf; /* the frame being received */
    unsigned char hdr[AP_HDR_LEN];
    size_t hdr_len;
    int type;
    uint32_t len, got;
    int stopped;         /* the write side was shut (cancel, sink) */
    int cancelled, sink_status;
    int done, rc;
    struct sbx_exec_result r;
    int64_t deadline;    /* hard bound, 0: none */
};

static void stop(struct ax *x)
{
    if (!x->stopped)
        shutdown(x->c.fd, SHUT_WR);
    x->stopped = 1;
    x->o_len = x->o_off = 0;
    if (x->in_fd >= 0) {
        sbxs_feeder_stop(x->feeder);
        close(x->in_fd);
        x->in_fd = -1;
    }
    if (!x->deadline || x->deadline > docker_now_ms() + x->c.sb->st->cfg.kill_timeout_ms + 1000)
        x->deadline = docker_now_ms() + x->c.sb->st->cfg.kill_timeout_ms + 1000;
}

static int deliver(struct ax *x, const struct sbx_sink *s, uint64_t *count)
{
    *count += x->len;
    if (x->stopped || !s || !s->write)
        return 0;
    int st = s->write(s->ctx, x->ibuf, x->len);
    if (st) {
        x->sink_status = st;
        stop(x);
    }
    return 0;
}

/* Why a command could not start, as local's execvp rules have it: a
 * missing program, one that cannot be executed, a bad working directory
 * or user. */
static int start_status(uint32_t e, const char *stage)
{
    if (stage && strcmp(stage, "exec") == 0)
        return e == ENOENT ? SBX_E_NO_COMMAND : e == ENOMEM ? SBX_E_NOMEM : SBX_E_NOT_EXEC;
    if (stage && (strcmp(stage, "cwd") == 0 || strcmp(stage, "user") == 0))
        return SBX_E_INVALID;
    return e == EPROTO ? SBX_E_PROTOCOL : SBX_E_IO;
}

/* A whole frame from the agent. */
static void on_frame(struct ax *x)
{
    switch (x->type) {
    case AP_STDOUT:
        deliver(x, x->args->out, &x->r.out_bytes);
        return;
    case AP_STDERR:
        deliver(x, x->args->err, &x->r.err_bytes);
        return;
    case AP_EXIT: {
        struct ap_in in;
        sbxs_ap_in_begin(&in, x->ibuf, x->len);
        uint32_t flags = sbxs_ap_get_u32(&in), code = sbxs_ap_get_u32(&in), sig = sbxs_ap_get_u32(&in);
        if (!sbxs_ap_in_done(&in)) {
            x->rc = docker_agent_fail(&x->c, "exec", -1, NULL, 0, NULL);
        } else {
            x->r.exit_code = flags & AP_EXIT_SIGNALED ? -1 : (int)code;
            x->r.term_signal = flags & AP_EXIT_SIGNALED ? (int)sig : 0;
            x->r.timed_out = (flags & AP_EXIT_TIMED_OUT) != 0;
            x->rc = SBX_OK;
        }
        x->done = 1;
        return;
    }
    default: {
        char what[300];
        snprintf(what, sizeof what, "exec of %.200s", x->args->argv[0]);
        x->rc = docker_agent_fail(&x->c, what, x->type, x->ibuf, x->len, start_status);
        x->done = 1;
    }
    }
}

static void read_agent(struct ax *x)
{
    for (int rounds = 0; rounds < 64 && !x->done; rounds++) {
        ssize_t k;
        if (x->hdr_len < AP_HDR_LEN)
            k = recv(x->c.fd, x->hdr + x->hdr_len, AP_HDR_LEN - x->hdr_len, MSG_DONTWAIT);
        else
            k = recv(x->c.fd, x->ibuf + x->got, x->len - x->got, MSG_DONTWAIT);
        if (k < 0 && (errno == EINTR || errno == EAGAIN))
            return;
        if (k <= 0) {
            x->rc = docker_error(x->c.sb->st, x->c.call, SBX_E_UNAVAILABLE,
                                 "docker: exec of %.200s: the sbx agent of container %.12s "
                                 "closed the connection without a result (%s): the "
                                 "command's handler in the agent ended before it reported "
                                 "(killed or stopped by a process in the container: the "
                                 "agent then kills everything the command started), or the "
                                 "agent or its container died",
                                 x->args->argv[0], x->c.sb->id,
                                 k < 0 ? strerror(errno) : "end of stream");
            x->done = 1;
            return;
        }
        if (x->hdr_len < AP_HDR_LEN) {
            x->hdr_len += (size_t)k;
            if (x->hdr_len < AP_HDR_LEN)
                continue;
            if (sbxs_ap_parse_header(x->hdr, &x->type, &x->len) != 0 || x->len > AP_CHUNK + 64) {
                x->rc = docker_error(x->c.sb->st, x->c.call, SBX_E_PROTOCOL,
                                     "docker: exec: the sbx agent sent a frame of %u bytes",
                                     x->len);
                x->done = 1;
                return;
            }
            x->got = 0;
        } else {
            x->got += (uint32_t)k;
        }
        if (x->got == x->len) {
            x->hdr_len = 0;
            on_frame(x);
        }
    }
}

/* Take the next stdin chunk from the feeder's pipe. */
static void read_stdin(struct ax *x)
{
    ssize_t n = read(x->in_fd, x->obuf + AP_HDR_LEN, AP_CHUNK);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) { /* the feed ended: tell the command */
        close(x->in_fd);
        x->in_fd = -1;
        sbxs_ap_header(x->obuf, AP_STDIN_END, 0);
        x->o_len = AP_HDR_LEN;
        x->in_sent_end = 1;
    } else {
        sbxs_ap_header(x->obuf, AP_STDIN, (uint32_t)n);
        x->o_len = AP_HDR_LEN + (size_t)n;
    }
    x->o_off = 0;
}

static void write_agent(struct ax *x)
{
    while (x->o_off < x->o_len) {
        ssize_t k = send(x->c.fd, x->obuf + x->o_off, x->o_len - x->o_off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && errno == EAGAIN)
            return;
        if (k < 0) { /* the agent finished; its answer says how */
            x->o_len = x->o_off = 0;
            if (x->in_fd >= 0) {
                sbxs_feeder_stop(x->feeder);
                close(x->in_fd);
                x->in_fd = -1;
            }
            return;
        }
        x->o_off += (size_t)k;
    }
    x->o_len = x->o_off = 0;
}

static void run(struct ax *x)
{
    struct docker_state *st = x->c.sb->st;
    while (!x->done) {
        int cancelled = x->c.call && st->host->cancelled &&
                        st->host->cancelled(st->host, x->c.call);
        if (cancelled && !x->cancelled) {
            x->cancelled = 1;
            stop(x);
        }
        if (x->deadline && docker_now_ms() >= x->deadline) {
            x->rc = docker_error(st, x->c.call, SBX_E_UNAVAILABLE,
                                 "docker: exec of %.200s: the sbx agent of container %.12s "
                                 "did not report the end of the command in time; the "
                                 "connection is dropped (the agent then kills the command)",
                                 x->args->argv[0], x->c.sb->id);
            return;
        }
        struct pollfd p[3];
        int np = 0, i_in = -1, i_cancel = -1;
        p[np++] = (struct pollfd){.fd = x->c.fd,
                                  .events = (short)(POLLIN | (x->o_len ? POLLOUT : 0))};
        if (x->in_fd >= 0 && !x->o_len) {
            p[np] = (struct pollfd){.fd = x->in_fd, .events = POLLIN};
            i_in = np++;
        }
        if (x->c.cancel_fd >= 0 && !x->cancelled) {
            p[np] = (struct pollfd){.fd = x->c.cancel_fd, .events = POLLIN};
            i_cancel = np++;
        }
        int timeout = 1000;
        if (x->deadline) {
            int64_t left = x->deadline - docker_now_ms();
            timeout = left < 0 ? 0 : left < timeout ? (int)left : timeout;
        }
        if (poll(p, (nfds_t)np, timeout) < 0 && errno != EINTR) {
            x->rc = docker_error(st, x->c.call, SBX_E_IO, "docker: exec: poll: %s",
                                 strerror(errno));
            return;
        }
        if (i_cancel >= 0 && (p[i_cancel].revents & POLLIN)) {
            x->cancelled = 1;
            stop(x);
        }
        if (p[0].revents & (POLLIN | POLLHUP | POLLERR))
            read_agent(x);
        if (!x->done && x->o_len && (p[0].revents & POLLOUT))
            write_agent(x);
        if (!x->done && i_in >= 0 && p[i_in].revents)
            read_stdin(x);
        if (!x->done && x->o_len)
            write_agent(x);
    }
}

/* The request frame into a malloc'd buffer. */
static unsigned char *request(const struct sbx_exec_args *a, const char *cwd, size_t *len)
{
    size_t cap = AP_HDR_LEN + 8 + 4 + strlen(cwd) + 8 + 32;
    for (const char *const *v = a->argv; *v; v++)
        cap += 4 + strlen(*v);
    for (const char *const *v = a->env; v && *v; v++)
        cap += 4 + strlen(*v);
    unsigned char *buf = malloc(cap + AP_HDR_LEN);
    if (!buf)
        return NULL;
    struct ap_out o;
    sbxs_ap_out_begin(&o, buf, cap, AP_EXEC);
    sbxs_ap_put_u64(&o, (uint64_t)a->timeout_ms);
    sbxs_ap_put_str(&o, cwd);
    uint32_t n = 0;
    while (a->argv[n])
        n++;
    sbxs_ap_put_u32(&o, n);
    for (uint32_t i = 0; i < n; i++)
        sbxs_ap_put_str(&o, a->argv[i]);
    n = 0;
    while (a->env && a->env[n])
        n++;
    sbxs_ap_put_u32(&o, n);
    for (uint32_t i = 0; i < n; i++)
        sbxs_ap_put_str(&o, a->env[i]);
    *len = sbxs_ap_out_end(&o);
    if (!*len) {
        free(buf);
        return NULL;
    }
    if (!a->in) { /* no stdin: its end goes with the request */
        sbxs_ap_header(buf + *len, AP_STDIN_END, 0);
        *len += AP_HDR_LEN;
    }
    return buf;
}

int docker_agent_exec(sbx_sandbox *sb, sbx_call *call, const struct sbx_exec_args *args,
                      const char *cwd, struct sbx_exec_result *res)
{
    struct docker_state *st = sb->st;
    struct ax x = {.args = args, .in_fd = -1, .rc = SBX_OK};
    size_t len;
    unsigned char *req = request(args, cwd, &len);
    if (!req)
        return docker_error(st, call, SBX_E_INVALID,
                            "docker: exec of %.200s: the command line and environment are "
                            "too large for one request (%u bytes)",
                            args->argv[0], AP_FRAME_MAX);
    if (args->timeout_ms)
        x.deadline = docker_now_ms() + args->timeout_ms + st->cfg.kill_timeout_ms + 1000;
    /* the connection's own waits stay under the request timeout */
    int rc = docker_agent_open(sb, call, req, len, docker_now_ms() + st->cfg.request_timeout_ms,
                               &x.c);
    free(req);
    if (rc != SBX_OK)
        return rc;
    x.obuf = malloc(AP_HDR_LEN + AP_CHUNK);
    x.ibuf = malloc(AP_CHUNK + 64);
    if (!x.obuf || !x.ibuf) {
        rc = docker_error(st, call, SBX_E_NOMEM, "out of memory");
        goto out;
    }
    if (args->in) {
        int p[2];
        if (pipe2(p, O_CLOEXEC) != 0) {
            rc = docker_error(st, call, SBX_E_IO, "docker: exec: pipe: %s", strerror(errno));
            goto out;
        }
        int e = sbxs_feeder_start(&x.feeder, args->in, p[1], 0, AP_CHUNK);
        if (e) {
            close(p[0]);
            rc = docker_error(st, call, SBX_E_IO, "docker: exec: stdin thread: %s",
                              strerror(e));
            goto out;
        }
        fcntl(p[0], F_SETFL, O_NONBLOCK);
        x.in_fd = p[0];
    }
    run(&x);
    rc = x.rc;
out:
    if (x.in_fd >= 0)
        close(x.in_fd);
    int failed = x.feeder ? sbxs_feeder_finish(x.feeder, NULL) : 0;
    docker_agent_close(&x.c);
    free(x.obuf);
    free(x.ibuf);
    if (rc != SBX_OK)
        return rc;
    if (res) {
        res->exit_code = x.r.exit_code;
        res->term_signal = x.r.term_signal;
        res->timed_out = x.r.timed_out;
        res->out_bytes = x.r.out_bytes;
        res->err_bytes = x.r.err_bytes;
    }
    if (x.cancelled)
        return docker_error(st, call, SBX_E_CANCELLED,
                            "docker: exec of %.200s cancelled; its processes were killed",
                            args->argv[0]);
    if (x.sink_status)
        return docker_error(st, call, x.sink_status,
                            "docker: exec of %.200s stopped: an output sink refused data "
                            "(%s); its processes were killed",
                            args->argv[0], sbx_strerror((sbx_status)x.sink_status));
    if (failed)
        return SBX_E_IO; /* the source has said why */
    return SBX_OK;
}
