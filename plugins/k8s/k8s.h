/*
 * k8s.h - the `k8s` provider: sandboxes of Kubernetes SIG Apps'
 * agent-sandbox. A session's sandbox is a SandboxClaim on a warm pool
 * (claim mode, the default) or a Sandbox made from a SandboxTemplate's pod
 * template (template mode), named after the session's key hash and
 * labelled with its owner; its commands run through the sandbox-router in
 * sandboxd's gRPC ProcessService, its files move through sandboxd's REST
 * filesystem API, also through the router.
 *
 * Files by responsibility:
 *   conf.c        configuration keys, credentials (kubeconfig or in-cluster
 *                 files), instance setup, the Authorization header
 *   kubeconfig.c  reading a kubeconfig file (libyaml)
 *   kapi.c        calls to the API server: retries within a deadline,
 *                 the token re-read on 401, object paths
 *   watch.c       waiting for an object's Ready condition with a watch
 *                 (resourceVersion, restart on a drop, re-list on 410)
 *   lifecycle.c   create/attach/destroy/release/root, ownership
 *   grpc.c        gRPC over HTTP/2: framing, trailers, status mapping
 *   exec.c        exec through ProcessService.Start, stdin, signals,
 *                 timeout and cancellation, the sweep of leftovers
 *   files.c       read_file/write_file through /v1/files
 *   provider.c    descriptor and ops table
 *   health.c      the health op: API server, credentials, CRDs, the list verb
 */
#ifndef SBX_K8S_H
#define SBX_K8S_H

#include <sbx/provider.h>

#include "call_cancel.h"
#include "call_error.h"
#include "http_client.h"
#include "http_json.h"
#include "http_retry.h"

#include <json-c/json.h>
#include <pthread.h>
#include <stdint.h>

#define K8S_PROVIDER "k8s"

/* Labels of what this provider creates. The owner value is the first 63
 * hex digits of the key hash (a label value holds at most 63). */
#define K8S_LABEL_MANAGED "sbx.dev/managed"
#define K8S_LABEL_OWNER "sbx.dev/owner"
#define K8S_OWNER_LEN 63
/* Object names: "sbx-" and the first 40 hex digits of the key hash (a
 * DNS-1123 label, so that the Sandbox and its pod may carry it too). */
#define K8S_NAME_PREFIX "sbx-"
#define K8S_NAME_HASH 40
#define K8S_NAME_MAX 64

/* The two kinds of object a session's sandbox can be. */
enum k8s_kind { K8S_CLAIM = 0, K8S_SANDBOX = 1 };

struct k8s_conf {
    char *api_url;          /* https://host:port (no trailing slash) */
    char *token;            /* bearer token, or NULL (client certificate) */
    char *token_file;       /* re-read when the server answers 401, or NULL */
    char *token_source;     /* what to name when the credentials are refused */
    void *ca_pem, *cert_pem, *key_pem; /* PEM blobs (key: a credential) */
    size_t ca_len, cert_len, key_len;
    char *ns;               /* namespace */
    int kind;               /* enum k8s_kind: warm_pool or template */
    char *pool;             /* claim mode: the SandboxWarmPool */
    char *template_name;    /* template mode: the SandboxTemplate */
    int64_t shutdown_after_s; /* lifecycle.shutdownTime = create + this; 0: none */
    char *router_url;
    char *router_token;     /* bearer for the router (tokenreview), or NULL */
    int grpc_port, rest_port;
    char *workspace;        /* sandboxd's --root-dir, or NULL: ask sandboxd */
    int64_t ready_timeout_ms;
    int64_t request_timeout_ms;
    int64_t connect_timeout_ms;
    int64_t exec_grace_ms;  /* after a kill: how long to wait for the exit */
    struct sbxp_http_retry retry;
};

struct k8s_state {
    const struct sbx_host *host;
    struct k8s_conf cfg;
    sbxp_http *api;         /* the API server */
    sbxp_http *grpc;        /* the router, HTTP/2 (sandboxd's gRPC port) */
    sbxp_http *rest;        /* the router, HTTP/1.1 (sandboxd's REST port) */
    pthread_mutex_t lock;   /* guards auth (the token may be re-read) */
    char *auth;             /* "Authorization: Bearer ..." or NULL */
    char *router_auth;
};

struct sbx_sandbox {
    struct k8s_state *st;
    int kind;
    char name[K8S_NAME_MAX];  /* the claim's or Sandbox's name */
    char pod[254];            /* the Sandbox (pod) name: X-Sandbox-ID */
    char key_hash[SBX_KEY_HASH_LEN + 1];
    pthread_mutex_t lock;     /* guards root */
    char root[4096];          /* "" until known (k8s_root) */
};

