/*
 * daytona.h - the `daytona` provider: sandboxes through the Daytona API
 * (specs/daytona/openapi.yaml), commands and files through the toolbox
 * daemon inside each sandbox (specs/daytona/swagger.yaml), reached at
 * <toolboxProxyUrl>/<sandbox id>.
 *
 * Files by responsibility:
 *   provider.c   descriptor, configuration keys, init/fini, error reports
 *   api.c        control plane calls (get, create, start, delete, wait)
 *   lifecycle.c  create/attach/destroy/release/root, ownership labels
 *   pause.c      pause and resume (PAUSE) as stop and start, and the
 *                transparent start of a sandbox a toolbox call found down
 *   toolbox.c    toolbox requests: JSON calls, download, streamed
 *                multipart upload, folders, move, permissions, sessions
 *   exec.c       commands through process sessions, stdout and stderr
 *                kept apart, timeout and cancellation by deleting the
 *                session
 *   exec_stdin.c stdin fed in chunks while the command runs
 *   exec_small.c helper commands with small text output
 *   paths.c      workspace confinement (resolved inside the sandbox)
 *   files.c      read_file/write_file (temp name, mode, rename)
 *   outputs.c    /mnt/session/outputs and export_outputs (OUTPUT_EXPORT)
 *   skills.c     skill_install (SKILLS)
 *   memory.c     MEMORY through the shared remote_memory.c (state_dir)
 *   proc.c       PROCESSES and PTY: start, write, signal, resize, list
 *                (one session per process, a wrapper with a bounded
 *                recorder in the sandbox)
 *   proc_read.c  proc_read: the recorder's segments after a cursor
 *   fileops.c    FILE_OPS: list (streamed), stat, mkdir, remove, rename
 *   ports.c      PORTS: declared ports in a label, preview links
 */
#ifndef SBX_DAYTONA_H
#define SBX_DAYTONA_H

#include <sbx/provider.h>

#include "api_call.h"
#include "call_cancel.h"
#include "call_error.h"
#include "clock.h"
#include "http_client.h"
#include "http_config.h"
#include "http_json.h"
#include "http_report.h"
#include "http_retry.h"
#include "provider_config.h"
#include "remote_memory.h"

#include <pthread.h>
#include <stdint.h>

#define DT "daytona"

/* The outputs directory (OUTPUT_EXPORT) and the skills directory. */
#define DT_OUTPUTS "/mnt/session/outputs"
/* Skills are published at <workspace>/skills/<name>/ (the conformance
 * contract: the handle's root + "/skills"). */
#define DT_SKILLS_DIR "skills"

/* Labels put on every sandbox this provider creates. */
#define DT_LABEL_MANAGED "sbx.managed"
#define DT_LABEL_OWNER "sbx.owner"
#define DT_LABEL_SPEC "sbx.spec"
/* The ports declared at create, "3000,8080" (PORTS). */
#define DT_LABEL_PORTS "sbx.ports"
/* Most ports one sandbox declares. */
#define DT_PORTS_MAX 32

/* Characters of the key hash in the sandbox's deterministic name. */
#define DT_NAME_HASH 32

/* A resolved configuration; strings malloc'd. */
struct daytona_conf {
    char *api_key;
    char *api_url;
    char *target;      /* region, or NULL: the organization's default */
    char *snapshot;    /* or NULL */
    char *image;       /* or NULL (then snapshot, or the service's default) */
    char *user;        /* sandbox OS user, or NULL: the snapshot's */
    char *workspace;   /* absolute path of the workspace */
    char *state_dir;   /* host directory of per-sandbox state (memory) */
    int64_t auto_stop_min;
    int network;       /* 0: networkBlockAll */
    int64_t request_timeout_ms;
    int64_t connect_timeout_ms;
    int64_t start_timeout_ms;
    int64_t proc_buffer;  /* replay buffer per stream of a process (bytes) */
    struct sbxp_http_retry retry;
};

/* A provider instance. */
struct daytona_state {
    const struct sbx_host *host;
    struct daytona_conf cfg;
    sbxp_http *api;
    char auth[600];         /* "Authorization: Bearer ..." */
    struct sbxp_api ctl;    /* the API's calls (api.c) */
    pthread_mutex_t lock;   /* guards toolbox/toolbox_url */
    sbxp_http *toolbox;      /* pool for the first toolboxProxyUrl seen */
    char *toolbox_url;
};

