/*
 * archive_check.c - entry validation and checked extraction of archives
 * that come out of a sandbox (see archive_check.h).
 */
#include "archive_check.h"
#include "utf8.h"


#include <archive.h>
#include <archive_entry.h>

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NAME_MAX_BYTES 4096
#define IO_CHUNK (64 * 1024)

/* A set of entry names (open addressing, hashes kept): lookups cost one
 * hash of the name, so checking an entry is linear in its name's length. */
struct seen {
    size_t hash;
    int is_dir;
    char name[];
};

struct name_set {
    struct seen **slot;
    size_t count, nslots; /* nslots: 0 or a power of two > 2 * count */
};

struct sbxs_archive_check {
    struct sbxs_archive_limits lim;
    struct name_set all;   /* every entry, for duplicates */
    struct name_set files; /* regular files, for "below a file" */
    bool any_bytes; /* names need not be UTF-8 */
    uint64_t entries;
    uint64_t total;
    /* the current file entry */
    uint64_t declared, delivered;
    char current[600];
};

/* FNV-1a over n bytes, continued from h (start with FNV_START). */
#define FNV_START ((size_t)1469598103934665603u)
static size_t fnv(size_t h, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * (size_t)1099511628211u;
    return h;
}

/* The member of the set with this hash and exactly these n bytes. */
static struct seen *set_find(const struct name_set *s, size_t hash, const char *name,
                             size_t n)
{
    if (!s->nslots)
        return NULL;
    size_t mask = s->nslots - 1;
    for (size_t i = hash & mask; s->slot[i]; i = (i + 1) & mask) {
        struct seen *e = s->slot[i];
        if (e->hash == hash && strncmp(e->name, name, n) == 0 && e->name[n] == '\0')
            return e;
    }
    return NULL;
}

static void set_place(struct name_set *s, struct seen *e)
{
    size_t mask = s->nslots - 1, i = e->hash & mask;
    while (s->slot[i])
        i = (i + 1) & mask;
    s->slot[i] = e;
}

/* Add e (owned by the set from now on); -1 when out of memory. */
static int set_add(struct name_set *s, struct seen *e)
{
    if (2 * (s->count + 1) >= s->nslots) {
        size_t n = s->nslots ? s->nslots * 2 : 64;
        struct seen **slot = calloc(n, sizeof *slot);
        if (!slot)
            return -1;
        struct seen **old = s->slot;
        size_t oldn = s->nslots;
        s->slot = slot;
        s->nslots = n;
        for (size_t i = 0; i < oldn; i++)
            if (old[i])
                set_place(s, old[i]);
        free(old);
    }
    set_place(s, e);
    s->count++;
    return 0;
}

/* Free the set; with `owner`, its members too. */
static void set_free(struct name_set *s, bool owner)
{
    for (size_t i = 0; owner && i < s->nslots; i++)
        free(s->slot[i]);
    free(s->slot);
}

int sbxs_archive_check_new(const struct sbxs_archive_limits *limits,
                          sbxs_archive_check **out, struct sbxs_error *err)
{
    *out = calloc(1, sizeof **out);
    if (!*out)
        return sbxs_error_set(err, SBX_E_NOMEM, "out of memory");
    struct sbxs_archive_limits *l = &(*out)->lim;
    if (limits)
        *l = *limits;
    if (!l->max_file_bytes)
        l->max_file_bytes = SBXS_ARCHIVE_DEFAULT_MAX_FILE;
    if (!l->max_total_bytes)
        l->max_total_bytes = SBXS_ARCHIVE_DEFAULT_MAX_TOTAL;
    if (!l->max_entries)
        l->max_entries = SBXS_ARCHIVE_DEFAULT_MAX_ENTRIES;
    return SBX_OK;
}

void sbxs_archive_check_any_bytes(sbxs_archive_check *c)
{
    c->any_bytes = true;
}

void sbxs_archive_check_free(sbxs_archive_check *c)
{
    if (!c)
        return;
    set_free(&c->files, false); /* its members belong to `all` */
    set_free(&c->all, true);
    free(c);
}

