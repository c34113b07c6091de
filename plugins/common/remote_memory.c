/*
 * remote_memory.c - memory stores (SBX_CAP_MEMORY) in a remote sandbox
 * (see remote_memory.h for what a provider supplies): the tree
 * of each attached store is a plain directory /mnt/memory/<slug> in the
 * sandbox, filled from the host's archive and compared after each command
 * with a baseline kept on this machine.
 *
 * Layout below <state_dir>/<sandbox id>/ (out of the sandbox's reach,
 * surviving release and attach):
 *   attachments   one line per store attached at create: "rw <slug>" or
 *                 "ro <slug>"
 *   <slug>.base   the baseline: "<sha256> <size> <path>" per regular file
 *                 of the tree as last loaded or accepted
 *
 * The sandbox's root can write anything, so a read-only attachment is only
 * root-owned (not writable by the sandbox user); what changed there anyway
 * is reported like any change and the host refuses to commit it.
 *
 * A load validates the archive on the host (regular files and directories,
 * names checked like an export), rewrites it as a plain tar into a host
 * temporary file while hashing every file (the baseline), uploads that and
 * lets tar extract it into a staging directory swapped in for the tree.
 * A diff lists the tree with one command (find -printf with NUL-separated
 * fields, sha256sum -z: no name can be confused with another), compares it
 * with the baseline and fetches the new or changed files with one tar of
 * exactly those names made in the sandbox (the list uploaded beside the
 * tree), spooled to a host temporary file and copied into the diff's
 * archive hashed on the way: the baseline then holds what the host
 * received, not what the sandbox claimed. Symlinks and other non-regular
 * entries are reported as what they are, never followed. When the
 * provider's command output is not byte-exact (ops->download set), the
 * listing and the tar are written to a file beside the trees and
 * downloaded instead of read from stdout.
 */
#include "remote_memory.h"

#include "archive_sink.h"
#include "call_error.h"
#include "fd_source.h"
#include "memory_slug.h"
#include "path_list.h"

#include "archive_check.h"
#include "archive_pax.h"
#include "hex.h"
#include "mkdirs.h"
#include "tree_remove.h"
#include "utf8.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SBXP_RMEM_ROOT "/mnt/memory"
/* Most stores one sandbox attaches (as the docker provider). */
#define MEMORY_MAX 64
/* Bound of a tree's listing (a hostile sandbox could print forever). */
#define LIST_MAX (64u * 1024u * 1024u)

/* Set the call's error (or log it without a call) and return status
 * (call_error.c). */
#define rm_error(m, call, ...) sbxp_call_error((m)->host, (call), __VA_ARGS__)

void sbxp_rmem_init(struct sbxp_rmem *m, const struct sbx_host *host, const char *provider,
                    const char *state_dir, const char *id, const struct sbxp_rmem_ops *ops,
                    void *ctx)
{
    memset(m, 0, sizeof *m);
    m->host = host;
    m->provider = provider;
    m->state_dir = state_dir;
    m->id = id;
    m->ops = ops;
    m->ctx = ctx;
}

int sbxp_rmem_state_dir(const struct sbx_host *host, sbx_call *call, const char *provider,
                        const char *configured, char **out)
{
    char def[4096];
    const char *sd = configured;
    if (!sd) {
        const char *xdg = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
        if (xdg && xdg[0] == '/')
            snprintf(def, sizeof def, "%s/sbx/%s", xdg, provider);
        else if (home && home[0] == '/')
            snprintf(def, sizeof def, "%s/.local/state/sbx/%s", home, provider);
        else
            snprintf(def, sizeof def, "/var/lib/sbx/%s", provider);
        sd = def;
    } else if (sd[0] != '/' || strlen(sd) > 3000) {
        return host->set_error(host, call, SBX_E_CONFIG,
                               "providers.%s.state_dir: want an absolute path", provider);
    }
    if (!(*out = strdup(sd)))
        return host->set_error(host, call, SBX_E_NOMEM, "out of memory");
    return SBX_OK;
}

int sbxp_rmem_script(struct sbxp_rmem *m, sbx_call *call, const char *what,
                     const char *const *argv)
{
    char msg[512];
    int code = -1;
    int rc = m->ops->run(m->ctx, call, argv, NULL, 120000, &code, msg, sizeof msg);
    if (rc != SBX_OK)
        return rc;
    size_t n = strlen(msg);
    while (n && msg[n - 1] == '\n')
        msg[--n] = '\0';
    if (code != 0)
        return rm_error(m, call, code == 3 ? SBX_E_INVALID : SBX_E_IO,
                        "%s: %s in sandbox %s: %s%s(exit %d)", m->provider, what, m->id, msg,
                        n ? " " : "", code);
    return SBX_OK;
}

/* Run argv as root with its stdout byte-exact in out: read from the
 * command, or (ops->download) written to a file beside the trees,
 * downloaded and removed. */
static int run_out(struct sbxp_rmem *m, sbx_call *call, const char *slug,
                   const char *const *argv, const struct sbx_sink *out, int *code, char *msg,
                   size_t cap)
{
    if (!m->ops->download)
        return m->ops->run(m->ctx, call, argv, out, 0, code, msg, cap);
    char file[128];
    snprintf(file, sizeof file, SBXP_RMEM_ROOT "/.sbx-out-%s", slug);
    const char *wrap[16] = {"sh", "-c", "o=$1; shift; \"$@\" >\"$o\"", "sh", file};
    size_t n = 5;
    for (size_t i = 0; argv[i] && n < 15; i++)
        wrap[n++] = argv[i];
    wrap[n] = NULL;
    int rc = m->ops->run(m->ctx, call, wrap, NULL, 0, code, msg, cap);
    if (rc == SBX_OK)
        rc = m->ops->download(m->ctx, call, file, out, "reading a memory helper's output");
    const char *rm[] = {"rm", "-f", file, NULL};
    int rcode;
    char rmsg[128];
    m->ops->run(m->ctx, NULL, rm, NULL, 60000, &rcode, rmsg, sizeof rmsg);
    return rc;
}

