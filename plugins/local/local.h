/*
 * local.h - internals of the `local` provider, shared by its source files.
 *
 * The provider keeps one directory per session key under a configured root
 * and runs commands as ordinary host processes in it. It is NOT a security
 * boundary: see docs/providers/local.md.
 */
#ifndef SBX_LOCAL_H
#define SBX_LOCAL_H

#include <sbx/provider.h>

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Size of the buffers used to stream files and command I/O. */
#define LOCAL_CHUNK (64 * 1024)

/* One provider instance (created by init). Immutable after init, so ops
 * may read it from any thread. */
struct local_state {
    const struct sbx_host *host; /* borrowed until fini */
    char *root;                  /* absolute, normalized, owned */
    size_t root_len;
    char *supervisor_path;       /* the sbx-local-supervisor binary, owned */
    uint64_t process_buffer;     /* replay buffer per stream, bytes */
    int64_t supervisor_idle_ms;  /* a supervisor without processes exits */
    int64_t supervisor_timeout_ms; /* longest wait for a supervisor's answer */
};

/* Most ports one sandbox declares (sbx_create_args.ports). */
#define LOCAL_MAX_PORTS 64

/* A sandbox handle: one workspace directory. Immutable after creation, so
 * exec/read_file/write_file may run concurrently on it. */
struct sbx_sandbox {
    struct local_state *st;
    int dirfd;               /* O_PATH|O_DIRECTORY fd of the workspace */
    char path[SBX_REF_MAX];  /* absolute workspace path, also the ref */
    char hash[SBX_KEY_HASH_LEN + 1]; /* the workspace's name */
    uint16_t ports[LOCAL_MAX_PORTS]; /* declared at create (state.c) */
    size_t nports;
    struct local_procs *procs; /* the process clients (procs.c), locked */
};

/* Workspace lifecycle (workspace.c). Signatures are those of the ops. */
int local_create(void *state, sbx_call *call,
                 const struct sbx_create_args *args, char *ref,
                 sbx_sandbox **out);
int local_attach(void *state, sbx_call *call, const struct sbx_attach_args *args,
                 sbx_sandbox **out);
int local_destroy(void *state, sbx_call *call, const struct sbx_destroy_args *args);
void local_release(sbx_sandbox *sb);
const char *local_root(sbx_sandbox *sb);

/* Commands (exec.c). */
int local_exec(sbx_sandbox *sb, sbx_call *call,
               const struct sbx_exec_args *args, struct sbx_exec_result *res);

/* Files (files.c). */
int local_read_file(sbx_sandbox *sb, sbx_call *call, const char *path,
                    const struct sbx_sink *sink);
int local_write_file(sbx_sandbox *sb, sbx_call *call, const char *path,
                     const struct sbx_source *src, unsigned mode);
/* Map an errno met resolving `path` for `op` to a status, setting the
 * message; and the lexical check every path argument gets first. */
int local_path_error(const struct sbx_host *host, sbx_call *call,
                     const char *op, const char *path, int err);
int local_check_path(const struct sbx_host *host, sbx_call *call,
                     const char *op, const char *path);

/* File operations of SBX_CAP_FILE_OPS (fileops.c). */
int local_file_list(sbx_sandbox *sb, sbx_call *call, const char *path,
                    const struct sbx_file_list_sink *sink);
int local_file_stat(sbx_sandbox *sb, sbx_call *call, const char *path,
                    struct sbx_file_info *out);
int local_file_mkdir(sbx_sandbox *sb, sbx_call *call, const char *path,
                     unsigned mode, uint32_t flags);
int local_file_remove(sbx_sandbox *sb, sbx_call *call, const char *path,
                      uint32_t flags);
int local_file_rename(sbx_sandbox *sb, sbx_call *call, const char *from,
                      const char *to, uint32_t flags);

/*
 * The sandbox's state directory (state.c): <root>/<hash>.state, mode 0700,
 * beside the workspace and outside it (a command's file API cannot reach
 * it; a command itself can, local is no boundary). It holds the declared
 * ports and the process supervisor's lock, pid file and socket.
 */
#define LOCAL_STATE_SUFFIX ".state"
/* Open (creating it when `create`) the state directory of `hash` under
 * rootfd: an O_PATH fd, or -errno (-ENOENT when absent and !create). */
int local_state_open(int rootfd, const char *hash, int create);
/* Open the state directory of a handle; -errno. */
int local_state_open_sb(sbx_sandbox *sb, int create);
/* Record the ports of create args (when they carry any) in the state
 * directory and in sb; and load them back into sb (attach). */
