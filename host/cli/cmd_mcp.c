/*
 * cmd_mcp.c - `sbx mcp`: serve sandboxes as MCP tools on stdio
 * (docs/MCP.md). The operator's flags become struct sbxm_options; nothing
 * a client sends can change them.
 */
#include "cli.h"
#include "mcp/mcp.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
    OPT_TOOLS = 0x100,
    OPT_SNAPSHOT_DIR,
    OPT_MAX_READ,
    OPT_MAX_WRITE,
    OPT_MAX_OUTPUT,
    OPT_MAX_CALLS,
};

static void usage(FILE *f)
{
    fputs("Usage: sbx mcp [OPTIONS]\n"
          "\n"
          "Serve sandboxes as MCP tools: JSON-RPC 2.0, one message per line on\n"
          "standard input and output (the MCP stdio transport); standard error\n"
          "is the log. Runs until standard input ends. The provider, the\n"
          "configuration and the tools come from these options and sbx.yaml,\n"
          "never from a client.\n"
          "\n"
          "Options:\n"
          "  -p, --provider NAME       create sandboxes on this provider (default:\n"
          "                            the configured one)\n"
          "      --tools GROUPS        tool groups, comma-separated: agent (the\n"
          "                            default), sdk (adds the tools of the OpenAI\n"
          "                            Agents SDK client)\n"
          "      --snapshot-dir DIR    where named snapshots live (default:\n"
          "                            <state dir>/mcp-snapshots)\n"
          "      --max-read-bytes N    cap of read_file/snapshot_read (default 1 MiB)\n"
          "      --max-write-bytes N   cap of write_file (default 16 MiB)\n"
          "      --max-output-bytes N  cap of a command's output per call\n"
          "                            (default 1 MiB)\n"
          "      --max-calls N         tool calls running at once (default 16)\n"
          "  -c, --config FILE         read this configuration file\n"
          "  -h, --help                show this help\n"
          "\n"
          "Exit status: 0 after standard input ended, 2 on a usage error, 125\n"
          "when sbx failed.\n", f);
}

struct mcp_args {
    struct sbxm_options *o;
};

/* A size: a decimal number of bytes, optionally with K, M or G (KiB, MiB,
 * GiB), from 1 to 1 GiB. */
static bool parse_size(const char *text, size_t *out)
{
    errno = 0;
    char *end;
    if (!*text || *text == '-')
        return false;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || end == text)
        return false;
    unsigned long long mul = 1;
    if (*end == 'K' || *end == 'k')
        mul = 1024, end++;
    else if (*end == 'M' || *end == 'm')
        mul = 1024 * 1024, end++;
    else if (*end == 'G' || *end == 'g')
        mul = 1024 * 1024 * 1024, end++;
    if (*end || v == 0 || v > (1ull << 30) / mul)
        return false;
    *out = (size_t)(v * mul);
    return true;
}

static bool parse_tools(const char *text, unsigned *out)
{
    unsigned t = 0;
    const char *p = text;
    while (*p) {
        size_t n = strcspn(p, ",");
        if (n == 5 && !strncmp(p, "agent", 5))
            t |= SBXM_TOOLS_AGENT;
        else if (n == 3 && !strncmp(p, "sdk", 3))
            t |= SBXM_TOOLS_SDK | SBXM_TOOLS_AGENT;
        else
            return false;
        p += n;
        if (*p == ',')
            p++;
    }
    if (!t)
        return false;
    *out = t;
    return true;
}

static int on_option(void *ud, int c, const char *arg)
{
    struct sbxm_options *o = ((struct mcp_args *)ud)->o;
    size_t n;
    switch (c) {
    case 'p':
        o->provider = arg;
        return CLI_EXIT_OK;
    case OPT_TOOLS:
        if (!parse_tools(arg, &o->tools))
            return cli_usage_error("mcp", CLI_EXIT_USAGE,
                                   "--tools %s: expected agent, sdk or agent,sdk", arg);
        return CLI_EXIT_OK;
    case OPT_SNAPSHOT_DIR:
        if (!*arg)
            return cli_usage_error("mcp", CLI_EXIT_USAGE, "--snapshot-dir: empty path");
        o->snapshot_dir = arg;
        return CLI_EXIT_OK;
    case OPT_MAX_READ:
    case OPT_MAX_WRITE:
    case OPT_MAX_OUTPUT:
        if (!parse_size(arg, &n))
            return cli_usage_error("mcp", CLI_EXIT_USAGE,
                                   "%s: expected a size from 1 to 1G (bytes, or with K, M, G)",
                                   arg);
        if (c == OPT_MAX_READ)
            o->max_read_bytes = n;
        else if (c == OPT_MAX_WRITE)
            o->max_write_bytes = n;
        else
            o->max_output_bytes = n;
        return CLI_EXIT_OK;
    case OPT_MAX_CALLS: {
        char *end;
        errno = 0;
        long v = strtol(arg, &end, 10);
        if (errno || end == arg || *end || v < 1 || v > 1024)
            return cli_usage_error("mcp", CLI_EXIT_USAGE,
                                   "--max-calls %s: expected a number from 1 to 1024", arg);
        o->max_calls = (unsigned)v;
        return CLI_EXIT_OK;
    }
    default:
        return CLI_OPTION_UNKNOWN;
    }
}

int cmd_mcp(const struct cli_globals *g, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"provider", required_argument, NULL, 'p'},
        {"tools", required_argument, NULL, OPT_TOOLS},
        {"snapshot-dir", required_argument, NULL, OPT_SNAPSHOT_DIR},
        {"max-read-bytes", required_argument, NULL, OPT_MAX_READ},
        {"max-write-bytes", required_argument, NULL, OPT_MAX_WRITE},
        {"max-output-bytes", required_argument, NULL, OPT_MAX_OUTPUT},
        {"max-calls", required_argument, NULL, OPT_MAX_CALLS},
        CLI_COMMON_LONGOPTS,
    };
    struct cli_globals globals = *g;
    struct sbxm_options o = {
        .tools = SBXM_TOOLS_AGENT,
        .max_read_bytes = 1u << 20,
        .max_write_bytes = 16u << 20,
        .max_output_bytes = 1u << 20,
        .max_calls = 16,
    };
    struct mcp_args a = {&o};
    const struct cli_command cmd = {"mcp", CLI_EXIT_USAGE, usage, "+:p:c:h", longopts,
                                    on_option, &a, &globals};
    int status = cli_parse_no_operands(&cmd, argc, argv);
    if (status != CLI_EXIT_OK)
        return status == CLI_HELP_SHOWN ? CLI_EXIT_OK : status;
    o.config_path = globals.config_path;
    /* A client that goes away must not kill us mid-write: the write fails
     * with EPIPE and the server ends cleanly. */
    signal(SIGPIPE, SIG_IGN);
    return sbxm_serve(&o, STDIN_FILENO, STDOUT_FILENO) == 0 ? CLI_EXIT_OK : CLI_EXIT_SBX;
}
