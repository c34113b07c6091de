/*
 * fileops.c - file_list, file_stat, file_mkdir, file_remove and file_rename
 * of the `local` provider (SBX_CAP_FILE_OPS).
 *
 * Paths are confined as for read_file (files.c): the lexical check first,
 * then every lookup through openat2(RESOLVE_BENEATH) from the workspace's
 * descriptor (plugins/common/confine.h), so "..", absolute paths and
 * symlinks leading out are SBX_E_INVALID, race-free. The last component is
 * never followed: stat and list open it with O_NOFOLLOW; mkdir, remove and
 * rename act on (parent descriptor, name) with the *at calls, which do not
 * follow a final symlink (AT_SYMLINK_NOFOLLOW where the call has the flag).
 * A recursive remove walks the tree by descriptors without following a
 * symlink in it (shared/tree_remove.c). A listing reads the directory
 * through one DIR stream (getdents64 into libc's fixed buffer) and hands
 * each entry to the sink before reading on: memory is bounded whatever the
 * directory's size.
 */
#include "local.h"

#include "confine.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Directories made for SBX_MKDIR_PARENTS. */
#define FILEOPS_PARENT_MODE 0755
/* A listing looks for cancellation once per this many entries. */
#define FILEOPS_CANCEL_EVERY 256

/* NULL, "" and "." (also with trailing slashes: "./") name the root. */
static int is_root(const char *path)
{
    if (path == NULL)
        return 1;
    while (*path == '.' && (path[1] == '/' || path[1] == '\0'))
        for (path++; *path == '/'; path++)
            ;
    return *path == '\0';
}

/* A copy of path without trailing slashes (so that "link/" names the link
 * itself, not its target), or NULL (out of memory). */
static char *strip_slashes(const char *path)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    return strndup(path, n);
}

/* The checks every path argument gets; root_ok: "" and "." are allowed
 * (and reported through *root). */
static int check(const struct sbx_host *host, sbx_call *call, const char *op,
                 const char *path, int root_ok, int *root)
{
    *root = is_root(path);
    if (*root)
        return root_ok ? SBX_OK
                       : host->set_error(host, call, SBX_E_INVALID,
                                         "local: %s: the workspace root itself", op);
    return local_check_path(host, call, op, path);
}

static uint32_t file_type(mode_t m)
{
    if (S_ISREG(m))
        return SBX_FILE_REGULAR;
    if (S_ISDIR(m))
        return SBX_FILE_DIR;
    if (S_ISLNK(m))
        return SBX_FILE_SYMLINK;
    return SBX_FILE_OTHER;
}

static void fill_info(struct sbx_file_info *info, const struct stat *st,
                      const char *name)
{
    memset(info, 0, sizeof *info);
    info->size = sizeof *info;
    info->type = file_type(st->st_mode);
    info->name = name;
    info->bytes = (uint64_t)st->st_size;
    info->mode = (uint32_t)(st->st_mode & 07777);
    info->mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

/* Open `path` itself, never following its last component: the root's
 * descriptor for the root. flags are added to O_NOFOLLOW. An fd, or -1
 * with the error set in *rc. */
static int open_entry(sbx_sandbox *sb, sbx_call *call, const char *op,
                      const char *path, int root, int flags, int *rc)
{
    const struct sbx_host *host = sb->st->host;
    char *p = root ? strdup(".") : strip_slashes(path);
    if (p == NULL) {
        *rc = host->set_error(host, call, SBX_E_NOMEM, "local: out of memory");
        return -1;
    }
    int fd = sbxp_confine_open(sb->dirfd, p, flags | O_NOFOLLOW, 0);
    free(p);
    if (fd < 0)
        *rc = local_path_error(host, call, op, path, -fd);
    return fd;
}

/*
 * Split a (non-root) path into the descriptor of its parent directory,
 * resolved confined, and its last component, which the caller acts on with
 * the *at calls. make_parents creates missing parents (0755). "a/.." and
 * "a/." name no entry of a parent: SBX_E_INVALID. Returns SBX_OK with
 * *parent and *base (malloc'd) set, or an error status with the message set.
 */
static int open_parent(sbx_sandbox *sb, sbx_call *call, const char *op,
                       const char *path, int make_parents, int *parent, char **base)
{
    const struct sbx_host *host = sb->st->host;
    char *p = strip_slashes(path);
    if (p == NULL)
        return host->set_error(host, call, SBX_E_NOMEM, "local: out of memory");
    char *slash = strrchr(p, '/');
    const char *name = slash != NULL ? slash + 1 : p;
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
        free(p);
        return host->set_error(host, call, SBX_E_INVALID,
                               "local: %s: '%s' does not name an entry (it ends "
                               "in '.' or '..')",
                               op, path);
    }
    char *dir;
    if (slash == NULL) {
        dir = strdup(".");
    } else {
        *slash = '\0';
        dir = strdup(p[0] != '\0' ? p : ".");
    }
    *base = strdup(name);
    free(p);
    if (dir == NULL || *base == NULL) {
        free(dir);
        free(*base);
        *base = NULL;
        return host->set_error(host, call, SBX_E_NOMEM, "local: out of memory");
    }
    int fd = make_parents ? sbxp_confine_mkdirs(sb->dirfd, dir, FILEOPS_PARENT_MODE)
                          : sbxp_confine_open(sb->dirfd, dir, O_PATH | O_DIRECTORY, 0);
    free(dir);
    if (fd < 0) {
        free(*base);
        *base = NULL;
        return local_path_error(host, call, op, path, -fd);
    }
    *parent = fd;
    return SBX_OK;
}

