/*
 * procs.c - SBX_CAP_PROCESSES on execd's background commands.
 *
 * Why not execd's own log (GET /command/{id}/logs): execd writes a
 * background command's stdout and stderr into one file (its
 * runBackgroundCommand opens one "combined output" descriptor for both),
 * keeps all of it (an unbounded file in the sandbox's /tmp) and answers a
 * read with everything from the cursor to the end at once (io.ReadAll);
 * its spec calls that cursor a line index while execd seeks bytes. So the
 * streams would not be apart, a flood would grow the sandbox's disk and
 * one read's memory without bound, and a cursor's meaning would depend on
 * the version. Instead each process keeps its own state in a directory of
 * the sandbox, <proc_dir>/<name>/ (out of the workspace, kept after the
 * host process that started it is gone):
 *
 *   in, op, ep     FIFOs: the program's stdin, stdout and stderr
 *   o.NNNNNNNNN    stdout in chunks of C bytes, written by GNU split
 *   e.NNNNNNNNN    stderr, the same; byte b of a stream is in chunk b / C
 *                  at offset b % C, so a cursor is an exact byte count
 *   o.done e.done  the stream ended (split saw end of file)
 *   f              split's filter: it removes chunk n - CHUNKS_KEPT when
 *                  chunk n starts, so a stream keeps at least 4 C >=
 *                  buffer_bytes and at most 5 C bytes (the bound); a
 *                  read sees the last buffer_bytes of a stream exactly
 *   pid, keeper    the program's pid (its process group), the stdin keeper's
 *                  (written once it holds the FIFO: proc_write waits for it)
 *   id.<id>        the process's sbx id (with execd's command id in it),
 *                  marking the directory as this process's
 *
 * A read lists the directory (GET /directories/list), asks execd for the
 * command's state (GET /command/status/{id}) and downloads the chunks at
 * the cursors with a byte Range (GET /files/download: binary, bounded by
 * max_bytes); a cursor older than the oldest chunk skips to it, counting
 * the skipped bytes as lost. The wrapper execd runs sets up the pipes and
 * then execs the program, so execd's status is the program's (exit code,
 * or -1 and the signal's name) and its timeout kills the program's group.
 *
 * stdin: execd gives background commands /dev/null. The program reads the
 * FIFO `in`; a keeper process (tail --pid, holding `in` open read-write
 * until the program ends) keeps the FIFO from reporting end of file
 * between writes; proc_write uploads the bytes into the FIFO (POST
 * /files/upload opens it for writing), SBX_PROC_WRITE_CLOSE kills the
 * keeper, and the program sees end of file once the last writer is gone.
 *
 * The id, <name>.<buffer_bytes>.<timeout_ms>.<execd id>, names everything a read
 * needs; it is checked against the directory (missing, or its id marker
 * another: SBX_E_NOT_FOUND). proc_signal runs kill(1) on the process group
 * in the sandbox. Deleting the sandbox ends every process. See osb.h.
 */
#include "osb.h"

#include "clock.h"
#include "gosignal.h"
#include "hex.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHUNKS_KEPT 5
#define CHUNK_MIN 4096u
#define NAME_LEN 21 /* 13 digits of the start time in ms, 8 hex digits */
#define CID_MAX 64
#define READ_DEFAULT (64u * 1024u)
#define POLL_MIN_MS 20
#define POLL_MAX_MS 200
/* How long after the program's end a reader may still be draining its
 * FIFO before a read releases one stuck in open(). */
#define RELEASE_AFTER_MS 300
#define SAFE_PATH "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH"
/* Chunks of one stream a read keeps track of (the directory holds at most
 * CHUNKS_KEPT; a hostile sandbox may add more, which are ignored). */
#define TRACK_MAX 32

/* The chunk size for a replay buffer of `buffer` bytes: 4 chunks hold it. */
static uint64_t chunk_of(uint64_t buffer)
{
    uint64_t c = (buffer + CHUNKS_KEPT - 2) / (CHUNKS_KEPT - 1);
    return c < CHUNK_MIN ? CHUNK_MIN : c > (1ull << 32) ? 1ull << 32 : c;
}

struct ref {
    char name[NAME_LEN + 1];
    uint64_t buffer; /* the replay buffer's size: the window a read sees */
    uint64_t chunk;
    int64_t timeout_ms;
    char cid[CID_MAX + 1];
    char dir[512];
    char id[SBX_PROC_ID_MAX];
};

