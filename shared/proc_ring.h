/*
 * proc_ring.h - a bounded byte ring addressed by absolute offsets: the
 * replay buffer of one output stream of a supervised process
 * (proc_supervisor.h).
 *
 * Every byte ever appended has a number (0 for the first); the ring keeps
 * the last `cap` of them. Appending never blocks and never grows memory:
 * the oldest bytes are dropped. A reader holds a cursor (the number of the
 * next byte it wants) and reads from max(cursor, oldest kept): when the
 * cursor fell behind, the bytes in between are reported as lost, exactly,
 * and never delivered; a byte is never delivered twice to a reader that
 * continues from the cursor it was given back.
 */
#ifndef SBXS_PROC_RING_H
#define SBXS_PROC_RING_H

#include <stddef.h>
#include <stdint.h>

struct sbxs_ring {
    unsigned char *buf; /* cap bytes, allocated on the first append */
    size_t cap;
    uint64_t end;       /* number of the next byte to be appended */
};

/* An empty ring keeping at most cap bytes (cap >= 1). No allocation yet:
 * a stream that never writes costs nothing. */
void sbxs_ring_init(struct sbxs_ring *r, size_t cap);
void sbxs_ring_free(struct sbxs_ring *r);

/* Append n bytes (dropping the oldest). 0, or -1 when the buffer cannot be
 * allocated (nothing appended). */
int sbxs_ring_append(struct sbxs_ring *r, const void *p, size_t n);

/* The number of the oldest byte kept, and of the next one to come. */
uint64_t sbxs_ring_start(const struct sbxs_ring *r);
static inline uint64_t sbxs_ring_end(const struct sbxs_ring *r) { return r->end; }

/* Read after *cursor: copies at most max bytes, from max(*cursor, start)
 * on, into out (when out is NULL the bytes are skipped but counted).
 * Returns the number of bytes copied; *lost gets the bytes skipped
 * because they were dropped (start - *cursor, or 0); *cursor becomes
 * old cursor + lost + copied. A cursor past the end is treated as the end
 * (nothing copied, nothing lost, *cursor = end). */
size_t sbxs_ring_read(const struct sbxs_ring *r, uint64_t *cursor, void *out, size_t max,
                      uint64_t *lost);

/* How many bytes a read from cursor would find (0 when at or past the
 * end). */
uint64_t sbxs_ring_pending(const struct sbxs_ring *r, uint64_t cursor);

#endif
