/*
 * hex.h - bytes as lowercase hex, random hex names, and checking lowercase
 * hex (shared by the host and the plugins; symbols prefixed sbxs_).
 */
#ifndef SBXS_HEX_H
#define SBXS_HEX_H

#include <stddef.h>

/* Write the n bytes as 2n lowercase hex digits and a NUL into out (2n + 1
 * bytes). Returns out. */
char *sbxs_hex(const void *bytes, size_t n, char *out);

/* 2n random lowercase hex digits and a NUL into out (2n + 1 bytes), n at
 * most 32: for names and tags that must be distinct and unguessable from
 * outside (getrandom; the clock and pid are mixed in if it fails), not
 * for secret keys. Returns out. */
char *sbxs_random_hex(char *out, size_t n);

/* Nonzero when s is exactly len lowercase hex digits (a SHA-256 in hex, a
 * session key hash); 0 for NULL, another length or any other character. */
int sbxs_is_hex(const char *s, size_t len);

#endif
