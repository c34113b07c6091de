/*
 * osb.h - the `opensandbox` provider: sandboxes through the OpenSandbox
 * lifecycle server (/v1), commands and files through execd (port 44772),
 * the egress allowlist through the egress sidecar (port 18080); both
 * reached at the endpoints the lifecycle server names, directly or through
 * its proxy (use_server_proxy).
 *
 * Files by responsibility:
 *   conf.c       configuration keys, the API key, instance setup, errors
 *   api.c        lifecycle calls (create, list, get, delete, pause, resume,
 *                renew-expiration, metadata, endpoints)
 *   lifecycle.c  create/attach/destroy/release/root, waiting for Running,
 *                ownership metadata, renewal while in use
 *   service.c    requests to execd and the sidecar at their endpoints
 *   events.c     the event stream of POST /command (both framings)
 *   exec.c       POST /command, cancel, timeout, stdin
 *   paths.c      workspace confinement through GET /files/info
 *   files.c      read_file/write_file (download, multipart upload, mv)
 *   listing.c    GET /directories/list read entry by entry; FileInfo times
 *   procs.c      SBX_CAP_PROCESSES: background commands, output chunks
 *                in the sandbox read by byte range, stdin through a FIFO
 *   fileops.c    SBX_CAP_FILE_OPS: list, stat, mkdir, remove, rename
 *   ports.c      SBX_CAP_PORTS: declared ports in metadata, endpoints
 *   egress.c     the sidecar's policy: read, set, reconcile on attach
 *   outputs.c    OUTPUT_EXPORT
 *   memory.c     MEMORY through the shared remote_memory.c (state_dir)
 *   pause.c      SBX_CAP_PAUSE: pause, resume, transparent resume (a
 *                marker in state_dir)
 *   provider.c   descriptor and ops table
 */
#ifndef SBX_OSB_H
#define SBX_OSB_H

#include <sbx/provider.h>

#include "api_call.h"
#include "base64.h"
#include "call_cancel.h"
#include "call_error.h"
#include "http_client.h"
#include "http_config.h"
#include "http_json.h"
#include "http_report.h"
#include "http_retry.h"
#include "provider_config.h"
#include "remote_memory.h"

#include <pthread.h>
#include <stdint.h>

#define OSB_PROVIDER "opensandbox"
#define OSB_EXECD_PORT 44772
#define OSB_EGRESS_PORT 18080
#define OSB_OUTPUTS "/mnt/session/outputs"

/* Metadata keys (Kubernetes label syntax: the values are hex or short
 * words). The intended egress policy lives in the control plane, where
 * the sandbox cannot change it: sbx.egress=deny plus one key per allowed
 * target, sbx.allow.<i> for host names and sbx.allow-any.<i> for
 * "*.<domain>" patterns (the value is the domain). */
#define OSB_META_MANAGED "sbx.managed"
#define OSB_META_OWNER "sbx.owner"
#define OSB_META_SPEC "sbx.spec"
#define OSB_META_EGRESS "sbx.egress"
#define OSB_META_ALLOW "sbx.allow."
#define OSB_META_ALLOW_ANY "sbx.allow-any."
/* Label values hold at most 63 characters: the owner and spec records are
 * the first 63 hex digits of the 64-digit hashes (252 bits). */
#define OSB_HASH_LABEL 63
/* Most targets one policy may hold (each is a metadata key). */
#define OSB_ALLOW_MAX 64
/* Declared ports: sbx.port.<i> = "<port>". */
#define OSB_META_PORT "sbx.port."
#define OSB_PORTS_MAX 64

struct osb_conf {
    char *api_key;          /* NULL: no key (a server without auth) */
    const char *key_source; /* what to name when the key is refused */
    char *api_url;          /* with /v1 appended */
    char *image;
    char *entrypoint[8];    /* NULL-terminated */
    char *cpu, *memory;
    char *workspace;
    char *state_dir;        /* host directory of per-sandbox state (memory) */
    int64_t lifetime_s;     /* timeout at create, renewed while in use */
    int64_t ready_timeout_ms;
    int64_t request_timeout_ms;
    int64_t connect_timeout_ms;
    int use_server_proxy;
    int internet;           /* no networkPolicy at create: allow all */
    char *proc_dir;         /* directory of the processes' state, in the sandbox */
    uint64_t proc_buffer;   /* replay buffer per stream (SBX_CAP_PROCESSES) */
    struct sbxp_http_retry retry;
};

