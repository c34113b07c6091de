/*
 * e2b_core.h - the provider logic shared by the e2b and cube providers:
 * sandboxes through E2B's control plane, commands and files through envd.
 * The two providers differ only in their configuration (e2b.c's and
 * cube.c's config readers fill a struct e2b_conf) and in small flavour
 * settings carried in it.
 *
 * Files by responsibility:
 *   state.c      instance setup from a resolved configuration, error reports
 *   api.c        control plane calls (create, list, get, connect, timeout,
 *                delete)
 *   envd.c       envd endpoints, headers, unary RPCs and missing-sandbox
 *                mapping
 *   lifecycle.c  create/attach/destroy/release/root, ownership metadata
 *   pause.c      pause, resume (PAUSE) and the transparent resume of a
 *                sandbox found paused
 *   exec.c       process.Process/Start streaming, timeout, cancel, stdin
 *   kill.c       killing a command's whole process tree
 *   paths.c      workspace confinement through filesystem.Stat
 *   files.c      read_file/write_file through GET/POST /files and Move
 *   outputs.c    the outputs directory and export_outputs (OUTPUT_EXPORT)
 *   blobs.c      pinned blobs uploaded as root, verified on the way and in
 *                the sandbox; root helper scripts
 *   skills.c     skill_install (SKILLS)
 *   mounts.c     mount_put, mount_remove (FILE_MOUNTS, as read-only copies)
 *   memory.c     memory_load, memory_diff, memory_accept (MEMORY): the
 *                shared remote_memory.c driven through envd
 *   procs.c      processes that outlive the call, PTY (PROCESSES, PTY): a
 *                supervisor in the sandbox records each stream in chunks
 *   fileops.c    file_list/stat/mkdir/remove/rename (FILE_OPS)
 *   ports.c      declared ports and their proxy URLs (PORTS)
 *   fork.c       fork through a snapshot template (FORK, e2b only) and the
 *                removal of a fork's leftover snapshot at destroy
 */
#ifndef SBX_E2B_CORE_H
#define SBX_E2B_CORE_H

#include <sbx/provider.h>

#include "api_call.h"
#include "call_cancel.h"
#include "call_error.h"
#include "e2bproto.h"
#include "http_client.h"
#include "http_config.h"
#include "http_json.h"
#include "http_report.h"
#include "provider_config.h"
#include "remote_memory.h"

#include <pthread.h>
#include <stdint.h>

/* Port of envd inside every sandbox. */
#define E2B_ENVD_PORT 49983

/* The outputs directory (OUTPUT_EXPORT), shared by the shell and the file
 * operations (which accept absolute paths below it). */
#define E2B_OUTPUTS "/mnt/session/outputs"

/* Metadata keys put on every sandbox this provider creates. */
#define E2B_META_MANAGED "sbx.managed"
#define E2B_META_OWNER "sbx.owner"
#define E2B_META_SPEC "sbx.spec"
#define E2B_META_PORTS "sbx.ports" /* declared ports, "8080,3000" */

/* Most ports a sandbox declares. */
#define E2B_PORTS_MAX 32

/* How envd is reached. */
enum e2b_route {
    E2B_ROUTE_HOST = 0,   /* <scheme>://49983-<id>.<domain>, one pool per handle */
    E2B_ROUTE_HEADERS,    /* one URL for all sandboxes + E2b-Sandbox-Id/-Port */
    E2B_ROUTE_PROXY       /* one proxy address, routed by the Host header (Cube) */
};

/* A resolved configuration; strings malloc'd, freed by e2b_conf_free. */
struct e2b_conf {
    const char *provider;   /* "e2b" or "cube", for messages (static) */
    const char *key_var;    /* environment variable of the key (static) */
    const char *key_source; /* what to name in a rejected-key error (static
                               or pointing into this struct) */
    char *api_key;          /* NULL: send no key (Cube without auth) */
    char *api_url;
    char *domain;
    char *template_id;
    int64_t lifetime_s;     /* TTL at create and connect, extended on use */
    int auto_pause;
    int internet;           /* allow_internet_access */
    int64_t request_timeout_ms;
    int64_t connect_timeout_ms;
    int route;              /* enum e2b_route */
    char *envd_url;         /* E2B_ROUTE_HEADERS / E2B_ROUTE_PROXY base URL */
    int envd_https;         /* scheme for E2B_ROUTE_HOST */
    char *user;             /* envd user */
    char *workspace;        /* absolute path of the workspace */
    char *state_dir;        /* host directory of per-sandbox state (memory) */
    int64_t proc_buffer;    /* default replay buffer per stream (processes) */
    int missing_http;       /* status envd's proxy gives for a gone sandbox */
    int resume_endpoint;    /* resume through POST /resume (Cube), not /connect */
    int snapshots;          /* the service has snapshots (E2B): fork, and
                               destroy looks for a fork's leftover */
    int64_t pause_timeout_ms; /* one pause or resume request */
    struct sbxp_http_retry retry;
};

