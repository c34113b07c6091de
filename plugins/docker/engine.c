/*
 * engine.c - talking to the Engine API: version negotiation, JSON requests
 * and error reporting with operator hints.
 *
 * Every request has a deadline (providers.docker.request_timeout unless
 * the caller gives a shorter one), so a daemon that stops answering
 * (SIGSTOP, a wedged lock) fails the call with SBX_E_TIMEOUT and a message
 * naming it instead of hanging it.
 */
#include "docker.h"

#include "hex.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* The operator hint of a request that got no answer from the daemon. */
static const char *daemon_hint(const sbxp_http_error *err)
{
    if (err->status == SBX_E_UNAVAILABLE && err->http_status == 0)
        return " (is the Docker daemon running? check providers.docker.host "
               "or DOCKER_HOST)";
    if (err->status == SBX_E_TIMEOUT && err->http_status == 0)
        return " (the daemon did not answer in time: is it stopped or overloaded? "
               "providers.docker.request_timeout sets the deadline)";
    if (err->status == SBX_E_DENIED && err->http_status == 0)
        return " (this user may not use the Docker socket: run as root or "
               "join the socket's group)";
    return NULL;
}

const struct sbxp_reporter docker_reporter = {.who = "docker", .hint = daemon_hint};

static int vpath(struct docker_state *st, char *buf, size_t cap, const char *fmt,
                 va_list ap)
{
    size_t n = strlen(st->api_prefix);
    if (n >= cap)
        return -1;
    memcpy(buf, st->api_prefix, n);
    int m = vsnprintf(buf + n, cap - n, fmt, ap);
    return (m < 0 || (size_t)m >= cap - n) ? -1 : 0;
}

int docker_path(struct docker_state *st, char *buf, size_t cap, const char *fmt,
                ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = vpath(st, buf, cap, fmt, ap);
    va_end(ap);
    return rc;
}

void docker_random_hex(char *out, size_t bytes)
{
    sbxs_random_hex(out, bytes);
}

static int vjson(struct docker_state *st, sbx_call *call, int64_t timeout_ms,
                 const char *method, json_object *body, json_object **out,
                 sbxp_http_error *err, const char *fmt, va_list ap)
{
    if (out)
        *out = NULL;
    char path[2048];
    if (vpath(st, path, sizeof path, fmt, ap) != 0)
        return sbxp_http_fail(err, SBX_E_INVALID, "request path too long");
    struct sbxp_call_cancel dc;
    sbxp_call_cancel_init(&dc, st->host, call);
    struct sbxp_http_request req = {0};
    req.method = method;
    req.path = path;
    req.cancel = &dc.c;
    req.timeout_ms = timeout_ms;
    json_object *doc = NULL;
    int rc = sbxp_http_json_body(st->http, &req, body, &doc, NULL, err);
    if (out)
        *out = doc;
    else
        json_object_put(doc);
    return rc;
}

int docker_json(struct docker_state *st, sbx_call *call, const char *method,
                json_object *body, json_object **out, sbxp_http_error *err,
                const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = vjson(st, call, st->cfg.request_timeout_ms, method, body, out, err, fmt,
                   ap);
    va_end(ap);
    return rc;
}

int docker_json_within(struct docker_state *st, sbx_call *call, int64_t timeout_ms,
                       const char *method, json_object *body, json_object **out,
                       sbxp_http_error *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (timeout_ms <= 0 || timeout_ms > st->cfg.request_timeout_ms)
        timeout_ms = st->cfg.request_timeout_ms;
    int rc = vjson(st, call, timeout_ms, method, body, out, err, fmt, ap);
    va_end(ap);
    return rc;
}

int docker_ping(struct docker_state *st, int64_t timeout_ms, sbxp_http_error *err)
{
    struct sbxp_http_request req = {0};
    req.method = "GET";
    req.path = "/_ping";
    req.timeout_ms = timeout_ms;
    return sbxp_http_request(st->http, &req, NULL, NULL, err);
}

