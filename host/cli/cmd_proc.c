/*
 * cmd_proc.c - the commands on a session's processes (SBX_CAP_PROCESSES):
 *
 *   sbx ps SESSION [--json]
 *   sbx attach SESSION ID [--since OUT[,ERR]] [--no-stdin]
 *   sbx logs SESSION ID [--since OUT[,ERR]] [--follow]
 *   sbx send SESSION ID [--close] [--yield MS [--max-bytes N] [--since C] [--json]]
 *   sbx kill SESSION ID [-s SIGNAL]
 *
 * A process id is the provider's; it stays valid for any sbx process, so
 * each command attaches the session and names the process again. Output
 * is read by byte cursor from the process's replay buffer: a cursor that
 * fell behind it resumes at the oldest byte kept and the bytes skipped
 * are reported on stderr, exactly.
 */
#include "cmd_proc.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Options shared by the commands of this file. */
struct proc_args {
    const char *cmd;
    bool json, follow, close_stdin, no_stdin, since_set, yield;
    uint64_t out_cursor, err_cursor;
    uint32_t yield_ms;
    uint64_t max_bytes;
    int signo;
};

enum {
    OPT_JSON = 0x100,
    OPT_SINCE,
    OPT_FOLLOW,
    OPT_CLOSE,
    OPT_YIELD,
    OPT_MAX_BYTES,
    OPT_NO_STDIN
};

static int on_option(void *ud, int c, const char *arg)
{
    struct proc_args *a = ud;
    switch (c) {
    case OPT_JSON:
        a->json = true;
        return CLI_EXIT_OK;
    case OPT_SINCE:
        if (!cli_cursor_parse(arg, &a->out_cursor, &a->err_cursor))
            return cli_usage_error(a->cmd, CLI_EXIT_SBX,
                                   "invalid --since '%s' (expected a cursor OUT or "
                                   "OUT,ERR: byte counts of stdout and stderr)",
                                   arg);
        a->since_set = true;
        return CLI_EXIT_OK;
    case 'f':
    case OPT_FOLLOW:
        a->follow = true;
        return CLI_EXIT_OK;
    case OPT_CLOSE:
        a->close_stdin = true;
        return CLI_EXIT_OK;
    case OPT_NO_STDIN:
        a->no_stdin = true;
        return CLI_EXIT_OK;
    case OPT_YIELD:
        if (!cli_ms_parse(arg, &a->yield_ms))
            return cli_usage_error(a->cmd, CLI_EXIT_SBX,
                                   "invalid --yield '%s' (expected milliseconds, 0 "
                                   "to 4294967295)",
                                   arg);
        a->yield = true;
        return CLI_EXIT_OK;
    case OPT_MAX_BYTES:
        if (!cli_size_parse(arg, (uint64_t)1 << 40, &a->max_bytes))
            return cli_usage_error(a->cmd, CLI_EXIT_SBX,
                                   "invalid --max-bytes '%s' (expected a count of "
                                   "bytes, 1 or more, with an optional k, m or g)",
                                   arg);
        return CLI_EXIT_OK;
    case 's':
        a->signo = cli_signal_parse(arg);
        if (!a->signo)
            return cli_usage_error(a->cmd, CLI_EXIT_SBX,
                                   "unknown signal '%s' (a name such as TERM, SIGINT, "
                                   "kill, or a number 1 to 64)",
                                   arg);
        return CLI_EXIT_OK;
    default:
        return CLI_OPTION_UNKNOWN;
    }
}

/* Parse `sbx CMD [OPTIONS] SESSION [ID]`: *id is NULL for ps. */
static int parse(const struct cli_command *cmd, int argc, char **argv, bool want_id,
                 const char **key, const char **id)
{
    int rest = 0;
    int status = cli_session_parse(cmd, argc, argv, key, &rest);
    if (status != CLI_EXIT_OK)
        return status;
    if (want_id) {
        if (rest >= argc)
            return cli_usage_error(cmd->name, cmd->usage_status,
                                   "missing ID (the process id that 'sbx exec "
                                   "--detach' printed, or 'sbx ps' lists)");
        *id = argv[rest++];
        /* options may follow the id too */
        int k = rest - 1;
        status = cli_parse_options(cmd, argc - k, argv + k);
        if (status != CLI_EXIT_OK)
            return status;
        rest = k + optind;
    }
    return cli_no_more_arguments(cmd, argc, argv, rest);
}

