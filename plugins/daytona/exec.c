/*
 * exec.c - commands through the toolbox's process sessions.
 *
 * The plain POST /process/execute mixes stdout and stderr into one string
 * and cannot be cancelled, so every command gets a session of its own:
 *
 *   POST   /process/session {sessionId}            a fresh shell
 *   POST   /process/session/{sid}/exec             runs the command, answers
 *          {command, runAsync:false}               {cmdId, exitCode} at its end
 *   DELETE /process/session/{sid}                  kills what is left
 *   GET    /files/download?path=<dir>/out, .../err the two streams, streamed
 *   DELETE /files?path=<dir>&recursive=true
 *
 * The command runs under a small POSIX sh wrapper that sends its stdout
 * and stderr to two files of a per-command directory, so both streams stay
 * apart and byte-exact (the session's JSON answers carry text only) and
 * no output is ever held whole in memory. A timeout or a cancellation
 * deletes the session, which kills its whole process group. What left
 * the group (setsid, double forks) the session does not know: the command
 * line sets SBX_EXEC_TAG=<the command's random hex> for the wrapper and
 * everything below it, and once the session is gone exec kills whatever
 * still has it (exec_tree.h).
 *
 * stdin is fed while the command runs as files of the same directory
 * (exec_stdin.c), which the wrapper pipes into the command through a FIFO
 * as they appear.
 *
 * Exit status: the session reports the shell's $?, so a death by signal N
 * arrives as 128+N and is mapped back (exit statuses 129..192 are
 * therefore read as deaths by signal). See daytona.h.
 */
#include "daytona.h"

#include "exec_tree.h"
#include "helper_exec.h"
#include "hex.h"
#include "utf8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* $1 dir, $2 cwd, $3 stdin mode (0: none, 1: fed), then the command. */
static const char WRAP_SH[] =
    "d=$1; m=$3; mkdir -p \"$d\" || exit 125; "
    "cd \"$2\" || { echo \"cwd $2 does not exist\" >&2; exit 125; }; shift 3; "
    "if [ \"$m\" = 1 ]; then "
    "mkfifo \"$d/fifo\" || exit 125; "
    "( i=0; while :; do if [ -e \"$d/in.$i\" ]; then cat \"$d/in.$i\" || exit 0; "
    "rm -f \"$d/in.$i\"; i=$((i+1)); elif [ -e \"$d/eof\" ]; then "
    "[ -e \"$d/in.$i\" ] || exit 0; else sleep 0.01; fi; done ) >\"$d/fifo\" 2>/dev/null & "
    "r=$!; \"$@\" <\"$d/fifo\" >\"$d/out\" 2>\"$d/err\"; c=$?; kill $r 2>/dev/null; exit $c; "
    "fi; "
    "exec \"$@\" </dev/null >\"$d/out\" 2>\"$d/err\"";

/* ---- output --------------------------------------------------------- */

struct counted {
    const struct sbx_sink *sink;
    uint64_t *count;
    int status;
};

static int counted_write(void *ctx, const void *buf, size_t len)
{
    struct counted *c = ctx;
    *c->count += len;
    if (c->sink && c->sink->write && !c->status) {
        int s = c->sink->write(c->sink->ctx, buf, len);
        if (s)
            c->status = s;
        return s;
    }
    return 0;
}

/* Stream one output file into a sink; a missing file is empty. */
static int deliver(sbx_sandbox *sb, sbx_call *call, const char *path,
                   const struct sbx_sink *sink, uint64_t *count)
{
    struct counted c = {sink, count, 0};
    struct sbx_sink s = SBX_SINK_INIT(&c, counted_write);
    sbxp_http_error err;
    int rc = daytona_tb_download(sb, call, path, &s, &err);
    if (rc == SBX_OK || (rc == SBX_E_NOT_FOUND && err.http_status == 404))
        return SBX_OK;
    if (c.status)
        return c.status; /* the sink set the call's error */
    return daytona_tb_report(sb, call, &err, "exec: reading the command's output");
}

/* ---- one command ------------------------------------------------------ */

