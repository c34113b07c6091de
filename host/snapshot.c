/*
 * snapshot.c - sbx_snapshot_save and sbx_snapshot_restore: a workspace as
 * a tar archive on the host, streamed both ways through provider
 * operations only (exec with tar in the sandbox), so it works on every
 * provider.
 *
 * Save: `tar -c` of the workspace root's entries (all but `skills`, the
 * SKILLS capability's directory, which is installed from its bundles, not
 * restored) runs in the sandbox with stdout streamed (stream_pipe.c) into
 * libarchive, which checks every entry like an export (regular files and
 * directories only, relative clean names, limits) and writes it into a
 * temporary file beside the target, compressed when asked; only a
 * complete, closed and synced archive is renamed over the target.
 *
 * Restore: the file is read twice. The first pass checks every entry and
 * nothing is touched; then the workspace's entries (but `skills`) are
 * removed and the second pass streams the archive, checked again and
 * rewritten as a plain tar, into `tar -x` in the sandbox.
 */
#include "archive_check.h"
#include "archive_lazy.h"
#include "exec_quiet.h"
#include "hex.h"
#include "stream_pipe.h"

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
    "  [ \"$f\" = skills ] && continue\n"
    "  set -- \"$@\" \"$f\"\n"
    "done\n"
    "[ $# -eq 0 ] && exit 0\n"
    "exec tar -cf - -- \"$@\"\n";

static const char clear_script[] =
    "for f in * .[!.]* ..?*; do\n"
    "  { [ -e \"$f\" ] || [ -L \"$f\" ]; } || continue\n"
    "  [ \"$f\" = skills ] && continue\n"
    "  rm -rf -- \"$f\" || exit 1\n"
    "done\n";

/* ---- commands in the sandbox ------------------------------------------- */

/* Run sh -c script in the workspace root with stdout into out (or
 * discarded) and stdin from in (or empty); SBX_OK only on exit 0. */
static int run_script(sbx_handle *h, const char *what, const char *script,
                      const struct sbx_sink *out, const struct sbx_source *in,
                      sbx_cancel *cancel, sbx_error *err)
{
    const char *argv[] = {"sh", "-c", script, NULL};
    char detail[600];
    int rc = sbx_exec_quiet(h, argv, out, in, cancel, detail, sizeof detail);
    return rc == SBX_OK ? SBX_OK
                        : sbx_error_set(err, rc, "%s in the sandbox failed: %s", what,
                                        detail);
}

/* ---- copying checked entries from a reader to a writer ---------------- */

/* A source that remembers whether it delivered any byte: an empty stream
 * is an empty archive. */
struct counted {
    const struct sbx_source *src;
    uint64_t bytes;
    unsigned char buf[256 * 1024];
};

static la_ssize_t counted_read(struct archive *a, void *ud, const void **out)
{
    (void)a;
    struct counted *c = ud;
    long n = c->src->read(c->src->ctx, c->buf, sizeof c->buf);
    if (n < 0)
        return -1;
    c->bytes += (uint64_t)n;
    *out = c->buf;
    return n;
}

/*
 * Read the archive from r (opened) and, when w is not NULL, write every
 * entry to it; each entry is checked. An archive whose stream was empty is
 * fine (*empty). Messages name the entry.
 */
