/*
 * files.c - read_file and write_file of the `local` provider.
 *
 * Every path is resolved with openat2(RESOLVE_BENEATH|RESOLVE_NO_MAGICLINKS)
 * from the workspace's O_PATH fd (see plugins/common/confine.h): "..",
 * absolute paths and symlinks leading out are refused, race-free. Data is
 * streamed in LOCAL_CHUNK pieces; no file is ever held in memory.
 *
 * write_file writes an unnamed file (O_TMPFILE) in the target's directory,
 * names it once complete and renames it over the target, so readers see
 * the old or the new content, never a part, and a writer killed midway
 * leaves nothing behind. A symlink at the target is replaced, not followed (after
 * checking that it does not lead out, to refuse such writes clearly).
 */
#include "local.h"

#include "confine.h"
#include "hex.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOCAL_FILE_MODE 0644
#define LOCAL_PARENT_MODE 0755
/* Attempts at finding an unused temporary name. */
#define LOCAL_TMP_TRIES 8

int local_path_error(const struct sbx_host *host, sbx_call *call,
                      const char *op, const char *path, int err)
{
    switch (err) {
    case EXDEV:
        return host->set_error(host, call, SBX_E_INVALID,
                               "local: %s: path '%s' leads out of the "
                               "workspace",
                               op, path);
    case ELOOP:
        return host->set_error(host, call, SBX_E_INVALID,
                               "local: %s: path '%s' has too many symlinks "
                               "or a link out of the workspace",
                               op, path);
    case ENOENT:
        return host->set_error(host, call, SBX_E_NOT_FOUND,
                               "local: %s: '%s' does not exist in the "
                               "workspace",
                               op, path);
    case ENOTDIR:
        return host->set_error(host, call, SBX_E_INVALID,
                               "local: %s: a component of '%s' is not a "
                               "directory",
                               op, path);
    case EISDIR:
        return host->set_error(host, call, SBX_E_INVALID,
                               "local: %s: '%s' is a directory", op, path);
    case ENAMETOOLONG:
        return host->set_error(host, call, SBX_E_INVALID,
                               "local: %s: path '%s' is too long", op, path);
    case EACCES:
    case EPERM:
        return host->set_error(host, call, SBX_E_DENIED,
                               "local: %s: '%s': %s", op, path,
                               strerror(err));
    case ENOSYS:
        return host->set_error(host, call, SBX_E_UNSUPPORTED,
                               "local: the kernel lacks openat2 (Linux 5.6 "
                               "or newer is required)");
    case ENOMEM:
        return host->set_error(host, call, SBX_E_NOMEM,
                               "local: %s: '%s': out of memory", op, path);
    default:
        return host->set_error(host, call, SBX_E_IO, "local: %s: '%s': %s",
                               op, path, strerror(err));
    }
}

int local_check_path(const struct sbx_host *host, sbx_call *call,
                      const char *op, const char *path)
{
    int err = sbxp_confine_check_path(path);
    if (err == -EINVAL)
        return host->set_error(host, call, SBX_E_INVALID,
                               "local: %s: empty path", op);
    if (err < 0)
        return host->set_error(host, call, SBX_E_INVALID,
                               "local: %s: path '%s' leads out of the "
                               "workspace (paths are relative to it)",
                               op, path);
    return SBX_OK;
}

int local_read_file(sbx_sandbox *sb, sbx_call *call, const char *path,
                    const struct sbx_sink *sink)
{
    const struct sbx_host *host = sb->st->host;
    int rc = local_check_path(host, call, "read", path);
    if (rc != SBX_OK)
        return rc;
    /* O_NONBLOCK: opening a FIFO must not hang; it is refused below. */
    int fd = sbxp_confine_open(sb->dirfd, path, O_RDONLY | O_NOCTTY | O_NONBLOCK,
                               0);
    if (fd < 0)
        return local_path_error(host, call, "read", path, -fd);
    struct stat st;
    if (fstat(fd, &st) < 0) {
        rc = local_path_error(host, call, "read", path, errno);
        close(fd);
        return rc;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return host->set_error(host, call, SBX_E_INVALID,
                               "local: read: '%s' is not a regular file",
                               path);
    }
    unsigned char *buf = malloc(LOCAL_CHUNK);
    if (buf == NULL) {
        close(fd);
        return host->set_error(host, call, SBX_E_NOMEM,
                               "local: out of memory");
    }
    for (;;) {
        ssize_t n = read(fd, buf, LOCAL_CHUNK);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            rc = local_path_error(host, call, "read", path, errno);
            break;
        }
        if (n == 0)
            break;
        if (sink != NULL) {
            int s = sink->write(sink->ctx, buf, (size_t)n);
            if (s != 0) {
                rc = s;
                break;
            }
        }
    }
    free(buf);
    close(fd);
    return rc;
}

/* A fresh temporary name ".sbx-write-<16 hex>" in name[28]. */
static void temp_name(char name[28])
{
    memcpy(name, ".sbx-write-", 11);
    sbxs_random_hex(name + 11, 8);
}

/* Give the complete unnamed file fd a fresh temporary name in dirfd
 * (written to tmp). 0, or an errno. AT_EMPTY_PATH needs
 * CAP_DAC_READ_SEARCH; /proc/self/fd works without it. */
static int link_unnamed(int fd, int dirfd, char tmp[28])
{
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    for (int i = 0; i < LOCAL_TMP_TRIES; i++) {
        temp_name(tmp);
        if (linkat(fd, "", dirfd, tmp, AT_EMPTY_PATH) == 0 ||
            linkat(AT_FDCWD, proc, dirfd, tmp, AT_SYMLINK_FOLLOW) == 0)
            return 0;
        if (errno != EEXIST)
            return errno;
    }
    return EEXIST;
}