/* ---- ps ------------------------------------------------------------------ */

static void ps_usage(FILE *f)
{
    fputs("Usage: sbx ps [OPTIONS] SESSION\n"
          "\n"
          "List the processes of session SESSION's sandbox (started with\n"
          "'sbx exec --detach', '--yield' or '-t'), running and ended, in start\n"
          "order: ID, STATE (running, exit N, signal NAME), PTY, STARTED (UTC)\n"
          "and COMMAND.\n"
          "\n"
          "Options:\n"
          "      --json         one JSON array of objects\n"
          "  -c, --config FILE  read this configuration file\n"
          "  -h, --help         show this help\n"
          "\n"
          "Exit status: 0, or 125 when sbx failed.\n", f);
}

struct ps_state {
    bool json, header_done;
    json_object *array;
};

static void ps_header(struct ps_state *st)
{
    if (!st->json && !st->header_done)
        printf("%-24s %-12s %-4s %-20s %s\n", "ID", "STATE", "PTY", "STARTED", "COMMAND");
    st->header_done = true;
}

/* Control bytes of a table cell shown as '?'. */
static void print_cell(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        putchar(*p < 0x20 || *p == 0x7f ? '?' : *p);
}

static int ps_entry(void *ctx, const struct sbx_proc_info *info)
{
    struct ps_state *st = ctx;
    bool ended = info->state == SBX_PROC_EXITED;
    const char *command = info->command ? info->command : "";
    if (st->json) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "id", json_object_new_string(info->id));
        json_object_object_add(o, "command", cli_json_text(command, strlen(command)));
        json_object_object_add(o, "running", json_object_new_boolean(!ended));
        json_object_object_add(o, "exit_code",
                               ended && info->term_signal == 0
                                   ? json_object_new_int(info->exit_code)
                                   : NULL);
        json_object_object_add(o, "signal",
                               ended && info->term_signal > 0
                                   ? json_object_new_int(info->term_signal)
                                   : NULL);
        json_object_object_add(o, "pty",
                               json_object_new_boolean(info->flags & SBX_PROC_PTY));
        json_object_object_add(o, "started_ms",
                               info->started_ms ? json_object_new_int64(info->started_ms)
                                                : NULL);
        json_object_array_add(st->array, o);
        return SBX_OK;
    }
    ps_header(st);
    char state[32], started[32] = "-";
    if (!ended)
        snprintf(state, sizeof state, "running");
    else if (info->term_signal > 0) {
        const char *name = cli_signal_name(info->term_signal);
        if (name)
            snprintf(state, sizeof state, "signal %s", name);
        else
            snprintf(state, sizeof state, "signal %d", info->term_signal);
    } else
        snprintf(state, sizeof state, "exit %d", info->exit_code);
    if (info->started_ms > 0) {
        time_t t = (time_t)(info->started_ms / 1000);
        struct tm tm;
        if (gmtime_r(&t, &tm))
            strftime(started, sizeof started, "%Y-%m-%d %H:%M:%S", &tm);
    }
    printf("%-24s %-12s %-4s %-20s ", info->id, state,
           info->flags & SBX_PROC_PTY ? "yes" : "no", started);
    print_cell(command);
    putchar('\n');
    return SBX_OK;
}

int cmd_ps(const struct cli_globals *g, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"json", no_argument, NULL, OPT_JSON},
        CLI_COMMON_LONGOPTS,
    };
    struct cli_globals globals = *g;
    struct proc_args a = {.cmd = "ps"};
    const struct cli_command cmd = {"ps", CLI_EXIT_SBX, ps_usage, "+:c:h", longopts,
                                    on_option, &a, &globals};
    const char *key = NULL, *id = NULL;
    int status = parse(&cmd, argc, argv, false, &key, &id);
    if (status != CLI_EXIT_OK)
        return status == CLI_HELP_SHOWN ? CLI_EXIT_OK : status;
    struct cli_session s;
    if ((status = cli_session_open_existing(&globals, key, &s)) != CLI_EXIT_OK)
        return status;
    struct ps_state st = {a.json, false, a.json ? json_object_new_array() : NULL};
    struct sbx_proc_list_sink sink = {sizeof sink, &st, ps_entry};
    sbx_error err;
    int rc = sbx_proc_list(s.h, &sink, NULL, &err);
    if (rc == SBX_OK && !a.json)
        ps_header(&st); /* a table without rows still has its header */
    if (rc == SBX_OK && a.json)
        cli_json_print(st.array);
    else if (st.array)
        json_object_put(st.array);
    status = rc == SBX_OK ? CLI_EXIT_OK : cli_session_failed(rc, &err);
    cli_session_close(&s);
    return status;
}

