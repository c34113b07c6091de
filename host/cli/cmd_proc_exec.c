/*
 * cmd_proc_exec.c - the modes of `sbx exec` that run the command as a
 * process of the sandbox (SBX_CAP_PROCESSES) instead of one exec call:
 *
 *   -t           on a pseudo-terminal (SBX_CAP_PTY), interactively: our
 *                terminal in raw mode when stdin is one and -i is given
 *   --detach     start it and print its id
 *   --yield MS   start it, return after MS with the output so far, the id
 *                and the cursors (sbx_proc_exec_yield)
 */
#include "cmd_proc.h"

#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

static void fill_spec(struct sbx_proc_spec *spec, const struct cli_exec_options *eo,
                      const struct cli_proc_exec_options *po, char *const *cmd)
{
    memset(spec, 0, sizeof *spec);
    spec->size = sizeof *spec;
    spec->argv = (const char *const *)cmd;
    spec->env = eo->nenv ? eo->env : NULL;
    spec->cwd = eo->cwd;
    spec->timeout_ms = eo->timeout_ms;
    if (po->tty)
        spec->flags = SBX_PROC_PTY;
}

/* The window size of our terminal into spec (a PTY starts with it, so a
 * full-screen program draws the right size from its first frame; SIGWINCH
 * sends later changes). */
static void spec_window(struct sbx_proc_spec *spec)
{
    struct winsize ws;
    if ((ioctl(0, TIOCGWINSZ, &ws) == 0 || ioctl(1, TIOCGWINSZ, &ws) == 0) &&
        ws.ws_row > 0 && ws.ws_col > 0) {
        spec->rows = ws.ws_row;
        spec->cols = ws.ws_col;
    }
}

static int start_failed(int rc, const sbx_error *err)
{
    if (rc == SBX_E_NO_COMMAND || rc == SBX_E_NOT_EXEC) {
        cli_error("%s", err->message);
        return rc == SBX_E_NO_COMMAND ? CLI_EXIT_NOT_FOUND : CLI_EXIT_NOT_EXEC;
    }
    return cli_session_failed(rc, err);
}

static int run_yield(sbx_handle *h, const struct sbx_proc_spec *spec,
                     const struct cli_proc_exec_options *po)
{
    int ofd = 1, efd = 2;
    struct cli_buffer bo = {0}, be = {0};
    struct sbx_sink out = po->json ? cli_buffer_sink(&bo) : sbx_fd_sink(&ofd);
    struct sbx_sink errs = po->json ? cli_buffer_sink(&be) : sbx_fd_sink(&efd);
    struct sbx_proc_yield_args a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.yield_ms = po->yield_ms;
    a.max_bytes = po->max_bytes;
    a.out = &out;
    a.err = &errs;
    struct sbx_proc_yield_result r;
    memset(&r, 0, sizeof r);
    r.size = sizeof r;
    sbx_error err;
    int rc = sbx_proc_exec_yield(h, spec, &a, &r, cli_run_cancel(), &err);
    int status;
    if (rc == SBX_OK) {
        status = cli_yield_report(&r, po->json, &bo, &be);
    } else {
        if (r.id[0])
            cli_error("process %s started, but reading its output failed:", r.id);
        status = start_failed(rc, &err);
    }
    free(bo.data);
    free(be.data);
    return status;
}

int cli_proc_exec(sbx_handle *h, const struct cli_exec_options *eo,
                  const struct cli_proc_exec_options *po, char *const *cmd)
{
    struct sbx_proc_spec spec;
    fill_spec(&spec, eo, po, cmd);
    if (po->tty)
        spec_window(&spec);
    if (po->yield)
        return run_yield(h, &spec, po);

    char id[SBX_PROC_ID_MAX];
    sbx_error err;
    int rc = sbx_proc_start(h, &spec, id, cli_run_cancel(), &err);
    if (rc != SBX_OK)
        return start_failed(rc, &err);
    if (po->detach) {
        if (po->json) {
            json_object *o = json_object_new_object();
            json_object_object_add(o, "id", json_object_new_string(id));
            cli_json_print(o);
        } else {
            printf("%s\n", id);
        }
        return fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_SBX;
    }
    /* -t, in the foreground. Our stdin goes to the process unless
     * --no-stdin, or it is a terminal and -i was not given (as for a plain
     * exec); a terminal with -i is put in raw mode. */
    bool tty_in = isatty(0);
    bool forward = eo->stdin_mode == CLI_STDIN_ALWAYS ||
                   (eo->stdin_mode == CLI_STDIN_AUTO && !tty_in);
    struct cli_term_options o = {
        .h = h,
        .id = id,
        .pty = true,
        .forward_stdin = forward,
        .raw = forward && tty_in,
        .close_at_eof = true,
        .hangup_on_exit = true,
    };
    return cli_term_run(&o);
}