/* A printable rendering of a hostile name for messages. */
static void show(const char *name, char *out, size_t cap)
{
    size_t j = 0;
    for (size_t i = 0; name[i] && j + 5 < cap && i < 120; i++) {
        unsigned char ch = (unsigned char)name[i];
        if (ch < 0x20 || ch == 0x7f || ch >= 0x80)
            j += (size_t)snprintf(out + j, cap - j, "\\x%02x", ch);
        else
            out[j++] = (char)ch;
    }
    out[j] = '\0';
}

static const char *type_name(mode_t t)
{
    switch (t) {
    case AE_IFLNK: return "a symbolic link";
    case AE_IFCHR: return "a character device";
    case AE_IFBLK: return "a block device";
    case AE_IFIFO: return "a FIFO";
    case AE_IFSOCK: return "a socket";
    default: return "of an unknown type";
    }
}

/* Normalize "./a//b/" to "a/b"; refuse absolute names, "..", control
 * characters. */
static int normalize(const char *raw, bool any_bytes, char *out, size_t cap,
                     const char **why)
{
    size_t len = strlen(raw);
    if (len == 0) {
        *why = "has an empty name";
        return -1;
    }
    if (len >= NAME_MAX_BYTES || len >= cap) {
        *why = "has a name that is too long";
        return -1;
    }
    if (raw[0] == '/') {
        *why = "has an absolute name";
        return -1;
    }
    if (!any_bytes && !sbxs_utf8_valid(raw, len)) {
        *why = "has a name that is not valid UTF-8";
        return -1;
    }
    for (size_t i = 0; i < len; i++) {
        if ((unsigned char)raw[i] < 0x20 || raw[i] == 0x7f || raw[i] == '\\') {
            *why = "has a control character or backslash in its name";
            return -1;
        }
    }
    size_t used = 0, depth = 0;
    const char *p = raw;
    while (*p) {
        size_t n = strcspn(p, "/");
        if (n && !(n == 1 && p[0] == '.') && ++depth > SBXS_ARCHIVE_MAX_DEPTH) {
            *why = "is nested deeper than " SBXS_ARCHIVE_MAX_DEPTH_TEXT " levels";
            return -1;
        }
        if (n == 2 && p[0] == '.' && p[1] == '.') {
            *why = "has \"..\" in its name";
            return -1;
        }
        if (n > 255) {
            *why = "has a name component longer than 255 bytes";
            return -1;
        }
        if (n && !(n == 1 && p[0] == '.')) {
            if (used)
                out[used++] = '/';
            memcpy(out + used, p, n);
            used += n;
        }
        p += n;
        if (*p == '/')
            p++;
    }
    out[used] = '\0';
    return 0;
}