/* ---- kill ---------------------------------------------------------------- */

static void kill_usage(FILE *f)
{
    fputs("Usage: sbx kill [OPTIONS] SESSION ID\n"
          "\n"
          "Send a signal to process ID of session SESSION's sandbox: to its\n"
          "process group, or with a terminal to the terminal's foreground group.\n"
          "A process that already ended is left alone (success).\n"
          "\n"
          "Options:\n"
          "  -s, --signal SIG   the signal: a name (TERM, SIGTERM, int, KILL, ...)\n"
          "                     or a number 1 to 64 (Linux numbering); default TERM\n"
          "  -c, --config FILE  read this configuration file\n"
          "  -h, --help         show this help\n"
          "\n"
          "Exit status: 0, or 125 when sbx failed (no such process included).\n", f);
}

int cmd_kill(const struct cli_globals *g, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"signal", required_argument, NULL, 's'},
        CLI_COMMON_LONGOPTS,
    };
    struct cli_globals globals = *g;
    struct proc_args a = {.cmd = "kill", .signo = 15};
    const struct cli_command cmd = {"kill", CLI_EXIT_SBX, kill_usage, "+:s:c:h",
                                    longopts, on_option, &a, &globals};
    const char *key = NULL, *id = NULL;
    int status = parse(&cmd, argc, argv, true, &key, &id);
    if (status != CLI_EXIT_OK)
        return status == CLI_HELP_SHOWN ? CLI_EXIT_OK : status;
    struct cli_session s;
    if ((status = cli_session_open_existing(&globals, key, &s)) != CLI_EXIT_OK)
        return status;
    sbx_error err;
    int rc = sbx_proc_signal(s.h, id, a.signo, NULL, &err);
    status = rc == SBX_OK ? CLI_EXIT_OK : cli_session_failed(rc, &err);
    cli_session_close(&s);
    return status;
}

/* ---- logs ---------------------------------------------------------------- */

static void logs_usage(FILE *f)
{
    fputs("Usage: sbx logs [OPTIONS] SESSION ID\n"
          "\n"
          "Copy the output of process ID of session SESSION's sandbox, as its\n"
          "replay buffer keeps it, to standard output (its stdout, or its\n"
          "terminal) and standard error (its stderr). When the cursor is older\n"
          "than the oldest byte kept, the output resumes there and the number\n"
          "of bytes dropped is printed on standard error.\n"
          "\n"
          "Options:\n"
          "      --since OUT[,ERR]  start at these byte cursors (as 'sbx exec\n"
          "                         --yield' prints them); default 0,0\n"
          "  -f, --follow           keep copying until the process ended and all\n"
          "                         its output was copied\n"
          "  -c, --config FILE      read this configuration file\n"
          "  -h, --help             show this help\n"
          "\n"
          "Exit status: 0; 125 when sbx failed; 128+N when interrupted by\n"
          "signal N.\n", f);
}

/* A sink to one of our descriptors that notes a reader that went away
 * (EPIPE: `sbx logs ... | head` stops quietly, 141, as a pipe would). */
struct out_sink {
    int fd;
    bool broken;
};

static int out_write(void *ctx, const void *buf, size_t len)
{
    struct out_sink *o = ctx;
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(o->fd, p, len);
        if (n < 0 && errno == EINTR && !cli_caught_signal())
            continue;
        if (n < 0) {
            if (errno == EPIPE)
                o->broken = true;
            sbx_stream_error("cannot write the output: %s", strerror(errno));
            return SBX_E_IO;
        }
        p += n;
        len -= (size_t)n;
    }
    return SBX_OK;
}