/* A record of path_list.h: path comes first. */
struct rm_file {
    char *path;
    int64_t size;
    char sha[65]; /* "" when the sandbox gave no hash */
};

struct sbxp_rmem_list {
    struct rm_file *v;
    size_t n, cap;
};

static void list_free(struct sbxp_rmem_list *l)
{
    if (!l)
        return;
    sbxp_path_list_free(l->v, l->n, sizeof *l->v);
    memset(l, 0, sizeof *l);
}

static int list_add(struct sbxp_rmem_list *l, const char *path, int64_t size, const char *sha)
{
    struct rm_file *v = sbxp_path_list_append(l->v, l->n, &l->cap, sizeof *v, path);
    if (!v)
        return -1;
    l->v = v;
    struct rm_file *f = &l->v[l->n];
    f->size = size;
    snprintf(f->sha, sizeof f->sha, "%s", sha ? sha : "");
    l->n++;
    return 0;
}

static void list_sort(struct sbxp_rmem_list *l)
{
    sbxp_path_list_sort(l->v, l->n, sizeof *l->v);
}

static struct rm_file *list_find(const struct sbxp_rmem_list *l, const char *path)
{
    return sbxp_path_list_find(l->v, l->n, sizeof *l->v, path);
}

/* A name the host commits: UTF-8 without control characters. */
static int name_committable(const char *p)
{
    for (const unsigned char *c = (const unsigned char *)p; *c; c++)
        if (*c < 0x20 || *c == 0x7f)
            return 0;
    return sbxs_utf8_valid(p, strlen(p));
}

/* ---- host-side state ----------------------------------------------------- */

/* A sandbox id usable as a directory name (the control plane chose it). */
static int id_safe(const char *id)
{
    size_t n = 0;
    for (; id[n]; n++)
        if (!((id[n] >= 'a' && id[n] <= 'z') || (id[n] >= 'A' && id[n] <= 'Z') ||
              (id[n] >= '0' && id[n] <= '9') || id[n] == '-' || id[n] == '_'))
            return 0;
    return n > 0;
}

static void state_path(const struct sbxp_rmem *m, const char *leaf, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s/%s%s%s", m->state_dir, m->id, leaf ? "/" : "",
             leaf ? leaf : "");
}

/* Write path atomically (temporary file, fsync, rename). */
static int write_atomic(struct sbxp_rmem *m, sbx_call *call, const char *path,
                        int (*fill)(FILE *f, const void *ud), const void *ud)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "we");
    if (!f)
        return rm_error(m, call, SBX_E_IO, "%s: cannot write %s: %s", m->provider, tmp,
                         strerror(errno));
    int bad = fill(f, ud) != 0;
    bad |= fflush(f) != 0 || fsync(fileno(f)) != 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return rm_error(m, call, SBX_E_IO, "%s: cannot write %s: %s", m->provider, path,
                         strerror(e));
    }
    return SBX_OK;
}

static int fill_attachments(FILE *f, const void *ud)
{
    const struct sbxp_rmem *m = ud;
    for (size_t i = 0; i < m->n; i++)
        if (fprintf(f, "%s %s\n", m->v[i].read_write ? "rw" : "ro", m->v[i].slug) < 0)
            return -1;
    return 0;
}

static int fill_baseline(FILE *f, const void *ud)
{
    const struct sbxp_rmem_list *l = ud;
    for (size_t i = 0; i < l->n; i++) {
        const struct rm_file *m = &l->v[i];
        /* never committed (control characters): never a base */
        if (!m->sha[0] || strchr(m->path, '\n'))
            continue;
        if (fprintf(f, "%s %" PRId64 " %s\n", m->sha, m->size, m->path) < 0)
            return -1;
    }
    return 0;
}

static int baseline_write(struct sbxp_rmem *m, sbx_call *call, const char *slug,
                          const struct sbxp_rmem_list *l)
{
    char leaf[80], path[4200];
    snprintf(leaf, sizeof leaf, "%s.base", slug);
    state_path(m, leaf, path, sizeof path);
    return write_atomic(m, call, path, fill_baseline, l);
}

/* The baseline, sorted; a missing file is an empty one (never loaded). */
static int baseline_read(struct sbxp_rmem *m, sbx_call *call, const char *slug,
                         struct sbxp_rmem_list *l)
{
        char leaf[80], path[4200];
    snprintf(leaf, sizeof leaf, "%s.base", slug);
    state_path(m, leaf, path, sizeof path);
    FILE *f = fopen(path, "re");
    if (!f)
        return errno == ENOENT ? SBX_OK
                               : rm_error(m, call, SBX_E_IO, "%s: cannot read %s: %s",
                                           m->provider, path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int rc = SBX_OK;
    while (rc == SBX_OK && (n = getline(&line, &cap, f)) > 0) {
        if (line[n - 1] == '\n')
            line[--n] = '\0';
        char sha[65];
        int64_t size;
        int off = 0;
        if (sscanf(line, "%64[0-9a-f] %" SCNd64 " %n", sha, &size, &off) != 2 || !off ||
            strlen(sha) != 64 || !line[off])
            rc = rm_error(m, call, SBX_E_IO, "%s: the memory baseline %s is damaged",
                           m->provider, path);
        else if (list_add(l, line + off, size, sha) != 0)
            rc = rm_error(m, call, SBX_E_NOMEM, "out of memory");
    }
    free(line);
    fclose(f);
    list_sort(l);
    return rc;
}

/* An unlinked temporary file beside the sandbox's state. */
static int temp_file(struct sbxp_rmem *m, sbx_call *call)
{
    char dir[4200];
    state_path(m, NULL, dir, sizeof dir);
    int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) {
        char tmpl[4300];
        snprintf(tmpl, sizeof tmpl, "%s/.tmp-XXXXXX", dir);
        fd = mkostemp(tmpl, O_CLOEXEC);
        if (fd >= 0)
            unlink(tmpl);
    }
    if (fd < 0)
        rm_error(m, call, SBX_E_IO, "%s: cannot make a temporary file in %s: %s",
                  m->provider, dir, strerror(errno));
    return fd;
}

