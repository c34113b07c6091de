/*
 * docker.h - internals of the `docker` provider.
 *
 * The provider speaks the Docker Engine API over the daemon's unix socket
 * (or tcp://) through the shared HTTP helper; it never runs the docker CLI.
 * A container it creates runs sbx-agent as its init unless
 * providers.docker.agent is false: exec and file operations then go to
 * the agent over a unix socket (shared/agent_proto/PROTOCOL.md), and
 * through the Engine API otherwise. Files by responsibility:
 *   provider.c   descriptor, ops table, init/fini
 *   config.c     the providers.docker section
 *   engine.c     API version negotiation, requests, error reporting
 *   image.c      image presence and pull with progress
 *   lifecycle.c  create/attach/destroy/release/root, ownership labels, the
 *                agent's start
 *   exec*.c      the exec op; through the Engine API: exec create/start
 *                (hijacked stream), timeouts, cancel and killing
 *                (exec_internal.h lists the parts)
 *   exec_agent.c exec through the agent
 *   agent_client.c  the agent channel: connect, frames, deadlines, errors
 *   files_agent.c   read_file and write_file through the agent
 *   users.c      group_add/user_add (USERS) and the call's user
 *   paths.c      workspace-relative path checks and in-container resolution
 *   files.c      read_file (the agent's, else through the archive endpoint)
 *   write.c      write_file: checks, target paths, missing directories
 *   write_stream.c  the data of a write without the agent: one exec fed
 *                with the data and a trailer, publishing only a complete,
 *                verified file
 *   resources.c  the session's host-side resource directory (binds, staging)
 *   outputs.c    export_outputs (OUTPUT_EXPORT)
 *   staging.c    verifying pinned blobs in the staging directory, sweeping
 *   mounts.c     mount_put/mount_remove (FILE_MOUNTS)
 *   skills.c     skill_install and the repair of skills at attach (SKILLS)
 *   memory*.c    memory stores (MEMORY; memory_internal.h lists the parts)
 *   pause.c      pause/resume (PAUSE) and the transparent resume of a
 *                paused container before every other op
 */
#ifndef SBX_DOCKER_H
#define SBX_DOCKER_H

#include <sbx/provider.h>

#include "call_cancel.h"
#include "call_error.h"
#include "clock.h"
#include "http_client.h"
#include "http_json.h"
#include "http_report.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

/* Highest Engine API version this provider speaks; lowest it accepts. */
#define DOCKER_API_MAX_MAJOR 1
#define DOCKER_API_MAX_MINOR 41
#define DOCKER_API_MIN_MINOR 40

/* Where the workspace lives inside every container. */
#define DOCKER_WORKSPACE "/workspace"

/* Binds of the session's resource directory (resources.c). */
#define DOCKER_OUTPUTS "/mnt/session/outputs"
#define DOCKER_UPLOADS "/mnt/session/uploads"
#define DOCKER_SKILLS DOCKER_WORKSPACE "/skills"
/* Memory stores are bound at DOCKER_MEMORY/<slug> (memory.c). */
#define DOCKER_MEMORY "/mnt/memory"

/* Labels this provider puts on its containers. */
#define DOCKER_LABEL_MANAGED "sbx.managed"
#define DOCKER_LABEL_OWNER "sbx.owner"
#define DOCKER_LABEL_SPEC "sbx.spec"
#define DOCKER_LABEL_NETWORK "sbx.network"
#define DOCKER_LABEL_MOUNTS "sbx.mounts"
#define DOCKER_LABEL_PORTS "sbx.ports"
#define DOCKER_LABEL_PREFIX "sbx."
/* the image a fork's container was made from ("" for a created one) */
#define DOCKER_LABEL_FORK_IMAGE "sbx.fork.image"

/* Defaults of request_timeout and kill_timeout (docker_config). */
#define DOCKER_REQUEST_TIMEOUT_MS 30000
#define DOCKER_KILL_TIMEOUT_MS 600

