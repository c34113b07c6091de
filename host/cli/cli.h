/*
 * cli.h - what the `sbx` subcommands share: global options, exit codes,
 * error printing and option parsing.
 *
 * Every subcommand is a function `int cmd_X(const struct cli_globals *g,
 * int argc, char **argv)` where argv[0] is the subcommand's name; it returns
 * the process exit status.
 */
#ifndef SBX_CLI_H
#define SBX_CLI_H

#include <sbx/sbx.h>
#include <sbx/manifest.h>
#include <sbx/session.h>

#include <getopt.h>
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
int cmd_create(const struct cli_globals *g, int argc, char **argv);
int cmd_exec(const struct cli_globals *g, int argc, char **argv);
int cmd_read(const struct cli_globals *g, int argc, char **argv);
int cmd_write(const struct cli_globals *g, int argc, char **argv);
int cmd_destroy(const struct cli_globals *g, int argc, char **argv);
int cmd_sessions(const struct cli_globals *g, int argc, char **argv);
int cmd_reconcile(const struct cli_globals *g, int argc, char **argv);
int cmd_pools(const struct cli_globals *g, int argc, char **argv);
int cmd_export(const struct cli_globals *g, int argc, char **argv);
int cmd_memory(const struct cli_globals *g, int argc, char **argv);
int cmd_snapshot(const struct cli_globals *g, int argc, char **argv);
int cmd_restore(const struct cli_globals *g, int argc, char **argv);
int cmd_state(const struct cli_globals *g, int argc, char **argv);
int cmd_resume(const struct cli_globals *g, int argc, char **argv);
int cmd_pause(const struct cli_globals *g, int argc, char **argv);
int cmd_fork(const struct cli_globals *g, int argc, char **argv);
int cmd_mcp(const struct cli_globals *g, int argc, char **argv);
int cmd_health(const struct cli_globals *g, int argc, char **argv);

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

/* Returned by cli_parse_options (and option callbacks) when the command's
 * work is done without running it: the help or the version was printed. */
#define CLI_HELP_SHOWN (-1)

/* Returned by an option callback for an option it does not handle. */
#define CLI_OPTION_UNKNOWN (-2)

/* Called per option of a command's own: c is the getopt result, arg its
 * argument. Returns CLI_EXIT_OK, an exit status (stop), CLI_HELP_SHOWN or
 * CLI_OPTION_UNKNOWN. */
typedef int (*cli_option_fn)(void *ud, int c, const char *arg);

/* The long options every command accepts, and the end of the table: the
 * last entries of a command's longopts. */
#define CLI_COMMON_LONGOPTS                                  \
    {"config", required_argument, NULL, 'c'},                \
    {"help", no_argument, NULL, 'h'},                        \
    {"quiet", no_argument, NULL, CLI_OPT_QUIET},             \
    {"progress", required_argument, NULL, CLI_OPT_PROGRESS}, \
    {NULL, 0, NULL, 0}

/* getopt values of the common long options without a short form. */
#define CLI_OPT_QUIET 0x1001
#define CLI_OPT_PROGRESS 0x1002

/* Progress of long steps on stderr (cli_progress.c): --progress=MODE,
 * --quiet is none. auto: on a terminal, human; else none. */
enum { CLI_PROGRESS_AUTO, CLI_PROGRESS_HUMAN, CLI_PROGRESS_JSON, CLI_PROGRESS_NONE };
/* Set the mode by name; -1 when it is none of auto, human, json, none. */
int cli_progress_set_mode(const char *arg);
/* Show c's progress reports as the mode says (cli_interrupt_setup does it
 * for the run token). */
void cli_progress_attach(sbx_cancel *c);
/* Erase a progress line still on the terminal (before a message, at exit). */
void cli_progress_end(void);

/* How a (sub)command parses its options. Every command accepts -c/--config
 * and -h/--help; its own options go to `own`, except long flags that set an
 * int through the `flag` member of struct option. */
struct cli_command {
    const char *name;              /* for messages; NULL for the top level */
    int usage_status;              /* exit status of a usage error */
    void (*usage)(FILE *f);        /* -h prints this on stdout */
    const char *shortopts;         /* getopt spelling, including "c:h" */
    const struct option *longopts; /* including config and help */
    cli_option_fn own;             /* the command's own options, or NULL */
    void *ud;                      /* passed to own */
    struct cli_globals *globals;   /* -c sets globals->config_path */
};

