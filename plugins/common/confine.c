/*
 * confine.c - path confinement below a directory with openat2(2).
 */
#include "confine.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <linux/openat2.h>
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
#define CONFINE_RMDIR_ROUNDS 4

int confine_open(int dirfd, const char *path, int flags, mode_t mode)
{
    struct open_how how;
    memset(&how, 0, sizeof how);
    how.flags = (uint64_t)(unsigned)(flags | O_CLOEXEC);
    /* The kernel rejects a nonzero mode without O_CREAT/O_TMPFILE. */
    if ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE)
        how.mode = mode;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;

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

int confine_check_path(const char *path)
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

int confine_mkdirs(int dirfd, const char *path, mode_t mode)
{
    if (path == NULL || path[0] == '\0')
        path = ".";
    int fd = confine_open(dirfd, path, O_PATH | O_DIRECTORY, 0);
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

    int parent = confine_open(dirfd, ".", O_PATH | O_DIRECTORY, 0);
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
        int next = confine_open(dirfd, prefix, O_PATH | O_DIRECTORY, 0);
        if (next == -ENOENT) {
            if (mkdirat(parent, prefix + start, mode) < 0 && errno != EEXIST) {
                next = -errno;
            } else {
                next = confine_open(dirfd, prefix, O_PATH | O_DIRECTORY, 0);
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

/* Give the owner read, write and search permission on an open directory so
 * that its entries can be listed and removed. */
static void make_dir_accessible(int fd)
{
    struct stat st;
    if (fstat(fd, &st) == 0 && (st.st_mode & S_IRWXU) != S_IRWXU)
        (void)fchmod(fd, (st.st_mode & 07777) | S_IRWXU);
}

/* Open the directory entry `name` of dirfd for listing, without following
 * a symlink. Returns an fd or -errno. */
static int open_dir_nofollow(int dirfd, const char *name)
{
    int fd = openat(dirfd, name,
                    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == EACCES) {
        /* Not readable by us: grant the owner access, then retry. With
         * AT_SYMLINK_NOFOLLOW a symlink swapped in meanwhile is refused
         * instead of followed. */
        if (fchmodat(dirfd, name, S_IRWXU, AT_SYMLINK_NOFOLLOW) < 0)
            return -EACCES;
        fd = openat(dirfd, name,
                    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    return fd < 0 ? -errno : fd;
}

/* Remove every entry of the open directory fd (consumed). */
static int remove_contents(int fd)
{
    make_dir_accessible(fd);
    DIR *dir = fdopendir(fd);
    if (dir == NULL) {
        int err = -errno;
        close(fd);
        return err;
    }
    int rc = 0;
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(dir);
        if (de == NULL) {
            if (errno != 0)
                rc = -errno;
            break;
        }
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        rc = confine_remove_tree(dirfd(dir), de->d_name);
        if (rc < 0)
            break;
    }
    closedir(dir);
    return rc;
}

int confine_remove_tree(int dirfd, const char *name)
{
    if (name == NULL || name[0] == '\0' || strchr(name, '/') != NULL ||
        strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return -EINVAL;

    for (int round = 0; round < CONFINE_RMDIR_ROUNDS; round++) {
        struct stat st;
        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            return errno == ENOENT ? 0 : -errno;
        if (!S_ISDIR(st.st_mode)) {
            if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT) {
                /* Replaced by a directory meanwhile: go round again. */
                if (errno == EISDIR)
                    continue;
                return -errno;
            }
            return 0;
        }
        int fd = open_dir_nofollow(dirfd, name);
        if (fd == -ENOENT)
            return 0;
        if (fd == -ELOOP || fd == -ENOTDIR)
            continue; /* replaced by a symlink or file: remove that */
        if (fd < 0)
            return fd;
        int rc = remove_contents(fd);
        if (rc < 0)
            return rc;
        if (unlinkat(dirfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
            return 0;
        if (errno != ENOTEMPTY && errno != EEXIST)
            return -errno;
        /* Something added an entry while we were removing: again. */
    }
    return -ENOTEMPTY;
}
