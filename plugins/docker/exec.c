/*
 * exec.c - running commands: exec create, a hijacked exec start, exec
 * inspect.
 *
 * Output: the daemon multiplexes stdout and stderr on the hijacked
 * connection as frames (8-byte header: stream, 3 zero bytes, big-endian
 * length; then the payload). Frames are parsed as bytes arrive and each
 * payload piece goes straight to its sink; nothing is accumulated.
 *
 * Input: a thread copies the caller's stdin source to the connection's
 * socket and shuts down its write side at the end, which the daemon turns
 * into end-of-file on the command's stdin.
 *
 * Killing: Docker has no call to kill an exec. Every exec therefore gets a
 * random tag in its environment (SBX_EXEC_TAG=<128-bit hex>), which costs
 * nothing on the normal path. Each exec is also the leader of its own
 * session (runc makes it so). On timeout or cancellation a second exec runs
 * a small sh script that, until none is left, SIGKILLs every process whose
 * environment carries the tag and every process in the sessions of those
 * processes. This reaches the whole tree of the command unless a descendant
 * both scrubbed its environment and started a new session (documented in
 * docs/providers/docker.md). The container's init (docker-init) reaps the
 * orphans. The killer runs as the same user as the command, so it may read
 * the environments it needs and signal those processes.
 */
#include "docker.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>

#define READ_CHUNK (64 * 1024)
/* Bytes the stdin feeder moves per read and send. */
#define FEED_CHUNK (256 * 1024)
/* After the kill, how long the stream may take to end. */
#define KILL_GRACE_MS 10000
/* Time given to the killer exec itself. */
#define KILLER_TIMEOUT_MS 15000
/* Prefix of the daemon's own message when a command could not start. */
#define OCI_PREFIX "OCI runtime exec failed"

/* $1 is the tag line "SBX_EXEC_TAG=<hex>" to look for. */
static const char kill_script[] =
    "tag=$1; me=$$; pass=0\n"
    "while [ $pass -lt 20 ]; do\n"
    "  hit=0; sids=' '\n"
    "  for d in /proc/[0-9]*; do\n"
    "    p=${d#/proc/}; [ \"$p\" = \"$me\" ] && continue\n"
    "    if tr '\\000' '\\n' < $d/environ 2>/dev/null | grep -qxF \"$tag\"; then\n"
    "      s=$(cat $d/stat 2>/dev/null) || continue\n"
    "      s=${s##*) }; set -- $s\n"
    "      [ \"$4\" != 1 ] && sids=\"$sids$4 \"\n"
    "      kill -9 $p 2>/dev/null; hit=1\n"
    "    fi\n"
    "  done\n"
    "  if [ \"$sids\" != ' ' ]; then\n"
    "    for d in /proc/[0-9]*; do\n"
    "      p=${d#/proc/}; [ \"$p\" = \"$me\" ] && continue\n"
    "      s=$(cat $d/stat 2>/dev/null) || continue\n"
    "      s=${s##*) }; set -- $s\n"
    "      case \"$sids\" in *\" $4 \"*) kill -9 $p 2>/dev/null; hit=1;; esac\n"
    "    done\n"
    "  fi\n"
    "  [ $hit = 0 ] && exit 0\n"
    "  pass=$((pass+1))\n"
    "done\n"
    "exit 1\n";

struct exec_spec {
    const char *const *argv;
    const char *const *env;
    const char *workdir; /* absolute, or NULL for the container's */
    const struct sbx_source *in;
    int64_t timeout_ms;
    const struct sbx_sink *out;
    const struct sbx_sink *err;
    const char *user; /* NULL: the container's user */
    int killable;    /* tag it, kill it on timeout/cancel */
    int cancellable; /* honour the call's cancellation */
    int kill_on_source_error; /* (killable) no end of file after a failed source */
};

