/*
 * cmd_proc.h - what the process, file-operation and port commands share
 * (cmd_proc*.c, cmd_fileops.c, cmd_port.c): the commands themselves, the
 * session they work in, signal names, cursors, JSON text, and the
 * interactive terminal loop of `exec -it` and `attach`.
 */
#ifndef SBX_CLI_CMD_PROC_H
#define SBX_CLI_CMD_PROC_H

#include "cli.h"

#include <json-c/json.h>

/* Subcommands. */
int cmd_ps(const struct cli_globals *g, int argc, char **argv);
int cmd_attach(const struct cli_globals *g, int argc, char **argv);
int cmd_logs(const struct cli_globals *g, int argc, char **argv);
int cmd_send(const struct cli_globals *g, int argc, char **argv);
int cmd_kill(const struct cli_globals *g, int argc, char **argv);
int cmd_ls(const struct cli_globals *g, int argc, char **argv);
int cmd_stat(const struct cli_globals *g, int argc, char **argv);
int cmd_mkdir(const struct cli_globals *g, int argc, char **argv);
int cmd_rm(const struct cli_globals *g, int argc, char **argv);
int cmd_mv(const struct cli_globals *g, int argc, char **argv);
int cmd_port(const struct cli_globals *g, int argc, char **argv);

/* An opened session: context, manager and handle. */
struct cli_session {
    sbx_ctx *ctx;
    sbx_sessions *m;
    sbx_handle *h;
};

/* Open the context and session manager and attach the handle of key (the
 * session must exist; nothing is created). On failure prints the message,
 * closes what was opened and returns the exit status (125, or 128+N). */
int cli_session_open_existing(const struct cli_globals *g, const char *key,
                              struct cli_session *s);

/* Release the handle and close the rest (members may be NULL). */
void cli_session_close(struct cli_session *s);

/* A signal by name (TERM, SIGTERM, sigterm) or number (1 to 64, Linux
 * numbering). Returns the number, or 0 when unknown. */
int cli_signal_parse(const char *text);

/* The name of a Linux signal number ("TERM"), or NULL. */
const char *cli_signal_name(int signo);

/* A cursor "OUT" or "OUT,ERR" (decimal); false when malformed. */
bool cli_cursor_parse(const char *text, uint64_t *out, uint64_t *err);

/* Milliseconds: decimal digits only, up to UINT32_MAX. */
bool cli_ms_parse(const char *text, uint32_t *out);

/* A decimal unsigned count with an optional k/m/g suffix (powers of 1024);
 * false when malformed, zero or above max. */
bool cli_size_parse(const char *text, uint64_t max, uint64_t *out);

/* len bytes as a JSON string: invalid UTF-8 bytes become U+FFFD, so the
 * output stays valid JSON. NULL when out of memory. */
json_object *cli_json_text(const void *buf, size_t len);

/* Print o on stdout, pretty, with a newline; frees o. */
void cli_json_print(json_object *o);

/* The largest --max-bytes with --json: the output is held in memory. */
#define CLI_JSON_MAX_BYTES ((uint64_t)64 << 20)

/* A growable buffer sink (for --json): keeps everything written to it;
 * the yield's max_bytes bounds what it is given. */
struct cli_buffer {
    char *data;
    size_t len, cap;
    bool failed;
};
struct sbx_sink cli_buffer_sink(struct cli_buffer *b);

/* The exit status of an ended process as a shell reports it: its exit
 * code, 124 when its timeout killed it, 128+N for signal N. */
int cli_proc_exit_status(int exit_code, int term_signal, int timed_out);

/* The interactive loop shared by `exec -t` and `attach` (cmd_proc_term.c). */
struct cli_term_options {
    sbx_handle *h;
    const char *id;
    bool pty;            /* the process has a terminal: resize it */
    bool forward_stdin;  /* copy our stdin to its stdin */
    bool raw;            /* our stdin is a terminal: raw mode while we run */
    bool close_at_eof;   /* at the end of our stdin close its stdin */
    bool hangup_on_exit; /* a SIGTERM/SIGHUP of ours hangs the process up
                            (SIGHUP), as closing a terminal does; else we
                            only detach */
    uint64_t out_cursor, err_cursor;
};

/* Run the loop until the process ended and its output was copied (returns
 * its exit status), or until we were signalled (128+N; the process keeps
 * running unless hangup_on_exit), or an error (125, message printed). The
 * terminal is restored on every path. Installs and removes its own signal
 * handling (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGWINCH, SIGPIPE). */
int cli_term_run(const struct cli_term_options *o);

/* `exec` with -t, --detach or --yield (cmd_proc_exec.c). */
struct cli_proc_exec_options {
    bool tty;        /* -t */
    bool detach;     /* --detach */
    bool yield;      /* --yield MS */
    uint32_t yield_ms;
    uint64_t max_bytes; /* --max-bytes, 0: default */
    bool json;       /* --json */
};
int cli_proc_exec(sbx_handle *h, const struct cli_exec_options *eo,
                  const struct cli_proc_exec_options *po, char *const *cmd);

/* Print a yield's result: JSON when json (with the buffered output), else
 * the trailer line on stderr. Returns the exit status. */
int cli_yield_report(const struct sbx_proc_yield_result *r, bool json,
                     const struct cli_buffer *out, const struct cli_buffer *err);

#endif
