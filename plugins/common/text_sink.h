/*
 * text_sink.h - an ABI sink that keeps the start of what it is given as a
 * NUL-terminated string (a helper command's message, a short answer) and
 * drops the rest.
 */
#ifndef SBXP_TEXT_SINK_H
#define SBXP_TEXT_SINK_H

#include <sbx/provider.h>

#include <stddef.h>

struct sbxp_text_sink {
    char *buf;  /* the caller's buffer */
    size_t cap; /* its size; 0 keeps nothing */
    size_t len; /* bytes kept, buf[len] is NUL */
    struct sbx_sink sink; /* pass &sink; points at this struct: do not copy */
};

/* Start keeping into buf (cap bytes, NUL included): buf becomes "". */
void sbxp_text_sink_init(struct sbxp_text_sink *t, char *buf, size_t cap);

#endif /* SBXP_TEXT_SINK_H */