/* ---- attachments ---------------------------------------------------------- */

void sbxp_rmem_free(struct sbxp_rmem *m)
{
    for (size_t i = 0; i < m->n; i++) {
        list_free(m->v[i].last);
        free(m->v[i].last);
    }
    free(m->v);
    m->v = NULL;
    m->n = 0;
}

static struct sbxp_rmem_attachment *memory_find(struct sbxp_rmem *m, sbx_call *call,
                                                const char *slug)
{
    for (size_t i = 0; i < m->n; i++)
        if (slug && strcmp(m->v[i].slug, slug) == 0)
            return &m->v[i];
    rm_error(m, call, SBX_E_NOT_FOUND,
              "%s: memory store \"%.63s\" is not attached to sandbox %s (attachments are "
              "fixed at create)",
              m->provider, slug ? slug : "", m->id);
    return NULL;
}

static int memory_add(struct sbxp_rmem *m, const char *slug, int rw)
{
    struct sbxp_rmem_attachment *grown = realloc(m->v, (m->n + 1) * sizeof *grown);
    if (!grown)
        return -1;
    m->v = grown;
    struct sbxp_rmem_attachment *a = &m->v[m->n++];
    memset(a, 0, sizeof *a);
    snprintf(a->slug, sizeof a->slug, "%s", slug);
    a->read_write = rw;
    return 0;
}

int sbxp_rmem_create(struct sbxp_rmem *m, sbx_call *call, const struct sbx_create_args *args)
{
        sbxp_rmem_free(m);
    if (args->size < SBX_CREATE_ARGS_SIZE_MEMORY_1_1 || !args->memory || !args->memory[0])
        return SBX_OK;
    for (size_t n = 0; args->memory[n]; n++) {
        const struct sbx_memory_attachment *a = args->memory[n];
        if (n == MEMORY_MAX)
            return rm_error(m, call, SBX_E_INVALID, "%s: at most %d memory stores per sandbox",
                             m->provider, MEMORY_MAX);
        if (a->size < offsetof(struct sbx_memory_attachment, slug) + sizeof a->slug ||
            !sbxp_memory_slug_valid(a->slug) || a->access > SBX_MEMORY_READ_WRITE)
            return rm_error(m, call, SBX_E_INVALID, "%s: memory attachment %zu is malformed",
                             m->provider, n);
        for (size_t j = 0; j < m->n; j++)
            if (!strcmp(m->v[j].slug, a->slug))
                return rm_error(m, call, SBX_E_INVALID,
                                 "%s: memory store \"%s\" attached twice", m->provider,
                                 a->slug);
        if (memory_add(m, a->slug, a->access == SBX_MEMORY_READ_WRITE) != 0)
            return rm_error(m, call, SBX_E_NOMEM, "out of memory");
    }
    if (!id_safe(m->id))
        return rm_error(m, call, SBX_E_PROTOCOL,
                         "%s: sandbox id \"%.64s\" cannot name a state directory",
                         m->provider, m->id);
    char dir[4200], failed[4200], path[4300];
    state_path(m, NULL, dir, sizeof dir);
    if (sbxs_mkdirs(dir, 0700, failed, sizeof failed) != 0)
        return rm_error(m, call, SBX_E_IO, "%s: cannot create %s: %s (providers.%s.state_dir)",
                         m->provider, failed, strerror(errno), m->provider);
    state_path(m, "attachments", path, sizeof path);
    int rc = write_atomic(m, call, path, fill_attachments, m);
    if (rc != SBX_OK)
        return rc;
    /* root-owned trees: read-only ones are not writable by the sandbox
     * user, read-write ones by every user (they share the attachment) */
    char script[8192];
    size_t off = (size_t)snprintf(script, sizeof script, "set -e; mkdir -p " SBXP_RMEM_ROOT "%s",
                                  m->ops->shared_root ? "" : "; chmod 755 " SBXP_RMEM_ROOT);
    for (size_t i = 0; i < m->n && off < sizeof script; i++)
        off += (size_t)snprintf(script + off, sizeof script - off,
                                "; mkdir -p " SBXP_RMEM_ROOT "/%s; chmod %s " SBXP_RMEM_ROOT "/%s",
                                m->v[i].slug, m->v[i].read_write ? "777" : "755",
                                m->v[i].slug);
    const char *argv[] = {"sh", "-c", script, NULL};
    return sbxp_rmem_script(m, call, "creating the memory trees", argv);
}

int sbxp_rmem_open(struct sbxp_rmem *m, sbx_call *call)
{
        char path[4300];
    if (!id_safe(m->id))
        return SBX_OK; /* create refused memory for it: none recorded */
    state_path(m, "attachments", path, sizeof path);
    FILE *f = fopen(path, "re");
    if (!f)
        return errno == ENOENT ? SBX_OK
                               : rm_error(m, call, SBX_E_IO, "%s: cannot read %s: %s",
                                           m->provider, path, strerror(errno));
    char line[128];
    int rc = SBX_OK;
    while (rc == SBX_OK && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        int rw = !strncmp(line, "rw ", 3);
        if ((!rw && strncmp(line, "ro ", 3)) || !sbxp_memory_slug_valid(line + 3) ||
            m->n == MEMORY_MAX)
            rc = rm_error(m, call, SBX_E_IO, "%s: %s is damaged", m->provider, path);
        else if (memory_add(m, line + 3, rw) != 0)
            rc = rm_error(m, call, SBX_E_NOMEM, "out of memory");
    }
    fclose(f);
    return rc;
}