/* A sandbox handle. Immutable after attach but for the paused hint. */
struct sbx_sandbox {
    struct daytona_state *st;
    char id[128];
    char key_hash[SBX_KEY_HASH_LEN + 1];
    sbxp_http *tb;       /* toolbox pool: st->toolbox or owned */
    int owns_tb;
    char prefix[200];   /* "/<escaped id>", prepended to toolbox paths */
    struct sbxp_rmem mem; /* memory attachments, from create or state_dir */
    uint16_t ports[DT_PORTS_MAX]; /* declared at create (the label), 0-ended */
    int paused;          /* atomic: this handle stopped it (pause.c) */
};

/* ---- provider.c -------------------------------------------------------- */

/* Set the call's error (or log it when call is NULL) and return status:
 * plugins/common/call_error.c on the state's host. */
#define daytona_error(st, call, ...) sbxp_call_error((st)->host, (call), __VA_ARGS__)

/* How daytona_report names the provider and its key. */
extern const struct sbxp_reporter daytona_reporter;

/* Report a failed request, prefixed with what was attempted; 401/403
 * become SBX_E_CONFIG naming DAYTONA_API_KEY (never its value):
 * plugins/common/http_report.c. */
#define daytona_report(st, call, err, ...) \
    sbxp_http_report((st)->host, (call), &daytona_reporter, (err), __VA_ARGS__)

/* ---- api.c ------------------------------------------------------------- */

/* GET /sandbox/{idOrName}: the Sandbox; SBX_E_NOT_FOUND when gone. */
int daytona_api_get(struct daytona_state *st, sbx_call *call, const char *id_or_name,
                    json_object **out, sbxp_http_error *err);

/* POST /sandbox with the deterministic name, labels and settings. */
int daytona_api_create(struct daytona_state *st, sbx_call *call, const char *name,
                       const char *key_hash, const char *spec_hash, const char *ports,
                       json_object **out, sbxp_http_error *err);

/* POST /sandbox/{id}/start (resumes a stopped or paused sandbox). */
int daytona_api_start(struct daytona_state *st, sbx_call *call, const char *id,
                      sbxp_http_error *err);

/* DELETE /sandbox/{id}; 404 is SBX_OK. */
int daytona_api_delete(struct daytona_state *st, sbx_call *call, const char *id,
                       sbxp_http_error *err);

/* Poll until the sandbox is `started` (starting it when stopped, paused
 * or archived) within start_timeout_ms; *out (may be NULL) receives the
 * last Sandbox. Reports its own errors, naming the last state. */
int daytona_api_wait_started(struct daytona_state *st, sbx_call *call, const char *id,
                             json_object **out);

/* Why a wait failed: a request's error prefixed with what (when what is
 * not empty), or err's message alone. */
struct daytona_wait {
    sbxp_http_error err;
    char what[200];
};

/* daytona_api_wait_started without reporting: w says why it failed (a
 * gone sandbox is SBX_E_NOT_FOUND). */
int daytona_api_wait_started_quiet(struct daytona_state *st, sbx_call *call, const char *id,
                                   json_object **out, struct daytona_wait *w);

/* Report a failed wait on the call; returns its status. */
int daytona_wait_report(struct daytona_state *st, sbx_call *call, struct daytona_wait *w);

/* POST /sandbox/{id}/stop (SIGTERM to its processes; the filesystem is
 * kept). */
int daytona_api_stop(struct daytona_state *st, sbx_call *call, const char *id,
                     sbxp_http_error *err);

/* Stop the sandbox when it is started and poll until it is stopped (or
 * paused, or archived: nothing of it runs) within start_timeout_ms. */
int daytona_api_wait_stopped(struct daytona_state *st, sbx_call *call, const char *id,
                             struct daytona_wait *w);

/* Poll until GET answers 404 (or state destroyed), bounded likewise. */
int daytona_api_wait_gone(struct daytona_state *st, sbx_call *call, const char *id);

/* ---- lifecycle.c ------------------------------------------------------- */

int daytona_create(void *state, sbx_call *call, const struct sbx_create_args *args, char *ref,
                   sbx_sandbox **out);
int daytona_attach(void *state, sbx_call *call, const struct sbx_attach_args *args,
                   sbx_sandbox **out);
int daytona_destroy(void *state, sbx_call *call, const struct sbx_destroy_args *args);
const char *daytona_root(sbx_sandbox *sb);
void daytona_release(sbx_sandbox *sb);

/* ---- pause.c ----------------------------------------------------------- */

int daytona_pause(sbx_sandbox *sb, sbx_call *call, uint32_t flags);
int daytona_resume(sbx_sandbox *sb, sbx_call *call);

/* health.c: the optional health op, GET /sandbox?limit=1 (an
 * authenticated read that creates nothing). */