struct exec_outcome {
    int exit_code;
    int term_signal;
    int timed_out;
    int cancelled;
    int sink_status;   /* a sink stopped us */
    int source_failed; /* the stdin source reported an error */
    uint64_t out_bytes, err_bytes;
    int start_failed;  /* the daemon could not start the command */
    char start_msg[512];
};

/* ---- stdin feeder --------------------------------------------------- */

struct feeder {
    const struct sbx_source *in;
    int fd;
    int failed;
    /* Kill the command (tag) before it can see end of file when the source
     * fails, so that a partial input is never taken for a whole one. */
    sbx_sandbox *sb;
    const char *kill_tag_env;
};

static void kill_tagged(sbx_sandbox *sb, const char *tag_env);

/*
 * Before each read, wait until the source has input (when it offers a
 * pollable fd) or the connection ends: the daemon closing it (the command
 * exited) or exec shutting it down. Then a quiet source that stays open
 * never keeps exec from returning. Returns 1 to read, 0 to wait again, -1
 * to stop.
 */
static int wait_for_input(struct feeder *f)
{
    int fd = f->in->poll_fd ? f->in->poll_fd(f->in->ctx) : -1;
    if (fd < 0)
        return 1; /* not pollable: read may block until it has input */
    struct pollfd pfd[2] = {{.fd = fd, .events = POLLIN},
                            {.fd = f->fd, .events = POLLRDHUP}};
    if (poll(pfd, 2, -1) < 0)
        return errno == EINTR ? 0 : 1;
    if (pfd[1].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))
        return -1;
    return pfd[0].revents != 0 ? 1 : 0;
}

static void *feed_stdin(void *arg)
{
    struct feeder *f = arg;
    char *buf = malloc(FEED_CHUNK);
    if (!buf) {
        f->failed = 1;
        shutdown(f->fd, SHUT_WR);
        return NULL;
    }
    for (;;) {
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
        if (n == 0)
            break;
        size_t off = 0;
        while (off < (size_t)n) {
            ssize_t w = send(f->fd, buf + off, (size_t)n - off, MSG_NOSIGNAL);
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                /* curl keeps the socket non-blocking: wait until writable
                 * (a shutdown by the reader side wakes this too) */
                struct pollfd pfd = {f->fd, POLLOUT, 0};
                if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
                    goto out;
                continue;
            }
            if (w <= 0)
                goto out; /* the command is gone or stopped reading for good */
            off += (size_t)w;
        }
    }
out:
    if (f->failed && f->kill_tag_env)
        kill_tagged(f->sb, f->kill_tag_env);
    shutdown(f->fd, SHUT_WR);
    free(buf);
    return NULL;
}

/* ---- frame demultiplexing ------------------------------------------- */

struct demux {
    unsigned char hdr[8];
    size_t hdr_len;
    uint32_t left;  /* payload bytes left in the current frame */
    int stream;
    unsigned frames;
    int hold;       /* holding the daemon's start error */
    const struct exec_spec *spec;
    struct exec_outcome *oc;
    int discard;    /* after a kill: count, do not deliver */
};

static int deliver(struct demux *d, const char *p, size_t n)
{
    struct exec_outcome *oc = d->oc;
    if (d->frames == 1 && d->stream == 1 && oc->out_bytes == 0 && !d->hold &&
        n >= strlen(OCI_PREFIX) && memcmp(p, OCI_PREFIX, strlen(OCI_PREFIX)) == 0)
        d->hold = 1;
    if (d->hold && d->stream == 1) {
        size_t have = strlen(oc->start_msg);
        size_t room = sizeof oc->start_msg - 1 - have;
        size_t take = n < room ? n : room;
        memcpy(oc->start_msg + have, p, take);
        oc->start_msg[have + take] = '\0';
        return 0;
    }
    const struct sbx_sink *s = d->stream == 1 ? d->spec->out : d->spec->err;
    if (d->stream == 1)
        oc->out_bytes += n;
    else
        oc->err_bytes += n;
    if (d->discard || !s || !s->write)
        return 0;
    return s->write(s->ctx, p, n);
}

