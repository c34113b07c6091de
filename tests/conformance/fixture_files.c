/*
 * fixture_files.c - file operations of "cfproc", confined below the
 * workspace: the parent of a path is opened with openat2(RESOLVE_BENEATH)
 * (sbxp_confine_open: a symlink leading out is EXDEV), the last component
 * is acted on with *at calls that never follow it. The one defect here,
 * FXP_LIST_FOLLOWS_SYMLINK, follows a listed directory's symlink; it only
 * reads names, so the fixture never changes anything outside the
 * workspace.
 */
#include "fixture_procs.h"

#include "confine.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int status_of(int err)
{
    switch (err) {
    case EXDEV:
    case ELOOP:
    case ENOTDIR:
    case EINVAL:
    case ENAMETOOLONG:
        return SBX_E_INVALID;
    case ENOENT:
        return SBX_E_NOT_FOUND;
    case EEXIST:
    case ENOTEMPTY:
        return SBX_E_EXISTS;
    case EACCES:
    case EPERM:
        return SBX_E_DENIED;
    default:
        return SBX_E_IO;
    }
}

static int errno_fail(const struct fxp_sandbox *sb, sbx_call *call, const char *op,
                      const char *path, int err)
{
    return sb->host->set_error(sb->host, call, status_of(err), "cfproc: %s '%.200s': %s", op,
                               path, strerror(err));
}

static int is_root(const char *path)
{
    return !path || !*path || !strcmp(path, ".");
}

static int open_parent(const char *root, const char *path, char base[NAME_MAX + 1]);

/* The parent of path (or the root itself, base "."): fd or -errno. */
static int open_at(const char *root, const char *path, char base[NAME_MAX + 1])
{
    if (!is_root(path))
        return open_parent(root, path, base);
    snprintf(base, NAME_MAX + 1, ".");
    int fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

/*
 * Split path into its parent, opened confined as an O_PATH directory, and
 * its last component (into base). A path ending in "." or ".." has no last
 * component to act on: the parent is then the whole path and base ".".
 * Returns the parent's fd or -errno.
 */
static int open_parent(const char *root, const char *path, char base[NAME_MAX + 1])
{
    int rc = sbxp_confine_check_path(path);
    if (rc < 0)
        return rc;
    char copy[PATH_MAX];
    if (snprintf(copy, sizeof copy, "%s", path) >= (int)sizeof copy)
        return -ENAMETOOLONG;
    size_t n = strlen(copy);
    while (n > 1 && copy[n - 1] == '/')
        copy[--n] = '\0';
    char *slash = strrchr(copy, '/');
    const char *last = slash ? slash + 1 : copy;
    if (strlen(last) > NAME_MAX)
        return -ENAMETOOLONG;
    int rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0)
        return -errno;
    int fd;
    if (!strcmp(last, ".") || !strcmp(last, "..") || n < strlen(path)) {
        /* "d/." or "d/": every component is traversed, d included */
        fd = sbxp_confine_open(rootfd, copy, O_PATH | O_DIRECTORY, 0);
        snprintf(base, NAME_MAX + 1, ".");
    } else {
        if (slash) {
            *slash = '\0';
            fd = sbxp_confine_open(rootfd, copy, O_PATH | O_DIRECTORY, 0);
        } else {
            fd = fcntl(rootfd, F_DUPFD_CLOEXEC, 0);
            if (fd < 0)
                fd = -errno;
        }
        memcpy(base, last, strlen(last) + 1); /* at most NAME_MAX, checked above */
    }
    close(rootfd);
    return fd;
}

static void fill_info(struct sbx_file_info *fi, const struct stat *st, const char *name)
{
    memset(fi, 0, sizeof *fi);
    fi->size = sizeof *fi;
    fi->type = S_ISREG(st->st_mode)   ? SBX_FILE_REGULAR
               : S_ISDIR(st->st_mode) ? SBX_FILE_DIR
               : S_ISLNK(st->st_mode) ? SBX_FILE_SYMLINK
                                      : SBX_FILE_OTHER;
    fi->name = name;
    fi->bytes = (uint64_t)st->st_size;
    fi->mode = (uint32_t)(st->st_mode & 07777);
    fi->mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec;
}