/* Environment variable that tags every process of one exec (see exec.c). */
#define DOCKER_EXEC_TAG_VAR "SBX_EXEC_TAG"

struct docker_label {
    char *key;
    char *value;
};

/* The providers.docker section, resolved. */
struct docker_config {
    char *host;          /* unix:///... or tcp://host:port */
    char *image;
    char *network;       /* "none" unless configured */
    int64_t memory;      /* bytes, 0: unlimited */
    int64_t nano_cpus;   /* cpus * 1e9, 0: unlimited */
    int64_t pids_limit;  /* 0: unlimited */
    char *user;          /* NULL: the image's user */
    /* Owner given to uploaded files. A numeric user ("uid[:gid]") is written
     * into the tar headers; a user name is resolved by the daemon in the
     * container's /etc/passwd (copyUIDGID). */
    int user_numeric;
    int64_t uid, gid;
    int read_only_rootfs;
    struct docker_label *labels;
    size_t nlabels;
    char *resource_dir;  /* host directory for provider-owned resources */
    /* Deadline of every Engine API call that is not a stream, of the
     * response headers of streams, and how long a stream may move no byte
     * (or a silent exec go without the daemon answering a ping). */
    int64_t request_timeout_ms;
    /* How long a timeout, cancellation or refusing sink may take to kill a
     * command and drain its output before exec returns. */
    int64_t kill_timeout_ms;
    /* Check the SHA-256 of a write's data in the container before it is
     * published (one more read of the file there, when it has sha256sum). */
    int verify_writes;
    /* New containers run under sbx-agent (agent_client.c). */
    int agent;
    /* A process's replay buffer per stream when its start says 0
     * (process_buffer; 0: the supervisor's 1 MiB) (procs.c). */
    uint64_t process_buffer;
    char *agent_path;    /* the static agent binary on the daemon's host */
    /* Host address declared ports are published on (ports.c). */
    char *publish_address;
    /* pause_mode: stop (stop the container, start it on resume) instead of
     * freeze (the cgroup freezer) (pause.c). */
    int pause_stop;
};

/* A provider instance. */
struct docker_state {
    const struct sbx_host *host;
    struct docker_config cfg;
    sbxp_http *http;
    pthread_mutex_t lock;  /* guards api_prefix negotiation */
    int negotiated;
    char api_prefix[16];   /* "/v1.41" */
};

/* One regular file of a memory tree as a walk saw it (memory.c). */
struct docker_mem_file {
    char *path; /* first: a record of plugins/common/path_list.h */
    uint64_t ino;
    int64_t size;
    int64_t mtime_ns, ctime_ns;
    uint32_t mode;
    size_t seq; /* order of addition */
};

struct docker_mem_list {
    struct docker_mem_file *v;
    size_t n, cap;
};

/* A memory store attached to a sandbox (memory.c). The host never runs
 * two memory ops of one attachment at once, nor one while a command runs. */
struct docker_memory {
    char slug[64];
    int read_write;
    char *tree;   /* host path of the bound tree */
    char *state;  /* host path prefix of its baseline files */
    int inotify_fd;
    int armed;    /* inotify_fd watches a tree equal to its baseline */
    char **wd_paths; /* tree-relative directory of each watch descriptor */
    size_t nwd;
    /* The baseline as last read or recorded (sorted by path). */
    struct docker_mem_list base;
    int base_valid;
    size_t journal_lines; /* records in the baseline file */
    /* What the last diff saw, which accept records (valid until then):
     * the whole tree (last, after a walk), or only what changed
     * (changed, removed: from the watch's events), or nothing (quiet). */
    int diff_valid, diff_quiet, diff_whole;
    struct docker_mem_list last;
    struct docker_mem_list changed;
    char **removed;
    size_t nremoved;
};

