/*
 * http_client.c - the transport behind http_client.h.
 *
 * Each transfer owns a "slot": a curl easy handle inside its own multi
 * handle. The multi handle lets one thread wait on the connection and on the
 * caller's cancellation fd at once (curl_multi_poll), and keeps the slot's
 * idle connection for the next request. Idle slots are pooled per client.
 *
 * The response body reaches the caller in one of two ways:
 *  - push (sbxp_http_xfer_pump): curl's write callback hands each chunk to
 *    the caller's sink as it arrives;
 *  - pull (sbxp_http_xfer_read): chunks are parked in a bounded buffer and
 *    the write callback pauses the transfer while that buffer is full, so a
 *    slow reader (libarchive parsing a tar) never makes us buffer more.
 */
#include "http_client.h"

#include "clock.h"

#include <curl/curl.h>
#include <json-c/json.h>

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Idle slots kept per client; more concurrent requests just get new ones. */
#define SLOT_POOL_MAX 8
/* Pull-mode body buffer: a few curl chunks. */
#define PULL_BUF_SIZE (4 * CURL_MAX_WRITE_SIZE)
/* Error bodies are kept up to this size; the rest is discarded. */
#define ERROR_BODY_MAX 4096
/* Longest single wait in curl_multi_poll, so deadlines and cancellation
 * checks without an fd are honoured promptly. */
#define POLL_SLICE_MS 200
/* The same for an HTTP/2 handle: libcurl 7.88 can read the end of an h2
 * stream (its last DATA, the trailers) together with earlier frames and
 * keep it in nghttp2's buffers; curl_multi_poll then waits on a socket that
 * has nothing more to say, and the transfer's end was noticed only when the
 * slice ran out (every gRPC call of the k8s provider took ~200 ms longer;
 * docs/PERFORMANCE.md "k8s provider"). A short slice bounds that delay,
 * and drive performs again at once, without polling, after a perform
 * that moved bytes (what nghttp2 kept is then handed over without a wait),
 * at most H2_SPINS_MAX times in a row. */
#define POLL_SLICE_H2_MS 5
#define H2_SPINS_MAX 32

struct slot {
    CURL *easy;
    CURLM *multi;
    struct slot *next;
    curl_socket_t last_fd; /* socket opened by the last connect */
    curl_socket_t held_fd; /* hijacked socket curl must not close */
    int held_closed;       /* curl wanted to close held_fd */
};

struct sbxp_http {
    char *endpoint;
    char *base_url;  /* scheme://authority[/base], no trailing slash */
    char *unix_path; /* socket path for unix endpoints, else NULL */
    pthread_mutex_t lock;
    struct slot *idle;
    size_t idle_count;
    int http2;                 /* sbxp_http_set_options */
    struct curl_blob ca, cert, key;
};

struct sbxp_http_xfer {
    sbxp_http *h;
    struct slot *s;
    struct curl_slist *headers;
    char *url;
    const char *method;
    const char *path;
    const struct sbxp_http_request *req; /* borrowed for the transfer */

    int64_t deadline; /* monotonic ms, 0: none */
    int64_t last_progress; /* monotonic ms of the last byte moved */
    uint64_t moves;        /* callbacks that moved bytes, for drive's h2 spin */
    int headers_done;
    long http_status;
    int done;
    CURLcode result;

    /* pull buffer */
    unsigned char *pend;
    size_t pend_off, pend_len, pend_cap;
    int paused;

    /* push target */
    int push;
    const struct sbx_sink *sink;

    /* error body (status >= 400) */
    int errmode;
    char errbody[ERROR_BODY_MAX + 1];
    size_t errbody_len;

    int cb_status; /* a callback's failure status, 0 if none */
    int cb_is_source;
    int hijack;
    curl_socket_t sock;
};

int sbxp_http_fail(sbxp_http_error *err, int status, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        err->status = status;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
    return status;
}

int sbxp_http_status_map(long code)
{
    if (code < 400)
        return SBX_OK;
    switch (code) {
    case 400: return SBX_E_INVALID;
    case 401:
    case 403: return SBX_E_DENIED;
    case 404:
    case 410: return SBX_E_NOT_FOUND;
    case 408: return SBX_E_TIMEOUT;
    case 409: return SBX_E_EXISTS;
    case 429: return SBX_E_UNAVAILABLE;
    default: break;
    }
    return code >= 500 ? SBX_E_UNAVAILABLE : SBX_E_INVALID;
}

