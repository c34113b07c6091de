/*
 * snapshot.c - sbx_snapshot_save, and the checked copy of entries that
 * save and restore share: a workspace as a tar archive on the host,
 * streamed both ways through provider operations only (exec with tar in
 * the sandbox), so it works on every provider.
 *
 * Save: interrupted restores are rolled back first (snapshot_stage.c), so
 * the archive holds the workspace as it is; then `tar -c` of the workspace
 * root's entries (all but `skills`, the SKILLS capability's directory,
 * which is installed from its bundles, not restored, and restores'
 * staging directories) runs in the sandbox with stdout streamed (stream_pipe.c) into
 * libarchive, which checks every entry like an export (regular files and
 * directories only, relative clean names, limits) and writes it into a
 * temporary file beside the target, compressed when asked; only a
 * complete, closed and synced archive is renamed over the target.
 *
 * Names are bytes: the sandbox's tar writes them as they are on disk,
 * libarchive reads them raw (archive_entry_pathname, never converted: libsbx
 * sets no locale, and in the C locale libarchive cannot convert a
 * non-ASCII name), and the writer records them raw too (pax with
 * hdrcharset=BINARY). A name set only in its UTF-8 form made libarchive's
 * pax writer ask for the locale's form, get NULL and pass it to strlen.
 *
 * The temporary is unnamed (O_TMPFILE) where the filesystem allows, so
 * not even a SIGKILL leaves it behind; it gets a name only to be renamed
 * over the target.
 *
 * Restore: snapshot_restore.c.
 */
#include "archive_check.h"
#include "archive_pax.h"
#include "base/archive_lazy.h"
#include "hex.h"
#include "api/snapshot_internal.h"
#include "base/cancel.h"
#include "api/stream_pipe.h"

#include <sbx/sbx.h>

#include <archive.h>
#include <archive_entry.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define COPY_CHUNK (256 * 1024)
/* libarchive writes in blocks of 10 KiB by default: one syscall each. */
#define WRITE_BLOCK (256 * 1024)

/* The workspace's top-level entries but skills, in tar. A workspace with
 * none gives no output at all (an empty archive). */
static const char save_script[] =
    "set --\n"
    "for f in * .[!.]* ..?*; do\n"
    "  { [ -e \"$f\" ] || [ -L \"$f\" ]; } || continue\n"
    "  case $f in skills|" SBX_SNAPSHOT_STAGE_PREFIX "*) continue;; esac\n"
    "  set -- \"$@\" \"$f\"\n"
    "done\n"
    "[ $# -eq 0 ] && exit 0\n"
    "exec tar -cf - -- \"$@\"\n";

/* ---- copying checked entries from a reader to a writer ---------------- */

ssize_t sbxh_snapshot_counted_read(struct archive *a, void *ud, const void **out)
{
    (void)a;
    struct sbx_snapshot_counted *c = ud;
    long n = c->src->read(c->src->ctx, c->buf, sizeof c->buf);
    if (n < 0)
        return -1;
    c->bytes += (uint64_t)n;
    if (c->progress && c->bytes - c->reported >= 1024 * 1024) {
        c->reported = c->bytes;
        sbxh_progress(c->progress, c->what, "bytes", c->bytes, c->total, NULL, false);
    }
    *out = c->buf;
    return n;
}

void sbxh_snapshot_counted_done(struct sbx_snapshot_counted *c)
{
    if (c->progress)
        sbxh_progress(c->progress, c->what, "bytes", c->bytes,
                      c->total ? c->total : c->bytes, NULL, true);
}

int sbxh_snapshot_writer_setup(struct archive *w)
{
    int r = sbxs_archive_write_pax_bytes(w);
    if (r == ARCHIVE_OK)
        r = archive_write_set_bytes_per_block(w, WRITE_BLOCK);
    /* no padding past the end-of-archive blocks: tar -x may stop reading
     * there */
    if (r == ARCHIVE_OK)
        r = archive_write_set_bytes_in_last_block(w, 1);
    return r;
}

/* What a restore may not bring: skills/ (kept, and read-only on docker)
 * and the staging directories' names. */
