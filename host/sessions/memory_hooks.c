/*
 * memory_hooks.c - memory stores attached to sessions (docs/MEMORY.md):
 * the mount shows the store's heads before a command, and what a command
 * changed in a read-write attachment is committed after it, with a
 * precondition on every path.
 *
 * Steps around each command (the handle's exec hooks):
 *  - before: with the session's memory lock held exclusively (no other
 *    command of the session runs, on this machine), unclean attachments
 *    are written back first, then a clean attachment whose store moved is
 *    reloaded with the heads, and every read-write one is marked dirty in
 *    the store (durable: a crash from here on is repaired by the next
 *    step, `sbx reconcile` or deletion). The lock is then held shared for
 *    the command. A command that starts while another runs takes it
 *    shared without refreshing: a mount never changes under a command.
 *  - after: the shared hold is dropped; whoever then gets it exclusively
 *    is the last command and writes back.
 * Writeback: the provider reports what changed since the baseline (an
 * archive of new and changed entries and a list of removed files); every
 * entry is checked (regular files only, valid path, within the store's
 * limits: else refused by name, nothing committed); each change is based
 * on the path's version at the baseline, and one whose content already
 * equals the head is dropped (so a writeback repeated after a crash
 * between commit and acceptance commits nothing twice). A conflict leaves
 * the attachment in CONFLICT with the changes in the mount.
 *
 * The lock is the store's session lock of kind MEMORY (store.h): with
 * SQLite an open file description lock beside the database, with
 * PostgreSQL an advisory lock on a connection of its own, so commands of
 * one session run by workers on different machines take turns the same
 * way. The kernel or the server releases it when its holder dies, so a
 * crash never leaves a session locked.
 */
#include "sessions/memory_hooks.h"
#include "base/cancel.h"

#include "base/archive_lazy.h"
#include "api/handle_hooks.h"
#include "store/memory_trees.h"
#include "sessions/internal.h"
#include "api/stream_pipe.h"
#include "base/text_escape.h"

#include "archive_pax.h"
#include "hex.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The author of a session's commits: "session:" and the key's label. */
#define SPOOL_CHUNK (64 * 1024)
#define AUTHOR_PREFIX "session:"

struct memory_ctx {
    sbx_sessions *m;
    char *key;
    pthread_mutex_t lock;        /* guards held */
    struct sbx_store_lock **held; /* by token: the locks of running commands */
    size_t nheld;
};

/* ---- the session's memory lock ------------------------------------------ */

static int lock_open(sbx_sessions *m, const char *key, struct sbx_store_lock **l,
                     sbx_error *err)
{
    return sbxh_store_lock_open(m->store, key, SBX_STORE_LOCK_MEMORY, l, err);
}

/* Hold the lock in mode, waiting (while others' commands or a writeback
 * run) in short sleeps so that cancel is honoured. */
static int lock_wait(struct sbx_store_lock *l, int mode, sbx_cancel *cancel, sbx_error *err)
{
    for (int64_t ms = 5;; ms = ms < 200 ? ms * 2 : 200) {
        bool got;
        int rc = sbxh_store_lock_try(l, mode, &got, err);
        if (rc != SBX_OK || got)
            return rc;
        if ((rc = sbxh_session_sleep(ms, cancel, err)) != SBX_OK)
            return rc;
    }
}

/* A command's lock under a token for after_exec. */
static int lock_keep(struct memory_ctx *mc, struct sbx_store_lock *l, int *token,
                     sbx_error *err)
{
    pthread_mutex_lock(&mc->lock);
    size_t i = 0;
    while (i < mc->nheld && mc->held[i])
        i++;
    if (i == mc->nheld) {
        struct sbx_store_lock **g = realloc(mc->held, (mc->nheld + 1) * sizeof *g);
        if (!g || mc->nheld >= INT_MAX) {
            if (g)
                mc->held = g;
            pthread_mutex_unlock(&mc->lock);
            return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
        }
        mc->held = g;
        mc->nheld++;
    }
    mc->held[i] = l;
    pthread_mutex_unlock(&mc->lock);
    *token = (int)i;
    return SBX_OK;
}

static struct sbx_store_lock *lock_take(struct memory_ctx *mc, int token)
{
    struct sbx_store_lock *l = NULL;
    pthread_mutex_lock(&mc->lock);
    if (token >= 0 && (size_t)token < mc->nheld) {
        l = mc->held[token];
        mc->held[token] = NULL;
    }
    pthread_mutex_unlock(&mc->lock);
    return l;
}

/* ---- loading the heads into a mount ------------------------------------- */

struct head_list {
    char **paths;
    size_t n, cap;
};

static int collect_head(void *ud, const struct sbx_mstore_file *f, sbx_error *err)
{
    struct head_list *l = ud;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        char **g = realloc(l->paths, cap * sizeof *g);
        if (!g)
            return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
        l->paths = g;
        l->cap = cap;
    }
    if (!(l->paths[l->n] = strdup(f->path)))
        return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    l->n++;
    return SBX_OK;
}