int sbxs_archive_check_entry(sbxs_archive_check *c, struct archive_entry *e, char *name,
                            size_t cap, int *is_dir, struct sbxs_error *err)
{
    char shown[600];
    const char *raw = archive_entry_pathname(e);
    if (!raw)
        raw = archive_entry_pathname_utf8(e);
    if (!raw)
        return sbxs_error_set(err, SBX_E_INVALID,
                             "archive entry %llu has a name that cannot be decoded",
                             (unsigned long long)c->entries + 1);
    show(raw, shown, sizeof shown);
    snprintf(c->current, sizeof c->current, "%s", shown);
    c->declared = c->delivered = 0;

    if (++c->entries > c->lim.max_entries)
        return sbxs_error_set(err, SBX_E_INVALID,
                             "archive has more than %llu entries (at \"%s\")",
                             (unsigned long long)c->lim.max_entries, shown);
    /* A link target whose conversion failed reads as NULL in one form:
     * any form set makes it a hard link. */
    if (archive_entry_hardlink(e) || archive_entry_hardlink_utf8(e) ||
        archive_entry_hardlink_w(e))
        return sbxs_error_set(err, SBX_E_INVALID,
                             "archive entry \"%s\" is a hard link; only regular files "
                             "and directories are allowed",
                             shown);
    mode_t type = archive_entry_filetype(e);
    if (type != AE_IFREG && type != AE_IFDIR)
        return sbxs_error_set(err, SBX_E_INVALID,
                             "archive entry \"%s\" is %s; only regular files and "
                             "directories are allowed",
                             shown, type_name(type));
    const char *why = NULL;
    if (normalize(raw, c->any_bytes, name, cap, &why) != 0)
        return sbxs_error_set(err, SBX_E_INVALID, "archive entry \"%s\" %s", shown, why);
    *is_dir = type == AE_IFDIR;
    if (!*name) {
        if (!*is_dir)
            return sbxs_error_set(err, SBX_E_INVALID,
                                 "archive entry \"%s\" names the root as a file", shown);
        return SBX_OK; /* the root directory itself */
    }
    if (!*is_dir) {
        int64_t size = archive_entry_size_is_set(e) ? archive_entry_size(e) : 0;
        if (size < 0)
            size = 0;
        if ((uint64_t)size > c->lim.max_file_bytes)
            return sbxs_error_set(err, SBX_E_INVALID,
                                 "archive entry \"%s\" is %lld bytes, over the limit of "
                                 "%llu per file",
                                 shown, (long long)size,
                                 (unsigned long long)c->lim.max_file_bytes);
        if (c->total + (uint64_t)size > c->lim.max_total_bytes)
            return sbxs_error_set(err, SBX_E_INVALID,
                                 "archive is over the total limit of %llu bytes (at "
                                 "\"%s\")",
                                 (unsigned long long)c->lim.max_total_bytes, shown);
        c->declared = (uint64_t)size;
    }
    /* Nothing below a file: the hash of every parent prefix comes out of
     * one pass over the name, and only files are looked up. */
    size_t n = strlen(name), h = FNV_START, from = 0;
    for (size_t i = 0; i < n; i++) {
        if (name[i] != '/')
            continue;
        h = fnv(h, name + from, i - from);
        from = i;
        if (set_find(&c->files, h, name, i))
            return sbxs_error_set(err, SBX_E_INVALID,
                                 "archive entry \"%s\" is below an entry that is a "
                                 "file",
                                 shown);
    }
    h = fnv(h, name + from, n - from);
    /* no duplicates */
    struct seen *prev = set_find(&c->all, h, name, n);
    if (prev) {
        if (prev->is_dir && *is_dir)
            return SBX_OK; /* a directory listed twice is harmless */
        return sbxs_error_set(err, SBX_E_INVALID, "archive entry \"%s\" appears twice",
                             shown);
    }
    struct seen *s = malloc(sizeof *s + n + 1);
    if (!s)
        return sbxs_error_set(err, SBX_E_NOMEM, "out of memory");
    s->hash = h;
    s->is_dir = *is_dir;
    memcpy(s->name, name, n + 1);
    if (set_add(&c->all, s) != 0) {
        free(s);
        return sbxs_error_set(err, SBX_E_NOMEM, "out of memory");
    }
    if (!*is_dir && set_add(&c->files, s) != 0)
        return sbxs_error_set(err, SBX_E_NOMEM, "out of memory");
    return SBX_OK;
}

int sbxs_archive_check_data(sbxs_archive_check *c, uint64_t n, struct sbxs_error *err)
{
    c->delivered += n;
    c->total += n;
    if (c->delivered > c->declared || c->delivered > c->lim.max_file_bytes)
        return sbxs_error_set(err, SBX_E_INVALID,
                             "archive entry \"%s\" holds more data than it declares",
                             c->current);
    if (c->total > c->lim.max_total_bytes)
        return sbxs_error_set(err, SBX_E_INVALID,
                             "archive is over the total limit of %llu bytes (at \"%s\")",
                             (unsigned long long)c->lim.max_total_bytes, c->current);
    return SBX_OK;
}

/* ---- extraction ------------------------------------------------------- */

struct src_reader {
    const struct sbx_source *src;
    char buf[IO_CHUNK];
    int failed;
};

