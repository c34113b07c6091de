/*
 * exec.c - the exec op and the helper exec that writes use.
 *
 * The exec op checks its arguments, then takes one of two paths:
 *
 *  - through the container's sbx-agent, the default (a container created
 *    with providers.docker.agent true has an agent socket): the working
 *    directory is checked lexically here and resolved by the agent beneath
 *    the workspace; exec_agent.c sends the request, streams the output and
 *    feeds stdin, and the agent enforces the timeout and kills the
 *    command's whole tree (shared/agent_proto/PROTOCOL.md);
 *  - through the Engine API, for a container without the agent: the
 *    working directory is resolved in the container like a file op's path
 *    (paths.c), and the command runs as one exec (exec_run.c): its output
 *    streamed as it arrives, stdin fed by a thread, every request under a
 *    deadline. Timeouts and cancellation kill its whole tree within
 *    kill_timeout (exec_kill.c: from the host through /proc when the
 *    daemon is local, else by a killer exec in the container), while its
 *    output keeps being drained; exec returns within that bound even when
 *    the daemon has stopped answering. A command that could not start is
 *    recognised by the daemon's record of the exec (no process), and
 *    classified by looking at the container's files (exec_probe.c), never
 *    by the text of a message: whatever a command prints is its output.
 *    A call made as a user (sbx_host.call_user) is refused: that needs
 *    the agent (users.c).
 *
 * The helper exec (docker_exec_feed) is always an Engine API exec: the
 * write path without the agent (write_stream.c) feeds its data through it.
 */
#include "exec_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_args(struct docker_state *st, sbx_call *call,
                      const struct sbx_exec_args *args)
{
    if (!args || !args->argv || !args->argv[0] || !args->argv[0][0])
        return docker_error(st, call, SBX_E_INVALID,
                            "docker: exec needs a program (argv[0])");
    if (args->timeout_ms < 0)
        return docker_error(st, call, SBX_E_INVALID,
                            "docker: exec timeout %lld ms is negative",
                            (long long)args->timeout_ms);
    for (const char *const *e = args->env; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq || eq == *e)
            return docker_error(st, call, SBX_E_INVALID,
                                "docker: environment entry \"%.60s\" is not "
                                "NAME=value",
                                *e);
        if ((size_t)(eq - *e) == strlen(DOCKER_EXEC_TAG_VAR) &&
            strncmp(*e, DOCKER_EXEC_TAG_VAR, strlen(DOCKER_EXEC_TAG_VAR)) == 0)
            return docker_error(st, call, SBX_E_INVALID,
                                "docker: %s is reserved by the provider",
                                DOCKER_EXEC_TAG_VAR);
    }
    return SBX_OK;
}

/* The absolute working directory (malloc'd) for a cwd into *out: checked
 * lexically, then resolved in the container like a file op's path, so that
 * a symlink leading out of the workspace is refused as local refuses it
 * (SBX_E_INVALID), as is a cwd that is missing or not a directory. */
static int workdir_of(sbx_sandbox *sb, sbx_call *call, const char *cwd_arg, char **out)
{
    struct docker_state *st = sb->st;
    char *cwd = NULL;
    *out = NULL;
    int rc = docker_path_check(st, call, "cwd", cwd_arg ? cwd_arg : "", 1, &cwd);
    if (rc != SBX_OK)
        return rc;
    if (!cwd[0]) {
        free(cwd);
        *out = strdup(DOCKER_WORKSPACE);
        return *out ? SBX_OK : docker_error(st, call, SBX_E_NOMEM, "out of memory");
    }
    size_t existing;
    struct docker_stat fst;
    rc = docker_resolve(sb, call, DOCKER_WORKSPACE, cwd, out, &existing, &fst);
    if (rc == SBX_OK && !fst.exists)
        rc = docker_error(st, call, SBX_E_INVALID,
                          "docker: cwd \"%.200s\" does not exist in the workspace", cwd);
    else if (rc == SBX_OK && !(fst.mode & DOCKER_MODE_DIR))
        rc = docker_error(st, call, SBX_E_INVALID,
                          "docker: cwd \"%.200s\" is not a directory", cwd);
    free(cwd);
    if (rc != SBX_OK) {
        free(*out);
        *out = NULL;
    }
    return rc;
}

/* The error of a command the daemon could not start. */
static int start_failure(sbx_sandbox *sb, sbx_call *call, const struct sbx_exec_args *args,
                         const char *workdir, const struct exec_outcome *oc)
{
    struct docker_state *st = sb->st;
    /* only when the container cannot be asked: the exit code some engine
     * versions record (127 for a missing program) */
    int fallback = oc->start_exit == 127 ? SBX_E_NO_COMMAND : SBX_E_NOT_EXEC;
    int status = docker_exec_probe_start_failure(sb, call, args->argv[0], args->env, workdir,
                                          fallback);
    const char *msg = oc->start_msg[0] ? oc->start_msg : "the daemon could not start it";
    if (status == SBX_E_INVALID)
        return docker_error(st, call, SBX_E_INVALID,
                            "docker: working directory %s does not exist or is not a "
                            "directory (%s)",
                            workdir, msg);
    return docker_error(st, call, status, "docker: %s: %s%s", args->argv[0],
                        status == SBX_E_NO_COMMAND ? "command not found: "
                                                   : "cannot be executed: ",
                        msg);
}

