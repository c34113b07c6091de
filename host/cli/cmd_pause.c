/*
 * cmd_pause.c - `sbx pause SESSION`: pause a session's sandbox in place
 * (sbx_session_pause); `sbx resume` or any later use resumes it.
 */
#include "cli.h"

static void usage(FILE *f)
{
    fputs("Usage: sbx pause [OPTIONS] SESSION\n"
          "\n"
          "Pause the sandbox of session SESSION in place (its provider must be\n"
          "able to: docker freezes its processes; see the provider's page for\n"
          "what survives) and mark the session paused in the store; prints\n"
          "'paused'. Any later use of the session from any worker (exec, read,\n"
          "write, ...) resumes it transparently; 'sbx resume SESSION' resumes\n"
          "it at once. Pausing a paused session is fine.\n"
          "\n"
          "Options:\n"
          "  -c, --config FILE  read this configuration file\n"
          "  -h, --help         show this help\n"
          "\n"
          "Exit status: 0 on success, 125 when sbx failed (no such session, a\n"
          "provider that cannot pause).\n", f);
}

int cmd_pause(const struct cli_globals *g, int argc, char **argv)
{
    static const struct option longopts[] = {CLI_COMMON_LONGOPTS};
    struct cli_globals globals = *g;
    const struct cli_command cmd = {"pause", CLI_EXIT_SBX, usage, "+:c:h", longopts,
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
    int rc = sbx_session_pause(m, key, NULL, &err);
    if (rc == SBX_OK) {
        puts("paused");
        status = CLI_EXIT_OK;
    } else {
        status = cli_session_failed(rc, &err);
    }
    cli_sessions_close(ctx, m);
    return status;
}
