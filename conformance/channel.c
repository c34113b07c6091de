/*
 * channel.c - the report pipe between a case's child process and the
 * runner: small framed records, each written with one write(2).
 *
 * Frame: one type byte, the payload length as two bytes (big-endian), then
 * the payload: two NUL-terminated strings. A frame is at most
 * CF_RECORD_MAX bytes, below PIPE_BUF, so a record is written whole or not
 * at all and records sent from several threads never interleave.
 */
#include "cf_internal.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#define FRAME_HEADER 3

void cf_channel_send(int fd, int type, const char *a, const char *b)
{
    if (fd < 0)
        return;
    unsigned char frame[CF_RECORD_MAX];
    size_t room = sizeof frame - FRAME_HEADER - 2; /* two NULs */
    size_t alen = strlen(a), blen = strlen(b);
    if (alen > room)
        alen = room;
    if (blen > room - alen)
        blen = room - alen;
    size_t len = alen + 1 + blen + 1;
    frame[0] = (unsigned char)type;
    frame[1] = (unsigned char)(len >> 8);
    frame[2] = (unsigned char)(len & 0xff);
    memcpy(frame + FRAME_HEADER, a, alen);
    frame[FRAME_HEADER + alen] = '\0';
    memcpy(frame + FRAME_HEADER + alen + 1, b, blen);
    frame[FRAME_HEADER + len - 1] = '\0';
    ssize_t n;
    do {
        n = write(fd, frame, FRAME_HEADER + len);
    } while (n < 0 && errno == EINTR);
}

/* Decode the complete frames at the start of r->buf and keep the rest. */
static void decode(struct cf_channel_reader *r, cf_record_fn fn, void *ud)
{
    size_t off = 0;
    while (!r->malformed && r->len - off >= FRAME_HEADER) {
        const unsigned char *f = r->buf + off;
        size_t len = ((size_t)f[1] << 8) | f[2];
        if (len < 2 || FRAME_HEADER + len > CF_RECORD_MAX) {
            r->malformed = true;
            break;
        }
        if (r->len - off < FRAME_HEADER + len)
            break; /* the rest of this frame is still in the pipe */
        const char *a = (const char *)f + FRAME_HEADER;
        size_t alen = strnlen(a, len);
        if (alen + 1 >= len || f[FRAME_HEADER + len - 1] != '\0') {
            r->malformed = true;
            break;
        }
        struct cf_record rec = {f[0], a, a + alen + 1};
        fn(ud, &rec);
        off += FRAME_HEADER + len;
    }
    if (r->malformed) {
        r->len = 0;
        return;
    }
    memmove(r->buf, r->buf + off, r->len - off);
    r->len -= off;
}

long cf_channel_read(int fd, struct cf_channel_reader *r, cf_record_fn fn, void *ud)
{
    ssize_t n;
    do {
        n = read(fd, r->buf + r->len, sizeof r->buf - r->len);
    } while (n < 0 && errno == EINTR);
    if (n <= 0)
        return (long)n;
    if (r->malformed)
        return (long)n; /* drained and dropped */
    r->len += (size_t)n;
    decode(r, fn, ud);
    return (long)n;
}