static int restore_name_ok(const char *name, struct sbxs_error *xerr)
{
    size_t top = strcspn(name, "/");
    if (top == 6 && !strncmp(name, "skills", 6))
        return sbxs_error_set(xerr, SBX_E_INVALID,
                              "archive entry \"skills%s\" is under skills/, which a "
                              "restore keeps (installed from skill bundles)",
                              name[6] ? "/..." : "");
    if (!strncmp(name, SBX_SNAPSHOT_STAGE_PREFIX, strlen(SBX_SNAPSHOT_STAGE_PREFIX)))
        return sbxs_error_set(xerr, SBX_E_INVALID,
                              "archive entry \"%.*s\" uses a name reserved for restores "
                              "(" SBX_SNAPSHOT_STAGE_PREFIX "*)",
                              (int)(top < 120 ? top : 120), name);
    return SBX_OK;
}

int sbxh_snapshot_copy_entries(struct archive *r, struct archive *w, bool for_restore,
                               struct sbxs_error *xerr)
{
    sbxs_archive_check *chk = NULL;
    int rc = sbxs_archive_check_new(NULL, &chk, xerr);
    if (rc == SBX_OK)
        sbxs_archive_check_any_bytes(chk);
    unsigned char *buf = rc == SBX_OK ? malloc(COPY_CHUNK) : NULL;
    struct archive_entry *out = w ? archive_entry_new() : NULL;
    if (rc == SBX_OK && (!buf || (w && !out)))
        rc = sbxs_error_set(xerr, SBX_E_NOMEM, "out of memory");
    char name[4096];
    while (rc == SBX_OK) {
        struct archive_entry *e;
        int r2 = archive_read_next_header(r, &e);
        if (r2 == ARCHIVE_EOF)
            break;
        if (r2 != ARCHIVE_OK && r2 != ARCHIVE_WARN) {
            rc = sbxs_error_set(xerr, SBX_E_INVALID, "not a valid archive: %s",
                                archive_error_string(r));
            break;
        }
        int is_dir = 0;
        if ((rc = sbxs_archive_check_entry(chk, e, name, sizeof name, &is_dir, xerr)))
            break;
        if (!name[0])
            continue; /* the archive's root directory */
        if (for_restore && (rc = restore_name_ok(name, xerr)) != SBX_OK)
            break;
        if (w) {
            archive_entry_clear(out);
            /* the raw bytes, as read: see the top of this file */
            archive_entry_copy_pathname(out, name);
            archive_entry_set_filetype(out, is_dir ? AE_IFDIR : AE_IFREG);
            archive_entry_set_perm(out, archive_entry_perm(e) & 0777);
            archive_entry_set_size(out, is_dir ? 0 : archive_entry_size(e));
            archive_entry_set_mtime(out, archive_entry_mtime(e), 0);
            if (archive_write_header(w, out) != ARCHIVE_OK) {
                rc = sbxs_error_set(xerr, SBX_E_IO, "%s: %s", name, archive_error_string(w));
                break;
            }
        }
        for (;;) {
            la_ssize_t n = archive_read_data(r, buf, COPY_CHUNK);
            if (n == 0)
                break;
            if (n < 0) {
                rc = sbxs_error_set(xerr, SBX_E_INVALID, "%s: %s", name,
                                    archive_error_string(r));
                break;
            }
            if ((rc = sbxs_archive_check_data(chk, (uint64_t)n, xerr)))
                break;
            if (w && archive_write_data(w, buf, (size_t)n) != n) {
                rc = sbxs_error_set(xerr, SBX_E_IO, "%s: %s", name,
                                    archive_error_string(w));
                break;
            }
        }
    }
    if (out)
        archive_entry_free(out);
    free(buf);
    sbxs_archive_check_free(chk);
    return rc;
}

/* ---- save --------------------------------------------------------------- */

struct save_producer {
    sbx_handle *h;
    sbx_cancel *cancel;
};

static int produce_tar(void *ud, const struct sbx_sink *sink, sbx_error *err)
{
    struct save_producer *p = ud;
    return sbxh_snapshot_script(p->h, "tar", save_script, NULL, NULL, sink, NULL, p->cancel,
                                err);
}