static int is_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* Parse an id; 0 when it is not one this provider makes. */
static int parse_id(struct osb_state *st, const char *id, struct ref *r)
{
    memset(r, 0, sizeof *r);
    const char *p = id;
    const char *dot = strchr(p, '.');
    if (!dot || dot - p != NAME_LEN)
        return 0;
    for (int i = 0; i < NAME_LEN; i++)
        if (!(p[i] >= '0' && p[i] <= '9') && !(i >= 13 && p[i] >= 'a' && p[i] <= 'f'))
            return 0;
    memcpy(r->name, p, NAME_LEN);
    char *end;
    errno = 0;
    unsigned long long c = strtoull(dot + 1, &end, 10);
    if (errno || end == dot + 1 || *end != '.' || c < 1 || c > (1ull << 34))
        return 0;
    r->buffer = c;
    r->chunk = chunk_of(c);
    const char *t = end + 1;
    long long to = strtoll(t, &end, 10);
    if (errno || end == t || *end != '.' || to < 0)
        return 0;
    r->timeout_ms = to;
    const char *cid = end + 1;
    size_t n = strlen(cid);
    if (n == 0 || n > CID_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!is_alnum(cid[i]) && cid[i] != '-' && cid[i] != '_')
            return 0;
    memcpy(r->cid, cid, n + 1);
    snprintf(r->id, sizeof r->id, "%s", id);
    snprintf(r->dir, sizeof r->dir, "%s/%s", st->cfg.proc_dir, r->name);
    return 1;
}

static int not_found(struct osb_state *st, sbx_call *call, const char *op, const char *id)
{
    return osb_error(st, call, SBX_E_NOT_FOUND, "opensandbox: %s: no process %.*s in this sandbox",
                     op, 80, id);
}

static int helper(sbx_sandbox *sb, sbx_call *call, const char *text, int *code, char *msg,
                  size_t cap);

/* ---- what execd says --------------------------------------------------- */

struct status {
    int known;   /* execd knows the command */
    int running;
    int exit_code;
    int term_signal;
    int64_t started_ns, finished_ns;
    char content[256]; /* the first line of the command text */
};

static int get_status(sbx_sandbox *sb, sbx_call *call, const struct ref *r, struct status *s,
                      sbxp_http_error *err)
{
    memset(s, 0, sizeof *s);
    char path[128];
    snprintf(path, sizeof path, "/command/status/%s", r->cid);
    json_object *doc = NULL;
    int rc = osb_service_json(sb, call, &sb->execd, "GET", path, NULL, &doc, 1, err);
    if (rc == SBX_E_NOT_FOUND && err->http_status == 404)
        return SBX_OK; /* known = 0 */
    if (rc != SBX_OK)
        return rc;
    s->known = 1;
    s->running = sbxp_json_bool(doc, "running", 0);
    json_object *ec = NULL;
    if (!s->running) {
        if (json_object_object_get_ex(doc, "exit_code", &ec) &&
            json_object_is_type(ec, json_type_int))
            s->exit_code = json_object_get_int(ec);
        else
            s->exit_code = -2;
        if (s->exit_code == -1) {
            s->term_signal = sbxp_go_signal_number(sbxp_json_str(doc, "error"));
            if (!s->term_signal)
                s->term_signal = 9;
        }
    }
    s->started_ns = osb_parse_time_ns(sbxp_json_str(doc, "started_at"));
    s->finished_ns = osb_parse_time_ns(sbxp_json_str(doc, "finished_at"));
    const char *content = sbxp_json_str(doc, "content");
    static const char pre[] = "# sbx: ";
    if (content && !strncmp(content, pre, sizeof pre - 1)) {
        content += sizeof pre - 1;
        size_t n = strcspn(content, "\n");
        if (n >= sizeof s->content)
            n = sizeof s->content - 1;
        memcpy(s->content, content, n);
        s->content[n] = '\0';
    }
    json_object_put(doc);
    return SBX_OK;
}

/* ---- the directory ----------------------------------------------------- */

struct chunk {
    uint64_t idx, size;
};

struct stream_files {
    struct chunk c[TRACK_MAX];
    size_t n;
    int done;
};

struct dir_view {
    struct stream_files s[2]; /* stdout, stderr */
    int marked;               /* id.<id> is there */
    int started;              /* pid is there: the readers run */
    const struct ref *r;
};

static int on_dir_entry(void *ctx, json_object *fi)
{
    struct dir_view *v = ctx;
    const char *path = sbxp_json_str(fi, "path");
    const char *base = path ? strrchr(path, '/') : NULL;
    base = base ? base + 1 : path;
    if (!base)
        return SBX_OK;
    if (!strncmp(base, "id.", 3) && !strcmp(base + 3, v->r->id)) {
        v->marked = 1;
        return SBX_OK;
    }
    if (!strcmp(base, "pid")) {
        v->started = 1;
        return SBX_OK;
    }
    if ((base[0] != 'o' && base[0] != 'e') || base[1] != '.')
        return SBX_OK;
    struct stream_files *sf = &v->s[base[0] == 'e'];
    if (!strcmp(base + 2, "done")) {
        sf->done = 1;
        return SBX_OK;
    }
    const char *digits = base + 2;
    if (strlen(digits) != 9 || strspn(digits, "0123456789") != 9 || sf->n >= TRACK_MAX)
        return SBX_OK;
    json_object *sz = NULL;
    if (!json_object_object_get_ex(fi, "size", &sz))
        return SBX_OK;
    int64_t size = json_object_get_int64(sz);
    if (size < 0)
        return SBX_OK;
    uint64_t idx = strtoull(digits, NULL, 10);
    /* keep them sorted by index (execd lists in lexical order anyway) */
    size_t at = sf->n;
    while (at > 0 && sf->c[at - 1].idx > idx)
        at--;
    memmove(&sf->c[at + 1], &sf->c[at], (sf->n - at) * sizeof sf->c[0]);
    sf->c[at].idx = idx;
    sf->c[at].size = (uint64_t)size > v->r->chunk ? v->r->chunk : (uint64_t)size;
    sf->n++;
    return SBX_OK;
}