int daytona_health(void *state, sbx_call *call, char detail[SBX_HEALTH_DETAIL_MAX]);

/* Before a toolbox request: when this handle stopped the sandbox, start it
 * and wait until it runs (nothing at all while the hint is clear: the hot
 * path of a running sandbox pays no request). A failure fills err. */
int daytona_wake(sbx_sandbox *sb, sbx_call *call, sbxp_http_error *err);

/* After a toolbox request failed in a way the proxy answers for a sandbox
 * that does not run: when the API says it is stopped, paused or archived
 * (auto-stop, or stopped elsewhere), start it and wait. SBX_OK: it runs
 * and the request may be repeated; otherwise nothing changed and err is
 * untouched. */
int daytona_revive(sbx_sandbox *sb, sbx_call *call, const sbxp_http_error *err);

/* ---- toolbox.c --------------------------------------------------------- */

/* Bind a handle to its toolbox from the Sandbox answer's toolboxProxyUrl
 * (asking GET /sandbox/{id}/toolbox-proxy-url when it is absent). */
int daytona_tb_setup(sbx_sandbox *sb, sbx_call *call, json_object *sandbox);

/* A JSON call to the toolbox at path (relative to the sandbox's base,
 * e.g. "/process/session"); body and out may be NULL. */
int daytona_tb_json(sbx_sandbox *sb, sbx_call *call, const char *method, const char *path,
                    json_object *body, json_object **out, int idempotent, int64_t timeout_ms,
                    sbxp_http_error *err);

/* A session command (POST path, body) whose answer carries stdout and
 * stderr apart, as the toolbox gives them to SDKs from 0.167.0 on. Not
 * repeated. */
int daytona_tb_json_split(sbx_sandbox *sb, sbx_call *call, const char *path, json_object *body,
                          json_object **out, int64_t timeout_ms, sbxp_http_error *err);

/* "<path>?<name>=<escaped value>[&<name2>=<escaped value2>]" (malloc'd). */
char *daytona_tb_query(const char *path, const char *name, const char *value,
                       const char *name2, const char *value2);

/* GET /files/download?path=abs into sink. */
int daytona_tb_download(sbx_sandbox *sb, sbx_call *call, const char *abs,
                        const struct sbx_sink *sink, sbxp_http_error *err);

/* GET path (a toolbox path with its query) into sink, streamed. */
int daytona_tb_get(sbx_sandbox *sb, sbx_call *call, const char *path,
                   const struct sbx_sink *sink, sbxp_http_error *err);

/* POST /files/upload of len bytes of data to abs. */
int daytona_tb_upload_mem(sbx_sandbox *sb, sbx_call *call, const char *abs, const void *data,
                          size_t len, sbxp_http_error *err);

/* POST /files/upload?path=abs, multipart field "file" streamed from src. */
int daytona_tb_upload(sbx_sandbox *sb, sbx_call *call, const char *abs,
                      const struct sbx_source *src, sbxp_http_error *err);

/* POST /files/folder?path=abs&mode=<octal> (parents too; existing is fine). */
int daytona_tb_mkdir(sbx_sandbox *sb, sbx_call *call, const char *abs, unsigned mode,
                     sbxp_http_error *err);

/* POST /files/permissions?path=abs&mode=<octal>. */
int daytona_tb_chmod(sbx_sandbox *sb, sbx_call *call, const char *abs, unsigned mode,
                     sbxp_http_error *err);

/* POST /files/move?source=&destination= (rename over the destination). */
int daytona_tb_move(sbx_sandbox *sb, sbx_call *call, const char *from, const char *to,
                    sbxp_http_error *err);

/* DELETE /files?path=abs[&recursive=true]; missing is SBX_OK. */
int daytona_tb_remove(sbx_sandbox *sb, sbx_call *call, const char *abs, int recursive,
                      sbxp_http_error *err);

/* POST /process/session {sessionId: sid} (a retry finding it made is
 * fine); reports its own errors, naming the command `what`. */
int daytona_tb_session_create(sbx_sandbox *sb, sbx_call *call, const char *sid, const char *what);

/* DELETE /process/session/{sid}: the toolbox ends the session's process
 * group (SIGTERM, then SIGKILL). Runs even after a cancellation; failures
 * are logged. */
void daytona_tb_session_delete(sbx_sandbox *sb, const char *sid);

/* Report a toolbox failure; a failure that may mean the sandbox is gone or
 * not running is checked with the API: SBX_E_NOT_FOUND when it is gone,
 * SBX_E_UNAVAILABLE naming the state when it is not `started`. */
int daytona_tb_report(sbx_sandbox *sb, sbx_call *call, sbxp_http_error *err, const char *fmt, ...)
    SBX_PRINTF_LIKE(4, 5);