void sbxp_rmem_forget(const struct sbx_host *host, const char *provider, const char *state_dir,
                      const char *id)
{
    if (!id || !id_safe(id))
        return; /* never had a state directory */
    int fd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return;
    int e = sbxs_remove_tree(fd, id);
    if (e < 0 && e != -ENOENT)
        host->log(host, SBX_LOG_WARN, "%s: cannot remove %s/%s: %s", provider, state_dir, id,
                  strerror(-e));
    close(fd);
}

/* ---- memory_load ---------------------------------------------------------- */

struct src_reader {
    const struct sbx_source *src;
    char buf[65536];
    int failed; /* the source's read failed (it set the error) */
};

static la_ssize_t src_read(struct archive *a, void *ud, const void **out)
{
    struct src_reader *r = ud;
    long n = r->src->read(r->src->ctx, r->buf, sizeof r->buf);
    if (n < 0) {
        r->failed = 1;
        archive_set_error(a, EIO, "the source failed");
        return -1;
    }
    *out = r->buf;
    return (la_ssize_t)n;
}

struct fd_out {
    int fd;
};

static la_ssize_t fd_write(struct archive *a, void *ud, const void *buf, size_t len)
{
    struct fd_out *o = ud;
    size_t done = 0;
    while (done < len) {
        ssize_t n = write(o->fd, (const char *)buf + done, len - done);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            archive_set_error(a, errno, "%s", strerror(errno));
            return -1;
        }
        done += (size_t)n;
    }
    return (la_ssize_t)len;
}

static void sha_hex(EVP_MD_CTX *md, char out[65])
{
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned dl = 0;
    EVP_DigestFinal_ex(md, d, &dl);
    sbxs_hex(d, 32, out);
}

/* Validate the host's archive and rewrite it into fd as a plain tar with
 * the tree's modes, hashing every file into files. */
static int load_rewrite(struct sbxp_rmem *m, sbx_call *call, const char *slug, int rw,
                        const struct sbx_source *tar, int fd, struct sbxp_rmem_list *files)
{
        struct src_reader *r = malloc(sizeof *r);
    struct archive *in = archive_read_new(), *outa = archive_write_new();
    struct archive_entry *oe = archive_entry_new();
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    sbxs_archive_check *chk = NULL;
    struct sbxs_error err;
    sbxs_error_clear(&err);
    struct fd_out o = {fd};
    char *buf = malloc(65536);
    int rc = SBX_OK;
    if (!r || !in || !outa || !oe || !md || !buf ||
        sbxs_archive_check_new(NULL, &chk, &err) != SBX_OK) {
        rc = rm_error(m, call, SBX_E_NOMEM, "out of memory");
        goto out;
    }
    r->src = tar;
    r->failed = 0;
    archive_read_support_format_tar(in);
    if (sbxs_archive_write_pax_bytes(outa) != ARCHIVE_OK ||
        archive_write_open2(outa, &o, NULL, fd_write, NULL, NULL) != ARCHIVE_OK ||
        archive_read_open(in, r, NULL, src_read, NULL) != ARCHIVE_OK) {
        rc = r->failed ? SBX_E_IO
                       : rm_error(m, call, SBX_E_INVALID, "%s: memory store \"%s\": %s",
                                   m->provider, slug, archive_error_string(in));
        goto out;
    }
    struct archive_entry *e;
    char name[4096];
    for (;;) {
        int h = archive_read_next_header(in, &e);
        if (h == ARCHIVE_EOF)
            break;
        if (h < ARCHIVE_WARN) {
            rc = r->failed ? SBX_E_IO
                           : rm_error(m, call, SBX_E_INVALID,
                                       "%s: memory store \"%s\": not a valid tar: %s",
                                       m->provider, slug, archive_error_string(in));
            goto out;
        }
        int is_dir = 0;
        if (sbxs_archive_check_entry(chk, e, name, sizeof name, &is_dir, &err) != SBX_OK) {
            rc = rm_error(m, call, SBX_E_INVALID, "%s: memory store \"%s\": %s",
                           m->provider, slug, err.message);
            goto out;
        }
        if (!name[0])
            continue;
        archive_entry_clear(oe);
        archive_entry_copy_pathname(oe, name);
        archive_entry_set_filetype(oe, is_dir ? AE_IFDIR : AE_IFREG);
        archive_entry_set_perm(oe, is_dir ? (rw ? 0777 : 0755) : (rw ? 0666 : 0644));
        int64_t size = is_dir ? 0 : archive_entry_size(e);
        archive_entry_set_size(oe, size);
        if (archive_write_header(outa, oe) != ARCHIVE_OK)
            goto write_failed;
        if (is_dir)
            continue;
        EVP_DigestInit_ex(md, EVP_sha256(), NULL);
        int64_t got = 0;
        for (;;) {
            la_ssize_t n = archive_read_data(in, buf, 65536);
            if (n == 0)
                break;
            if (n < 0) {
                rc = r->failed ? SBX_E_IO
                               : rm_error(m, call, SBX_E_INVALID,
                                           "%s: memory store \"%s\": reading %s: %s",
                                           m->provider, slug, name,
                                           archive_error_string(in));
                goto out;
            }
            if (sbxs_archive_check_data(chk, (uint64_t)n, &err) != SBX_OK) {
                rc = rm_error(m, call, SBX_E_INVALID, "%s: memory store \"%s\": %s",
                               m->provider, slug, err.message);
                goto out;
            }
            EVP_DigestUpdate(md, buf, (size_t)n);
            if (archive_write_data(outa, buf, (size_t)n) < 0)
                goto write_failed;
            got += n;
        }
        if (got != size) {
            rc = rm_error(m, call, SBX_E_INVALID,
                           "%s: memory store \"%s\": %s is shorter than its header says",
                           m->provider, slug, name);
            goto out;
        }
        char sha[65];
        sha_hex(md, sha);
        if (list_add(files, name, size, sha) != 0) {
            rc = rm_error(m, call, SBX_E_NOMEM, "out of memory");
            goto out;
        }
    }
    if (archive_write_close(outa) == ARCHIVE_OK)
        goto out;
write_failed:
    rc = rm_error(m, call, SBX_E_IO, "%s: memory store \"%s\": staging the archive: %s",
                   m->provider, slug, archive_error_string(outa));
out:
    if (in)
        archive_read_free(in);
    if (outa)
        archive_write_free(outa);
    archive_entry_free(oe);
    EVP_MD_CTX_free(md);
    sbxs_archive_check_free(chk);
    free(buf);
    free(r);
    return rc;
}


