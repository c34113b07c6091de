/*
 * cmd_destroy.c - `sbx destroy SESSION`: delete a session and its sandbox.
 */
#include "cli.h"

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

int cmd_destroy(const struct cli_globals *g, int argc, char **argv)
{
    static const struct option longopts[] = {
        CLI_COMMON_LONGOPTS,
    };
    struct cli_globals globals = *g;
    const struct cli_command cmd = {"destroy", CLI_EXIT_SBX, usage, "+:c:h", longopts,
                                    NULL, NULL, &globals};
    const char *key = NULL;
    int rest = 0;
    int status = cli_session_parse(&cmd, argc, argv, &key, &rest);
    if (status == CLI_EXIT_OK)
        status = cli_no_more_arguments(&cmd, argc, argv, rest);
    if (status != CLI_EXIT_OK)
        return status == CLI_HELP_SHOWN ? CLI_EXIT_OK : status;
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