char *sbxp_http_escape(const char *s)
{
    char *e = curl_easy_escape(NULL, s, 0);
    if (!e)
        return NULL;
    char *copy = strdup(e);
    curl_free(e);
    return copy;
}

/* ---------------------------------------------------------------------- */
/* Client                                                                  */
/* ---------------------------------------------------------------------- */

static int global_init(sbxp_http_error *err)
{
    /* curl_global_init is reference counted and thread-safe in the libcurl
     * versions we build against (>= 7.84). */
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return sbxp_http_fail(err, SBX_E_INTERNAL, "libcurl initialization failed");
    return SBX_OK;
}

int sbxp_http_new(const char *endpoint, sbxp_http **out, sbxp_http_error *err)
{
    *out = NULL;
    if (!endpoint || !*endpoint)
        return sbxp_http_fail(err, SBX_E_CONFIG, "empty endpoint");
    sbxp_http *h = calloc(1, sizeof *h);
    if (!h)
        return sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
    h->endpoint = strdup(endpoint);
    if (!h->endpoint)
        goto nomem;

    if (strncmp(endpoint, "unix://", 7) == 0) {
        const char *p = endpoint + 7;
        if (*p != '/') {
            free(h->endpoint);
            free(h);
            return sbxp_http_fail(err, SBX_E_CONFIG,
                                  "endpoint %s: unix socket path must be absolute",
                                  endpoint);
        }
        h->unix_path = strdup(p);
        h->base_url = strdup("http://localhost");
    } else if (strncmp(endpoint, "tcp://", 6) == 0) {
        const char *p = endpoint + 6;
        size_t n = strcspn(p, "/");
        if (n == 0 || p[n] != '\0') {
            free(h->endpoint);
            free(h);
            return sbxp_http_fail(err, SBX_E_CONFIG,
                                  "endpoint %s: expected tcp://host:port", endpoint);
        }
        size_t len = strlen("http://") + n + 1;
        h->base_url = malloc(len);
        if (h->base_url)
            snprintf(h->base_url, len, "http://%s", p);
    } else if (strncmp(endpoint, "http://", 7) == 0 ||
               strncmp(endpoint, "https://", 8) == 0) {
        h->base_url = strdup(endpoint);
        if (h->base_url) {
            size_t n = strlen(h->base_url);
            while (n > 0 && h->base_url[n - 1] == '/')
                h->base_url[--n] = '\0';
        }
    } else {
        free(h->endpoint);
        free(h);
        return sbxp_http_fail(err, SBX_E_CONFIG,
                              "endpoint %s: unsupported scheme (use unix://, "
                              "tcp://, http:// or https://)",
                              endpoint);
    }
    if (!h->base_url || (strncmp(endpoint, "unix://", 7) == 0 && !h->unix_path))
        goto nomem;
    int rc = global_init(err);
    if (rc != SBX_OK) {
        free(h->unix_path);
        free(h->base_url);
        free(h->endpoint);
        free(h);
        return rc;
    }
    pthread_mutex_init(&h->lock, NULL);
    *out = h;
    return SBX_OK;

nomem:
    free(h->unix_path);
    free(h->base_url);
    free(h->endpoint);
    free(h);
    return sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
}

static void slot_destroy(struct slot *s)
{
    if (!s)
        return;
    if (s->multi && s->easy)
        curl_multi_remove_handle(s->multi, s->easy);
    if (s->easy)
        curl_easy_cleanup(s->easy);
    if (s->multi)
        curl_multi_cleanup(s->multi);
    /* Every connection is closed now; close the socket we kept from curl. */
    if (s->held_fd != CURL_SOCKET_BAD && s->held_closed)
        close(s->held_fd);
    free(s);
}

void sbxp_http_free(sbxp_http *h)
{
    if (!h)
        return;
    struct slot *s = h->idle;
    while (s) {
        struct slot *next = s->next;
        slot_destroy(s);
        s = next;
    }
    pthread_mutex_destroy(&h->lock);
    free(h->ca.data);
    free(h->cert.data);
    if (h->key.data) {
        /* the private key is a credential: leave no copy in freed memory */
        volatile unsigned char *k = h->key.data;
        for (size_t i = 0; i < h->key.len; i++)
            k[i] = 0;
    }
    free(h->key.data);
    free(h->unix_path);
    free(h->base_url);
    free(h->endpoint);
    free(h);
    curl_global_cleanup();
}

