/*
 * fuzz_demux.c - the Docker stream demultiplexer (plugins/docker
 * exec_stream.c) on arbitrary bytes, fed in arbitrary pieces.
 *
 * Input: byte 0 says whether the daemon reports that the exec got a
 * process (bit 0) and how the rest is cut into pieces (bits 1..7); the rest
 * is the stream. An independent reference parse of the same bytes counts
 * each stream's payload: for an exec that started, every payload byte must
 * reach its sink, in order, whatever the text (the bug this guards against
 * dropped stdout after 511 bytes when it began like the daemon's message).
 */
#include "exec_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct collect {
    unsigned char *buf;
    size_t len, cap;
};

static int collect_write(void *ctx, const void *p, size_t n)
{
    struct collect *c = ctx;
    if (n == 0)
        return 0;
    if (c->len + n > c->cap) {
        size_t cap = c->cap ? c->cap : 256;
        while (cap < c->len + n)
            cap *= 2;
        c->buf = realloc(c->buf, cap);
        c->cap = cap;
    }
    memcpy(c->buf + c->len, p, n);
    c->len += n;
    return 0;
}

static int started_answer;
static int started(void *ctx)
{
    (void)ctx;
    return started_answer;
}

/* The reference: payloads of well-formed frames, until the first bad
 * header (where the demultiplexer stops too). */
static void reference(const uint8_t *p, size_t n, struct collect *out, struct collect *err)
{
    size_t i = 0;
    while (i + 8 <= n) {
        if (p[i] > 3 || p[i + 1] || p[i + 2] || p[i + 3])
            return;
        uint32_t len = (uint32_t)p[i + 4] << 24 | (uint32_t)p[i + 5] << 16 |
                       (uint32_t)p[i + 6] << 8 | (uint32_t)p[i + 7];
        struct collect *to = p[i] == 1 ? out : err;
        i += 8;
        size_t take = len < n - i ? len : n - i;
        collect_write(to, p + i, take);
        i += take;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    started_answer = data[0] & 1;
    size_t piece = (size_t)(data[0] >> 1) + 1;
    const uint8_t *p = data + 1;
    size_t n = size - 1;

    struct collect out = {0}, err = {0}, want_out = {0}, want_err = {0};
    struct sbx_sink so = SBX_SINK_INIT(&out, collect_write);
    struct sbx_sink se = SBX_SINK_INIT(&err, collect_write);
    struct exec_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.out = &so;
    spec.err = &se;
    struct exec_outcome oc;
    memset(&oc, 0, sizeof oc);
    struct exec_demux d;
    memset(&d, 0, sizeof d);
    d.spec = &spec;
    d.oc = &oc;
    d.started = started;

    int rc = 0;
    for (size_t off = 0; off < n && rc == 0; off += piece) {
        size_t k = n - off < piece ? n - off : piece;
        rc = docker_exec_demux_feed(&d, (const char *)p + off, k);
    }
    docker_exec_demux_finish(&d, !started_answer);

    reference(p, n, &want_out, &want_err);
    if (err.len != want_err.len || (err.len && memcmp(err.buf, want_err.buf, err.len)))
        __builtin_trap(); /* stderr is never held or changed */
    if (started_answer &&
        (out.len != want_out.len || (out.len && memcmp(out.buf, want_out.buf, out.len))))
        __builtin_trap(); /* a started exec loses no stdout byte */
    if (!started_answer && out.len > want_out.len)
        __builtin_trap(); /* nothing invented */
    free(out.buf);
    free(err.buf);
    free(want_out.buf);
    free(want_err.buf);
    return 0;
}
