/*
 * cmd_conformance.c - `sbx conformance`: run the provider conformance suite
 * (conformance/, sbx/conformance.h) against one provider.
 */
#include "cli.h"
#include "conformance_lazy.h"

#include <getopt.h>
#include <string.h>

static void usage(FILE *f)
{
    fputs("Usage: sbx conformance [OPTIONS] [PROVIDER]\n"
          "\n"
          "Run the lifecycle conformance suite against PROVIDER (else the\n"
          "default provider). Each case runs in a process of its own, uses\n"
          "fresh session keys and destroys what it created; a case whose\n"
          "process crashes or runs past 120 s fails and the run goes on.\n"
          "\n"
          "Options:\n"
          "  --junit FILE         also write a JUnit XML report to FILE\n"
          "  --tap                print TAP version 13 instead of text\n"
          "  --filter PATTERNS    run only the cases matching these\n"
          "                       comma-separated shell patterns\n"
          "  --list               list the cases and exit\n"
          "  -v, --verbose        print each case's description\n"
          "  -c, --config FILE    read this configuration file\n"
          "  -h, --help           show this help\n"
          "\n"
          "Exit status: 0 when every case passed or was skipped, 1 when a case\n"
          "failed (crashed and timed-out cases included), 125 when the suite\n"
          "could not run.\n", f);
}

static void list_cases(const struct cli_conformance *cf)
{
    char caps[256];
    for (size_t i = 0; i < cf->case_count(); i++) {
        uint64_t need = cf->case_caps(i);
        printf("%-36s %s%s%s%s\n", cf->case_name(i),
               cf->case_description(i), need ? " [needs " : "",
               need ? cli_caps_text(need, caps, sizeof caps) : "", need ? "]" : "");
    }
}

struct conformance_args {
    struct sbx_conformance_options copts;
    bool list;
};

static int on_option(void *ud, int c, const char *arg)
{
    struct conformance_args *a = ud;
    switch (c) {
    case 'j':
        a->copts.junit_path = arg;
        return CLI_EXIT_OK;
    case 't':
        a->copts.format = SBX_CONFORMANCE_TAP;
        return CLI_EXIT_OK;
    case 'f':
        a->copts.filter = arg;
        return CLI_EXIT_OK;
    case 'l':
        a->list = true;
        return CLI_EXIT_OK;
    case 'v':
        a->copts.verbose = true;
        return CLI_EXIT_OK;
    default:
        return CLI_OPTION_UNKNOWN;
    }
}

int cmd_conformance(const struct cli_globals *g, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"junit", required_argument, NULL, 'j'},
        {"tap", no_argument, NULL, 't'},
        {"filter", required_argument, NULL, 'f'},
        {"list", no_argument, NULL, 'l'},
        {"verbose", no_argument, NULL, 'v'},
        CLI_COMMON_LONGOPTS,
    };
    struct cli_globals globals = *g;
    struct conformance_args a;
    memset(&a, 0, sizeof a);
    struct sbx_conformance_options *copts = &a.copts;
    copts->size = sizeof *copts;
    copts->format = SBX_CONFORMANCE_HUMAN;
    /* Permuting: the provider may come before or after the options. */
    const struct cli_command cmd = {"conformance", CLI_EXIT_USAGE, usage, ":vc:h",
                                    longopts, on_option, &a, &globals};
    int status = cli_parse_options(&cmd, argc, argv);
    if (status != CLI_EXIT_OK)
        return status == CLI_HELP_SHOWN ? CLI_EXIT_OK : status;
    const struct cli_conformance *cf = cli_conformance_load();
    if (!cf)
        return CLI_EXIT_SBX;
    if (a.list) {
        list_cases(cf);
        return CLI_EXIT_OK;
    }
    if (optind < argc)
        copts->provider = argv[optind++];
    if (optind < argc)
        return cli_usage_error("conformance", CLI_EXIT_USAGE,
                               "unexpected argument '%s' (one provider at a time)",
                               argv[optind]);

    struct sbx_options open_opts;
    memset(&open_opts, 0, sizeof open_opts);
    open_opts.size = sizeof open_opts;
    open_opts.config_path = globals.config_path;
    struct sbx_conformance_summary summary;
    memset(&summary, 0, sizeof summary);
    summary.size = sizeof summary;
    sbx_error err;
    sbx_error_clear(&err);
    int rc = cf->run(&open_opts, copts, &summary, &err);
    fflush(stdout);
    if (rc != SBX_OK)
        cli_error("%s", err.message[0] ? err.message : sbx_strerror(rc));
    return cf->exit_code(rc, &summary);
}