struct osb_state {
    const struct sbx_host *host;
    struct osb_conf cfg;
    sbxp_http *api;
    char key_header[512];
    struct sbxp_api ctl;          /* the lifecycle server's calls (api.c) */
    struct sbxp_reporter report;  /* how osb_report names the provider */
};

/* An in-sandbox service reached at its endpoint. */
struct osb_service {
    sbxp_http *http;
    char *headers[9];       /* "Name: value" lines from the endpoint, NULL-terminated */
};

struct sbx_sandbox {
    struct osb_state *st;
    char id[128];
    char key_hash[SBX_KEY_HASH_LEN + 1];
    struct osb_service execd;
    struct osb_service egress;
    pthread_mutex_t lock;   /* guards renewed_ms */
    int64_t renewed_ms;
    struct sbxp_rmem mem;    /* memory attachments, from create or state_dir */
    uint16_t ports[OSB_PORTS_MAX]; /* declared at create (from metadata) */
    size_t nports;
};

/* ---- conf.c ------------------------------------------------------------ */
int osb_init(const struct sbx_host *host, sbx_call *call, void **state);
void osb_fini(void *state);
/* The call's error (or a warning without a call): plugins/common/call_error.c. */
#define osb_error(st, call, ...) sbxp_call_error((st)->host, (call), __VA_ARGS__)
/* A failed request: 401/403 become SBX_E_CONFIG naming the key's source
 * (plugins/common/http_report.c with the state's reporter). */
#define osb_report(st, call, err, ...) \
    sbxp_http_report((st)->host, (call), &(st)->report, (err), __VA_ARGS__)

/* ---- api.c ------------------------------------------------------------- */
/* POST /sandboxes; egress NULL: the configured network. *out: the answer. */
int osb_api_create(struct osb_state *st, sbx_call *call, const char *key_hash,
                   const char *spec_hash, const struct sbx_egress_policy *egress,
                   const uint16_t *ports, json_object **out, sbxp_http_error *err);
/* GET /sandboxes?metadata=sbx.owner=<hash>: every page's items, as one array. */
int osb_api_find(struct osb_state *st, sbx_call *call, const char *key_hash,
                 json_object **out, sbxp_http_error *err);
int osb_api_get(struct osb_state *st, sbx_call *call, const char *id, json_object **out,
                sbxp_http_error *err);
/* DELETE; 404 counts as done. */
int osb_api_delete(struct osb_state *st, sbx_call *call, const char *id, sbxp_http_error *err);
/* POST /sandboxes/{id}/<action> (pause, resume). */
int osb_api_action(struct osb_state *st, sbx_call *call, const char *id, const char *action,
                   sbxp_http_error *err);
int osb_api_renew(struct osb_state *st, sbx_call *call, const char *id, sbxp_http_error *err);
/* PATCH /sandboxes/{id}/metadata (merge patch: null deletes a key). */
int osb_api_metadata(struct osb_state *st, sbx_call *call, const char *id, json_object *patch,
                     sbxp_http_error *err);
/* GET /sandboxes/{id}/endpoints/{port}: *out is the Endpoint. */
int osb_api_endpoint(struct osb_state *st, sbx_call *call, const char *id, int port,
                     json_object **out, sbxp_http_error *err);
/* The sandbox's state ("Running", ...) or "" (borrowed). */
const char *osb_state_of(json_object *sandbox);

/* ---- lifecycle.c ------------------------------------------------------- */
int osb_create(void *state, sbx_call *call, const struct sbx_create_args *args, char *ref,
               sbx_sandbox **out);
