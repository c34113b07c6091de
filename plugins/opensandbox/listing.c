/*
 * listing.c - GET /directories/list, read as it arrives. execd answers
 * one JSON array of FileInfo for the whole directory; rather than
 * holding that document (a directory of a million entries is a document
 * of a hundred megabytes), the array is split at its top level and each
 * element is parsed by json-c on its own, handed to the caller and
 * freed: memory stays at one entry (at most OSB_ENTRY_MAX bytes). See
 * osb.h.
 */
#include "osb.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Largest FileInfo object accepted (a path of PATH_MAX and its metadata). */
#define OSB_ENTRY_MAX (64u * 1024u)

enum { BEFORE, VALUE_OR_END, VALUE, COMMA_OR_END, DONE };

struct splitter {
    json_tokener *tok;
    int state;
    size_t elem_bytes;
    int (*entry)(void *ctx, json_object *fi);
    void *ctx;
    int cb_rc;
};

static int is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Bytes of the array: SBX_OK, SBX_E_PROTOCOL, or the callback's status
 * (kept in cb_rc). */
static int split_feed(struct splitter *s, const char *buf, size_t n)
{
    size_t i = 0;
    while (i < n) {
        switch (s->state) {
        case BEFORE:
            if (is_ws(buf[i])) {
                i++;
            } else if (buf[i] == '[') {
                s->state = VALUE_OR_END;
                i++;
            } else {
                return SBX_E_PROTOCOL;
            }
            break;
        case VALUE_OR_END:
        case COMMA_OR_END:
            if (is_ws(buf[i])) {
                i++;
            } else if (buf[i] == ']') {
                s->state = DONE;
                i++;
            } else if (s->state == COMMA_OR_END) {
                if (buf[i] != ',')
                    return SBX_E_PROTOCOL;
                s->state = VALUE;
                i++;
            } else {
                s->state = VALUE;
            }
            break;
        case VALUE: {
            if (s->elem_bytes == 0 && is_ws(buf[i])) {
                i++;
                break;
            }
            size_t left = n - i;
            int len = left > OSB_ENTRY_MAX ? (int)OSB_ENTRY_MAX : (int)left;
            json_object *o = json_tokener_parse_ex(s->tok, buf + i, len);
            enum json_tokener_error e = json_tokener_get_error(s->tok);
            if (e == json_tokener_continue) {
                s->elem_bytes += (size_t)len;
                if (s->elem_bytes > OSB_ENTRY_MAX)
                    return SBX_E_PROTOCOL;
                i += (size_t)len;
                break;
            }
            if (e != json_tokener_success || !o ||
                !json_object_is_type(o, json_type_object)) {
                json_object_put(o);
                return SBX_E_PROTOCOL;
            }
            i += json_tokener_get_parse_end(s->tok);
            json_tokener_reset(s->tok);
            s->elem_bytes = 0;
            s->state = COMMA_OR_END;
            int rc = s->entry(s->ctx, o);
            json_object_put(o);
            if (rc != SBX_OK) {
                s->cb_rc = rc;
                return rc;
            }
            break;
        }
        default: /* DONE: only white space may follow */
            if (!is_ws(buf[i]))
                return SBX_E_PROTOCOL;
            i++;
        }
    }
    return SBX_OK;
}

int osb_list_dir(sbx_sandbox *sb, sbx_call *call, const char *abs, int depth,
                 int (*entry)(void *ctx, json_object *fi), void *ctx, sbxp_http_error *err)
{
    struct osb_state *st = sb->st;
    memset(err, 0, sizeof *err);
    char *e = sbxp_http_escape(abs);
    if (!e)
        return sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
    size_t plen = strlen(e) + 48;
    char *path = malloc(plen);
    if (!path) {
        free(e);
        return sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
    }
    snprintf(path, plen, "/directories/list?path=%s&depth=%d", e, depth);
    free(e);
    struct sbxp_call_cancel c;
    sbxp_call_cancel_init(&c, st->host, call);
    const char *hdrs[16];
    static const char *const accept[] = {"Accept: application/json", NULL};
    struct sbxp_http_request req;
    osb_service_request(sb, &sb->execd, &req, hdrs, 16, accept, &c);
    req.method = "GET";
    req.path = path;
    req.stall_timeout_ms = st->cfg.request_timeout_ms;
    sbxp_http_xfer *x = NULL;
    /* the transfer names req.path in its errors: path lives until the end */
    int rc = sbxp_http_start(sb->execd.http, &req, &x, err);
    if (rc != SBX_OK) {
        free(path);
        return rc;
    }
    struct splitter s = {json_tokener_new(), BEFORE, 0, entry, ctx, SBX_OK};
    if (!s.tok) {
        sbxp_http_xfer_free(x);
        free(path);
        return sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
    }
    char buf[16384];
    for (;;) {
        size_t got = 0;
        rc = sbxp_http_xfer_read(x, buf, sizeof buf, &got, err);
        if (rc != SBX_OK || got == 0)
            break;
        rc = split_feed(&s, buf, got);
        if (rc != SBX_OK) {
            if (s.cb_rc != SBX_OK) {
                err->from_callback = 1;
                err->status = rc;
            } else {
                sbxp_http_fail(err, rc, "GET /directories/list: a malformed answer");
            }
            break;
        }
    }
    if (rc == SBX_OK && s.state != DONE)
        rc = sbxp_http_fail(err, SBX_E_PROTOCOL, "GET /directories/list: the answer ends early");
    json_tokener_free(s.tok);
    sbxp_http_xfer_free(x);
    free(path);
    return rc;
}

/* "2025-11-16T14:30:45Z", "...45.123456Z", "...45+08:00" as ns since the
 * epoch; 0 when it does not parse. */
int64_t osb_parse_time_ns(const char *s)
{
    if (!s)
        return 0;
    int y, mo, d, h, mi, sec, n = 0;
    if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &n) != 6)
        return 0;
    const char *p = s + n;
    int64_t frac = 0;
    if (*p == '.') {
        int digits = 0;
        for (p++; *p >= '0' && *p <= '9'; p++)
            if (digits < 9) {
                frac = frac * 10 + (*p - '0');
                digits++;
            }
        for (; digits < 9; digits++)
            frac *= 10;
    }
    int64_t off = 0;
    if (*p == '+' || *p == '-') {
        int oh = 0, om = 0;
        if (sscanf(p + 1, "%2d:%2d", &oh, &om) >= 1)
            off = (*p == '+' ? 1 : -1) * ((int64_t)oh * 3600 + om * 60);
    }
    /* days from civil (Howard Hinnant's algorithm): no timegm, no TZ */
    y -= mo <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (mo + (mo > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    int64_t days = era * 146097 + doe - 719468;
    int64_t secs = days * 86400 + h * 3600 + mi * 60 + sec - off;
    return secs * 1000000000 + frac;
}
