/*
 * files.c - read_file and write_file through the archive endpoints.
 *
 * Reading: GET /containers/{id}/archive answers with a tar holding the one
 * file; libarchive parses it straight off the connection (pull mode of the
 * HTTP helper, bounded buffer) and the file's bytes go to the sink chunk by
 * chunk.
 *
 * Writing: a tar header needs the size before the data, and a source has no
 * size, so the source is first spooled to an unnamed temporary file (disk,
 * not memory). The upload is then a tar generated on the fly by libarchive
 * from that file: the missing parent directories, then the file under a
 * temporary name next to its destination. A rename inside the container
 * (one helper exec) publishes it, so readers see the old file or the whole
 * new one, never a part.
 */
#include "docker.h"

#include <archive.h>
#include <archive_entry.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CHUNK (64 * 1024)

/* ---- reading ---------------------------------------------------------- */

struct pull {
    sbx_http_xfer *x;
    char buf[CHUNK];
    int rc;
    sbx_http_error err;
};

static la_ssize_t pull_read(struct archive *a, void *ud, const void **out)
{
    struct pull *p = ud;
    size_t got = 0;
    (void)a;
    p->rc = sbx_http_xfer_read(p->x, p->buf, sizeof p->buf, &got, &p->err);
    if (p->rc != SBX_OK)
        return -1;
    *out = p->buf;
    return (la_ssize_t)got;
}

int docker_read_file(sbx_sandbox *sb, sbx_call *call, const char *path,
                     const struct sbx_sink *sink)
{
    struct docker_state *st = sb->st;
    char *rel = NULL, *resolved = NULL;
    const char *root;
    int rc = docker_path_rooted(sb, call, "read", path, &root, &rel);
    if (rc != SBX_OK)
        return rc;
    size_t existing;
    struct docker_stat fst;
    rc = docker_resolve(sb, call, root, rel, &resolved, &existing, &fst);
    if (rc != SBX_OK)
        goto out;
    if (!fst.exists) {
        rc = st->host->set_error(st->host, call, SBX_E_NOT_FOUND,
                                 "docker: no such file in the workspace: %.200s",
                                 rel);
        goto out;
    }
    if (fst.mode & DOCKER_MODE_DIR) {
        rc = st->host->set_error(st->host, call, SBX_E_INVALID,
                                 "docker: %.200s is a directory, not a file", rel);
        goto out;
    }
    if (fst.mode & DOCKER_MODE_IRREGULAR_MASK) {
        rc = st->host->set_error(st->host, call, SBX_E_INVALID,
                                 "docker: %.200s is not a regular file", rel);
        goto out;
    }

    char *esc = sbx_http_escape(resolved);
    if (!esc) {
        rc = st->host->set_error(st->host, call, SBX_E_NOMEM, "out of memory");
        goto out;
    }
    char url[3 * 8192 + 256];
    docker_path(st, url, sizeof url, "/containers/%s/archive?path=%s", sb->id, esc);
    free(esc);
    struct docker_cancel dc;
    docker_cancel_init(&dc, st->host, call);
    struct sbx_http_request req = {0};
    req.method = "GET";
    req.path = url;
    req.cancel = &dc.c;
    struct pull *p = calloc(1, sizeof *p);
    if (!p) {
        rc = st->host->set_error(st->host, call, SBX_E_NOMEM, "out of memory");
        goto out;
    }
    rc = sbx_http_start(st->http, &req, &p->x, &p->err);
    if (rc != SBX_OK) {
        if (rc == SBX_E_NOT_FOUND)
            rc = st->host->set_error(st->host, call, SBX_E_NOT_FOUND,
                                     "docker: no such file in the workspace: %.200s",
                                     rel);
        else
            rc = docker_report(st, call, &p->err, "reading %.200s", rel);
        free(p);
        goto out;
    }
    struct archive *a = archive_read_new();
    if (!a) {
        sbx_http_xfer_free(p->x);
        free(p);
        rc = st->host->set_error(st->host, call, SBX_E_NOMEM, "out of memory");
        goto out;
    }
    archive_read_support_format_tar(a);
    struct archive_entry *e = NULL;
    if (archive_read_open(a, p, NULL, pull_read, NULL) != ARCHIVE_OK ||
        archive_read_next_header(a, &e) != ARCHIVE_OK) {
        rc = p->rc != SBX_OK
                 ? docker_report(st, call, &p->err, "reading %.200s", rel)
                 : st->host->set_error(st->host, call, SBX_E_PROTOCOL,
                                       "docker: reading %.200s: bad archive from "
                                       "the daemon: %s",
                                       rel, archive_error_string(a));
        goto close;
    }
    if (archive_entry_filetype(e) != AE_IFREG) {
        rc = st->host->set_error(st->host, call, SBX_E_INVALID,
                                 "docker: %.200s is not a regular file", rel);
        goto close;
    }
    char *buf = malloc(CHUNK);
    if (!buf) {
        rc = st->host->set_error(st->host, call, SBX_E_NOMEM, "out of memory");
        goto close;
    }
    for (;;) {
        la_ssize_t n = archive_read_data(a, buf, CHUNK);
        if (n == 0)
            break;
        if (n < 0) {
            rc = p->rc != SBX_OK
                     ? docker_report(st, call, &p->err, "reading %.200s", rel)
                     : st->host->set_error(st->host, call, SBX_E_PROTOCOL,
                                           "docker: reading %.200s: %s", rel,
                                           archive_error_string(a));
            break;
        }
        if (sink && sink->write) {
            int s = sink->write(sink->ctx, buf, (size_t)n);
            if (s != 0) {
                rc = st->host->set_error(st->host, call, s,
                                         "docker: reading %.200s: the sink "
                                         "stopped the transfer (%s)",
                                         rel, sbx_strerror((sbx_status)s));
                break;
            }
        }
    }
    free(buf);
close:
    archive_read_free(a);
    sbx_http_xfer_free(p->x);
    free(p);
out:
    free(rel);
    free(resolved);
    return rc;
}