static int logs_copy(sbx_handle *h, const char *id, uint64_t out_cursor,
                     uint64_t err_cursor, bool follow)
{
    struct out_sink o = {1, false}, e = {2, false};
    struct sbx_sink out = SBX_SINK_INIT(&o, out_write), errs = SBX_SINK_INIT(&e, out_write);
    for (;;) {
        struct sbx_proc_read_args a;
        memset(&a, 0, sizeof a);
        a.size = sizeof a;
        a.wait_ms = follow ? 1000 : 0;
        a.out_cursor = out_cursor;
        a.err_cursor = err_cursor;
        a.max_bytes = (uint64_t)1 << 20;
        a.out = &out;
        a.err = &errs;
        struct sbx_proc_read_result r;
        memset(&r, 0, sizeof r);
        r.size = sizeof r;
        sbx_error err;
        int rc = sbx_proc_read(h, id, &a, &r, cli_run_cancel(), &err);
        if (rc != SBX_OK && (o.broken || e.broken))
            return CLI_EXIT_SIGNAL + SIGPIPE; /* what a shell reports */
        if (rc != SBX_OK)
            return cli_session_failed(rc, &err);
        if (r.out_lost)
            cli_error("%llu bytes of stdout were dropped by the replay buffer "
                      "(cursor %llu fell behind it); resuming at %llu",
                      (unsigned long long)r.out_lost, (unsigned long long)out_cursor,
                      (unsigned long long)(out_cursor + r.out_lost));
        if (r.err_lost)
            cli_error("%llu bytes of stderr were dropped by the replay buffer "
                      "(cursor %llu fell behind it); resuming at %llu",
                      (unsigned long long)r.err_lost, (unsigned long long)err_cursor,
                      (unsigned long long)(err_cursor + r.err_lost));
        bool moved = r.out_cursor != out_cursor || r.err_cursor != err_cursor;
        out_cursor = r.out_cursor;
        err_cursor = r.err_cursor;
        if (r.eof || (!follow && !moved))
            return CLI_EXIT_OK;
        if (cli_caught_signal())
            return cli_failure_status();
    }
}

int cmd_logs(const struct cli_globals *g, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"since", required_argument, NULL, OPT_SINCE},
        {"follow", no_argument, NULL, OPT_FOLLOW},
        CLI_COMMON_LONGOPTS,
    };
    struct cli_globals globals = *g;
    struct proc_args a = {.cmd = "logs"};
    const struct cli_command cmd = {"logs", CLI_EXIT_SBX, logs_usage, "+:fc:h",
                                    longopts, on_option, &a, &globals};
    const char *key = NULL, *id = NULL;
    int status = parse(&cmd, argc, argv, true, &key, &id);
    if (status != CLI_EXIT_OK)
        return status == CLI_HELP_SHOWN ? CLI_EXIT_OK : status;
    if (cli_interrupt_setup() != SBX_OK)
        return CLI_EXIT_SBX;
    struct cli_session s;
    if ((status = cli_session_open_existing(&globals, key, &s)) == CLI_EXIT_OK) {
        status = logs_copy(s.h, id, a.out_cursor, a.err_cursor, a.follow);
        cli_session_close(&s);
    }
    cli_interrupt_teardown();
    return status;
}

/* ---- send ---------------------------------------------------------------- */

static void send_usage(FILE *f)
{
    fputs("Usage: sbx send [OPTIONS] SESSION ID < INPUT\n"
          "\n"
          "Copy standard input to the stdin of process ID of session SESSION's\n"
          "sandbox (for a terminal, as typed keys: \"\\003\" is Ctrl-C).\n"
          "\n"
          "Options:\n"
          "      --close          close the process's stdin after the input (its\n"
          "                       EOF; on a terminal the EOF key)\n"
          "      --yield MS       then wait up to MS milliseconds and print the\n"
          "                       output that came, the process's exit status when\n"
          "                       it ended, else the cursors to continue from\n"
          "      --since OUT[,ERR] with --yield: print output from these cursors\n"
          "                       (default: only what comes after this input)\n"
          "      --max-bytes N    with --yield: at most N bytes per stream\n"
          "                       (k, m suffixes; default 64k)\n"
          "      --json           with --yield: one JSON object (as exec --yield)\n"
          "  -c, --config FILE    read this configuration file\n"
          "  -h, --help           show this help\n"
          "\n"
          "Exit status: 0 (with --yield: the process's own when it ended); 125\n"
          "when sbx failed; 128+N when interrupted by signal N.\n", f);
}

#define SEND_CHUNK 65536

/* Move the cursors to the end of what the process wrote so far, so that a
 * yield after the input shows what the input brought. */