struct heads_tar {
    sbx_sessions *m;
    const char *slug;
    int64_t version;
    struct head_list *list;
    struct sbxh_meter *meter; /* progress of the load */
};

/* Loads and write-backs smaller than this report no progress. */
#define MEMORY_PROGRESS_THRESHOLD (1024 * 1024)

/* One file's content, spooled through a growing buffer: at most one file
 * (bounded by the store's per-file limit) is held at a time. */
struct buf {
    char *data;
    size_t len, cap;
};

static int buf_write(void *ctx, const void *data, size_t len)
{
    struct buf *b = ctx;
    if (b->len + len > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + len)
            cap *= 2;
        char *g = realloc(b->data, cap);
        if (!g)
            return SBX_E_NOMEM;
        b->data = g;
        b->cap = cap;
    }
    memcpy(b->data + b->len, data, len);
    b->len += len;
    return SBX_OK;
}

struct sink_out {
    const struct sbx_sink *sink;
    struct sbxh_meter *meter; /* or NULL */
};

static la_ssize_t sink_write(struct archive *a, void *ud, const void *data, size_t len)
{
    (void)a;
    const struct sbx_sink *s = ((struct sink_out *)ud)->sink;
    if (s->write(s->ctx, data, len) != SBX_OK)
        return -1; /* the reader went away */
    if (((struct sink_out *)ud)->meter)
        sbxh_meter_add(((struct sink_out *)ud)->meter, len);
    return (la_ssize_t)len;
}

/* The producer of a load: the heads at a version as a tar archive. */
static int produce_heads(void *ud, const struct sbx_sink *sink, sbx_error *err)
{
    struct heads_tar *h = ud;
    struct sink_out so = {sink, h->meter};
    struct archive *a = archive_write_new();
    if (!a || sbxs_archive_write_pax_bytes(a) != ARCHIVE_OK ||
        archive_write_open(a, &so, NULL, sink_write, NULL) != ARCHIVE_OK) {
        if (a)
            archive_write_free(a);
        return sbx_error_set(err, SBX_E_NOMEM, "memory: cannot start an archive");
    }
    struct archive_entry *e = archive_entry_new();
    struct buf b = {0};
    int rc = e ? SBX_OK : sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    for (size_t i = 0; rc == SBX_OK && i < h->list->n; i++) {
        b.len = 0;
        struct sbx_sink bs = SBX_SINK_INIT(&b, buf_write);
        rc = sbxh_mstore_read(h->m->store, h->slug, h->list->paths[i], h->version, &bs, NULL,
                              err);
        if (rc != SBX_OK)
            break;
        archive_entry_clear(e);
        archive_entry_copy_pathname(e, h->list->paths[i]); /* UTF-8, as bytes */
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_perm(e, 0644);
        archive_entry_set_size(e, (la_int64_t)b.len);
        archive_entry_set_mtime(e, time(NULL), 0);
        if (archive_write_header(a, e) != ARCHIVE_OK ||
            (b.len && archive_write_data(a, b.data, b.len) != (la_ssize_t)b.len))
            rc = sbx_error_set(err, SBX_E_IO, "memory: writing the archive: %s",
                               archive_error_string(a));
    }
    if (rc == SBX_OK && archive_write_close(a) != ARCHIVE_OK)
        rc = sbx_error_set(err, SBX_E_IO, "memory: finishing the archive: %s",
                           archive_error_string(a));
    archive_entry_free(e);
    archive_write_free(a);
    free(b.data);
    return rc;
}

/* Make the mount hold the store's heads now; the new baseline in *at. */
static int load_heads(sbx_sessions *m, sbx_handle *h, const char *slug, int64_t *at,
                      sbx_cancel *cancel, sbx_error *err)
{
    struct sbx_mstore_info info;
    int rc = sbxh_mstore_info(m->store, slug, &info, err);
    if (rc != SBX_OK)
        return rc;
    struct head_list list = {0};
    if (info.version > 0)
        rc = sbxh_mstore_heads(m->store, slug, info.version, collect_head, &list, err);
    struct sbxh_meter meter = {.cancel = cancel, .total = (uint64_t)info.bytes,
                               .threshold = MEMORY_PROGRESS_THRESHOLD};
    snprintf(meter.what, sizeof meter.what, "loading memory %s", slug);
    struct heads_tar ht = {m, slug, info.version, &list, &meter};
    struct sbx_stream_pipe pipe;
    if (rc == SBX_OK && (rc = sbxh_archive_load(err)) == SBX_OK &&
        (rc = sbxh_stream_pipe_start(&pipe, produce_heads, &ht, err)) == SBX_OK) {
        struct sbx_source src = sbxh_stream_pipe_source(&pipe);
        rc = sbxh_handle_memory_load(h, slug, &src, cancel, err);
        if (rc == SBX_OK) {
            sbxh_stream_pipe_drain(&pipe);
            sbxh_meter_end(&meter);
        }
        else
            sbxh_stream_pipe_abort(&pipe);
        sbxh_stream_pipe_join(&pipe);
        if (rc == SBX_OK && pipe.status != SBX_OK) {
            rc = pipe.status;
            *err = pipe.err;
        }
    }
    for (size_t i = 0; i < list.n; i++)
        free(list.paths[i]);
    free(list.paths);
    if (rc == SBX_OK)
        *at = info.version;
    return rc;
}

