/*
 * pattern.c - deterministic byte streams for stdin and file cases.
 *
 * The bytes are a function of their offset, so a sink can check what comes
 * back while it streams, without keeping a copy: memory stays bounded
 * however large the stream.
 */
#include "cf_internal.h"

#include <string.h>

unsigned char cf_pattern_byte(uint64_t i, uint32_t seed)
{
    /* XOR with a per-block constant permutes 0..255 within each block. */
    uint64_t block = i >> 8;
    return (unsigned char)((i & 0xff) ^ ((block * 167u + seed) & 0xff));
}

static long pattern_read(void *ctx, void *buf, size_t cap)
{
    struct cf_pattern_source *s = ctx;
    if (s->pos >= s->len)
        return 0;
    /* Irregular chunk sizes (1 byte up to 64 KiB) exercise partial reads
     * and writes on the provider's side. */
    size_t want = 1 + (size_t)((s->calls * 7919u + 13u) % 65536u);
    s->calls++;
    if (want > cap)
        want = cap;
    if (want > s->len - s->pos)
        want = (size_t)(s->len - s->pos);
    unsigned char *p = buf;
    for (size_t k = 0; k < want; k++)
        p[k] = cf_pattern_byte(s->pos + k, s->seed);
    s->pos += want;
    return (long)want;
}

struct sbx_source cf_pattern_source(struct cf_pattern_source *s, uint64_t len,
                                    uint32_t seed)
{
    memset(s, 0, sizeof *s);
    s->len = len;
    s->seed = seed;
    struct sbx_source src = {.size = sizeof(struct sbx_source), .ctx = s, .read = pattern_read};
    return src;
}

static int pattern_write(void *ctx, const void *buf, size_t len)
{
    struct cf_pattern_sink *s = ctx;
    const unsigned char *p = buf;
    if (s->mismatch == UINT64_MAX) {
        for (size_t k = 0; k < len; k++) {
            if (p[k] != cf_pattern_byte(s->pos + k, s->seed)) {
                s->mismatch = s->pos + k;
                break;
            }
        }
    }
    s->pos += len;
    return SBX_OK;
}

struct sbx_sink cf_pattern_sink(struct cf_pattern_sink *s, uint32_t seed)
{
    memset(s, 0, sizeof *s);
    s->seed = seed;
    s->mismatch = UINT64_MAX;
    struct sbx_sink sink = SBX_SINK_INIT(s, pattern_write);
    return sink;
}
