/*
 * archive_check.h - validating archives that come out of a sandbox (output
 * exports, skill bundles, snapshots) before anything of them reaches the
 * host's filesystem.
 *
 * Every entry must be a regular file or a directory with a relative name
 * free of "..", control characters and duplicates, and valid UTF-8 unless
 * the caller accepts any bytes (snapshots: a workspace's names are bytes); symlinks,
 * hardlinks, devices, FIFOs and sockets are refused, as are files over the
 * per-file limit and archives over the total or entry-count limits. Sizes
 * are checked against the declared size (so a sparse file that would
 * expand past the limit is refused before any data is read) and against
 * the bytes actually delivered.
 *
 * Shared by libsbx (exports) and the providers that unpack archives
 * themselves (skill bundles), so both apply the very same rules. It calls
 * libarchive's reading API: libsbx links its lazily loading forwarders
 * (call sbxh_archive_load first), a provider links libarchive itself.
 */
#ifndef SBXS_ARCHIVE_CHECK_H
#define SBXS_ARCHIVE_CHECK_H

#include "error.h"

#include <sbx/provider.h>

#include <stddef.h>
#include <stdint.h>

struct archive_entry;

/* Limits; zero members take the defaults below. */
struct sbxs_archive_limits {
    uint64_t max_file_bytes;  /* one regular file */
    uint64_t max_total_bytes; /* all regular files together */
    uint64_t max_entries;     /* files and directories */
};

#define SBXS_ARCHIVE_DEFAULT_MAX_FILE (UINT64_C(1) << 30)   /* 1 GiB */
#define SBXS_ARCHIVE_DEFAULT_MAX_TOTAL (UINT64_C(4) << 30)  /* 4 GiB */
#define SBXS_ARCHIVE_DEFAULT_MAX_ENTRIES UINT64_C(100000)
/* Deepest nesting of an entry name (components), whatever the limits:
 * bounds the cost of every entry, so checking and extraction stay linear
 * in the archive's size. */
#define SBXS_ARCHIVE_MAX_DEPTH 256
#define SBXS_ARCHIVE_MAX_DEPTH_TEXT "256"

/* The state of one archive's validation: totals and the names seen. */
typedef struct sbxs_archive_check sbxs_archive_check;

/* Start validating an archive. limits may be NULL (defaults). Returns
 * SBX_OK or SBX_E_NOMEM. Free with sbxs_archive_check_free. */
int sbxs_archive_check_new(const struct sbxs_archive_limits *limits,
                          sbxs_archive_check **out, struct sbxs_error *err);

/* Accept names that are not UTF-8 from now on (snapshots: a workspace's
 * names are bytes). Control characters, backslashes, absolute names and
 * ".." stay refused. */
void sbxs_archive_check_any_bytes(sbxs_archive_check *c);

/* Free the state. NULL is ignored. */
void sbxs_archive_check_free(sbxs_archive_check *c);

/*
 * Validate the next entry's header. Names are taken as libarchive's raw
 * bytes (archive_entry_pathname; its UTF-8 form only when the raw form is
 * missing); an entry whose name or link target no getter returns is
 * refused, never dereferenced. On SBX_OK, name (cap bytes) receives
 * the normalized relative name ("a/b", no trailing slash; "" for the
 * archive's root directory, which callers skip) and *is_dir whether it is a
 * directory. Otherwise SBX_E_INVALID with a message naming the entry and
 * the rule it broke.
 */
int sbxs_archive_check_entry(sbxs_archive_check *c, struct archive_entry *e, char *name,
                            size_t cap, int *is_dir, struct sbxs_error *err);

/* Account n data bytes actually read for the current file entry; refuses
 * (SBX_E_INVALID) bytes beyond the declared size or the limits. */
int sbxs_archive_check_data(sbxs_archive_check *c, uint64_t n, struct sbxs_error *err);

/*
 * Read a whole archive from src and extract it, validated, below the
 * directory dest_fd (normally an empty staging directory; the caller
 * publishes it atomically by renaming it, or removes it on failure).
 * format: "tar", "tar.gz", "zip", or NULL to accept any of them.
 * Extraction never follows a symlink, never replaces an existing entry and
 * opens everything O_CLOEXEC; files get mode 0644 (0755 when any execute bit
 * was set), directories 0755. On failure part of the archive may have been
 * extracted into dest_fd and nothing outside it.
 */
int sbxs_archive_extract(const struct sbx_source *src, const char *format,
                                int dest_fd, const struct sbxs_archive_limits *limits,
                                struct sbxs_error *err);

#endif /* SBXS_ARCHIVE_CHECK_H */
