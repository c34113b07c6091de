/*
 * cmd_exec.c - `sbx exec SESSION -- CMD...`: run a command in the sandbox of
 * a session key, creating it when the key has none yet (as the first tool
 * call of a session does). A key whose sandbox is lost fails: nothing is
 * recreated.
 */
#include "cmd_proc.h"

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
          "  -t, --tty            run COMMAND on a pseudo-terminal; with -i and a\n"
          "                       terminal on stdin, interactively (raw mode,\n"
          "                       window size followed, Ctrl-C and Ctrl-D sent\n"
          "                       as keys)\n"
          "      --detach         start COMMAND as a process of the sandbox, print\n"
          "                       its id and return (see 'sbx ps', 'sbx logs')\n"
          "      --yield MS       start it, wait up to MS milliseconds, print the\n"
          "                       output so far, and the id and cursors when it\n"
          "                       still runs (continue with 'sbx send --yield')\n"
          "      --max-bytes N    with --yield: at most N bytes per stream\n"
          "                       (k, m suffixes; default 64k)\n"
          "      --json           with --yield or --detach: one JSON object\n"
          "      --timeout DUR    kill the command's process tree after DUR\n"
          "                       seconds (1.5, 500ms, 2m, 1h); 0: no timeout\n"
          "  -C, --cwd DIR        workspace-relative working directory\n"
          "  -e, --env NAME=VALUE set a variable (repeatable); nothing else of\n"
          "                       this environment reaches the command\n"
          "  -i, --stdin          stream standard input even when it is a terminal\n"
          "      --no-stdin       give the command an empty standard input\n"
          "                       (default: stream it unless it is a terminal)\n"
          "  -c, --config FILE    read this configuration file\n"
          "  -h, --help           show this help\n"
          "\n"
          CLI_EXEC_EXIT_HELP, f);
}

static int exec_in_session(const struct cli_globals *g, const char *provider,
                           const char *manifest_path, const char *key,
                           const struct cli_exec_options *eo,
                           const struct cli_proc_exec_options *po, char *const *cmd)
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
    } else if (po->tty || po->detach || po->yield)
        status = cli_proc_exec(h, &with_env, po, cmd);
    else
        status = cli_exec_streamed(h, &with_env, cmd);
    sbx_release(h);
    free(env);
    sbx_manifest_free(mf);
    cli_sessions_close(ctx, m);
    return status;
}

struct exec_cli_args {
    struct cli_exec_options *eo;
    struct cli_proc_exec_options po;
    const char *provider;
    const char *manifest;
};

/* Values of the long-only options. */
enum { OPT_TIMEOUT = 0x100, OPT_DETACH, OPT_YIELD, OPT_MAX_BYTES, OPT_JSON };

static int on_option(void *ud, int c, const char *arg)
{
    struct exec_cli_args *a = ud;
    uint64_t v;
    switch (c) {
    case 'm':
        a->manifest = arg;
        return CLI_EXIT_OK;
    case 'p':
        a->provider = arg;
        return CLI_EXIT_OK;
    case 't':
        a->po.tty = true;
        return CLI_EXIT_OK;
    case OPT_TIMEOUT:
        return cli_exec_option("exec", 't', arg, a->eo);
    case OPT_DETACH:
        a->po.detach = true;
        return CLI_EXIT_OK;
    case OPT_YIELD:
        if (!cli_ms_parse(arg, &a->po.yield_ms))
            return cli_usage_error("exec", CLI_EXIT_SBX,
                                   "invalid --yield '%s' (expected milliseconds, 0 "
                                   "to 4294967295)",
                                   arg);
        a->po.yield = true;
        return CLI_EXIT_OK;
    case OPT_MAX_BYTES:
        if (!cli_size_parse(arg, (uint64_t)1 << 40, &v))
            return cli_usage_error("exec", CLI_EXIT_SBX,
                                   "invalid --max-bytes '%s' (expected a count of "
                                   "bytes, 1 or more, with an optional k, m or g)",
                                   arg);
        a->po.max_bytes = v;
        return CLI_EXIT_OK;
    case OPT_JSON:
        a->po.json = true;
        return CLI_EXIT_OK;
    default:
        return cli_exec_option("exec", c, arg, a->eo);
    }
}

/* The combinations of the process options that make no sense. */
static int check_proc_options(const struct exec_cli_args *a)
{
    const struct cli_proc_exec_options *po = &a->po;
    if (po->detach && po->yield)
        return cli_usage_error("exec", CLI_EXIT_SBX,
                               "--detach and --yield do not go together (--yield 0 "
                               "returns at once with the id)");
    if ((po->max_bytes && !po->yield) || (po->json && !po->yield && !po->detach))
        return cli_usage_error("exec", CLI_EXIT_SBX, "--%s needs --yield%s",
                               po->json ? "json" : "max-bytes",
                               po->json ? " or --detach" : "");
    if (po->json && po->max_bytes > CLI_JSON_MAX_BYTES)
        return cli_usage_error("exec", CLI_EXIT_SBX,
                               "--max-bytes above 64m with --json (the output is held "
                               "in memory for the JSON object)");
    if ((po->detach || po->yield) && a->eo->stdin_mode == CLI_STDIN_ALWAYS)
        return cli_usage_error("exec", CLI_EXIT_SBX,
                               "--%s does not read standard input: give it with "
                               "'sbx send SESSION ID'",
                               po->detach ? "detach" : "yield");
    return CLI_EXIT_OK;
}

int cmd_exec(const struct cli_globals *g, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"provider", required_argument, NULL, 'p'},
        {"manifest", required_argument, NULL, 'm'},
        {"tty", no_argument, NULL, 't'},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"detach", no_argument, NULL, OPT_DETACH},
        {"yield", required_argument, NULL, OPT_YIELD},
        {"max-bytes", required_argument, NULL, OPT_MAX_BYTES},
        {"json", no_argument, NULL, OPT_JSON},
        {"cwd", required_argument, NULL, 'C'},
        {"env", required_argument, NULL, 'e'},
        {"stdin", no_argument, NULL, 'i'},
        {"no-stdin", no_argument, NULL, 'N'},
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
    struct exec_cli_args a = {&eo, {0}, NULL, NULL};
    /* -t is --tty here, as in `docker exec -it`; --timeout has no short
     * form in exec (`sbx run -t` still is --timeout). */
    const struct cli_command cmd = {"exec", CLI_EXIT_SBX, usage,
                                    "+:p:m:tC:e:ic:h", longopts,
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
    if (status == CLI_EXIT_OK)
        status = check_proc_options(&a);
    if (status == CLI_EXIT_OK) {
        if (cli_interrupt_setup() != SBX_OK) {
            status = CLI_EXIT_SBX;
        } else {
            status = exec_in_session(&globals, a.provider, a.manifest, key, &eo,
                                     &a.po, argv + rest);
            cli_interrupt_teardown();
        }
    }
    free(eo.env);
    return status == CLI_HELP_SHOWN ? CLI_EXIT_OK : status;
}