/* A sandbox handle: immutable after create/attach, so concurrent exec and
 * file ops on it need no lock. */
struct sbx_sandbox {
    struct docker_state *st;
    char id[65];                      /* container ID */
    char key_hash[SBX_KEY_HASH_LEN + 1];
    /* Host paths of the binds the container really has (from its mounts),
     * NULL when it was created without them: the capability ops then fail
     * closed instead of writing into the container's own file system. */
    char *outputs_src;
    char *uploads_src;
    char *skills_src;
    char *staging;                    /* the session's staging directory */
    char *skill_state;                /* the session's skill-state directory */
    /* Host paths of the agent's directory (the /.sbx/run bind) and of its
     * socket there when the container runs under sbx-agent; NULL: exec
     * and files go through the Engine API. What is in the directory is
     * the container's: agent_client.c opens it only beneath the
     * directory's descriptor (agent_sock is for messages). */
    char *agent_dir;
    char *agent_sock;
    /* The container's init pid as this process sees it, which the agent's
     * listener must have (agent_client.c): learnt from the daemon on
     * first use and again when it changes (a restarted container). */
    atomic_int agent_pid;
    /* Memory stores bound into the container (from its mounts). */
    struct docker_memory *memory;
    size_t nmemory;
    /* The process channels to the agent's supervisor, made on first use
     * (procs.c). */
    _Atomic(struct sbxp_proc_client *) procs;
    /* The ports declared at create (its sbx.ports label), ascending. */
    uint16_t ports[64];
    size_t nports;
};

/* ---- config.c --------------------------------------------------------- */

/* Read the section through the host table into cfg. SBX_E_CONFIG with a
 * message naming the key when a value is unusable. */
int docker_config_load(const struct sbx_host *host, sbx_call *call,
                       struct docker_config *cfg);
void docker_config_free(struct docker_config *cfg);

/* The query suffix and tar owner for uploads: "&copyUIDGID=true" for a
 * named user, "" otherwise; uid and gid receive the tar header owner. */
const char *docker_upload_owner(const struct docker_config *cfg, int64_t *uid,
                                int64_t *gid);

/* ---- engine.c --------------------------------------------------------- */

/* Milliseconds on the monotonic clock (shared/clock.h). */
#define docker_now_ms() sbxs_now_ms()

/* 2*bytes lowercase hex digits of random bytes (at most 32) and a NUL. */
void docker_random_hex(char *out, size_t bytes);

/* Negotiate the API version once per instance (GET /version). */
int docker_negotiate(struct docker_state *st, sbx_call *call);

/*
 * One JSON request to the Engine API. path is below the version prefix
 * ("/containers/x/json"), printf-style. body may be NULL; *out (may be
 * NULL to discard) receives the parsed response. On failure nothing is
 * reported to the host: the caller decides with docker_report. call may be
 * NULL: the request then ignores cancellation.
 */
int docker_json(struct docker_state *st, sbx_call *call, const char *method,
                json_object *body, json_object **out, sbxp_http_error *err,
                const char *fmt, ...) SBX_PRINTF_LIKE(7, 8);

/* docker_json with its own deadline (ms from now, > 0) instead of the
 * configured request timeout. */
int docker_json_within(struct docker_state *st, sbx_call *call, int64_t timeout_ms,
                       const char *method, json_object *body, json_object **out,
                       sbxp_http_error *err, const char *fmt, ...)
    SBX_PRINTF_LIKE(8, 9);

/* GET /_ping within timeout_ms: is the daemon still answering? */
int docker_ping(struct docker_state *st, int64_t timeout_ms, sbxp_http_error *err);
/* The health op: _ping, then /version into detail. */
int docker_health(void *state, sbx_call *call, char detail[SBX_HEALTH_DETAIL_MAX]);

/* Build "/v1.41" + path into buf (printf-style). 0, or -1 when too long. */
int docker_path(struct docker_state *st, char *buf, size_t cap, const char *fmt,
                ...) SBX_PRINTF_LIKE(4, 5);