static char *command_line(const struct sbx_exec_args *args, const char *dir, const char *cwd,
                          const char *token)
{
    char *b = NULL;
    size_t len = 0, cap = 0;
    const char *mode = args->in ? "1" : "0";
    char assign[64];
    snprintf(assign, sizeof assign, SBXP_EXEC_TAG_VAR "=%s", token);
    /* an assignment word before the command: in the wrapper's environment */
    if (!(b = malloc(cap = 256)))
        return NULL;
    len = (size_t)snprintf(b, cap, "%s", assign);
    if (daytona_sh_quote(&b, &len, &cap, "sh") || daytona_sh_quote(&b, &len, &cap, "-c") ||
        daytona_sh_quote(&b, &len, &cap, WRAP_SH) || daytona_sh_quote(&b, &len, &cap, "sbx") ||
        daytona_sh_quote(&b, &len, &cap, dir) || daytona_sh_quote(&b, &len, &cap, cwd) ||
        daytona_sh_quote(&b, &len, &cap, mode))
        goto fail;
    if (args->env) {
        if (daytona_sh_quote(&b, &len, &cap, "env") || daytona_sh_quote(&b, &len, &cap, "--"))
            goto fail;
        for (size_t i = 0; args->env[i]; i++)
            if (strchr(args->env[i], '=') && daytona_sh_quote(&b, &len, &cap, args->env[i]))
                goto fail;
    }
    for (size_t i = 0; args->argv[i]; i++)
        if (daytona_sh_quote(&b, &len, &cap, args->argv[i]))
            goto fail;
    return b;
fail:
    free(b);
    return NULL;
}

/* Commands travel as JSON text, which cannot carry bytes that are not
 * UTF-8 (the service would replace them): refuse those up front. */
int daytona_exec_check_text(struct daytona_state *st, sbx_call *call, const char *cwd,
                            const char *const *argv, const char *const *env)
{
    if (cwd && !sbxs_utf8_valid(cwd, strlen(cwd)))
        return daytona_error(st, call, SBX_E_INVALID,
                             DT ": exec: the working directory is not valid UTF-8 (the toolbox "
                           "takes commands as JSON text)");
    for (size_t i = 0; argv[i]; i++)
        if (!sbxs_utf8_valid(argv[i], strlen(argv[i])))
            return daytona_error(st, call, SBX_E_INVALID,
                                 DT ": exec: argument %zu is not valid UTF-8 (the toolbox takes "
                               "commands as JSON text)",
                            i);
    for (size_t i = 0; env && env[i]; i++)
        if (!sbxs_utf8_valid(env[i], strlen(env[i])))
            return daytona_error(st, call, SBX_E_INVALID,
                                 DT ": exec: environment entry %zu is not valid UTF-8 (the toolbox "
                               "takes commands as JSON text)",
                            i);
    return SBX_OK;
}