static int blob_set(struct curl_blob *b, const void *data, size_t len)
{
    if (!data || !len)
        return 0;
    void *copy = malloc(len);
    if (!copy)
        return -1;
    memcpy(copy, data, len);
    free(b->data);
    b->data = copy;
    b->len = len;
    b->flags = CURL_BLOB_COPY;
    return 0;
}

int sbxp_http_set_options(sbxp_http *h, const struct sbxp_http_options *o,
                          sbxp_http_error *err)
{
    if (blob_set(&h->ca, o->ca_pem, o->ca_pem_len) != 0 ||
        blob_set(&h->cert, o->cert_pem, o->cert_pem_len) != 0 ||
        blob_set(&h->key, o->key_pem, o->key_pem_len) != 0)
        return sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
    h->http2 = o->http2 ? 1 : 0;
    return SBX_OK;
}

const char *sbxp_http_endpoint(const sbxp_http *h)
{
    return h->endpoint;
}

static struct slot *slot_take(sbxp_http *h, int fresh)
{
    struct slot *s = NULL;
    if (!fresh) {
        pthread_mutex_lock(&h->lock);
        s = h->idle;
        if (s) {
            h->idle = s->next;
            h->idle_count--;
        }
        pthread_mutex_unlock(&h->lock);
        if (s) {
            s->next = NULL;
            /* A fresh easy handle, not curl_easy_reset: libcurl 7.88 keeps
             * a pointer to the previous response's last header across a
             * reset, and a folded header line at the start of the next
             * response then reads freed memory (found by fuzz_http). The
             * connections live in the multi handle and are still reused. */
            CURL *renewed = curl_easy_init();
            if (!renewed) {
                slot_destroy(s);
                return NULL;
            }
            curl_easy_cleanup(s->easy);
            s->easy = renewed;
            return s;
        }
    }
    s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->last_fd = CURL_SOCKET_BAD;
    s->held_fd = CURL_SOCKET_BAD;
    s->easy = curl_easy_init();
    s->multi = curl_multi_init();
    if (!s->easy || !s->multi) {
        slot_destroy(s);
        return NULL;
    }
    return s;
}

static void slot_give_back(sbxp_http *h, struct slot *s)
{
    pthread_mutex_lock(&h->lock);
    if (h->idle_count < SLOT_POOL_MAX) {
        s->next = h->idle;
        h->idle = s;
        h->idle_count++;
        s = NULL;
    }
    pthread_mutex_unlock(&h->lock);
    slot_destroy(s);
}

/* ---------------------------------------------------------------------- */
/* curl callbacks                                                          */
/* ---------------------------------------------------------------------- */

/* Every socket is opened close-on-exec: providers never leak fds into
 * processes the host spawns. */
static curl_socket_t open_socket(void *ud, curlsocktype purpose,
                                 struct curl_sockaddr *addr)
{
    struct slot *s = ud;
    (void)purpose;
    int fd = socket(addr->family, addr->socktype | SOCK_CLOEXEC, addr->protocol);
    if (fd < 0)
        return CURL_SOCKET_BAD;
    s->last_fd = fd;
    return fd;
}

static int close_socket(void *ud, curl_socket_t fd)
{
    struct slot *s = ud;
    if (fd == s->held_fd) {
        s->held_closed = 1;
        return 0;
    }
    return close(fd);
}

static char *trim(char *s, char *end)
{
    while (s < end && (*s == ' ' || *s == '\t'))
        s++;
    while (end > s && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r' ||
                       end[-1] == '\n'))
        end--;
    *end = '\0';
    return s;
}

