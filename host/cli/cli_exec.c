/*
 * cli_exec.c - running one command in a sandbox with its output streamed
 * live to our stdout and stderr, shared by `sbx run` and `sbx exec`: the
 * exec options, interruption handling, terminal streams and exit codes.
 *
 * Interruption: SIGINT, SIGTERM and SIGHUP only fire a cancellation token
 * and write a byte to a wake-up pipe (both async-signal-safe). The running
 * call returns SBX_E_CANCELLED after the provider killed the command's
 * process tree; the caller then cleans up and exits 128+signal. A second
 * signal cancels the cleanup itself.
 *
 * Our own stdin source and output sinks may block (a quiet pipe on stdin, a
 * reader that stopped reading our stdout); they poll the wake-up pipe next
 * to their descriptor, so an interruption is noticed whichever thread the
 * signal was delivered to.
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A sink writing to one of our own descriptors. A reader that went away
 * (EPIPE) stops the command, as a pipe would, and is reported quietly. */
struct term_sink {
    int fd;
    bool broken;
};


/* Signal state: written by the handler, read after the calls return. */
static sbx_cancel *run_cancel;     /* cancels create and exec */
static sbx_cancel *cleanup_cancel; /* cancels destroy (second signal) */
static volatile sig_atomic_t caught_signal;
static int wake_pipe[2] = {-1, -1}; /* readable once a signal was caught */

static const int handled_signals[] = {SIGINT, SIGTERM, SIGHUP};
#define NHANDLED (sizeof handled_signals / sizeof handled_signals[0])

bool cli_parse_duration_ms(const char *text, int64_t *out)
{
    /* decimal digits with an optional fraction only: strtod alone would
     * also take 0x10, 1e3, inf and leading spaces */
    size_t whole = strspn(text, "0123456789");
    size_t frac = text[whole] == '.' ? strspn(text + whole + 1, "0123456789") : 0;
    if (whole == 0 || (text[whole] == '.' && frac == 0))
        return false;
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end != text + whole + (frac ? frac + 1 : 0) || errno == ERANGE || !isfinite(v))
        return false;
    double scale;
    if (!strcmp(end, "") || !strcmp(end, "s"))
        scale = 1000.0;
    else if (!strcmp(end, "ms"))
        scale = 1.0;
    else if (!strcmp(end, "m"))
        scale = 60000.0;
    else if (!strcmp(end, "h"))
        scale = 3600000.0;
    else
        return false;
    double ms = v * scale;
    if (ms > 9.0e15)
        return false;
    *out = (int64_t)ms;
    if ((double)*out < ms)
        (*out)++; /* round a fraction of a millisecond up, never to 0 */
    return true;
}

bool cli_env_name_ok(const char *assignment)
{
    size_t n = strspn(assignment, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                  "0123456789_");
    return n > 0 && assignment[n] == '=' && !(assignment[0] >= '0' && assignment[0] <= '9');
}

int cli_exec_option(const char *cmd, int c, const char *arg,
                    struct cli_exec_options *eo)
{
    switch (c) {
    case 't':
        if (!cli_parse_duration_ms(arg, &eo->timeout_ms))
            return cli_usage_error(cmd, CLI_EXIT_SBX,
                                   "invalid --timeout '%s' (expected decimal "
                                   "seconds such as 30 or 1.5, or 500ms, 2m, 1h)",
                                   arg);
        return CLI_EXIT_OK;
    case 'C':
        eo->cwd = arg;
        return CLI_EXIT_OK;
    case 'e':
        if (!cli_env_name_ok(arg))
            return cli_usage_error(cmd, CLI_EXIT_SBX,
                                   "invalid --env '%.*s' (expected NAME=VALUE); a NAME "
                                   "is letters, digits and '_', not starting with a "
                                   "digit",
                                   (int)strcspn(arg, "\n"), arg);
        eo->env[eo->nenv++] = arg;
        return CLI_EXIT_OK;
    case 'i':
        eo->stdin_mode = CLI_STDIN_ALWAYS;
        return CLI_EXIT_OK;
    case 'N':
        eo->stdin_mode = CLI_STDIN_NEVER;
        return CLI_EXIT_OK;
    default:
        return CLI_OPTION_UNKNOWN;
    }
}

