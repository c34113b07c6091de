/*
 * snapshot_restore.c - sbx_snapshot_restore: the workspace replaced by a
 * snapshot, all or nothing.
 *
 * The caller's file is read once, from one open descriptor: each entry is
 * checked as it is read (like an export; names may be any bytes; nothing
 * under skills/ or with a staging name) and written, rewritten as a plain
 * tar, into `tar -x` in a staging directory of the workspace root
 * (snapshot_stage.c). What tar gets is only ever what was checked: there is
 * no second read a change of the file between passes could slip through.
 * Only after the last entry was checked and tar exited 0 is the staged tree
 * swapped in; any failure before (a refused entry, a truncated archive, a
 * failing tar, a cancel) drops the stage and the workspace was never
 * touched. A restore killed half-way is rolled back by the next restore or
 * snapshot of the workspace.
 */
#include "archive_check.h"
#include "base/archive_lazy.h"
#include "api/snapshot_internal.h"
#include "base/cancel.h"
#include "api/stream_pipe.h"

#include <sbx/sbx.h>

#include <archive.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

struct restore_producer {
    int fd;
    uint64_t size;      /* of the file, for progress */
    sbx_cancel *cancel; /* whose progress callback gets the bytes read */
    struct sbxs_error xerr;
    int xrc;
};

static la_ssize_t sink_write(struct archive *a, void *ud, const void *buf, size_t n)
{
    (void)a;
    const struct sbx_sink *sink = ud;
    return sink->write(sink->ctx, buf, n) == 0 ? (la_ssize_t)n : -1;
}

/* The snapshot (tar, tar.gz or tar.zst), checked entry by entry, rewritten
 * as a plain tar into sink. */
static int produce_plain(void *ud, const struct sbx_sink *sink, sbx_error *err)
{
    struct restore_producer *p = ud;
    struct file_source fs = {p->fd};
    struct sbx_source src = SBX_SOURCE_INIT(&fs, fd_read);
    struct sbx_snapshot_counted *cnt = calloc(1, sizeof *cnt);
    struct archive *r = cnt ? archive_read_new() : NULL;
    struct archive *w = r ? archive_write_new() : NULL;
    sbxs_error_clear(&p->xerr);
    if (cnt) {
        cnt->src = &src;
        cnt->progress = p->cancel;
        cnt->what = "restore";
        cnt->total = p->size;
    }
    if (!w) {
        p->xrc = sbxs_error_set(&p->xerr, SBX_E_NOMEM, "out of memory");
    } else if (archive_read_support_filter_all(r) != ARCHIVE_OK ||
               archive_read_support_format_tar(r) != ARCHIVE_OK ||
               archive_read_open(r, cnt, NULL, sbxh_snapshot_counted_read, NULL) !=
                   ARCHIVE_OK) {
        p->xrc = sbxs_error_set(&p->xerr, SBX_E_INVALID,
                                "not a tar, tar.gz or tar.zst archive");
    } else if (sbxh_snapshot_writer_setup(w) != ARCHIVE_OK ||
               archive_write_open(w, (void *)sink, NULL, sink_write, NULL) != ARCHIVE_OK) {
        p->xrc = sbxs_error_set(&p->xerr, SBX_E_IO, "cannot start the stream: %s",
                                archive_error_string(w));
    } else {
        p->xrc = sbxh_snapshot_copy_entries(r, w, true, &p->xerr);
        if (p->xrc == SBX_OK && archive_write_close(w) != ARCHIVE_OK)
            p->xrc = sbxs_error_set(&p->xerr, SBX_E_IO, "the stream to the sandbox broke");
        if (p->xrc == SBX_OK)
            sbxh_snapshot_counted_done(cnt);
    }
    if (w)
        archive_write_free(w);
    if (r)
        archive_read_free(r);
    free(cnt);
    return p->xrc == SBX_OK ? SBX_OK : sbx_error_set(err, p->xrc, "%s", p->xerr.message);
}

/* Extract the checked stream into stage/new: SBX_OK only when every entry
 * was checked and tar exited 0. */
static int extract(sbx_handle *h, int fd, uint64_t size, const char *file,
                   const char *stage, sbx_cancel *cancel, sbx_error *err)
{
    struct restore_producer rp = {.fd = fd, .size = size, .cancel = cancel, .xrc = SBX_OK};
    struct sbx_stream_pipe pipe;
    int rc = sbxh_stream_pipe_start(&pipe, produce_plain, &rp, err);
    if (rc != SBX_OK)
        return rc;
    struct sbx_source in = sbxh_stream_pipe_source(&pipe);
    rc = sbxh_snapshot_script(h, "tar -x", "cd -- \"$1/new\" && exec tar -xof -", stage,
                              NULL, NULL, &in, cancel, err);
    /* Whatever tar left unread, nobody reads now: a producer still writing
     * must fail, not wait for ever. */
    sbxh_stream_pipe_abort(&pipe);
    sbxh_stream_pipe_join(&pipe);
    if (rp.xrc != SBX_OK)
        return sbx_error_set(err, rp.xrc, "snapshot \"%s\" refused: %s", file,
                             rp.xerr.message);
    if (rc == SBX_OK && pipe.status != SBX_OK)
        return sbx_error_set(err, pipe.status, "restore: %s", pipe.err.message);
    return rc;
}

SBX_API int sbx_snapshot_restore(sbx_handle *h, const char *file, sbx_cancel *cancel,
                                 sbx_error *err)
{
    sbx_error_clear(err);
    int rc = sbxh_archive_load(err);
    if (rc != SBX_OK)
        return rc;
    if (!h || !file)
        return sbx_error_set(err, SBX_E_INVALID, "restore needs a sandbox and a file");
    /* O_NONBLOCK: a FIFO in place of the file must not block the open */
    int fd = open(file, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
        fcntl(fd, F_SETFL, 0) != 0) {
        rc = sbx_error_set(err, fd < 0 && errno == ENOENT ? SBX_E_NOT_FOUND : SBX_E_IO,
                           "snapshot file \"%s\": %s", file,
                           fd < 0 ? strerror(errno) : "not a regular file");
        if (fd >= 0)
            close(fd);
        return rc;
    }
    char stage[128];
    sbxh_snapshot_stage_name(stage, sizeof stage);
    rc = sbxh_snapshot_recover(h, stage, cancel, err);
    if (rc != SBX_OK) {
        close(fd);
        /* the stage may have been made: it holds nothing yet */
        sbx_error ignored;
        sbxh_snapshot_stage_rollback(h, stage, NULL, &ignored);
        return rc;
    }
    /* An empty file is an empty archive: nothing to extract. */
    if (st.st_size > 0)
        rc = extract(h, fd, (uint64_t)st.st_size, file, stage, cancel, err);
    close(fd);
    if (rc == SBX_OK && sbxh_snapshot_crash_requested("restore-before-swap"))
        raise(SIGKILL);
    if (rc == SBX_OK)
        return sbxh_snapshot_stage_swap(h, stage, cancel, err);
    /* Nothing in the workspace changed: only the stage goes (even when the
     * call was cancelled). */
    sbx_error rerr, first = *err;
    if (sbxh_snapshot_stage_rollback(h, stage, NULL, &rerr) != SBX_OK)
        sbx_error_set(err, rc, "%s (the staging directory %s stays until the next restore: "
                               "%s)",
                      first.message, stage, rerr.message);
    return rc;
}
