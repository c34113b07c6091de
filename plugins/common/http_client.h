/*
 * http_client.h - HTTP over libcurl for providers (unix socket and TCP).
 *
 * One sbxp_http per backend endpoint; it may be shared by threads. Each
 * request runs on its own connection slot taken from a small pool, so
 * concurrent requests never share curl state and idle connections are
 * reused. Request and response bodies are streamed through callbacks; no
 * body is held in memory whole except bounded JSON documents and bounded
 * error bodies.
 *
 * Every function returning int returns an sbx_status and, on failure, fills
 * the caller's sbxp_http_error with a message that names the request (method
 * and path, never the query string or any header) and, for HTTP errors, the
 * status and the service's own error text. Mapping:
 *   - cannot connect / daemon not running / name not resolved: UNAVAILABLE
 *   - EACCES/EPERM connecting to a unix socket: DENIED
 *   - HTTP 5xx and 429: UNAVAILABLE; 400/422: INVALID; 401/403: DENIED;
 *     404: NOT_FOUND; 409: EXISTS; 408: TIMEOUT; other 4xx: INVALID
 *   - a response cut short (connection closed mid-body, bad framing):
 *     PROTOCOL
 *   - deadline passed or the transfer stalled: TIMEOUT; cancellation:
 *     CANCELLED
 *   - a sink or source callback failing: the status it reported
 */
#ifndef SBXP_HTTP_CLIENT_H
#define SBXP_HTTP_CLIENT_H

#include <sbx/provider.h>

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Longest message kept in an sbxp_http_error, including the NUL. */
#define SBXP_HTTP_MSG_MAX 768

/* The outcome of a failed request. */
typedef struct sbxp_http_error {
    int status;       /* an sbx_status */
    long http_status; /* HTTP status of the response, 0 when none came */
    int os_errno;     /* errno of a failed connect, else 0 */
    int from_callback; /* 1 when a caller's sink/source stopped the transfer:
                          the callback's owner has already said why */
    char message[SBXP_HTTP_MSG_MAX];
} sbxp_http_error;

/* How a request learns that its caller gave up. Both members optional. */
struct sbxp_http_cancel {
    int fd;                   /* readable once cancelled, or -1 */
    int (*check)(void *ctx);  /* nonzero once cancelled, or NULL */
    void *ctx;
};

/* One request. Zero-initialize and fill what you need. */
struct sbxp_http_request {
    const char *method; /* "GET", "POST", "PUT", "DELETE", "HEAD" */
    const char *path;   /* absolute path plus escaped query: "/v1.41/x?a=b";
                           appended to the endpoint's base path */
    const char *const *headers; /* extra "Name: value" lines, NULL-terminated,
                                   or NULL; never logged nor put in errors */
    const char *content_type;   /* of the request body, or NULL */

    /* Request body: either in memory ... */
    const void *body;
    size_t body_len;
    /* ... or streamed from a source; body_src_len is the exact length, or
     * -1 for chunked transfer encoding. */
    const struct sbx_source *body_src;
    int64_t body_src_len;

    /* Called once per response header of the final response, name and value
     * trimmed (both NUL-terminated, borrowed). Nonzero return aborts the
     * request with that status. */
    int (*on_header)(void *ctx, const char *name, const char *value);
    void *header_ctx;

    int64_t timeout_ms; /* whole request, 0: none */
    /* Fail with SBX_E_TIMEOUT when, while the caller waits on the transfer
     * (in sbxp_http_start, _read, _pump), no byte moves in either direction
     * for this long: a daemon that stopped answering in the middle of a
     * long stream. Time the caller spends away (a slow sink, a paused
     * pull) does not count. 0: no such check. */
    int64_t stall_timeout_ms;
    int64_t connect_timeout_ms; /* 0: 10 s */
    const struct sbxp_http_cancel *cancel; /* or NULL */

    /* Keep the connection's socket open for raw writes after the response
     * headers (a "hijacked" stream such as Docker's exec attach). Implies a
     * fresh connection that is never reused. */
    int hijack;
};

typedef struct sbxp_http sbxp_http;
typedef struct sbxp_http_xfer sbxp_http_xfer;