void e2b_conf_free(struct e2b_conf *c);

/* A provider instance. */
struct e2b_state {
    const struct sbx_host *host;
    struct e2b_conf cfg;
    sbxp_http *api;          /* control plane pool */
    sbxp_http *envd;         /* shared envd pool (HEADERS, PROXY) or NULL */
    char key_header[512];   /* "X-API-Key: ..." or "" */
    struct sbxp_api ctl;    /* the control plane's calls (api.c) */
    struct sbxp_reporter report; /* how e2b_report names the provider */
};

/* A sandbox handle. Immutable after attach except the lifetime stamp, the
 * paused hint and the memory attachments' last diffs (the host never runs
 * two memory ops of one sandbox at once). */
struct sbx_sandbox {
    struct e2b_state *st;
    char id[128];
    char key_hash[SBX_KEY_HASH_LEN + 1];
    sbxp_http *envd;          /* borrowed from st or owned (E2B_ROUTE_HOST) */
    int owns_envd;
    char route1[256];        /* E2b-Sandbox-Id / Host header, or "" */
    char route2[64];         /* E2b-Sandbox-Port header, or "" */
    char token[512];         /* "X-Access-Token: ..." or "" */
    char auth[256];          /* "Authorization: Basic ..." */
    pthread_mutex_t lock;    /* guards extended_ms */
    int64_t extended_ms;     /* when the TTL was last set */
    int paused;              /* guarded by lock: this handle paused it (the
                                next envd request resumes first) */
    struct sbxp_rmem mem;     /* memory attachments, from create or state_dir */
    char domain[256];        /* the sandbox's domain (its ports' URLs) */
    uint16_t ports[E2B_PORTS_MAX]; /* declared at create (SBX_CAP_PORTS) */
    size_t nports;
};


/* ---- conf.c ------------------------------------------------------------ */

/* Defaults a provider gives the keys both providers share. */
struct e2b_conf_defaults {
    const char *provider;   /* section name, "e2b" */
    const char *key_var;    /* "E2B_API_KEY" */
    int key_required;       /* init fails without a key */
    const char *domain;     /* default sandbox domain, or NULL: required */
    const char *template_id; /* default template, or NULL: required */
    int missing_http;       /* 502 (E2B) or 500 (CubeProxy) */
    int api_url_required;   /* else https://api.<domain> */
    int envd_tls;           /* default of envd_tls */
    int resume_endpoint;    /* resume through /resume (Cube's documented
                               route) rather than /connect (E2B's) */
    int snapshots;          /* POST /sandboxes/{id}/snapshots exists (E2B;
                               Cube's spec has no snapshots) */
    /* The service's own environment variables, fallbacks of the keys of
     * the same meaning (configuration first; NULL: none). */
    const char *api_url_var;  /* E2B_API_URL, CUBE_API_URL */
    const char *domain_var;   /* E2B_DOMAIN, CUBE_SANDBOX_DOMAIN */
    const char *template_var; /* E2B_TEMPLATE_ID, CUBE_TEMPLATE_ID */
    const char *lifetime_var; /* E2B_IDLE_TIMEOUT, CUBE_IDLE_TIMEOUT */
};

/*
 * Read the keys shared by the providers (see e2b.c's key table), each
 * from the configuration, else its environment variable, else its default,
 * and the API key (the file `key_file` names, else the variable) into
 * cfg; the caller then sets routing (e2b: envd_url; cube: the proxy).
 * SBX_E_CONFIG naming the key or the variable, never a value of the key.
 */
int e2b_conf_load(const struct sbx_host *host, sbx_call *call,
                  const struct e2b_conf_defaults *d, struct e2b_conf *cfg);

/* ---- state.c ----------------------------------------------------------- */

