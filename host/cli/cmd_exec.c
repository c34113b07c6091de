/*
 * cmd_exec.c - `sbx exec SESSION -- CMD...`: run a command in the sandbox of
 * a session key, creating it when the key has none yet (as the first tool
 * call of a session does). A key whose sandbox is lost fails: nothing is
 * recreated.
 */
#include "cli.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fputs("Usage: sbx exec [OPTIONS] SESSION [--] COMMAND [ARGS...]\n"
          "\n"
          "Run COMMAND in the workspace of session key SESSION with output\n"
          "streamed live. A key without a sandbox gets one (default spec); a\n"
          "key whose sandbox is gone is an error and nothing is recreated. No\n"
          "shell is involved: use 'sh -c' for one.\n"
          "\n"
          "Options (before or after SESSION):\n"
          "  -p, --provider NAME  provider of a new sandbox (else $SBX_PROVIDER,\n"
          "                       else default_provider, else local)\n"
          "  -m, --manifest FILE  the session's workspace manifest: materialized\n"
          "                       when the sandbox is new, its environment set\n"
          "                       for COMMAND; a session made with another spec\n"
          "                       is an error\n"
          CLI_EXEC_OPTIONS_HELP
          "  -c, --config FILE    read this configuration file\n"
          "  -h, --help           show this help\n"
          "\n"
          CLI_EXEC_EXIT_HELP, f);
}

static int exec_in_session(const struct cli_globals *g, const char *provider,
                           const char *manifest_path, const char *key,
                           const struct cli_exec_options *eo, char *const *cmd)
{
    sbx_ctx *ctx;
    sbx_sessions *m;
    if (cli_sessions_open(g, provider, &ctx, &m) != SBX_OK)
        return cli_failure_status();
    sbx_manifest *mf = NULL;
    if (cli_manifest_load(ctx, manifest_path, &mf) != SBX_OK) {
        cli_sessions_close(ctx, m);
        return cli_failure_status();
    }
    struct sbx_session_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.size = sizeof spec;
    spec.provider = provider;
    spec.manifest = mf;
    struct cli_exec_options with_env = *eo;
    const char **env = NULL;
    if (mf) {
        env = cli_manifest_env(mf, eo);
        if (!env) {
            cli_error("out of memory");
            sbx_manifest_free(mf);
            cli_sessions_close(ctx, m);
            return CLI_EXIT_SBX;
        }
        with_env.env = env;
        with_env.nenv = 0;
        while (env[with_env.nenv])
            with_env.nenv++;
    }
    sbx_handle *h = NULL;
    sbx_error err;
    struct sbx_acquire_info info;
    memset(&info, 0, sizeof info);
    info.size = sizeof info;
    int status = CLI_EXIT_OK;
    /* Without a manifest no spec is checked for a bound key: exec uses
     * whatever was provisioned. */
    int rc = sbx_session_acquire(m, key, provider || mf ? &spec : NULL, cli_run_cancel(),
                                 &h, &info, &err);
    if (rc != SBX_OK)
        status = cli_session_failed(rc, &err);
    else if (mf && info.spec_changed) {
        cli_error("session exists with another spec than this manifest's (recorded "
                  "%.12s): nothing was run",
                  info.recorded_spec_hash[0] ? info.recorded_spec_hash : "none");
        status = CLI_EXIT_SBX;
    } else
        status = cli_exec_streamed(h, &with_env, cmd);
    sbx_release(h);
    free(env);
    sbx_manifest_free(mf);
    cli_sessions_close(ctx, m);
    return status;
}

struct exec_cli_args {
    struct cli_exec_options *eo;
    const char *provider;
    const char *manifest;
};

static int on_option(void *ud, int c, const char *arg)
{
    struct exec_cli_args *a = ud;
    if (c == 'm') {
        a->manifest = arg;
        return CLI_EXIT_OK;
    }
    if (c != 'p')
        return cli_exec_option("exec", c, arg, a->eo);
    a->provider = arg;
    return CLI_EXIT_OK;
}

int cmd_exec(const struct cli_globals *g, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"provider", required_argument, NULL, 'p'},
        {"manifest", required_argument, NULL, 'm'},
        CLI_EXEC_LONGOPTS,
        CLI_COMMON_LONGOPTS,
    };
    struct cli_globals globals = *g;
    struct cli_exec_options eo;
    memset(&eo, 0, sizeof eo);
    /* Every --env fits: at most one per argument. */
    eo.env = calloc((size_t)argc + 1, sizeof *eo.env);
    if (!eo.env) {
        cli_error("out of memory");
        return CLI_EXIT_SBX;
    }
    struct exec_cli_args a = {&eo, NULL, NULL};
    const struct cli_command cmd = {"exec", CLI_EXIT_SBX, usage,
                                    "+:p:m:" CLI_EXEC_SHORTOPTS "c:h", longopts,
                                    on_option, &a, &globals};
    const char *key = NULL;
    int rest = 0;
    int status = cli_session_parse(&cmd, argc, argv, &key, &rest);
    if (status == CLI_EXIT_OK && rest >= argc)
        status = cli_usage_error("exec", CLI_EXIT_SBX,
                                 "missing command (usage: sbx exec [OPTIONS] "
                                 "SESSION -- COMMAND [ARGS...])");
    if (status == CLI_EXIT_OK && argv[rest][0] == '\0')
        status = cli_usage_error("exec", CLI_EXIT_SBX, "the command name is empty");
    if (status == CLI_EXIT_OK) {
        if (cli_interrupt_setup() != SBX_OK) {
            status = CLI_EXIT_SBX;
        } else {
            status = exec_in_session(&globals, a.provider, a.manifest, key, &eo,
                                     argv + rest);
            cli_interrupt_teardown();
        }
    }
    free(eo.env);
    return status == CLI_HELP_SHOWN ? CLI_EXIT_OK : status;
}
