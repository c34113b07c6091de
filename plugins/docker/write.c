/*
 * write.c - write_file: the checks, where the file goes, and its missing
 * parent directories.
 *
 * A container with sbx-agent gets the write through the agent
 * (files_agent.c: the agent resolves the path beneath the workspace and
 * makes the missing parents); what follows is the path without it.
 *
 * The path is checked and resolved in the container first (a refused path
 * does not consume the source). Missing parent directories go up as a tar
 * of directory entries only (PUT .../archive, made by the daemon, owned by
 * the sandbox user whatever the permissions of the existing directory
 * above them). A tar cut short by a death leaves whole directories or
 * none, never a partial file. Then the data goes to the container through
 * one exec (write_stream.c), which publishes the file only once it holds
 * all of it: the file appears complete or not at all, whoever dies when.
 */
#include "docker.h"

#include "archive_pax.h"

#include <archive.h>
#include <archive_entry.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Where a write goes: `base` is the deepest existing directory (resolved),
 * `tail` the missing directories and the file name below it. */
struct target {
    char *base;
    const char *tail;
    size_t dirlen; /* length of tail's directory part, with its slash */
    char *tmp, *final;
};

/* ".sbx-<16 hex>.tmp": the container's script removes it on any failure. */
static void temp_name(char *out, size_t cap)
{
    char hex[17];
    docker_random_hex(hex, 8);
    snprintf(out, cap, ".sbx-%s.tmp", hex);
}

/* Split the resolved path (<existing part>/<missing...>/<name>) at the
 * deepest existing directory and name the temporary beside the target. */
static int target_paths(struct target *t, char *resolved, const char *rel,
                        size_t existing)
{
    size_t ncomp = 1;
    for (const char *c = rel; *c; c++)
        ncomp += *c == '/';
    size_t base_levels = existing < ncomp ? existing : ncomp - 1;
    size_t tail_comps = ncomp - base_levels;
    char *cut = resolved + strlen(resolved);
    for (size_t i = 0; i < tail_comps; i++) {
        while (cut > resolved && cut[-1] != '/')
            cut--;
        if (cut > resolved)
            cut--;
    }
    *cut = '\0';
    t->base = resolved;
    t->tail = cut + 1;
    const char *fname = strrchr(t->tail, '/');
    t->dirlen = fname ? (size_t)(fname - t->tail) + 1 : 0;
    char tmpname[40];
    temp_name(tmpname, sizeof tmpname);
    size_t cap = strlen(t->base) + strlen(t->tail) + sizeof tmpname + 4;
    t->tmp = malloc(cap);
    t->final = malloc(cap);
    if (!t->tmp || !t->final)
        return -1;
    snprintf(t->tmp, cap, "%s/%.*s%s", t->base, (int)t->dirlen, t->tail, tmpname);
    snprintf(t->final, cap, "%s/%s", t->base, t->tail);
    return 0;
}

/* ---- missing directories ------------------------------------------- */

struct membuf {
    unsigned char *data;
    size_t len, cap;
};

static la_ssize_t mem_write(struct archive *a, void *ud, const void *buf, size_t n)
{
    struct membuf *m = ud;
    (void)a;
    if (m->len + n > m->cap) {
        size_t cap = m->cap ? m->cap : 16384;
        while (cap < m->len + n)
            cap *= 2;
        unsigned char *more = realloc(m->data, cap);
        if (!more)
            return -1;
        m->data = more;
        m->cap = cap;
    }
    memcpy(m->data + m->len, buf, n);
    m->len += n;
    return (la_ssize_t)n;
}