/*
 * Parse an endpoint and prepare a client. Forms: "unix:///path/to.sock",
 * "tcp://host:port" (plain HTTP), "http://host[:port][/base]",
 * "https://host[:port][/base]". Returns SBX_E_CONFIG for anything else.
 * The caller frees the client with sbxp_http_free.
 */
int sbxp_http_new(const char *endpoint, sbxp_http **out, sbxp_http_error *err);

/* Free a client and its idle connections. No request may be running.
 * NULL is ignored. */
void sbxp_http_free(sbxp_http *h);

/*
 * Transport settings of a client beyond its endpoint: HTTP/2 (gRPC needs
 * it), the CA that verifies an https:// server instead of the system's, and
 * a client certificate (mutual TLS: a kubeconfig's client-certificate-data).
 * PEM blobs are copied (key material is wiped when the client is freed);
 * a NULL or zero-length blob leaves that setting as it was.
 */
struct sbxp_http_options {
    int http2;                 /* 1: HTTP/2 only - h2c with prior knowledge
                                  on http://, ALPN h2 on https:// */
    const void *ca_pem;        /* PEM bundle of trusted CAs */
    size_t ca_pem_len;
    const void *cert_pem;      /* client certificate chain */
    size_t cert_pem_len;
    const void *key_pem;       /* its private key; never logged */
    size_t key_pem_len;
};

/* Apply options before the first request (not while one runs). */
int sbxp_http_set_options(sbxp_http *h, const struct sbxp_http_options *o,
                          sbxp_http_error *err);

/* The endpoint as given to sbxp_http_new (borrowed), for messages. */
const char *sbxp_http_endpoint(const sbxp_http *h);

/*
 * Send a request and wait until the final response's status and headers
 * have arrived. An HTTP status >= 400 is a failure: the error body is read
 * (bounded) into err->message and *out stays NULL. On success the caller
 * reads the body with sbxp_http_xfer_read or sbxp_http_xfer_pump and frees the
 * transfer with sbxp_http_xfer_free.
 */
int sbxp_http_start(sbxp_http *h, const struct sbxp_http_request *req,
                    sbxp_http_xfer **out, sbxp_http_error *err);

/* HTTP status of a started transfer. */
long sbxp_http_xfer_status(const sbxp_http_xfer *x);

/*
 * Pull up to cap bytes of the response body into buf. *got is 0 at the end
 * of the body, which is reported only after the transfer completed cleanly
 * (a body cut short is SBX_E_PROTOCOL).
 */
int sbxp_http_xfer_read(sbxp_http_xfer *x, void *buf, size_t cap, size_t *got,
                        sbxp_http_error *err);

/* Push the rest of the response body into sink (NULL: discard) as it
 * arrives, until the transfer completes. */
int sbxp_http_xfer_pump(sbxp_http_xfer *x, const struct sbx_sink *sink,
                        sbxp_http_error *err);

/* The socket of a hijacked transfer (request.hijack), or -1. Valid until
 * sbxp_http_xfer_free; write to it with send(MSG_NOSIGNAL) and shutdown its
 * write side at the end of input. Never close it. */
int sbxp_http_xfer_socket(const sbxp_http_xfer *x);

/* Replace the transfer's deadline: ms from now, or 0 for none. Lets a
 * caller that handles a timeout itself (kill, then drain) keep reading. */
void sbxp_http_xfer_set_timeout(sbxp_http_xfer *x, int64_t ms);

/* Finish with a transfer (abandoning any unread body). NULL is ignored. */
void sbxp_http_xfer_free(sbxp_http_xfer *x);

/*
 * One whole request: start it, stream the body into sink (NULL discards
 * it), wait for completion. *http_status (may be NULL) receives the status.
 */
int sbxp_http_request(sbxp_http *h, const struct sbxp_http_request *req,
                      const struct sbx_sink *sink, long *http_status,
                      sbxp_http_error *err);

/* The sbx_status an HTTP status maps to (SBX_OK below 400). */
int sbxp_http_status_map(long http_status);

/* Escape a string for a URL query or path segment. The caller frees the
 * result with free(); NULL when out of memory. */
char *sbxp_http_escape(const char *s);

/* Record an error: format the message into err and return status. */
int sbxp_http_fail(sbxp_http_error *err, int status, const char *fmt, ...)
    SBX_PRINTF_LIKE(3, 4);

#ifdef __cplusplus
}
#endif

#endif /* SBXP_HTTP_CLIENT_H */