static size_t on_header(char *data, size_t size, size_t n, void *ud)
{
    struct sbxp_http_xfer *x = ud;
    size_t len = size * n;
    x->last_progress = sbxs_now_ms();
    x->moves++;
    if (len <= 2 && (len == 0 || data[0] == '\r' || data[0] == '\n')) {
        long code = 0;
        curl_easy_getinfo(x->s->easy, CURLINFO_RESPONSE_CODE, &code);
        if (code >= 200) {
            x->headers_done = 1;
            x->http_status = code;
            if (code >= 400)
                x->errmode = 1;
        }
        return len;
    }
    if (!x->req->on_header || len >= 8192)
        return len;
    if (len >= 5 && memcmp(data, "HTTP/", 5) == 0)
        return len; /* status line */
    long code = 0;
    curl_easy_getinfo(x->s->easy, CURLINFO_RESPONSE_CODE, &code);
    if (code < 200)
        return len; /* header of an interim response */
    char line[8192];
    memcpy(line, data, len);
    line[len] = '\0';
    char *colon = strchr(line, ':');
    if (!colon)
        return len;
    char *name = trim(line, colon);
    char *value = trim(colon + 1, line + len);
    int rc = x->req->on_header(x->req->header_ctx, name, value);
    if (rc != 0) {
        x->cb_status = rc;
        return 0;
    }
    return len;
}

static size_t on_body(char *data, size_t size, size_t n, void *ud)
{
    struct sbxp_http_xfer *x = ud;
    size_t len = size * n;
    x->last_progress = sbxs_now_ms();
    x->moves++;
    if (x->errmode) {
        size_t room = ERROR_BODY_MAX - x->errbody_len;
        size_t take = len < room ? len : room;
        memcpy(x->errbody + x->errbody_len, data, take);
        x->errbody_len += take;
        return len;
    }
    if (x->push) {
        if (len && x->sink && x->sink->write) {
            int rc = x->sink->write(x->sink->ctx, data, len);
            if (rc != 0) {
                x->cb_status = rc;
                return 0;
            }
        }
        return len;
    }
    /* pull: park the chunk, or pause until the reader made room */
    if (x->pend_off == x->pend_len)
        x->pend_off = x->pend_len = 0;
    if (x->pend_cap - x->pend_len < len && x->pend_off > 0) {
        memmove(x->pend, x->pend + x->pend_off, x->pend_len - x->pend_off);
        x->pend_len -= x->pend_off;
        x->pend_off = 0;
    }
    if (x->pend_cap - x->pend_len < len) {
        if (x->pend_len > 0) {
            x->paused = 1;
            return CURL_WRITEFUNC_PAUSE;
        }
        unsigned char *bigger = realloc(x->pend, len);
        if (!bigger) {
            x->cb_status = SBX_E_NOMEM;
            return 0;
        }
        x->pend = bigger;
        x->pend_cap = len;
    }
    memcpy(x->pend + x->pend_len, data, len);
    x->pend_len += len;
    return len;
}

static size_t on_upload(char *buf, size_t size, size_t n, void *ud)
{
    struct sbxp_http_xfer *x = ud;
    const struct sbx_source *src = x->req->body_src;
    long got = src->read(src->ctx, buf, size * n);
    x->last_progress = sbxs_now_ms(); /* curl asked for more: the last part went */
    x->moves++;
    if (got < 0) {
        x->cb_status = SBX_E_IO;
        x->cb_is_source = 1;
        return CURL_READFUNC_ABORT;
    }
    return (size_t)got;
}

/* ---------------------------------------------------------------------- */
/* Errors                                                                  */
/* ---------------------------------------------------------------------- */

/* The request named for messages: method and path without the query. */
static void describe(const struct sbxp_http_xfer *x, char *buf, size_t cap)
{
    size_t plen = strcspn(x->path, "?");
    snprintf(buf, cap, "%s %.*s", x->method, (int)(plen > 200 ? 200 : plen),
             x->path);
}

/* Copy printable text, replacing control bytes, at most cap-1 bytes. */
static void sanitize(char *dst, size_t cap, const char *src, size_t len)
{
    size_t j = 0;
    for (size_t i = 0; i < len && j + 1 < cap; i++) {
        unsigned char c = (unsigned char)src[i];
        dst[j++] = (c < 0x20 || c == 0x7f) ? ' ' : (char)c;
    }
    while (j > 0 && dst[j - 1] == ' ')
        j--;
    dst[j] = '\0';
}

/* The service's own explanation from an error body: the "message" (Docker,
 * most JSON APIs), "error" or "detail" member of a JSON object, else the
 * text itself. */
