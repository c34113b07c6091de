/* cli_common.c - error messages, option parsing and context opening shared
 * by the subcommands. */
#include "cli.h"

#include <getopt.h>
#include <stdarg.h>
#include <string.h>

void cli_error(const char *fmt, ...)
{
    va_list ap;
    cli_progress_end();
    fputs("sbx: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int cli_usage_error(const char *cmd, int status, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "sbx%s%s: ", cmd ? " " : "", cmd ? cmd : "");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'sbx%s%s --help'.\n", cmd ? " " : "", cmd ? cmd : "");
    return status;
}

int cli_option_error(const char *cmd, int status, int c, char **argv)
{
    /* getopt_long has advanced optind past the offending word. */
    const char *word = optind > 0 ? argv[optind - 1] : "?";
    bool is_long = strncmp(word, "--", 2) == 0;
    if (c == ':') {
        if (is_long || !optopt)
            return cli_usage_error(cmd, status, "option '%s' needs a value", word);
        return cli_usage_error(cmd, status, "option '-%c' needs a value", optopt);
    }
    if (optopt && !is_long)
        return cli_usage_error(cmd, status, "unknown option '-%c'", optopt);
    /* For long options getopt leaves optopt 0 (unknown) or the option's
     * value (an argument given to a flag that takes none). */
    const char *eq = strchr(word, '=');
    if (optopt && eq)
        return cli_usage_error(cmd, status, "option '%.*s' takes no value",
                               (int)(eq - word), word);
    return cli_usage_error(cmd, status, "unknown option '%s'", word);
}

int cli_parse_options(const struct cli_command *cmd, int argc, char **argv)
{
    int c;
    optind = 0; /* full re-initialization */
    opterr = 0;
    while ((c = getopt_long(argc, argv, cmd->shortopts, cmd->longopts, NULL)) != -1) {
        int status;
        switch (c) {
        case 0: /* a flag, set by getopt_long */
            continue;
        case 'c':
            cmd->globals->config_path = optarg;
            continue;
        case 'h':
            cmd->usage(stdout);
            return CLI_HELP_SHOWN;
        case CLI_OPT_QUIET:
            cli_progress_set_mode("none");
            continue;
        case CLI_OPT_PROGRESS:
            if (cli_progress_set_mode(optarg) != 0)
                return cli_usage_error(cmd->name, cmd->usage_status,
                                       "--progress: expected auto, human, json or none, "
                                       "not '%s'",
                                       optarg);
            continue;
        case ':':
        case '?':
            status = CLI_OPTION_UNKNOWN;
            break;
        default:
            status = cmd->own ? cmd->own(cmd->ud, c, optarg) : CLI_OPTION_UNKNOWN;
            break;
        }
        if (status == CLI_OPTION_UNKNOWN)
            return cli_option_error(cmd->name, cmd->usage_status, c, argv);
        if (status != CLI_EXIT_OK)
            return status;
    }
    return CLI_EXIT_OK;
}

int cli_no_more_arguments(const struct cli_command *cmd, int argc, char **argv,
                          int next)
{
    if (next >= argc)
        return CLI_EXIT_OK;
    return cli_usage_error(cmd->name, cmd->usage_status, "unexpected argument '%s'",
                           argv[next]);
}

int cli_parse_no_operands(const struct cli_command *cmd, int argc, char **argv)
{
    int status = cli_parse_options(cmd, argc, argv);
    if (status != CLI_EXIT_OK)
        return status;
    return cli_no_more_arguments(cmd, argc, argv, optind);
}

static int open_context(const struct cli_globals *g, const char *provider,
                        bool keep_broken, sbx_ctx **out)
{
    struct sbx_options opts;
    memset(&opts, 0, sizeof opts);
    opts.size = sizeof opts;
    opts.config_path = g->config_path;
    opts.provider = provider;
    opts.keep_broken_providers = keep_broken;
    sbx_error err;
    int rc = sbx_open(&opts, out, &err);
    if (rc != SBX_OK)
        cli_error("%s", err.message[0] ? err.message : sbx_strerror(rc));
    return rc;
}

int cli_open(const struct cli_globals *g, const char *provider, sbx_ctx **out)
{
    return open_context(g, provider, false, out);
}

int cli_open_lenient(const struct cli_globals *g, sbx_ctx **out)
{
    return open_context(g, NULL, true, out);
}

const char *cli_isolation_text(uint32_t isolation)
{
    switch (isolation) {
    case SBX_ISOLATION_NONE: return "none";
    case SBX_ISOLATION_CONTAINER: return "container";
    case SBX_ISOLATION_VM: return "vm";
    }
    return "unknown";
}

const char *cli_caps_text(uint64_t caps, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < 64; i++) {
        uint64_t bit = UINT64_C(1) << i;
        if (!(caps & bit))
            continue;
        const char *name = sbx_cap_name(bit);
        int n = name ? snprintf(buf + used, len - used, "%s%s", used ? "," : "", name)
                     : snprintf(buf + used, len - used, "%s0x%llx", used ? "," : "",
                                (unsigned long long)bit);
        if (n < 0 || (size_t)n >= len - used)
            break; /* truncated: what fits is still informative */
        used += (size_t)n;
    }
    if (used == 0)
        snprintf(buf, len, "-");
    return buf;
}