/* ---- writing ---------------------------------------------------------- */

/* An unnamed, close-on-exec temporary file in TMPDIR (or /tmp). */
static int spool_open(void)
{
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir)
        dir = "/tmp";
    int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC | O_EXCL, 0600);
    if (fd >= 0)
        return fd;
    char tmpl[4096];
    snprintf(tmpl, sizeof tmpl, "%s/sbx-docker-XXXXXX", dir);
    fd = mkostemp(tmpl, O_CLOEXEC);
    if (fd >= 0)
        unlink(tmpl);
    return fd;
}

/* Copy the source to fd; *size receives the byte count. -1 when the
 * source failed (it said why), -2 on a local write error (errno set). */
static int spool_fill(int fd, const struct sbx_source *src, int64_t *size)
{
    char *buf = malloc(CHUNK);
    if (!buf) {
        errno = ENOMEM;
        return -2;
    }
    int64_t total = 0;
    int rc = 0;
    for (;;) {
        long n = src->read(src->ctx, buf, CHUNK);
        if (n < 0) {
            rc = -1;
            break;
        }
        if (n == 0)
            break;
        size_t off = 0;
        while (off < (size_t)n) {
            ssize_t w = write(fd, buf + off, (size_t)n - off);
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0) {
                rc = -2;
                goto out;
            }
            off += (size_t)w;
        }
        total += n;
    }
out:
    free(buf);
    *size = total;
    return rc;
}

/* The upload: libarchive writes tar blocks into `pending`; curl pulls
 * them through the source interface. */
struct tar_gen {
    struct archive *a;
    unsigned char *pending;
    size_t pend_len, pend_off, pend_cap;
    int fd;            /* spooled file data */
    int64_t data_left; /* bytes of the file not yet handed to libarchive */
    int stage;         /* 0: data, 1: closed */
    int failed;
    char error[256];
    char *databuf;
};

static la_ssize_t tar_sink(struct archive *a, void *ud, const void *buf, size_t n)
{
    struct tar_gen *g = ud;
    (void)a;
    if (g->pend_len + n > g->pend_cap) {
        size_t cap = g->pend_cap ? g->pend_cap : CHUNK;
        while (cap < g->pend_len + n)
            cap *= 2;
        unsigned char *more = realloc(g->pending, cap);
        if (!more)
            return -1;
        g->pending = more;
        g->pend_cap = cap;
    }
    memcpy(g->pending + g->pend_len, buf, n);
    g->pend_len += n;
    return (la_ssize_t)n;
}

static long tar_read(void *ctx, void *buf, size_t cap)
{
    struct tar_gen *g = ctx;
    while (g->pend_off == g->pend_len) {
        g->pend_off = g->pend_len = 0;
        if (g->stage == 1)
            return 0;
        if (g->data_left > 0) {
            size_t want = g->data_left < CHUNK ? (size_t)g->data_left : CHUNK;
            ssize_t r = read(g->fd, g->databuf, want);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0) {
                snprintf(g->error, sizeof g->error, "reading the spooled data: %s",
                         r < 0 ? strerror(errno) : "unexpected end");
                g->failed = 1;
                return -1;
            }
            if (archive_write_data(g->a, g->databuf, (size_t)r) != r) {
                snprintf(g->error, sizeof g->error, "%s",
                         archive_error_string(g->a));
                g->failed = 1;
                return -1;
            }
            g->data_left -= r;
        } else {
            if (archive_write_close(g->a) != ARCHIVE_OK) {
                snprintf(g->error, sizeof g->error, "%s",
                         archive_error_string(g->a));
                g->failed = 1;
                return -1;
            }
            g->stage = 1;
        }
    }
    size_t n = g->pend_len - g->pend_off;
    if (n > cap)
        n = cap;
    memcpy(buf, g->pending + g->pend_off, n);
    g->pend_off += n;
    return (long)n;
}