static la_ssize_t src_read(struct archive *a, void *ud, const void **out)
{
    struct src_reader *r = ud;
    (void)a;
    long n = r->src->read(r->src->ctx, r->buf, sizeof r->buf);
    if (n < 0) {
        r->failed = 1;
        return -1;
    }
    *out = r->buf;
    return (la_ssize_t)n;
}

/*
 * The directory the last entry went into (or the last directory entry),
 * kept open: entries of a tar come grouped by directory, so most entries
 * find their parent here without walking their path again, and a deep
 * chain of directories costs one mkdir and one open per level in all.
 */
struct parent_cache {
    int fd;     /* -1 when empty */
    size_t len; /* of path */
    char path[NAME_MAX_BYTES];
};

static void cache_set(struct parent_cache *pc, int fd, const char *path, size_t len)
{
    if (pc->fd >= 0)
        close(pc->fd);
    pc->fd = fd;
    pc->len = len;
    memcpy(pc->path, path, len);
    pc->path[len] = '\0';
}

/* Walk (creating when missing) the directories of name[from..len) below
 * fd, which is consumed; returns the last one's descriptor or -1. */
static int walk_down(int fd, char *name, size_t from, size_t len)
{
    char *p = name + from;
    while (p < name + len) {
        char *slash = strchr(p, '/');
        char *end = slash && slash < name + len ? slash : name + len;
        char saved = *end;
        *end = '\0';
        int ok = mkdirat(fd, p, 0755) == 0 || errno == EEXIST;
        int next = ok ? openat(fd, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                      : -1;
        *end = saved;
        close(fd);
        if (next < 0)
            return -1;
        fd = next;
        p = end + (end < name + len);
    }
    return fd;
}

/* Open (creating when missing) the directory holding the last component of
 * name, below dest_fd, without following symlinks. *base points into name.
 * Returns a descriptor the caller closes, or -1. */
static int open_parent(int dest_fd, struct parent_cache *pc, char *name,
                       const char **base)
{
    char *last = strrchr(name, '/');
    size_t plen = last ? (size_t)(last - name) : 0;
    *base = last ? last + 1 : name;
    if (plen == 0)
        return dup(dest_fd);
    int start, fd;
    size_t from;
    if (pc->fd >= 0 && pc->len <= plen && memcmp(pc->path, name, pc->len) == 0 &&
        (pc->len == plen || name[pc->len] == '/')) {
        start = dup(pc->fd); /* the cached directory or one of its parents */
        from = pc->len == plen ? plen : pc->len + 1;
    } else {
        start = dup(dest_fd);
        from = 0;
    }
    if (start < 0)
        return -1;
    fd = from < plen ? walk_down(start, name, from, plen) : start;
    if (fd < 0)
        return -1;
    int keep = dup(fd);
    if (keep >= 0)
        cache_set(pc, keep, name, plen);
    return fd;
}

static int extract_entry(struct archive *a, sbxs_archive_check *c, int dest_fd,
                         struct parent_cache *pc, char *name, int is_dir, mode_t perm,
                         char *buf, struct sbxs_error *err)
{
    char shown[600];
    show(name, shown, sizeof shown);
    const char *base;
    int pfd = open_parent(dest_fd, pc, name, &base);
    if (pfd < 0)
        return sbxs_error_set(err, SBX_E_IO, "extracting \"%s\": %s", shown,
                             strerror(errno));
    int rc = SBX_OK;
    if (is_dir) {
        if (mkdirat(pfd, base, 0755) != 0) {
            struct stat st;
            if (errno != EEXIST || fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
                !S_ISDIR(st.st_mode))
                rc = sbxs_error_set(err, SBX_E_IO, "extracting directory \"%s\": %s",
                                   shown, strerror(errno ? errno : EEXIST));
        }
        /* the next entry most likely goes into this directory */
        int dfd = rc == SBX_OK ? openat(pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
                                                        O_CLOEXEC)
                               : -1;
        if (dfd >= 0)
            cache_set(pc, dfd, name, strlen(name));
        close(pfd);
        return rc;
    }
    mode_t mode = (perm & 0111) ? 0755 : 0644;
    int fd = openat(pfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                    mode);
    close(pfd);
    if (fd < 0)
        return sbxs_error_set(err, SBX_E_IO, "extracting \"%s\": %s", shown,
                             strerror(errno));
    for (;;) {
        la_ssize_t n = archive_read_data(a, buf, IO_CHUNK);
        if (n == 0)
            break;
        if (n < 0) {
            rc = sbxs_error_set(err, SBX_E_INVALID, "reading archive entry \"%s\": %s",
                               shown, archive_error_string(a));
            break;
        }
        rc = sbxs_archive_check_data(c, (uint64_t)n, err);
        if (rc != SBX_OK)
            break;
        size_t off = 0;
        while (off < (size_t)n) {
            ssize_t w = write(fd, buf + off, (size_t)n - off);
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0) {
                rc = sbxs_error_set(err, SBX_E_IO, "writing \"%s\": %s", shown,
                                   strerror(errno));
                break;
            }
            off += (size_t)w;
        }
        if (rc != SBX_OK)
            break;
    }
    if (close(fd) != 0 && rc == SBX_OK)
        rc = sbxs_error_set(err, SBX_E_IO, "writing \"%s\": %s", shown, strerror(errno));
    return rc;
}