/* The status and message of a command that ran (or was stopped). */
static int ran(sbx_sandbox *sb, sbx_call *call, const struct sbx_exec_args *args,
               const struct exec_outcome *oc)
{
    struct docker_state *st = sb->st;
    const char *prog = args->argv[0];
    char killed[512];
    if (oc->kill_failed) {
        snprintf(killed, sizeof killed, "its processes could not all be killed: %s",
                 oc->kill_msg);
        st->host->log(st->host, SBX_LOG_WARN, "docker: exec of %s in container %.12s: %s",
                      prog, sb->id, killed);
    } else {
        snprintf(killed, sizeof killed, "its processes were killed");
    }
    if (oc->cancelled)
        return docker_error(st, call, SBX_E_CANCELLED, "docker: exec of %s cancelled; %s",
                            prog, killed);
    if (oc->sink_status)
        return docker_error(st, call, oc->sink_status,
                            "docker: exec of %s stopped: an output sink refused data "
                            "(%s); %s",
                            prog, sbx_strerror((sbx_status)oc->sink_status), killed);
    if (oc->timed_out && oc->kill_failed)
        return docker_error(st, call, SBX_E_UNAVAILABLE,
                            "docker: exec of %s timed out after %lld ms and %s", prog,
                            (long long)args->timeout_ms, killed);
    if (oc->source_failed)
        return SBX_E_IO; /* the source already said why */
    return SBX_OK;
}

int docker_exec(sbx_sandbox *sb, sbx_call *call, const struct sbx_exec_args *args,
                struct sbx_exec_result *res)
{
    struct docker_state *st = sb->st;
    int rc = check_args(st, call, args);
    if (rc != SBX_OK)
        return rc;
    if (sb->agent_sock) {
        /* checked here lexically, resolved by the agent beneath the
         * workspace (openat2 RESOLVE_BENEATH) */
        char *cwd = NULL;
        rc = docker_path_check(st, call, "cwd", args->cwd ? args->cwd : "", 1, &cwd);
        if (rc == SBX_OK)
            rc = docker_agent_exec(sb, call, args, cwd, res);
        free(cwd);
        return rc;
    }
    if (docker_call_user(st, call))
        return docker_users_need_agent(sb, call, "exec as a user");
    char *workdir = NULL;
    rc = workdir_of(sb, call, args->cwd, &workdir);
    if (rc != SBX_OK)
        return rc;
    struct exec_spec spec = {
        .argv = args->argv,
        .env = args->env,
        .workdir = workdir,
        .in = args->in,
        .timeout_ms = args->timeout_ms,
        .out = args->out,
        .err = args->err,
        .stop = EXEC_STOP_KILL,
        .cancellable = 1,
    };
    struct exec_outcome oc;
    rc = docker_exec_run(sb, call, &spec, &oc);
    if (rc == SBX_OK && res) {
        res->exit_code = oc.exit_code;
        res->term_signal = oc.term_signal;
        res->timed_out = oc.timed_out;
        res->out_bytes = oc.out_bytes;
        res->err_bytes = oc.err_bytes;
    }
    if (rc == SBX_OK)
        rc = oc.start_failed ? start_failure(sb, call, args, workdir, &oc)
                             : ran(sb, call, args, &oc);
    free(workdir);
    return rc;
}

/* ---- the helper exec of writes --------------------------------------- */

static int bounded_write(void *ctx, const void *p, size_t n)
{
    struct exec_bounded *b = ctx;
    if (!b->buf || b->cap == 0)
        return 0;
    size_t room = b->cap - 1 - b->len;
    size_t take = n < room ? n : room;
    memcpy(b->buf + b->len, p, take);
    b->len += take;
    b->buf[b->len] = '\0';
    return 0;
}

struct sbx_sink docker_exec_bounded_sink(struct exec_bounded *b, char *buf, size_t cap)
{
    b->buf = buf;
    b->cap = cap;
    b->len = 0;
    if (buf && cap)
        buf[0] = '\0';
    struct sbx_sink s = SBX_SINK_INIT(b, bounded_write);
    return s;
}

int docker_exec_feed(sbx_sandbox *sb, sbx_call *call, const char *const *argv,
                     const struct sbx_source *in, int *exit_code, int *complete,
                     char *output, size_t cap)
{
    struct docker_state *st = sb->st;
    struct exec_bounded b;
    struct sbx_sink sink = docker_exec_bounded_sink(&b, output, cap);
    if (complete)
        *complete = 0;
    *exit_code = -1;
    struct exec_spec spec = {
        .argv = argv,
        .in = in,
        .out = &sink,
        .err = &sink,
        .stop = EXEC_STOP_EOF,
        .cancellable = 1,
    };
    struct exec_outcome oc;
    int rc = docker_exec_run(sb, call, &spec, &oc);
    if (rc != SBX_OK)
        return rc;
    if (complete)
        *complete = oc.input_complete;
    /* a source that gave up because the caller cancelled (an interrupted
     * read) is a cancellation, not an I/O error */
    if (oc.cancelled || (call && st->host->cancelled && st->host->cancelled(st->host, call)))
        return docker_error(st, call, SBX_E_CANCELLED, "docker: cancelled");
    if (oc.source_failed)
        return SBX_E_IO; /* the source has said why */
    if (oc.start_failed) {
        bounded_write(&b, oc.start_msg, strlen(oc.start_msg));
        *exit_code = oc.start_exit >= 0 ? oc.start_exit : 126;
        return SBX_OK;
    }
    *exit_code = oc.exit_code;
    return SBX_OK;
}