int osb_attach(void *state, sbx_call *call, const struct sbx_attach_args *args,
               sbx_sandbox **out);
int osb_destroy(void *state, sbx_call *call, const struct sbx_destroy_args *args);
const char *osb_root(sbx_sandbox *sb);
void osb_release(sbx_sandbox *sb);
/* Renew the expiration when half the lifetime passed since the last renewal. */
void osb_keep_alive(sbx_sandbox *sb, sbx_call *call);
/* Sleep ms, or SBX_E_CANCELLED (set on call) when the call is cancelled. */
int osb_sleep_ms(struct osb_state *st, sbx_call *call, int ms);

/* ---- pause.c ----------------------------------------------------------- */
int osb_pause(sbx_sandbox *sb, sbx_call *call, uint32_t flags);
int osb_resume(sbx_sandbox *sb, sbx_call *call);
/* Before a request to the sandbox: resume it when it was paused from this
 * machine (the marker in state_dir); err (may be NULL) says why not. */
int osb_wake(sbx_sandbox *sb, sbx_call *call, sbxp_http_error *err);
/* After a failed request, with the state the lifecycle server gave: resume
 * a sandbox paused elsewhere (Paused, Pausing, Resuming); SBX_OK when it
 * runs again, SBX_E_UNAVAILABLE when the state is another. */
int osb_wake_after(sbx_sandbox *sb, sbx_call *call, const char *state);
/* The marker of a sandbox paused from this machine. */
int osb_marker_present(const struct osb_state *st, const char *id);
void osb_marker_clear(const struct osb_state *st, const char *id);

/* ---- service.c --------------------------------------------------------- */
/* Resolve the endpoint of port and prepare svc. */
int osb_service_open(sbx_sandbox *sb, sbx_call *call, int port, struct osb_service *svc);
void osb_service_close(struct osb_service *svc);
/* A request to a service with its endpoint headers plus extra (may be NULL). */
void osb_service_request(sbx_sandbox *sb, const struct osb_service *svc,
                         struct sbxp_http_request *req, const char **hdrs, size_t cap,
                         const char *const *extra, struct sbxp_call_cancel *c);
/* A JSON call to a service, retried when idempotent. */
int osb_service_json(sbx_sandbox *sb, sbx_call *call, const struct osb_service *svc,
                     const char *method, const char *path, json_object *body,
                     json_object **out, int idempotent, sbxp_http_error *err);
/* Report a failed service call; a sandbox that is gone is SBX_E_NOT_FOUND. */
int osb_service_report(sbx_sandbox *sb, sbx_call *call, sbxp_http_error *err,
                       const char *fmt, ...) SBX_PRINTF_LIKE(4, 5);

/* ---- events.c ---------------------------------------------------------- */
/* Largest line or event accepted from execd. */
#define OSB_EVENT_MAX (8u * 1024u * 1024u)

/* A parser of execd's event stream. Callbacks return SBX_OK to go on or a
 * status to stop with (which feed then returns). */
struct osb_events {
    int (*output)(void *ctx, int is_err, const char *text, size_t len); /* stdout/stderr */
    int (*event)(void *ctx, json_object *ev); /* every other event (borrowed) */
    void *ctx;
    char *ev;          /* the event being collected */
    size_t evlen, evcap;
    char *line;        /* a line split across reads */
    size_t linelen, linecap;
    char *text;        /* decoded text of a fast-path event (reused) */
    size_t textcap;
};
void osb_events_init(struct osb_events *e,
                     int (*output)(void *ctx, int is_err, const char *text, size_t len),
                     int (*event)(void *ctx, json_object *ev), void *ctx);
/* Bytes of the stream as they arrive: SBX_E_PROTOCOL for a malformed or
 * oversized event, or a callback's status. */
int osb_events_feed(struct osb_events *e, const void *buf, size_t len);
/* At the end of the stream: a last event without its blank line. */
int osb_events_end(struct osb_events *e);
void osb_events_free(struct osb_events *e);

