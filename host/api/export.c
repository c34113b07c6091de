/*
 * export.c - sbx_export_to_dir: a sandbox's outputs, validated, published
 * into a host directory atomically.
 *
 * The provider's export_outputs pushes a tar stream into a sink; the
 * checked extractor (archive_check.c) pulls from a source; stream_pipe.c
 * joins the two (a hostile archive is never downloaded in full).
 *
 * Publication: the archive is extracted into a fresh directory beside the
 * target (".<name>.sbx-export-XXXXXX"), which is then renamed over it; an
 * existing target is swapped with renameat2(RENAME_EXCHANGE) and the old
 * tree removed, so a reader sees the previous export or the new one, never
 * a mixture. To avoid replacing a directory that sbx did not write, an
 * existing non-empty target is replaced only when the marker file beside it
 * (".<name>.sbx-export", which also serves as the lock serializing exports
 * into the same target) records that directory's device and inode.
 */
#include "archive_check.h"
#include "base/archive_lazy.h"
#include "api/stream_pipe.h"
#include "base/struct_size.h"
#include "tree_remove.h"

#include <sbx/sbx.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the export, as a producer ----------------------------------------- */

struct export_producer {
    sbx_handle *h;
    sbx_cancel *cancel;
};

static int produce_outputs(void *ud, const struct sbx_sink *sink, sbx_error *err)
{
    struct export_producer *e = ud;
    return sbx_export_outputs(e->h, sink, e->cancel, err);
}

/* ---- target checks and the marker ------------------------------------- */

/* Split target into a parent path (malloc'd; "." when none) and its last
 * component (pointing into *copy). */
static int split_target(const char *target, char **copy, char **parent,
                        const char **base, sbx_error *err)
{
    *copy = strdup(target);
    if (!*copy)
        return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    size_t n = strlen(*copy);
    while (n > 1 && (*copy)[n - 1] == '/')
        (*copy)[--n] = '\0';
    char *slash = strrchr(*copy, '/');
    const char *b = slash ? slash + 1 : *copy;
    if (!*b || strcmp(b, ".") == 0 || strcmp(b, "..") == 0)
        return sbx_error_set(err, SBX_E_INVALID,
                             "export target \"%s\" must name a directory by its own "
                             "name (not /, . or ..)",
                             target);
    if (slash == *copy)
        *parent = strdup("/");
    else if (slash)
        *parent = strndup(*copy, (size_t)(slash - *copy));
    else
        *parent = strdup(".");
    if (!*parent)
        return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    *base = b;
    return SBX_OK;
}

static int dir_is_empty(int pfd, const char *name)
{
    int fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return 0;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return 0;
    }
    int empty = 1;
    struct dirent *de;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) {
            empty = 0;
            break;
        }
    closedir(d);
    return empty;
}

/* Whether the marker (open at mfd) names the directory st. */
static int marker_matches(int mfd, const struct stat *st)
{
    char buf[128];
    ssize_t n = pread(mfd, buf, sizeof buf - 1, 0);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    unsigned long long dev, ino;
    if (sscanf(buf, "sbx-export %llu %llu", &dev, &ino) != 2)
        return 0;
    return dev == (unsigned long long)st->st_dev && ino == (unsigned long long)st->st_ino;
}

static int marker_write(int mfd, const struct stat *st)
{
    char buf[128];
    int n = snprintf(buf, sizeof buf, "sbx-export %llu %llu\n",
                     (unsigned long long)st->st_dev, (unsigned long long)st->st_ino);
    if (ftruncate(mfd, 0) != 0)
        return -1;
    return pwrite(mfd, buf, (size_t)n, 0) == n ? 0 : -1;
}

/* ---- the whole export ------------------------------------------------- */

/* One export into one target, step by step; export_cleanup undoes what the
 * steps made, whatever step failed. */
struct export_job {
    const char *target_dir;
    char *copy, *parent, *tmp_path, *marker;
    const char *base;     /* last component of the target, inside copy */
    const char *tmp_name; /* last component of tmp_path */
    int pfd;              /* the target's parent directory */
    int mfd;              /* the marker, locked */
    int tfd;              /* the staging directory */
    int marker_existed, tmp_made, target_exists;
};

/* Open the target's parent and lock the marker beside the target: one
 * export into it at a time. */
