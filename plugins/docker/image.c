/*
 * image.c - pulling the configured image when the daemon lacks it.
 *
 * POST /images/create answers with a stream of JSON progress objects; a
 * failure after the stream started arrives as an {"error": ...} object with
 * HTTP 200, so every object is checked. Progress goes to the host log, one
 * line per layer state change (not per byte count), and to the host's
 * progress callback (ABI 1.2) as bytes: the sum over the layers of what
 * their "Downloading" objects count (a layer that completes counts whole),
 * with the layer's state as detail.
 */
#include "docker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Layers counted for progress; a pull of more counts the first ones. */
#define PULL_LAYERS_MAX 128

struct pull_ctx {
    struct docker_state *st;
    const sbx_call *call;
    char last[256];
    char error[512];
    struct {
        char id[72];
        uint64_t current, total;
    } layers[PULL_LAYERS_MAX];
    size_t nlayers;
    char what[300];
};

/* The layer `id`'s counters (a new one when unseen; NULL when full). */
static size_t layer_of(struct pull_ctx *p, const char *id)
{
    for (size_t i = 0; i < p->nlayers; i++)
        if (!strcmp(p->layers[i].id, id))
            return i;
    if (p->nlayers == PULL_LAYERS_MAX)
        return PULL_LAYERS_MAX;
    snprintf(p->layers[p->nlayers].id, sizeof p->layers[0].id, "%s", id);
    p->layers[p->nlayers].current = p->layers[p->nlayers].total = 0;
    return p->nlayers++;
}

static uint64_t json_u64(json_object *o, const char *key)
{
    json_object *v;
    if (!o || !json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int))
        return 0;
    int64_t n = json_object_get_int64(v);
    return n > 0 ? (uint64_t)n : 0;
}

/* Count one object's bytes and report the sum to the host. */
static void count_progress(struct pull_ctx *p, const char *id, const char *status,
                           json_object *v, const char *line)
{
    const struct sbx_host *host = p->st->host;
    if (host->size < SBX_HOST_SIZE_PROGRESS_1_2 || !host->progress || !id)
        return;
    size_t i = layer_of(p, id);
    if (i < PULL_LAYERS_MAX) {
        json_object *detail = sbxp_json_obj(v, "progressDetail");
        if (!strcmp(status, "Downloading")) {
            uint64_t total = json_u64(detail, "total");
            p->layers[i].current = json_u64(detail, "current");
            if (total)
                p->layers[i].total = total;
        } else if (!strcmp(status, "Download complete") || !strcmp(status, "Pull complete") ||
                   !strcmp(status, "Already exists")) {
            p->layers[i].current = p->layers[i].total;
        }
    }
    uint64_t done = 0, total = 0;
    for (size_t k = 0; k < p->nlayers; k++) {
        done += p->layers[k].current;
        total += p->layers[k].total;
    }
    host->progress(host, p->call, p->what, done, total, line);
}

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
    count_progress(p, id, status, v, line);
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
    /* the layer table is a few KiB: not on the stack */
    struct pull_ctx *p = calloc(1, sizeof *p);
    if (!p)
        return st->host->set_error(st->host, call, SBX_E_NOMEM, "out of memory");
    p->st = st;
    p->call = call;
    snprintf(p->what, sizeof p->what, "pulling %s", image);
    sbxp_http_error err;
    int rc = sbxp_http_json_each(st->http, &req, on_progress, p, &err);
    if (rc == SBX_OK) {
        free(p);
        return SBX_OK;
    }
    char why[800];
    snprintf(why, sizeof why, "%s", p->error[0] ? p->error : err.message);
    int refused = p->error[0] != 0;
    free(p);
    if (rc == SBX_E_CANCELLED && !refused)
        return st->host->set_error(st->host, call, rc, "docker: pulling %s: cancelled",
                                   image);
    if (rc == SBX_E_NOT_FOUND || rc == SBX_E_DENIED || refused || rc == SBX_E_UNAVAILABLE)
        return st->host->set_error(
            st->host, call, rc == SBX_E_DENIED ? SBX_E_NOT_FOUND : rc,
            "docker: image %s is not present on the daemon at %s and pulling it "
            "failed: %s. On a host without registry access, load or import the "
            "image first (docker load / docker import) or point "
            "providers.docker.image at an image the daemon has",
            image, st->cfg.host, why);
    return docker_report(st, call, &err, "pulling image %s", image);
}
