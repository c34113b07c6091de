/*
 * snapshot_internal.h - what snapshot.c (save, the checked copy of entries)
 * and snapshot_restore.c / snapshot_stage.c (restore through a staging
 * directory) share (internal to libsbx).
 */
#ifndef SBX_HOST_SNAPSHOT_INTERNAL_H
#define SBX_HOST_SNAPSHOT_INTERNAL_H

#include "error.h"

#include <sbx/sbx.h>

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct archive;

/* The prefix of a restore's staging directory in the workspace root
 * (snapshot_stage.c): never saved, refused in a snapshot, never a
 * workspace's own. */
#define SBX_SNAPSHOT_STAGE_PREFIX ".sbx-restore."

/* A source that remembers whether it delivered any byte: an empty stream
 * is an empty archive. */
struct sbx_snapshot_counted {
    const struct sbx_source *src;
    uint64_t bytes;
    /* progress: reported to this token's callback every MiB, as `what`
     * with `total` bytes (0: unknown); NULL for none */
    sbx_cancel *progress;
    const char *what;
    uint64_t total, reported;
    unsigned char buf[256 * 1024];
};

/* The last progress report of a counted read (finished). */
void sbxh_snapshot_counted_done(struct sbx_snapshot_counted *c);

/* libarchive's read callback over a struct sbx_snapshot_counted. */
ssize_t sbxh_snapshot_counted_read(struct archive *a, void *ud, const void **out);

/* Set w up as a snapshot writer: pax, names as raw bytes (hdrcharset=
 * BINARY: a workspace's names are bytes, whatever the locale), large
 * blocks, no padding past the end-of-archive blocks. Returns an ARCHIVE_*
 * code. */
int sbxh_snapshot_writer_setup(struct archive *w);

/*
 * Read the archive from r (opened) and, when w is not NULL, write every
 * entry to it; each entry is checked (names may be any bytes; for_restore
 * also refuses entries under skills/ and the staging prefix). Messages
 * name the entry.
 */
int sbxh_snapshot_copy_entries(struct archive *r, struct archive *w, bool for_restore,
                               struct sbxs_error *xerr);

/* ---- staging (snapshot_stage.c) ---- */

/* Run `sh -c script sh [arg1 [arg2]]` in the workspace root with stdout
 * into out (or discarded) and stdin from in (or empty); SBX_OK only on
 * exit 0, else an error naming what. */
int sbxh_snapshot_script(sbx_handle *h, const char *what, const char *script,
                         const char *arg1, const char *arg2, const struct sbx_sink *out,
                         const struct sbx_source *in, sbx_cancel *cancel, sbx_error *err);

/* Roll back every restore an ended process left in the workspace (its
 * staging directory: the workspace as it was is put back, the staged tree
 * dropped). SBX_E_EXISTS while another live restore (or one whose process
 * this host cannot judge) is swapping its tree in. With make, the staging
 * directory make (sbxh_snapshot_stage_name) is created too, with its new/
 * and old/ inside. */
int sbxh_snapshot_recover(sbx_handle *h, const char *make, sbx_cancel *cancel,
                          sbx_error *err);

/* A fresh staging directory name for this process (cap >= 96). */
void sbxh_snapshot_stage_name(char *out, size_t cap);

/* Swap the staged tree (stage/new) in: the workspace's entries (but
 * skills) move to stage/old, the staged ones up, then the stage goes. On
 * failure everything is moved back (or left for sbxh_snapshot_recover when
 * even that fails). */
int sbxh_snapshot_stage_swap(sbx_handle *h, const char *stage, sbx_cancel *cancel,
                             sbx_error *err);

/* Undo what a restore did with stage (nothing changed in the workspace
 * before the swap: then the stage is only removed). */
int sbxh_snapshot_stage_rollback(sbx_handle *h, const char *stage, sbx_cancel *cancel,
                                 sbx_error *err);

/* Test builds (SBX_TEST_HOOKS): whether SBX_TEST_CRASH_AT names step. */
bool sbxh_snapshot_crash_requested(const char *step);

#endif