static int skip_to_end(sbx_handle *h, const char *id, uint64_t *out, uint64_t *errc,
                       sbx_error *err)
{
    for (;;) {
        struct sbx_proc_read_args a;
        memset(&a, 0, sizeof a);
        a.size = sizeof a;
        a.out_cursor = *out;
        a.err_cursor = *errc;
        a.max_bytes = (uint64_t)1 << 20;
        struct sbx_proc_read_result r;
        memset(&r, 0, sizeof r);
        r.size = sizeof r;
        int rc = sbx_proc_read(h, id, &a, &r, cli_run_cancel(), err);
        if (rc != SBX_OK)
            return rc;
        bool moved = r.out_cursor != *out || r.err_cursor != *errc;
        *out = r.out_cursor;
        *errc = r.err_cursor;
        if (!moved || r.eof)
            return SBX_OK;
    }
}

static int send_input(sbx_handle *h, const char *id, const struct proc_args *a)
{
    sbx_error err;
    int rc = SBX_OK;
    uint64_t out_cursor = a->out_cursor, err_cursor = a->err_cursor;
    if (a->yield && !a->since_set &&
        (rc = skip_to_end(h, id, &out_cursor, &err_cursor, &err)) != SBX_OK)
        return cli_session_failed(rc, &err);
    char *buf = malloc(SEND_CHUNK);
    if (!buf) {
        cli_error("out of memory");
        return CLI_EXIT_SBX;
    }
    struct cli_input in = {0};
    struct sbx_source src = cli_input_source(&in);
    for (;;) {
        long n = src.read(src.ctx, buf, SEND_CHUNK);
        if (n < 0) {
            free(buf);
            if (cli_caught_signal())
                return cli_failure_status();
            cli_error("cannot read standard input: %s", strerror(errno));
            return CLI_EXIT_SBX;
        }
        if (n == 0)
            break;
        rc = sbx_proc_write(h, id, buf, (size_t)n, 0, cli_run_cancel(), &err);
        if (rc != SBX_OK) {
            free(buf);
            return cli_session_failed(rc, &err);
        }
    }
    free(buf);
    uint32_t flags = a->close_stdin ? SBX_PROC_WRITE_CLOSE : 0;
    if (!a->yield) {
        if (flags && (rc = sbx_proc_write(h, id, NULL, 0, flags, cli_run_cancel(), &err)) !=
                         SBX_OK)
            return cli_session_failed(rc, &err);
        return CLI_EXIT_OK;
    }
    int ofd = 1, efd = 2;
    struct cli_buffer bo = {0}, be = {0};
    struct sbx_sink out = a->json ? cli_buffer_sink(&bo) : sbx_fd_sink(&ofd);
    struct sbx_sink errs = a->json ? cli_buffer_sink(&be) : sbx_fd_sink(&efd);
    struct sbx_proc_yield_args ya;
    memset(&ya, 0, sizeof ya);
    ya.size = sizeof ya;
    ya.yield_ms = a->yield_ms;
    ya.max_bytes = a->max_bytes;
    ya.out_cursor = out_cursor;
    ya.err_cursor = err_cursor;
    ya.out = &out;
    ya.err = &errs;
    struct sbx_proc_yield_result r;
    memset(&r, 0, sizeof r);
    r.size = sizeof r;
    rc = sbx_proc_send_yield(h, id, NULL, 0, flags, &ya, &r, cli_run_cancel(), &err);
    int status = rc == SBX_OK ? cli_yield_report(&r, a->json, &bo, &be)
                              : cli_session_failed(rc, &err);
    free(bo.data);
    free(be.data);
    return status;
}

int cmd_send(const struct cli_globals *g, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"close", no_argument, NULL, OPT_CLOSE},
        {"yield", required_argument, NULL, OPT_YIELD},
        {"since", required_argument, NULL, OPT_SINCE},
        {"max-bytes", required_argument, NULL, OPT_MAX_BYTES},
        {"json", no_argument, NULL, OPT_JSON},
        CLI_COMMON_LONGOPTS,
    };
    struct cli_globals globals = *g;
    struct proc_args a = {.cmd = "send"};
    const struct cli_command cmd = {"send", CLI_EXIT_SBX, send_usage, "+:c:h", longopts,
                                    on_option, &a, &globals};
    const char *key = NULL, *id = NULL;
    int status = parse(&cmd, argc, argv, true, &key, &id);
    if (status == CLI_EXIT_OK && a.json && a.max_bytes > CLI_JSON_MAX_BYTES)
        status = cli_usage_error("send", CLI_EXIT_SBX,
                                 "--max-bytes above 64m with --json (the output is held "
                                 "in memory for the JSON object)");
    if (status == CLI_EXIT_OK && !a.yield && (a.json || a.max_bytes || a.since_set))
        status = cli_usage_error("send", CLI_EXIT_SBX, "--%s needs --yield",
                                 a.json ? "json" : a.max_bytes ? "max-bytes" : "since");
    if (status != CLI_EXIT_OK)
        return status == CLI_HELP_SHOWN ? CLI_EXIT_OK : status;
    if (cli_interrupt_setup() != SBX_OK)
        return CLI_EXIT_SBX;
    struct cli_session s;
    if ((status = cli_session_open_existing(&globals, key, &s)) == CLI_EXIT_OK) {
        status = send_input(s.h, id, &a);
        cli_session_close(&s);
    }
    cli_interrupt_teardown();
    return status;
}