/* Extract the uploaded archive into a staging tree and swap it in. */
static const char LOAD_SCRIPT[] =
    "m=" SBXP_RMEM_ROOT "; s=$1; t=$m/.sbx-load-$s; a=$m/.sbx-load-$s.tar\n"
    "rm -rf \"$t\" && mkdir \"$t\" && tar -xf \"$a\" -C \"$t\" --no-same-owner || { rm -rf \"$t\" \"$a\"; exit 1; }\n"
    "rm -f \"$a\"\n"
    "if [ \"$2\" = rw ]; then chmod 777 \"$t\"; else chmod 755 \"$t\"; fi\n"
    "rm -rf \"$m/$s\" && mv \"$t\" \"$m/$s\"\n";

int sbxp_rmem_load(struct sbxp_rmem *m, sbx_call *call, const char *slug,
                    const struct sbx_source *tar)
{
        struct sbxp_rmem_attachment *mem = memory_find(m, call, slug);
    if (!mem)
        return SBX_E_NOT_FOUND;
    list_free(mem->last);
    free(mem->last);
    mem->last = NULL;
    if (m->ops->keep_alive)
        m->ops->keep_alive(m->ctx, call);
    int fd = temp_file(m, call);
    if (fd < 0)
        return SBX_E_IO;
    struct sbxp_rmem_list files = {0};
    int rc = load_rewrite(m, call, slug, mem->read_write, tar, fd, &files);
    struct stat s;
    if (rc == SBX_OK && (fstat(fd, &s) != 0 || lseek(fd, 0, SEEK_SET) != 0))
        rc = rm_error(m, call, SBX_E_IO, "%s: staging memory store \"%s\": %s",
                       m->provider, slug, strerror(errno));
    char remote[128];
    snprintf(remote, sizeof remote, SBXP_RMEM_ROOT "/.sbx-load-%s.tar", slug);
    if (rc == SBX_OK) {
        struct sbxp_fd_source fs;
        struct sbx_source src = sbxp_fd_source(&fs, fd, (int64_t)s.st_size);
        char what[128];
        snprintf(what, sizeof what, "uploading memory store \"%s\"", slug);
        rc = m->ops->upload(m->ctx, call, remote, &src, what);
    }
    close(fd);
    if (rc == SBX_OK) {
        const char *argv[] = {"sh", "-c", LOAD_SCRIPT, "sh", slug,
                              mem->read_write ? "rw" : "ro", NULL};
        rc = sbxp_rmem_script(m, call, "loading a memory store", argv);
    }
    list_sort(&files);
    if (rc == SBX_OK)
        rc = baseline_write(m, call, slug, &files);
    list_free(&files);
    return rc;
}

/* ---- listing a tree in the sandbox --------------------------------------- */

/* Per entry 4 NUL-terminated fields: type (find's %y), size, symlink
 * target, path; then "E"; then sha256sum -z lines "<hex> *./<path>". A
 * tree replaced by a symlink is refused, never followed. */
static const char LIST_SCRIPT[] =
    "d=" SBXP_RMEM_ROOT "/$1\n"
    "[ -L \"$d\" ] && exit 6\n"
    "[ -d \"$d\" ] || exit 3\n"
    "cd \"$d\" || exit 3\n"
    "find . -mindepth 1 -printf '%y\\0%s\\0%l\\0%P\\0' || exit 4\n"
    "printf 'E\\0'\n"
    "find . -mindepth 1 -type f -exec sha256sum -bz -- {} + 2>/dev/null\n"
    "exit 0\n";

struct capture {
    char *buf;
    size_t len, cap;
    int over;
};

static int capture_write(void *ctx, const void *b, size_t len)
{
    struct capture *c = ctx;
    if (c->len + len > LIST_MAX) {
        c->over = 1;
        return SBX_E_INVALID;
    }
    if (c->len + len + 1 > c->cap) {
        size_t cap = c->cap ? c->cap : 65536;
        while (cap < c->len + len + 1)
            cap *= 2;
        char *nb = realloc(c->buf, cap);
        if (!nb)
            return SBX_E_NOMEM;
        c->buf = nb;
        c->cap = cap;
    }
    memcpy(c->buf + c->len, b, len);
    c->len += len;
    c->buf[c->len] = '\0';
    return SBX_OK;
}

/* A non-regular, non-directory entry: reported as what it is. */
struct other {
    char type;
    char *target;
    char *path;
};

struct listing {
    struct sbxp_rmem_list files; /* sorted, with the sandbox's hashes */
    struct other *others;
    size_t nothers;
};

static void listing_free(struct listing *l)
{
    list_free(&l->files);
    for (size_t i = 0; i < l->nothers; i++) {
        free(l->others[i].target);
        free(l->others[i].path);
    }
    free(l->others);
    memset(l, 0, sizeof *l);
}

