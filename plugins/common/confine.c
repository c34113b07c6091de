/*
 * confine.c - path confinement below a directory with openat2(2).
 */
#include "confine.h"

#include "tree_remove.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* openat2 may fail with EAGAIN when a concurrent rename makes ".." checking
 * unreliable; the kernel documentation says the caller may retry. */
#define CONFINE_EAGAIN_RETRIES 8

/* Rounds of "empty the directory, then rmdir it" before giving up when
 * something keeps adding entries. */

static int open_resolve(int dirfd, const char *path, int flags, mode_t mode,
                        uint64_t resolve)
{
    struct open_how how;
    memset(&how, 0, sizeof how);
    how.flags = (uint64_t)(unsigned)(flags | O_CLOEXEC);
    /* The kernel rejects a nonzero mode without O_CREAT/O_TMPFILE. */
    if ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE)
        how.mode = mode;
    how.resolve = resolve;

    for (int attempt = 0;; attempt++) {
        long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof how);
        if (fd >= 0)
            return (int)fd;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN && attempt < CONFINE_EAGAIN_RETRIES)
            continue;
        return -errno;
    }
}

int sbxp_confine_open(int dirfd, const char *path, int flags, mode_t mode)
{
    return open_resolve(dirfd, path, flags, mode, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS);
}

int sbxp_confine_open_strict(int dirfd, const char *path, int flags, mode_t mode)
{
    return open_resolve(dirfd, path, flags, mode, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS);
}

int sbxp_confine_reopen(int fd, int flags)
{
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    int r = open(proc, flags | O_CLOEXEC);
    return r >= 0 ? r : -errno;
}

int sbxp_confine_fchmod(int fd, mode_t mode)
{
    struct stat s;
    if (fstat(fd, &s) != 0)
        return -errno;
    if (S_ISLNK(s.st_mode))
        return -ELOOP;
    if (fchmod(fd, mode) == 0)
        return 0;
    if (errno != EBADF)
        return -errno;
    /* an O_PATH descriptor: the magic link is this very inode */
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    return chmod(proc, mode) == 0 ? 0 : -errno;
}

int sbxp_confine_check_path(const char *path)
{
    if (path == NULL || path[0] == '\0')
        return -EINVAL;
    if (path[0] == '/')
        return -EXDEV;
    long depth = 0;
    for (const char *p = path; *p != '\0';) {
        const char *start = p;
        while (*p != '\0' && *p != '/')
            p++;
        size_t n = (size_t)(p - start);
        if (n == 2 && start[0] == '.' && start[1] == '.') {
            if (--depth < 0)
                return -EXDEV;
        } else if (n > 0 && !(n == 1 && start[0] == '.')) {
            depth++;
        }
        while (*p == '/')
            p++;
    }
    return 0;
}

int sbxp_confine_mkdirs(int dirfd, const char *path, mode_t mode)
{
    if (path == NULL || path[0] == '\0')
        path = ".";
    int fd = sbxp_confine_open(dirfd, path, O_PATH | O_DIRECTORY, 0);
    if (fd != -ENOENT)
        return fd;

    /* Walk the prefixes "a", "a/b", "a/b/c": each prefix is opened
     * confined from dirfd itself, and a missing component is created with
     * mkdirat() in the (confined) fd of the previous prefix. */
    size_t len = strlen(path);
    char *prefix = malloc(len + 1);
    if (prefix == NULL)
        return -ENOMEM;
    memcpy(prefix, path, len + 1);

    int parent = sbxp_confine_open(dirfd, ".", O_PATH | O_DIRECTORY, 0);
    if (parent < 0) {
        free(prefix);
        return parent;
    }
    size_t pos = 0;
    while (pos < len) {
        while (pos < len && path[pos] == '/')
            pos++;
        if (pos == len)
            break;
        size_t start = pos;
        while (pos < len && path[pos] != '/')
            pos++;

        prefix[pos] = '\0';
        int next = sbxp_confine_open(dirfd, prefix, O_PATH | O_DIRECTORY, 0);
        if (next == -ENOENT) {
            if (mkdirat(parent, prefix + start, mode) < 0 && errno != EEXIST) {
                next = -errno;
            } else {
                next = sbxp_confine_open(dirfd, prefix, O_PATH | O_DIRECTORY, 0);
            }
        }
        prefix[pos] = path[pos];
        close(parent);
        if (next < 0) {
            free(prefix);
            return next;
        }
        parent = next;
    }
    free(prefix);
    return parent;
}

int sbxp_confine_remove_tree(int dirfd, const char *name)
{
    /* one implementation for host and plugins: any depth, two descriptors */
    return sbxs_remove_tree(dirfd, name);
}
