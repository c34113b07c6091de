/*
 * manifest_open.c - opening a manifest's local sources beneath the
 * directories they were confined to at check time (openat2, no symlink
 * resolution), and reading a bounded file; shared by the check, the
 * repository checks and the apply.
 */
#include "config/manifest_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

int sbxh_manifest_openat(int dir, const char *rel, int flags)
{
    /* O_PATH takes no other open flags (openat2 refuses them) */
    uint64_t f = (uint64_t)(flags | O_CLOEXEC | O_NOFOLLOW);
    if (!(flags & O_PATH))
        f |= O_NONBLOCK;
    struct open_how how = {.flags = f,
                           .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
                                      RESOLVE_NO_MAGICLINKS};
    return (int)syscall(SYS_openat2, dir, rel && rel[0] ? rel : ".", &how, sizeof how);
}

int sbxh_manifest_open_source(const struct sbx_manifest *m, int root, const char *rel,
                              int flags, struct stat *st)
{
    if (root < 0 || (size_t)root >= m->nroots)
        return -EBADF;
    int fd = sbxh_manifest_openat(m->roots[root], rel, flags);
    if (fd < 0)
        return -errno;
    if (fstat(fd, st) != 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

char *sbxh_manifest_read_fd(int fd, size_t size, size_t *got)
{
    char *text = malloc(size + 1);
    *got = 0;
    while (text && *got < size) {
        ssize_t n = read(fd, text + *got, size - *got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        *got += (size_t)n;
    }
    if (text)
        text[*got] = '\0';
    return text;
}
