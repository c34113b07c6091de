/*
 * files.c - read_file through the archive endpoint (or the agent:
 * files_agent.c).
 *
 * GET /containers/{id}/archive answers with a tar holding the one file;
 * libarchive parses it straight off the connection (pull mode of the HTTP
 * helper, bounded buffer) and the file's bytes go to the sink chunk by
 * chunk. The request fails when the daemon sends nothing for a request
 * timeout (a stalled stream), never waiting forever. Writing is write.c.
 */
#include "docker.h"

#include <archive.h>
#include <archive_entry.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK (64 * 1024)

struct pull {
    sbxp_http_xfer *x;
    char buf[CHUNK];
    int rc;
    sbxp_http_error err;
};

static la_ssize_t pull_read(struct archive *a, void *ud, const void **out)
{
    struct pull *p = ud;
    size_t got = 0;
    (void)a;
    p->rc = sbxp_http_xfer_read(p->x, p->buf, sizeof p->buf, &got, &p->err);
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
    if (sb->agent_sock) {
        rc = docker_agent_read(sb, call, root, rel, sink);
        free(rel);
        return rc;
    }
    if (docker_call_user(st, call)) {
        free(rel);
        return docker_users_need_agent(sb, call, "read as a user");
    }
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

    char *esc = sbxp_http_escape(resolved);
    if (!esc) {
        rc = st->host->set_error(st->host, call, SBX_E_NOMEM, "out of memory");
        goto out;
    }
    char url[3 * 8192 + 256];
    docker_path(st, url, sizeof url, "/containers/%s/archive?path=%s", sb->id, esc);
    free(esc);
    struct sbxp_call_cancel dc;
    sbxp_call_cancel_init(&dc, st->host, call);
    struct sbxp_http_request req = {0};
    req.method = "GET";
    req.path = url;
    req.cancel = &dc.c;
    req.stall_timeout_ms = st->cfg.request_timeout_ms;
    struct pull *p = calloc(1, sizeof *p);
    if (!p) {
        rc = st->host->set_error(st->host, call, SBX_E_NOMEM, "out of memory");
        goto out;
    }
    rc = sbxp_http_start(st->http, &req, &p->x, &p->err);
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
        sbxp_http_xfer_free(p->x);
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
    sbxp_http_xfer_free(p->x);
    free(p);
out:
    free(rel);
    free(resolved);
    return rc;
}
