/* hex.c - lowercase hex, random hex names, and checking hex (see hex.h). */
#include "hex.h"

#include <string.h>

#include <errno.h>
#include <stdint.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

char *sbxs_hex(const void *bytes, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    const unsigned char *b = bytes;
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[b[i] >> 4];
        out[2 * i + 1] = digits[b[i] & 15];
    }
    out[2 * n] = '\0';
    return out;
}

char *sbxs_random_hex(char *out, size_t n)
{
    unsigned char r[32];
    if (n > sizeof r)
        n = sizeof r;
    size_t got = 0;
    while (got < n) {
        ssize_t k = getrandom(r + got, n - got, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            uint64_t v = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^
                         ((uint64_t)getpid() << 12);
            for (size_t i = got; i < n; i++)
                r[i] = (unsigned char)(v >> ((i % 8) * 8)) ^ (unsigned char)(i * 151);
            break;
        }
        got += (size_t)k;
    }
    return sbxs_hex(r, n, out);
}

int sbxs_is_hex(const char *s, size_t len)
{
    if (!s || strlen(s) != len)
        return 0;
    for (const char *p = s; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return 0;
    return 1;
}