/* Create an instance from cfg (moved in: the caller no longer frees it). */
int e2b_state_new(const struct sbx_host *host, sbx_call *call, struct e2b_conf *cfg,
                  struct e2b_state **out);
void e2b_state_free(struct e2b_state *st);


/* Report a failed request: prefix what was attempted; 401/403 become
 * SBX_E_CONFIG naming the variable that holds the key (never its value).
 * plugins/common/http_report.c, with the state's reporter. */
#define e2b_report(st, call, err, ...) \
    sbxp_http_report((st)->host, (call), &(st)->report, (err), __VA_ARGS__)

/* Set the call's error (or log it without a call) and return status:
 * plugins/common/call_error.c on the state's host. */
#define e2b_error(st, call, ...) sbxp_call_error((st)->host, (call), __VA_ARGS__)


/* ---- api.c ------------------------------------------------------------- */

/* POST /sandboxes of template_id (NULL: the configured template) with
 * ownership metadata; *out is the Sandbox answer. */
int e2b_api_create(struct e2b_state *st, sbx_call *call, const char *template_id,
                   const char *key_hash, const char *spec_hash, const char *ports,
                   json_object **out, sbxp_http_error *err);

/* GET /v2/sandboxes?metadata=sbx.owner=<hash>&state=running,paused:
 * *out is the array of ListedSandbox. */
int e2b_api_find(struct e2b_state *st, sbx_call *call, const char *key_hash,
                 json_object **out, sbxp_http_error *err);

/* GET /sandboxes/{id}: SandboxDetail, SBX_E_NOT_FOUND when gone. */
int e2b_api_get(struct e2b_state *st, sbx_call *call, const char *id,
                json_object **out, sbxp_http_error *err);

/* POST /sandboxes/{id}/connect {timeout} (resumes a paused one). */
int e2b_api_connect(struct e2b_state *st, sbx_call *call, const char *id,
                    json_object **out, sbxp_http_error *err);

/* POST /sandboxes/{id}/timeout {timeout}. */
int e2b_api_set_timeout(struct e2b_state *st, sbx_call *call, const char *id,
                        sbxp_http_error *err);

/* POST /sandboxes/{id}/pause {} (a memory snapshot: processes survive),
 * within the configured pause timeout. */
int e2b_api_pause(struct e2b_state *st, sbx_call *call, const char *id,
                  sbxp_http_error *err);

/* Resume: POST /sandboxes/{id}/connect {timeout} (E2B; /resume is
 * deprecated there), or POST /sandboxes/{id}/resume {timeout} (Cube, whose
 * 409 means "already running": SBX_OK), within the pause timeout. *out
 * (may be NULL) the Sandbox answer when there is one. */
int e2b_api_resume(struct e2b_state *st, sbx_call *call, const char *id,
                   json_object **out, sbxp_http_error *err);

/* DELETE /sandboxes/{id}; 404 is SBX_OK. */
int e2b_api_delete(struct e2b_state *st, sbx_call *call, const char *id,
                   sbxp_http_error *err);

/* POST /sandboxes/{id}/snapshots {name} within the pause timeout: *out
 * is the SnapshotInfo answer (snapshotID, names). */
int e2b_api_snapshot(struct e2b_state *st, sbx_call *call, const char *id, const char *name,
                     json_object **out, sbxp_http_error *err);

/* GET /snapshots?name=<name>: *out is the array of SnapshotInfo. */
int e2b_api_snapshots_named(struct e2b_state *st, sbx_call *call, const char *name,
                            json_object **out, sbxp_http_error *err);

/* DELETE /templates/{templateID} (a snapshot is a template: its
 * snapshotID); 404 is SBX_OK. */
int e2b_api_template_delete(struct e2b_state *st, sbx_call *call, const char *template_id,
                            sbxp_http_error *err);

/* ---- envd.c ------------------------------------------------------------ */

/* Prepare the handle's envd routing and credentials from a Sandbox or
 * SandboxDetail answer (envdAccessToken, domain). */
int e2b_envd_setup(sbx_sandbox *sb, sbx_call *call, json_object *sandbox);

/* The handle's envd headers (routing, token, user), for a request. */
void e2b_envd_headers(sbx_sandbox *sb, struct e2b_headers *hs);

/* A unary RPC to envd, e.g. "filesystem.Filesystem/Stat"; retried when
 * idempotent. */