/* List the process's directory; SBX_E_NOT_FOUND when it is missing or not
 * this process's. */
static int view_dir(sbx_sandbox *sb, sbx_call *call, const struct ref *r, struct dir_view *v,
                    sbxp_http_error *err)
{
    int rc = SBX_OK;
    /* execd fails a listing (500) when an entry vanishes between its
     * readdir and its lstat, as split's filter removes old chunks: list
     * again. */
    for (int attempt = 0; attempt < 5; attempt++) {
        memset(v, 0, sizeof *v);
        v->r = r;
        rc = osb_list_dir(sb, call, r->dir, 1, on_dir_entry, v, err);
        if (!(rc == SBX_E_UNAVAILABLE && err->http_status == 500))
            break;
    }
    if (rc == SBX_E_NOT_FOUND && err->http_status == 404)
        return SBX_E_NOT_FOUND;
    if (rc != SBX_OK)
        return rc;
    return v->marked ? SBX_OK : SBX_E_NOT_FOUND;
}

static uint64_t stream_end(const struct stream_files *sf, uint64_t chunk)
{
    if (sf->n == 0)
        return 0;
    const struct chunk *last = &sf->c[sf->n - 1];
    return last->idx * chunk + last->size;
}

/* ---- reading a stream -------------------------------------------------- */

/* The caller's sink, refusing anything past `left` bytes (a server that
 * ignored the Range header). */
struct limit_sink {
    const struct sbx_sink *inner;
    uint64_t left, got;
    int over;
};

static int limit_write(void *ctx, const void *buf, size_t len)
{
    struct limit_sink *l = ctx;
    if (len > l->left) {
        l->over = 1;
        return SBX_E_PROTOCOL;
    }
    l->left -= len;
    l->got += len;
    return l->inner ? l->inner->write(l->inner->ctx, buf, len) : 0;
}

/* GET /files/download of one chunk, bytes off .. off+want-1, into sink.
 * *got: bytes delivered. SBX_E_NOT_FOUND when the chunk is gone. */
static int get_range(sbx_sandbox *sb, sbx_call *call, const char *file, uint64_t off,
                     uint64_t want, const struct sbx_sink *sink, uint64_t *got,
                     sbxp_http_error *err)
{
    struct osb_state *st = sb->st;
    *got = 0;
    char *e = sbxp_http_escape(file);
    if (!e)
        return sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
    char path[1024], range[96];
    snprintf(path, sizeof path, "/files/download?path=%s", e);
    free(e);
    snprintf(range, sizeof range, "Range: bytes=%" PRIu64 "-%" PRIu64, off, off + want - 1);
    const char *extra[] = {range, NULL};
    struct sbxp_call_cancel c;
    sbxp_call_cancel_init(&c, st->host, call);
    const char *hdrs[16];
    struct sbxp_http_request req;
    osb_service_request(sb, &sb->execd, &req, hdrs, 16, extra, &c);
    req.method = "GET";
    req.path = path;
    req.stall_timeout_ms = st->cfg.request_timeout_ms;
    memset(err, 0, sizeof *err);
    sbxp_http_xfer *x = NULL;
    int rc = sbxp_http_start(sb->execd.http, &req, &x, err);
    if (rc == SBX_E_INVALID && err->http_status == 416)
        return SBX_OK; /* nothing there yet */
    if (rc != SBX_OK)
        return rc;
    long status = sbxp_http_xfer_status(x);
    if (status != 206 && off != 0) {
        sbxp_http_xfer_free(x);
        return sbxp_http_fail(err, SBX_E_PROTOCOL,
                              "GET /files/download answered %ld to a byte range", status);
    }
    struct limit_sink l = {sink, want, 0, 0};
    struct sbx_sink ls = SBX_SINK_INIT(&l, limit_write);
    rc = sbxp_http_xfer_pump(x, &ls, err);
    sbxp_http_xfer_free(x);
    *got = l.got;
    if (rc != SBX_OK && l.over) {
        err->from_callback = 0;
        return sbxp_http_fail(err, SBX_E_PROTOCOL,
                              "GET /files/download sent more than the byte range asked for");
    }
    return rc;
}

struct cursor {
    uint64_t pos, lost, delivered, max;
};

/* Deliver stream bytes from cur->pos on (up to cur->max in all).
 * SBX_E_NOT_FOUND: a chunk vanished under the read (list again). */
