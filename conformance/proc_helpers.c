/*
 * proc_helpers.c - starting processes (SBX_CAP_PROCESSES) and reading their
 * output by cursor, for the process and PTY cases.
 *
 * A cf_proc keeps its cursors and what it read (up to CF_PROC_KEEP bytes
 * per stream; beyond, bytes are counted only), and checks on every read
 * what the contract promises whatever the provider: the cursor moves by
 * exactly lost + delivered (libsbx refuses other answers already), a
 * process that reported its end never runs again, and eof comes only with
 * the end.
 */
#include "cf_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sink appending to one of a cf_proc's buffers. */
struct keep {
    char **buf;
    size_t *len, *cap;
    uint64_t *seen;
};

static int keep_write(void *ctx, const void *data, size_t len)
{
    struct keep *k = ctx;
    *k->seen += len;
    size_t room = *k->len < CF_PROC_KEEP ? CF_PROC_KEEP - *k->len : 0;
    size_t n = len < room ? len : room;
    if (!n)
        return 0;
    if (*k->len + n + 1 > *k->cap) {
        size_t cap = (*k->len + n + 1) * 2;
        if (cap > CF_PROC_KEEP + 1)
            cap = CF_PROC_KEEP + 1;
        char *nb = realloc(*k->buf, cap);
        if (!nb)
            return SBX_E_NOMEM;
        *k->buf = nb;
        *k->cap = cap;
    }
    memcpy(*k->buf + *k->len, data, n);
    *k->len += n;
    (*k->buf)[*k->len] = '\0';
    return 0;
}

bool cf_proc_start(struct cf_test *t, sbx_handle *h, struct cf_proc *p,
                   const struct sbx_proc_spec *spec)
{
    memset(p, 0, sizeof *p);
    p->h = h;
    sbx_error err;
    sbx_error_clear(&err);
    int rc = sbx_proc_start(h, spec, p->id, NULL, &err);
    if (rc != SBX_OK) {
        char q[200];
        const char *cmd = spec->argv[0] && spec->argv[1] && spec->argv[2] ? spec->argv[2]
                                                                            : spec->argv[0];
        return cf_fail(t, "proc_start of %s: %s: %s", cf_quote(cmd, strlen(cmd), q, sizeof q),
                       cf_status_name(rc), err.message);
    }
    return true;
}

bool cf_proc_sh(struct cf_test *t, sbx_handle *h, struct cf_proc *p, const char *script,
                uint32_t flags)
{
    const char *argv[] = {"sh", "-c", script, NULL};
    struct sbx_proc_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.size = sizeof spec;
    spec.flags = flags;
    spec.argv = argv;
    return cf_proc_start(t, h, p, &spec);
}

int cf_proc_read(struct cf_test *t, struct cf_proc *p, uint32_t wait_ms, uint64_t max)
{
    struct keep ko = {&p->out, &p->out_len, &p->out_cap, &p->out_seen};
    struct keep ke = {&p->err, &p->err_len, &p->err_cap, &p->err_seen};
    struct sbx_sink so = SBX_SINK_INIT(&ko, keep_write), se = SBX_SINK_INIT(&ke, keep_write);
    struct sbx_proc_read_args a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.wait_ms = wait_ms;
    a.out_cursor = p->out_cursor;
    a.err_cursor = p->err_cursor;
    a.max_bytes = max;
    a.out = &so;
    a.err = &se;
    struct sbx_proc_read_result r;
    memset(&r, 0, sizeof r);
    r.size = sizeof r;
    sbx_error_clear(&p->err_msg);
    int rc = sbx_proc_read(p->h, p->id, &a, &r, NULL, &p->err_msg);
    if (rc != SBX_OK)
        return rc;
    if (p->res.state == SBX_PROC_EXITED && r.state != SBX_PROC_EXITED)
        cf_fail(t, "process %s was reported ended, then running again", p->id);
    if (r.eof && r.state != SBX_PROC_EXITED)
        cf_fail(t, "process %s: eof while it still runs", p->id);
    p->out_cursor = r.out_cursor;
    p->err_cursor = r.err_cursor;
    p->out_lost += r.out_lost;
    p->err_lost += r.err_lost;
    p->res = r;
    p->reads++;
    return SBX_OK;
}