static void on_signal(int sig)
{
    int saved = errno;
    if (caught_signal == 0) {
        caught_signal = sig;
        sbx_cancel_fire(run_cancel);
        ssize_t n = write(wake_pipe[1], "!", 1);
        (void)n; /* the pipe only needs to be readable */
    } else {
        sbx_cancel_fire(cleanup_cancel);
    }
    errno = saved;
}

/* Does nothing, so that a write to a closed pipe fails with EPIPE instead of
 * killing us before the sandbox is cleaned up. Unlike SIG_IGN, a handler is
 * reset by exec, so commands still get the default SIGPIPE. */
static void on_sigpipe(int sig)
{
    (void)sig;
}

int cli_interrupt_setup(void)
{
    if (sbx_cancel_new(&run_cancel) != SBX_OK ||
        sbx_cancel_new(&cleanup_cancel) != SBX_OK ||
        pipe2(wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        cli_error("cannot set up interruption: %s", strerror(errno));
        sbx_cancel_free(run_cancel);
        sbx_cancel_free(cleanup_cancel);
        run_cancel = cleanup_cancel = NULL;
        return SBX_E_IO;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < NHANDLED; i++)
        sigaddset(&sa.sa_mask, handled_signals[i]);
    /* No SA_RESTART: a blocked write of ours returns EINTR when the signal
     * lands on this thread; other threads learn of it from the wake pipe. */
    sa.sa_flags = 0;
    sa.sa_handler = on_signal;
    for (size_t i = 0; i < NHANDLED; i++)
        sigaction(handled_signals[i], &sa, NULL);
    sa.sa_handler = on_sigpipe;
    sigaction(SIGPIPE, &sa, NULL);
    cli_progress_attach(run_cancel);
    return SBX_OK;
}

void cli_interrupt_teardown(void)
{
    cli_progress_end();
    /* The handlers use the tokens: put them back before freeing those. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = SIG_DFL;
    for (size_t i = 0; i < NHANDLED; i++)
        sigaction(handled_signals[i], &sa, NULL);
    sigaction(SIGPIPE, &sa, NULL);
    sbx_cancel_free(run_cancel);
    sbx_cancel_free(cleanup_cancel);
    run_cancel = cleanup_cancel = NULL;
    for (int i = 0; i < 2; i++) {
        if (wake_pipe[i] >= 0)
            close(wake_pipe[i]);
        wake_pipe[i] = -1;
    }
}

sbx_cancel *cli_run_cancel(void)
{
    return run_cancel;
}

sbx_cancel *cli_cleanup_cancel(void)
{
    return cleanup_cancel;
}

int cli_caught_signal(void)
{
    return caught_signal;
}

int cli_failure_status(void)
{
    return caught_signal ? CLI_EXIT_SIGNAL + caught_signal : CLI_EXIT_SBX;
}

bool cli_sleep_ms(int64_t ms)
{
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        if (caught_signal)
            return false;
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        int64_t gone = (int64_t)(now.tv_sec - start.tv_sec) * 1000 +
                       (now.tv_nsec - start.tv_nsec) / 1000000;
        if (gone >= ms)
            return true;
        int64_t left = ms - gone;
        struct pollfd pfd = {wake_pipe[0], POLLIN, 0};
        if (poll(&pfd, 1, (int)(left > 60000 ? 60000 : left)) > 0)
            return false;
    }
}

/* Wait until fd is ready for `events` or a signal was caught. Returns 0
 * when ready, SBX_E_CANCELLED when interrupted, SBX_E_IO on error. */
static int wait_ready(int fd, short events)
{
    for (;;) {
        if (caught_signal)
            return SBX_E_CANCELLED;
        struct pollfd pfd[2] = {{fd, events, 0}, {wake_pipe[0], POLLIN, 0}};
        int n = poll(pfd, 2, -1);
        if (n < 0 && errno != EINTR)
            return SBX_E_IO;
        if (n > 0 && pfd[1].revents)
            return SBX_E_CANCELLED;
        if (n > 0 && pfd[0].revents)
            return SBX_OK; /* ready, or an error/hangup the next call reports */
    }
}

static int term_write(void *ctx, const void *buf, size_t len)
{
    struct term_sink *t = ctx;
    const char *p = buf;
    while (len > 0) {
        int rc = wait_ready(t->fd, POLLOUT);
        if (rc != SBX_OK)
            return rc;
        ssize_t n = write(t->fd, p, len);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            if (errno == EPIPE)
                t->broken = true;
            return SBX_E_IO;
        }
        p += n;
        len -= (size_t)n;
    }
    return SBX_OK;
}

static long term_read(void *ctx, void *buf, size_t cap)
{
    struct cli_input *t = ctx;
    for (;;) {
        if (wait_ready(t->fd, POLLIN) != SBX_OK)
            return -1; /* interrupted: the exec is being cancelled anyway */
        ssize_t n = read(t->fd, buf, cap);
        if (n >= 0)
            return (long)n;
        if (errno != EINTR && errno != EAGAIN)
            return -1;
    }
}

/* stdin may stay open and quiet after the command exits: telling the
 * provider which fd to poll lets it stop without waiting for input. */
static int term_poll_fd(void *ctx)
{
    const struct cli_input *t = ctx;
    return t->fd;
}

/* Known only for a regular file: what is left from the current offset. */
static int64_t term_length(void *ctx)
{
    const struct cli_input *t = ctx;
    struct stat st;
    if (fstat(t->fd, &st) != 0 || !S_ISREG(st.st_mode))
        return -1;
    off_t pos = lseek(t->fd, 0, SEEK_CUR);
    return pos < 0 || pos > st.st_size ? -1 : (int64_t)(st.st_size - pos);
}

struct sbx_source cli_input_source(struct cli_input *in)
{
    struct sbx_source s = {.size = sizeof(struct sbx_source), .ctx = in,
                           .read = term_read, .poll_fd = term_poll_fd,
                           .length = term_length};
    return s;
}

/* The exit status for a finished exec (rc is its sbx_status). */
static int exec_exit_status(int rc, const struct sbx_exec_result *res,
                            const sbx_error *err, const struct term_sink *out,
                            const struct term_sink *errs)
{
    if (caught_signal)
        return CLI_EXIT_SIGNAL + caught_signal;
    switch (rc) {
    case SBX_OK:
        if (res->timed_out)
            return CLI_EXIT_TIMEOUT;
        if (res->term_signal > 0)
            return CLI_EXIT_SIGNAL + res->term_signal;
        return res->exit_code;
    case SBX_E_TIMEOUT:
        return CLI_EXIT_TIMEOUT;
    case SBX_E_NOT_EXEC:
        cli_error("%s", err->message);
        return CLI_EXIT_NOT_EXEC;
    case SBX_E_NO_COMMAND:
        cli_error("%s", err->message);
        return CLI_EXIT_NOT_FOUND;
    default:
        if (out->broken || errs->broken)
            return CLI_EXIT_SIGNAL + SIGPIPE; /* what a shell reports */
        cli_error("%s", err->message[0] ? err->message : sbx_strerror(rc));
        return CLI_EXIT_SBX;
    }
}

int cli_exec_streamed(sbx_handle *h, const struct cli_exec_options *eo,
                      char *const *cmd)
{
    if (caught_signal)
        return CLI_EXIT_SIGNAL + caught_signal; /* interrupted before exec */
    struct cli_input in_t = {0};
    struct sbx_source in = {.size = sizeof(struct sbx_source), .ctx = &in_t, .read = term_read,
                            .poll_fd = term_poll_fd};
    bool use_stdin = eo->stdin_mode == CLI_STDIN_ALWAYS ||
                     (eo->stdin_mode == CLI_STDIN_AUTO && !isatty(0));
    struct term_sink out_t = {1, false}, err_t = {2, false};
    struct sbx_sink out = SBX_SINK_INIT(&out_t, term_write), errs = SBX_SINK_INIT(&err_t, term_write);
    struct sbx_exec_args args;
    memset(&args, 0, sizeof args);
    args.size = sizeof args;
    args.argv = (const char *const *)cmd;
    args.env = eo->nenv ? eo->env : NULL;
    args.cwd = eo->cwd;
    args.in = use_stdin ? &in : NULL;
    args.timeout_ms = eo->timeout_ms;
    args.out = &out;
    args.err = &errs;
    struct sbx_exec_result res;
    memset(&res, 0, sizeof res);
    res.size = sizeof res;
    sbx_error exec_err;
    sbx_error_clear(&exec_err);
    int rc = sbx_exec(h, &args, &res, run_cancel, &exec_err);
    return exec_exit_status(rc, &res, &exec_err, &out_t, &err_t);
}