/* ---- exec.c ------------------------------------------------------------ */
int osb_exec(sbx_sandbox *sb, sbx_call *call, const struct sbx_exec_args *args,
             struct sbx_exec_result *res);
/* A helper shell script in the sandbox: output to out (may be NULL), up
 * to cap-1 bytes of stderr in msg, exit code in *code. */
int osb_sh(sbx_sandbox *sb, sbx_call *call, const char *script, const struct sbx_sink *out,
           int64_t timeout_ms, int *code, char *msg, size_t cap);
/* osb_sh of a program and its arguments, run in "/". */
int osb_helper(sbx_sandbox *sb, sbx_call *call, const char *const *argv,
               const struct sbx_sink *out, int64_t timeout_ms, int *code, char *msg, size_t cap);
/* A word quoted for sh ('...'), malloc'd. */
char *osb_quote(const char *s);
/* POST /command with background: true running script (as is) in cwd with
 * env and execd's timeout (0: none); the command id into cid. */
int osb_background(sbx_sandbox *sb, sbx_call *call, const char *script, const char *cwd,
                   const char *const *env, int64_t timeout_ms, char *cid, size_t cap);

/* ---- paths.c ----------------------------------------------------------- */
enum osb_ftype { OSB_FT_NONE = 0, OSB_FT_FILE, OSB_FT_DIR, OSB_FT_LINK, OSB_FT_OTHER };
/* Resolve a workspace-relative path (or one below OSB_OUTPUTS) without
 * leaving the workspace; *abs malloc'd, *type of the final entry. */
int osb_resolve(sbx_sandbox *sb, sbx_call *call, const char *what, const char *rel,
                int allow_root, char **abs, int *type);

/* ---- files.c ----------------------------------------------------------- */
int osb_read_file(sbx_sandbox *sb, sbx_call *call, const char *path,
                  const struct sbx_sink *sink);
int osb_write_file(sbx_sandbox *sb, sbx_call *call, const char *path,
                   const struct sbx_source *src, unsigned mode);
/* Stream an absolute path to a sink (GET /files/download). */
int osb_download(sbx_sandbox *sb, sbx_call *call, const char *abs, const char *what,
                 const struct sbx_sink *sink);
/* Upload src to the absolute path abs (multipart: metadata, then file). */
int osb_upload(sbx_sandbox *sb, sbx_call *call, const char *abs, unsigned mode,
               const struct sbx_source *src, sbxp_http_error *err);
int osb_mkdirs(sbx_sandbox *sb, sbx_call *call, const char *abs, sbxp_http_error *err);
/* POST /directories of abs with mode (permission bits). */
int osb_mkdir_mode(sbx_sandbox *sb, sbx_call *call, const char *abs, unsigned mode,
                   sbxp_http_error *err);
/* Rename from over to: POST /files/mv when to does not exist (execd's mv
 * refuses an existing destination), else rename(2) through mv -T in the
 * sandbox. what names the operation in errors. */
int osb_rename(sbx_sandbox *sb, sbx_call *call, const char *from, const char *to, int to_exists,
               const char *what);
int osb_remove(sbx_sandbox *sb, sbx_call *call, const char *abs);

/* ---- listing.c --------------------------------------------------------- */
/* GET /directories/list?path=abs&depth=depth, each FileInfo (borrowed) to
 * entry as it is parsed; entry's nonzero status stops the listing (then
 * err->from_callback is set). */
int osb_list_dir(sbx_sandbox *sb, sbx_call *call, const char *abs, int depth,
                 int (*entry)(void *ctx, json_object *fi), void *ctx, sbxp_http_error *err);
/* An RFC 3339 time as ns since the epoch, 0 when it does not parse. */
int64_t osb_parse_time_ns(const char *s);

/* ---- procs.c ----------------------------------------------------------- */
int osb_proc_start(sbx_sandbox *sb, sbx_call *call, const struct sbx_proc_spec *spec,
                   char id[SBX_PROC_ID_MAX]);
int osb_proc_write(sbx_sandbox *sb, sbx_call *call, const char *id, const void *data,
                   size_t len, uint32_t flags);
