/* utf8.c - see utf8.h. */
#include "utf8.h"

#include <stdint.h>

int sbxs_utf8_valid(const void *p, size_t n)
{
    const unsigned char *s = p;
    size_t i = 0;
    while (i < n) {
        unsigned char b = s[i];
        if (b < 0x80) {
            i++;
            continue;
        }
        size_t len;
        uint32_t cp, min;
        if ((b & 0xe0) == 0xc0) {
            len = 2, cp = b & 0x1f, min = 0x80;
        } else if ((b & 0xf0) == 0xe0) {
            len = 3, cp = b & 0x0f, min = 0x800;
        } else if ((b & 0xf8) == 0xf0) {
            len = 4, cp = b & 0x07, min = 0x10000;
        } else {
            return 0;
        }
        if (i + len > n)
            return 0;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return 0;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        i += len;
    }
    return 1;
}