static int add_entry(struct archive *a, const char *name, int dir, unsigned perm,
                     int64_t size, int64_t uid, int64_t gid)
{
    struct archive_entry *e = archive_entry_new();
    if (!e)
        return -1;
    archive_entry_set_pathname_utf8(e, name);
    archive_entry_set_filetype(e, dir ? AE_IFDIR : AE_IFREG);
    archive_entry_set_perm(e, perm);
    archive_entry_set_uid(e, uid);
    archive_entry_set_gid(e, gid);
    archive_entry_set_size(e, dir ? 0 : size);
    archive_entry_set_mtime(e, time(NULL), 0);
    int rc = archive_write_header(a, e);
    archive_entry_free(e);
    return rc == ARCHIVE_OK ? 0 : -1;
}

static void random_name(char *out, size_t cap)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned char r[8];
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, r, sizeof r) != (ssize_t)sizeof r)
        memcpy(r, &ts.tv_nsec, sizeof r < sizeof ts.tv_nsec ? sizeof r : sizeof ts.tv_nsec);
    if (fd >= 0)
        close(fd);
    snprintf(out, cap, ".sbx-%02x%02x%02x%02x%02x%02x%02x%02x.tmp", r[0], r[1], r[2],
             r[3], r[4], r[5], r[6], r[7]);
}