static void error_text(const char *body, size_t len, char *out, size_t cap)
{
    out[0] = '\0';
    if (len == 0)
        return;
    json_tokener *tok = json_tokener_new();
    json_object *obj = tok ? json_tokener_parse_ex(tok, body, (int)len) : NULL;
    if (tok)
        json_tokener_free(tok);
    if (obj && json_object_is_type(obj, json_type_object)) {
        static const char *const keys[] = {"message", "error", "detail", "msg"};
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
            json_object *v;
            if (json_object_object_get_ex(obj, keys[i], &v) &&
                json_object_is_type(v, json_type_string)) {
                const char *s = json_object_get_string(v);
                sanitize(out, cap, s, strlen(s));
                json_object_put(obj);
                return;
            }
        }
    }
    if (obj)
        json_object_put(obj);
    sanitize(out, cap, body, len > 300 ? 300 : len);
}

static int fail_http(struct sbxp_http_xfer *x, sbxp_http_error *err)
{
    char what[256], text[512];
    describe(x, what, sizeof what);
    error_text(x->errbody, x->errbody_len, text, sizeof text);
    int st = sbxp_http_status_map(x->http_status);
    if (err) {
        err->http_status = x->http_status;
    }
    return sbxp_http_fail(err, st, "%s: HTTP %ld%s%s", what, x->http_status,
                          text[0] ? ": " : "", text);
}

static int fail_curl(struct sbxp_http_xfer *x, CURLcode rc, sbxp_http_error *err)
{
    char what[256];
    describe(x, what, sizeof what);
    if (x->cb_status) {
        if (err) {
            err->from_callback = 1;
            err->http_status = x->http_status;
        }
        if (x->cb_is_source)
            return sbxp_http_fail(err, x->cb_status,
                                  "%s: reading the request body failed", what);
        return sbxp_http_fail(err, x->cb_status, "%s: stopped by the receiver (%s)",
                              what, sbx_strerror((sbx_status)x->cb_status));
    }
    long oserr = 0;
    curl_easy_getinfo(x->s->easy, CURLINFO_OS_ERRNO, &oserr);
    if (err) {
        err->os_errno = (int)oserr;
        err->http_status = x->http_status;
    }
    const char *where = x->h->endpoint;
    switch (rc) {
    case CURLE_COULDNT_CONNECT:
        if (oserr == EACCES || oserr == EPERM)
            return sbxp_http_fail(err, SBX_E_DENIED,
                                  "%s: permission denied connecting to %s", what,
                                  where);
        return sbxp_http_fail(err, SBX_E_UNAVAILABLE, "%s: cannot connect to %s: %s",
                              what, where,
                              oserr ? strerror((int)oserr) : curl_easy_strerror(rc));
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
        return sbxp_http_fail(err, SBX_E_UNAVAILABLE, "%s: cannot resolve %s", what,
                              where);
    case CURLE_OPERATION_TIMEDOUT:
        return sbxp_http_fail(err, SBX_E_TIMEOUT, "%s: %s timed out", what, where);
    case CURLE_GOT_NOTHING:
    case CURLE_SEND_ERROR:
        return sbxp_http_fail(err, SBX_E_UNAVAILABLE,
                              "%s: %s closed the connection without answering", what,
                              where);
    case CURLE_RECV_ERROR:
        if (!x->headers_done)
            return sbxp_http_fail(err, SBX_E_UNAVAILABLE,
                                  "%s: %s closed the connection without answering",
                                  what, where);
        return sbxp_http_fail(err, SBX_E_PROTOCOL,
                              "%s: the response from %s was cut short (%s)", what,
                              where, curl_easy_strerror(rc));
    case CURLE_PARTIAL_FILE:
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM: /* the stream was reset mid-response */
    case CURLE_BAD_CONTENT_ENCODING:
        return sbxp_http_fail(err, SBX_E_PROTOCOL, "%s: bad or truncated response from %s: %s",
                              what, where, curl_easy_strerror(rc));
    case CURLE_OUT_OF_MEMORY:
        return sbxp_http_fail(err, SBX_E_NOMEM, "%s: out of memory", what);
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CONNECT_ERROR:
        return sbxp_http_fail(err, SBX_E_UNAVAILABLE, "%s: TLS with %s failed: %s",
                              what, where, curl_easy_strerror(rc));
    default:
        break;
    }
    return sbxp_http_fail(err, SBX_E_IO, "%s: %s: %s", what, where,
                          curl_easy_strerror(rc));
}