static int read_stream(sbx_sandbox *sb, sbx_call *call, const struct ref *r, char which,
                       const struct stream_files *sf, const struct sbx_sink *sink,
                       struct cursor *cur, sbxp_http_error *err)
{
    const uint64_t C = r->chunk;
    while (cur->delivered < cur->max && sf->n) {
        uint64_t k = cur->pos / C, off = cur->pos % C;
        const struct chunk *ch = NULL;
        for (size_t i = 0; i < sf->n; i++)
            if (sf->c[i].idx >= k) {
                ch = &sf->c[i];
                break;
            }
        if (!ch)
            break; /* at the end */
        if (ch->idx > k) {
            /* dropped from the replay buffer: resume at the oldest kept */
            cur->lost += ch->idx * C - cur->pos;
            cur->pos = ch->idx * C;
            continue;
        }
        if (off >= ch->size) {
            /* A chunk short of C under a later one is still being written
             * (split starts the next filter while the last one's cat may
             * still flush); only once the stream ended is it a chunk cut
             * short (not split's doing), skipped as lost. */
            if (ch != &sf->c[sf->n - 1] && ch->size < C && sf->done) {
                cur->lost += (k + 1) * C - cur->pos;
                cur->pos = (k + 1) * C;
                continue;
            }
            break;
        }
        uint64_t want = ch->size - off;
        if (want > cur->max - cur->delivered)
            want = cur->max - cur->delivered;
        char file[600];
        snprintf(file, sizeof file, "%s/%c.%09" PRIu64, r->dir, which, k);
        uint64_t got = 0;
        int rc = get_range(sb, call, file, off, want, sink, &got, err);
        cur->pos += got;
        cur->delivered += got;
        if (rc != SBX_OK)
            return rc;
        if (got < want)
            break;
    }
    return SBX_OK;
}

static int sleep_or_cancel(struct osb_state *st, sbx_call *call, int ms)
{
    struct sbxp_call_cancel c;
    sbxp_call_cancel_init(&c, st->host, call);
    struct pollfd p = {c.c.fd, POLLIN, 0};
    if (poll(&p, p.fd >= 0 ? 1 : 0, ms) > 0 || (c.c.check && c.c.check(c.c.ctx)))
        return SBX_E_CANCELLED;
    return SBX_OK;
}