/* How docker_report names the provider and its hints (engine.c). */
extern const struct sbxp_reporter docker_reporter;

/* Report a failed request to the host, prefixed with what was attempted,
 * with a hint for an unreachable daemon or a refused socket. Returns the
 * status (plugins/common/http_report.c). */
#define docker_report(st, call, err, ...) \
    sbxp_http_report((st)->host, (call), &docker_reporter, (err), __VA_ARGS__)

/* Set the call's error (or, with no call, log it) and return status
 * (plugins/common/call_error.c on the state's host). */
#define docker_error(st, call, ...) sbxp_call_error((st)->host, (call), __VA_ARGS__)

/* ---- image.c ---------------------------------------------------------- */

/* Pull the configured image, reporting progress through host->log. */
int docker_image_pull(struct docker_state *st, sbx_call *call);

/* ---- lifecycle.c ------------------------------------------------------- */

int docker_create(void *state, sbx_call *call, const struct sbx_create_args *args,
                  char *ref, sbx_sandbox **out);
int docker_attach(void *state, sbx_call *call, const struct sbx_attach_args *args,
                  sbx_sandbox **out);
int docker_destroy(void *state, sbx_call *call, const struct sbx_destroy_args *args);
const char *docker_root(sbx_sandbox *sb);
void docker_release(sbx_sandbox *sb);

/* Wait until the agent of a (re)started container answers, restarting a
 * wedged one once (lifecycle.c). */
int docker_agent_up(struct docker_state *st, sbx_call *call, sbx_sandbox *sb);

/* ---- pause.c (SBX_CAP_PAUSE) ------------------------------------------- */

int docker_pause(sbx_sandbox *sb, sbx_call *call, uint32_t flags);
/* SBX_CAP_FORK (lifecycle.c): a new key's container from a commit of sb's. */
int docker_fork(sbx_sandbox *src, sbx_call *call, const struct sbx_create_args *args,
                char *ref, sbx_sandbox **out);
int docker_resume(sbx_sandbox *sb, sbx_call *call);
/* Resume the container first when this provider paused it (a local
 * marker file in the session's resource directory, so the check costs no
 * request to the daemon); SBX_OK at once otherwise. */
int docker_awake(sbx_sandbox *sb, sbx_call *call);
/* Make the container of (id, key_hash) run (unpause, or start a stopped
 * one) and forget the pause, under the session's pause lock. *started is
 * set when it was started (its agent must be waited for). info (may be
 * NULL: inspected here) is its inspect output. */
int docker_wake_container(struct docker_state *st, sbx_call *call, const char *id,
                          const char *key_hash, json_object *info, int *started);

/* ---- memory.c (SBX_CAP_MEMORY) ----------------------------------------- */

/* Add the binds of args->memory (sorted by slug) to a create's mounts,
 * creating their trees in the session's resource directory. */
int docker_memory_binds(struct docker_state *st, sbx_call *call, const char *name,
                        const struct sbx_create_args *args, json_object *mounts);
/* Fill sb->memory from a container's mounts (create spec or inspect).
 * -1 when out of memory. */
int docker_memory_from_mounts(sbx_sandbox *sb, json_object *mounts, int from_inspect);
/* The attachment of slug, or NULL with SBX_E_NOT_FOUND set on call. */
struct docker_memory *docker_memory_find(sbx_sandbox *sb, sbx_call *call, const char *slug);
void docker_memory_free(sbx_sandbox *sb);
/* Drop an attachment's inotify watch (memory_diff.c arms it). */
void docker_memory_watch_stop(struct docker_memory *mem);
int docker_memory_load(sbx_sandbox *sb, sbx_call *call, const char *slug,
                       const struct sbx_source *tar);
int docker_memory_diff(sbx_sandbox *sb, sbx_call *call, const char *slug, uint32_t flags,
                       const struct sbx_memory_changes *out);