/* Feed received bytes through the frame parser. Returns 0, a sink's
 * status, or -1 for a malformed stream. */
static int demux_feed(struct demux *d, const char *p, size_t n)
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
            d->frames++;
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

/* ---- requests -------------------------------------------------------- */

static json_object *str_array(const char *const *v, const char *extra)
{
    json_object *a = json_object_new_array();
    for (size_t i = 0; a && v && v[i]; i++)
        json_object_array_add(a, json_object_new_string(v[i]));
    if (a && extra)
        json_object_array_add(a, json_object_new_string(extra));
    return a;
}

static void random_hex(char *out, size_t bytes)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char r[32];
    if (bytes > sizeof r)
        bytes = sizeof r;
    size_t got = 0;
    while (got < bytes) {
        ssize_t n = getrandom(r + got, bytes - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            /* no entropy source: fall back to the clock; tags only need to
             * be distinct, not secret */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            for (size_t i = got; i < bytes; i++)
                r[i] = (unsigned char)((uint64_t)ts.tv_nsec >> ((i % 8) * 8));
            break;
        }
        got += (size_t)n;
    }
    for (size_t i = 0; i < bytes; i++) {
        out[2 * i] = hex[r[i] >> 4];
        out[2 * i + 1] = hex[r[i] & 15];
    }
    out[2 * bytes] = '\0';
}

static int exec_create(sbx_sandbox *sb, sbx_call *call, const struct exec_spec *spec,
                       const char *tag_env, char eid[65])
{
    struct docker_state *st = sb->st;
    json_object *body = json_object_new_object();
    if (!body)
        return docker_error(st, call, SBX_E_NOMEM, "out of memory");
    json_object_object_add(body, "AttachStdin", json_object_new_boolean(spec->in != NULL));
    json_object_object_add(body, "AttachStdout", json_object_new_boolean(1));
    json_object_object_add(body, "AttachStderr", json_object_new_boolean(1));
    json_object_object_add(body, "Tty", json_object_new_boolean(0));
    json_object_object_add(body, "Cmd", str_array(spec->argv, NULL));
    json_object_object_add(body, "Env", str_array(spec->env, tag_env));
    if (spec->workdir)
        json_object_object_add(body, "WorkingDir", json_object_new_string(spec->workdir));
    if (spec->user)
        json_object_object_add(body, "User", json_object_new_string(spec->user));
    json_object *resp = NULL;
    sbx_http_error err;
    int rc = docker_json(st, spec->cancellable ? call : NULL, "POST", body, &resp, &err,
                         "/containers/%s/exec", sb->id);
    json_object_put(body);
    if (rc != SBX_OK) {
        if (rc == SBX_E_NOT_FOUND && strstr(err.message, "No such container"))
            return docker_error(st, call, SBX_E_NOT_FOUND,
                                       "docker: container %.12s no longer exists",
                                       sb->id);
        if (rc == SBX_E_EXISTS)
            return docker_error(
                st, call, SBX_E_UNAVAILABLE,
                "docker: container %.12s is not running (%s); attach again to "
                "restart it",
                sb->id, err.message);
        return docker_report(st, call, &err, "creating an exec in container %.12s",
                             sb->id);
    }
    const char *id = sbx_json_str(resp, "Id");
    if (!id || strlen(id) >= 65) {
        json_object_put(resp);
        return docker_error(st, call, SBX_E_PROTOCOL,
                                   "docker: exec create answered without an Id");
    }
    snprintf(eid, 65, "%s", id);
    json_object_put(resp);
    return SBX_OK;
}

/* Wait for the exit code; the stream can end a moment before the daemon
 * has recorded the exit. */