static int add_filter(struct archive *w, const char *compression, sbx_error *err)
{
    if (!compression || !strcmp(compression, "none"))
        return SBX_OK;
    int r = !strcmp(compression, "gzip")   ? archive_write_add_filter_gzip(w)
            : !strcmp(compression, "zstd") ? archive_write_add_filter_zstd(w)
                                           : ARCHIVE_FATAL - 1;
    if (r == ARCHIVE_FATAL - 1)
        return sbx_error_set(err, SBX_E_INVALID,
                             "snapshot: compression \"%.20s\" is unknown (expected none, "
                             "gzip or zstd)",
                             compression);
    if (r != ARCHIVE_OK)
        return sbx_error_set(err, SBX_E_UNSUPPORTED, "snapshot: %s compression: %s",
                             compression, archive_error_string(w));
    return SBX_OK;
}

/* The directory of path (malloc'd) and its last component. */
static int split_path(const char *path, char **dir, const char **base, sbx_error *err)
{
    const char *slash = strrchr(path, '/');
    *base = slash ? slash + 1 : path;
    if (!**base || !strcmp(*base, ".") || !strcmp(*base, ".."))
        return sbx_error_set(err, SBX_E_INVALID, "snapshot file \"%s\" must name a file",
                             path);
    *dir = slash == path ? strdup("/") : slash ? strndup(path, (size_t)(slash - path))
                                               : strdup(".");
    return *dir ? SBX_OK : sbx_error_set(err, SBX_E_NOMEM, "out of memory");
}

/* Stream the sandbox's tar through the checks into w. */
static int save_stream(sbx_handle *h, struct archive *w, sbx_cancel *cancel,
                       sbx_error *err)
{
    struct save_producer sp = {h, cancel};
    struct sbx_stream_pipe pipe;
    int rc = sbxh_stream_pipe_start(&pipe, produce_tar, &sp, err);
    if (rc != SBX_OK)
        return rc;
    struct sbx_source src = sbxh_stream_pipe_source(&pipe);
    struct sbx_snapshot_counted *cnt = calloc(1, sizeof *cnt);
    if (!cnt) {
        sbxh_stream_pipe_abort(&pipe);
        sbxh_stream_pipe_join(&pipe);
        return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    }
    cnt->src = &src;
    cnt->progress = cancel;
    cnt->what = "snapshot";
    struct archive *r = archive_read_new();
    struct sbxs_error xerr;
    sbxs_error_clear(&xerr);
    int xrc = SBX_OK;
    if (!r || archive_read_support_format_tar(r) != ARCHIVE_OK ||
        archive_read_open(r, cnt, NULL, sbxh_snapshot_counted_read, NULL) != ARCHIVE_OK) {
        /* an empty stream cannot even be opened as tar: no entries */
        if (!r || cnt->bytes != 0)
            xrc = sbxs_error_set(&xerr, SBX_E_INVALID, "not a tar stream: %s",
                                 r ? archive_error_string(r) : "out of memory");
    } else {
        xrc = sbxh_snapshot_copy_entries(r, w, false, &xerr);
    }
    if (xrc == SBX_OK) {
        sbxh_snapshot_counted_done(cnt);
        sbxh_stream_pipe_drain(&pipe);
    }
    else
        sbxh_stream_pipe_abort(&pipe);
    sbxh_stream_pipe_join(&pipe);
    if (r)
        archive_read_free(r);
    free(cnt);
    if (pipe.status != SBX_OK && !pipe.sink_failed)
        return sbx_error_set(err, pipe.status, "snapshot: %s", pipe.err.message);
    if (xrc != SBX_OK)
        return sbx_error_set(err, xrc, "snapshot refused: %s", xerr.message);
    if (pipe.status != SBX_OK)
        return sbx_error_set(err, pipe.status, "snapshot: %s", pipe.err.message);
    return SBX_OK;
}

/* The temporary in dfd: unnamed when the filesystem allows (*tmp = ""),
 * else named tmp (cap bytes). -1 with errno on failure. */
