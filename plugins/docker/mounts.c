/*
 * mounts.c - FILE_MOUNTS: mount_put and mount_remove.
 *
 * The session's uploads/ host directory is bound read-only at
 * /mnt/session/uploads when the container is created (resources.c), so the
 * sandbox sees every published file at once and can change none of them.
 * mount_put streams the blob into a locked file in staging/ while hashing
 * it, checks size and SHA-256, and only then renames it into uploads/ (same
 * file system: atomic; an existing file is replaced whole). A blob that
 * fails verification never appears. Paths below uploads/ are resolved with
 * openat2(RESOLVE_BENEATH) (confine.c), so nothing lands outside it.
 * mount_remove is idempotent and sweeps the staging files of crashed
 * processes (staging.c), so a put interrupted by a crash leaves nothing
 * visible and nothing behind after the next call.
 */
#include "docker.h"

#include "confine.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Open the uploads directory of the handle (fails closed without it). */
static int open_uploads(sbx_sandbox *sb, sbx_call *call, const char *what, int *fd)
{
    struct docker_state *st = sb->st;
    *fd = -1;
    if (!sb->uploads_src)
        return st->host->set_error(st->host, call, SBX_E_UNSUPPORTED,
                                   "docker: %s: container %.12s was created without "
                                   "the %s mount",
                                   what, sb->id, DOCKER_UPLOADS);
    *fd = open(sb->uploads_src, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (*fd < 0)
        return st->host->set_error(st->host, call, SBX_E_IO,
                                   "docker: %s: cannot open %s: %s", what,
                                   sb->uploads_src, strerror(errno));
    return SBX_OK;
}

/* Split "a/b/c" into "a/b" (in place) and "c"; *dir is NULL for "c". */
static void split(char *rel, char **dir, char **base)
{
    char *slash = strrchr(rel, '/');
    if (slash) {
        *slash = '\0';
        *dir = rel;
        *base = slash + 1;
    } else {
        *dir = NULL;
        *base = rel;
    }
}

int docker_mount_put(sbx_sandbox *sb, sbx_call *call, const char *path,
                     const struct sbx_blob *blob)
{
    struct docker_state *st = sb->st;
    char *rel = NULL;
    int sdfd = -1, upfd = -1, pfd = -1, fd = -1;
    char tmp[64] = "";
    int rc = docker_path_check(st, call, "mount_put", path, 0, &rel);
    if (rc != SBX_OK)
        return rc;
    if ((rc = docker_blob_args(st, call, "mount_put", blob)) != SBX_OK ||
        (rc = open_uploads(sb, call, "mount_put", &upfd)) != SBX_OK ||
        (rc = docker_staging_open(sb, call, "mount_put", &sdfd)) != SBX_OK)
        goto out;
    docker_staging_sweep(sdfd);
    rc = docker_staging_file(st, call, sdfd, "upload", tmp, sizeof tmp, &fd);
    if (rc != SBX_OK) {
        tmp[0] = '\0';
        goto out;
    }
    char what[300];
    snprintf(what, sizeof what, "mount_put %.200s", rel);
    rc = docker_blob_copy(st, call, what, blob, fd);
    if (rc != SBX_OK)
        goto out;

    char *dir, *base;
    split(rel, &dir, &base);
    pfd = dir ? sbxp_confine_mkdirs(upfd, dir, 0755) : dup(upfd);
    if (pfd < 0) {
        int e = dir ? -pfd : errno;
        rc = st->host->set_error(st->host, call, e == EXDEV || e == ENOTDIR
                                                     ? SBX_E_INVALID
                                                     : SBX_E_IO,
                                 "docker: %s: cannot make its directory below %s: %s",
                                 what, DOCKER_UPLOADS, strerror(e));
        goto out;
    }
    if (renameat(sdfd, tmp, pfd, base) != 0) {
        int e = errno;
        rc = st->host->set_error(st->host, call,
                                 e == EISDIR || e == ENOTDIR ? SBX_E_INVALID : SBX_E_IO,
                                 "docker: %s: publishing failed: %s%s", what,
                                 strerror(e),
                                 e == EISDIR ? " (a directory has that name)" : "");
        goto out;
    }
    tmp[0] = '\0'; /* published: nothing to clean up */
    rc = SBX_OK;
out:
    if (tmp[0] && sdfd >= 0)
        unlinkat(sdfd, tmp, 0);
    if (fd >= 0)
        close(fd); /* releases the staging lock */
    if (pfd >= 0)
        close(pfd);
    if (upfd >= 0)
        close(upfd);
    if (sdfd >= 0)
        close(sdfd);
    free(rel);
    return rc;
}

int docker_mount_remove(sbx_sandbox *sb, sbx_call *call, const char *path)
{
    struct docker_state *st = sb->st;
    char *rel = NULL;
    int sdfd = -1, upfd = -1, pfd = -1;
    int rc = docker_path_check(st, call, "mount_remove", path, 0, &rel);
    if (rc != SBX_OK)
        return rc;
    if ((rc = open_uploads(sb, call, "mount_remove", &upfd)) != SBX_OK ||
        (rc = docker_staging_open(sb, call, "mount_remove", &sdfd)) != SBX_OK)
        goto out;
    docker_staging_sweep(sdfd);
    char *dir, *base;
    split(rel, &dir, &base);
    pfd = dir ? sbxp_confine_open(upfd, dir, O_PATH | O_DIRECTORY, 0) : dup(upfd);
    if (pfd < 0) {
        int e = dir ? -pfd : errno;
        if (e == ENOENT || e == ENOTDIR) {
            rc = SBX_OK; /* nothing there: already removed */
        } else {
            rc = st->host->set_error(st->host, call,
                                     e == EXDEV || e == ELOOP ? SBX_E_INVALID : SBX_E_IO,
                                     "docker: mount_remove %.200s: %s", rel,
                                     strerror(e));
        }
        goto out;
    }
    int r = sbxp_confine_remove_tree(pfd, base);
    rc = r == 0 ? SBX_OK
                : st->host->set_error(st->host, call, SBX_E_IO,
                                      "docker: mount_remove %.200s: %s", rel,
                                      strerror(-r));
out:
    if (pfd >= 0)
        close(pfd);
    if (upfd >= 0)
        close(upfd);
    if (sdfd >= 0)
        close(sdfd);
    free(rel);
    return rc;
}
