/*
 * text.c - bytes of a sandbox (command output, file content) as a JSON
 * string: valid UTF-8 as it is, every byte of an invalid sequence as
 * U+FFFD, so a response is always valid JSON whatever a command printed.
 */
#include "mcp.h"
#include "utf8.h"

#include <stdlib.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at p (1..4, within n), else 0. */
static size_t sequence(const unsigned char *p, size_t n)
{
    size_t len = p[0] < 0x80 ? 1 : p[0] >= 0xf0 ? 4 : p[0] >= 0xe0 ? 3 : 2;
    if (len > n)
        return 0;
    return sbxs_utf8_valid(p, len) ? len : 0;
}

json_object *sbxm_text_value(const void *data, size_t n, size_t *replaced)
{
    const unsigned char *p = data;
    if (replaced)
        *replaced = 0;
    if (sbxs_utf8_valid(p, n) && !memchr(p, '\0', n))
        return json_object_new_string_len((const char *)p, (int)n);
    /* worst case: every byte becomes the 3 bytes of U+FFFD */
    char *out = malloc(3 * n + 1);
    if (!out)
        return NULL;
    size_t w = 0, k;
    for (size_t i = 0; i < n; i += k) {
        k = sequence(p + i, n - i);
        if (k == 0 || (k == 1 && p[i] == 0)) {
            /* NUL too: C strings end there on the client's side of some SDKs */
            memcpy(out + w, "\xef\xbf\xbd", 3);
            w += 3;
            k = 1;
            if (replaced)
                (*replaced)++;
        } else {
            memcpy(out + w, p + i, k);
            w += k;
        }
    }
    json_object *s = json_object_new_string_len(out, (int)w);
    free(out);
    return s;
}
