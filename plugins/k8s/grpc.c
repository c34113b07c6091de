/*
 * grpc.c - gRPC calls to sandboxd's ProcessService through the router.
 *
 * gRPC is HTTP/2 (here libcurl's, h2c with prior knowledge on an http://
 * router, ALPN h2 on https://): a POST to /<package>.<Service>/<Method>
 * with content-type application/grpc and "te: trailers", whose request and
 * response bodies are messages each prefixed by 5 bytes (a compressed flag,
 * then the length, big-endian), and whose outcome is the grpc-status
 * trailer (or header, for a trailers-only answer) with grpc-message
 * (percent-encoded). The messages themselves are protobuf-c's (generated
 * from process.proto); this file only frames them. Nothing is compressed
 * (no grpc-encoding is offered), so a compressed frame is a protocol error.
 * The router picks the pod from the X-Sandbox-* headers.
 */
#include "k8s.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define SERVICE_PATH "/process.v1.ProcessService/"

int k8s_grpc_map(int code)
{
    switch (code) {
    case 0: return SBX_OK;
    case 1: return SBX_E_CANCELLED;     /* CANCELLED */
    case 3: return SBX_E_INVALID;       /* INVALID_ARGUMENT */
    case 4: return SBX_E_TIMEOUT;       /* DEADLINE_EXCEEDED */
    case 5: return SBX_E_NOT_FOUND;     /* NOT_FOUND */
    case 6: return SBX_E_EXISTS;        /* ALREADY_EXISTS */
    case 7: return SBX_E_DENIED;        /* PERMISSION_DENIED */
    case 8: return SBX_E_UNAVAILABLE;   /* RESOURCE_EXHAUSTED */
    case 9: return SBX_E_INVALID;       /* FAILED_PRECONDITION */
    case 12: return SBX_E_UNSUPPORTED;  /* UNIMPLEMENTED */
    case 14: return SBX_E_UNAVAILABLE;  /* UNAVAILABLE */
    case 16: return SBX_E_DENIED;       /* UNAUTHENTICATED */
    default: return SBX_E_PROTOCOL;     /* UNKNOWN, INTERNAL, DATA_LOSS, ... */
    }
}

