/*
 * events.c - execd's event stream (POST /command, text/event-stream):
 * each event is one JSON object ServerStreamEvent, either bare on its line
 * and followed by a blank line (what execd writes, sse.go) or in "data:"
 * lines ended by a blank line (standard SSE; the SDK accepts both).
 * "event:", "id:", "retry:" and ":" comment lines are ignored.
 *
 * Output events take a fast path that decodes the text member straight
 * into a reused buffer; anything else is parsed with json-c. Lines and
 * events are bounded (OSB_EVENT_MAX). See osb.h.
 */
#include "osb.h"

#include <stdlib.h>
#include <string.h>

void osb_events_init(struct osb_events *e,
                     int (*output)(void *ctx, int is_err, const char *text, size_t len),
                     int (*event)(void *ctx, json_object *ev), void *ctx)
{
    memset(e, 0, sizeof *e);
    e->output = output;
    e->event = event;
    e->ctx = ctx;
}

void osb_events_free(struct osb_events *e)
{
    free(e->ev);
    free(e->line);
    free(e->text);
    memset(e, 0, sizeof *e);
}

/* The event collected so far, parsed and handed on. */
static int dispatch(struct osb_events *r)
{
    if (!r->evlen)
        return SBX_OK;
    json_object *ev = json_tokener_parse(r->ev);
    r->evlen = 0;
    const char *type = ev && json_object_is_type(ev, json_type_object)
                           ? sbxp_json_str(ev, "type")
                           : NULL;
    if (!type) {
        json_object_put(ev);
        return SBX_E_PROTOCOL;
    }
    int rc;
    int is_err = !strcmp(type, "stderr");
    if (is_err || !strcmp(type, "stdout")) {
        json_object *t = NULL;
        const char *text = "";
        size_t len = 0;
        if (json_object_object_get_ex(ev, "text", &t) && json_object_is_type(t, json_type_string)) {
            text = json_object_get_string(t);
            len = (size_t)json_object_get_string_len(t); /* output may hold NULs */
        }
        rc = r->output(r->ctx, is_err, text, len);
    } else {
        rc = r->event(r->ctx, ev);
    }
    json_object_put(ev);
    return rc;
}

/* Four hex digits at p (p + 4 <= lim) as a number, or -1. */
static long hex4(const char *p, const char *lim)
{
    if (lim - p < 4)
        return -1;
    long v = 0;
    for (int i = 0; i < 4; i++) {
        char h = p[i];
        int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
              : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
        if (d < 0)
            return -1;
        v = v << 4 | d;
    }
    return v;
}

/* Decode the JSON string body at p (after its opening quote) into
 * r->text; *end is set past the closing quote. -1 when malformed. */
static long unescape(struct osb_events *r, const char *p, const char *lim, const char **end)
{
    size_t need = (size_t)(lim - p) + 1; /* decoded text is never longer */
    if (need > r->textcap) {
        char *t = realloc(r->text, need);
        if (!t)
            return -1;
        r->text = t;
        r->textcap = need;
    }
    char *o = r->text;
    while (p < lim && *p != '"') {
        unsigned char c = (unsigned char)*p;
        if (c < 0x20)
            return -1;
        if (c != '\\') {
            *o++ = *p++;
            continue;
        }
        if (++p >= lim)
            return -1;
        switch (*p++) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '/': *o++ = '/'; break;
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        case 'u': {
            long cp = hex4(p, lim);
            if (cp < 0)
                return -1;
            p += 4;
            if (cp >= 0xd800 && cp < 0xdc00 && lim - p >= 6 && p[0] == '\\' && p[1] == 'u') {
                long lo = hex4(p + 2, lim);
                if (lo >= 0xdc00 && lo < 0xe000) {
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                    p += 6;
                }
            }
            if (cp >= 0xd800 && cp < 0xe000)
                cp = 0xfffd; /* a lone surrogate */
            if (cp < 0x80) {
                *o++ = (char)cp;
            } else if (cp < 0x800) {
                *o++ = (char)(0xc0 | cp >> 6);
                *o++ = (char)(0x80 | (cp & 0x3f));
            } else if (cp < 0x10000) {
                *o++ = (char)(0xe0 | cp >> 12);
                *o++ = (char)(0x80 | ((cp >> 6) & 0x3f));
                *o++ = (char)(0x80 | (cp & 0x3f));
            } else {
                *o++ = (char)(0xf0 | cp >> 18);
                *o++ = (char)(0x80 | ((cp >> 12) & 0x3f));
                *o++ = (char)(0x80 | ((cp >> 6) & 0x3f));
                *o++ = (char)(0x80 | (cp & 0x3f));
            }
            break;
        }
        default:
            return -1;
        }
    }
    if (p >= lim)
        return -1;
    *end = p + 1;
    return (long)(o - r->text);
}

