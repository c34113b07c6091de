/* text_sink.c - keeping the start of a byte stream as a string (see text_sink.h). */
#include "text_sink.h"

#include <string.h>

/* The sink's write: never fails, so the stream goes on to its end. */
static int text_write(void *ctx, const void *data, size_t len)
{
    struct sbxp_text_sink *t = ctx;
    size_t room = t->cap ? t->cap - 1 - t->len : 0;
    size_t n = len < room ? len : room;
    if (n) {
        memcpy(t->buf + t->len, data, n);
        t->len += n;
        t->buf[t->len] = '\0';
    }
    return 0;
}

void sbxp_text_sink_init(struct sbxp_text_sink *t, char *buf, size_t cap)
{
    t->buf = buf;
    t->cap = cap;
    t->len = 0;
    if (cap)
        buf[0] = '\0';
    struct sbx_sink s = SBX_SINK_INIT(t, text_write);
    t->sink = s;
}