/* ---------------------------------------------------------------------- */
/* Driving a transfer                                                      */
/* ---------------------------------------------------------------------- */

enum until { UNTIL_HEADERS, UNTIL_DATA, UNTIL_DONE };

static int reached(const struct sbxp_http_xfer *x, enum until u)
{
    if (x->done)
        return 1;
    switch (u) {
    case UNTIL_HEADERS: return x->headers_done;
    case UNTIL_DATA: return x->pend_len > x->pend_off;
    case UNTIL_DONE: return 0;
    }
    return 1;
}

static void collect_done(struct sbxp_http_xfer *x)
{
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(x->s->multi, &left))) {
        if (m->msg == CURLMSG_DONE && m->easy_handle == x->s->easy) {
            x->done = 1;
            x->result = m->data.result;
        }
    }
}

static int cancelled(const struct sbxp_http_xfer *x)
{
    const struct sbxp_http_cancel *c = x->req->cancel;
    return c && c->check && c->check(c->ctx);
}

static int drive(struct sbxp_http_xfer *x, enum until u, sbxp_http_error *err)
{
    /* the stall clock runs only while we wait here */
    int64_t entered = sbxs_now_ms();
    unsigned spins = 0;
    for (;;) {
        int running = 0;
        uint64_t moves = x->moves;
        CURLMcode mc = curl_multi_perform(x->s->multi, &running);
        if (mc != CURLM_OK)
            return sbxp_http_fail(err, SBX_E_INTERNAL, "curl_multi_perform: %s",
                                  curl_multi_strerror(mc));
        collect_done(x);
        if (reached(x, u))
            return SBX_OK;
        int spin = x->h->http2 && x->moves != moves && spins < H2_SPINS_MAX;
        spins = spin ? spins + 1 : 0;
        if (cancelled(x)) {
            char what[256];
            describe(x, what, sizeof what);
            return sbxp_http_fail(err, SBX_E_CANCELLED, "%s: cancelled", what);
        }
        int wait = x->h->http2 ? POLL_SLICE_H2_MS : POLL_SLICE_MS;
        if (x->deadline) {
            int64_t left_ms = x->deadline - sbxs_now_ms();
            if (left_ms <= 0) {
                char what[256];
                describe(x, what, sizeof what);
                return sbxp_http_fail(err, SBX_E_TIMEOUT, "%s: timed out", what);
            }
            if (left_ms < wait)
                wait = (int)left_ms;
        }
        if (x->req->stall_timeout_ms > 0) {
            int64_t since = x->last_progress > entered ? x->last_progress : entered;
            int64_t left_ms = since + x->req->stall_timeout_ms - sbxs_now_ms();
            if (left_ms <= 0) {
                char what[256];
                describe(x, what, sizeof what);
                return sbxp_http_fail(err, SBX_E_TIMEOUT,
                                      "%s: %s sent and accepted nothing for %lld ms",
                                      what, x->h->endpoint,
                                      (long long)x->req->stall_timeout_ms);
            }
            if (left_ms < wait)
                wait = (int)left_ms;
        }
        struct curl_waitfd extra = {0};
        unsigned nextra = 0;
        if (x->req->cancel && x->req->cancel->fd >= 0) {
            extra.fd = x->req->cancel->fd;
            extra.events = CURL_WAIT_POLLIN;
            nextra = 1;
        }
        mc = curl_multi_poll(x->s->multi, nextra ? &extra : NULL, nextra, spin ? 0 : wait,
                             NULL);
        if (mc != CURLM_OK)
            return sbxp_http_fail(err, SBX_E_INTERNAL, "curl_multi_poll: %s",
                                  curl_multi_strerror(mc));
    }
}