int osb_proc_read(sbx_sandbox *sb, sbx_call *call, const char *id,
                  const struct sbx_proc_read_args *args, struct sbx_proc_read_result *res)
{
    struct osb_state *st = sb->st;
    struct ref r;
    if (!parse_id(st, id, &r))
        return not_found(st, call, "proc_read", id);
    uint32_t size = res->size;
    memset(res, 0, sizeof *res);
    res->size = size;
    uint64_t max = args->max_bytes ? args->max_bytes : READ_DEFAULT;
    struct cursor cur[2] = {{args->out_cursor, 0, 0, max}, {args->err_cursor, 0, 0, max}};
    const struct sbx_sink *sinks[2] = {args->out, args->err};
    int64_t deadline = sbxs_now_ms() + args->wait_ms;
    int pause = POLL_MIN_MS;
    int released = 0;
    int64_t first_ended_ms = 0;
    osb_keep_alive(sb, call);
    for (;;) {
        struct status s;
        sbxp_http_error err;
        int rc = get_status(sb, call, &r, &s, &err);
        if (rc != SBX_OK)
            return osb_service_report(sb, call, &err, "proc_read: the state of process %s", id);
        struct dir_view v;
        rc = view_dir(sb, call, &r, &v, &err);
        if (rc == SBX_E_NOT_FOUND)
            return not_found(st, call, "proc_read", id);
        if (rc != SBX_OK)
            return osb_service_report(sb, call, &err, "proc_read: listing process %s", id);
        if (!s.known)
            return osb_error(st, call, SBX_E_PROTOCOL,
                             "opensandbox: proc_read: execd in %s no longer knows command %s of "
                             "process %s (execd was restarted): its state is lost",
                             sb->id, r.cid, id);
        for (int i = 0; i < 2; i++)
            if (cur[i].pos > stream_end(&v.s[i], r.chunk) &&
                (v.s[i].done || cur[i].pos > stream_end(&v.s[i], r.chunk) + r.chunk))
                return osb_error(st, call, SBX_E_INVALID,
                                 "opensandbox: proc_read: the %s cursor %" PRIu64
                                 " is past the end of the stream (%" PRIu64 " bytes)",
                                 i ? "stderr" : "stdout", cur[i].pos,
                                 stream_end(&v.s[i], r.chunk));
        /* The replay buffer is the last `buffer` bytes of each stream
         * (the chunks hold a little more: 4 C .. 5 C): older bytes are
         * lost, exactly, even where a chunk still has them. */
        for (int i = 0; i < 2; i++) {
            uint64_t end = stream_end(&v.s[i], r.chunk);
            uint64_t lo = end > r.buffer ? end - r.buffer : 0;
            if (cur[i].pos < lo) {
                cur[i].lost += lo - cur[i].pos;
                cur[i].pos = lo;
            }
        }
        int again = 0;
        for (int i = 0; i < 2 && rc == SBX_OK; i++) {
            rc = read_stream(sb, call, &r, i ? 'e' : 'o', &v.s[i], sinks[i], &cur[i], &err);
            if (rc == SBX_E_NOT_FOUND && err.http_status == 404) {
                again = 1; /* a chunk was dropped meanwhile: list again */
                rc = SBX_OK;
            }
        }
        if (rc != SBX_OK && (cur[0].delivered || cur[1].delivered)) {
            /* Bytes reached the sinks before the failure: report them (a
             * failed read would make the caller read them twice); the
             * next read meets the failure again, or not. */
            st->host->log(st->host, SBX_LOG_INFO, "opensandbox: proc_read of %s cut short: %s",
                          id, err.message);
            rc = SBX_OK;
            again = 0;
        }
        if (rc != SBX_OK)
            return osb_service_report(sb, call, &err, "proc_read: reading the output of %s", id);
        if (again && !cur[0].delivered && !cur[1].delivered)
            continue;
        res->out_cursor = cur[0].pos;
        res->err_cursor = cur[1].pos;
        res->out_lost = cur[0].lost;
        res->err_lost = cur[1].lost;
        /* A reader waits in open() for the program to open its FIFO; a
         * wrapper killed before that (a signal, execd's timeout) would
         * leave it waiting for good. Once the program has ended, opening
         * the FIFOs read-write and closing them releases such a reader
         * (end of file); to a reader already reading it does nothing. */
        if (!s.running && !(v.s[0].done && v.s[1].done) && !released &&
            sbxs_now_ms() - first_ended_ms >= RELEASE_AFTER_MS) {
            char text[1400];
            snprintf(text, sizeof text,
                     "for f in '%s/op' '%s/ep'; do [ -p \"$f\" ] && : 1<>\"$f\"; done; exit 0",
                     r.dir, r.dir);
            char msg[128];
            int code = 0;
            if (helper(sb, call, text, &code, msg, sizeof msg) == SBX_OK)
                released = 1;
        }
        if (!s.running && !first_ended_ms)
            first_ended_ms = sbxs_now_ms();
        /* Ended once execd saw the program end and both readers saw the
         * end of their stream: all its output is in the buffer then (a
         * command killed before its readers ran has no output). */
        if (!s.running && (!v.started || (v.s[0].done && v.s[1].done))) {
            res->state = SBX_PROC_EXITED;
            res->exit_code = s.exit_code;
            res->term_signal = s.term_signal;
            res->timed_out = s.term_signal == 9 && r.timeout_ms > 0 && s.finished_ns &&
                             s.started_ns &&
                             (s.finished_ns - s.started_ns) / 1000000 >= r.timeout_ms - 50;
            res->eof = cur[0].pos == stream_end(&v.s[0], r.chunk) &&
                       cur[1].pos == stream_end(&v.s[1], r.chunk);
        }
        if (cur[0].delivered || cur[1].delivered || res->eof)
            return SBX_OK;
        int64_t left = deadline - sbxs_now_ms();
        if (left <= 0)
            return SBX_OK;
        if (sleep_or_cancel(st, call, (int)(left < pause ? left : pause)) != SBX_OK)
            return osb_error(st, call, SBX_E_CANCELLED, "opensandbox: proc_read cancelled");
        pause = pause * 2 > POLL_MAX_MS ? POLL_MAX_MS : pause * 2;
    }
}

/* ---- start ------------------------------------------------------------- */

/* argv joined by spaces for listings: printable ASCII, cut at cap - 1. */
static void display(const char *const *argv, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; argv[i] && o + 1 < cap; i++) {
        if (i && o + 1 < cap)
            out[o++] = ' ';
        for (const char *p = argv[i]; *p && o + 1 < cap; p++)
            out[o++] = (unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f ? '?' : *p;
    }
    out[o] = '\0';
}

/* The text execd runs: the pipes' readers and the stdin keeper out of the
 * program's process group (setsid), then the program in place of the
 * shell. The first line is what proc_list shows. */