int fxp_file_list(const struct fxp_sandbox *sb, sbx_call *call, const char *path,
                  const struct sbx_file_list_sink *sink)
{
    char base[NAME_MAX + 1];
    int pfd = open_at(sb->root, path, base);
    if (pfd < 0)
        return errno_fail(sb, call, "list", path ? path : "", -pfd);
    /* The defect follows a symlink named last; the contract opens it as
     * itself, which a directory open refuses (ELOOP). */
    int flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC |
                (sb->mode == FXP_LIST_FOLLOWS_SYMLINK ? 0 : O_NOFOLLOW);
    int dfd = openat(pfd, base, flags);
    int e = errno;
    close(pfd);
    if (dfd < 0)
        return errno_fail(sb, call, "list", path ? path : "", e);
    DIR *d = fdopendir(dfd);
    if (!d) {
        e = errno;
        close(dfd);
        return errno_fail(sb, call, "list", path ? path : "", e);
    }
    int rc = SBX_OK;
    unsigned count = 0;
    struct dirent *de;
    while (rc == SBX_OK && (de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        if (++count % 256 == 0 && sb->host->cancelled(sb->host, call)) {
            rc = sb->host->set_error(sb->host, call, SBX_E_CANCELLED, "cfproc: list cancelled");
            break;
        }
        struct stat st;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue; /* gone meanwhile */
        struct sbx_file_info fi;
        fill_info(&fi, &st, sb->mode == FXP_LIST_NAME_SLASH ? "../escape" : de->d_name);
        rc = sink->entry(sink->ctx, &fi);
    }
    closedir(d);
    return rc;
}

int fxp_file_stat(const struct fxp_sandbox *sb, sbx_call *call, const char *path,
                  struct sbx_file_info *out)
{
    char base[NAME_MAX + 1];
    int pfd = open_at(sb->root, path, base);
    if (pfd < 0)
        return errno_fail(sb, call, "stat", path ? path : "", -pfd);
    struct stat st;
    int r = fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW);
    int e = errno;
    close(pfd);
    if (r < 0)
        return errno_fail(sb, call, "stat", path, e);
    fill_info(out, &st, NULL);
    return SBX_OK;
}

int fxp_file_mkdir(const struct fxp_sandbox *sb, sbx_call *call, const char *path,
                   unsigned mode, uint32_t flags)
{
    char base[NAME_MAX + 1];
    int pfd;
    int rc = sbxp_confine_check_path(path);
    if (rc == 0 && (flags & SBX_MKDIR_PARENTS)) {
        /* make the parents first, confined, then this one as below */
        char parent[PATH_MAX];
        snprintf(parent, sizeof parent, "%s", path);
        char *slash = strrchr(parent, '/');
        if (slash) {
            *slash = '\0';
            int rootfd = open(sb->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
            int fd = rootfd < 0 ? -errno : sbxp_confine_mkdirs(rootfd, parent, 0755);
            if (rootfd >= 0)
                close(rootfd);
            if (fd < 0)
                return errno_fail(sb, call, "mkdir", path, -fd);
            close(fd);
        }
    }
    pfd = rc < 0 ? rc : open_parent(sb->root, path, base);
    if (pfd < 0)
        return errno_fail(sb, call, "mkdir", path, -pfd);
    if (!strcmp(base, ".")) {
        close(pfd);
        return errno_fail(sb, call, "mkdir", path, EINVAL);
    }
    int e = 0;
    if (mkdirat(pfd, base, 0700) < 0) {
        e = errno;
        struct stat st;
        if (e == EEXIST && (flags & SBX_MKDIR_PARENTS) &&
            fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
            e = -1; /* an existing directory is fine with parents */
    } else {
        /* the mode exactly, as write_file's (no umask) */
        int dfd = openat(pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0 || fchmod(dfd, mode) < 0)
            e = errno;
        if (dfd >= 0)
            close(dfd);
    }
    close(pfd);
    return e > 0 ? errno_fail(sb, call, "mkdir", path, e) : SBX_OK;
}

int fxp_file_remove(const struct fxp_sandbox *sb, sbx_call *call, const char *path,
                    uint32_t flags)
{
    char base[NAME_MAX + 1];
    int pfd = open_parent(sb->root, path, base);
    if (pfd < 0)
        return errno_fail(sb, call, "remove", path, -pfd);
    struct stat st;
    int e = 0;
    if (!strcmp(base, "."))
        e = EINVAL;
    else if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
        e = errno;
    else if (!S_ISDIR(st.st_mode))
        e = unlinkat(pfd, base, 0) < 0 ? errno : 0;
    else if (unlinkat(pfd, base, AT_REMOVEDIR) < 0) {
        e = errno;
        if ((e == ENOTEMPTY || e == EEXIST) && (flags & SBX_REMOVE_RECURSIVE)) {
            /* walks with O_NOFOLLOW: a symlink in the tree is removed, its
             * target is not entered */
            int r = sbxp_confine_remove_tree(pfd, base);
            e = r < 0 ? -r : 0;
        }
    }
    close(pfd);
    return e ? errno_fail(sb, call, "remove", path, e) : SBX_OK;
}

int fxp_file_rename(const struct fxp_sandbox *sb, sbx_call *call, const char *from,
                    const char *to, uint32_t flags)
{
    char fbase[NAME_MAX + 1], tbase[NAME_MAX + 1];
    int ffd = open_parent(sb->root, from, fbase);
    if (ffd < 0)
        return errno_fail(sb, call, "rename", from, -ffd);
    int tfd = open_parent(sb->root, to, tbase);
    if (tfd < 0) {
        close(ffd);
        return errno_fail(sb, call, "rename to", to, -tfd);
    }
    int e = 0;
    if (!strcmp(fbase, ".") || !strcmp(tbase, "."))
        e = EINVAL;
    else if (renameat2(ffd, fbase, tfd, tbase,
                       (flags & SBX_RENAME_NOREPLACE) ? RENAME_NOREPLACE : 0) < 0)
        e = errno;
    close(ffd);
    close(tfd);
    return e ? errno_fail(sb, call, "rename", from, e) : SBX_OK;
}