int local_ports_record(sbx_sandbox *sb, sbx_call *call,
                       const struct sbx_create_args *args);
int local_ports_load(sbx_sandbox *sb, sbx_call *call);
/*
 * The process supervisor of a sandbox (supervisor.c; the program is
 * sup_main.c), with its files in the state directory.
 */
#define LOCAL_SUP_NAME "sbx-local-supervisor"
#define LOCAL_SUP_LOCK "supervisor.lock"
#define LOCAL_SUP_PID "supervisor.pid"
#define LOCAL_SUP_SOCK "supervisor.sock"
/* Defaults of the process_buffer and supervisor_idle_ms keys. */
#define LOCAL_SUP_IDLE_MS_DEFAULT (10 * 60 * 1000)
#define LOCAL_SUP_TIMEOUT_MS_DEFAULT 30000
/* The program next to local.so: a malloc'd path in *out; 0 or -1. */
int local_sup_default_path(char **out);
/* A connection to the sandbox's supervisor, authenticated (its socket in
 * the state directory, its pid the pid file's), starting one when none
 * runs and `start` is set. The fd, or -1 with the error set in *rc:
 * SBX_E_NOT_FOUND when none runs and !start. */
int local_sup_connect(sbx_sandbox *sb, sbx_call *call, int start, int *rc);
/* Stop the supervisor of the sandbox `hash` under rootfd, if one runs:
 * it kills every process it holds; returns once it has exited. */
int local_sup_stop(struct local_state *st, sbx_call *call, int rootfd, const char *hash);

/* The process ops (procs.c), and the handle's part of them. */
int local_procs_init(sbx_sandbox *sb);
void local_procs_free(sbx_sandbox *sb);
int local_proc_start(sbx_sandbox *sb, sbx_call *call, const struct sbx_proc_spec *spec,
                     char id[SBX_PROC_ID_MAX]);
int local_proc_write(sbx_sandbox *sb, sbx_call *call, const char *id, const void *data,
                     size_t len, uint32_t flags);
int local_proc_read(sbx_sandbox *sb, sbx_call *call, const char *id,
                    const struct sbx_proc_read_args *args, struct sbx_proc_read_result *res);
int local_proc_signal(sbx_sandbox *sb, sbx_call *call, const char *id, int signo);
int local_proc_list(sbx_sandbox *sb, sbx_call *call, const struct sbx_proc_list_sink *sink);
int local_proc_resize(sbx_sandbox *sb, sbx_call *call, const char *id, uint16_t rows,
                      uint16_t cols);

/* port_resolve (state.c). */
int local_port_resolve(sbx_sandbox *sb, sbx_call *call, uint16_t port,
                       struct sbx_port_endpoint *out);

/*
 * local_spawn - start argv as a new process group leader (spawn.c).
 * cwd_fd is the directory the child starts in; stdio_fds are the child's
 * stdin, stdout and stderr; envp is the complete environment. argv[0] without
 * a slash is searched in the PATH of envp (or LOCAL_DEFAULT_PATH).
 * On success stores the pid and returns SBX_OK; otherwise sets the call's
 * error (SBX_E_NO_COMMAND, SBX_E_NOT_EXEC, SBX_E_IO, SBX_E_NOMEM) and
 * returns it. No child is left behind on failure.
 */
#define LOCAL_DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin"

/*
 * local_child_start - start prog (a path, no search) as described for
 * local_spawn (child.c). Returns 0 with *pid_out set, or the errno of the
 * failed step (fork, dup2, fchdir, execve...), with no child left.
 * The pid is the command's keeper (child.c), the leader of its process
 * group, which exits the way the command did once nothing of its tree is
 * left. *ctl_out is the write end of the keeper's control pipe: writing a
 * byte to it, or closing it, makes the keeper kill the whole tree now.
 */
int local_child_start(const char *prog, char *const *argv, char *const *envp,
                      int cwd_fd, const int stdio_fds[3], pid_t *pid_out,
                      int *ctl_out);
int local_spawn(const struct sbx_host *host, sbx_call *call,
                const char *const *argv, const char *const *envp, int cwd_fd,
                const int stdio_fds[3], int *pid_out, int *ctl_out);

/*
 * Commands running in this process, per workspace directory (exec.c), so
 * that destroy can kill them: local_running_kill asks the keeper of every
 * command running in the workspace (dev, ino) to kill its tree.
 */
void local_running_kill(dev_t dev, ino_t ino);

#endif /* SBX_LOCAL_H */
