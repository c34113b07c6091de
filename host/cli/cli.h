/*
 * cli.h - what the `sbx` subcommands share: global options, exit codes,
 * error printing and option-parsing messages.
 *
 * Every subcommand is a function `int cmd_X(const struct cli_globals *g,
 * int argc, char **argv)` where argv[0] is the subcommand's name; it returns
 * the process exit status.
 */
#ifndef SBX_CLI_H
#define SBX_CLI_H

#include <sbx/sbx.h>

#include <stdio.h>

/* Exit statuses shared with timeout(1), env(1) and POSIX shells. */
#define CLI_EXIT_OK 0
#define CLI_EXIT_FAIL 1        /* `check`/`conformance`: something failed */
#define CLI_EXIT_USAGE 2       /* bad usage of a subcommand other than run */
#define CLI_EXIT_TIMEOUT 124   /* the command timed out */
#define CLI_EXIT_SBX 125       /* sbx itself failed (and run's usage errors) */
#define CLI_EXIT_NOT_EXEC 126  /* the command cannot be executed */
#define CLI_EXIT_NOT_FOUND 127 /* the command was not found */
#define CLI_EXIT_SIGNAL 128    /* plus the signal number */

/* Options given before the subcommand (or repeated inside it). */
struct cli_globals {
    const char *config_path; /* --config FILE, else NULL */
};

/* Subcommands. */
int cmd_providers(const struct cli_globals *g, int argc, char **argv);
int cmd_check(const struct cli_globals *g, int argc, char **argv);
int cmd_run(const struct cli_globals *g, int argc, char **argv);
int cmd_conformance(const struct cli_globals *g, int argc, char **argv);

/* Print "sbx: <message>\n" on stderr. */
void cli_error(const char *fmt, ...) SBX_PRINTF_LIKE(1, 2);

/* Print "sbx <cmd>: <message>\nTry 'sbx <cmd> --help'.\n" on stderr and
 * return `status`. cmd may be NULL for the top level. */
int cli_usage_error(const char *cmd, int status, const char *fmt, ...)
    SBX_PRINTF_LIKE(3, 4);

/*
 * Report the getopt_long result `c` that is not one of the subcommand's
 * options: '?' (unknown option) or ':' (missing argument). Uses optind and
 * optopt, so call it right after getopt_long returned. Returns `status`.
 */
int cli_option_error(const char *cmd, int status, int c, char **argv);

/*
 * Open a host context with the global options; `provider` (may be NULL)
 * selects and enables a provider. On failure prints "sbx: <message>" and
 * returns the sbx_status; *out is set only on success.
 */
int cli_open(const struct cli_globals *g, const char *provider, sbx_ctx **out);

/* Names of the capability bits in `caps`, comma-separated, into buf ("-"
 * when none; unknown bits as 0x.. values). Returns buf. */
const char *cli_caps_text(uint64_t caps, char *buf, size_t len);

#endif