static int copy_entries(struct archive *r, struct archive *w, struct sbxs_error *xerr)
{
    sbxs_archive_check *chk = NULL;
    int rc = sbxs_archive_check_new(NULL, &chk, xerr);
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
        if (w) {
            archive_entry_clear(out);
            archive_entry_set_pathname_utf8(out, name);
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
    return run_script(p->h, "tar", save_script, sink, NULL, p->cancel, err);
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
    int rc = sbx_stream_pipe_start(&pipe, produce_tar, &sp, err);
    if (rc != SBX_OK)
        return rc;
    struct sbx_source src = sbx_stream_pipe_source(&pipe);
    struct counted cnt = {.src = &src};
    struct archive *r = archive_read_new();
    struct sbxs_error xerr;
    sbxs_error_clear(&xerr);
    int xrc = SBX_OK;
    if (!r || archive_read_support_format_tar(r) != ARCHIVE_OK ||
        archive_read_open(r, &cnt, NULL, counted_read, NULL) != ARCHIVE_OK) {
        /* an empty stream cannot even be opened as tar: no entries */
        if (!r || cnt.bytes != 0)
            xrc = sbxs_error_set(&xerr, SBX_E_INVALID, "not a tar stream: %s",
                                 r ? archive_error_string(r) : "out of memory");
    } else {
        xrc = copy_entries(r, w, &xerr);
    }
    if (xrc == SBX_OK)
        sbx_stream_pipe_drain(&pipe);
    else
        sbx_stream_pipe_abort(&pipe);
    sbx_stream_pipe_join(&pipe);
    if (r)
        archive_read_free(r);
    if (pipe.status != SBX_OK && !pipe.sink_failed)
        return sbx_error_set(err, pipe.status, "snapshot: %s", pipe.err.message);
    if (xrc != SBX_OK)
        return sbx_error_set(err, xrc, "snapshot refused: %s", xerr.message);
    if (pipe.status != SBX_OK)
        return sbx_error_set(err, pipe.status, "snapshot: %s", pipe.err.message);
    return SBX_OK;
}

SBX_API int sbx_snapshot_save(sbx_handle *h, const char *file, const char *compression,
                              sbx_cancel *cancel, sbx_error *err)
{
    sbx_error_clear(err);
    int rc = sbx_archive_load(err);
    if (rc != SBX_OK)
        return rc;
    if (!h || !file || !*file)
        return sbx_error_set(err, SBX_E_INVALID, "snapshot needs a sandbox and a file");
    char *dir = NULL;
    const char *base = NULL;
    if ((rc = split_path(file, &dir, &base, err)) != SBX_OK)
        return rc;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    char tmp[300], hex[17];
    snprintf(tmp, sizeof tmp, ".%.200s.sbx-snapshot-%s", base, sbxs_random_hex(hex, 8));
    int fd = dfd >= 0 ? openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)
                      : -1;
    if (fd < 0) {
        rc = sbx_error_set(err, errno == ENOENT ? SBX_E_NOT_FOUND : SBX_E_IO,
                           "snapshot file \"%s\": cannot create a file in %s: %s", file,
                           dir, strerror(errno));
        if (dfd >= 0)
            close(dfd);
        free(dir);
        return rc;
    }
    struct archive *w = archive_write_new();
    if (!w)
        rc = sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    else if (archive_write_set_format_pax_restricted(w) != ARCHIVE_OK)
        rc = sbx_error_set(err, SBX_E_INTERNAL, "snapshot: %s", archive_error_string(w));
    if (rc == SBX_OK)
        rc = add_filter(w, compression, err);
    if (rc == SBX_OK && (archive_write_set_bytes_per_block(w, WRITE_BLOCK) != ARCHIVE_OK ||
                         archive_write_set_bytes_in_last_block(w, 1) != ARCHIVE_OK ||
                         archive_write_open_fd(w, fd) != ARCHIVE_OK))
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
    close(fd);
    if (rc == SBX_OK && renameat(dfd, tmp, dfd, base) != 0)
        rc = sbx_error_set(err, SBX_E_IO, "snapshot: publishing %s: %s", file,
                           strerror(errno));
    if (rc != SBX_OK)
        unlinkat(dfd, tmp, 0);
    else
        fsync(dfd);
    close(dfd);
    free(dir);
    return rc;
}

/* ---- restore ------------------------------------------------------------ */

struct file_source {
    int fd;
};

static long fd_read(void *ctx, void *buf, size_t cap)
{
    struct file_source *f = ctx;
    for (;;) {
        ssize_t n = read(f->fd, buf, cap);
        if (n >= 0 || errno != EINTR)
            return n;
    }
}

/* Open the snapshot (any of tar, tar.gz, tar.zst) for reading from fd's
 * start. */
static struct archive *open_snapshot(struct file_source *fs, struct counted *cnt)
{
    if (lseek(fs->fd, 0, SEEK_SET) != 0)
        return NULL;
    struct archive *r = archive_read_new();
    if (!r)
        return NULL;
    if (archive_read_support_filter_all(r) != ARCHIVE_OK ||
        archive_read_support_format_tar(r) != ARCHIVE_OK ||
        archive_read_open(r, cnt, NULL, counted_read, NULL) != ARCHIVE_OK) {
        archive_read_free(r);
        return NULL;
    }
    return r;
}

struct restore_producer {
    int fd;
    struct sbxs_error xerr;
    int xrc;
};

/* The checked snapshot, rewritten as a plain tar, into sink. */
static la_ssize_t sink_write(struct archive *a, void *ud, const void *buf, size_t n)
{
    (void)a;
    const struct sbx_sink *sink = ud;
    return sink->write(sink->ctx, buf, n) == 0 ? (la_ssize_t)n : -1;
}

