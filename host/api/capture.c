/*
 * capture.c - the bounded capture sink.
 *
 * Keeps the first head_max bytes and a ring of the last tail_max bytes, and
 * counts everything, so a command that prints gigabytes costs at most
 * head_max + tail_max bytes of memory.
 */
#include <sbx/sbx.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

SBX_API void sbx_capture_init(sbx_capture *c, size_t head_max, size_t tail_max)
{
    memset(c, 0, sizeof *c);
    c->head_max = head_max;
    c->tail_max = tail_max;
}

static void tail_push(sbx_capture *c, const char *p, size_t n)
{
    if (c->tail_max == 0)
        return;
    if (n >= c->tail_max) { /* only the last tail_max bytes survive */
        memcpy(c->tail, p + (n - c->tail_max), c->tail_max);
        c->tail_pos = 0;
        c->tail_len = c->tail_max;
        return;
    }
    size_t first = c->tail_max - c->tail_pos;
    if (first > n)
        first = n;
    memcpy(c->tail + c->tail_pos, p, first);
    memcpy(c->tail, p + first, n - first);
    c->tail_pos = (c->tail_pos + n) % c->tail_max;
    c->tail_len = c->tail_len + n > c->tail_max ? c->tail_max : c->tail_len + n;
}

static int capture_write(void *ctx, const void *buf, size_t len)
{
    sbx_capture *c = ctx;
    const char *p = buf;
    if (c->failed)
        return SBX_E_NOMEM;
    c->total += len;
    if (c->head_len < c->head_max) {
        if (!c->head && !(c->head = malloc(c->head_max))) {
            c->failed = true;
            return SBX_E_NOMEM;
        }
        size_t take = c->head_max - c->head_len;
        if (take > len)
            take = len;
        memcpy(c->head + c->head_len, p, take);
        c->head_len += take;
        p += take;
        len -= take;
    }
    if (len == 0)
        return SBX_OK;
    if (c->tail_max && !c->tail && !(c->tail = malloc(c->tail_max))) {
        c->failed = true;
        return SBX_E_NOMEM;
    }
    tail_push(c, p, len);
    if (c->total > (uint64_t)c->head_max + c->tail_max)
        c->truncated = true;
    return SBX_OK;
}

SBX_API struct sbx_sink sbx_capture_sink(sbx_capture *c)
{
    struct sbx_sink s = SBX_SINK_INIT(c, capture_write);
    return s;
}

SBX_API char *sbx_capture_text(const sbx_capture *c)
{
    char marker[80] = "";
    if (c->truncated) {
        uint64_t dropped = c->total - c->head_len - c->tail_len;
        snprintf(marker, sizeof marker, "\n[... %" PRIu64 " bytes truncated ...]\n",
                 dropped);
    }
    size_t mlen = strlen(marker);
    char *out = malloc(c->head_len + mlen + c->tail_len + 1);
    if (!out)
        return NULL;
    char *w = out;
    if (c->head_len)
        memcpy(w, c->head, c->head_len);
    w += c->head_len;
    memcpy(w, marker, mlen);
    w += mlen;
    /* The ring's oldest byte is at tail_pos once it has wrapped. */
    size_t start = c->tail_len == c->tail_max ? c->tail_pos : 0;
    for (size_t i = 0; i < c->tail_len; i++)
        *w++ = c->tail[(start + i) % c->tail_max];
    *w = '\0';
    return out;
}

SBX_API void sbx_capture_free(sbx_capture *c)
{
    free(c->head);
    free(c->tail);
    c->head = c->tail = NULL;
    c->head_len = c->tail_len = c->tail_pos = 0;
    c->total = 0;
    c->truncated = c->failed = false;
}
