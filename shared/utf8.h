/*
 * utf8.h - strict UTF-8 validation (shared by the host and the plugins;
 * symbols prefixed sbxs_): archive entry names, and text that must travel
 * in JSON unchanged.
 */
#ifndef SBXS_UTF8_H
#define SBXS_UTF8_H

#include <stddef.h>

/* 1 when the n bytes at p are strict UTF-8 (no overlong forms, no
 * surrogates, nothing past U+10FFFF), else 0. */
int sbxs_utf8_valid(const void *p, size_t n);

#endif