static int exec_inspect(sbx_sandbox *sb, sbx_call *call, const char *eid, int *code)
{
    struct docker_state *st = sb->st;
    long delay_us = 500;
    for (int i = 0; i < 60; i++) {
        json_object *info = NULL;
        sbx_http_error err;
        int rc = docker_json(st, NULL, "GET", NULL, &info, &err, "/exec/%s/json", eid);
        if (rc != SBX_OK)
            return docker_report(st, call, &err, "inspecting exec %.12s", eid);
        json_object *ec;
        int running = sbx_json_bool(info, "Running", 0);
        if (!running && json_object_object_get_ex(info, "ExitCode", &ec) &&
            json_object_is_type(ec, json_type_int)) {
            *code = json_object_get_int(ec);
            json_object_put(info);
            return SBX_OK;
        }
        json_object_put(info);
        struct timespec ts = {0, delay_us * 1000};
        nanosleep(&ts, NULL);
        if (delay_us < 100000)
            delay_us *= 2;
    }
    return docker_error(st, call, SBX_E_PROTOCOL,
                               "docker: exec %.12s ended its output but the daemon "
                               "never reported its exit code",
                               eid);
}

/* The killer: SIGKILL everything carrying the tag, and their sessions. */
static void kill_tagged(sbx_sandbox *sb, const char *tag_env)
{
    struct docker_state *st = sb->st;
    const char *argv[] = {"sh", "-c", kill_script, "sbx-kill", tag_env, NULL};
    int code = -1;
    char out[256] = "";
    int rc = docker_exec_helper(sb, NULL, argv, KILLER_TIMEOUT_MS, &code, out,
                                sizeof out);
    if (rc != SBX_OK || code != 0)
        st->host->log(st->host, SBX_LOG_WARN,
                      "docker: could not kill every process of an exec in "
                      "container %.12s (status %d, exit %d%s%s); the image needs "
                      "sh, tr, grep, cat and kill",
                      sb->id, rc, code, out[0] ? ": " : "", out);
}

struct exec_cancel {
    struct docker_cancel dc;
    int handled;
};

static int exec_cancel_check(void *ctx)
{
    struct exec_cancel *c = ctx;
    if (c->handled || !c->dc.call)
        return 0;
    return c->dc.host->cancelled && c->dc.host->cancelled(c->dc.host, c->dc.call);
}

/* Run one exec to its end. Returns SBX_OK when the command ran (whatever
 * its exit); the outcome says how it ended. */
static int run_exec(sbx_sandbox *sb, sbx_call *call, const struct exec_spec *spec,
                    struct exec_outcome *oc)
{
    struct docker_state *st = sb->st;
    memset(oc, 0, sizeof *oc);
    char tag_env[sizeof DOCKER_EXEC_TAG_VAR + 1 + 33];
    char tag[33];
    random_hex(tag, 16);
    snprintf(tag_env, sizeof tag_env, "%s=%s", DOCKER_EXEC_TAG_VAR, tag);

    char eid[65];
    int rc = exec_create(sb, call, spec, spec->killable ? tag_env : NULL, eid);
    if (rc != SBX_OK)
        return rc;

    char path[256];
    docker_path(st, path, sizeof path, "/exec/%s/start", eid);
    static const char start_body[] = "{\"Detach\":false,\"Tty\":false}";
    struct exec_cancel ec;
    docker_cancel_init(&ec.dc, st->host, spec->cancellable ? call : NULL);
    ec.handled = 0;
    ec.dc.c.check = exec_cancel_check;
    ec.dc.c.ctx = &ec;
    struct sbx_http_request req = {0};
    req.method = "POST";
    req.path = path;
    req.content_type = "application/json";
    req.body = start_body;
    req.body_len = sizeof start_body - 1;
    req.hijack = 1;
    req.cancel = &ec.dc.c;
    req.timeout_ms = spec->timeout_ms;

