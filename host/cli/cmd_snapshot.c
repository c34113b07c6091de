/*
 * cmd_snapshot.c - `sbx snapshot SESSION FILE` (the workspace as a tar
 * archive) and `sbx restore SESSION FILE` (the workspace replaced by one);
 * both streamed, both checked like exports (sbx_snapshot_save/_restore).
 */
#include "cli.h"

#include <string.h>

struct snapshot_args {
    const char *cmd;
    const char *compression;
};

static void snapshot_usage(FILE *f)
{
    fputs("Usage: sbx snapshot [OPTIONS] SESSION FILE\n"
          "\n"
          "Write the workspace of session SESSION (every entry of its root but\n"
          "skills/) into FILE as a tar archive, streamed. FILE appears complete\n"
          "or not at all. Regular files and directories only: a symlink or\n"
          "special file in the workspace is refused by name.\n"
          "\n"
          "Options:\n"
          "  -z, --gzip         compress with gzip\n"
          "      --zstd         compress with zstd\n"
          "  -c, --config FILE  read this configuration file\n"
          "  -h, --help         show this help\n"
          "\n"
          "Exit status: 0 on success, 125 when sbx failed, 128+N when signal N\n"
          "interrupted it (no FILE is written then).\n", f);
}

static void restore_usage(FILE *f)
{
    fputs("Usage: sbx restore [OPTIONS] SESSION FILE\n"
          "\n"
          "Replace the workspace of session SESSION (all but skills/) with the\n"
          "snapshot FILE (tar, tar.gz or tar.zst). Every entry is checked before\n"
          "anything changes.\n"
          "\n"
          "Options:\n"
          "  -c, --config FILE  read this configuration file\n"
          "  -h, --help         show this help\n"
          "\n"
          "Exit status: 0 on success, 125 when sbx failed.\n", f);
}

enum { OPT_ZSTD = 256 };

static int on_option(void *ud, int c, const char *arg)
{
    (void)arg;
    struct snapshot_args *a = ud;
    if (c == 'z')
        a->compression = "gzip";
    else if (c == OPT_ZSTD)
        a->compression = "zstd";
    else
        return CLI_OPTION_UNKNOWN;
    return CLI_EXIT_OK;
}

static int run(const struct cli_globals *g, const char *key, const char *file,
               const struct snapshot_args *a)
{
    bool saving = !strcmp(a->cmd, "snapshot");
    sbx_ctx *ctx;
    sbx_sessions *m;
    if (cli_sessions_open(g, NULL, &ctx, &m) != SBX_OK)
        return cli_failure_status();
    sbx_handle *h = NULL;
    sbx_error err;
    int rc = sbx_session_attach(m, key, cli_run_cancel(), &h, &err);
    if (rc == SBX_OK)
        rc = saving ? sbx_snapshot_save(h, file, a->compression, cli_run_cancel(), &err)
                    : sbx_snapshot_restore(h, file, cli_run_cancel(), &err);
    int status = rc == SBX_OK ? CLI_EXIT_OK
                 : cli_caught_signal() ? cli_failure_status()
                                       : cli_session_failed(rc, &err);
    sbx_release(h);
    cli_sessions_close(ctx, m);
    return status;
}

static int snapshot_command(const struct cli_globals *g, int argc, char **argv,
                            const char *name)
{
    static const struct option snap_opts[] = {
        {"gzip", no_argument, NULL, 'z'},
        {"zstd", no_argument, NULL, OPT_ZSTD},
        CLI_COMMON_LONGOPTS,
    };
    static const struct option restore_opts[] = {
        CLI_COMMON_LONGOPTS,
    };
    bool saving = !strcmp(name, "snapshot");
    struct cli_globals globals = *g;
    struct snapshot_args a = {name, NULL};
    const struct cli_command cmd = {name, CLI_EXIT_SBX,
                                    saving ? snapshot_usage : restore_usage,
                                    saving ? "+:zc:h" : "+:c:h",
                                    saving ? snap_opts : restore_opts,
                                    on_option, &a, &globals};
    const char *key = NULL;
    int rest = 0;
    int status = cli_session_parse(&cmd, argc, argv, &key, &rest);
    if (status == CLI_EXIT_OK && rest >= argc)
        status = cli_usage_error(name, CLI_EXIT_SBX, "missing FILE");
    /* Options may follow FILE too: parse argv[rest..] with FILE as name. */
    const char *file = status == CLI_EXIT_OK ? argv[rest] : NULL;
    if (status == CLI_EXIT_OK)
        status = cli_parse_options(&cmd, argc - rest, argv + rest);
    if (status == CLI_EXIT_OK)
        status = cli_no_more_arguments(&cmd, argc - rest, argv + rest, optind);
    if (status != CLI_EXIT_OK)
        return status == CLI_HELP_SHOWN ? CLI_EXIT_OK : status;
    if (cli_interrupt_setup() != SBX_OK)
        return CLI_EXIT_SBX;
    status = run(&globals, key, file, &a);
    cli_interrupt_teardown();
    return status;
}

int cmd_snapshot(const struct cli_globals *g, int argc, char **argv)
{
    return snapshot_command(g, argc, argv, "snapshot");
}

int cmd_restore(const struct cli_globals *g, int argc, char **argv)
{
    return snapshot_command(g, argc, argv, "restore");
}