static char *wrapper(const char *dir, uint64_t chunk, const char *const *argv, const char *shown)
{
    size_t len = strlen(dir) * 8 + strlen(shown) + 1024;
    for (size_t i = 0; argv[i]; i++)
        len += strlen(argv[i]) * 4 + 3;
    char *s = malloc(len);
    if (!s)
        return NULL;
    size_t o = (size_t)snprintf(
        s, len,
        "# sbx: %s\n"
        "d='%s'\n"
        "mkdir -p \"$d\" && mkfifo -m 600 \"$d/in\" \"$d/op\" \"$d/ep\" || exit 125\n"
        "printf '%%s\\n' 'n=${FILE##*.}' 'n=$(expr \"$n\" + 0)' "
        "'if [ \"$n\" -ge %d ]; then rm -f \"${FILE%%.*}.$(printf %%09d $((n - %d)))\"; fi' "
        "'exec cat >\"$FILE\"' >\"$d/f\" || exit 125\n"
        "for x in o e; do " SAFE_PATH " setsid sh -c 'split -a 9 -d -b %" PRIu64
        " --filter=\"sh $0/f\" - \"$0/$1.\" <\"$0/$1p\"; : >\"$0/$1.done\"' \"$d\" \"$x\" "
        "</dev/null >/dev/null 2>&1 & done\n"
        SAFE_PATH " setsid sh -c 'exec 4<>\"$0/in\"; echo $$ >\"$0/keeper\"; "
        "exec tail --pid=\"$1\" -s 1 -f /dev/null' \"$d\" \"$$\" </dev/null >/dev/null 2>&1 &\n"
        /* the pipes are opened by the shell before its pid is written: a
         * signal sent once the pid is there (proc_signal waits for it)
         * ends a writer the readers already have, so they see end of file
         * (killed inside the opens, the readers would wait for ever) */
        "exec <\"$d/in\" >\"$d/op\" 2>\"$d/ep\"\n"
        /* pid: the readers run (a command killed before this wrote nothing) */
        "echo $$ >\"$d/pid\"\n"
        "exec",
        shown, dir, CHUNKS_KEPT, CHUNKS_KEPT, chunk);
    for (size_t i = 0; argv[i]; i++) {
        char *q = osb_quote(argv[i]);
        if (!q) {
            free(s);
            return NULL;
        }
        o += (size_t)snprintf(s + o, len - o, " %s", q);
        free(q);
    }
    snprintf(s + o, len - o, "\n");
    return s;
}

static long empty_read(void *ctx, void *buf, size_t cap)
{
    (void)ctx;
    (void)buf;
    (void)cap;
    return 0;
}