static int setup(sbxp_http *h, struct sbxp_http_xfer *x, sbxp_http_error *err)
{
    const struct sbxp_http_request *req = x->req;
    CURL *e = x->s->easy;
    size_t ulen = strlen(h->base_url) + strlen(req->path) + 1;
    x->url = malloc(ulen);
    if (!x->url)
        return sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
    snprintf(x->url, ulen, "%s%s", h->base_url, req->path);

    struct curl_slist *l = NULL, *t;
#define ADD_HEADER(s)                                                          \
    do {                                                                       \
        t = curl_slist_append(l, (s));                                         \
        if (!t)                                                                \
            goto nomem;                                                        \
        l = t;                                                                 \
    } while (0)
    ADD_HEADER("Expect:"); /* no 100-continue round trip */
    ADD_HEADER("Accept:");
    if (req->content_type) {
        char ct[256];
        snprintf(ct, sizeof ct, "Content-Type: %s", req->content_type);
        ADD_HEADER(ct);
    }
    for (const char *const *hp = req->headers; hp && *hp; hp++)
        ADD_HEADER(*hp);
#undef ADD_HEADER
    x->headers = l;

    curl_easy_setopt(e, CURLOPT_URL, x->url);
    if (h->unix_path)
        curl_easy_setopt(e, CURLOPT_UNIX_SOCKET_PATH, h->unix_path);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    if (h->http2 && strncmp(h->base_url, "https:", 6) == 0) {
        curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    } else if (h->http2) {
        curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE);
        /* libcurl 7.88 (Debian 12) sends nothing on a reused h2c
         * prior-knowledge connection (`curl --http2-prior-knowledge URL
         * --next ... URL` shows it): one connection per request. */
        curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);
        curl_easy_setopt(e, CURLOPT_FORBID_REUSE, 1L);
    } else
        curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    if (h->ca.data)
        curl_easy_setopt(e, CURLOPT_CAINFO_BLOB, &h->ca);
    if (h->cert.data)
        curl_easy_setopt(e, CURLOPT_SSLCERT_BLOB, &h->cert);
    if (h->key.data)
        curl_easy_setopt(e, CURLOPT_SSLKEY_BLOB, &h->key);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "sbx/0.1");
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->headers);
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, req->method);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                     (long)(req->connect_timeout_ms > 0 ? req->connect_timeout_ms
                                                        : 10000));
    curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, open_socket);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, x->s);
    curl_easy_setopt(e, CURLOPT_CLOSESOCKETFUNCTION, close_socket);
    curl_easy_setopt(e, CURLOPT_CLOSESOCKETDATA, x->s);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
    if (strcmp(req->method, "HEAD") == 0)
        curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    if (req->body_src) {
        curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(e, CURLOPT_READFUNCTION, on_upload);
        curl_easy_setopt(e, CURLOPT_READDATA, x);
        if (req->body_src_len >= 0)
            curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE,
                             (curl_off_t)req->body_src_len);
    } else if (req->body) {
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, req->body);
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
    } else if (strcmp(req->method, "POST") == 0 || strcmp(req->method, "PUT") == 0) {
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, "");
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
    }
    if (req->hijack) {
        curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);
        curl_easy_setopt(e, CURLOPT_FORBID_REUSE, 1L);
    }
    if (curl_multi_add_handle(x->s->multi, e) != CURLM_OK)
        return sbxp_http_fail(err, SBX_E_INTERNAL, "curl_multi_add_handle failed");
    return SBX_OK;

nomem:
    curl_slist_free_all(l);
    return sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
}

static int finish_result(struct sbxp_http_xfer *x, sbxp_http_error *err)
{
    if (x->result != CURLE_OK || x->cb_status)
        return fail_curl(x, x->result, err);
    if (x->errmode)
        return fail_http(x, err);
    return SBX_OK;
}