/* ---- exec.c ------------------------------------------------------------ */

int daytona_exec(sbx_sandbox *sb, sbx_call *call, const struct sbx_exec_args *args,
                 struct sbx_exec_result *res);

/* Run argv in the absolute directory cwd (NULL: the workspace), stdout to
 * out (NULL: discarded, and the command runs as daytona_exec_small), up to
 * cap-1 bytes of stderr kept in msg; *exit_code is 128+N after a death by
 * signal N. timeout 0: none. call may be NULL. */
int daytona_exec_helper(sbx_sandbox *sb, sbx_call *call, const char *cwd,
                        const char *const *argv, const struct sbx_sink *out, int64_t timeout_ms,
                        int *exit_code, char *msg, size_t cap);

/* SBX_E_INVALID (reported) when the cwd, an argument or an environment
 * entry is not valid UTF-8: commands travel as JSON text. */
int daytona_exec_check_text(struct daytona_state *st, sbx_call *call, const char *cwd,
                            const char *const *argv, const char *const *env);

/* ---- exec_stdin.c ------------------------------------------------------ */

/* Feed a running command's stdin from in through files of dir (see
 * exec_stdin.c). */
struct daytona_feed;
int daytona_feed_start(sbx_sandbox *sb, sbx_call *call, const struct sbx_source *in,
                       const char *dir, struct daytona_feed **out);

/* Stop feeding and free f (NULL is ignored); 1 when the source failed
 * (it has set the call's error), else 0. */
int daytona_feed_stop(struct daytona_feed *f);

/* ---- exec_small.c ------------------------------------------------------ */

/* A short helper command with small text output: one session, its exit
 * code and its stdout (into out, out_cap > 0) and stderr (into msg) taken
 * from the session's JSON answer, no files. SBX_E_EXISTS (nothing set on
 * the call) when stdout did not fit, was not valid UTF-8 or the toolbox
 * did not split it: then use daytona_exec_helper, which is byte-exact. */
int daytona_exec_small(sbx_sandbox *sb, sbx_call *call, const char *cwd, const char *const *argv,
                       int64_t timeout_ms, int *exit_code, char *out, size_t out_cap, char *msg,
                       size_t cap);

/* ---- paths.c ----------------------------------------------------------- */

enum daytona_ftype { DT_FT_NONE = 0, DT_FT_FILE, DT_FT_DIR, DT_FT_OTHER };

/*
 * Resolve a workspace-relative path (or an absolute one below DT_OUTPUTS)
 * inside the sandbox, following symlinks, and refuse (SBX_E_INVALID) one
 * that leads out of its root. *abs (malloc'd) is the resolved path, *type
 * the final entry's type. allow_root lets "" mean the root itself.
 */
int daytona_resolve(sbx_sandbox *sb, sbx_call *call, const char *what, const char *rel,
                    int allow_root, char **abs, int *type);

/* What daytona_resolve_entry finds at a path (its last component not
 * followed). */
enum daytona_etype {
    DT_ET_MISSING = 0, /* nothing there, the parent is a directory */
    DT_ET_NO_PARENT,   /* the parent is missing or not a directory */
    DT_ET_FILE,
    DT_ET_DIR,
    DT_ET_EMPTY_DIR,   /* only with want_empty */
    DT_ET_SYMLINK,
    DT_ET_OTHER
};

/*
 * Resolve a workspace-relative path for the file operations: "", "." and
 * NULL are the root; ".." anywhere and absolute paths are SBX_E_INVALID;
 * the parent is resolved inside the sandbox (symlinks followed) and must
 * stay in the workspace (else SBX_E_INVALID), the last component is kept
 * as it is, never followed. *abs (malloc'd) is the result, *type what is
 * there; want_empty tells an empty directory apart.
 */
int daytona_resolve_entry(sbx_sandbox *sb, sbx_call *call, const char *what, const char *rel,
                          int want_empty, char **abs, enum daytona_etype *type);

/* Quote s for a POSIX shell and append it to *buf (grown), after a space
 * unless *buf is empty. 0, or -1 when out of memory. */
int daytona_sh_quote(char **buf, size_t *len, size_t *cap, const char *s);

/* ---- files.c ----------------------------------------------------------- */

int daytona_read_file(sbx_sandbox *sb, sbx_call *call, const char *path,
                      const struct sbx_sink *sink);
int daytona_write_file(sbx_sandbox *sb, sbx_call *call, const char *path,
                       const struct sbx_source *src, unsigned mode);

/* ---- outputs.c / skills.c ---------------------------------------------- */

