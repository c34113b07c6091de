/* cli_session.c - what the session commands share: opening the session
 * manager, the SESSION operand, reporting failures. */
#include "cli.h"

#include <getopt.h>
#include <string.h>

int cli_sessions_open(const struct cli_globals *g, const char *provider,
                      sbx_ctx **ctx, sbx_sessions **m)
{
    *ctx = NULL;
    *m = NULL;
    int rc = cli_open(g, provider, ctx);
    if (rc != SBX_OK)
        return rc;
    struct sbx_sessions_options opts;
    memset(&opts, 0, sizeof opts);
    opts.size = sizeof opts;
    sbx_error err;
    rc = sbx_sessions_open(*ctx, &opts, m, &err);
    if (rc != SBX_OK) {
        cli_error("%s", err.message[0] ? err.message : sbx_strerror(rc));
        sbx_close(*ctx);
        *ctx = NULL;
    }
    return rc;
}

void cli_sessions_close(sbx_ctx *ctx, sbx_sessions *m)
{
    sbx_sessions_close(m);
    sbx_close(ctx);
}

int cli_session_parse(const struct cli_command *cmd, int argc, char **argv,
                      const char **key, int *rest)
{
    int status = cli_parse_options(cmd, argc, argv);
    if (status != CLI_EXIT_OK)
        return status;
    int k = optind;
    if (k >= argc)
        return cli_usage_error(cmd->name, cmd->usage_status, "missing SESSION");
    const char *s = argv[k];
    if (s[0] == '\0')
        return cli_usage_error(cmd->name, cmd->usage_status, "the session key is empty");
    if (strlen(s) > 1024)
        return cli_usage_error(cmd->name, cmd->usage_status,
                               "the session key is longer than 1024 bytes");
    /* Options after SESSION: parse argv[k..] with SESSION as its name. */
    status = cli_parse_options(cmd, argc - k, argv + k);
    if (status != CLI_EXIT_OK)
        return status;
    *key = s;
    *rest = k + optind;
    return CLI_EXIT_OK;
}

int cli_session_failed(int rc, const sbx_error *err)
{
    if (rc == SBX_E_CANCELLED && cli_caught_signal())
        return cli_failure_status();
    cli_error("%s", err->message[0] ? err->message : sbx_strerror((sbx_status)rc));
    return CLI_EXIT_SBX;
}