/*
 * Parse the options of argv[1..argc) (getopt is fully re-initialized;
 * argv[0] is the command's name). Returns CLI_EXIT_OK with optind at the
 * first operand, CLI_HELP_SHOWN after -h (or a callback's), or the exit
 * status of the first bad option (message printed).
 */
int cli_parse_options(const struct cli_command *cmd, int argc, char **argv);

/* CLI_EXIT_OK when argv has no argument from index `next` on; else prints
 * "unexpected argument" and returns cmd's usage status. */
int cli_no_more_arguments(const struct cli_command *cmd, int argc, char **argv,
                          int next);

/* cli_parse_options for a command that takes no operands: an argument left
 * after the options is a usage error. */
int cli_parse_no_operands(const struct cli_command *cmd, int argc, char **argv);

/*
 * Open a host context with the global options; `provider` (may be NULL)
 * selects and enables a provider. On failure prints "sbx: <message>" and
 * returns the sbx_status; *out is set only on success.
 */
int cli_open(const struct cli_globals *g, const char *provider, sbx_ctx **out);

/* Like cli_open, but enabled providers that cannot be loaded do not fail
 * the open (keep_broken_providers): for `sbx providers` and `sbx check`. */
int cli_open_lenient(const struct cli_globals *g, sbx_ctx **out);

/* "none", "container", "vm" (or "unknown") for enum sbx_isolation. */
const char *cli_isolation_text(uint32_t isolation);

/* Names of the capability bits in `caps`, comma-separated, into buf ("-"
 * when none; unknown bits as 0x.. values). Returns buf. */
const char *cli_caps_text(uint64_t caps, char *buf, size_t len);

/* ------------------------------------------------------------------------ */
/* Running one command with live output (cli_exec.c): `run` and `exec`       */
/* ------------------------------------------------------------------------ */

enum cli_stdin_mode { CLI_STDIN_AUTO, CLI_STDIN_ALWAYS, CLI_STDIN_NEVER };

/* What the exec options (-t, -C, -e, -i, --no-stdin) set. env must have
 * room for one entry per argument plus the NULL (entries are borrowed from
 * argv). */
struct cli_exec_options {
    int64_t timeout_ms;
    const char *cwd;
    const char **env; /* NULL-terminated */
    size_t nenv;
    enum cli_stdin_mode stdin_mode;
};

/* The getopt spellings of the exec options, to splice into a command's
 * option tables. 'N' is --no-stdin. */
#define CLI_EXEC_SHORTOPTS "t:C:e:i"
#define CLI_EXEC_LONGOPTS                                \
    {"timeout", required_argument, NULL, 't'},           \
    {"cwd", required_argument, NULL, 'C'},               \
    {"env", required_argument, NULL, 'e'},               \
    {"stdin", no_argument, NULL, 'i'},                   \
    {"no-stdin", no_argument, NULL, 'N'}

/* Help text of the exec options. */
#define CLI_EXEC_OPTIONS_HELP                                                \
    "  -t, --timeout DUR    kill the command's process tree after DUR\n"      \
    "                       seconds (1.5, or with a suffix: 500ms, 2m, 1h);\n" \
    "                       0 means no timeout\n"                             \
    "  -C, --cwd DIR        workspace-relative working directory\n"          \
    "  -e, --env NAME=VALUE set a variable (repeatable); nothing else of\n"   \
    "                       this environment reaches the command\n"          \
    "  -i, --stdin          stream standard input even when it is a terminal\n" \
    "      --no-stdin       give the command an empty standard input\n"      \
    "                       (default: stream it unless it is a terminal)\n"

/* Help text of the exit statuses of a command run with live output. */
#define CLI_EXEC_EXIT_HELP                                                   \
    "Exit status: the command's own; 124 when it timed out; 125 when sbx\n"  \
    "failed; 126 when it cannot be executed; 127 when it was not found;\n"   \
    "128+N when it was killed by signal N (130 after Ctrl-C).\n"

/* Whether "NAME=VALUE" has a NAME of [A-Za-z_][A-Za-z0-9_]*. */
bool cli_env_name_ok(const char *assignment);

/* Parse a duration: a non-negative decimal number of seconds with an
 * optional ms/s/m/h suffix. Returns false when malformed or too large. */