/* Make a directory outside the user's reach (below /mnt, /workspace) with
 * mode: through the toolbox, else as the sandbox user with sudo -n. */
int daytona_shared_dir(sbx_sandbox *sb, sbx_call *call, const char *abs, unsigned mode);

int daytona_outputs_prepare(sbx_sandbox *sb, sbx_call *call);
int daytona_export_outputs(sbx_sandbox *sb, sbx_call *call, const struct sbx_sink *tar_sink);
int daytona_skill_install(sbx_sandbox *sb, sbx_call *call, const char *name,
                          const struct sbx_blob *bundle);

/* ---- proc.c / proc_read.c (PROCESSES, PTY) ----------------------------- */

/* A parsed process id (see proc.c). */
struct daytona_proc {
    char hex[25];       /* the random part: session sbx-proc-<hex> */
    char sid[160];      /* the toolbox session: sbx-proc-<id> */
    char dir[64];       /* its directory in the sandbox */
    uint64_t seg;       /* recorder segment size */
    unsigned keep;      /* segments kept besides the current one */
    uint64_t buffer;    /* the replay buffer: the last `buffer` bytes are readable */
    int pty;
    int64_t started_ms;
};

/* Parse id and check that it is one of this sandbox's (its key hash
 * prefix); SBX_E_NOT_FOUND (reported) otherwise. */
int daytona_proc_parse(sbx_sandbox *sb, sbx_call *call, const char *id, struct daytona_proc *p);

/* SBX_OK when p's session exists, SBX_E_NOT_FOUND (reported) when not. */
int daytona_proc_session_check(sbx_sandbox *sb, sbx_call *call, const char *id,
                               const struct daytona_proc *p);

int daytona_proc_start(sbx_sandbox *sb, sbx_call *call, const struct sbx_proc_spec *spec,
                       char id[SBX_PROC_ID_MAX]);
int daytona_proc_write(sbx_sandbox *sb, sbx_call *call, const char *id, const void *data,
                       size_t len, uint32_t flags);
int daytona_proc_read(sbx_sandbox *sb, sbx_call *call, const char *id,
                      const struct sbx_proc_read_args *args, struct sbx_proc_read_result *res);
int daytona_proc_signal(sbx_sandbox *sb, sbx_call *call, const char *id, int signo);
int daytona_proc_list(sbx_sandbox *sb, sbx_call *call, const struct sbx_proc_list_sink *sink);
int daytona_proc_resize(sbx_sandbox *sb, sbx_call *call, const char *id, uint16_t rows,
                        uint16_t cols);

/* ---- fileops.c (FILE_OPS) --------------------------------------------- */

int daytona_file_list(sbx_sandbox *sb, sbx_call *call, const char *path,
                      const struct sbx_file_list_sink *sink);
int daytona_file_stat(sbx_sandbox *sb, sbx_call *call, const char *path,
                      struct sbx_file_info *out);
int daytona_file_mkdir(sbx_sandbox *sb, sbx_call *call, const char *path, unsigned mode,
                       uint32_t flags);
int daytona_file_remove(sbx_sandbox *sb, sbx_call *call, const char *path, uint32_t flags);
int daytona_file_rename(sbx_sandbox *sb, sbx_call *call, const char *from, const char *to,
                        uint32_t flags);

/* ---- ports.c (PORTS) -------------------------------------------------- */

/* The declared ports as the label's value ("3000,8080") into buf; "" for
 * none. SBX_E_INVALID (reported) for port 0 repeated or too many. */
int daytona_ports_label(struct daytona_state *st, sbx_call *call,
                        const struct sbx_create_args *args, char *buf, size_t cap);

/* Read the declared ports from a Sandbox answer's labels into sb. */
void daytona_ports_load(sbx_sandbox *sb, json_object *sandbox);

int daytona_port_resolve(sbx_sandbox *sb, sbx_call *call, uint16_t port,
                         struct sbx_port_endpoint *out);

/* ---- memory.c ---------------------------------------------------------- */

/* At create (args set) or attach (args NULL): the memory attachments. */
int daytona_memory_setup(sbx_sandbox *sb, sbx_call *call, const struct sbx_create_args *args);
int daytona_memory_load(sbx_sandbox *sb, sbx_call *call, const char *slug,
                        const struct sbx_source *tar);
int daytona_memory_diff(sbx_sandbox *sb, sbx_call *call, const char *slug, uint32_t flags,
                        const struct sbx_memory_changes *out);
int daytona_memory_accept(sbx_sandbox *sb, sbx_call *call, const char *slug);

#endif /* SBX_DAYTONA_H */
