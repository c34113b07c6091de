/*
 * struct_size.h - honouring the size of a caller's size-prefixed struct
 * (internal).
 *
 * Every struct a caller passes starts with `uint32_t size`, the size the
 * caller was compiled with. A caller built against an older, shorter
 * struct must be read and written only up to its size: these helpers make
 * a full-size working copy on the way in (members the caller does not have
 * are zero, i.e. their defaults) and copy back only what the caller has on
 * the way out.
 */
#ifndef SBX_HOST_STRUCT_SIZE_H
#define SBX_HOST_STRUCT_SIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The caller's size, read without assuming anything past it. */
static inline uint32_t sbx_struct_size(const void *s)
{
    uint32_t n;
    memcpy(&n, s, sizeof n);
    return n;
}

/*
 * Copy the caller's struct src into dst (ours bytes): at most the caller's
 * size, the rest zeroed, dst's size set to ours. Returns false, copying
 * nothing, when the caller's size is below `min` (the members every
 * version has).
 */
static inline bool sbx_struct_in(void *dst, size_t ours, const void *src, size_t min)
{
    memset(dst, 0, ours);
    uint32_t theirs = sbx_struct_size(src);
    if (theirs < min)
        return false;
    memcpy(dst, src, theirs < ours ? theirs : ours);
    uint32_t n = (uint32_t)ours;
    memcpy(dst, &n, sizeof n);
    return true;
}

/* Copy a full-size result src (ours bytes) back into the caller's struct
 * dst, up to the caller's size, keeping the caller's size member. */
static inline void sbx_struct_out(void *dst, const void *src, size_t ours)
{
    uint32_t theirs = sbx_struct_size(dst);
    size_t n = theirs < ours ? theirs : ours;
    if (n > sizeof theirs)
        memcpy((char *)dst + sizeof theirs, (const char *)src + sizeof theirs,
               n - sizeof theirs);
}

#endif