/* A tar of the directories of tail (every prefix ending in '/'). */
static int dirs_tar(const struct target *t, int64_t uid, int64_t gid, struct membuf *m)
{
    struct archive *a = archive_write_new();
    if (!a)
        return -1;
    /* Names as raw bytes (hdrcharset=BINARY), never converted: the plugin
     * runs in whatever locale its host has (normally C, where libarchive
     * cannot convert a non-ASCII name; a name set only as UTF-8 made its
     * pax writer pass NULL to strlen). */
    int ok = sbxs_archive_write_pax_bytes(a) == ARCHIVE_OK &&
             archive_write_set_bytes_per_block(a, 512) == ARCHIVE_OK &&
             archive_write_open(a, m, NULL, mem_write, NULL) == ARCHIVE_OK;
    char entry[8192 + 64];
    for (const char *slash = t->tail; ok && (slash = strchr(slash, '/')); slash++) {
        struct archive_entry *e = archive_entry_new();
        if (!e) {
            ok = 0;
            break;
        }
        snprintf(entry, sizeof entry, "%.*s/", (int)(slash - t->tail), t->tail);
        archive_entry_copy_pathname(e, entry);
        archive_entry_set_filetype(e, AE_IFDIR);
        archive_entry_set_perm(e, 0755);
        archive_entry_set_uid(e, uid);
        archive_entry_set_gid(e, gid);
        archive_entry_set_mtime(e, time(NULL), 0);
        ok = archive_write_header(a, e) == ARCHIVE_OK;
        archive_entry_free(e);
    }
    ok = archive_write_close(a) == ARCHIVE_OK && ok;
    archive_write_free(a);
    return ok ? 0 : -1;
}

static int make_dirs(sbx_sandbox *sb, sbx_call *call, const char *rel,
                     const struct target *t)
{
    struct docker_state *st = sb->st;
    int64_t uid, gid;
    const char *owner_query = docker_upload_owner(&st->cfg, &uid, &gid);
    struct membuf m = {0};
    if (dirs_tar(t, uid, gid, &m) != 0) {
        free(m.data);
        return st->host->set_error(st->host, call, SBX_E_INTERNAL,
                                   "docker: write %.200s: building the directory "
                                   "archive failed",
                                   rel);
    }
    char *esc = sbxp_http_escape(t->base);
    if (!esc) {
        free(m.data);
        return st->host->set_error(st->host, call, SBX_E_NOMEM, "out of memory");
    }
    char url[3 * 8192 + 256];
    docker_path(st, url, sizeof url,
                "/containers/%s/archive?path=%s&noOverwriteDirNonDir=true%s", sb->id,
                esc, owner_query);
    free(esc);
    struct sbxp_call_cancel dc;
    sbxp_call_cancel_init(&dc, st->host, call);
    struct sbxp_http_request req = {0};
    req.method = "PUT";
    req.path = url;
    req.content_type = "application/x-tar";
    req.body = m.data;
    req.body_len = m.len;
    req.cancel = &dc.c;
    req.timeout_ms = st->cfg.request_timeout_ms;
    sbxp_http_error err;
    int rc = sbxp_http_request(st->http, &req, NULL, NULL, &err);
    free(m.data);
    if (rc != SBX_OK)
        return docker_report(st, call, &err, "making the directories of %.200s", rel);
    return SBX_OK;
}

/* ---- the op ---------------------------------------------------------- */

int docker_write_file(sbx_sandbox *sb, sbx_call *call, const char *path,
                      const struct sbx_source *src, unsigned mode)
{
    struct docker_state *st = sb->st;
    char *rel = NULL, *resolved = NULL;
    struct target t = {0};
    const char *root;
    int rc = docker_path_rooted(sb, call, "write", path, &root, &rel);
    if (rc != SBX_OK)
        return rc;
    if (!src || !src->read) {
        rc = st->host->set_error(st->host, call, SBX_E_INVALID,
                                 "docker: write %.200s: no source", rel);
        goto out;
    }
    /* One rule for every provider (sbx/provider.h): permission bits only,
     * no setuid, setgid or sticky; 0 means 0644. */
    if (mode & ~0777u) {
        rc = st->host->set_error(st->host, call, SBX_E_INVALID,
                                 "docker: write %.200s: mode %#o has bits other than "
                                 "permissions (0777)",
                                 rel, mode);
        goto out;
    }
    if (sb->agent_sock) {
        rc = docker_agent_write(sb, call, root, rel, src, mode ? mode : 0644);
        goto out;
    }
    if (docker_call_user(st, call)) {
        rc = docker_users_need_agent(sb, call, "write as a user");
        goto out;
    }
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
    if (target_paths(&t, resolved, rel, existing) != 0) {
        rc = st->host->set_error(st->host, call, SBX_E_NOMEM, "out of memory");
        goto out;
    }
    if (t.dirlen > 0) {
        rc = make_dirs(sb, call, rel, &t);
        if (rc != SBX_OK)
            goto out;
    }
    rc = docker_write_stream(sb, call, rel, src, t.tmp, t.final, mode ? mode : 0644);
out:
    free(t.tmp);
    free(t.final);
    free(rel);
    free(resolved);
    return rc;
}