int docker_memory_accept(sbx_sandbox *sb, sbx_call *call, const char *slug);
int docker_memory_watch(sbx_sandbox *sb, sbx_call *call, const char *slug);

/* ---- exec.c ------------------------------------------------------------ */

int docker_exec(sbx_sandbox *sb, sbx_call *call, const struct sbx_exec_args *args,
                struct sbx_exec_result *res);

/*
 * A helper command fed with stdin from `in` that publishes its work only
 * when the input is complete (the write script, see write_stream.c). On
 * cancellation, or when the source fails, its stdin is ended without the
 * input's end: it cleans up by itself and nothing is killed. *exit_code
 * receives its exit status and `output` (cap bytes, may be NULL) the start
 * of its stdout+stderr; *complete (may be NULL) whether all of the input,
 * the end included, was handed to the daemon. SBX_OK when it ran,
 * SBX_E_IO after a source error (the source has said why),
 * SBX_E_CANCELLED, or a daemon failure with the call's error set.
 */
int docker_exec_feed(sbx_sandbox *sb, sbx_call *call, const char *const *argv,
                     const struct sbx_source *in, int *exit_code, int *complete,
                     char *output, size_t cap);

/* ---- paths.c ----------------------------------------------------------- */

/* Check a workspace-relative path (no absolute, no "..", no empty or "."
 * components, no NUL-free control bytes), normalizing "a//b/" to "a/b".
 * allow_root lets "" and "." mean the root. *out is malloc'd, "" for the
 * root. SBX_E_INVALID with a message otherwise. */
int docker_path_check(struct docker_state *st, sbx_call *call, const char *what,
                      const char *path, int allow_root, char **out);

/* Stat of a path inside the container (from X-Docker-Container-Path-Stat). */
struct docker_stat {
    int exists;
    uint32_t mode;       /* Go os.FileMode bits */
    int64_t size;
    char link_target[4096]; /* fully resolved target when a symlink */
};

#define DOCKER_MODE_DIR (UINT32_C(1) << 31)
#define DOCKER_MODE_SYMLINK (UINT32_C(1) << 27)
#define DOCKER_MODE_IRREGULAR_MASK                                               \
    ((UINT32_C(1) << 26) | (UINT32_C(1) << 25) | (UINT32_C(1) << 24) |           \
     (UINT32_C(1) << 21) | (UINT32_C(1) << 19))

/* Parse the stat header value (base64 JSON). 0 or -1. */
int docker_stat_parse(const char *header_value, struct docker_stat *st);

/* HEAD the archive endpoint for an absolute container path. A missing path
 * is SBX_OK with exists == 0. */
int docker_stat_path(sbx_sandbox *sb, sbx_call *call, const char *abs_path,
                     struct docker_stat *out, sbxp_http_error *err);

/*
 * Resolve the path rel (relative to root: the workspace or the outputs
 * directory) inside the container, refusing symlinks that lead out of root. On success *resolved (malloc'd)
 * is an absolute container path with every symlink among the components
 * that exist replaced by its in-workspace target; *existing is the number
 * of leading components that exist; fst is the stat of the full path
 * (exists == 0 when it does not).
 */
int docker_resolve(sbx_sandbox *sb, sbx_call *call, const char *root, const char *rel,
                   char **resolved, size_t *existing, struct docker_stat *fst);

/* The root a file op's path is below and the checked path relative to it:
 * /mnt/session/outputs for a path inside it (so the file tools and the shell
 * see the same outputs directory), else the workspace (docker_path_check).
 * A path into the outputs of a container without that mount is
 * SBX_E_UNSUPPORTED. *rel is malloc'd. */
int docker_path_rooted(sbx_sandbox *sb, sbx_call *call, const char *what,
                       const char *path, const char **root, char **rel);

/* ---- resources.c ------------------------------------------------------ */

