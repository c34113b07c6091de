/*
 * cmd_fork.c - `sbx fork SESSION NEW`: a new session whose workspace
 * starts as a copy of SESSION's (sbx_session_fork).
 */
#include "cli.h"
#include "cmd_proc.h"

#include <string.h>

static void usage(FILE *f)
{
    fputs("Usage: sbx fork [OPTIONS] SESSION NEW\n"
          "\n"
          "Make session NEW, with a sandbox of its own whose workspace starts as\n"
          "a copy of the workspace of session SESSION: through the provider's own\n"
          "snapshot when it has one ('forked (native)'), else a snapshot of it\n"
          "checked and restored like 'sbx restore' ('forked (streamed: why)').\n"
          "Nothing else is\n"
          "shared or carried over: NEW has no manifest, packages, memory stores\n"
          "or ports of SESSION's, and later writes in either never show in the\n"
          "other. NEW must not exist yet.\n"
          "\n"
          "Options:\n"
          "  -p, --provider NAME  the provider of NEW (default: SESSION's)\n"
          "      --json           print {\"forked\":true,\"method\":\"native\"|\"streamed\",\n"
          "                       \"streamed_why\":...} instead\n"
          "  -c, --config FILE    read this configuration file\n"
          "  -h, --help           show this help\n"
          "\n"
          "Exit status: 0 on success, 125 when sbx failed (no such SESSION, NEW\n"
          "exists already, the copy was refused).\n", f);
}

enum { OPT_JSON = 0x100 };

struct fork_opts {
    const char *provider;
    bool json;
};

static int on_option(void *ud, int c, const char *arg)
{
    struct fork_opts *o = ud;
    if (c == OPT_JSON) {
        o->json = true;
        return CLI_EXIT_OK;
    }
    if (c != 'p')
        return CLI_OPTION_UNKNOWN;
    o->provider = arg;
    return CLI_EXIT_OK;
}

int cmd_fork(const struct cli_globals *g, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"provider", required_argument, NULL, 'p'},
        {"json", no_argument, NULL, OPT_JSON},
        CLI_COMMON_LONGOPTS,
    };
    struct cli_globals globals = *g;
    struct fork_opts fo = {NULL, false};
    const struct cli_command cmd = {"fork", CLI_EXIT_SBX, usage, "+:p:c:h", longopts,
                                    on_option, &fo, &globals};
    const char *key = NULL;
    int rest = 0;
    int status = cli_session_parse(&cmd, argc, argv, &key, &rest);
    if (status != CLI_EXIT_OK)
        return status == CLI_HELP_SHOWN ? CLI_EXIT_OK : status;
    if (rest >= argc)
        return cli_usage_error("fork", CLI_EXIT_SBX, "missing NEW");
    const char *to = argv[rest];
    if (!to[0] || strlen(to) > 1024)
        return cli_usage_error("fork", CLI_EXIT_SBX,
                               "NEW must be a session key of 1 to 1024 bytes");
    if ((status = cli_no_more_arguments(&cmd, argc, argv, rest + 1)) != CLI_EXIT_OK)
        return status;
    if (cli_interrupt_setup() != SBX_OK)
        return CLI_EXIT_SBX;
    sbx_ctx *ctx;
    sbx_sessions *m;
    if (cli_sessions_open(&globals, NULL, &ctx, &m) != SBX_OK) {
        cli_interrupt_teardown();
        return CLI_EXIT_SBX;
    }
    struct sbx_session_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.size = sizeof spec;
    spec.provider = fo.provider;
    sbx_error err;
    struct sbx_fork_info info;
    memset(&info, 0, sizeof info);
    info.size = sizeof info;
    int rc = sbx_session_fork_info(m, key, to, &spec, cli_run_cancel(), NULL, &info, &err);
    if (rc == SBX_OK && fo.json) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "forked", json_object_new_boolean(1));
        json_object_object_add(o, "method",
                               json_object_new_string(info.native ? "native" : "streamed"));
        json_object_object_add(o, "streamed_why",
                               info.native ? NULL
                                           : cli_json_text(info.streamed_why,
                                                           strnlen(info.streamed_why,
                                                                   sizeof info.streamed_why)));
        cli_json_print(o);
        status = CLI_EXIT_OK;
    } else if (rc == SBX_OK) {
        if (info.native)
            puts("forked (native)");
        else
            printf("forked (streamed: %.*s)\n", (int)sizeof info.streamed_why,
                   info.streamed_why);
        status = CLI_EXIT_OK;
    } else {
        status = cli_session_failed(rc, &err);
    }
    cli_sessions_close(ctx, m);
    cli_interrupt_teardown();
    return status;
}
