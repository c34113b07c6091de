/*
 * service.c - execd and the egress sidecar at the endpoints the lifecycle
 * server names. The endpoint has no scheme (the API's own is used) and
 * comes with headers that every request to it must carry. A sandbox that
 * vanished shows as a failing endpoint: the lifecycle server then says
 * 404. See osb.h.
 */
#include "osb.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A header name or value from the service: printable, no CR/LF. */
static int header_safe(const char *s, int name)
{
    if (!*s)
        return name ? 0 : 1;
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f || (name && *s == ':'))
            return 0;
    return 1;
}

int osb_service_open(sbx_sandbox *sb, sbx_call *call, int port, struct osb_service *svc)
{
    struct osb_state *st = sb->st;
    memset(svc, 0, sizeof *svc);
    json_object *doc = NULL;
    sbxp_http_error err;
    int rc = osb_api_endpoint(st, call, sb->id, port, &doc, &err);
    if (rc != SBX_OK)
        return osb_report(st, call, &err, "resolving the endpoint of port %d of sandbox %s", port,
                          sb->id);
    const char *ep = sbxp_json_str(doc, "endpoint");
    const char *scheme = strncmp(st->cfg.api_url, "https://", 8) ? "http" : "https";
    char url[1024];
    if (strstr(ep, "://"))
        snprintf(url, sizeof url, "%s", ep);
    else if (snprintf(url, sizeof url, "%s://%s", scheme, ep) >= (int)sizeof url)
        rc = osb_error(st, call, SBX_E_PROTOCOL, "opensandbox: endpoint of port %d too long",
                       port);
    if (rc == SBX_OK && sbxp_http_new(url, &svc->http, &err) != SBX_OK)
        rc = osb_error(st, call, SBX_E_PROTOCOL,
                       "opensandbox: the endpoint of port %d of sandbox %s is unusable: %s", port,
                       sb->id, err.message);
    json_object *hs = sbxp_json_obj(doc, "headers");
    size_t n = 0;
    if (rc == SBX_OK && hs && json_object_is_type(hs, json_type_object)) {
        json_object_object_foreach(hs, k, v)
        {
            const char *val = json_object_get_string(v);
            if (n + 1 >= sizeof svc->headers / sizeof svc->headers[0] || !val ||
                !header_safe(k, 1) || !header_safe(val, 0)) {
                rc = osb_error(st, call, SBX_E_PROTOCOL,
                               "opensandbox: the endpoint of port %d has unusable headers", port);
                break;
            }
            size_t len = strlen(k) + strlen(val) + 3;
            svc->headers[n] = malloc(len);
            if (!svc->headers[n]) {
                rc = osb_error(st, call, SBX_E_NOMEM, "out of memory");
                break;
            }
            snprintf(svc->headers[n++], len, "%s: %s", k, val);
        }
    }
    json_object_put(doc);
    if (rc != SBX_OK)
        osb_service_close(svc);
    return rc;
}

void osb_service_close(struct osb_service *svc)
{
    sbxp_http_free(svc->http);
    for (size_t i = 0; svc->headers[i]; i++) {
        volatile char *p = svc->headers[i]; /* may hold an access token */
        while (*p)
            *p++ = 0;
        free(svc->headers[i]);
    }
    memset(svc, 0, sizeof *svc);
}

void osb_service_request(sbx_sandbox *sb, const struct osb_service *svc,
                         struct sbxp_http_request *req, const char **hdrs, size_t cap,
                         const char *const *extra, struct sbxp_call_cancel *c)
{
    size_t n = 0;
    for (size_t i = 0; svc->headers[i] && n + 1 < cap; i++)
        hdrs[n++] = svc->headers[i];
    for (size_t i = 0; extra && extra[i] && n + 1 < cap; i++)
        hdrs[n++] = extra[i];
    hdrs[n] = NULL;
    /* A paused sandbox answers nothing: resume it first (pause.c). A
     * failure shows in the request itself. */
    osb_wake(sb, c->call, NULL);
    memset(req, 0, sizeof *req);
    req->headers = hdrs;
    req->connect_timeout_ms = sb->st->cfg.connect_timeout_ms;
    req->cancel = &c->c;
}

int osb_service_json(sbx_sandbox *sb, sbx_call *call, const struct osb_service *svc,
                     const char *method, const char *path, json_object *body,
                     json_object **out, int idempotent, sbxp_http_error *err)
{
    struct sbxp_call_cancel c;
    sbxp_call_cancel_init(&c, sb->st->host, call);
    const char *hdrs[16];
    struct sbxp_http_request req;
    osb_service_request(sb, svc, &req, hdrs, 16, NULL, &c);
    req.method = method;
    req.path = path;
    req.timeout_ms = sb->st->cfg.request_timeout_ms;
    int rc = sbxp_http_json_retry(svc->http, &req, body, out, NULL, err,
                                  idempotent ? &sb->st->cfg.retry : NULL);
    /* No answer, or the proxy's for a sandbox it cannot reach: paused by
     * a client that does not share state_dir? Then resume, and send an
     * idempotent request once more. (A frozen service may still read the
     * first one when it thaws: a request that is not idempotent is never
     * sent twice.) */
    if (rc != SBX_OK && !err->from_callback && rc != SBX_E_CANCELLED &&
        (err->http_status == 0 || err->http_status >= 500)) {
        json_object *doc = NULL;
        sbxp_http_error e2;
        const char *state = osb_api_get(sb->st, call, sb->id, &doc, &e2) == SBX_OK
                                ? osb_state_of(doc)
                                : "";
        int woke = osb_wake_after(sb, call, state) == SBX_OK;
        json_object_put(doc);
        if (woke && idempotent) {
            osb_service_request(sb, svc, &req, hdrs, 16, NULL, &c);
            req.method = method;
            req.path = path;
            req.timeout_ms = sb->st->cfg.request_timeout_ms;
            rc = sbxp_http_json_retry(svc->http, &req, body, out, NULL, err,
                                      idempotent ? &sb->st->cfg.retry : NULL);
        }
    }
    return rc;
}

int osb_service_report(sbx_sandbox *sb, sbx_call *call, sbxp_http_error *err, const char *fmt,
                       ...)
{
    struct osb_state *st = sb->st;
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (err->from_callback)
        return err->status; /* the sink or source said why */
    /* Was it the sandbox that went away? Ask the lifecycle server. */
    if (err->http_status == 404 || err->http_status >= 500 || err->http_status == 0) {
        json_object *doc = NULL;
        sbxp_http_error e2;
        int rc = osb_api_get(st, NULL, sb->id, &doc, &e2);
        const char *state = rc == SBX_OK ? osb_state_of(doc) : "";
        int gone = rc == SBX_E_NOT_FOUND || !strcmp(state, "Terminated") ||
                   !strcmp(state, "Stopping") || !strcmp(state, "Failed");
        char note[96] = "";
        if (*state)
            snprintf(note, sizeof note, " (state %.20s)", state);
        /* Paused by a client that does not share state_dir: this request
         * is lost, the next one finds it running. */
        int woke = !gone && osb_wake_after(sb, call, state) == SBX_OK;
        if (woke)
            snprintf(note, sizeof note, " (the sandbox was %.20s, paused elsewhere: resumed)",
                     state);
        json_object_put(doc);
        if (gone)
            return osb_error(st, call, SBX_E_NOT_FOUND,
                             "opensandbox: %s: sandbox %s no longer exists%s", what, sb->id,
                             note);
        if (woke)
            return osb_report(st, call, err, "%s%s", what, note);
    }
    return osb_report(st, call, err, "%s", what);
}