int osb_proc_start(sbx_sandbox *sb, sbx_call *call, const struct sbx_proc_spec *spec,
                   char id[SBX_PROC_ID_MAX])
{
    struct osb_state *st = sb->st;
    if (!spec->argv || !spec->argv[0] || !spec->argv[0][0])
        return osb_error(st, call, SBX_E_INVALID, "opensandbox: proc_start: empty argv");
    if (spec->flags & SBX_PROC_PTY)
        return osb_error(st, call, SBX_E_UNSUPPORTED,
                         "opensandbox: proc_start: no pseudo-terminal (execd's published API "
                         "has none)");
    char *cwd = NULL;
    if (spec->cwd && *spec->cwd) {
        int type;
        int rc = osb_resolve(sb, call, "proc_start cwd", spec->cwd, 1, &cwd, &type);
        if (rc != SBX_OK)
            return rc;
        if (type != OSB_FT_DIR) {
            free(cwd);
            return osb_error(st, call, SBX_E_INVALID,
                             "opensandbox: proc_start: cwd %s is not a directory", spec->cwd);
        }
    }
    osb_keep_alive(sb, call);
    uint64_t buffer = spec->buffer_bytes ? spec->buffer_bytes : st->cfg.proc_buffer;
    if (buffer > (1ull << 34))
        return osb_error(st, call, SBX_E_INVALID,
                         "opensandbox: proc_start: a replay buffer of %llu bytes is too large "
                         "(16 GiB at most)", (unsigned long long)buffer);
    uint64_t chunk = chunk_of(buffer);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    long long ms = (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
    char rnd[9];
    sbxs_random_hex(rnd, 4);
    struct ref r;
    memset(&r, 0, sizeof r);
    char name[64];
    snprintf(name, sizeof name, "%013lld%s", ms % 10000000000000LL, rnd);
    memcpy(r.name, name, NAME_LEN);
    snprintf(r.dir, sizeof r.dir, "%s/%s", st->cfg.proc_dir, r.name);
    char shown[201];
    display(spec->argv, shown, sizeof shown);
    char *text = wrapper(r.dir, chunk, spec->argv, shown);
    int rc = text ? SBX_OK : osb_error(st, call, SBX_E_NOMEM, "out of memory");
    char cid[CID_MAX + 16] = "";
    if (rc == SBX_OK)
        rc = osb_background(sb, call, text, cwd ? cwd : st->cfg.workspace, spec->env,
                            spec->timeout_ms, cid, sizeof cid);
    free(text);
    free(cwd);
    if (rc != SBX_OK)
        return rc;
    size_t cl = strlen(cid);
    int ok = cl > 0 && cl <= CID_MAX;
    for (size_t i = 0; ok && i < cl; i++)
        ok = is_alnum(cid[i]) || cid[i] == '-' || cid[i] == '_';
    if (!ok)
        return osb_error(st, call, SBX_E_PROTOCOL,
                         "opensandbox: proc_start: execd named the command with an unusable id");
    char full[SBX_PROC_ID_MAX];
    if (snprintf(full, sizeof full, "%s.%" PRIu64 ".%lld.%s", r.name, buffer,
                 (long long)spec->timeout_ms, cid) >= (int)sizeof full)
        return osb_error(st, call, SBX_E_PROTOCOL, "opensandbox: proc_start: id too long");
    /* The marker that ties the directory to this command. */
    char marker[700];
    snprintf(marker, sizeof marker, "%s/id.%s", r.dir, full);
    struct sbx_source empty = SBX_SOURCE_INIT(NULL, empty_read);
    sbxp_http_error err;
    rc = osb_upload(sb, call, marker, 0600, &empty, &err);
    if (rc != SBX_OK)
        return osb_service_report(sb, call, &err, "proc_start: recording process %s", r.name);
    memset(id, 0, SBX_PROC_ID_MAX);
    memcpy(id, full, strlen(full));
    return SBX_OK;
}

/* ---- stdin ------------------------------------------------------------- */

struct mem_src {
    const char *p;
    size_t left;
};

static long mem_read(void *ctx, void *buf, size_t cap)
{
    struct mem_src *m = ctx;
    size_t n = m->left < cap ? m->left : cap;
    memcpy(buf, m->p, n);
    m->p += n;
    m->left -= n;
    return (long)n;
}

/* Shell text waiting up to a second for "<dir>/<file>", which the wrapper
 * writes just after execd started it. */
#define WAIT_FOR(file) \
    "i=0; while [ ! -s '%s/" file "' ] && [ $i -lt 50 ]; do sleep 0.02; i=$((i+1)); done; "

/* Run a short script in the sandbox; *code its exit code. */
static int helper(sbx_sandbox *sb, sbx_call *call, const char *text, int *code, char *msg,
                  size_t cap)
{
    return osb_sh(sb, call, text, NULL, 30000, code, msg, cap);
}

int osb_proc_write(sbx_sandbox *sb, sbx_call *call, const char *id, const void *data,
                   size_t len, uint32_t flags)
{
    struct osb_state *st = sb->st;
    struct ref r;
    if (!parse_id(st, id, &r))
        return not_found(st, call, "proc_write", id);
    struct status s;
    sbxp_http_error err;
    int rc = get_status(sb, call, &r, &s, &err);
    if (rc != SBX_OK)
        return osb_service_report(sb, call, &err, "proc_write: the state of process %s", id);
    struct dir_view v;
    rc = view_dir(sb, call, &r, &v, &err);
    if (rc == SBX_E_NOT_FOUND)
        return not_found(st, call, "proc_write", id);
    if (rc != SBX_OK)
        return osb_service_report(sb, call, &err, "proc_write: listing process %s", id);
    if (!s.known)
        return osb_error(st, call, SBX_E_PROTOCOL,
                         "opensandbox: proc_write: execd no longer knows process %s (execd was "
                         "restarted)", id);
    if (!s.running)
        return osb_error(st, call, SBX_E_INVALID,
                         "opensandbox: proc_write: process %s has ended", id);
    osb_keep_alive(sb, call);
    char msg[256];
    int code = 0;
    /* The keeper holds the FIFO while stdin is open: without it, stdin is
     * closed (or the program has ended). */
    if (len) {
        char text[2048];
        snprintf(text, sizeof text,
                 WAIT_FOR("keeper") "k=$(cat '%s/keeper' 2>/dev/null) && kill -0 \"$k\"", r.dir,
                 r.dir);
        rc = helper(sb, call, text, &code, msg, sizeof msg);
        if (rc != SBX_OK)
            return rc;
        if (code != 0)
            return osb_error(st, call, SBX_E_INVALID,
                             "opensandbox: proc_write: the stdin of process %s is closed", id);
        char fifo[600];
        snprintf(fifo, sizeof fifo, "%s/in", r.dir);
        struct mem_src m = {data, len};
        struct sbx_source src = SBX_SOURCE_INIT(&m, mem_read);
        rc = osb_upload(sb, call, fifo, 0, &src, &err);
        if (rc != SBX_OK)
            return osb_service_report(sb, call, &err, "proc_write: writing to process %s", id);
    }
    if (flags & SBX_PROC_WRITE_CLOSE) {
        char text[2048];
        snprintf(text, sizeof text,
                 WAIT_FOR("keeper") "k=$(cat '%s/keeper' 2>/dev/null) && kill \"$k\"", r.dir,
                 r.dir);
        rc = helper(sb, call, text, &code, msg, sizeof msg);
        if (rc != SBX_OK)
            return rc;
        if (code != 0 && !len)
            return osb_error(st, call, SBX_E_INVALID,
                             "opensandbox: proc_write: the stdin of process %s is already closed",
                             id);
    }
    return SBX_OK;
}

/* ---- signal ------------------------------------------------------------ */

int osb_proc_signal(sbx_sandbox *sb, sbx_call *call, const char *id, int signo)
{
    struct osb_state *st = sb->st;
    if (signo < 1 || signo > 64)
        return osb_error(st, call, SBX_E_INVALID, "opensandbox: proc_signal: no signal %d", signo);
    struct ref r;
    if (!parse_id(st, id, &r))
        return not_found(st, call, "proc_signal", id);
    struct status s;
    sbxp_http_error err;
    int rc = get_status(sb, call, &r, &s, &err);
    if (rc != SBX_OK)
        return osb_service_report(sb, call, &err, "proc_signal: the state of process %s", id);
    struct dir_view v;
    rc = view_dir(sb, call, &r, &v, &err);
    if (rc == SBX_E_NOT_FOUND)
        return not_found(st, call, "proc_signal", id);
    if (rc != SBX_OK)
        return osb_service_report(sb, call, &err, "proc_signal: listing process %s", id);
    if (!s.known)
        return osb_error(st, call, SBX_E_PROTOCOL,
                         "opensandbox: proc_signal: execd no longer knows process %s (execd was "
                         "restarted)", id);
    if (!s.running)
        return SBX_OK;
    char msg[256];
    int code = 0;
    /* A group that is gone by now (it just ended) is not a failure. */
    char text[2048];
    snprintf(text, sizeof text,
             WAIT_FOR("pid") "p=$(cat '%s/pid') && case $p in *[!0-9]*|'') exit 3;; esac && "
             "{ kill -%d \"-$p\" 2>/dev/null || ! kill -0 \"-$p\" 2>/dev/null || exit 4; }",
             r.dir, r.dir, signo);
    rc = helper(sb, call, text, &code, msg, sizeof msg);
    if (rc != SBX_OK)
        return rc;
    if (code != 0)
        return osb_error(st, call, SBX_E_IO,
                         "opensandbox: proc_signal: sending signal %d to process %s failed (%d)%s%s",
                         signo, id, code, msg[0] ? ": " : "", msg);
    return SBX_OK;
}

/* ---- list ------------------------------------------------------------ */

struct list_ctx {
    char (*ids)[SBX_PROC_ID_MAX];
    size_t n, cap;
    struct osb_state *st;
    int oom;
};

/* An entry of the depth-2 listing: <proc_dir>/<name>/id.<id> of a
 * process whose id names that directory. */
static int on_proc_entry(void *ctx, json_object *fi)
{
    struct list_ctx *l = ctx;
    const char *path = sbxp_json_str(fi, "path");
    size_t rl = strlen(l->st->cfg.proc_dir);
    if (!path || strncmp(path, l->st->cfg.proc_dir, rl) || path[rl] != '/')
        return SBX_OK;
    const char *rel = path + rl + 1;
    const char *slash = strchr(rel, '/');
    if (!slash || slash - rel != NAME_LEN || strncmp(slash + 1, "id.", 3))
        return SBX_OK;
    struct ref r;
    if (!parse_id(l->st, slash + 4, &r) || strncmp(r.name, rel, NAME_LEN))
        return SBX_OK;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 32;
        char (*p)[SBX_PROC_ID_MAX] = realloc(l->ids, cap * sizeof *p);
        if (!p) {
            l->oom = 1;
            return SBX_E_NOMEM;
        }
        l->ids = p;
        l->cap = cap;
    }
    snprintf(l->ids[l->n++], SBX_PROC_ID_MAX, "%s", r.id);
    return SBX_OK;
}