int osb_proc_read(sbx_sandbox *sb, sbx_call *call, const char *id,
                  const struct sbx_proc_read_args *args, struct sbx_proc_read_result *res);
int osb_proc_signal(sbx_sandbox *sb, sbx_call *call, const char *id, int signo);
int osb_proc_list(sbx_sandbox *sb, sbx_call *call, const struct sbx_proc_list_sink *sink);

/* ---- fileops.c --------------------------------------------------------- */
int osb_file_list(sbx_sandbox *sb, sbx_call *call, const char *path,
                  const struct sbx_file_list_sink *sink);
int osb_file_stat(sbx_sandbox *sb, sbx_call *call, const char *path, struct sbx_file_info *out);
int osb_file_mkdir(sbx_sandbox *sb, sbx_call *call, const char *path, unsigned mode,
                   uint32_t flags);
int osb_file_remove(sbx_sandbox *sb, sbx_call *call, const char *path, uint32_t flags);
int osb_file_rename(sbx_sandbox *sb, sbx_call *call, const char *from, const char *to,
                    uint32_t flags);

/* ---- ports.c ----------------------------------------------------------- */
/* At create: at most OSB_PORTS_MAX ports, none of execd's or the sidecar's. */
int osb_ports_check(struct osb_state *st, sbx_call *call, const uint16_t *ports);
/* The metadata that records the declared ports (create). */
void osb_ports_meta(json_object *meta, const uint16_t *ports);
/* The declared ports from a Sandbox's metadata into sb (create, attach). */
void osb_ports_load(sbx_sandbox *sb, json_object *sandbox);
int osb_port_resolve(sbx_sandbox *sb, sbx_call *call, uint16_t port,
                     struct sbx_port_endpoint *out);

/* health.c: the optional health op, GET /sandboxes?pageSize=1 (an
 * authenticated read that creates nothing). */
int osb_health(void *state, sbx_call *call, char detail[SBX_HEALTH_DETAIL_MAX]);

/* ---- egress.c ---------------------------------------------------------- */
/* Check a policy's targets and default (SBX_E_INVALID naming the culprit). */
int osb_egress_check(struct osb_state *st, sbx_call *call, const struct sbx_egress_policy *p);
/* The sidecar's rules for a policy, as NetworkPolicy JSON (create). */
json_object *osb_egress_policy_json(const struct sbx_egress_policy *p);
/* The metadata that records a policy as intended (create). */
void osb_egress_meta(json_object *meta, const struct sbx_egress_policy *p);
int osb_egress_set(sbx_sandbox *sb, sbx_call *call, const struct sbx_egress_policy *p);
int osb_egress_get(sbx_sandbox *sb, sbx_call *call, struct sbx_egress_report *out);
/* On attach: when the sandbox's metadata records a policy, make the sidecar
 * enforce it (SBX_E_DENIED when its default is not deny). */
int osb_egress_reconcile(sbx_sandbox *sb, sbx_call *call, json_object *sandbox);

/* ---- outputs.c --------------------------------------------------------- */
int osb_outputs_prepare(sbx_sandbox *sb, sbx_call *call);
int osb_export_outputs(sbx_sandbox *sb, sbx_call *call, const struct sbx_sink *tar_sink);

/* ---- memory.c ---------------------------------------------------------- */
/* At create: check, record and make the attachments' trees. */
int osb_memory_create(sbx_sandbox *sb, sbx_call *call, const struct sbx_create_args *args);
/* At attach: read the attachments recorded at create. */
int osb_memory_open(sbx_sandbox *sb, sbx_call *call);
int osb_memory_load(sbx_sandbox *sb, sbx_call *call, const char *slug,
                    const struct sbx_source *tar);
int osb_memory_diff(sbx_sandbox *sb, sbx_call *call, const char *slug, uint32_t flags,
                    const struct sbx_memory_changes *out);
int osb_memory_accept(sbx_sandbox *sb, sbx_call *call, const char *slug);

#endif /* SBX_OSB_H */
