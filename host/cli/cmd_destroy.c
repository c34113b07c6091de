/*
 * cmd_destroy.c - `sbx destroy SESSION`: delete a session and its sandbox.
 */
#include "cli.h"

struct destroy_args {
    struct cli_globals *globals;
};

static void usage(FILE *f)
{
    fputs("Usage: sbx destroy [OPTIONS] SESSION\n"
          "\n"
          "Delete session SESSION: fence it (no new commands are admitted),\n"
          "destroy its sandbox (transient failures are retried), then forget\n"
          "it. An interrupted deletion is finished by 'sbx reconcile'.\n"
          "\n"
          "Options:\n"
          "  -c, --config FILE  read this configuration file\n"
          "  -h, --help         show this help\n"
          "\n"
          "Exit status: 0 on success, 125 when sbx failed (including a session\n"
          "that does not exist).\n", f);
}

static int on_option(void *ud, int c, const char *arg, char **argv)
{
    struct destroy_args *a = ud;
    switch (c) {
    case 'c':
        a->globals->config_path = arg;
        return CLI_EXIT_OK;
    case 'h':
        usage(stdout);
        return CLI_HELP_SHOWN;
    default:
        return cli_option_error("destroy", CLI_EXIT_SBX, c, argv);
    }
}

int cmd_destroy(const struct cli_globals *g, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"config", required_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct cli_globals globals = *g;
    struct destroy_args a = {&globals};
    const char *key = NULL;
    int rest = 0;
    int status = cli_session_parse("destroy", argc, argv, "+:c:h", longopts,
                                   on_option, &a, &key, &rest);
    if (status == CLI_HELP_SHOWN)
        return CLI_EXIT_OK;
    if (status != CLI_EXIT_OK)
        return status;
    if (rest < argc)
        return cli_usage_error("destroy", CLI_EXIT_SBX, "unexpected argument '%s'",
                               argv[rest]);
    sbx_ctx *ctx;
    sbx_sessions *m;
    if (cli_sessions_open(&globals, NULL, &ctx, &m) != SBX_OK)
        return CLI_EXIT_SBX;
    sbx_error err;
    int rc = sbx_session_delete(m, key, NULL, &err);
    status = rc == SBX_OK ? CLI_EXIT_OK : cli_session_failed(rc, &err);
    cli_sessions_close(ctx, m);
    return status;
}