int local_file_stat(sbx_sandbox *sb, sbx_call *call, const char *path,
                    struct sbx_file_info *out)
{
    const struct sbx_host *host = sb->st->host;
    int root = 0;
    int rc = check(host, call, "stat", path, 1, &root);
    if (rc != SBX_OK)
        return rc;
    if (out == NULL || out->size < sizeof *out)
        return host->set_error(host, call, SBX_E_INVALID,
                               "local: stat: no struct sbx_file_info of this ABI");
    int fd = open_entry(sb, call, "stat", path, root, O_PATH, &rc);
    if (fd < 0)
        return rc;
    struct stat st;
    if (fstat(fd, &st) != 0)
        rc = local_path_error(host, call, "stat", path, errno);
    else
        fill_info(out, &st, NULL);
    close(fd);
    return rc;
}

int local_file_list(sbx_sandbox *sb, sbx_call *call, const char *path,
                    const struct sbx_file_list_sink *sink)
{
    const struct sbx_host *host = sb->st->host;
    int root = 0;
    int rc = check(host, call, "list", path, 1, &root);
    if (rc != SBX_OK)
        return rc;
    if (sink == NULL || sink->entry == NULL)
        return host->set_error(host, call, SBX_E_INVALID, "local: list: no sink");
    /* O_NOFOLLOW: a symlink, even to a directory inside, is not a
     * directory here (ELOOP, as ENOTDIR for a file: SBX_E_INVALID). */
    int fd = open_entry(sb, call, "list", path, root,
                        O_RDONLY | O_DIRECTORY | O_NONBLOCK, &rc);
    if (fd < 0) {
        if (rc == SBX_E_INVALID) {
            /* say plainly that it is not a directory when it is inside */
            int r2 = rc;
            int p = open_entry(sb, call, "list", path, root, O_PATH, &r2);
            struct stat st;
            if (p >= 0 && fstat(p, &st) == 0 && !S_ISDIR(st.st_mode))
                rc = host->set_error(host, call, SBX_E_INVALID,
                                     "local: list: '%s' is not a directory%s", path,
                                     S_ISLNK(st.st_mode) ? " (a symlink, not followed)"
                                                         : "");
            if (p >= 0)
                close(p);
        }
        return rc;
    }
    DIR *d = fdopendir(fd);
    if (d == NULL) {
        rc = local_path_error(host, call, "list", path, errno);
        close(fd);
        return rc;
    }
    unsigned long seen = 0;
    for (;;) {
        if (++seen % FILEOPS_CANCEL_EVERY == 0 && host->cancelled != NULL &&
            host->cancelled(host, call)) {
            rc = host->set_error(host, call, SBX_E_CANCELLED, "local: list: '%s': cancelled",
                                 path ? path : "");
            break;
        }
        errno = 0;
        struct dirent *de = readdir(d);
        if (de == NULL) {
            if (errno != 0)
                rc = local_path_error(host, call, "list", path, errno);
            break;
        }
        const char *n = de->d_name;
        if (n[0] == '.' && (n[1] == '\0' || (n[1] == '.' && n[2] == '\0')))
            continue;
        struct stat st;
        if (fstatat(dirfd(d), n, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            if (errno == ENOENT)
                continue; /* removed since it was read */
            rc = local_path_error(host, call, "list", path, errno);
            break;
        }
        struct sbx_file_info info;
        fill_info(&info, &st, n);
        int s = sink->entry(sink->ctx, &info);
        if (s != 0) {
            rc = s;
            break;
        }
    }
    closedir(d);
    return rc;
}

/* Set a new directory's mode exactly (mkdirat applies the umask), through
 * a descriptor of the very directory. */
static int set_dir_mode(int parent, const char *base, unsigned mode)
{
    int fd = openat(parent, base, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int r = sbxp_confine_fchmod(fd, mode);
    close(fd);
    return r;
}

int local_file_mkdir(sbx_sandbox *sb, sbx_call *call, const char *path,
                     unsigned mode, uint32_t flags)
{
    const struct sbx_host *host = sb->st->host;
    int root = 0;
    int rc = check(host, call, "mkdir", path, 1, &root);
    if (rc != SBX_OK)
        return rc;
    if (mode & ~0777u)
        return host->set_error(host, call, SBX_E_INVALID,
                               "local: mkdir: '%s': mode %#o has bits other than "
                               "permissions (0777)",
                               path ? path : "", mode);
    if (flags & ~SBX_MKDIR_PARENTS)
        return host->set_error(host, call, SBX_E_INVALID,
                               "local: mkdir: unknown flags 0x%x", (unsigned)flags);
    if (mode == 0)
        mode = 0755;
    int parents = (flags & SBX_MKDIR_PARENTS) != 0;
    if (root)
        return parents ? SBX_OK
                       : host->set_error(host, call, SBX_E_EXISTS,
                                         "local: mkdir: the workspace root exists");
    int parent = -1;
    char *base = NULL;
    rc = open_parent(sb, call, "mkdir", path, parents, &parent, &base);
    if (rc != SBX_OK)
        return rc;
    if (mkdirat(parent, base, mode) != 0) {
        int err = errno;
        struct stat st;
        if (err == EEXIST && parents &&
            fstatat(parent, base, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
            rc = SBX_OK;
        else if (err == EEXIST)
            rc = host->set_error(host, call, SBX_E_EXISTS, "local: mkdir: '%s' exists%s",
                                 path, parents ? " and is not a directory" : "");
        else
            rc = local_path_error(host, call, "mkdir", path, err);
    } else {
        int r = set_dir_mode(parent, base, mode);
        if (r < 0)
            rc = local_path_error(host, call, "mkdir", path, -r);
    }
    close(parent);
    free(base);
    return rc;
}

int local_file_remove(sbx_sandbox *sb, sbx_call *call, const char *path,
                      uint32_t flags)
{
    const struct sbx_host *host = sb->st->host;
    int root = 0;
    int rc = check(host, call, "remove", path, 0, &root);
    if (rc != SBX_OK)
        return rc;
    if (flags & ~SBX_REMOVE_RECURSIVE)
        return host->set_error(host, call, SBX_E_INVALID,
                               "local: remove: unknown flags 0x%x", (unsigned)flags);
    int parent = -1;
    char *base = NULL;
    rc = open_parent(sb, call, "remove", path, 0, &parent, &base);
    if (rc != SBX_OK)
        return rc;
    struct stat st;
    int r = 0;
    if (fstatat(parent, base, &st, AT_SYMLINK_NOFOLLOW) != 0)
        r = -errno;
    else if (!S_ISDIR(st.st_mode))
        r = unlinkat(parent, base, 0) == 0 ? 0 : -errno;
    else if (flags & SBX_REMOVE_RECURSIVE)
        r = sbxp_confine_remove_tree(parent, base);
    else
        r = unlinkat(parent, base, AT_REMOVEDIR) == 0 ? 0 : -errno;
    if (r == -ENOTEMPTY || r == -EEXIST)
        rc = host->set_error(host, call, SBX_E_EXISTS,
                             "local: remove: directory '%s' is not empty (remove it "
                             "recursively)",
                             path);
    else if (r < 0)
        rc = local_path_error(host, call, "remove", path, -r);
    close(parent);
    free(base);
    return rc;
}

int local_file_rename(sbx_sandbox *sb, sbx_call *call, const char *from,
                      const char *to, uint32_t flags)
{
    const struct sbx_host *host = sb->st->host;
    int root = 0;
    int rc = check(host, call, "rename", from, 0, &root);
    if (rc == SBX_OK)
        rc = check(host, call, "rename", to, 0, &root);
    if (rc != SBX_OK)
        return rc;
    if (flags & ~SBX_RENAME_NOREPLACE)
        return host->set_error(host, call, SBX_E_INVALID,
                               "local: rename: unknown flags 0x%x", (unsigned)flags);
    int fparent = -1, tparent = -1;
    char *fbase = NULL, *tbase = NULL;
    rc = open_parent(sb, call, "rename", from, 0, &fparent, &fbase);
    if (rc == SBX_OK)
        rc = open_parent(sb, call, "rename", to, 0, &tparent, &tbase);
    if (rc == SBX_OK) {
        unsigned how = (flags & SBX_RENAME_NOREPLACE) ? RENAME_NOREPLACE : 0;
        if (renameat2(fparent, fbase, tparent, tbase, how) != 0) {
            int err = errno;
            struct stat st;
            if (err == EEXIST || err == ENOTEMPTY)
                rc = host->set_error(host, call, SBX_E_EXISTS,
                                     "local: rename: '%s' exists%s", to,
                                     err == ENOTEMPTY ? " (a directory with entries)" : "");
            else if (err == ENOENT &&
                     fstatat(fparent, fbase, &st, AT_SYMLINK_NOFOLLOW) != 0)
                rc = host->set_error(host, call, SBX_E_NOT_FOUND,
                                     "local: rename: '%s' does not exist in the "
                                     "workspace",
                                     from);
            else if (err == EINVAL)
                rc = host->set_error(host, call, SBX_E_INVALID,
                                     "local: rename: cannot move '%s' into itself ('%s')",
                                     from, to);
            else if (err == EXDEV)
                rc = host->set_error(host, call, SBX_E_IO,
                                     "local: rename: '%s' and '%s' are on different "
                                     "file systems",
                                     from, to);
            else
                rc = local_path_error(host, call, "rename", to, err);
        }
    }
    if (fparent >= 0)
        close(fparent);
    if (tparent >= 0)
        close(tparent);
    free(fbase);
    free(tbase);
    return rc;
}