/* <resource_dir>/<name>[/<sub>] into buf. -1 when it does not fit. */
int docker_res_dir(struct docker_state *st, const char *name, const char *sub,
                   char *buf, size_t cap);

/* mkdir -p of an absolute path (existing directories are kept); 0 or -1
 * with errno. */
int docker_res_mkdirs(const char *path, mode_t mode);

/* Make the session's resource directory and its subdirectories (outputs,
 * uploads, skills, staging), keeping what exists. SBX_E_IO naming the path. */
int docker_res_prepare(struct docker_state *st, sbx_call *call, const char *name);

/* Empty the subdirectories (for a freshly created container). */
int docker_res_empty(struct docker_state *st, sbx_call *call, const char *name);

/* Make the outputs directory writable for the configured user: owned by a
 * numeric uid:gid, or sticky and world-writable (like /tmp) for a user
 * name, which only the container can resolve. The session directory above
 * it is private to the provider either way. */
int docker_res_own_outputs(struct docker_state *st, sbx_call *call, const char *name);

/* Remove the session's resource directory; absent is SBX_OK. call may be
 * NULL (the error is then logged). */
int docker_res_remove(struct docker_state *st, sbx_call *call, const char *name);

/* ---- outputs.c --------------------------------------------------------- */

/* Stream /mnt/session/outputs as a tar whose entries are relative to it. */
int docker_export_outputs(sbx_sandbox *sb, sbx_call *call,
                          const struct sbx_sink *tar_sink);

/* ---- staging.c --------------------------------------------------------- */

/* Open the handle's staging directory (SBX_E_UNSUPPORTED without the
 * resource binds). *dirfd is owned by the caller. */
int docker_staging_open(sbx_sandbox *sb, sbx_call *call, const char *what, int *dirfd);

/* Remove the staging entries whose creator died (no flock held on them). */
void docker_staging_sweep(int dirfd);

/* "<kind>-<24 random hex>" into out. -1 without random bytes. */
int docker_staging_name(const char *kind, char *out, size_t cap);

/* Create a staging file with a fresh name (into name) and hold an exclusive
 * flock on it through *fd (close it to release). */
int docker_staging_file(struct docker_state *st, sbx_call *call, int dirfd,
                        const char *kind, char *name, size_t cap, int *fd);

/* Check a blob's arguments (source, 64-hex SHA-256). SBX_E_INVALID. */
int docker_blob_args(struct docker_state *st, sbx_call *call, const char *what,
                     const struct sbx_blob *blob);

/* Stream the blob into fd while hashing; SBX_E_INVALID when its length or
 * SHA-256 differ from the expected ones (reading stops as soon as it is
 * longer), SBX_E_CANCELLED, SBX_E_IO. The data is fsync'ed. */
int docker_blob_copy(struct docker_state *st, sbx_call *call, const char *what,
                     const struct sbx_blob *blob, int fd);

/* ---- mounts.c ---------------------------------------------------------- */

int docker_mount_put(sbx_sandbox *sb, sbx_call *call, const char *path,
                     const struct sbx_blob *blob);
int docker_mount_remove(sbx_sandbox *sb, sbx_call *call, const char *path);

/* ---- skills.c ---------------------------------------------------------- */

int docker_skill_install(sbx_sandbox *sb, sbx_call *call, const char *name,
                         const struct sbx_blob *bundle);

/* Check every installed skill of the handle against its recorded tree and
 * restore missing or damaged ones from their kept bundles (a skill that
 * cannot be restored is removed and logged). SBX_OK, or SBX_E_IO /
 * SBX_E_CANCELLED when the directories cannot be worked on. */
int docker_skills_repair(sbx_sandbox *sb, sbx_call *call);

/* ---- files.c, write.c ---------------------------------------------------- */

int docker_read_file(sbx_sandbox *sb, sbx_call *call, const char *path,
                     const struct sbx_sink *sink);
