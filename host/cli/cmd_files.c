/*
 * cmd_files.c - `sbx read SESSION PATH` (the file to stdout) and
 * `sbx write SESSION PATH` (stdin to the file), streamed in chunks.
 *
 * `write` handles SIGINT, SIGTERM and SIGHUP as `exec` does (cli_exec.c):
 * the signal cancels the call and wakes a read blocked on stdin, the
 * provider drops the partial file, and sbx exits 128+signal.
 */
#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct file_args {
    const char *cmd;
    unsigned mode;
};

static void read_usage(FILE *f)
{
    fputs("Usage: sbx read [OPTIONS] SESSION PATH\n"
          "\n"
          "Copy the workspace-relative file PATH of session SESSION's sandbox to\n"
          "standard output. The session must have a sandbox already.\n"
          "\n"
          "Options:\n"
          "  -c, --config FILE  read this configuration file\n"
          "  -h, --help         show this help\n"
          "\n"
          "Exit status: 0 on success, 125 when sbx failed (no such session or\n"
          "file, a path leaving the workspace, a lost sandbox).\n", f);
}

static void write_usage(FILE *f)
{
    fputs("Usage: sbx write [OPTIONS] SESSION PATH\n"
          "\n"
          "Write standard input to the workspace-relative file PATH of session\n"
          "SESSION's sandbox (parent directories are created; the file appears\n"
          "complete or not at all). A key without a sandbox gets one, as with\n"
          "'sbx exec'.\n"
          "\n"
          "Options:\n"
          "  -m, --mode MODE    permission bits in octal (default 0644)\n"
          "  -c, --config FILE  read this configuration file\n"
          "  -h, --help         show this help\n"
          "\n"
          "Exit status: 0 on success, 125 when sbx failed, 128+N when signal N\n"
          "(SIGINT, SIGTERM, SIGHUP) interrupted it: nothing is published then.\n", f);
}

static int on_option(void *ud, int c, const char *arg)
{
    struct file_args *a = ud;
    if (c != 'm')
        return CLI_OPTION_UNKNOWN;
    char *end;
    errno = 0;
    unsigned long v = strtoul(arg, &end, 8);
    if (!*arg || *end || errno || v > 0777)
        return cli_usage_error(a->cmd, CLI_EXIT_SBX,
                               "invalid --mode '%s' (expected permission bits in "
                               "octal, 0001 to 0777, such as 0644; setuid, setgid "
                               "and sticky bits are not allowed)", arg);
    /* Providers read mode 0 as "the default, 0644": refuse it here rather
     * than write a file with other bits than the ones asked for. */
    if (v == 0)
        return cli_usage_error(a->cmd, CLI_EXIT_SBX,
                               "invalid --mode '%s': a file without any permission "
                               "bit cannot be written (give the bits, e.g. 0600, "
                               "or leave --mode out for 0644)", arg);
    a->mode = (unsigned)v;
    return CLI_EXIT_OK;
}

static int read_file(const struct cli_globals *g, const char *key, const char *path)
{
    sbx_ctx *ctx;
    sbx_sessions *m;
    if (cli_sessions_open(g, NULL, &ctx, &m) != SBX_OK)
        return CLI_EXIT_SBX;
    sbx_handle *h = NULL;
    sbx_error err;
    int rc = sbx_session_attach(m, key, NULL, &h, &err);
    if (rc == SBX_OK) {
        int fd = 1;
        struct sbx_sink sink = sbx_fd_sink(&fd);
        rc = sbx_read(h, path, &sink, NULL, &err);
    }
    int status = rc == SBX_OK ? CLI_EXIT_OK : cli_session_failed(rc, &err);
    sbx_release(h);
    cli_sessions_close(ctx, m);
    return status;
}

static int write_file(const struct cli_globals *g, const char *key, const char *path,
                      unsigned mode)
{
    sbx_ctx *ctx;
    sbx_sessions *m;
    if (cli_sessions_open(g, NULL, &ctx, &m) != SBX_OK)
        return cli_failure_status();
    sbx_handle *h = NULL;
    sbx_error err;
    int rc = sbx_session_acquire(m, key, NULL, cli_run_cancel(), &h, NULL, &err);
    if (rc == SBX_OK) {
        struct cli_input in = {0};
        struct sbx_source src = cli_input_source(&in);
        rc = sbx_write(h, path, &src, mode, cli_run_cancel(), &err);
    }
    int status;
    if (rc == SBX_OK)
        status = CLI_EXIT_OK; /* published whole, even if a signal came late */
    else if (cli_caught_signal())
        status = cli_failure_status(); /* interrupted: the reason is known */
    else
        status = cli_session_failed(rc, &err);
    sbx_release(h);
    cli_sessions_close(ctx, m);
    return status;
}

static int file_command(const struct cli_globals *g, int argc, char **argv,
                        bool writing)
{
    static const struct option read_opts[] = {
        CLI_COMMON_LONGOPTS,
    };
    static const struct option write_opts[] = {
        {"mode", required_argument, NULL, 'm'},
        CLI_COMMON_LONGOPTS,
    };
    struct cli_globals globals = *g;
    struct file_args a = {writing ? "write" : "read", 0};
    const struct cli_command cmd = {a.cmd, CLI_EXIT_SBX,
                                    writing ? write_usage : read_usage,
                                    writing ? "+:m:c:h" : "+:c:h",
                                    writing ? write_opts : read_opts,
                                    on_option, &a, &globals};
    const char *key = NULL;
    int rest = 0;
    int status = cli_session_parse(&cmd, argc, argv, &key, &rest);
    if (status == CLI_EXIT_OK && rest >= argc)
        status = cli_usage_error(a.cmd, CLI_EXIT_SBX, "missing PATH");
    if (status == CLI_EXIT_OK)
        status = cli_no_more_arguments(&cmd, argc, argv, rest + 1);
    if (status != CLI_EXIT_OK)
        return status == CLI_HELP_SHOWN ? CLI_EXIT_OK : status;
    const char *path = argv[rest];

    if (writing && cli_interrupt_setup() != SBX_OK)
        return CLI_EXIT_SBX;
    status = writing ? write_file(&globals, key, path, a.mode)
                     : read_file(&globals, key, path);
    if (writing)
        cli_interrupt_teardown();
    return status;
}

int cmd_read(const struct cli_globals *g, int argc, char **argv)
{
    return file_command(g, argc, argv, false);
}

int cmd_write(const struct cli_globals *g, int argc, char **argv)
{
    return file_command(g, argc, argv, true);
}