int e2b_envd_unary(sbx_sandbox *sb, sbx_call *call, const char *rpc, json_object *body,
                   json_object **out, int idempotent, sbxp_http_error *err);

/* After an envd request failed with the proxy's answer for a sandbox it
 * cannot reach (E2B 502, CubeProxy 500): when the control plane says the
 * sandbox is paused (auto-pause, or paused by someone), resume it through
 * connect. SBX_OK: it runs again and the request, which never reached
 * envd, may be repeated; otherwise nothing changed. */
int e2b_envd_resume(sbx_sandbox *sb, sbx_call *call, const sbxp_http_error *err);

/* After an envd failure: when the proxy's answer may mean that the sandbox
 * is gone, ask the control plane and turn the error into SBX_E_NOT_FOUND if
 * so. Returns the (possibly changed) status. */
int e2b_envd_gone(sbx_sandbox *sb, sbx_call *call, sbxp_http_error *err);

/* Report an envd failure (e2b_envd_gone, then e2b_report). */
int e2b_envd_report(sbx_sandbox *sb, sbx_call *call, sbxp_http_error *err,
                    const char *fmt, ...) SBX_PRINTF_LIKE(4, 5);

/* Extend the sandbox's TTL when half of it has passed since it was set,
 * so an active session does not expire. Failures are logged only. */
void e2b_keep_alive(sbx_sandbox *sb, sbx_call *call);

/* ---- pause.c ----------------------------------------------------------- */

/* The ops (SBX_CAP_PAUSE): idempotent, on the sandbox, from any process. */
int e2b_pause(sbx_sandbox *sb, sbx_call *call, uint32_t flags);
int e2b_resume(sbx_sandbox *sb, sbx_call *call);

/* Before an envd request: when this handle paused the sandbox, resume it
 * first (no request at all while the hint is clear, so the hot path of a
 * running sandbox pays nothing); a failure fills err. A sandbox paused by another process is
 * found by e2b_envd_resume from the proxy's answer instead. */
int e2b_wake(sbx_sandbox *sb, sbx_call *call, sbxp_http_error *err);

/* Resume without reporting to the call: err says why it failed (a gone
 * sandbox is SBX_E_NOT_FOUND). For e2b_envd_resume. */
int e2b_resume_quiet(sbx_sandbox *sb, sbx_call *call, sbxp_http_error *err);

/* ---- lifecycle.c ------------------------------------------------------- */

int e2b_create(void *state, sbx_call *call, const struct sbx_create_args *args,
               char *ref, sbx_sandbox **out);

/* create of a new sandbox from template_id (a fork's snapshot): the same
 * body, metadata and steps as create's, without adopting an existing one
 * (the caller made sure there is none); what the fork carried over that
 * is the source's, not the new key's, is removed first (e2b_fork_scrub).
 * made[cap] receives the id of the sandbox this call made and kept (""
 * when none), which the caller deletes when this fails. */
int e2b_create_from(struct e2b_state *st, sbx_call *call, const struct sbx_create_args *args,
                    const char *template_id, char *ref, sbx_sandbox **out, char *made,
                    size_t cap);
int e2b_attach(void *state, sbx_call *call, const struct sbx_attach_args *args,
               sbx_sandbox **out);
int e2b_destroy(void *state, sbx_call *call, const struct sbx_destroy_args *args);
const char *e2b_root(sbx_sandbox *sb);
void e2b_release(sbx_sandbox *sb);

/* ---- exec.c ------------------------------------------------------------ */

int e2b_exec(sbx_sandbox *sb, sbx_call *call, const struct sbx_exec_args *args,
             struct sbx_exec_result *res);

/* Run argv in the absolute directory cwd (NULL: the workspace) with no
 * stdin, output discarded but for up to cap-1 bytes of stderr kept in msg,
 * and give its exit code (128+N when killed by signal N); for helper steps
 * (chmod, killing a process group). call may be NULL. */
int e2b_exec_helper(sbx_sandbox *sb, sbx_call *call, const char *cwd,
                    const char *const *argv, int *exit_code, char *msg, size_t cap);

/* e2b_exec_helper as another sandbox user (e.g. "root"), with stdout sent
 * to out (may be NULL) and the given timeout (0: none). */