int docker_health(void *state, sbx_call *call, char detail[SBX_HEALTH_DETAIL_MAX])
{
    struct docker_state *st = state;
    struct sbxp_call_cancel dc;
    sbxp_call_cancel_init(&dc, st->host, call);
    struct sbxp_http_request req = {0};
    req.method = "GET";
    req.path = "/_ping";
    req.cancel = &dc.c;
    req.timeout_ms = st->cfg.request_timeout_ms;
    sbxp_http_error err;
    int rc = sbxp_http_request(st->http, &req, NULL, NULL, &err);
    if (rc != SBX_OK)
        return docker_report(st, call, &err, "pinging the daemon at %s", st->cfg.host);
    req.path = "/version";
    json_object *ver = NULL;
    rc = sbxp_http_json(st->http, &req, &ver, NULL, &err);
    if (rc != SBX_OK)
        return docker_report(st, call, &err, "asking the daemon at %s for its version",
                             st->cfg.host);
    const char *v = sbxp_json_str(ver, "Version"), *api = sbxp_json_str(ver, "ApiVersion");
    if (!v || !api) {
        json_object_put(ver);
        return st->host->set_error(st->host, call, SBX_E_PROTOCOL,
                                   "docker: %s answered /version without Version and "
                                   "ApiVersion",
                                   st->cfg.host);
    }
    snprintf(detail, SBX_HEALTH_DETAIL_MAX, "Docker Engine %.40s (API %.16s) at %.150s", v,
             api, st->cfg.host);
    json_object_put(ver);
    return SBX_OK;
}

/* "1.41" -> 41 (major must be 1); -1 when unparsable. */
static int api_minor(const char *v)
{
    if (!v || strncmp(v, "1.", 2) != 0)
        return -1;
    char *end;
    long m = strtol(v + 2, &end, 10);
    return (end == v + 2 || *end || m < 0 || m > 1000) ? -1 : (int)m;
}

/* The Api-Version header of /_ping, into a buffer of the caller's. */
struct ping_version {
    char api[32];
};

static int ping_header(void *ctx, const char *name, const char *value)
{
    struct ping_version *pv = ctx;
    if (!strcasecmp(name, "Api-Version"))
        snprintf(pv->api, sizeof pv->api, "%s", value);
    return 0;
}

/*
 * The API version from GET /_ping's Api-Version header, as the docker CLI
 * negotiates: /version answers the same ApiVersion but costs the daemon
 * 6 ms (it asks containerd and runc for theirs) against 0.3 ms, on every
 * process's first op. A daemon whose minimum API is above the one used
 * refuses the first versioned request with its own message ("client
 * version 1.41 is too old. Minimum supported API version is ...").
 */
int docker_negotiate(struct docker_state *st, sbx_call *call)
{
    pthread_mutex_lock(&st->lock);
    if (st->negotiated) {
        pthread_mutex_unlock(&st->lock);
        return SBX_OK;
    }
    struct sbxp_call_cancel dc;
    sbxp_call_cancel_init(&dc, st->host, call);
    struct ping_version pv = {{0}};
    struct sbxp_http_request req = {0};
    req.method = "GET";
    req.path = "/_ping";
    req.cancel = &dc.c;
    req.timeout_ms = st->cfg.request_timeout_ms;
    req.on_header = ping_header;
    req.header_ctx = &pv;
    sbxp_http_error err;
    int rc = sbxp_http_request(st->http, &req, NULL, NULL, &err);
    if (rc != SBX_OK) {
        pthread_mutex_unlock(&st->lock);
        return docker_report(st, call, &err, "contacting the daemon at %s",
                             st->cfg.host);
    }
    int have = api_minor(pv.api);
    if (have < 0) {
        pthread_mutex_unlock(&st->lock);
        return st->host->set_error(st->host, call, SBX_E_PROTOCOL,
                                   "docker: %s answered /_ping without a usable "
                                   "Api-Version header (\"%s\"); is it a Docker daemon?",
                                   st->cfg.host, pv.api);
    }
    int use = have < DOCKER_API_MAX_MINOR ? have : DOCKER_API_MAX_MINOR;
    if (use < DOCKER_API_MIN_MINOR) {
        pthread_mutex_unlock(&st->lock);
        return st->host->set_error(
            st->host, call, SBX_E_UNSUPPORTED,
            "docker: the daemon at %s speaks Engine API %s; this provider needs 1.%d to "
            "1.%d",
            st->cfg.host, pv.api, DOCKER_API_MIN_MINOR, DOCKER_API_MAX_MINOR);
    }
    snprintf(st->api_prefix, sizeof st->api_prefix, "/v1.%d", use);
    st->negotiated = 1;
    st->host->log(st->host, SBX_LOG_DEBUG, "docker: daemon %s, API %s, using %s",
                  st->cfg.host, pv.api, st->api_prefix + 1);
    pthread_mutex_unlock(&st->lock);
    return SBX_OK;
}
