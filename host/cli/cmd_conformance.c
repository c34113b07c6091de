/*
 * cmd_conformance.c - `sbx conformance`: run the provider conformance suite
 * (conformance/, sbx/conformance.h) against one provider.
 */
#include "cli.h"

#include <sbx/conformance.h>

#include <getopt.h>
#include <string.h>

static void usage(FILE *f)
{
    fputs("Usage: sbx conformance [OPTIONS] [PROVIDER]\n"
          "\n"
          "Run the lifecycle conformance suite against PROVIDER (else the\n"
          "default provider). Each case uses fresh session keys and destroys\n"
          "what it created.\n"
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
          "failed, 125 when the suite could not run.\n", f);
}

static void list_cases(void)
{
    char caps[256];
    for (size_t i = 0; i < sbx_conformance_case_count(); i++) {
        uint64_t need = sbx_conformance_case_caps(i);
        printf("%-36s %s%s%s%s\n", sbx_conformance_case_name(i),
               sbx_conformance_case_description(i), need ? " [needs " : "",
               need ? cli_caps_text(need, caps, sizeof caps) : "", need ? "]" : "");
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
        {"config", required_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct cli_globals globals = *g;
    struct sbx_conformance_options copts;
    memset(&copts, 0, sizeof copts);
    copts.size = sizeof copts;
    copts.format = SBX_CONFORMANCE_HUMAN;
    bool list = false;
    int c;

    opterr = 0;
    /* Permuting: the provider may come before or after the options. */
    while ((c = getopt_long(argc, argv, ":vc:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'j':
            copts.junit_path = optarg;
            break;
        case 't':
            copts.format = SBX_CONFORMANCE_TAP;
            break;
        case 'f':
            copts.filter = optarg;
            break;
        case 'l':
            list = true;
            break;
        case 'v':
            copts.verbose = true;
            break;
        case 'c':
            globals.config_path = optarg;
            break;
        case 'h':
            usage(stdout);
            return CLI_EXIT_OK;
        default:
            return cli_option_error("conformance", CLI_EXIT_USAGE, c, argv);
        }
    }
    if (list) {
        list_cases();
        return CLI_EXIT_OK;
    }
    if (optind < argc)
        copts.provider = argv[optind++];
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
    int rc = sbx_conformance_run(&open_opts, &copts, &summary, &err);
    fflush(stdout);
    if (rc != SBX_OK)
        cli_error("%s", err.message[0] ? err.message : sbx_strerror(rc));
    return sbx_conformance_exit_code(rc, &summary);
}