int e2b_exec_helper_as(sbx_sandbox *sb, sbx_call *call, const char *user, const char *cwd,
                       const char *const *argv, const struct sbx_sink *out,
                       int64_t timeout_ms, int *exit_code, char *msg, size_t cap);

/* Run args (env, stdin, sinks and timeout as given) in the absolute
 * directory cwd (NULL: the workspace) as the configured user, with no
 * SBX_EXEC_TAG: what the command leaves running stays (processes.c). */
int e2b_exec_run(sbx_sandbox *sb, sbx_call *call, const struct sbx_exec_args *args,
                 const char *cwd, struct sbx_exec_result *res);

/* ---- kill.c ------------------------------------------------------------ */

/* Kill the process tree of the command with this pid, and every process
 * whose environment has SBX_EXEC_TAG=token (token NULL: none) (a root
 * script in the sandbox; failures are logged). Runs even after a
 * cancellation. */
void e2b_kill_tree(sbx_sandbox *sb, uint32_t pid, const char *token);

/* ---- paths.c ----------------------------------------------------------- */

/* Entry types of filesystem.EntryInfo. */
enum e2b_ftype { E2B_FT_NONE = 0, E2B_FT_FILE, E2B_FT_DIR, E2B_FT_LINK, E2B_FT_OTHER };

/* filesystem.Stat of an absolute path; a missing one is SBX_OK with
 * *type E2B_FT_NONE. target (may be NULL) receives a symlink's target. */
int e2b_stat(sbx_sandbox *sb, sbx_call *call, const char *abs, int *type,
             char *target, size_t cap, sbxp_http_error *err);

/*
 * Resolve a workspace-relative path, component by component, following
 * symlinks only while they stay inside the workspace (SBX_E_INVALID when
 * one leads out, or for absolute paths and ".." above the root). *abs
 * (malloc'd) is the resolved absolute path; *type the final entry's type
 * (E2B_FT_NONE when it does not exist; its parent must then be a
 * directory or missing). allow_root lets "" mean the workspace itself.
 * An absolute path below E2B_OUTPUTS is resolved the same way below the
 * outputs directory instead.
 */
int e2b_resolve(sbx_sandbox *sb, sbx_call *call, const char *what, const char *rel,
                int allow_root, char **abs, int *type);

/* e2b_resolve for an entry that is used as itself: the parent is resolved
 * (symlinks inside the workspace followed), the last component never is:
 * *type is the entry's own (E2B_FT_LINK for a symlink), *parent_type its
 * parent's (E2B_FT_NONE: missing, *type then E2B_FT_NONE too). "", "."
 * and the root resolve to the workspace when allow_root. */
int e2b_resolve_entry(sbx_sandbox *sb, sbx_call *call, const char *what, const char *rel,
                      int allow_root, char **abs, int *type, int *parent_type);

/* ---- outputs.c --------------------------------------------------------- */

/* Make the outputs directory (as root: /mnt is not the user's), writable
 * for the sandbox user. */
int e2b_outputs_prepare(sbx_sandbox *sb, sbx_call *call);

/* Stream the outputs directory as a tar whose entries are relative to it. */
int e2b_export_outputs(sbx_sandbox *sb, sbx_call *call, const struct sbx_sink *tar_sink);

/* ---- files.c ----------------------------------------------------------- */

int e2b_read_file(sbx_sandbox *sb, sbx_call *call, const char *path,
                  const struct sbx_sink *sink);
int e2b_write_file(sbx_sandbox *sb, sbx_call *call, const char *path,
                   const struct sbx_source *src, unsigned mode);

/* filesystem.MakeDir of an absolute path (existing is fine). */
int e2b_mkdir(sbx_sandbox *sb, sbx_call *call, const char *abs, sbxp_http_error *err);

/* filesystem.Remove of an absolute path (missing is fine). */
int e2b_remove(sbx_sandbox *sb, sbx_call *call, const char *abs, sbxp_http_error *err);

/* POST /files: src streamed to the absolute path abs, created (with its
 * parents) as user (NULL: the configured one), who owns it. Not reported:
 * the caller says what failed (err->from_callback: the source's own). */
int e2b_files_upload(sbx_sandbox *sb, sbx_call *call, const char *abs, const char *user,
                     const struct sbx_source *src, sbxp_http_error *err);

/* GET /files of the absolute path abs into sink (as the configured user).
 * Not reported; a missing file is SBX_E_NOT_FOUND with http_status 404. */