int docker_write_file(sbx_sandbox *sb, sbx_call *call, const char *path,
                      const struct sbx_source *src, unsigned mode);

/* ---- write_stream.c ------------------------------------------------------ */

/* Stream src into the container as the file `final` (absolute, resolved)
 * through the temporary `tmp` beside it, with permission bits perm, and
 * publish it only once the container has the complete data: its length
 * and SHA-256 travel in a trailer after the data, checked in the
 * container before the rename. rel names the file in messages. */
int docker_write_stream(sbx_sandbox *sb, sbx_call *call, const char *rel,
                        const struct sbx_source *src, const char *tmp,
                        const char *final, unsigned perm);

/* ---- agent_client.c -------------------------------------------------------- */

/* Where sbx-agent is bound in a container, its socket directory there, and
 * its socket's name in that directory (shared/agent_proto/PROTOCOL.md). */
#define DOCKER_AGENT_BIN "/.sbx/sbx-agent"
#define DOCKER_AGENT_RUN "/.sbx/run"
#define DOCKER_AGENT_SOCK "agent.sock"
#define DOCKER_LABEL_AGENT "sbx.agent"

/* The default agent_path: sbx-agent in the directory docker.so was loaded
 * from. *out is malloc'd. 0 or -1 (out of memory). */
int docker_agent_default_path(char **out);

/* One connection to a container's agent. Every wait is bounded by deadline
 * (absolute docker_now_ms, 0: none) and by the call's cancellation. */
struct docker_agent_conn {
    int fd;
    sbx_sandbox *sb;
    sbx_call *call;
    int cancel_fd;
    int64_t deadline;
    int replaced; /* what was found was not the agent's socket (agent_client.c) */
};

/* Connect, exchange preambles (the agent's protocol version is checked:
 * SBX_E_PROTOCOL naming both on a mismatch) and send the request frame
 * (req, a whole frame). A container whose agent does not answer is
 * SBX_E_UNAVAILABLE with what to do. Errors are set on the call. */
int docker_agent_open(sbx_sandbox *sb, sbx_call *call, const void *req, size_t req_len,
                      int64_t deadline, struct docker_agent_conn *c);
/* Send one frame. SBX_OK, or the call's error set. */
int docker_agent_send(struct docker_agent_conn *c, int type, const void *p, size_t n);
/* Receive one frame (payload up to cap into buf). SBX_OK, or the error set
 * (a cut connection: SBX_E_UNAVAILABLE). */
int docker_agent_recv(struct docker_agent_conn *c, int *type, unsigned char *buf,
                      size_t cap, uint32_t *len);
/* The status and message of an AP_ERROR payload (or any frame that is not
 * what `what` expected), set on the call. map (may be NULL: file errors)
 * turns the agent's errno and stage into a status. */
int docker_agent_fail(struct docker_agent_conn *c, const char *what, int type,
                      const unsigned char *payload, uint32_t len,
                      int (*map)(uint32_t e, const char *stage));
void docker_agent_close(struct docker_agent_conn *c);

/* Wait up to wait_ms for the agent of sb to answer a ping, checking its
 * protocol version. *stopped: the container is not running (its agent
 * ended or refused to start: the message says why). *replaced: a process
 * in the container replaced the agent's socket (SBX_E_DENIED). */
int docker_agent_ready(sbx_sandbox *sb, sbx_call *call, int64_t wait_ms, int *stopped,
                       int *replaced);

/* ---- procs.c ------------------------------------------------------------ */

struct sbxp_proc_client;
int docker_proc_start(sbx_sandbox *sb, sbx_call *call, const struct sbx_proc_spec *spec,
                      char id[SBX_PROC_ID_MAX]);
int docker_proc_write(sbx_sandbox *sb, sbx_call *call, const char *id, const void *data,
                      size_t len, uint32_t flags);