void k8s_route_headers(sbx_sandbox *sb, int port, char *id, size_t idcap, char *ns,
                       size_t nscap, char *portb, size_t portcap)
{
    snprintf(id, idcap, "X-Sandbox-ID: %s", sb->pod);
    snprintf(ns, nscap, "X-Sandbox-Namespace: %s", sb->st->cfg.ns);
    snprintf(portb, portcap, "X-Sandbox-Port: %d", port);
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* grpc-message is percent-encoded; keep printable ASCII only. */
static void decode_message(const char *in, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; in[i] && o + 1 < cap; i++) {
        int c = (unsigned char)in[i];
        if (c == '%' && hexval(in[i + 1]) >= 0 && hexval(in[i + 2]) >= 0) {
            c = hexval(in[i + 1]) * 16 + hexval(in[i + 2]);
            i += 2;
        }
        out[o++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    out[o] = '\0';
}

static int on_header(void *ctx, const char *name, const char *value)
{
    struct k8s_grpc_status *gs = ctx;
    if (strcasecmp(name, "grpc-status") == 0) {
        gs->code = atoi(value);
        gs->have = 1;
    } else if (strcasecmp(name, "grpc-message") == 0) {
        decode_message(value, gs->message, sizeof gs->message);
    }
    return 0;
}

int k8s_grpc_open(sbx_sandbox *sb, sbx_call *call, struct k8s_grpc_stream *s,
                  const char *method, const void *msg, size_t len, int64_t timeout_ms,
                  sbxp_http_error *err)
{
    struct k8s_state *st = sb->st;
    memset(s, 0, sizeof *s);
    s->sb = sb;
    if (len > K8S_GRPC_MSG_MAX)
        return sbxp_http_fail(err, SBX_E_INVALID, "%s: request too large", method);
    s->body = malloc(len + 5);
    if (!s->body)
        return sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
    s->body[0] = 0;
    s->body[1] = (uint8_t)(len >> 24);
    s->body[2] = (uint8_t)(len >> 16);
    s->body[3] = (uint8_t)(len >> 8);
    s->body[4] = (uint8_t)len;
    if (len)
        memcpy(s->body + 5, msg, len);
    k8s_route_headers(sb, st->cfg.grpc_port, s->h_id, sizeof s->h_id, s->h_ns, sizeof s->h_ns,
                      s->h_port, sizeof s->h_port);
    size_t n = 0;
    s->hdrs[n++] = "TE: trailers";
    s->hdrs[n++] = s->h_id;
    s->hdrs[n++] = s->h_ns;
    s->hdrs[n++] = s->h_port;
    if (st->router_auth)
        s->hdrs[n++] = st->router_auth;
    s->hdrs[n] = NULL;
    char path[128];
    snprintf(path, sizeof path, SERVICE_PATH "%s", method);
    sbxp_call_cancel_init(&s->cc, st->host, call);
    s->req.method = "POST";
    s->req.path = strdup(path);
    if (!s->req.path) {
        free(s->body);
        s->body = NULL;
        return sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
    }
    s->req.headers = s->hdrs;
    s->req.content_type = "application/grpc";
    s->req.body = s->body;
    s->req.body_len = len + 5;
    s->req.on_header = on_header;
    s->req.header_ctx = &s->status;
    s->req.timeout_ms = timeout_ms;
    s->req.connect_timeout_ms = st->cfg.connect_timeout_ms;
    s->req.cancel = call ? &s->cc.c : NULL;
    int rc = sbxp_http_start(st->grpc, &s->req, &s->x, err);
    if (rc != SBX_OK) {
        k8s_grpc_close(s);
        return rc;
    }
    return SBX_OK;
}

/* Read exactly n bytes into buf: SBX_OK, or *eof at a clean end before any. */
static int read_exact(struct k8s_grpc_stream *s, uint8_t *buf, size_t n, int *eof,
                      sbxp_http_error *err)
{
    size_t have = 0;
    *eof = 0;
    while (have < n) {
        size_t got = 0;
        int rc = sbxp_http_xfer_read(s->x, buf + have, n - have, &got, err);
        if (rc != SBX_OK)
            return rc;
        if (got == 0) {
            if (have == 0) {
                *eof = 1;
                return SBX_OK;
            }
            return sbxp_http_fail(err, SBX_E_PROTOCOL,
                                  "%s: the gRPC stream ended in the middle of a message",
                                  s->req.path);
        }
        have += got;
    }
    return SBX_OK;
}

int k8s_grpc_next(struct k8s_grpc_stream *s, const uint8_t **msg, size_t *len,
                  sbxp_http_error *err)
{
    *msg = NULL;
    *len = 0;
    uint8_t hdr[5];
    int eof = 0;
    int rc = read_exact(s, hdr, 5, &eof, err);
    if (rc != SBX_OK)
        return rc;
    if (eof) {
        if (!s->status.have)
            return sbxp_http_fail(err, SBX_E_PROTOCOL,
                                  "%s: the gRPC stream ended without a grpc-status",
                                  s->req.path);
        return SBX_OK;
    }
    if (hdr[0] != 0)
        return sbxp_http_fail(err, SBX_E_PROTOCOL, "%s: a compressed gRPC message (not asked for)",
                              s->req.path);
    size_t n = ((size_t)hdr[1] << 24) | ((size_t)hdr[2] << 16) | ((size_t)hdr[3] << 8) | hdr[4];
    if (n > K8S_GRPC_MSG_MAX)
        return sbxp_http_fail(err, SBX_E_PROTOCOL, "%s: a gRPC message of %zu bytes (limit %u)",
                              s->req.path, n, K8S_GRPC_MSG_MAX);
    if (n > s->fcap || !s->frame) {
        uint8_t *b = realloc(s->frame, n > 4096 ? n : 4096);
        if (!b)
            return sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
        s->frame = b;
        s->fcap = n > 4096 ? n : 4096;
    }
    if (n) {
        rc = read_exact(s, s->frame, n, &eof, err);
        if (rc != SBX_OK)
            return rc;
        if (eof)
            return sbxp_http_fail(err, SBX_E_PROTOCOL,
                                  "%s: the gRPC stream ended in the middle of a message",
                                  s->req.path);
    }
    *msg = s->frame;
    *len = n;
    return SBX_OK;
}

/* The push side: bytes of the response body as curl hands them over,
 * cut into messages for s->on_msg. Nothing waits between curl and the
 * caller's sinks, so the transfer is never paused: a paused HTTP/2 stream
 * makes libcurl 7.88 buffer what the server sends, up to its 32 MiB
 * window. */
static int on_bytes(void *ctx, const void *buf, size_t len)
{
    struct k8s_grpc_stream *s = ctx;
    const uint8_t *p = buf;
    while (len) {
        size_t want = s->flen < 5 ? 5 - s->flen : s->need - (s->flen - 5);
        size_t take = len < want ? len : want;
        if (s->flen + take > s->fcap) {
            size_t cap = s->fcap ? s->fcap : 4096;
            while (cap < s->flen + take)
                cap *= 2;
            uint8_t *b = realloc(s->frame, cap);
            if (!b)
                return sbxp_http_fail(&s->perr, SBX_E_NOMEM, "out of memory");
            s->frame = b;
            s->fcap = cap;
        }
        memcpy(s->frame + s->flen, p, take);
        s->flen += take;
        p += take;
        len -= take;
        if (s->flen == 5) {
            if (s->frame[0] != 0)
                return sbxp_http_fail(&s->perr, SBX_E_PROTOCOL,
                                      "%s: a compressed gRPC message (not asked for)",
                                      s->req.path);
            s->need = ((size_t)s->frame[1] << 24) | ((size_t)s->frame[2] << 16) |
                      ((size_t)s->frame[3] << 8) | s->frame[4];
            if (s->need > K8S_GRPC_MSG_MAX)
                return sbxp_http_fail(&s->perr, SBX_E_PROTOCOL,
                                      "%s: a gRPC message of %zu bytes (limit %u)", s->req.path,
                                      s->need, K8S_GRPC_MSG_MAX);
        }
        if (s->flen >= 5 && s->flen - 5 == s->need) {
            int rc = s->on_msg(s->msg_ctx, s->frame + 5, s->need);
            s->flen = 0;
            s->need = 0;
            if (rc != SBX_OK) {
                s->perr.status = rc;
                s->perr.from_callback = 1;
                return rc;
            }
        }
    }
    return SBX_OK;
}

int k8s_grpc_pump(struct k8s_grpc_stream *s, int (*on_msg)(void *ctx, const uint8_t *msg,
                                                           size_t len),
                  void *ctx, sbxp_http_error *err)
{
    s->on_msg = on_msg;
    s->msg_ctx = ctx;
    memset(&s->perr, 0, sizeof s->perr);
    struct sbx_sink sink = SBX_SINK_INIT(s, on_bytes);
    int rc = sbxp_http_xfer_pump(s->x, &sink, err);
    if (rc != SBX_OK && err->from_callback && s->perr.status) {
        *err = s->perr; /* ours, or the caller's callback's */
        return s->perr.status;
    }
    if (rc != SBX_OK)
        return rc;
    if (s->flen)
        return sbxp_http_fail(err, SBX_E_PROTOCOL,
                              "%s: the gRPC stream ended in the middle of a message",
                              s->req.path);
    if (!s->status.have)
        return sbxp_http_fail(err, SBX_E_PROTOCOL,
                              "%s: the gRPC stream ended without a grpc-status", s->req.path);
    return SBX_OK;
}

void k8s_grpc_close(struct k8s_grpc_stream *s)
{
    sbxp_http_xfer_free(s->x);
    s->x = NULL;
    free(s->frame);
    s->frame = NULL;
    free(s->body);
    s->body = NULL;
    free((char *)s->req.path);
    s->req.path = NULL;
}

int k8s_grpc_unary(sbx_sandbox *sb, sbx_call *call, const char *method, const void *msg,
                   size_t len, int64_t timeout_ms, uint8_t **resp, size_t *rlen,
                   struct k8s_grpc_status *gs, sbxp_http_error *err)
{
    *resp = NULL;
    *rlen = 0;
    struct k8s_grpc_stream s;
    int rc = k8s_grpc_open(sb, call, &s, method, msg, len, timeout_ms, err);
    if (rc != SBX_OK)
        return rc;
    const uint8_t *m;
    size_t n;
    uint8_t *copy = NULL;
    size_t clen = 0;
    for (;;) {
        rc = k8s_grpc_next(&s, &m, &n, err);
        if (rc != SBX_OK || !m)
            break;
        if (copy) {
            rc = sbxp_http_fail(err, SBX_E_PROTOCOL, "%s: more than one response message",
                                method);
            break;
        }
        copy = malloc(n ? n : 1);
        if (!copy) {
            rc = sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
            break;
        }
        memcpy(copy, m, n);
        clen = n;
    }
    *gs = s.status;
    k8s_grpc_close(&s);
    if (rc == SBX_OK && gs->code == 0 && !copy)
        rc = sbxp_http_fail(err, SBX_E_PROTOCOL, "%s: no response message", method);
    if (rc != SBX_OK || gs->code != 0) {
        free(copy);
        return rc;
    }
    *resp = copy;
    *rlen = clen;
    return SBX_OK;
}