    sbx_http_xfer *x = NULL;
    sbx_http_error err;
    rc = sbx_http_start(st->http, &req, &x, &err);
    if (rc == SBX_E_TIMEOUT || rc == SBX_E_CANCELLED) {
        /* before the stream started: the command may already run */
        if (spec->killable)
            kill_tagged(sb, tag_env);
        oc->timed_out = rc == SBX_E_TIMEOUT;
        oc->cancelled = rc == SBX_E_CANCELLED;
        oc->exit_code = -1;
        oc->term_signal = 9;
        return SBX_OK;
    }
    if (rc != SBX_OK)
        return docker_report(st, call, &err, "starting exec %.12s", eid);

    struct feeder feeder = {spec->in, sbx_http_xfer_socket(x), 0, sb,
                            spec->killable && spec->kill_on_source_error ? tag_env
                                                                         : NULL};
    pthread_t feeder_thread;
    int feeding = 0;
    if (spec->in) {
        if (feeder.fd < 0 || pthread_create(&feeder_thread, NULL, feed_stdin, &feeder)) {
            sbx_http_xfer_free(x);
            return docker_error(st, call, SBX_E_INTERNAL,
                                       "docker: cannot start the stdin feeder");
        }
        feeding = 1;
    } else if (feeder.fd >= 0) {
        shutdown(feeder.fd, SHUT_WR);
    }

    struct demux d = {.spec = spec, .oc = oc};
    char *buf = malloc(READ_CHUNK);
    int killed = 0, stream_rc = SBX_OK;
    if (!buf)
        stream_rc = docker_error(st, call, SBX_E_NOMEM, "out of memory");
    while (buf) {
        size_t got = 0;
        rc = sbx_http_xfer_read(x, buf, READ_CHUNK, &got, &err);
        if (rc == SBX_OK && got == 0)
            break;
        if (rc == SBX_OK) {
            int s = demux_feed(&d, buf, got);
            if (s < 0) {
                stream_rc = docker_error(st, call, SBX_E_PROTOCOL,
                                                "docker: malformed output stream "
                                                "from exec %.12s",
                                                eid);
                break;
            }
            if (s > 0 && !killed) {
                oc->sink_status = s;
                d.discard = 1;
                killed = 1;
                ec.handled = 1;
                if (spec->killable)
                    kill_tagged(sb, tag_env);
                sbx_http_xfer_set_timeout(x, KILL_GRACE_MS);
            }
            continue;
        }
        if ((rc == SBX_E_TIMEOUT || rc == SBX_E_CANCELLED) && !killed) {
            oc->timed_out = rc == SBX_E_TIMEOUT;
            oc->cancelled = rc == SBX_E_CANCELLED;
            killed = 1;
            ec.handled = 1;
            d.discard = oc->cancelled;
            if (spec->killable)
                kill_tagged(sb, tag_env);
            sbx_http_xfer_set_timeout(x, KILL_GRACE_MS);
            continue;
        }
        if (rc == SBX_E_TIMEOUT && killed) {
            st->host->log(st->host, SBX_LOG_WARN,
                          "docker: exec %.12s kept its output open %d s after "
                          "it was killed; giving up on it",
                          eid, KILL_GRACE_MS / 1000);
            break;
        }
        stream_rc = docker_report(st, call, &err, "reading the output of exec %.12s",
                                  eid);
        break;
    }
    free(buf);
    /* Wake and join the feeder before the socket goes away. */
    if (feeder.fd >= 0)
        shutdown(feeder.fd, SHUT_RDWR);
    if (feeding)
        pthread_join(feeder_thread, NULL);
    sbx_http_xfer_free(x);
    oc->source_failed = feeder.failed;
    if (stream_rc != SBX_OK)
        return stream_rc;

    int code = -1;
    rc = exec_inspect(sb, killed ? NULL : call, eid, &code);
    if (rc != SBX_OK && !killed)
        return rc;
    if (killed) {
        oc->exit_code = -1;
        oc->term_signal = (rc == SBX_OK && code > 128 && code < 160) ? code - 128 : 9;
    } else {
        oc->exit_code = code;
        oc->term_signal = 0;
    }
    if (d.hold) {
        if (code == 126 || code == 127) {
            oc->start_failed = code;
        } else if (spec->out && spec->out->write && oc->start_msg[0]) {
            /* not the daemon's error after all: deliver what we held */
            size_t n = strlen(oc->start_msg);
            oc->out_bytes += n;
            spec->out->write(spec->out->ctx, oc->start_msg, n);
        }
    }
    return SBX_OK;
}