/* ---- writeback ---------------------------------------------------------- */

struct change {
    char *path;
    bool remove;
    char sha[65];
    int64_t size;
    char *spool; /* file holding the content */
};

struct wb {
    sbx_sessions *m;
    const char *slug;
    struct change *v;
    size_t n, cap;
    char spool_dir[256];
    int spool_fd; /* the diff's archive */
    int64_t spool_left; /* bytes the spool may still take (spool_bound) */
    bool spool_full;    /* the diff passed that: refused */
    struct buf content;
    int64_t files_seen, bytes_seen; /* changed files read so far */
    char *chunk; /* SPOOL_CHUNK bytes: what libarchive reads the spool into */
    struct sbxh_meter meter; /* progress of reading the changes */
};

static struct change *add_change(struct wb *w)
{
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 16;
        struct change *g = realloc(w->v, cap * sizeof *g);
        if (!g)
            return NULL;
        w->v = g;
        w->cap = cap;
    }
    struct change *c = &w->v[w->n++];
    memset(c, 0, sizeof *c);
    return c;
}

/* Tar overhead allowed per entry of a diff: a header block, a pax header
 * (a path and a link target of up to 4 KiB each, times), padding. */
#define SPOOL_ENTRY_OVERHEAD (16 * 1024)

/* The most a diff within the store's limits can take: its files' bytes
 * plus each one's tar overhead (and a few entries of slack for the end).
 * The sandbox controls what a diff holds (a sparse file of any size costs
 * it nothing), so the spool stops there instead of filling the disk. */
static int64_t spool_bound(const struct sbx_mstore_info *info)
{
    int64_t files = info->limits.max_files > 0 ? info->limits.max_files : 0;
    int64_t total = info->limits.max_total_bytes > 0 ? info->limits.max_total_bytes : 0;
    if (files > INT64_MAX / 2 / SPOOL_ENTRY_OVERHEAD - 16 || total > INT64_MAX / 2)
        return INT64_MAX;
    return total + (files + 16) * SPOOL_ENTRY_OVERHEAD;
}

static int spool_write(void *ctx, const void *data, size_t len)
{
    struct wb *w = ctx;
    const char *p = data;
    if ((uint64_t)len > (uint64_t)w->spool_left) {
        w->spool_full = true; /* gather says so */
        return SBX_E_INVALID;
    }
    w->spool_left -= (int64_t)len;
    sbxh_meter_add(&w->meter, len);
    while (len) {
        ssize_t n = write(w->spool_fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            sbx_stream_error("memory: cannot spool the changes: %s", strerror(errno));
            return SBX_E_IO;
        }
        p += n;
        len -= (size_t)n;
    }
    return SBX_OK;
}

static int on_removed(void *ctx, const char *path)
{
    struct wb *w = ctx;
    struct change *c = add_change(w);
    if (!c || !(c->path = strdup(path)))
        return SBX_E_NOMEM;
    c->remove = true;
    return SBX_OK;
}

static const char *type_name(unsigned type)
{
    switch (type) {
    case AE_IFLNK: return "a symbolic link";
    case AE_IFIFO: return "a FIFO";
    case AE_IFCHR: return "a character device";
    case AE_IFBLK: return "a block device";
    case AE_IFSOCK: return "a socket";
    case AE_IFDIR: return "a directory";
    default: return "not a regular file";
    }
}

static long spool_read(void *ctx, void *buf, size_t cap)
{
    struct wb *w = ctx;
    ssize_t n;
    do
        n = read(w->spool_fd, buf, cap);
    while (n < 0 && errno == EINTR);
    return n < 0 ? -1 : (long)n;
}

static la_ssize_t archive_spool_read(struct archive *a, void *ud, const void **buf)
{
    (void)a;
    struct wb *w = ud;
    long n = spool_read(w, w->chunk, SPOOL_CHUNK);
    *buf = w->chunk;
    return n;
}

/* Read the spooled archive: check every entry, keep each file's content
 * in a spool file of its own and its SHA-256. */