/*
 * The hot path: an output event exactly as execd writes it,
 * {"type":"stdout","text":"...","timestamp":N}, decoded without building
 * a JSON tree (64 MiB of output would otherwise allocate and free as much
 * again in small strings). 1 when it was one (*rc set), else 0.
 */
static int fast_output(struct osb_events *r, const char *p, size_t n, int *rc)
{
    static const char pre_out[] = "{\"type\":\"stdout\",\"text\":\"";
    static const char pre_err[] = "{\"type\":\"stderr\",\"text\":\"";
    const size_t pl = sizeof pre_out - 1;
    int out;
    if (n < pl + 2)
        return 0;
    if (!memcmp(p, pre_out, pl))
        out = 1;
    else if (!memcmp(p, pre_err, pl))
        out = 0;
    else
        return 0;
    const char *lim = p + n, *end;
    long len = unescape(r, p + pl, lim, &end);
    if (len < 0)
        return 0;
    /* The rest may only be number members: ,"timestamp":123 ... } */
    while (end < lim && *end == ',') {
        const char *q = end + 1;
        if (q >= lim || *q != '"')
            return 0;
        const char *close = memchr(q + 1, '"', (size_t)(lim - q - 1));
        if (!close || close + 1 >= lim || close[1] != ':')
            return 0;
        q = close + 2;
        if (q < lim && *q == '-')
            q++;
        const char *digits = q;
        while (q < lim && *q >= '0' && *q <= '9')
            q++;
        if (q == digits)
            return 0;
        end = q;
    }
    if (end + 1 != lim || *end != '}')
        return 0;
    *rc = r->output(r->ctx, !out, r->text, (size_t)len);
    return 1;
}

/* One line of the stream (without its newline). */
static int on_line(struct osb_events *r, const char *l, size_t n)
{
    if (n && l[n - 1] == '\r')
        n--;
    if (n == 0)
        return dispatch(r);
    const char *payload = l;
    size_t pl = n;
    if (n >= 5 && !memcmp(l, "data:", 5)) {
        payload = l + 5;
        pl = n - 5;
        if (pl && *payload == ' ')
            payload++, pl--;
    } else if (*l != '{' && r->evlen == 0) {
        return SBX_OK; /* event:, id:, retry:, or a ":" comment */
    }
    int frc;
    if (r->evlen == 0 && fast_output(r, payload, pl, &frc))
        return frc;
    if (r->evlen + pl + 2 > OSB_EVENT_MAX)
        return SBX_E_PROTOCOL;
    if (r->evlen + pl + 2 > r->evcap) {
        size_t cap = (r->evlen + pl + 2) * 2;
        char *p = realloc(r->ev, cap);
        if (!p)
            return SBX_E_NOMEM;
        r->ev = p;
        r->evcap = cap;
    }
    if (r->evlen)
        r->ev[r->evlen++] = '\n';
    memcpy(r->ev + r->evlen, payload, pl);
    r->evlen += pl;
    r->ev[r->evlen] = '\0';
    /* A bare JSON event is complete on its line (execd writes "{..}\n\n"). */
    if (payload == l && *l == '{')
        return dispatch(r);
    return SBX_OK;
}

int osb_events_feed(struct osb_events *r, const void *buf, size_t len)
{
    const char *p = buf;
    while (len) {
        const char *nl = memchr(p, '\n', len);
        size_t take = nl ? (size_t)(nl - p) : len;
        int rc;
        if (nl && r->linelen == 0) {
            rc = on_line(r, p, take); /* the whole line is here: no copy */
        } else {
            if (r->linelen + take + 1 > OSB_EVENT_MAX)
                return SBX_E_PROTOCOL;
            if (r->linelen + take + 1 > r->linecap) {
                size_t cap = (r->linelen + take + 1) * 2;
                char *q = realloc(r->line, cap);
                if (!q)
                    return SBX_E_NOMEM;
                r->line = q;
                r->linecap = cap;
            }
            memcpy(r->line + r->linelen, p, take);
            r->linelen += take;
            rc = SBX_OK;
            if (nl) {
                rc = on_line(r, r->line, r->linelen);
                r->linelen = 0;
            }
        }
        if (rc != SBX_OK)
            return rc;
        if (!nl)
            break;
        p = nl + 1;
        len -= take + 1;
    }
    return SBX_OK;
}

int osb_events_end(struct osb_events *r)
{
    int rc = SBX_OK;
    if (r->linelen) {
        rc = on_line(r, r->line, r->linelen);
        r->linelen = 0;
    }
    if (rc == SBX_OK)
        rc = dispatch(r);
    return rc;
}
