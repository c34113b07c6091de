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

/* One getopt pass over argv[0..argc) (argv[0] is skipped as a name). */
static int parse_pass(int argc, char **argv, const char *shortopts,
                      const struct option *longopts, cli_option_fn fn, void *ud)
{
    int c;
    optind = 0; /* full re-initialization */
    opterr = 0;
    while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
        int status = fn(ud, c, optarg, argv);
        if (status != CLI_EXIT_OK)
            return status;
    }
    return CLI_EXIT_OK;
}

int cli_session_parse(const char *cmd, int argc, char **argv, const char *shortopts,
                      const struct option *longopts, cli_option_fn fn, void *ud,
                      const char **key, int *rest)
{
    int status = parse_pass(argc, argv, shortopts, longopts, fn, ud);
    if (status != CLI_EXIT_OK)
        return status;
    int k = optind;
    if (k >= argc)
        return cli_usage_error(cmd, CLI_EXIT_SBX, "missing SESSION");
    const char *s = argv[k];
    if (s[0] == '\0')
        return cli_usage_error(cmd, CLI_EXIT_SBX, "the session key is empty");
    if (strlen(s) > 1024)
        return cli_usage_error(cmd, CLI_EXIT_SBX,
                               "the session key is longer than 1024 bytes");
    /* Options after SESSION: parse argv[k..] with SESSION as its name. */
    status = parse_pass(argc - k, argv + k, shortopts, longopts, fn, ud);
    if (status != CLI_EXIT_OK)
        return status;
    *key = s;
    *rest = k + optind;
    return CLI_EXIT_OK;
}

int cli_session_failed(int rc, const sbx_error *err)
{
    if (rc == SBX_E_CANCELLED && cli_caught_signal())
        return CLI_EXIT_SIGNAL + cli_caught_signal();
    cli_error("%s", err->message[0] ? err->message : sbx_strerror((sbx_status)rc));
    return CLI_EXIT_SBX;
}