static int read_changes(struct wb *w, const struct sbx_mstore_info *info, sbx_error *err)
{
    if (lseek(w->spool_fd, 0, SEEK_SET) != 0)
        return sbx_error_set(err, SBX_E_IO, "memory: spool: %s", strerror(errno));
    if (!w->chunk && !(w->chunk = malloc(SPOOL_CHUNK)))
        return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    struct archive *a = archive_read_new();
    if (!a || archive_read_support_format_tar(a) != ARCHIVE_OK ||
        archive_read_open(a, w, NULL, archive_spool_read, NULL) != ARCHIVE_OK) {
        if (a)
            archive_read_free(a);
        return sbx_error_set(err, SBX_E_NOMEM, "memory: cannot read the changes");
    }
    char shown[160];
    int rc = SBX_OK;
    struct archive_entry *e;
    int r;
    while (rc == SBX_OK && (r = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
        const char *path = archive_entry_pathname(e);
        if (!path)
            path = "";
        unsigned type = archive_entry_filetype(e);
        if (type == AE_IFDIR)
            continue; /* directories are implied by their files */
        sbx_error why;
        if ((rc = sbxh_mstore_check_path(path, &why)) != SBX_OK) {
            rc = sbx_error_set(err, SBX_E_INVALID,
                               "memory store '%s': %s in the mount; nothing was committed",
                               w->slug, why.message);
            break;
        }
        if (type != AE_IFREG) {
            rc = sbx_error_set(err, SBX_E_INVALID,
                               "memory store '%s': \"%s\" is %s; only regular files are "
                               "committed, nothing was",
                               w->slug, sbxh_text_escape(shown, sizeof shown, path, 120),
                               type_name(type));
            break;
        }
        int64_t size = archive_entry_size(e);
        if (size > info->limits.max_file_bytes) {
            rc = sbx_error_set(err, SBX_E_INVALID,
                               "memory store '%s': \"%s\": the file is too large (%lld "
                               "bytes, limit %lld); nothing was committed",
                               w->slug, sbxh_text_escape(shown, sizeof shown, path, 120),
                               (long long)size, (long long)info->limits.max_file_bytes);
            break;
        }
        /* the store's limits, before anything more is spooled */
        w->files_seen++;
        w->bytes_seen += size;
        if (w->files_seen > info->limits.max_files ||
            w->bytes_seen > info->limits.max_total_bytes) {
            rc = sbx_error_set(err, SBX_E_INVALID,
                               "memory store '%s': \"%s\": the changes pass the store's "
                               "limits (%lld files, %lld bytes); nothing was committed",
                               w->slug, sbxh_text_escape(shown, sizeof shown, path, 120),
                               (long long)info->limits.max_files,
                               (long long)info->limits.max_total_bytes);
            break;
        }
        struct change *c = add_change(w);
        char spool[300];
        snprintf(spool, sizeof spool, "%s/%zu", w->spool_dir, w->n);
        if (!c || !(c->path = strdup(path)) || !(c->spool = strdup(spool))) {
            rc = sbx_error_set(err, SBX_E_NOMEM, "out of memory");
            break;
        }
        int fd = open(spool, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        EVP_MD_CTX *md = EVP_MD_CTX_new();
        if (fd < 0 || !md || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
            rc = sbx_error_set(err, SBX_E_IO, "memory: cannot spool \"%s\": %s",
                               sbxh_text_escape(shown, sizeof shown, path, 120), strerror(errno));
        }
        char data[65536];
        la_ssize_t n;
        while (rc == SBX_OK && (n = archive_read_data(a, data, sizeof data)) != 0) {
            if (n < 0 || write(fd, data, (size_t)n) != n ||
                EVP_DigestUpdate(md, data, (size_t)n) != 1)
                rc = sbx_error_set(err, SBX_E_IO, "memory: reading the changes of \"%s\": %s",
                                   sbxh_text_escape(shown, sizeof shown, path, 120),
                                   n < 0 ? archive_error_string(a) : strerror(errno));
            else
                c->size += n;
        }
        unsigned char digest[32];
        if (rc == SBX_OK && EVP_DigestFinal_ex(md, digest, NULL) == 1)
            sbxs_hex(digest, sizeof digest, c->sha);
        EVP_MD_CTX_free(md);
        if (fd >= 0)
            close(fd);
    }
    if (rc == SBX_OK && r != ARCHIVE_EOF)
        rc = sbx_error_set(err, SBX_E_PROTOCOL,
                           "memory store '%s': the provider's archive of changes is "
                           "damaged: %s",
                           w->slug, archive_error_string(a));
    archive_read_free(a);
    return rc;
}

static int by_change_path(const void *a, const void *b)
{
    return strcmp(((const struct change *)a)->path, ((const struct change *)b)->path);
}

static int load_change(void *ud, size_t index, const void **data, size_t *len,
                       sbx_error *err)
{
    struct wb *w = ud;
    struct change *c = &w->v[index];
    w->content.len = 0;
    int fd = open(c->spool, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return sbx_error_set(err, SBX_E_IO, "memory: spool: %s", strerror(errno));
    char chunk[65536];
    ssize_t n;
    int rc = SBX_OK;
    while ((n = read(fd, chunk, sizeof chunk)) > 0)
        if (buf_write(&w->content, chunk, (size_t)n) != SBX_OK) {
            rc = sbx_error_set(err, SBX_E_NOMEM, "out of memory");
            break;
        }
    if (n < 0)
        rc = sbx_error_set(err, SBX_E_IO, "memory: spool: %s", strerror(errno));
    close(fd);
    *data = w->content.data ? w->content.data : "";
    *len = w->content.len;
    return rc;
}

static void wb_free(struct wb *w)
{
    for (size_t i = 0; i < w->n; i++) {
        if (w->v[i].spool)
            unlink(w->v[i].spool);
        free(w->v[i].spool);
        free(w->v[i].path);
    }
    free(w->v);
    free(w->content.data);
    free(w->chunk);
    if (w->spool_fd >= 0)
        close(w->spool_fd);
    if (w->spool_dir[0])
        rmdir(w->spool_dir);
}

/* Spool the diff, check it, drop changes that are no change. */
static int gather(struct wb *w, sbx_handle *h, const struct sbx_mstore_info *info,
                  sbx_cancel *cancel, sbx_error *err)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(w->spool_dir, sizeof w->spool_dir, "%s/sbx-memory-XXXXXX",
             tmp && *tmp == '/' && strlen(tmp) < 200 ? tmp : "/tmp");
    if (!mkdtemp(w->spool_dir)) {
        w->spool_dir[0] = '\0';
        return sbx_error_set(err, SBX_E_IO, "memory: cannot make a spool directory: %s",
                             strerror(errno));
    }
    char spool[300];
    snprintf(spool, sizeof spool, "%s/diff.tar", w->spool_dir);
    w->spool_fd = open(spool, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (w->spool_fd < 0)
        return sbx_error_set(err, SBX_E_IO, "memory: cannot spool: %s", strerror(errno));
    unlink(spool);
    w->spool_left = spool_bound(info);
    struct sbx_sink sink = SBX_SINK_INIT(w, spool_write);
    struct sbx_memory_changes ch = {sizeof ch, &sink, w, on_removed};
    memset(&w->meter, 0, sizeof w->meter);
    w->meter.cancel = cancel;
    w->meter.threshold = MEMORY_PROGRESS_THRESHOLD;
    snprintf(w->meter.what, sizeof w->meter.what, "writing back memory %s", w->slug);
    int rc = sbxh_handle_memory_diff(h, w->slug, 0, &ch, cancel, err);
    if (rc == SBX_OK)
        sbxh_meter_end(&w->meter);
    if (rc != SBX_OK && w->spool_full)
        rc = sbx_error_set(err, SBX_E_INVALID,
                           "memory store '%s': the changes are larger than the store's "
                           "limits allow (%lld files, %lld bytes) and were not read further; "
                           "nothing was committed",
                           w->slug, (long long)info->limits.max_files,
                           (long long)info->limits.max_total_bytes);
    if (rc == SBX_OK)
        rc = read_changes(w, info, err);
    if (rc != SBX_OK)
        return rc;
    if (w->n)
        qsort(w->v, w->n, sizeof *w->v, by_change_path);
    for (size_t i = 1; i < w->n; i++)
        if (!strcmp(w->v[i].path, w->v[i - 1].path))
            return sbx_error_set(err, SBX_E_PROTOCOL,
                                 "memory store '%s': the provider reported a path twice",
                                 w->slug);
    return SBX_OK;
}

/* Each change's base (its version at the baseline); changes that equal
 * the head already are dropped. */
static int set_bases(struct wb *w, int64_t baseline, struct sbx_mstore_change *out,
                     size_t *n, sbx_error *err)
{
    *n = 0;
    size_t kept = 0;
    for (size_t i = 0; i < w->n; i++) {
        struct change *c = &w->v[i];
        int64_t head, base;
        bool live, base_live;
        char sha[65], base_sha[65];
        int rc = sbxh_mstore_head(w->m->store, w->slug, c->path, 0, &head, &live, sha, err);
        if (rc != SBX_OK)
            return rc;
        if (c->remove ? !live : (live && !strcmp(sha, c->sha)))
            continue;
        rc = baseline > 0
                 ? sbxh_mstore_head(w->m->store, w->slug, c->path, baseline, &base, &base_live,
                                    base_sha, err)
                 : (base = 0, SBX_OK);
        if (rc != SBX_OK)
            return rc;
        /* keep the kept changes at the front, in path order */
        if (kept != i) {
            struct change t = w->v[kept];
            w->v[kept] = *c;
            w->v[i] = t;
            c = &w->v[kept];
        }
        out[kept] = (struct sbx_mstore_change){c->path, base, c->remove};
        kept++;
    }
    *n = kept;
    return SBX_OK;
}

/*
 * Write back one attachment: *state and *baseline receive what to record.
 * Read-only attachments are only checked: a change there is refused and
 * the mount reloaded before the next command.
 */
static int write_back(struct memory_ctx *mc, sbx_handle *h, const struct sbx_store_memory_row *row,
                      int64_t *baseline, int *state, sbx_cancel *cancel, sbx_error *err)
{
    sbx_sessions *m = mc->m;
    *baseline = row->baseline;
    *state = row->state;
    struct sbx_mstore_info info;
    int rc = sbxh_mstore_info(m->store, row->slug, &info, err);
    if (rc != SBX_OK)
        return rc;
    struct wb w = {.m = m, .slug = row->slug, .spool_fd = -1};
    rc = gather(&w, h, &info, cancel, err);
    struct sbx_mstore_change *changes = NULL;
    size_t n = 0;
    if (rc == SBX_OK && w.n && !(changes = calloc(w.n, sizeof *changes)))
        rc = sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    if (rc == SBX_OK)
        rc = set_bases(&w, row->baseline, changes, &n, err);
    char label[13];
    sbxh_session_label(mc->key, label);
    if (rc == SBX_OK && row->access != SBX_MEMORY_READ_WRITE) {
        if (n) {
            char shown[160];
            rc = sbx_error_set(err, SBX_E_DENIED,
                               "memory store '%s' is attached read-only to session %s, "
                               "but \"%s\"%s changed in its mount; nothing was committed "
                               "and the mount is restored before the next command",
                               row->slug, label,
                               sbxh_text_escape(shown, sizeof shown, changes[0].path, 120),
                               n > 1 ? " and more" : "");
            *baseline = -1; /* reload */
            *state = SBX_STORE_MEMORY_CLEAN;
        }
        free(changes);
        wb_free(&w);
        return rc;
    }
    int64_t version = info.version;
    if (rc == SBX_OK && n) {
        char author[64];
        snprintf(author, sizeof author, AUTHOR_PREFIX "%s", label);
        struct sbx_mstore_commit c = {row->slug, author, changes, n, load_change, NULL, &w};
        sbxh_session_crash_point(m, "memory-before-commit");
        rc = sbxh_mstore_commit(m->store, &c, &version, NULL, NULL, err);
        if (rc == SBX_E_EXISTS)
            *state = SBX_STORE_MEMORY_CONFLICT;
    }
    if (rc == SBX_OK) {
        sbxh_session_crash_point(m, "memory-after-commit");
        rc = sbxh_handle_memory_accept(h, row->slug, cancel, err);
    }
    if (rc == SBX_OK) {
        sbxh_session_crash_point(m, "memory-after-accept");
        *state = SBX_STORE_MEMORY_CLEAN;
        /* The mount equals the heads at the new version only when no other
         * commit came between the baseline and ours; else it is reloaded
         * before the next command (the baseline stays). */
        if (n && version == row->baseline + 1)
            *baseline = version;
    }
    free(changes);
    wb_free(&w);
    return rc;
}

/* Write back every unclean attachment and record the outcome. The first
 * error is returned; the others are still attempted. */
static int write_back_all(struct memory_ctx *mc, sbx_handle *h, struct sbx_store_memory_row *rows,
                          size_t n, bool only_unclean, sbx_cancel *cancel, sbx_error *err)
{
    int first = SBX_OK;
    for (size_t i = 0; i < n; i++) {
        bool rw = rows[i].access == SBX_MEMORY_READ_WRITE;
        if (only_unclean && (!rw || rows[i].state == SBX_STORE_MEMORY_CLEAN))
            continue;
        if (rows[i].baseline < 0)
            continue; /* never loaded: nothing of the store is there */
        int64_t baseline;
        int state;
        sbx_error e;
        int rc = write_back(mc, h, &rows[i], &baseline, &state, cancel, &e);
        sbx_error ue;
        if ((baseline != rows[i].baseline || state != rows[i].state) &&
            sbxh_store_memory_update(mc->m->store, mc->key, rows[i].slug, baseline, state,
                                     &ue) == SBX_OK) {
            rows[i].baseline = baseline;
            rows[i].state = state;
        }
        if (rc != SBX_OK && first == SBX_OK) {
            first = rc;
            if (err)
                *err = e;
        }
    }
    return first;
}

/* ---- the exec hooks ----------------------------------------------------- */

static int before_exec(void *ctx, sbx_handle *h, int *token, sbx_cancel *cancel,
                       sbx_error *err)
{
    struct memory_ctx *mc = ctx;
    struct sbx_store_lock *l;
    int rc = lock_open(mc->m, mc->key, &l, err);
    if (rc != SBX_OK)
        return rc;
    bool got;
    if ((rc = sbxh_store_lock_try(l, SBX_STORE_EXCLUSIVE, &got, err)) == SBX_OK && !got) {
        /* another command runs: share the mount as it is (waits only for a
         * writeback in progress) */
        if ((rc = lock_wait(l, SBX_STORE_SHARED, cancel, err)) == SBX_OK &&
            (rc = lock_keep(mc, l, token, err)) == SBX_OK)
            return SBX_OK;
        sbxh_store_lock_close(l);
        return rc;
    }
    struct sbx_store_memory_row *rows = NULL;
    size_t n = 0;
    if (rc == SBX_OK)
        rc = sbxh_store_memory_get(mc->m->store, mc->key, &rows, &n, err);
    /* Changes a crash left behind go in first; a conflict keeps the mount
     * as it is (the command then sees the session's own changes). */
    if (rc == SBX_OK) {
        sbx_error wb_err;
        write_back_all(mc, h, rows, n, true, cancel, &wb_err);
    }
    for (size_t i = 0; rc == SBX_OK && i < n; i++) {
        struct sbx_store_memory_row *r = &rows[i];
        if (r->state == SBX_STORE_MEMORY_CLEAN) {
            struct sbx_mstore_info info;
            if ((rc = sbxh_mstore_info(mc->m->store, r->slug, &info, err)) != SBX_OK)
                break;
            if (r->baseline != info.version) {
                int64_t at;
                if ((rc = load_heads(mc->m, h, r->slug, &at, cancel, err)) != SBX_OK)
                    break;
                r->baseline = at;
                if ((rc = sbxh_store_memory_update(mc->m->store, mc->key, r->slug, at,
                                                   SBX_STORE_MEMORY_CLEAN, err)) != SBX_OK)
                    break;
            }
            /* tree == baseline, no other command: a watch is exact */
            if ((rc = sbxh_handle_memory_watch(h, r->slug, cancel, err)) != SBX_OK)
                break;
        }
        if (r->access == SBX_MEMORY_READ_WRITE && r->state == SBX_STORE_MEMORY_CLEAN)
            rc = sbxh_store_memory_update(mc->m->store, mc->key, r->slug, r->baseline,
                                          SBX_STORE_MEMORY_DIRTY, err);
    }
    free(rows);
    if (rc == SBX_OK && (rc = sbxh_store_lock_try(l, SBX_STORE_SHARED, &got, err)) == SBX_OK &&
        !got)
        rc = sbx_error_set(err, SBX_E_INTERNAL, "memory: lock: cannot share it");
    if (rc == SBX_OK)
        rc = lock_keep(mc, l, token, err);
    if (rc != SBX_OK) {
        sbxh_store_lock_close(l);
        return rc;
    }
    return SBX_OK;
}

static int after_exec(void *ctx, sbx_handle *h, int token, sbx_cancel *cancel,
                      sbx_error *err)
{
    struct memory_ctx *mc = ctx;
    sbx_error_clear(err);
    struct sbx_store_lock *l = lock_take(mc, token);
    if (!l)
        return SBX_OK;
    bool got = false;
    int rc = sbxh_store_lock_try(l, SBX_STORE_UNLOCKED, &got, err);
    if (rc == SBX_OK)
        rc = sbxh_store_lock_try(l, SBX_STORE_EXCLUSIVE, &got, err);
    if (rc == SBX_OK && got) {
        /* the last command of the session: write back */
        struct sbx_store_memory_row *rows = NULL;
        size_t n = 0;
        rc = sbxh_store_memory_get(mc->m->store, mc->key, &rows, &n, err);
        if (rc == SBX_OK)
            rc = write_back_all(mc, h, rows, n, false, cancel, err);
        free(rows);
    }
    sbxh_store_lock_close(l);
    return rc;
}

static void free_ctx(void *ctx)
{
    struct memory_ctx *mc = ctx;
    if (mc) {
        for (size_t i = 0; i < mc->nheld; i++)
            sbxh_store_lock_close(mc->held[i]);
        free(mc->held);
        pthread_mutex_destroy(&mc->lock);
        free(mc->key);
        free(mc);
    }
}

/* ---- session manager side ----------------------------------------------- */

int sbxh_session_memory_admit(sbx_sessions *m, const struct sbx_session_spec *spec,
                              sbx_error *err)
{
    if (!spec || !spec->nmemory)
        return SBX_OK;
    if (!spec->memory)
        return sbx_error_set(err, SBX_E_INVALID, "session spec: nmemory without memory");
    for (size_t i = 0; i < spec->nmemory; i++) {
        const struct sbx_memory_attachment *a = &spec->memory[i];
        int rc = sbxh_mstore_check_slug(a->slug, err);
        if (rc != SBX_OK)
            return rc;
        if (a->access > SBX_MEMORY_READ_WRITE)
            return sbx_error_set(err, SBX_E_INVALID,
                                 "memory store '%s': access must be read-only or "
                                 "read-write",
                                 a->slug);
        for (size_t j = 0; j < i; j++)
            if (!strcmp(spec->memory[j].slug, a->slug))
                return sbx_error_set(err, SBX_E_INVALID,
                                     "memory store '%s' is attached twice", a->slug);
        struct sbx_mstore_info info;
        if ((rc = sbxh_mstore_info(m->store, a->slug, &info, err)) != SBX_OK)
            return rc;
    }
    if (spec->nmemory > 64)
        return sbx_error_set(err, SBX_E_INVALID, "at most 64 memory stores per session");
    return SBX_OK;
}

int sbxh_session_memory_record(sbx_sessions *m, const char *key,
                               const struct sbx_session_spec *spec, sbx_error *err)
{
    size_t n = spec ? spec->nmemory : 0;
    struct sbx_store_memory_row *rows = n ? calloc(n, sizeof *rows) : NULL;
    if (n && !rows)
        return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        snprintf(rows[i].slug, sizeof rows[i].slug, "%s", spec->memory[i].slug);
        rows[i].access = (int)spec->memory[i].access;
    }
    int rc = n ? sbxh_store_memory_set(m->store, key, rows, n, err)
               : sbxh_store_memory_drop(m->store, key, err);
    free(rows);
    return rc;
}

int sbxh_session_memory_hook(sbx_sessions *m, const char *key, sbx_handle *h,
                             sbx_error *err)
{
    struct sbx_store_memory_row *rows = NULL;
    size_t n = 0;
    int rc = sbxh_store_memory_get(m->store, key, &rows, &n, err);
    free(rows);
    if (rc != SBX_OK || n == 0)
        return rc;
    struct memory_ctx *mc = calloc(1, sizeof *mc);
    if (!mc || !(mc->key = strdup(key))) {
        free(mc);
        return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    }
    mc->m = m;
    pthread_mutex_init(&mc->lock, NULL);
    struct sbx_exec_hooks hooks = {before_exec, after_exec, free_ctx, mc};
    sbxh_handle_set_hooks(h, &hooks);
    return SBX_OK;
}

int sbxh_session_memory_flush(sbx_sessions *m, const char *key, sbx_handle *h,
                              sbx_cancel *cancel, sbx_error *err)
{
    struct sbx_store_memory_row *rows = NULL;
    size_t n = 0;
    int rc = sbxh_store_memory_get(m->store, key, &rows, &n, err);
    bool unclean = false;
    for (size_t i = 0; rc == SBX_OK && i < n; i++)
        unclean |= rows[i].access == SBX_MEMORY_READ_WRITE &&
                   rows[i].state != SBX_STORE_MEMORY_CLEAN;
    if (rc != SBX_OK || !unclean) {
        free(rows);
        return rc;
    }
    struct sbx_store_lock *l;
    if ((rc = lock_open(m, key, &l, err)) != SBX_OK) {
        free(rows);
        return rc;
    }
    if ((rc = lock_wait(l, SBX_STORE_EXCLUSIVE, cancel, err)) == SBX_OK) {
        free(rows);
        rows = NULL;
        if ((rc = sbxh_store_memory_get(m->store, key, &rows, &n, err)) == SBX_OK) {
            struct memory_ctx mc = {.m = m, .key = (char *)key};
            rc = write_back_all(&mc, h, rows, n, true, cancel, err);
        }
    }
    sbxh_store_lock_close(l);
    free(rows);
    return rc;
}

int sbxh_session_memory_conflict(sbx_sessions *m, const char *key, const char *slug,
                                 struct sbx_store_memory_row *out, sbx_error *err)
{
    struct sbx_store_memory_row *rows = NULL;
    size_t n = 0;
    int rc = sbxh_store_memory_get(m->store, key, &rows, &n, err);
    struct sbx_store_memory_row *row = NULL;
    for (size_t i = 0; rc == SBX_OK && i < n; i++)
        if (!strcmp(rows[i].slug, slug))
            row = &rows[i];
    char label[13];
    sbxh_session_label(key, label);
    if (rc == SBX_OK && !row)
        rc = sbx_error_set(err, SBX_E_NOT_FOUND,
                           "memory store '%s' is not attached to session %s", slug, label);
    if (rc == SBX_OK && row->state != SBX_STORE_MEMORY_CONFLICT)
        rc = sbx_error_set(err, SBX_E_INVALID,
                           "memory store '%s' of session %s has no conflict to resolve",
                           slug, label);
    if (rc == SBX_OK)
        *out = *row;
    free(rows);
    return rc;
}

int sbxh_session_memory_resolve(sbx_sessions *m, const char *key, sbx_handle *h,
                                const struct sbx_store_memory_row *row, bool keep,
                                sbx_cancel *cancel, sbx_error *err)
{
    const char *slug = row->slug;
    struct sbx_store_lock *l = NULL;
    int rc = lock_open(m, key, &l, err);
    if (rc == SBX_OK)
        rc = lock_wait(l, SBX_STORE_EXCLUSIVE, cancel, err);
    if (rc == SBX_OK) {
        if (keep) {
            /* the session's version wins: based on the heads as they are now */
            struct sbx_mstore_info info;
            if ((rc = sbxh_mstore_info(m->store, slug, &info, err)) == SBX_OK) {
                struct sbx_store_memory_row r = *row;
                r.baseline = info.version;
                struct memory_ctx mc = {.m = m, .key = (char *)key};
                int64_t baseline;
                int state;
                rc = write_back(&mc, h, &r, &baseline, &state, cancel, err);
                if (rc == SBX_OK)
                    rc = sbxh_store_memory_update(m->store, key, slug, row->baseline,
                                                  SBX_STORE_MEMORY_CLEAN, err);
            }
        } else {
            /* the store wins: reloaded before the next command */
            rc = sbxh_store_memory_update(m->store, key, slug, -1, SBX_STORE_MEMORY_CLEAN, err);
        }
    }
    sbxh_store_lock_close(l);
    return rc;
}
