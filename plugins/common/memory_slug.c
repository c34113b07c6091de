/* memory_slug.c - a memory store's slug (see memory_slug.h). */
#include "memory_slug.h"

#include <stddef.h>

int sbxp_memory_slug_valid(const char *s)
{
    size_t n = 0;
    for (; s && s[n]; n++)
        if (!((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= '0' && s[n] <= '9') || s[n] == '-'))
            return 0;
    return n >= 1 && n <= 63;
}
