/*
 * main.c - the `sbx` command: global options and subcommand dispatch.
 *
 *   sbx [--config FILE] SUBCOMMAND [OPTIONS] [ARGS...]
 */
#include "cli.h"
#include "cmd_proc.h"


#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <string.h>
#include <unistd.h>

struct subcommand {
    const char *name;
    int (*fn)(const struct cli_globals *g, int argc, char **argv);
    const char *summary;
};

static const struct subcommand subcommands[] = {
    {"run", cmd_run, "run a command in a fresh sandbox, then destroy it"},
    {"providers", cmd_providers, "list the installed provider plugins"},
    {"check", cmd_check, "validate the configuration and the enabled providers"},
    {"conformance", cmd_conformance, "run the conformance suite against a provider"},
    {"create", cmd_create, "provision the sandbox of a session key"},
    {"exec", cmd_exec, "run a command in a session's sandbox (creating it)"},
    {"ps", cmd_ps, "list the processes of a session's sandbox"},
    {"attach", cmd_attach, "connect to a process of a session's sandbox"},
    {"logs", cmd_logs, "print a process's output (--follow: until it ends)"},
    {"send", cmd_send, "write stdin to a process's stdin (--yield: and read)"},
    {"kill", cmd_kill, "send a signal to a process of a session's sandbox"},
    {"read", cmd_read, "copy a file of a session's sandbox to stdout"},
    {"write", cmd_write, "write stdin to a file of a session's sandbox"},
    {"ls", cmd_ls, "list a directory of a session's workspace"},
    {"stat", cmd_stat, "describe a path of a session's workspace"},
    {"mkdir", cmd_mkdir, "make a directory in a session's workspace"},
    {"rm", cmd_rm, "remove a path of a session's workspace"},
    {"mv", cmd_mv, "rename a path of a session's workspace"},
    {"port", cmd_port, "where a declared port of a session's sandbox is reached"},
    {"export", cmd_export, "copy a session's outputs into a host directory"},
    {"destroy", cmd_destroy, "delete a session and its sandbox"},
    {"sessions", cmd_sessions, "list the sessions that have a sandbox"},
    {"snapshot", cmd_snapshot, "write a session's workspace into a tar archive"},
    {"restore", cmd_restore, "replace a session's workspace with a snapshot"},
    {"state", cmd_state, "what a later process needs to reconnect to a session (JSON)"},
    {"resume", cmd_resume, "reconnect to a session (resuming it when paused)"},
    {"pause", cmd_pause, "pause a session's sandbox until its next use"},
    {"fork", cmd_fork, "a new session whose workspace is a copy of another's"},
    {"memory", cmd_memory, "memory stores: create, list, ls, cat, log, put, rm"},
    {"mcp", cmd_mcp, "serve sandboxes as MCP tools on stdio (agent clients)"},
    {"health", cmd_health, "initialize the providers and check their backends live"},
    {"reconcile", cmd_reconcile, "clean up after crashed workers (--watch: keep at it)"},
    {"pools", cmd_pools, "list the warm pools and their members"},
};

#define NSUBCOMMANDS (sizeof subcommands / sizeof subcommands[0])

static void usage(FILE *f)
{
    fputs("Usage: sbx [--config FILE] COMMAND [OPTIONS] [ARGS...]\n"
          "\n"
          "Run commands in sandboxes served by provider plugins.\n"
          "\n"
          "Commands:\n", f);
    for (size_t i = 0; i < NSUBCOMMANDS; i++)
        fprintf(f, "  %-12s %s\n", subcommands[i].name, subcommands[i].summary);
    fputs("\n"
          "Options:\n"
          "  -c, --config FILE  read this configuration file (else $SBX_CONFIG,\n"
          "                     else the system sbx.yaml and conf.d/)\n"
          "  -h, --help         show this help, or 'sbx COMMAND --help'\n"
          "  -V, --version      show the sbx version and its provider ABI\n", f);
}

static const struct subcommand *find_subcommand(const char *name)
{
    for (size_t i = 0; i < NSUBCOMMANDS; i++)
        if (!strcmp(subcommands[i].name, name))
            return &subcommands[i];
    return NULL;
}

/* Make sure descriptors 0, 1 and 2 are open (on /dev/null if they were
 * closed), so that no pipe or file opened later lands on them and gets
 * mistaken for standard input or output. */
static bool open_standard_fds(void)
{
    for (int fd = 0; fd < 3; fd++) {
        if (fcntl(fd, F_GETFD) != -1 || errno != EBADF)
            continue;
        int nfd = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
        if (nfd != fd) {
            if (nfd >= 0)
                close(nfd);
            return false;
        }
    }
    return true;
}

/* The top level's own option: -V/--version. */
static int on_option(void *ud, int c, const char *arg)
{
    (void)ud;
    (void)arg;
    if (c != 'V')
        return CLI_OPTION_UNKNOWN;
    unsigned abi_major = 0, abi_minor = 0;
    sbx_provider_abi_version(&abi_major, &abi_minor);
    printf("sbx %s (provider ABI %u.%u)\n", SBX_VERSION, abi_major, abi_minor);
    return CLI_HELP_SHOWN;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"version", no_argument, NULL, 'V'},
        CLI_COMMON_LONGOPTS,
    };
    struct cli_globals g = {NULL};
    const struct cli_command top = {NULL, CLI_EXIT_USAGE, usage, "+:c:hV", longopts,
                                    on_option, NULL, &g};

    if (!open_standard_fds())
        return CLI_EXIT_SBX; /* nowhere to report it */

    int status = cli_parse_options(&top, argc, argv);
    if (status != CLI_EXIT_OK)
        return status == CLI_HELP_SHOWN ? CLI_EXIT_OK : status;
    if (optind >= argc) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *name = argv[optind];
    if (!strcmp(name, "help")) {
        /* `sbx help COMMAND` is `sbx COMMAND --help`. */
        if (optind + 1 >= argc) {
            usage(stdout);
            return CLI_EXIT_OK;
        }
        const struct subcommand *sc = find_subcommand(argv[optind + 1]);
        if (!sc)
            return cli_usage_error(NULL, CLI_EXIT_USAGE, "unknown command '%s'",
                                   argv[optind + 1]);
        char *help_argv[] = {argv[optind + 1], (char *)"--help", NULL};
        optind = 0;
        return sc->fn(&g, 2, help_argv);
    }
    const struct subcommand *sc = find_subcommand(name);
    if (!sc)
        return cli_usage_error(NULL, CLI_EXIT_USAGE, "unknown command '%s'", name);
    int sub_argc = argc - optind;
    char **sub_argv = argv + optind;
    optind = 0; /* full re-initialization of getopt for the subcommand */
    return sc->fn(&g, sub_argc, sub_argv);
}