int e2b_files_get(sbx_sandbox *sb, sbx_call *call, const char *abs,
                  const struct sbx_sink *sink, sbxp_http_error *err);

/* ---- memory.c ---------------------------------------------------------- */

/* At create: check the attachments, record them in state_dir and make
 * their trees in the sandbox. */
int e2b_memory_create(sbx_sandbox *sb, sbx_call *call, const struct sbx_create_args *args);

/* At attach: read the attachments recorded at create (none: none). */
int e2b_memory_open(sbx_sandbox *sb, sbx_call *call);

/* At destroy: forget the sandbox's state (failures are logged). */
void e2b_memory_forget(struct e2b_state *st, const char *id);

void e2b_memory_free(sbx_sandbox *sb);

int e2b_memory_load(sbx_sandbox *sb, sbx_call *call, const char *slug,
                    const struct sbx_source *tar);
int e2b_memory_diff(sbx_sandbox *sb, sbx_call *call, const char *slug, uint32_t flags,
                    const struct sbx_memory_changes *out);
int e2b_memory_accept(sbx_sandbox *sb, sbx_call *call, const char *slug);

/* ---- blobs.c ----------------------------------------------------------- */

/* A blob's source and pinned SHA-256 are usable (SBX_E_INVALID naming the
 * problem otherwise). */
int e2b_blob_args(struct e2b_state *st, sbx_call *call, const char *what,
                  const struct sbx_blob *b);

/* Stream the blob as root to the absolute path abs, checking on the way
 * that the source gives exactly b->length bytes with digest b->sha256
 * (SBX_E_INVALID when not), then that the sandbox's copy has them too
 * (SBX_E_IO when not). tap (may be NULL) also receives every byte; its
 * failure (a status) stops the upload. The caller removes abs when this
 * fails. */
int e2b_blob_upload(sbx_sandbox *sb, sbx_call *call, const char *what,
                    const struct sbx_blob *b, const char *abs, const struct sbx_sink *tap);

/* Run argv as root in "/" (memory.c, through sbxp_rmem_script); a nonzero exit is SBX_E_IO (SBX_E_INVALID for
 * exit 3: the script refused) with its stderr in the message. */
int e2b_root_script(sbx_sandbox *sb, sbx_call *call, const char *what,
                    const char *const *argv);

/* ---- skills.c, mounts.c ------------------------------------------------ */

int e2b_skill_install(sbx_sandbox *sb, sbx_call *call, const char *name,
                      const struct sbx_blob *bundle);

/* Whether a resolved absolute path lies in a skill's version or staging
 * directory (names only skill_install makes). */
int e2b_in_skill(sbx_sandbox *sb, const char *abs);
int e2b_mount_put(sbx_sandbox *sb, sbx_call *call, const char *path,
                  const struct sbx_blob *blob);
int e2b_mount_remove(sbx_sandbox *sb, sbx_call *call, const char *path);

/* ---- procs.c, fileops.c, ports.c (ABI 1.2) ----------------------------- */

int e2b_proc_start(sbx_sandbox *sb, sbx_call *call, const struct sbx_proc_spec *spec,
                   char id[SBX_PROC_ID_MAX]);
int e2b_proc_write(sbx_sandbox *sb, sbx_call *call, const char *id, const void *data,
                   size_t len, uint32_t flags);
int e2b_proc_read(sbx_sandbox *sb, sbx_call *call, const char *id,
                  const struct sbx_proc_read_args *args, struct sbx_proc_read_result *res);
int e2b_proc_signal(sbx_sandbox *sb, sbx_call *call, const char *id, int signo);
int e2b_proc_list(sbx_sandbox *sb, sbx_call *call, const struct sbx_proc_list_sink *sink);
int e2b_proc_resize(sbx_sandbox *sb, sbx_call *call, const char *id, uint16_t rows,
                    uint16_t cols);

int e2b_file_list(sbx_sandbox *sb, sbx_call *call, const char *path,
                  const struct sbx_file_list_sink *sink);
int e2b_file_stat(sbx_sandbox *sb, sbx_call *call, const char *path,
                  struct sbx_file_info *out);
int e2b_file_mkdir(sbx_sandbox *sb, sbx_call *call, const char *path, unsigned mode,
                   uint32_t flags);