int docker_write_file(sbx_sandbox *sb, sbx_call *call, const char *path,
                      const struct sbx_source *src, unsigned mode)
{
    struct docker_state *st = sb->st;
    char *rel = NULL, *resolved = NULL;
    int fd = -1;
    struct tar_gen g = {0};
    g.fd = -1;
    const char *root;
    int rc = docker_path_rooted(sb, call, "write", path, &root, &rel);
    if (rc != SBX_OK)
        return rc;
    if (!src || !src->read) {
        rc = st->host->set_error(st->host, call, SBX_E_INVALID,
                                 "docker: write %.200s: no source", rel);
        goto out;
    }
    unsigned perm = mode ? (mode & 07777) : 0644;

    /* Resolve first: a refused path must not consume the source. */
    size_t existing;
    struct docker_stat fst;
    rc = docker_resolve(sb, call, root, rel, &resolved, &existing, &fst);
    if (rc != SBX_OK)
        goto out;
    if (fst.exists && (fst.mode & DOCKER_MODE_DIR)) {
        rc = st->host->set_error(st->host, call, SBX_E_INVALID,
                                 "docker: %.200s is a directory", rel);
        goto out;
    }

    fd = spool_open();
    if (fd < 0) {
        rc = st->host->set_error(st->host, call, SBX_E_IO,
                                 "docker: write %.200s: cannot create a temporary "
                                 "file: %s",
                                 rel, strerror(errno));
        goto out;
    }
    int64_t size = 0;
    int s = spool_fill(fd, src, &size);
    if (s == -1) {
        rc = SBX_E_IO; /* the source has reported its error */
        goto out;
    }
    if (s == -2 || lseek(fd, 0, SEEK_SET) != 0) {
        rc = st->host->set_error(st->host, call, SBX_E_IO,
                                 "docker: write %.200s: spooling to a temporary "
                                 "file failed: %s",
                                 rel, strerror(errno));
        goto out;
    }

    /* Components: the resolved path is <existing part>/<missing...>/<name>.
     * The upload goes to the deepest existing directory. */
    size_t ncomp = 1;
    for (const char *c = rel; *c; c++)
        ncomp += *c == '/';
    size_t base_levels = existing < ncomp ? existing : ncomp - 1; /* under root */
    /* split `resolved` into base dir and the tail below it */
    size_t tail_comps = ncomp - base_levels;
    char *cut = resolved + strlen(resolved);
    for (size_t i = 0; i < tail_comps; i++) {
        while (cut > resolved && cut[-1] != '/')
            cut--;
        if (cut > resolved)
            cut--;
    }
    *cut = '\0';
    const char *base = resolved;     /* existing directory */
    const char *tail = cut + 1;      /* missing dirs + file name */
    char tmpname[40];
    random_name(tmpname, sizeof tmpname);

    g.a = archive_write_new();
    g.databuf = malloc(CHUNK);
    g.fd = fd;
    g.data_left = size;
    if (!g.a || !g.databuf) {
        rc = st->host->set_error(st->host, call, SBX_E_NOMEM, "out of memory");
        goto out;
    }
    archive_write_set_format_pax_restricted(g.a);
    archive_write_set_bytes_per_block(g.a, 10240);
    if (archive_write_open(g.a, &g, NULL, tar_sink, NULL) != ARCHIVE_OK) {
        rc = st->host->set_error(st->host, call, SBX_E_INTERNAL,
                                 "docker: write: %s", archive_error_string(g.a));
        goto out;
    }
    /* directory entries for each missing component, then the file */
    int64_t uid, gid;
    const char *owner_query = docker_upload_owner(&st->cfg, &uid, &gid);
    char entry[8192 + 64];
    const char *slash = tail;
    int ok = 1;
    while (ok && (slash = strchr(slash, '/'))) {
        snprintf(entry, sizeof entry, "%.*s/", (int)(slash - tail), tail);
        ok = add_entry(g.a, entry, 1, 0755, 0, uid, gid) == 0;
        slash++;
    }
    const char *fname = strrchr(tail, '/');
    size_t dirlen = fname ? (size_t)(fname - tail) + 1 : 0;
    snprintf(entry, sizeof entry, "%.*s%s", (int)dirlen, tail, tmpname);
    if (!ok || add_entry(g.a, entry, 0, perm, size, uid, gid) != 0) {
        rc = st->host->set_error(st->host, call, SBX_E_INTERNAL,
                                 "docker: write: %s", archive_error_string(g.a));
        goto out;
    }

    char *esc = sbx_http_escape(base);
    if (!esc) {
        rc = st->host->set_error(st->host, call, SBX_E_NOMEM, "out of memory");
        goto out;
    }
    char url[3 * 8192 + 256];
    docker_path(st, url, sizeof url,
                "/containers/%s/archive?path=%s&noOverwriteDirNonDir=true%s",
                sb->id, esc, owner_query);
    free(esc);
    struct docker_cancel dc;
    docker_cancel_init(&dc, st->host, call);
    struct sbx_source body = {&g, tar_read};
    struct sbx_http_request req = {0};
    req.method = "PUT";
    req.path = url;
    req.content_type = "application/x-tar";
    req.body_src = &body;
    req.body_src_len = -1;
    req.cancel = &dc.c;
    sbx_http_error err;
    rc = sbx_http_request(st->http, &req, NULL, NULL, &err);
    if (rc != SBX_OK) {
        if (g.failed)
            rc = st->host->set_error(st->host, call, SBX_E_IO,
                                     "docker: write %.200s: building the archive "
                                     "failed: %s",
                                     rel, g.error);
        else
            rc = docker_report(st, call, &err, "writing %.200s", rel);
        goto out;
    }

    /* publish: rename the temporary file over the destination */
    {
        size_t blen = strlen(base);
        size_t need = blen + 1 + strlen(tail) + 1;
        char *from = malloc(need + sizeof tmpname);
        char *to = malloc(need);
        if (!from || !to) {
            free(from);
            free(to);
            rc = st->host->set_error(st->host, call, SBX_E_NOMEM, "out of memory");
            goto out;
        }
        snprintf(from, need + sizeof tmpname, "%s/%.*s%s", base, (int)dirlen, tail,
                 tmpname);
        snprintf(to, need, "%s/%s", base, tail);
        const char *argv[] = {"mv", "-f", from, to, NULL};
        int code = -1;
        char out_text[512];
        rc = docker_exec_helper(sb, call, argv, 60000, &code, out_text,
                                sizeof out_text);
        if (rc == SBX_OK && code != 0) {
            const char *rm[] = {"rm", "-f", from, NULL};
            int ignored;
            docker_exec_helper(sb, NULL, rm, 30000, &ignored, NULL, 0);
            rc = st->host->set_error(st->host, call, SBX_E_IO,
                                     "docker: write %.200s: publishing the file "
                                     "failed (mv exited %d: %.300s)",
                                     rel, code, out_text);
        } else if (rc != SBX_OK && rc != SBX_E_CANCELLED) {
            /* docker_exec_helper already reported */
        }
        free(from);
        free(to);
    }
out:
    if (g.a)
        archive_write_free(g.a);
    free(g.pending);
    free(g.databuf);
    if (fd >= 0)
        close(fd);
    free(rel);
    free(resolved);
    return rc;
}