/* ---- conf.c ------------------------------------------------------------ */
int k8s_init(const struct sbx_host *host, sbx_call *call, void **state);
void k8s_fini(void *state);
#define k8s_error(st, call, ...) sbxp_call_error((st)->host, (call), __VA_ARGS__)
/* The Authorization header line (malloc'd copy, NULL for none). */
char *k8s_auth_header(struct k8s_state *st);
/* Re-read the token file after a 401: 1 when the token changed. */
int k8s_auth_reload(struct k8s_state *st);

/* ---- health.c ---------------------------------------------------------- */
int k8s_health(void *state, sbx_call *call, char detail[SBX_HEALTH_DETAIL_MAX]);

/* ---- kubeconfig.c ------------------------------------------------------ */
/* What a kubeconfig's context selects. Strings malloc'd (k8s_kubeconfig_free). */
struct k8s_kubeconfig {
    char *server;
    char *ns;                         /* the context's namespace or NULL */
    char *user;                       /* the user entry's name */
    char *token;                      /* user.token, or NULL */
    char *token_file;                 /* user.tokenFile, or NULL */
    void *ca_pem, *cert_pem, *key_pem; /* decoded *-data or read files */
    size_t ca_len, cert_len, key_len;
};
/* Read path and select context (NULL: current-context). SBX_E_CONFIG with a
 * message in msg naming the file and what is wrong (never a credential). */
int k8s_kubeconfig_load(const char *path, const char *context, struct k8s_kubeconfig *out,
                        char *msg, size_t cap);
void k8s_kubeconfig_free(struct k8s_kubeconfig *kc);
/* A whole small file (credentials, CAs): malloc'd, NUL-terminated; NULL with
 * errno set. At most max bytes. */
char *k8s_slurp(const char *path, size_t max, size_t *len);

/* ---- kapi.c ------------------------------------------------------------ */
/* The collection path of a kind in the configured namespace, and of one
 * object (name may be NULL). */
void k8s_path(struct k8s_state *st, int kind, const char *name, const char *query, char *buf,
              size_t cap);
/*
 * One JSON call to the API server: retried while it fails transiently
 * (connection refused or reset, 429, 5xx) with capped backoff until
 * deadline_ms (monotonic; 0: now + request_timeout_ms), a 401 retried once
 * after re-reading the token file. *out (may be NULL) gets the answer.
 * err has the failure; the caller reports it with k8s_report.
 */
int k8s_call(struct k8s_state *st, sbx_call *call, const char *method, const char *path,
             json_object *body, json_object **out, int64_t deadline_ms, sbxp_http_error *err);
/* One GET, not retried (health): only a 401 is tried again, once, after
 * re-reading the token file. */
int k8s_get_once(struct k8s_state *st, sbx_call *call, const char *path, json_object **out,
                 sbxp_http_error *err);
/* Report a failed API call: 401/403 become SBX_E_CONFIG naming the
 * credentials' source (never their value). Returns the status. */
int k8s_report(struct k8s_state *st, sbx_call *call, const sbxp_http_error *err,
               const char *fmt, ...) SBX_PRINTF_LIKE(4, 5);
/* The object's Ready condition: 1 True, 0 not (yet), and its reason and
 * message (borrowed, may be NULL). */
int k8s_ready(json_object *obj, const char **reason, const char **message);
/* Whether a Ready=False reason is one the controller never recovers from. */
int k8s_terminal_reason(const char *reason);

/* ---- watch.c ----------------------------------------------------------- */
/*
 * Wait until the object kind/name is Ready, starting from obj (its last
 * known state, borrowed) and watching from its resourceVersion; a dropped
 * watch restarts from the last version seen, an expired one (410) re-lists.
 * *ready (owned by the caller) is the Ready object. SBX_E_TIMEOUT at
 * deadline_ms; SBX_E_NOT_FOUND when it is deleted meanwhile; terminal
 * failure reasons SBX_E_UNAVAILABLE or SBX_E_CONFIG with the reason.
 */
int k8s_wait_ready(struct k8s_state *st, sbx_call *call, int kind, const char *name,
                   json_object *obj, int64_t deadline_ms, json_object **ready);

/* ---- lifecycle.c ------------------------------------------------------- */
int k8s_create(void *state, sbx_call *call, const struct sbx_create_args *args, char *ref,
               sbx_sandbox **out);
int k8s_attach(void *state, sbx_call *call, const struct sbx_attach_args *args,
               sbx_sandbox **out);
int k8s_destroy(void *state, sbx_call *call, const struct sbx_destroy_args *args);
const char *k8s_root(sbx_sandbox *sb);
void k8s_release(sbx_sandbox *sb);