/* ---- attach -------------------------------------------------------------- */

static void attach_usage(FILE *f)
{
    fputs("Usage: sbx attach [OPTIONS] SESSION ID\n"
          "\n"
          "Connect to process ID of session SESSION's sandbox, from any sbx\n"
          "process (the one that started it may be gone): its output from the\n"
          "cursor on (what its replay buffer kept) to standard output, standard\n"
          "input to it. With a terminal on standard input it is interactive: raw\n"
          "mode, the window size followed, every key sent. SIGTERM or SIGHUP\n"
          "detach (the process keeps running); the end of the process ends it.\n"
          "\n"
          "Options:\n"
          "      --since OUT[,ERR]  start at these byte cursors (default 0,0: all\n"
          "                         that is kept)\n"
          "      --no-stdin         only show the output\n"
          "  -c, --config FILE      read this configuration file\n"
          "  -h, --help             show this help\n"
          "\n"
          "Exit status: the process's own once it ended (124 timed out, 128+N\n"
          "killed by signal N); 128+N when detached by signal N; 125 when sbx\n"
          "failed.\n", f);
}

struct find_proc {
    const char *id;
    bool found, pty;
};

static int find_entry(void *ctx, const struct sbx_proc_info *info)
{
    struct find_proc *f = ctx;
    if (!strcmp(info->id, f->id)) {
        f->found = true;
        f->pty = (info->flags & SBX_PROC_PTY) != 0;
    }
    return SBX_OK;
}

int cmd_attach(const struct cli_globals *g, int argc, char **argv)
{
    static const struct option longopts[] = {
        {"since", required_argument, NULL, OPT_SINCE},
        {"no-stdin", no_argument, NULL, OPT_NO_STDIN},
        CLI_COMMON_LONGOPTS,
    };
    struct cli_globals globals = *g;
    struct proc_args a = {.cmd = "attach"};
    const struct cli_command cmd = {"attach", CLI_EXIT_SBX, attach_usage, "+:c:h",
                                    longopts, on_option, &a, &globals};
    const char *key = NULL, *id = NULL;
    int status = parse(&cmd, argc, argv, true, &key, &id);
    if (status != CLI_EXIT_OK)
        return status == CLI_HELP_SHOWN ? CLI_EXIT_OK : status;
    struct cli_session s;
    if ((status = cli_session_open_existing(&globals, key, &s)) != CLI_EXIT_OK)
        return status;
    struct find_proc f = {id, false, false};
    struct sbx_proc_list_sink sink = {sizeof sink, &f, find_entry};
    sbx_error err;
    int rc = sbx_proc_list(s.h, &sink, NULL, &err);
    if (rc != SBX_OK) {
        status = cli_session_failed(rc, &err);
    } else if (!f.found) {
        cli_error("the session's sandbox has no process \"%.*s\" ('sbx ps' lists them)",
                  (int)strcspn(id, "\n"), id);
        status = CLI_EXIT_SBX;
    } else {
        bool tty_in = isatty(0);
        struct cli_term_options o = {
            .h = s.h,
            .id = id,
            .pty = f.pty,
            .forward_stdin = !a.no_stdin,
            .raw = !a.no_stdin && tty_in && f.pty,
            .close_at_eof = false, /* our EOF is not the process's */
            .hangup_on_exit = false,
            .out_cursor = a.out_cursor,
            .err_cursor = a.err_cursor,
        };
        status = cli_term_run(&o);
    }
    cli_session_close(&s);
    return status;
}
