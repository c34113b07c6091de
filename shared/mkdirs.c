/*
 * mkdirs.c - mkdir -p of an absolute path (mkdirs.h).
 */
#include "mkdirs.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int sbxs_mkdirs(const char *path, mode_t mode, char *failed, size_t cap)
{
    char tmp[4096];
    if (path[0] != '/') {
        errno = EINVAL;
        return -1;
    }
    if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = tmp + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char saved = *p;
        *p = '\0';
        /* "a//b" and a trailing '/' give empty components: nothing to make */
        if (p[-1] != '/' && mkdir(tmp, mode) != 0 && errno != EEXIST) {
            int e = errno;
            if (failed && cap)
                snprintf(failed, cap, "%s", tmp);
            errno = e;
            return -1;
        }
        *p = saved;
        if (saved == '\0')
            return 0;
    }
}