/* Write everything from src into fd, checking for cancellation between
 * chunks. Returns SBX_OK, SBX_E_IO after a source error (whose message the
 * host has set), or a status with the message set. */
static int copy_source(const struct sbx_host *host, sbx_call *call,
                       const char *path, const struct sbx_source *src, int fd)
{
    if (src == NULL)
        return SBX_OK;
    unsigned char *buf = malloc(LOCAL_CHUNK);
    if (buf == NULL)
        return host->set_error(host, call, SBX_E_NOMEM,
                               "local: out of memory");
    int rc = SBX_OK;
    for (;;) {
        if (host->cancelled && host->cancelled(host, call)) {
            rc = host->set_error(host, call, SBX_E_CANCELLED,
                                 "local: write: '%s': cancelled", path);
            break;
        }
        long n = src->read(src->ctx, buf, LOCAL_CHUNK);
        if (n < 0) {
            rc = SBX_E_IO;
            break;
        }
        if (n == 0)
            break;
        if ((size_t)n > LOCAL_CHUNK) {
            rc = host->set_error(host, call, SBX_E_INTERNAL,
                                 "local: write: source returned %ld bytes "
                                 "for a %d-byte buffer",
                                 n, LOCAL_CHUNK);
            break;
        }
        size_t off = 0;
        while (off < (size_t)n) {
            ssize_t w = write(fd, buf + off, (size_t)n - off);
            if (w < 0) {
                if (errno == EINTR)
                    continue;
                rc = host->set_error(host, call, SBX_E_IO,
                                     "local: write: '%s': %s", path,
                                     strerror(errno));
                break;
            }
            off += (size_t)w;
        }
        if (rc != SBX_OK)
            break;
    }
    free(buf);
    return rc;
}

/* Refuse a target that is a directory or a symlink leading out of the
 * workspace; anything else (absent, file, inside link) may be replaced. */
static int check_target(const struct sbx_host *host, sbx_call *call,
                        const char *path, int dirfd, const char *base)
{
    int fd = sbxp_confine_open(dirfd, base, O_PATH, 0);
    if (fd == -ENOENT)
        return SBX_OK;
    if (fd < 0) {
        /* A link out is an escape relative to the parent too; report it
         * with the whole path. */
        return local_path_error(host, call, "write", path, -fd);
    }
    struct stat st;
    int rc = SBX_OK;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode))
        rc = local_path_error(host, call, "write", path, EISDIR);
    close(fd);
    return rc;
}

int local_write_file(sbx_sandbox *sb, sbx_call *call, const char *path,
                     const struct sbx_source *src, unsigned mode)
{
    const struct sbx_host *host = sb->st->host;
    int rc = local_check_path(host, call, "write", path);
    if (rc != SBX_OK)
        return rc;
    if (mode & ~0777u)
        return host->set_error(host, call, SBX_E_INVALID,
                               "local: write: '%s': mode %#o has bits other "
                               "than permissions (0777)",
                               path, mode);
    if (mode == 0)
        mode = LOCAL_FILE_MODE;

    const char *slash = strrchr(path, '/');
    const char *base = slash != NULL ? slash + 1 : path;
    if (base[0] == '\0' || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
        return host->set_error(host, call, SBX_E_INVALID,
                               "local: write: '%s' does not name a file",
                               path);
    char *dir = strndup(path, slash != NULL ? (size_t)(slash - path) : 0);
    if (dir == NULL)
        return host->set_error(host, call, SBX_E_NOMEM,
                               "local: out of memory");
    int dirfd = sbxp_confine_mkdirs(sb->dirfd, dir, LOCAL_PARENT_MODE);
    free(dir);
    if (dirfd < 0)
        return local_path_error(host, call, "write", path, -dirfd);
    rc = check_target(host, call, path, dirfd, base);
    if (rc != SBX_OK) {
        close(dirfd);
        return rc;
    }

    /* The content goes to an unnamed file (O_TMPFILE) in the confined
     * directory: if the host process dies mid-write, nothing is left
     * behind. It gets a temporary name only once it is complete, for the
     * rename over the target. Where the filesystem has no O_TMPFILE, the
     * temporary is named from the start (plain name, O_EXCL, O_NOFOLLOW:
     * it cannot land anywhere else). */
    char tmp[28];
    int fd = openat(dirfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
    int named = fd < 0;
    for (int i = 0; named && i < LOCAL_TMP_TRIES && fd < 0; i++) {
        temp_name(tmp);
        fd = openat(dirfd, tmp,
                    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                    0600);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0) {
        rc = local_path_error(host, call, "write", path, errno);
        close(dirfd);
        return rc;
    }

    /* fchmod: the exact mode, whatever the process umask is. */
    if (fchmod(fd, mode) < 0)
        rc = local_path_error(host, call, "write", path, errno);
    if (rc == SBX_OK)
        rc = copy_source(host, call, path, src, fd);
    if (rc == SBX_OK && fsync(fd) < 0)
        rc = local_path_error(host, call, "write", path, errno);
    if (rc == SBX_OK && !named) {
        rc = link_unnamed(fd, dirfd, tmp);
        named = rc == 0;
        rc = rc == 0 ? SBX_OK : local_path_error(host, call, "write", path, rc);
    }
    if (close(fd) < 0 && rc == SBX_OK)
        rc = local_path_error(host, call, "write", path, errno);
    if (rc == SBX_OK && renameat(dirfd, tmp, dirfd, base) < 0)
        rc = local_path_error(host, call, "write", path, errno);
    if (rc != SBX_OK && named)
        (void)unlinkat(dirfd, tmp, 0);
    close(dirfd);
    return rc;
}