int docker_exec(sbx_sandbox *sb, sbx_call *call, const struct sbx_exec_args *args,
                struct sbx_exec_result *res)
{
    struct docker_state *st = sb->st;
    if (!args || !args->argv || !args->argv[0] || !args->argv[0][0])
        return docker_error(st, call, SBX_E_INVALID,
                                   "docker: exec needs a program (argv[0])");
    for (const char *const *e = args->env; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq || eq == *e)
            return docker_error(st, call, SBX_E_INVALID,
                                       "docker: environment entry \"%.60s\" is not "
                                       "NAME=value",
                                       *e);
        if ((size_t)(eq - *e) == strlen(DOCKER_EXEC_TAG_VAR) &&
            strncmp(*e, DOCKER_EXEC_TAG_VAR, strlen(DOCKER_EXEC_TAG_VAR)) == 0)
            return docker_error(st, call, SBX_E_INVALID,
                                       "docker: %s is reserved by the provider",
                                       DOCKER_EXEC_TAG_VAR);
    }
    char *cwd = NULL;
    int rc = docker_path_check(st, call, "cwd", args->cwd ? args->cwd : "", 1, &cwd);
    if (rc != SBX_OK)
        return rc;
    size_t wlen = strlen(DOCKER_WORKSPACE) + 1 + strlen(cwd) + 1;
    char *workdir = malloc(wlen);
    if (!workdir) {
        free(cwd);
        return docker_error(st, call, SBX_E_NOMEM, "out of memory");
    }
    snprintf(workdir, wlen, "%s%s%s", DOCKER_WORKSPACE, cwd[0] ? "/" : "", cwd);
    free(cwd);

    struct exec_spec spec = {
        .argv = args->argv,
        .env = args->env,
        .workdir = workdir,
        .in = args->in,
        .timeout_ms = args->timeout_ms > 0 ? args->timeout_ms : 0,
        .out = args->out,
        .err = args->err,
        .killable = 1,
        .cancellable = 1,
    };
    struct exec_outcome oc;
    rc = run_exec(sb, call, &spec, &oc);
    if (rc != SBX_OK) {
        free(workdir);
        return rc;
    }
    if (res) {
        res->exit_code = oc.exit_code;
        res->term_signal = oc.term_signal;
        res->timed_out = oc.timed_out;
        res->out_bytes = oc.out_bytes;
        res->err_bytes = oc.err_bytes;
    }
    if (oc.start_failed) {
        size_t n = strlen(oc.start_msg);
        while (n && (oc.start_msg[n - 1] == '\n' || oc.start_msg[n - 1] == '\r'))
            oc.start_msg[--n] = '\0';
        /* the daemon's exit code (126 or 127) varies between versions:
         * its message says which failure it was */
        int status = oc.start_failed == 127 ? SBX_E_NO_COMMAND : SBX_E_NOT_EXEC;
        if (strstr(oc.start_msg, "not found") ||
            strstr(oc.start_msg, "no such file or directory"))
            status = SBX_E_NO_COMMAND;
        else if (strstr(oc.start_msg, "permission denied"))
            status = SBX_E_NOT_EXEC;
        if (strstr(oc.start_msg, "chdir to cwd"))
            rc = docker_error(st, call, SBX_E_INVALID,
                                     "docker: working directory %s does not exist "
                                     "(%s)",
                                     workdir, oc.start_msg);
        else
            rc = docker_error(st, call, status, "docker: %s: %s",
                                     args->argv[0], oc.start_msg);
        free(workdir);
        return rc;
    }
    free(workdir);
    if (oc.cancelled)
        return docker_error(st, call, SBX_E_CANCELLED,
                                   "docker: exec of %s cancelled; its processes "
                                   "were killed",
                                   args->argv[0]);
    if (oc.sink_status)
        return docker_error(st, call, oc.sink_status,
                                   "docker: exec of %s stopped: an output sink "
                                   "refused data (%s); its processes were killed",
                                   args->argv[0],
                                   sbx_strerror((sbx_status)oc.sink_status));
    if (oc.source_failed)
        return SBX_E_IO; /* the source already said why */
    return SBX_OK;
}

