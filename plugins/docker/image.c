/*
 * image.c - pulling the configured image when the daemon lacks it.
 *
 * POST /images/create answers with a stream of JSON progress objects; a
 * failure after the stream started arrives as an {"error": ...} object with
 * HTTP 200, so every object is checked. Progress goes to the host log, one
 * line per layer state change (not per byte count).
 */
#include "docker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pull_ctx {
    struct docker_state *st;
    char last[256];
    char error[512];
};

static int on_progress(void *ctx, json_object *v)
{
    struct pull_ctx *p = ctx;
    const char *error = sbxp_json_str(v, "error");
    if (!error)
        error = sbxp_json_str(sbxp_json_obj(v, "errorDetail"), "message");
    if (error) {
        snprintf(p->error, sizeof p->error, "%s", error);
        return SBX_E_UNAVAILABLE;
    }
    const char *status = sbxp_json_str(v, "status");
    const char *id = sbxp_json_str(v, "id");
    if (!status)
        return 0;
    char line[256];
    snprintf(line, sizeof line, "%s%s%s", id ? id : "", id ? ": " : "", status);
    if (strcmp(line, p->last) != 0) {
        snprintf(p->last, sizeof p->last, "%s", line);
        p->st->host->log(p->st->host, SBX_LOG_INFO, "docker: pulling %s: %s",
                         p->st->cfg.image, line);
    }
    return 0;
}

/* Whether the reference names a tag or digest after its last path part. */
static int has_tag(const char *ref)
{
    const char *slash = strrchr(ref, '/');
    const char *last = slash ? slash + 1 : ref;
    return strchr(last, ':') != NULL || strchr(ref, '@') != NULL;
}

int docker_image_pull(struct docker_state *st, sbx_call *call)
{
    const char *image = st->cfg.image;
    st->host->log(st->host, SBX_LOG_INFO,
                  "docker: image %s is not on the daemon; pulling it", image);
    char *esc = sbxp_http_escape(image);
    if (!esc)
        return st->host->set_error(st->host, call, SBX_E_NOMEM, "out of memory");
    char path[1024];
    int bad = docker_path(st, path, sizeof path, "/images/create?fromImage=%s%s", esc,
                          has_tag(image) ? "" : "&tag=latest");
    free(esc);
    if (bad)
        return st->host->set_error(st->host, call, SBX_E_CONFIG,
                                   "docker: image name too long: %s", image);
    struct sbxp_call_cancel dc;
    sbxp_call_cancel_init(&dc, st->host, call);
    struct sbxp_http_request req = {0};
    req.method = "POST";
    req.path = path;
    req.cancel = &dc.c;
    /* a pull may take long, but not without a progress message */
    req.stall_timeout_ms = st->cfg.request_timeout_ms;
    struct pull_ctx p = {.st = st};
    sbxp_http_error err;
    int rc = sbxp_http_json_each(st->http, &req, on_progress, &p, &err);
    if (rc == SBX_OK)
        return SBX_OK;
    const char *why = p.error[0] ? p.error : err.message;
    if (rc == SBX_E_CANCELLED && !p.error[0])
        return st->host->set_error(st->host, call, rc, "docker: pulling %s: cancelled",
                                   image);
    if (rc == SBX_E_NOT_FOUND || rc == SBX_E_DENIED || p.error[0] ||
        rc == SBX_E_UNAVAILABLE)
        return st->host->set_error(
            st->host, call, rc == SBX_E_DENIED ? SBX_E_NOT_FOUND : rc,
            "docker: image %s is not present on the daemon at %s and pulling it "
            "failed: %s. On a host without registry access, load or import the "
            "image first (docker load / docker import) or point "
            "providers.docker.image at an image the daemon has",
            image, st->cfg.host, why);
    return docker_report(st, call, &err, "pulling image %s", image);
}