int sbxs_archive_extract(const struct sbx_source *src, const char *format,
                                int dest_fd, const struct sbxs_archive_limits *limits,
                                struct sbxs_error *err)
{
    if (format && strcmp(format, "tar") != 0 && strcmp(format, "tar.gz") != 0 &&
        strcmp(format, "zip") != 0)
        return sbxs_error_set(err, SBX_E_INVALID,
                             "archive format \"%s\" is not supported (tar, tar.gz, zip)",
                             format);
    sbxs_archive_check *c = NULL;
    int rc = sbxs_archive_check_new(limits, &c, err);
    if (rc != SBX_OK)
        return rc;
    struct archive *a = archive_read_new();
    struct src_reader *r = calloc(1, sizeof *r);
    char *buf = malloc(IO_CHUNK);
    char *name = malloc(NAME_MAX_BYTES);
    struct parent_cache *pc = malloc(sizeof *pc);
    if (pc)
        pc->fd = -1;
    if (!a || !r || !buf || !name || !pc) {
        rc = sbxs_error_set(err, SBX_E_NOMEM, "out of memory");
        goto out;
    }
    r->src = src;
    if (!format || strcmp(format, "zip") != 0)
        archive_read_support_format_tar(a);
    if (!format || strcmp(format, "zip") == 0)
        archive_read_support_format_zip(a);
    if (!format || strcmp(format, "tar.gz") == 0)
        archive_read_support_filter_gzip(a);
    if (archive_read_open(a, r, NULL, src_read, NULL) != ARCHIVE_OK) {
        rc = r->failed ? SBX_E_IO
                       : sbxs_error_set(err, SBX_E_INVALID, "not a valid archive: %s",
                                       archive_error_string(a));
        goto out;
    }
    for (;;) {
        struct archive_entry *e;
        int h = archive_read_next_header(a, &e);
        if (h == ARCHIVE_EOF)
            break;
        if (h != ARCHIVE_OK && h != ARCHIVE_WARN) {
            rc = r->failed ? SBX_E_IO
                           : sbxs_error_set(err, SBX_E_INVALID, "bad archive: %s",
                                           archive_error_string(a));
            goto out;
        }
        int is_dir = 0;
        rc = sbxs_archive_check_entry(c, e, name, NAME_MAX_BYTES, &is_dir, err);
        if (rc != SBX_OK)
            goto out;
        if (!*name)
            continue;
        rc = extract_entry(a, c, dest_fd, pc, name, is_dir, archive_entry_perm(e), buf,
                           err);
        if (rc != SBX_OK) {
            if (r->failed)
                rc = SBX_E_IO;
            goto out;
        }
    }
    rc = SBX_OK;
out:
    if (a)
        archive_read_free(a);
    free(r);
    free(buf);
    free(name);
    if (pc && pc->fd >= 0)
        close(pc->fd);
    free(pc);
    sbxs_archive_check_free(c);
    return rc;
}