/* ---- helper execs (renames, the killer) ------------------------------- */

struct bounded {
    char *buf;
    size_t cap, len;
};

static int bounded_write(void *ctx, const void *p, size_t n)
{
    struct bounded *b = ctx;
    if (!b->buf || b->cap == 0)
        return 0;
    size_t room = b->cap - 1 - b->len;
    size_t take = n < room ? n : room;
    memcpy(b->buf + b->len, p, take);
    b->len += take;
    b->buf[b->len] = '\0';
    return 0;
}

int docker_exec_helper(sbx_sandbox *sb, sbx_call *call, const char *const *argv,
                       int64_t timeout_ms, int *exit_code, char *output, size_t cap)
{
    return docker_exec_helper_as(sb, call, NULL, argv, timeout_ms, exit_code, output,
                                 cap);
}

int docker_exec_helper_as(sbx_sandbox *sb, sbx_call *call, const char *user,
                          const char *const *argv, int64_t timeout_ms, int *exit_code,
                          char *output, size_t cap)
{
    struct bounded b = {output, cap, 0};
    if (output && cap)
        output[0] = '\0';
    struct sbx_sink sink = SBX_SINK_INIT(&b, bounded_write);
    struct exec_spec spec = {
        .argv = argv,
        .timeout_ms = timeout_ms,
        .out = &sink,
        .err = &sink,
        .user = user,
        .killable = 0,
        .cancellable = call != NULL,
    };
    struct exec_outcome oc;
    int rc = run_exec(sb, call, &spec, &oc);
    if (rc != SBX_OK)
        return rc;
    if (oc.cancelled)
        return SBX_E_CANCELLED;
    if (oc.timed_out)
        return SBX_E_TIMEOUT;
    if (oc.start_failed) {
        bounded_write(&b, oc.start_msg, strlen(oc.start_msg));
        *exit_code = oc.start_failed;
        return SBX_OK;
    }
    *exit_code = oc.exit_code;
    return SBX_OK;
}

int docker_exec_helper_in(sbx_sandbox *sb, sbx_call *call, const char *const *argv,
                          const struct sbx_source *in, int64_t timeout_ms,
                          int *exit_code, char *output, size_t cap)
{
    struct bounded b = {output, cap, 0};
    if (output && cap)
        output[0] = '\0';
    struct sbx_sink sink = SBX_SINK_INIT(&b, bounded_write);
    struct exec_spec spec = {
        .argv = argv,
        .in = in,
        .timeout_ms = timeout_ms,
        .out = &sink,
        .err = &sink,
        .killable = 1, /* a cancelled transfer must not leave cat running */
        .cancellable = 1,
        .kill_on_source_error = 1,
    };
    struct exec_outcome oc;
    int rc = run_exec(sb, call, &spec, &oc);
    if (rc != SBX_OK)
        return rc;
    if (oc.cancelled)
        return SBX_E_CANCELLED;
    if (oc.timed_out)
        return SBX_E_TIMEOUT;
    if (oc.source_failed)
        return SBX_E_IO; /* the source has said why */
    if (oc.start_failed) {
        bounded_write(&b, oc.start_msg, strlen(oc.start_msg));
        *exit_code = oc.start_failed;
        return SBX_OK;
    }
    *exit_code = oc.exit_code;
    return SBX_OK;
}