bool cf_proc_until_eof(struct cf_test *t, struct cf_proc *p, double seconds)
{
    double deadline = cf_now() + cf_bound(seconds);
    while (!p->res.eof) {
        if (cf_now() > deadline)
            return cf_fail(t, "process %s did not end within %.1f s (state %u, read so far "
                              "%llu bytes of stdout, %llu of stderr)",
                           p->id, cf_bound(seconds), (unsigned)p->res.state,
                           (unsigned long long)p->out_cursor,
                           (unsigned long long)p->err_cursor);
        int rc = cf_proc_read(t, p, 200, 0);
        if (rc != SBX_OK)
            return cf_fail(t, "proc_read of %s: %s: %s", p->id, cf_status_name(rc),
                           p->err_msg.message);
        if (cf_failed(t))
            return false;
    }
    return true;
}

/* Whether the text of buf (carriage returns left out) holds needle. */
static bool holds(const char *buf, size_t len, const char *needle)
{
    if (!buf)
        return !*needle;
    char *copy = malloc(len + 1);
    if (!copy)
        return false;
    size_t n = 0;
    for (size_t i = 0; i < len; i++)
        if (buf[i] != '\r')
            copy[n++] = buf[i];
    copy[n] = '\0';
    bool found = strstr(copy, needle) != NULL;
    free(copy);
    return found;
}

bool cf_proc_out_has(const struct cf_proc *p, const char *needle)
{
    return holds(p->out, p->out_len, needle);
}

bool cf_proc_until_text(struct cf_test *t, struct cf_proc *p, const char *needle,
                        double seconds)
{
    double deadline = cf_now() + cf_bound(seconds);
    char q[200], o[300];
    while (!cf_proc_out_has(p, needle)) {
        if (p->res.eof || cf_now() > deadline)
            return cf_fail(t, "process %s: no %s in its output within %.1f s (%s; it "
                              "printed %s)",
                           p->id, cf_quote(needle, strlen(needle), q, sizeof q),
                           cf_bound(seconds), p->res.eof ? "it ended" : "still running",
                           cf_quote(p->out ? p->out : "", p->out_len, o, sizeof o));
        int rc = cf_proc_read(t, p, 200, 0);
        if (rc != SBX_OK)
            return cf_fail(t, "proc_read of %s: %s: %s", p->id, cf_status_name(rc),
                           p->err_msg.message);
        if (cf_failed(t))
            return false;
    }
    return true;
}

void cf_proc_free(struct cf_proc *p)
{
    free(p->out);
    free(p->err);
    p->out = p->err = NULL;
}

bool cf_proc_expect_status(struct cf_test *t, int got, const sbx_error *err, int want,
                           const char *what)
{
    if (got == want)
        return true;
    return cf_fail(t, "%s returned %s (%s); want %s", what, cf_status_name(got),
                   got ? err->message : "no error", cf_status_name(want));
}

struct find_id {
    const char *id;
    struct sbx_proc_info *out;
    bool found;
    char command[256];
};

static int find_entry(void *ctx, const struct sbx_proc_info *info)
{
    struct find_id *f = ctx;
    if (!strcmp(info->id, f->id)) {
        f->found = true;
        *f->out = *info;
        snprintf(f->command, sizeof f->command, "%s", info->command ? info->command : "");
        f->out->id = NULL;
        f->out->command = NULL;
    }
    return 0;
}

bool cf_proc_listed(struct cf_test *t, sbx_handle *h, const char *id,
                    struct sbx_proc_info *out)
{
    struct find_id f = {id, out, false, ""};
    struct sbx_proc_list_sink sink = {sizeof sink, &f, find_entry};
    sbx_error err;
    int rc = sbx_proc_list(h, &sink, NULL, &err);
    if (rc != SBX_OK)
        return cf_fail(t, "proc_list: %s: %s", cf_status_name(rc), err.message);
    return f.found;
}
