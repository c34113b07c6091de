/*
 * cmd_export.c - `sbx export SESSION DIR`: the session sandbox's
 * /mnt/session/outputs, validated entry by entry, published into the host
 * directory DIR atomically (sbx_export_to_dir).
 */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fputs("Usage: sbx export [OPTIONS] SESSION DIR\n"
          "\n"
          "Copy the outputs of session SESSION's sandbox (/mnt/session/outputs)\n"
          "into the host directory DIR. Only regular files and directories are\n"
          "accepted: a symlink, hard link, device, FIFO, a name that is not\n"
          "UTF-8 or leaves the directory, a duplicate, or a file over a limit\n"
          "makes the whole export fail, naming the entry. DIR is replaced as a\n"
          "whole: it holds the previous export or the new one, never a mix.\n"
          "An existing DIR must be empty or made by an earlier export; its\n"
          "parent must exist. Needs a provider with the output_export\n"
          "capability.\n"
          "\n"
          "Options:\n"
          "      --max-file SIZE   largest file accepted (default 1g); SIZE is\n"
          "                        bytes with an optional k, m or g suffix\n"
          "      --max-total SIZE  largest total of all files (default 4g)\n"
          "      --max-entries N   most files and directories (default 100000)\n"
          "  -c, --config FILE     read this configuration file\n"
          "  -h, --help            show this help\n"
          "\n"
          "Exit status: 0 on success, 125 when sbx failed (no such session, an\n"
          "entry refused, a target that may not be replaced).\n", f);
}

/* "10", "64k", "1m", "2g" (powers of 1024). */
static bool parse_size(const char *text, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (end == text || errno || text[0] == '-')
        return false;
    unsigned shift = 0;
    if (*end == 'k' || *end == 'K')
        shift = 10;
    else if (*end == 'm' || *end == 'M')
        shift = 20;
    else if (*end == 'g' || *end == 'G')
        shift = 30;
    if (shift)
        end++;
    if (*end || v == 0 || v > (UINT64_MAX >> shift))
        return false;
    *out = (uint64_t)v << shift;
    return true;
}

enum { OPT_MAX_FILE = 1000, OPT_MAX_TOTAL, OPT_MAX_ENTRIES };

static int on_option(void *ud, int c, const char *arg)
{
    struct sbx_export_limits *lim = ud;
    switch (c) {
    case OPT_MAX_FILE:
    case OPT_MAX_TOTAL:
    case OPT_MAX_ENTRIES: {
        uint64_t *slot = c == OPT_MAX_FILE    ? &lim->max_file_bytes
                         : c == OPT_MAX_TOTAL ? &lim->max_total_bytes
                                              : &lim->max_entries;
        if (!parse_size(arg, slot))
            return cli_usage_error("export", CLI_EXIT_SBX,
                                   "invalid %s '%s' (expected a positive number, "
                                   "with k, m or g for sizes)",
                                   c == OPT_MAX_FILE    ? "--max-file"
                                   : c == OPT_MAX_TOTAL ? "--max-total"
                                                        : "--max-entries",
                                   arg);
        return CLI_EXIT_OK;
    }
    default:
        return CLI_OPTION_UNKNOWN;
    }
}

static int run_export(const struct cli_globals *g, const char *key, const char *dir,
                      const struct sbx_export_limits *lim)
{
    sbx_ctx *ctx;
    sbx_sessions *m;
    if (cli_sessions_open(g, NULL, &ctx, &m) != SBX_OK)
        return cli_failure_status();
    sbx_handle *h = NULL;
    sbx_error err;
    int rc = sbx_session_attach(m, key, cli_run_cancel(), &h, &err);
    if (rc == SBX_OK)
        rc = sbx_export_to_dir(h, dir, lim, cli_run_cancel(), &err);
    int status = rc == SBX_OK ? CLI_EXIT_OK : cli_session_failed(rc, &err);
    sbx_release(h);
    cli_sessions_close(ctx, m);
    return status;
}

int cmd_export(const struct cli_globals *g, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"max-file", required_argument, NULL, OPT_MAX_FILE},
        {"max-total", required_argument, NULL, OPT_MAX_TOTAL},
        {"max-entries", required_argument, NULL, OPT_MAX_ENTRIES},
        CLI_COMMON_LONGOPTS,
    };
    struct cli_globals globals = *g;
    struct sbx_export_limits lim;
    memset(&lim, 0, sizeof lim);
    lim.size = sizeof lim;
    const struct cli_command cmd = {"export", CLI_EXIT_SBX, usage, "+:c:h", longopts,
                                    on_option, &lim, &globals};
    const char *key = NULL;
    int rest = 0;
    int status = cli_session_parse(&cmd, argc, argv, &key, &rest);
    if (status == CLI_EXIT_OK && rest >= argc)
        status = cli_usage_error("export", CLI_EXIT_SBX, "missing DIR");
    if (status == CLI_EXIT_OK)
        status = cli_no_more_arguments(&cmd, argc, argv, rest + 1);
    if (status != CLI_EXIT_OK)
        return status == CLI_HELP_SHOWN ? CLI_EXIT_OK : status;
    if (cli_interrupt_setup() != SBX_OK)
        return CLI_EXIT_SBX;
    status = run_export(&globals, key, argv[rest], &lim);
    cli_interrupt_teardown();
    return status;
}
