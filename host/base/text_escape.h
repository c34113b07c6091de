/*
 * text_escape.h - showing untrusted text in messages (internal).
 *
 * Configuration keys, file names and strings from plugin descriptors come
 * from places an attacker may control. Echoed raw, a newline forges an extra
 * "sbx:" line and an escape sequence rewrites the terminal. Every such text
 * goes through sbxh_text_escape before it reaches a message.
 */
#ifndef SBX_HOST_TEXT_ESCAPE_H
#define SBX_HOST_TEXT_ESCAPE_H

#include <stdbool.h>
#include <stddef.h>

/*
 * Write s into dst (cap bytes, always NUL-terminated when cap > 0) with
 * every byte outside printable ASCII, and '"' and '\\', as \xHH; at most
 * `max` bytes of s are shown, then "...". A NULL s gives "NULL". Returns
 * dst.
 */
const char *sbxh_text_escape(char *dst, size_t cap, const char *s, size_t max);

/* Whether every byte of s is printable ASCII (0x20..0x7e). */
bool sbxh_text_printable(const char *s);

#endif