bool cli_parse_duration_ms(const char *text, int64_t *out);

/*
 * Apply getopt result `c` (with its argument) when it is an exec option:
 * returns CLI_EXIT_OK, or a usage error (status 125, as for `run`);
 * CLI_OPTION_UNKNOWN for other options.
 */
int cli_exec_option(const char *cmd, int c, const char *arg,
                    struct cli_exec_options *eo);

/*
 * Install the SIGINT/SIGTERM/SIGHUP/SIGPIPE handling of a command that runs
 * something in a sandbox: the first signal fires cli_run_cancel(), a
 * second one cli_cleanup_cancel(). Returns SBX_OK, or an error (printed).
 * cli_interrupt_teardown restores the default handlers and frees the
 * tokens.
 */
int cli_interrupt_setup(void);
void cli_interrupt_teardown(void);
sbx_cancel *cli_run_cancel(void);
sbx_cancel *cli_cleanup_cancel(void);
/* The signal caught since setup, or 0. */
int cli_caught_signal(void);

/* The exit status after a failure that was already reported: 128+N when
 * signal N was caught (it is what interrupted the call), else 125. */
int cli_failure_status(void);

/* Sleep ms milliseconds; false when a signal interrupted it (after
 * cli_interrupt_setup). */
bool cli_sleep_ms(int64_t ms);

/* One of our descriptors as an sbx_source (cli_input_source): a blocking
 * read gives up (-1) once a signal was caught (after cli_interrupt_setup);
 * it has a poll_fd, and a length when it is a regular file. */
struct cli_input {
    int fd;
};
struct sbx_source cli_input_source(struct cli_input *in);

/*
 * Run cmd in h with stdin/stdout/stderr streamed live and return the exit
 * status by the rules of `sbx run`: the command's own, 124 timeout, 125
 * sbx failed (message printed), 126, 127, 128+N (signal, or interrupted),
 * 141 when our output reader went away. Uses cli_run_cancel().
 */
int cli_exec_streamed(sbx_handle *h, const struct cli_exec_options *eo,
                      char *const *cmd);

/* ------------------------------------------------------------------------ */
/* Session commands (cli_session.c)                                          */
/* ------------------------------------------------------------------------ */

/*
 * Open a host context (provider as for cli_open) and a session manager over
 * the configured store. On failure prints "sbx: <message>", closes what was
 * opened and returns the sbx_status.
 */
int cli_sessions_open(const struct cli_globals *g, const char *provider,
                      sbx_ctx **ctx, sbx_sessions **m);

/* Close what cli_sessions_open opened (NULLs are ignored). */
void cli_sessions_close(sbx_ctx *ctx, sbx_sessions *m);

/*
 * Parse `sbx CMD [OPTIONS] SESSION [OPTIONS] [--] [ARGS...]` as
 * cli_parse_options does, with options accepted before and after the
 * SESSION operand, which must be a non-empty key of at most 1024 bytes. On
 * CLI_EXIT_OK, *key is the session key and *rest the index in argv of the
 * first remaining argument. Returns what cli_parse_options returns, or
 * cmd's usage status after a bad SESSION.
 */
int cli_session_parse(const struct cli_command *cmd, int argc, char **argv,
                      const char **key, int *rest);

/* Print "sbx: <message>" for a failed call and return the exit status of
 * an sbx failure (125), or 128+N when a signal interrupted it. */
int cli_session_failed(int rc, const sbx_error *err);

/* ------------------------------------------------------------------------ */
/* --manifest (cli_manifest.c)                                               */
/* ------------------------------------------------------------------------ */

/* Load the manifest at path (NULL: none, *out NULL) with ctx's grants; an
 * error is printed. */
int cli_manifest_load(sbx_ctx *ctx, const char *path, sbx_manifest **out);

/* A new NULL-terminated environment: the manifest's variables, except those
 * an -e of eo sets, then eo's. The caller frees the array (not the
 * strings); NULL when out of memory. */
const char **cli_manifest_env(const sbx_manifest *m, const struct cli_exec_options *eo);

/* One --port PORT of create or run into ports[*n] (cmd_create.c): a usage
 * error naming cmd for a bad, repeated or 65th port. */
int cli_port_option(const char *cmd, const char *arg, uint16_t ports[SBX_SESSION_PORTS_MAX],
                    size_t *n);

#endif