int docker_proc_read(sbx_sandbox *sb, sbx_call *call, const char *id,
                     const struct sbx_proc_read_args *args, struct sbx_proc_read_result *res);
int docker_proc_signal(sbx_sandbox *sb, sbx_call *call, const char *id, int signo);
int docker_proc_list(sbx_sandbox *sb, sbx_call *call, const struct sbx_proc_list_sink *sink);
int docker_proc_resize(sbx_sandbox *sb, sbx_call *call, const char *id, uint16_t rows,
                       uint16_t cols);
/* Close the handle's process channels (release). */
void docker_procs_free(sbx_sandbox *sb);

/* ---- exec_agent.c / files_agent.c -------------------------------------------- */

int docker_agent_exec(sbx_sandbox *sb, sbx_call *call, const struct sbx_exec_args *args,
                      const char *cwd, struct sbx_exec_result *res);
int docker_agent_read(sbx_sandbox *sb, sbx_call *call, const char *root, const char *rel,
                      const struct sbx_sink *sink);
int docker_agent_write(sbx_sandbox *sb, sbx_call *call, const char *root, const char *rel,
                       const struct sbx_source *src, unsigned mode);

/* ---- users.c ------------------------------------------------------------------ */

/* The user the call acts as (sbx_host.call_user), NULL for the default. */
const char *docker_call_user(const struct docker_state *st, sbx_call *call);
/* SBX_E_UNSUPPORTED: what needs the agent, which sb runs without. */
int docker_users_need_agent(sbx_sandbox *sb, sbx_call *call, const char *what);
int docker_group_add(sbx_sandbox *sb, sbx_call *call, const struct sbx_group_spec *group);
int docker_user_add(sbx_sandbox *sb, sbx_call *call, const struct sbx_user_spec *user);

/* ---- files_ops.c (SBX_CAP_FILE_OPS) ------------------------------------------ */

int docker_file_list(sbx_sandbox *sb, sbx_call *call, const char *path,
                     const struct sbx_file_list_sink *sink);
int docker_file_stat(sbx_sandbox *sb, sbx_call *call, const char *path,
                     struct sbx_file_info *out);
int docker_file_mkdir(sbx_sandbox *sb, sbx_call *call, const char *path, unsigned mode,
                      uint32_t flags);
int docker_file_remove(sbx_sandbox *sb, sbx_call *call, const char *path, uint32_t flags);
int docker_file_rename(sbx_sandbox *sb, sbx_call *call, const char *from, const char *to,
                       uint32_t flags);

/* ---- ports.c (SBX_CAP_PORTS) ------------------------------------------------- */

/* At most this many ports per container; their label text fits in
 * DOCKER_PORTS_TEXT bytes. */
#define DOCKER_PORTS_MAX 64
#define DOCKER_PORTS_TEXT (DOCKER_PORTS_MAX * 6 + 1)

/* providers.docker.publish_address into cfg (default 127.0.0.1). */
int docker_ports_config(const struct sbx_host *host, sbx_call *call,
                        struct docker_config *cfg);
/* The create's declared ports, checked (no duplicates, at most
 * DOCKER_PORTS_MAX, a network to publish them on), as the canonical
 * sbx.ports label text ("" for none). */
int docker_ports_spec(struct docker_state *st, sbx_call *call,
                      const struct sbx_create_args *args, char text[DOCKER_PORTS_TEXT]);
/* Add ExposedPorts to a create body and PortBindings to its HostConfig.
 * 0, or -1 when out of memory. */
int docker_ports_body(struct docker_state *st, const char *text, json_object *body,
                      json_object *hc);
/* The handle's declared ports from the label text: 0, or -1 when malformed. */
int docker_ports_set(sbx_sandbox *sb, const char *text);
int docker_port_resolve(sbx_sandbox *sb, sbx_call *call, uint16_t port,
                        struct sbx_port_endpoint *out);

#endif /* SBX_DOCKER_H */
