/*
 * proc_ring.c - the bounded replay buffer (proc_ring.h). Byte number k
 * lives at buf[k % cap]; the ring holds [end - min(end, cap), end).
 */
#include "proc_ring.h"

#include <stdlib.h>
#include <string.h>

void sbxs_ring_init(struct sbxs_ring *r, size_t cap)
{
    r->buf = NULL;
    r->cap = cap ? cap : 1;
    r->end = 0;
}

void sbxs_ring_free(struct sbxs_ring *r)
{
    free(r->buf);
    r->buf = NULL;
}

uint64_t sbxs_ring_start(const struct sbxs_ring *r)
{
    return r->end > r->cap ? r->end - r->cap : 0;
}

int sbxs_ring_append(struct sbxs_ring *r, const void *p, size_t n)
{
    if (n == 0)
        return 0;
    if (!r->buf && !(r->buf = malloc(r->cap)))
        return -1;
    const unsigned char *s = p;
    if (n > r->cap) { /* only the last cap bytes can stay */
        r->end += n - r->cap;
        s += n - r->cap;
        n = r->cap;
    }
    size_t at = (size_t)(r->end % r->cap);
    size_t first = r->cap - at < n ? r->cap - at : n;
    memcpy(r->buf + at, s, first);
    memcpy(r->buf, s + first, n - first);
    r->end += n;
    return 0;
}

uint64_t sbxs_ring_pending(const struct sbxs_ring *r, uint64_t cursor)
{
    uint64_t start = sbxs_ring_start(r);
    if (cursor < start)
        cursor = start;
    return cursor < r->end ? r->end - cursor : 0;
}

size_t sbxs_ring_read(const struct sbxs_ring *r, uint64_t *cursor, void *out, size_t max,
                      uint64_t *lost)
{
    uint64_t start = sbxs_ring_start(r), c = *cursor;
    *lost = 0;
    if (c >= r->end) {
        *cursor = r->end;
        return 0;
    }
    if (c < start) {
        *lost = start - c;
        c = start;
    }
    uint64_t avail = r->end - c;
    size_t n = avail < max ? (size_t)avail : max;
    if (out && n) {
        size_t at = (size_t)(c % r->cap);
        size_t first = r->cap - at < n ? r->cap - at : n;
        memcpy(out, r->buf + at, first);
        memcpy((unsigned char *)out + first, r->buf, n - first);
    }
    *cursor = c + n;
    return n;
}
