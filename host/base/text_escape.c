/*
 * text_escape.c - untrusted text made safe to print (see text_escape.h).
 */
#include "base/text_escape.h"

#include <stdio.h>
#include <string.h>

const char *sbxh_text_escape(char *dst, size_t cap, const char *s, size_t max)
{
    if (cap == 0)
        return dst;
    if (!s) {
        snprintf(dst, cap, "NULL");
        return dst;
    }
    size_t used = 0, i;
    for (i = 0; s[i] && i < max; i++) {
        unsigned char c = (unsigned char)s[i];
        bool plain = c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
        size_t need = plain ? 1 : 4;
        if (used + need + 4 > cap) /* room for "..." and the NUL */
            break;
        if (plain)
            dst[used++] = (char)c;
        else
            used += (size_t)snprintf(dst + used, cap - used, "\\x%02x", c);
    }
    if (s[i] && used + 4 <= cap) {
        memcpy(dst + used, "...", 3);
        used += 3;
    }
    dst[used] = '\0';
    return dst;
}

bool sbxh_text_printable(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p >= 0x7f)
            return false;
    return true;
}