int sbxp_http_start(sbxp_http *h, const struct sbxp_http_request *req,
                    sbxp_http_xfer **out, sbxp_http_error *err)
{
    *out = NULL;
    if (err)
        memset(err, 0, sizeof *err);
    struct sbxp_http_xfer *x = calloc(1, sizeof *x);
    if (!x)
        return sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
    x->h = h;
    x->req = req;
    x->method = req->method;
    x->path = req->path;
    x->sock = CURL_SOCKET_BAD;
    x->hijack = req->hijack;
    x->pend_cap = PULL_BUF_SIZE;
    x->pend = malloc(x->pend_cap);
    x->s = slot_take(h, req->hijack);
    if (!x->pend || !x->s) {
        sbxp_http_xfer_free(x);
        return sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
    }
    if (req->timeout_ms > 0)
        x->deadline = sbxs_now_ms() + req->timeout_ms;
    int rc = setup(h, x, err);
    if (rc == SBX_OK)
        rc = drive(x, UNTIL_HEADERS, err);
    if (rc == SBX_OK && x->errmode) {
        /* read the (bounded) error body, then report it */
        rc = drive(x, UNTIL_DONE, err);
        if (rc == SBX_OK)
            rc = fail_http(x, err);
    } else if (rc == SBX_OK && x->done) {
        rc = finish_result(x, err);
    }
    if (rc == SBX_OK && !x->headers_done)
        rc = sbxp_http_fail(err, SBX_E_PROTOCOL, "%s %s: no response from %s",
                            req->method, req->path, h->endpoint);
    if (rc != SBX_OK) {
        sbxp_http_xfer_free(x);
        return rc;
    }
    if (x->hijack) {
        x->sock = x->s->last_fd;
        x->s->held_fd = x->sock;
    }
    *out = x;
    return SBX_OK;
}

long sbxp_http_xfer_status(const sbxp_http_xfer *x)
{
    return x->http_status;
}

int sbxp_http_xfer_socket(const sbxp_http_xfer *x)
{
    return x->sock;
}

int sbxp_http_xfer_read(sbxp_http_xfer *x, void *buf, size_t cap, size_t *got,
                        sbxp_http_error *err)
{
    *got = 0;
    if (x->pend_len == x->pend_off) {
        if (x->paused) {
            x->paused = 0;
            x->pend_off = x->pend_len = 0;
            curl_easy_pause(x->s->easy, CURLPAUSE_CONT);
        }
        if (x->pend_len == x->pend_off && !x->done) {
            int rc = drive(x, UNTIL_DATA, err);
            if (rc != SBX_OK)
                return rc;
        }
        if (x->pend_len == x->pend_off) {
            /* done: a clean end, or a failure */
            return finish_result(x, err);
        }
    }
    size_t avail = x->pend_len - x->pend_off;
    size_t take = avail < cap ? avail : cap;
    memcpy(buf, x->pend + x->pend_off, take);
    x->pend_off += take;
    *got = take;
    return SBX_OK;
}

int sbxp_http_xfer_pump(sbxp_http_xfer *x, const struct sbx_sink *sink,
                        sbxp_http_error *err)
{
    /* hand over what was parked while the headers arrived */
    if (x->pend_len > x->pend_off && sink && sink->write) {
        int rc = sink->write(sink->ctx, x->pend + x->pend_off,
                             x->pend_len - x->pend_off);
        if (rc != 0) {
            x->cb_status = rc;
            return fail_curl(x, CURLE_WRITE_ERROR, err);
        }
    }
    x->pend_off = x->pend_len = 0;
    x->push = 1;
    x->sink = sink;
    if (x->paused) {
        x->paused = 0;
        curl_easy_pause(x->s->easy, CURLPAUSE_CONT);
    }
    int rc = drive(x, UNTIL_DONE, err);
    if (rc != SBX_OK)
        return rc;
    return finish_result(x, err);
}

void sbxp_http_xfer_set_timeout(sbxp_http_xfer *x, int64_t ms)
{
    x->deadline = ms > 0 ? sbxs_now_ms() + ms : 0;
}

void sbxp_http_xfer_free(sbxp_http_xfer *x)
{
    if (!x)
        return;
    if (x->s) {
        int reusable = x->done && x->result == CURLE_OK && !x->hijack;
        curl_multi_remove_handle(x->s->multi, x->s->easy);
        if (reusable) {
            slot_give_back(x->h, x->s);
        } else {
            slot_destroy(x->s);
        }
    }
    curl_slist_free_all(x->headers);
    free(x->url);
    free(x->pend);
    free(x);
}

int sbxp_http_request(sbxp_http *h, const struct sbxp_http_request *req,
                      const struct sbx_sink *sink, long *http_status,
                      sbxp_http_error *err)
{
    sbxp_http_xfer *x = NULL;
    int rc = sbxp_http_start(h, req, &x, err);
    if (http_status)
        *http_status = x ? x->http_status : (err ? err->http_status : 0);
    if (rc != SBX_OK)
        return rc;
    rc = sbxp_http_xfer_pump(x, sink, err);
    sbxp_http_xfer_free(x);
    return rc;
}