static int open_temporary(int dfd, const char *base, char *tmp, size_t cap)
{
    tmp[0] = '\0';
    int fd = openat(dfd, ".", O_WRONLY | O_TMPFILE | O_CLOEXEC, 0600);
    if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL))
        return fd;
    char hex[17];
    snprintf(tmp, cap, ".%.200s.sbx-snapshot-%s", base, sbxs_random_hex(hex, 8));
    return openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
}

/* Give the complete temporary the name base: an unnamed one is linked
 * under a fresh name first (linkat through /proc needs no privilege), then
 * renamed over base. On failure no name is left. */
static int publish_temporary(int dfd, int fd, const char *tmp, const char *base)
{
    char named[300], hex[17];
    if (!tmp[0]) {
        char proc[64];
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
        snprintf(named, sizeof named, ".%.200s.sbx-snapshot-%s", base,
                 sbxs_random_hex(hex, 8));
        if (linkat(AT_FDCWD, proc, dfd, named, AT_SYMLINK_FOLLOW) != 0 &&
            linkat(fd, "", dfd, named, AT_EMPTY_PATH) != 0)
            return -1;
        tmp = named;
    }
    if (renameat(dfd, tmp, dfd, base) == 0)
        return 0;
    int saved = errno;
    unlinkat(dfd, tmp, 0);
    errno = saved;
    return -1;
}

SBX_API int sbx_snapshot_save(sbx_handle *h, const char *file, const char *compression,
                              sbx_cancel *cancel, sbx_error *err)
{
    sbx_error_clear(err);
    int rc = sbxh_archive_load(err);
    if (rc != SBX_OK)
        return rc;
    if (!h || !file || !*file)
        return sbx_error_set(err, SBX_E_INVALID, "snapshot needs a sandbox and a file");
    char *dir = NULL;
    const char *base = NULL;
    if ((rc = split_path(file, &dir, &base, err)) != SBX_OK)
        return rc;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    char tmp[300];
    int fd = dfd >= 0 ? open_temporary(dfd, base, tmp, sizeof tmp) : -1;
    if (fd < 0) {
        rc = sbx_error_set(err, errno == ENOENT ? SBX_E_NOT_FOUND : SBX_E_IO,
                           "snapshot file \"%s\": cannot create a file in %s: %s", file,
                           dir, strerror(errno));
        if (dfd >= 0)
            close(dfd);
        free(dir);
        return rc;
    }
    rc = sbxh_snapshot_recover(h, NULL, cancel, err);
    struct archive *w = rc == SBX_OK ? archive_write_new() : NULL;
    if (rc == SBX_OK && !w)
        rc = sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    else if (rc == SBX_OK && sbxh_snapshot_writer_setup(w) != ARCHIVE_OK)
        rc = sbx_error_set(err, SBX_E_INTERNAL, "snapshot: %s", archive_error_string(w));
    if (rc == SBX_OK)
        rc = add_filter(w, compression, err);
    if (rc == SBX_OK && archive_write_open_fd(w, fd) != ARCHIVE_OK)
        rc = sbx_error_set(err, SBX_E_IO, "snapshot: %s", archive_error_string(w));
    if (rc == SBX_OK)
        rc = save_stream(h, w, cancel, err);
    if (rc == SBX_OK && archive_write_close(w) != ARCHIVE_OK)
        rc = sbx_error_set(err, SBX_E_IO, "snapshot: writing %s: %s", file,
                           archive_error_string(w));
    if (w)
        archive_write_free(w);
    /* Only a complete, synced archive takes the name. */
    if (rc == SBX_OK && (fsync(fd) != 0 || fchmod(fd, 0644) != 0))
        rc = sbx_error_set(err, SBX_E_IO, "snapshot: writing %s: %s", file, strerror(errno));
    if (rc == SBX_OK && publish_temporary(dfd, fd, tmp, base) != 0)
        rc = sbx_error_set(err, SBX_E_IO, "snapshot: publishing %s: %s", file,
                           strerror(errno));
    close(fd);
    if (rc != SBX_OK && tmp[0])
        unlinkat(dfd, tmp, 0);
    else if (rc == SBX_OK)
        fsync(dfd);
    close(dfd);
    free(dir);
    return rc;
}