static int produce_plain(void *ud, const struct sbx_sink *sink, sbx_error *err)
{
    struct restore_producer *p = ud;
    struct file_source fs = {p->fd};
    struct sbx_source src = SBX_SOURCE_INIT(&fs, fd_read);
    struct counted cnt = {.src = &src};
    struct archive *r = open_snapshot(&fs, &cnt);
    struct archive *w = archive_write_new();
    sbxs_error_clear(&p->xerr);
    if (!r || !w || archive_write_set_format_pax_restricted(w) != ARCHIVE_OK ||
        archive_write_set_bytes_per_block(w, WRITE_BLOCK) != ARCHIVE_OK ||
        /* no padding past the end-of-archive blocks: tar -x may stop
         * reading there */
        archive_write_set_bytes_in_last_block(w, 1) != ARCHIVE_OK ||
        archive_write_open(w, (void *)sink, NULL, sink_write, NULL) != ARCHIVE_OK)
        p->xrc = sbxs_error_set(&p->xerr, SBX_E_IO, "cannot reopen the snapshot");
    else
        p->xrc = copy_entries(r, w, &p->xerr);
    if (p->xrc == SBX_OK && archive_write_close(w) != ARCHIVE_OK)
        p->xrc = sbxs_error_set(&p->xerr, SBX_E_IO, "the stream to the sandbox broke");
    if (w)
        archive_write_free(w);
    if (r)
        archive_read_free(r);
    return p->xrc == SBX_OK ? SBX_OK
                            : sbx_error_set(err, p->xrc, "%s", p->xerr.message);
}

SBX_API int sbx_snapshot_restore(sbx_handle *h, const char *file, sbx_cancel *cancel,
                                 sbx_error *err)
{
    sbx_error_clear(err);
    int rc = sbx_archive_load(err);
    if (rc != SBX_OK)
        return rc;
    if (!h || !file)
        return sbx_error_set(err, SBX_E_INVALID, "restore needs a sandbox and a file");
    struct file_source fs = {open(file, O_RDONLY | O_CLOEXEC)};
    struct stat st;
    if (fs.fd < 0 || fstat(fs.fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        rc = sbx_error_set(err, fs.fd < 0 && errno == ENOENT ? SBX_E_NOT_FOUND : SBX_E_IO,
                           "snapshot file \"%s\": %s", file,
                           fs.fd < 0 ? strerror(errno) : "not a regular file");
        if (fs.fd >= 0)
            close(fs.fd);
        return rc;
    }
    /* Pass 1: every entry checked before anything changes. */
    struct sbx_source src = SBX_SOURCE_INIT(&fs, fd_read);
    struct counted cnt = {.src = &src};
    struct archive *r = open_snapshot(&fs, &cnt);
    struct sbxs_error xerr;
    sbxs_error_clear(&xerr);
    int xrc = r ? copy_entries(r, NULL, &xerr)
                : (cnt.bytes == 0 && st.st_size == 0
                       ? SBX_OK
                       : sbxs_error_set(&xerr, SBX_E_INVALID,
                                        "not a tar, tar.gz or tar.zst archive"));
    if (r)
        archive_read_free(r);
    if (xrc != SBX_OK) {
        close(fs.fd);
        return sbx_error_set(err, xrc, "snapshot \"%s\" refused: %s", file, xerr.message);
    }
    /* Pass 2: a fresh workspace, then the checked stream into tar -x. */
    rc = run_script(h, "clearing the workspace", clear_script, NULL, NULL, cancel, err);
    if (rc == SBX_OK && st.st_size > 0) {
        struct restore_producer rp = {.fd = fs.fd, .xrc = SBX_OK};
        struct sbx_stream_pipe pipe;
        rc = sbx_stream_pipe_start(&pipe, produce_plain, &rp, err);
        if (rc == SBX_OK) {
            struct sbx_source in = sbx_stream_pipe_source(&pipe);
            rc = run_script(h, "tar -x", "exec tar -xof -", NULL, &in, cancel, err);
            /* Whatever tar left unread, nobody reads now: a producer still
             * writing must fail, not wait for ever. */
            sbx_stream_pipe_abort(&pipe);
            sbx_stream_pipe_join(&pipe);
            if (rp.xrc != SBX_OK)
                rc = sbx_error_set(err, rp.xrc, "snapshot \"%s\" refused: %s", file,
                                   rp.xerr.message);
            else if (rc == SBX_OK && pipe.status != SBX_OK)
                rc = sbx_error_set(err, pipe.status, "restore: %s", pipe.err.message);
        }
    }
    close(fs.fd);
    return rc;
}
