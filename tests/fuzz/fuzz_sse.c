/*
 * fuzz_sse.c - the opensandbox provider's parser of execd's event stream
 * (plugins/opensandbox/events.c) on arbitrary bytes.
 *
 * Input: byte 0 says how the rest is cut into pieces; the rest is the
 * stream. The same bytes are parsed whole and in those pieces: the
 * outcome (status, and every output and event in order) must not depend
 * on where the reads ended, and output never exceeds the input's length.
 */
#include "osb.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct trace {
    unsigned char *buf;
    size_t len, cap;
    size_t output;
};

static void put(struct trace *t, const void *p, size_t n)
{
    if (t->len + n > t->cap) {
        size_t cap = t->cap ? t->cap : 256;
        while (cap < t->len + n)
            cap *= 2;
        t->buf = realloc(t->buf, cap);
        if (!t->buf)
            abort();
        t->cap = cap;
    }
    memcpy(t->buf + t->len, p, n);
    t->len += n;
}

static int on_output(void *ctx, int is_err, const char *text, size_t len)
{
    struct trace *t = ctx;
    put(t, is_err ? "E" : "O", 1);
    put(t, &len, sizeof len);
    put(t, text, len);
    t->output += len;
    return 0;
}

static int on_event(void *ctx, json_object *ev)
{
    struct trace *t = ctx;
    const char *s = json_object_to_json_string_ext(ev, JSON_C_TO_STRING_PLAIN);
    put(t, "V", 1);
    put(t, s, strlen(s) + 1);
    return 0;
}

static int parse(const uint8_t *p, size_t n, size_t piece, struct trace *t)
{
    struct osb_events e;
    osb_events_init(&e, on_output, on_event, t);
    int rc = 0;
    for (size_t off = 0; off < n && rc == 0; off += piece)
        rc = osb_events_feed(&e, p + off, n - off < piece ? n - off : piece);
    if (rc == 0)
        rc = osb_events_end(&e);
    osb_events_free(&e);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t piece = (size_t)(data[0] % 17) + 1;
    struct trace whole = {NULL, 0, 0, 0}, cut = {NULL, 0, 0, 0};
    int a = parse(data + 1, size - 1, size, &whole);
    int b = parse(data + 1, size - 1, piece, &cut);
    /* A malformed stream may stop at different points only if it stops. */
    if (a != b || (a == 0 && (whole.len != cut.len ||
                              (whole.len && memcmp(whole.buf, cut.buf, whole.len)))))
        abort();
    if (whole.output > size)
        abort();
    free(whole.buf);
    free(cut.buf);
    return 0;
}