static int run_command(sbx_sandbox *sb, sbx_call *call, const struct sbx_exec_args *args,
                       const char *cwd, struct sbx_exec_result *res)
{
    struct daytona_state *st = sb->st;
    char hex[25], sid[40], dir[64];
    int rc = daytona_exec_check_text(st, call, cwd, args->argv, args->env);
    if (rc != SBX_OK)
        return rc;
    sbxs_random_hex(hex, 12);
    snprintf(sid, sizeof sid, "sbx-%s", hex);
    snprintf(dir, sizeof dir, "/tmp/.sbx-exec-%s", hex);
    char *cmd = command_line(args, dir, cwd, hex);
    if (!cmd)
        return daytona_error(st, call, SBX_E_NOMEM, "out of memory");

    sbxp_http_error err;
    rc = daytona_tb_session_create(sb, call, sid, args->argv[0]);
    if (rc != SBX_OK) {
        free(cmd);
        return rc;
    }
    struct daytona_feed *feed = NULL;
    if (args->in && (rc = daytona_feed_start(sb, call, args->in, dir, &feed)) != SBX_OK)
        goto out;

    json_object *body = json_object_new_object();
    json_object_object_add(body, "command", json_object_new_string(cmd));
    json_object_object_add(body, "runAsync", json_object_new_boolean(0));
    char path[128];
    snprintf(path, sizeof path, "/process/session/%s/exec", sid);
    json_object *doc = NULL;
    int xrc = daytona_tb_json(sb, call, "POST", path, body, &doc, 0,
                              args->timeout_ms > 0 ? args->timeout_ms : 0, &err);
    json_object_put(body);
    int timed_out = 0, code = -1;
    if (xrc == SBX_OK) {
        json_object *ec = NULL;
        if (!doc || !json_object_object_get_ex(doc, "exitCode", &ec) ||
            !json_object_is_type(ec, json_type_int))
            rc = daytona_error(st, call, SBX_E_PROTOCOL,
                               DT ": exec: the session answered without an exit code");
        else
            code = json_object_get_int(ec);
    } else if (xrc == SBX_E_TIMEOUT && args->timeout_ms > 0 && err.http_status == 0) {
        timed_out = 1;
    } else if (xrc == SBX_E_CANCELLED) {
        rc = daytona_error(st, call, SBX_E_CANCELLED, DT ": exec cancelled");
    } else {
        rc = daytona_tb_report(sb, call, &err, "exec %s", args->argv[0]);
    }
    json_object_put(doc);

    /* Feeding ends with the command, whether or not the source did. */
    int source_failed = daytona_feed_stop(feed);
    feed = NULL;
    daytona_tb_session_delete(sb, sid);
    sid[0] = '\0';
    if (rc == SBX_OK && source_failed)
        rc = SBX_E_IO; /* the source has set the call's error */
    if (rc == SBX_OK) {
        res->timed_out = timed_out;
        if (timed_out) {
            res->exit_code = -1;
            res->term_signal = 9;
        } else if (code > 128 && code <= 128 + 64) {
            res->exit_code = -1;
            res->term_signal = code - 128;
        } else {
            res->exit_code = code;
            res->term_signal = 0;
        }
        char p[96];
        snprintf(p, sizeof p, "%s/out", dir);
        rc = deliver(sb, call, p, args->out, &res->out_bytes);
        if (rc == SBX_OK) {
            snprintf(p, sizeof p, "%s/err", dir);
            rc = deliver(sb, call, p, args->err, &res->err_bytes);
        }
    }
out:
    daytona_feed_stop(feed);
    /* The session's end kills whatever the command left behind, and the
     * command itself after a timeout or cancellation. */
    if (sid[0])
        daytona_tb_session_delete(sb, sid);
    const char *kill_argv[] = {"sh", "-c", sbxp_exec_tree_kill_sh, "sh", hex, NULL};
    int kcode = 0;
    if (daytona_exec_small(sb, NULL, "/", kill_argv, 10000, &kcode, NULL, 0, NULL, 0) != SBX_OK ||
        kcode != 0)
        st->host->log(st->host, SBX_LOG_WARN, DT ": killing what a command left in %s failed",
                      sb->id);
    daytona_tb_remove(sb, NULL, dir, 1, &err);
    free(cmd);
    return rc;
}

int daytona_exec(sbx_sandbox *sb, sbx_call *call, const struct sbx_exec_args *args,
                 struct sbx_exec_result *res)
{
    struct daytona_state *st = sb->st;
    if (!args->argv || !args->argv[0] || !args->argv[0][0])
        return daytona_error(st, call, SBX_E_INVALID, DT ": exec: empty argv");
    char *cwd = NULL;
    if (args->cwd && *args->cwd) {
        int type;
        int rc = daytona_resolve(sb, call, "exec cwd", args->cwd, 1, &cwd, &type);
        if (rc != SBX_OK)
            return rc;
        if (type != DT_FT_DIR) {
            free(cwd);
            return daytona_error(st, call, SBX_E_INVALID, DT ": exec: cwd %s is not a directory",
                                 args->cwd);
        }
    }
    uint32_t size = res->size;
    memset(res, 0, sizeof *res);
    res->size = size;
    int rc = run_command(sb, call, args, cwd ? cwd : st->cfg.workspace, res);
    free(cwd);
    return rc;
}

int daytona_exec_helper(sbx_sandbox *sb, sbx_call *call, const char *cwd, const char *const *argv,
                        const struct sbx_sink *out, int64_t timeout_ms, int *exit_code, char *msg,
                        size_t cap)
{
    if (!out) /* nothing to stream: the light way */
        return daytona_exec_small(sb, call, cwd ? cwd : sb->st->cfg.workspace, argv, timeout_ms,
                                  exit_code, NULL, 0, msg, cap);
    struct sbxp_helper_exec h;
    sbxp_helper_exec_init(&h, argv, out, timeout_ms, msg, cap);
    int rc = run_command(sb, call, &h.args, cwd ? cwd : sb->st->cfg.workspace, &h.res);
    *exit_code = sbxp_helper_exec_code(&h);
    return rc;
}