static int cmp_id(const void *a, const void *b)
{
    return strcmp((const char *)a, (const char *)b);
}

int osb_proc_list(sbx_sandbox *sb, sbx_call *call, const struct sbx_proc_list_sink *sink)
{
    struct osb_state *st = sb->st;
    struct list_ctx l = {NULL, 0, 0, st, 0};
    sbxp_http_error err;
    int rc = osb_list_dir(sb, call, st->cfg.proc_dir, 2, on_proc_entry, &l, &err);
    if (rc == SBX_E_NOT_FOUND && err.http_status == 404) {
        free(l.ids);
        return SBX_OK; /* no process was ever started */
    }
    if (rc != SBX_OK) {
        free(l.ids);
        if (l.oom)
            return osb_error(st, call, SBX_E_NOMEM, "out of memory");
        return osb_service_report(sb, call, &err, "proc_list: listing %s", st->cfg.proc_dir);
    }
    /* names start with the start time: sorted ids are in start order */
    if (l.n) /* l.ids is NULL when nothing was listed */
        qsort(l.ids, l.n, sizeof *l.ids, cmp_id);
    for (size_t i = 0; i < l.n && rc == SBX_OK; i++) {
        struct ref r;
        parse_id(st, l.ids[i], &r);
        struct status s;
        rc = get_status(sb, call, &r, &s, &err);
        if (rc != SBX_OK) {
            rc = osb_service_report(sb, call, &err, "proc_list: the state of %s", r.id);
            break;
        }
        if (!s.known)
            continue; /* execd forgot it (it was restarted): nothing to report */
        struct sbx_proc_info info;
        memset(&info, 0, sizeof info);
        info.size = sizeof info;
        info.id = r.id;
        info.command = s.content;
        info.state = s.running ? SBX_PROC_RUNNING : SBX_PROC_EXITED;
        info.exit_code = s.running ? 0 : s.exit_code;
        info.term_signal = s.running ? 0 : s.term_signal;
        char ms[14];
        memcpy(ms, r.name, 13);
        ms[13] = '\0';
        info.started_ms = s.started_ns ? s.started_ns / 1000000 : atoll(ms);
        int src = sink->entry(sink->ctx, &info);
        if (src != 0)
            rc = src;
    }
    free(l.ids);
    return rc;
}