/* The next NUL-terminated field of [*p, end), or NULL. */
static const char *field(const char **p, const char *end)
{
    const char *s = *p;
    const char *z = s < end ? memchr(s, '\0', (size_t)(end - s)) : NULL;
    if (!z)
        return NULL;
    *p = z + 1;
    return s;
}

static int list_tree(struct sbxp_rmem *m, sbx_call *call, const char *slug, struct listing *out)
{
        memset(out, 0, sizeof *out);
    struct capture c = {0};
    struct sbx_sink sink = SBX_SINK_INIT(&c, capture_write);
    const char *argv[] = {"sh", "-c", LIST_SCRIPT, "sh", slug, NULL};
    char msg[512];
    int code = -1;
    int rc = run_out(m, call, slug, argv, &sink, &code, msg, sizeof msg);
    if (rc != SBX_OK || code != 0) {
        free(c.buf);
        if (c.over)
            return rm_error(m, call, SBX_E_INVALID,
                             "%s: memory store \"%s\": the tree's listing is over %u MiB",
                             m->provider, slug, LIST_MAX >> 20);
        if (rc != SBX_OK)
            return rc;
        return rm_error(m, call, SBX_E_IO, "%s: memory store \"%s\": listing %s/%s: %s",
                         m->provider, slug, SBXP_RMEM_ROOT, slug,
                         code == 6   ? "the tree was replaced by a symlink"
                         : code == 3 ? "the tree is gone"
                                     : msg);
    }
    const char *p = c.buf ? c.buf : "", *end = p + c.len;
    rc = SBX_OK;
    for (;;) {
        const char *type = field(&p, end);
        if (!type || !strcmp(type, "E"))
            break;
        const char *size = field(&p, end), *target = field(&p, end), *path = field(&p, end);
        if (!size || !target || !path || strlen(type) != 1 || !path[0]) {
            rc = rm_error(m, call, SBX_E_PROTOCOL,
                           "%s: memory store \"%s\": malformed tree listing",
                           m->provider, slug);
            break;
        }
        if (type[0] == 'd')
            continue;
        if (type[0] == 'f') {
            if (list_add(&out->files, path, strtoll(size, NULL, 10), NULL) != 0)
                rc = SBX_E_NOMEM;
        } else {
            struct other *g = realloc(out->others, (out->nothers + 1) * sizeof *g);
            if (!g) {
                rc = SBX_E_NOMEM;
                break;
            }
            out->others = g;
            struct other *o = &g[out->nothers++];
            o->type = type[0];
            o->target = strdup(target);
            o->path = strdup(path);
            if (!o->target || !o->path)
                rc = SBX_E_NOMEM;
        }
        if (rc != SBX_OK)
            break;
    }
    list_sort(&out->files);
    for (const char *line; rc == SBX_OK && (line = field(&p, end));) {
        /* "<64 hex> *./<path>" */
        if (strlen(line) < 68 || line[64] != ' ' || line[65] != '*' || line[66] != '.' ||
            line[67] != '/')
            continue;
        struct rm_file *f = list_find(&out->files, line + 68);
        if (f) {
            memcpy(f->sha, line, 64);
            f->sha[64] = '\0';
        }
    }
    free(c.buf);
    if (rc == SBX_E_NOMEM)
        rc = rm_error(m, call, SBX_E_NOMEM, "out of memory");
    if (rc != SBX_OK)
        listing_free(out);
    return rc;
}

/* ---- memory_diff ---------------------------------------------------------- */