/* ---- grpc.c ------------------------------------------------------------ */
/* Largest gRPC message accepted from sandboxd. */
#define K8S_GRPC_MSG_MAX (16u * 1024u * 1024u)

/* A gRPC call's outcome beyond the transport: grpc-status (0 OK), its
 * message (percent-decoded, bounded). */
struct k8s_grpc_status {
    int code;
    int have;     /* a grpc-status was received */
    char message[256];
};
/* A server-streaming call in progress. */
struct k8s_grpc_stream {
    sbx_sandbox *sb;
    sbxp_http_xfer *x;
    struct sbxp_http_request req;
    const char *hdrs[8];
    char h_id[300], h_ns[300], h_port[64];
    char *auth;
    struct sbxp_call_cancel cc;
    uint8_t *body;            /* the request's one framed message */
    uint8_t *frame;           /* the frame being read */
    size_t flen, fcap;
    struct k8s_grpc_status status;
    int64_t stall_ms;
    size_t need;              /* push mode: the length of the message read */
    int (*on_msg)(void *ctx, const uint8_t *msg, size_t len);
    void *msg_ctx;
    sbxp_http_error perr;     /* what on_bytes stopped with */
};
/* Start method ("Start") with the packed request msg: up to the response
 * headers. timeout_ms 0: none. call may be NULL (not cancellable). */
int k8s_grpc_open(sbx_sandbox *sb, sbx_call *call, struct k8s_grpc_stream *s,
                  const char *method, const void *msg, size_t len, int64_t timeout_ms,
                  sbxp_http_error *err);
/* The next message: SBX_OK with *msg (borrowed until the next call) and
 * *len, or SBX_OK with *msg NULL at the end of the stream (then
 * s->status holds grpc-status). */
int k8s_grpc_next(struct k8s_grpc_stream *s, const uint8_t **msg, size_t *len,
                  sbxp_http_error *err);
/* Push mode (a long stream): every message to on_msg as it arrives, until
 * the stream ends (SBX_OK with s->status set), on_msg returns nonzero (that
 * status, err->from_callback set), or the transfer fails or reaches its
 * deadline (SBX_E_TIMEOUT: sbxp_http_xfer_set_timeout and call again to go
 * on). Never pauses the transfer. Do not mix with k8s_grpc_next. */
int k8s_grpc_pump(struct k8s_grpc_stream *s, int (*on_msg)(void *ctx, const uint8_t *msg,
                                                           size_t len),
                  void *ctx, sbxp_http_error *err);
void k8s_grpc_close(struct k8s_grpc_stream *s);
/* A unary call: the one response message into *resp (malloc'd, *rlen). */
int k8s_grpc_unary(sbx_sandbox *sb, sbx_call *call, const char *method, const void *msg,
                   size_t len, int64_t timeout_ms, uint8_t **resp, size_t *rlen,
                   struct k8s_grpc_status *gs, sbxp_http_error *err);
/* The sbx_status of a gRPC status code. */
int k8s_grpc_map(int code);
/* The headers that route a request to sandboxd's port through the router. */
void k8s_route_headers(sbx_sandbox *sb, int port, char *id, size_t idcap, char *ns,
                       size_t nscap, char *portb, size_t portcap);

/* ---- exec.c ------------------------------------------------------------ */
int k8s_exec(sbx_sandbox *sb, sbx_call *call, const struct sbx_exec_args *args,
             struct sbx_exec_result *res);

/* sandboxd's root: the working directory of a command without cwd (an
 * Execute of `sh -c pwd`), into buf; "" when it cannot be learnt. */
void k8s_exec_root(sbx_sandbox *sb, char *buf, size_t cap);
/* Whether the workspace-relative path is a regular file, not followed if a
 * symlink at its end (an Execute of test -f / test -L). */
int k8s_is_regular(sbx_sandbox *sb, const char *path);

/* ---- files.c ----------------------------------------------------------- */
int k8s_read_file(sbx_sandbox *sb, sbx_call *call, const char *path,
                  const struct sbx_sink *sink);
int k8s_write_file(sbx_sandbox *sb, sbx_call *call, const char *path,
                   const struct sbx_source *src, unsigned mode);
/* Whether path is a directory sandboxd lists (GET answers a listing). */
int k8s_is_dir(sbx_sandbox *sb, const char *path);
/* Check a workspace-relative path ("..", absolute, empty segments):
 * SBX_E_INVALID naming what. */
int k8s_check_path(sbx_sandbox *sb, sbx_call *call, const char *what, const char *path);

#endif /* SBX_K8S_H */