static int export_lock(struct export_job *j, sbx_error *err)
{
    int rc = split_target(j->target_dir, &j->copy, &j->parent, &j->base, err);
    if (rc != SBX_OK)
        return rc;
    j->pfd = open(j->parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (j->pfd < 0)
        return sbx_error_set(err, errno == ENOENT ? SBX_E_NOT_FOUND : SBX_E_IO,
                             "export target \"%s\": its parent directory %s cannot "
                             "be opened: %s",
                             j->target_dir, j->parent, strerror(errno));
    size_t blen = strlen(j->base);
    j->marker = malloc(blen + 32);
    j->tmp_path = malloc(strlen(j->parent) + blen + 48);
    if (!j->marker || !j->tmp_path)
        return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    snprintf(j->marker, blen + 32, ".%s.sbx-export", j->base);
    j->marker_existed = faccessat(j->pfd, j->marker, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
    j->mfd = openat(j->pfd, j->marker, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
                    0600);
    if (j->mfd < 0 || flock(j->mfd, LOCK_EX) != 0)
        return sbx_error_set(err, SBX_E_IO,
                             "export target \"%s\": cannot open or lock %s/%s: %s",
                             j->target_dir, j->parent, j->marker, strerror(errno));
    return SBX_OK;
}

/* The target may be absent, an empty directory, or a directory an earlier
 * export made (the marker records it); anything else is refused. */
static int export_check_target(struct export_job *j, sbx_error *err)
{
    struct stat tst;
    j->target_exists = fstatat(j->pfd, j->base, &tst, AT_SYMLINK_NOFOLLOW) == 0;
    if (!j->target_exists && errno != ENOENT)
        return sbx_error_set(err, SBX_E_IO, "export target \"%s\": %s", j->target_dir,
                             strerror(errno));
    if (!j->target_exists)
        return SBX_OK;
    if (!S_ISDIR(tst.st_mode))
        return sbx_error_set(err, SBX_E_INVALID,
                             "export target \"%s\" exists and is not a directory",
                             j->target_dir);
    if (!dir_is_empty(j->pfd, j->base) && !marker_matches(j->mfd, &tst))
        return sbx_error_set(err, SBX_E_EXISTS,
                             "export target \"%s\" is a non-empty directory that an "
                             "earlier export did not create; refusing to replace it "
                             "(give a new or empty directory)",
                             j->target_dir);
    return SBX_OK;
}

/* A fresh staging directory beside the target. */
static int export_make_staging(struct export_job *j, sbx_error *err)
{
    snprintf(j->tmp_path, strlen(j->parent) + strlen(j->base) + 48,
             "%s/.%s.sbx-export-XXXXXX", j->parent, j->base);
    if (!mkdtemp(j->tmp_path))
        return sbx_error_set(err, SBX_E_IO,
                             "export: cannot create a staging directory beside "
                             "\"%s\": %s",
                             j->target_dir, strerror(errno));
    j->tmp_made = 1;
    j->tmp_name = strrchr(j->tmp_path, '/') + 1;
    j->tfd = openat(j->pfd, j->tmp_name,
                    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (j->tfd < 0 || fchmod(j->tfd, 0755) != 0)
        return sbx_error_set(err, SBX_E_IO, "export: cannot open %s: %s", j->tmp_path,
                             strerror(errno));
    return SBX_OK;
}

/* Stream the sandbox's outputs into the staging directory: the provider
 * writes into one end of a socket pair on a thread, the checked extractor
 * reads the other end here. */
static int export_stream(struct export_job *j, sbx_handle *h,
                         const struct sbx_export_limits *limits, sbx_cancel *cancel,
                         sbx_error *err)
{
    struct export_producer ep = {h, cancel};
    struct sbx_stream_pipe pipe;
    int rc = sbxh_stream_pipe_start(&pipe, produce_outputs, &ep, err);
    if (rc != SBX_OK)
        return rc;
    struct sbx_source src = sbxh_stream_pipe_source(&pipe);
    struct sbxs_archive_limits lim = {0, 0, 0};
    if (limits) {
        lim.max_file_bytes = limits->max_file_bytes;
        lim.max_total_bytes = limits->max_total_bytes;
        lim.max_entries = limits->max_entries;
    }
    struct sbxs_error xerr;
    sbxs_error_clear(&xerr);
    int xrc = sbxs_archive_extract(&src, "tar", j->tfd, &lim, &xerr);
    if (xrc == SBX_OK)
        sbxh_stream_pipe_drain(&pipe); /* past the end-of-archive blocks */
    else
        sbxh_stream_pipe_abort(&pipe); /* stops the provider's transfer */
    sbxh_stream_pipe_join(&pipe);

    /* A provider that failed on its own (no outputs mount, daemon gone,
     * cancelled): its message explains the truncated archive best. */
    if (pipe.status != SBX_OK && !pipe.sink_failed)
        return sbx_error_set(err, pipe.status, "export from the sandbox failed: %s",
                             pipe.err.message);
    if (xrc != SBX_OK)
        return sbx_error_set(err, xrc, "export refused: %s%s", xerr.message,
                             pipe.read_errno ? " (reading the stream failed)" : "");
    if (pipe.status != SBX_OK)
        return sbx_error_set(err, pipe.status, "export from the sandbox failed: %s",
                             pipe.err.message);
    return SBX_OK;
}

/* Rename the staging directory over the target (swapping with an existing
 * one, which cleanup then removes) and record it in the marker. */
static int export_publish(struct export_job *j, sbx_error *err)
{
    if (j->target_exists) {
        if (renameat2(j->pfd, j->tmp_name, j->pfd, j->base, RENAME_EXCHANGE) != 0)
            return sbx_error_set(err, SBX_E_IO, "export: replacing \"%s\" failed: %s",
                                 j->target_dir, strerror(errno));
        /* tmp_name now holds the previous export: removed by cleanup. */
    } else if (renameat2(j->pfd, j->tmp_name, j->pfd, j->base, RENAME_NOREPLACE) != 0) {
        return sbx_error_set(err, SBX_E_IO, "export: publishing \"%s\" failed: %s",
                             j->target_dir, strerror(errno));
    } else {
        j->tmp_made = 0;
    }
    struct stat nst;
    if (fstatat(j->pfd, j->base, &nst, AT_SYMLINK_NOFOLLOW) != 0 ||
        marker_write(j->mfd, &nst) != 0)
        return sbx_error_set(err, SBX_E_IO,
                             "export: recording the export of \"%s\" failed: %s",
                             j->target_dir, strerror(errno));
    j->marker_existed = 1;
    return SBX_OK;
}

/* Remove the staging (or previous) tree, drop a marker this export made,
 * release the lock. rc is the export's status so far. */
static int export_cleanup(struct export_job *j, int rc, sbx_error *err)
{
    if (j->tfd >= 0)
        close(j->tfd);
    int removed = j->tmp_made ? sbxs_remove_tree(j->pfd, j->tmp_name) : 0;
    if (removed != 0 && rc == SBX_OK)
        rc = sbx_error_set(err, SBX_E_IO,
                           "export: removing the previous export of \"%s\" failed: "
                           "%s",
                           j->target_dir, strerror(-removed));
    if (j->mfd >= 0) {
        if (!j->marker_existed)
            unlinkat(j->pfd, j->marker, 0);
        close(j->mfd); /* releases the lock */
    }
    if (j->pfd >= 0)
        close(j->pfd);
    free(j->copy);
    free(j->parent);
    free(j->tmp_path);
    free(j->marker);
    return rc;
}

SBX_API int sbx_export_to_dir(sbx_handle *h, const char *target_dir,
                              const struct sbx_export_limits *limits,
                              sbx_cancel *cancel, sbx_error *err)
{
    /* the caller's limits, read only up to their size */
    struct sbx_export_limits given;
    if (limits && !sbx_struct_in(&given, sizeof given, limits, sizeof given.size))
        return sbx_error_set(err, SBX_E_INVALID,
                             "export: struct sbx_export_limits: size is not set");
    /* libarchive is loaded on first use: fail before anything starts */
    int loaded = sbxh_archive_load(err);
    if (loaded != SBX_OK)
        return loaded;
    sbx_error_clear(err);
    if (!h || !target_dir || !*target_dir)
        return sbx_error_set(err, SBX_E_INVALID, "export needs a sandbox and a target "
                                                 "directory");
    struct export_job j = {.target_dir = target_dir, .pfd = -1, .mfd = -1, .tfd = -1};
    int rc = export_lock(&j, err);
    if (rc == SBX_OK)
        rc = export_check_target(&j, err);
    if (rc == SBX_OK)
        rc = export_make_staging(&j, err);
    if (rc == SBX_OK)
        rc = export_stream(&j, h, limits ? &given : NULL, cancel, err);
    if (rc == SBX_OK)
        rc = export_publish(&j, err);
    return export_cleanup(&j, rc, err);
}