/* A sink writing to a host file descriptor. */
static int fd_sink_write(void *ctx, const void *buf, size_t len)
{
    int fd = *(int *)ctx;
    size_t done = 0;
    while (done < len) {
        ssize_t n = write(fd, (const char *)buf + done, len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return SBX_E_IO;
        done += (size_t)n;
    }
    return SBX_OK;
}

struct diff {
    struct sbxp_rmem *m;
    sbx_call *call;
    const char *slug;
    struct archive *a;
    struct sbxp_archive_sink out;
};

static int diff_fail(struct diff *d, const char *path)
{
    if (d->out.status != SBX_OK)
        return d->out.status; /* the sink set the error */
    return rm_error(d->m, d->call, SBX_E_IO,
                    "%s: writing memory file \"%.200s\" to the archive: %s",
                     d->m->provider, path, archive_error_string(d->a));
}

static int diff_header(struct diff *d, const char *path, unsigned type, unsigned perm,
                       int64_t size, const char *target)
{
    struct archive_entry *e = archive_entry_new();
    if (!e)
        return rm_error(d->m, d->call, SBX_E_NOMEM, "out of memory");
    archive_entry_copy_pathname(e, path);
    archive_entry_set_filetype(e, type);
    archive_entry_set_perm(e, perm);
    archive_entry_set_size(e, size);
    if (target)
        archive_entry_copy_symlink(e, target);
    int rc = archive_write_header(d->a, e) < ARCHIVE_WARN ? diff_fail(d, path) : SBX_OK;
    archive_entry_free(e);
    return rc;
}

static int diff_other(struct diff *d, const struct other *o)
{
    switch (o->type) {
    case 'l': return diff_header(d, o->path, AE_IFLNK, 0777, 0, o->target);
    case 'p': return diff_header(d, o->path, AE_IFIFO, 0644, 0, NULL);
    case 'c': return diff_header(d, o->path, AE_IFCHR, 0644, 0, NULL);
    case 'b': return diff_header(d, o->path, AE_IFBLK, 0644, 0, NULL);
    default: return diff_header(d, o->path, AE_IFSOCK, 0644, 0, NULL);
    }
}

/* tar of exactly the listed names (NUL-separated, relative to the tree):
 * no recursion into a directory swapped in since the listing, symlinks
 * archived as symlinks, hard links as the files they are, a name gone
 * since the listing skipped. */
static const char FETCH_SCRIPT[] =
    "d=" SBXP_RMEM_ROOT "/$1; l=" SBXP_RMEM_ROOT "/.sbx-diff-$1.list\n"
    "if [ -L \"$d\" ] || ! cd \"$d\"; then rm -f \"$l\"; exit 3; fi\n"
    "tar -c -f - --format=posix --null --verbatim-files-from --no-unquote "
    "--no-recursion --hard-dereference --ignore-failed-read -T \"$l\" 2>/dev/null\n"
    "r=$?; rm -f \"$l\"; exit $r\n";

/* Fetch the files of want (sorted) in one archive made in the sandbox,
 * spooled to a host temporary file, and copy them into the diff's archive
 * hashed on the way; last receives what was received. */
static int fetch_files(struct diff *d, const struct sbxp_rmem_list *want,
                       struct sbxp_rmem_list *last)
{
    struct sbxp_rmem *m = d->m;
        int list_fd = temp_file(m, d->call);
    if (list_fd < 0)
        return SBX_E_IO;
    int rc = SBX_OK;
    for (size_t i = 0; rc == SBX_OK && i < want->n; i++)
        rc = fd_sink_write(&list_fd, want->v[i].path, strlen(want->v[i].path) + 1);
    struct stat s;
    if (rc != SBX_OK || fstat(list_fd, &s) != 0 || lseek(list_fd, 0, SEEK_SET) != 0) {
        close(list_fd);
        return rm_error(m, d->call, SBX_E_IO, "%s: staging a memory file list: %s",
                         m->provider, strerror(errno));
    }
    char remote[128];
    snprintf(remote, sizeof remote, SBXP_RMEM_ROOT "/.sbx-diff-%s.list", d->slug);
    struct sbxp_fd_source fs;
    struct sbx_source src = sbxp_fd_source(&fs, list_fd, (int64_t)s.st_size);
    char what[128];
    snprintf(what, sizeof what, "uploading the memory file list of \"%s\"", d->slug);
    rc = m->ops->upload(m->ctx, d->call, remote, &src, what);
    close(list_fd);
    if (rc != SBX_OK)
        return rc;

    int tar_fd = temp_file(m, d->call);
    if (tar_fd < 0)
        return SBX_E_IO;
    struct sbx_sink sink = SBX_SINK_INIT(&tar_fd, fd_sink_write);
    const char *argv[] = {"sh", "-c", FETCH_SCRIPT, "sh", d->slug, NULL};
    char msg[512];
    int code = -1;
    rc = run_out(m, d->call, d->slug, argv, &sink, &code, msg, sizeof msg);
    /* 1: a file changed while tar read it (what arrived is hashed here) */
    if (rc == SBX_OK && code != 0 && code != 1)
        rc = rm_error(m, d->call, SBX_E_IO,
                       "%s: memory store \"%s\": reading the changed files: %s",
                       m->provider, d->slug,
                       code == 3 ? "the tree is gone or was replaced by a symlink" : msg);
    if (rc == SBX_OK && lseek(tar_fd, 0, SEEK_SET) != 0)
        rc = rm_error(m, d->call, SBX_E_IO, "%s: spooling memory files: %s",
                       m->provider, strerror(errno));
    if (rc != SBX_OK) {
        close(tar_fd);
        return rc;
    }

    struct archive *in = archive_read_new();
    struct src_reader *r = malloc(sizeof *r);
    struct sbxp_fd_source ts;
    struct sbx_source tsrc = sbxp_fd_source(&ts, tar_fd, -1);
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    char *buf = malloc(65536);
    /* each wanted name at most once, whatever the archive repeats */
    unsigned char *seen = calloc(want->n ? want->n : 1, 1);
    if (!in || !r || !md || !buf || !seen) {
        rc = rm_error(m, d->call, SBX_E_NOMEM, "out of memory");
        goto out;
    }
    r->src = &tsrc;
    r->failed = 0;
    archive_read_support_format_tar(in);
    if (archive_read_open(in, r, NULL, src_read, NULL) != ARCHIVE_OK) {
        rc = rm_error(m, d->call, SBX_E_PROTOCOL,
                       "%s: memory store \"%s\": the sandbox's archive: %s", m->provider,
                       d->slug, archive_error_string(in));
        goto out;
    }
    struct archive_entry *e;
    int h;
    while (rc == SBX_OK && (h = archive_read_next_header(in, &e)) != ARCHIVE_EOF) {
        if (h < ARCHIVE_WARN) {
            rc = rm_error(m, d->call, SBX_E_PROTOCOL,
                           "%s: memory store \"%s\": the sandbox's archive: %s",
                           m->provider, d->slug, archive_error_string(in));
            break;
        }
        const char *name = archive_entry_pathname(e);
        struct rm_file *f = name ? list_find(want, name) : NULL;
        if (!f || seen[f - want->v])
            continue; /* not asked for: skipped with its data */
        seen[f - want->v] = 1;
        unsigned type = archive_entry_filetype(e);
        if (type == AE_IFDIR)
            continue; /* a directory now: its files are listed next time */
        if (type == AE_IFLNK) {
            const char *t = archive_entry_symlink(e);
            rc = diff_header(d, f->path, AE_IFLNK, 0777, 0, t ? t : "");
            continue;
        }
        if (type != AE_IFREG) {
            rc = diff_header(d, f->path, type ? type : AE_IFSOCK, 0644, 0, NULL);
            continue;
        }
        int64_t size = archive_entry_size(e);
        if (size < 0 || (rc = diff_header(d, f->path, AE_IFREG, 0644, size, NULL)) != SBX_OK) {
            if (rc == SBX_OK)
                rc = rm_error(m, d->call, SBX_E_PROTOCOL,
                               "%s: memory store \"%s\": no size for \"%.200s\"",
                               m->provider, d->slug, f->path);
            break;
        }
        EVP_DigestInit_ex(md, EVP_sha256(), NULL);
        int64_t got = 0;
        for (;;) {
            if (m->host->cancelled(m->host, d->call)) {
                rc = rm_error(m, d->call, SBX_E_CANCELLED, "cancelled");
                break;
            }
            la_ssize_t n = archive_read_data(in, buf, 65536);
            if (n == 0)
                break;
            if (n < 0) {
                rc = rm_error(m, d->call, SBX_E_PROTOCOL,
                               "%s: memory store \"%s\": reading \"%.200s\" from the "
                               "sandbox's archive: %s",
                               m->provider, d->slug, f->path, archive_error_string(in));
                break;
            }
            EVP_DigestUpdate(md, buf, (size_t)n);
            if (archive_write_data(d->a, buf, (size_t)n) < 0) {
                rc = diff_fail(d, f->path);
                break;
            }
            got += n;
        }
        if (rc == SBX_OK && got != size)
            rc = rm_error(m, d->call, SBX_E_PROTOCOL,
                           "%s: memory store \"%s\": \"%.200s\" is cut short in the "
                           "sandbox's archive",
                           m->provider, d->slug, f->path);
        char sha[65];
        sha_hex(md, sha);
        if (rc == SBX_OK && list_add(last, f->path, size, sha) != 0)
            rc = rm_error(m, d->call, SBX_E_NOMEM, "out of memory");
    }
out:
    if (in)
        archive_read_free(in);
    EVP_MD_CTX_free(md);
    free(seen);
    free(buf);
    free(r);
    close(tar_fd);
    return rc;
}

int sbxp_rmem_diff(struct sbxp_rmem *m, sbx_call *call, const char *slug, uint32_t flags,
                    const struct sbx_memory_changes *out)
{
        struct sbxp_rmem_attachment *mem = memory_find(m, call, slug);
    if (!mem)
        return SBX_E_NOT_FOUND;
    if (!out || out->size < offsetof(struct sbx_memory_changes, removed) + sizeof out->removed)
        return rm_error(m, call, SBX_E_INVALID,
                         "%s: memory_diff: struct sbx_memory_changes too small",
                         m->provider);
    list_free(mem->last);
    free(mem->last);
    mem->last = NULL;
    if (m->ops->keep_alive)
        m->ops->keep_alive(m->ctx, call);
    struct sbxp_rmem_list base = {0}, want = {0};
    struct listing cur;
    int rc = baseline_read(m, call, slug, &base);
    if (rc != SBX_OK) {
        list_free(&base);
        return rc;
    }
    rc = list_tree(m, call, slug, &cur);
    if (rc != SBX_OK) {
        list_free(&base);
        return rc;
    }
    struct diff d = {.m = m, .call = call, .slug = slug, .out = {out->tar, SBX_OK}};
    struct sbxp_rmem_list *last = calloc(1, sizeof *last);
    d.a = sbxp_archive_sink_open(&d.out);
    if (!last || !d.a) {
        rc = rm_error(m, call, SBX_E_NOMEM, "%s: cannot start the memory archive",
                       m->provider);
        goto out;
    }
    for (size_t i = 0; rc == SBX_OK && i < cur.nothers; i++)
        rc = diff_other(&d, &cur.others[i]);
    for (size_t i = 0; rc == SBX_OK && i < cur.files.n; i++) {
        const struct rm_file *f = &cur.files.v[i];
        const struct rm_file *b = list_find(&base, f->path);
        int same = b && f->sha[0] && b->size == f->size && !strcmp(b->sha, f->sha);
        if (same && !(flags & SBX_MEMORY_DIFF_ALL)) {
            if (list_add(last, b->path, b->size, b->sha) != 0)
                rc = rm_error(m, call, SBX_E_NOMEM, "out of memory");
        } else if (!name_committable(f->path)) {
            /* refused by name whatever it holds: the name is enough */
            rc = diff_header(&d, f->path, AE_IFREG, 0644, 0, NULL);
        } else if (list_add(&want, f->path, f->size, NULL) != 0) {
            rc = rm_error(m, call, SBX_E_NOMEM, "out of memory");
        }
    }
    if (rc == SBX_OK && want.n)
        rc = fetch_files(&d, &want, last); /* want is sorted: cur.files was */
    for (size_t i = 0; rc == SBX_OK && i < base.n; i++)
        if (!list_find(&cur.files, base.v[i].path) && out->removed)
            rc = out->removed(out->ctx, base.v[i].path);
    if (rc == SBX_OK && archive_write_close(d.a) != ARCHIVE_OK)
        rc = diff_fail(&d, "(end of archive)");
out:
    if (d.a)
        archive_write_free(d.a);
    /* What accept will record (no command runs in between): the hashes
     * of what the host received, the baseline's for what did not change. */
    if (rc == SBX_OK) {
        list_sort(last);
        mem->last = last;
    } else {
        list_free(last);
        free(last);
    }
    list_free(&want);
    listing_free(&cur);
    list_free(&base);
    return rc;
}

/* ---- memory_accept -------------------------------------------------------- */

int sbxp_rmem_accept(struct sbxp_rmem *m, sbx_call *call, const char *slug)
{
    struct sbxp_rmem_attachment *mem = memory_find(m, call, slug);
    if (!mem)
        return SBX_E_NOT_FOUND;
    int rc;
    if (mem->last) {
        rc = baseline_write(m, call, slug, mem->last);
    } else {
        /* no diff since: the tree as the sandbox lists it now */
        struct listing cur;
        rc = list_tree(m, call, slug, &cur);
        if (rc == SBX_OK)
            rc = baseline_write(m, call, slug, &cur.files);
        listing_free(&cur);
    }
    list_free(mem->last);
    free(mem->last);
    mem->last = NULL;
    return rc;
}