int e2b_file_remove(sbx_sandbox *sb, sbx_call *call, const char *path, uint32_t flags);
int e2b_file_rename(sbx_sandbox *sb, sbx_call *call, const char *from, const char *to,
                    uint32_t flags);

/* The metadata value of the declared ports (0-terminated list, may be
 * NULL): "8080,3000" into out. SBX_E_INVALID beyond E2B_PORTS_MAX. */
int e2b_ports_record(const uint16_t *ports, char *out, size_t cap);
/* The declared ports from a sandbox's metadata (sbx.ports) into sb. */
void e2b_ports_load(sbx_sandbox *sb, json_object *sandbox);
int e2b_port_resolve(sbx_sandbox *sb, sbx_call *call, uint16_t port,
                     struct sbx_port_endpoint *out);

/* ---- fork.c ------------------------------------------------------------ */

/* Where procs.c keeps each process's records (a fork drops the source's). */
#define E2B_PROC_BASE "/tmp/.sbx-proc"

/* The op (SBX_CAP_FORK, e2b only): see fork.c. */
int e2b_fork(sbx_sandbox *src, sbx_call *call, const struct sbx_create_args *args,
             char *ref, sbx_sandbox **out);

/* In a sandbox made from a fork's snapshot: remove what was bound into the
 * source from the host (outputs, uploads, skills, memory attachments) and
 * the source's process records, before create's steps make the new
 * key's. */
int e2b_fork_scrub(sbx_sandbox *sb, sbx_call *call);

/* At destroy of key_hash: delete the snapshot a fork into that key left
 * when it was killed between taking and deleting it (none: SBX_OK). */
int e2b_fork_leftovers(struct e2b_state *st, sbx_call *call, const char *key_hash);

/* ---- the providers' ops table ------------------------------------------ */

/* fini of both providers: the instance e2b_state_new made (state.c). */
void e2b_fini(void *state);

/* The health op of both providers (health.c). */
int e2b_health(void *state, sbx_call *call, char detail[SBX_HEALTH_DETAIL_MAX]);

/* The ops of a provider built on this core; init and fork (NULL: none)
 * differ. */
#define E2B_PROVIDER_OPS(init_, fork_)                                         \
    {                                                                          \
        .init = (init_), .fini = e2b_fini, .create = e2b_create,               \
        .attach = e2b_attach, .exec = e2b_exec, .read_file = e2b_read_file,    \
        .write_file = e2b_write_file, .root = e2b_root,                        \
        .release = e2b_release, .destroy = e2b_destroy,                        \
        .export_outputs = e2b_export_outputs,                                  \
        .skill_install = e2b_skill_install, .mount_put = e2b_mount_put,        \
        .mount_remove = e2b_mount_remove,                                      \
        .memory_load = e2b_memory_load, .memory_diff = e2b_memory_diff,        \
        .memory_accept = e2b_memory_accept,                                    \
        .proc_start = e2b_proc_start, .proc_write = e2b_proc_write,            \
        .proc_read = e2b_proc_read, .proc_signal = e2b_proc_signal,            \
        .proc_list = e2b_proc_list, .proc_resize = e2b_proc_resize,            \
        .file_list = e2b_file_list, .file_stat = e2b_file_stat,                \
        .file_mkdir = e2b_file_mkdir, .file_remove = e2b_file_remove,          \
        .file_rename = e2b_file_rename, .port_resolve = e2b_port_resolve,      \
        .pause = e2b_pause, .resume = e2b_resume, .health = e2b_health,        \
        .fork = (fork_),                                                       \
    }

/* The capabilities both providers declare. */
#define E2B_PROVIDER_CAPS                                                      \
    (SBX_CAP_OUTPUT_EXPORT | SBX_CAP_SKILLS | SBX_CAP_FILE_MOUNTS |         \
     SBX_CAP_MEMORY | SBX_CAP_PROCESSES | SBX_CAP_PTY | SBX_CAP_FILE_OPS |   \
     SBX_CAP_PORTS | SBX_CAP_PAUSE | SBX_CAP_POOL)

/* The e2b provider's: the shared ones and FORK, through E2B's snapshots
 * (Cube's API has none: the host streams the workspace for its forks). */
#define E2B_PROVIDER_CAPS_E2B (E2B_PROVIDER_CAPS | SBX_CAP_FORK)

#endif /* SBX_E2B_CORE_H */
