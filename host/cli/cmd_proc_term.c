/*
 * cmd_proc_term.c - the interactive terminal of `sbx exec -t` and
 * `sbx attach`: our stdin copied to the process's stdin, its output to our
 * stdout and stderr, our window size to its PTY.
 *
 * Two threads: this one polls our stdin, a self-pipe of signals and the
 * output thread's "done" pipe; the output thread reads the process's
 * output after its cursors (proc_read returns at the first bytes, so a
 * keystroke's echo is written as soon as it arrives) until the end.
 *
 * With raw set our terminal is in raw mode while the loop runs: every key,
 * Ctrl-C and Ctrl-D included, reaches the process as a byte, and the
 * process's own terminal does the line discipline. The saved attributes
 * are put back on every way out: the end of the process, an error, our
 * SIGTERM or SIGHUP (handlers only note the signal; the loop restores and
 * returns), and exit() through an atexit hook as a last resort. SIGKILL
 * cannot be caught: `stty sane` (or `reset`) then repairs the terminal.
 */
#include "cmd_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

/* Bytes of our stdin per proc_write: one keystroke at a time when typed,
 * a paste in chunks of this size. */
#define TERM_CHUNK 65536

/* Output read per proc_read and stream. */
#define TERM_READ_MAX ((uint64_t)256 << 10)

static struct termios saved_termios;
static volatile sig_atomic_t termios_saved;
static int sig_pipe[2] = {-1, -1};
static volatile sig_atomic_t term_signal_caught;
static volatile sig_atomic_t winch_pending;
static volatile sig_atomic_t forward_pending; /* SIGINT/SIGQUIT to pass on */
static bool forward_signals;                  /* exec: pass them on */
static sbx_cancel *write_cancel; /* fired by SIGTERM/SIGHUP: a blocked write ends */

static void restore_terminal(void)
{
    if (termios_saved) {
        tcsetattr(0, TCSAFLUSH, &saved_termios);
        termios_saved = 0;
    }
}

static void on_term_signal(int sig)
{
    int saved = errno;
    if (sig == SIGWINCH) {
        winch_pending = 1;
    } else if ((sig == SIGINT || sig == SIGQUIT) && forward_signals) {
        forward_pending = sig;
    } else if (term_signal_caught == 0) {
        term_signal_caught = sig;
        sbx_cancel_fire(write_cancel);
    }
    ssize_t n = write(sig_pipe[1], "!", 1);
    (void)n; /* only needs to be readable */
    errno = saved;
}

static void on_sigpipe(int sig)
{
    (void)sig; /* a closed stdout is an EPIPE error, not our death */
}

static const int term_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGWINCH};
#define NTERM_SIGNALS (sizeof term_signals / sizeof term_signals[0])

static int signals_setup(bool forward)
{
    if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) != 0 ||
        sbx_cancel_new(&write_cancel) != SBX_OK)
        return -1;
    term_signal_caught = 0;
    winch_pending = 0;
    forward_pending = 0;
    forward_signals = forward;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_term_signal;
    for (size_t i = 0; i < NTERM_SIGNALS; i++)
        sigaction(term_signals[i], &sa, NULL);
    sa.sa_handler = on_sigpipe;
    sigaction(SIGPIPE, &sa, NULL);
    return 0;
}

static void signals_teardown(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = SIG_DFL;
    for (size_t i = 0; i < NTERM_SIGNALS; i++)
        sigaction(term_signals[i], &sa, NULL);
    sigaction(SIGPIPE, &sa, NULL);
    sbx_cancel_free(write_cancel);
    write_cancel = NULL;
    for (int i = 0; i < 2; i++) {
        if (sig_pipe[i] >= 0)
            close(sig_pipe[i]);
        sig_pipe[i] = -1;
    }
}

static int raw_mode(void)
{
    static bool hooked;
    if (tcgetattr(0, &saved_termios) != 0)
        return -1;
    if (!hooked) {
        atexit(restore_terminal);
        hooked = true;
    }
    termios_saved = 1;
    struct termios raw = saved_termios;
    cfmakeraw(&raw);
    return tcsetattr(0, TCSAFLUSH, &raw);
}

/* Our window size: of stdin, else stdout (a terminal either way). */
static bool window_size(unsigned *rows, unsigned *cols)
{
    struct winsize ws;
    if (ioctl(0, TIOCGWINSZ, &ws) != 0 && ioctl(1, TIOCGWINSZ, &ws) != 0)
        return false;
    if (ws.ws_row == 0 || ws.ws_col == 0)
        return false;
    *rows = ws.ws_row;
    *cols = ws.ws_col;
    return true;
}

/* Write all of buf to fd (blocking descriptors). */
static int write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN) {
                struct pollfd pfd = {fd, POLLOUT, 0};
                poll(&pfd, 1, 100);
                continue;
            }
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

struct fd_sink {
    int fd;
};

static int fd_write(void *ctx, const void *buf, size_t len)
{
    struct fd_sink *f = ctx;
    if (write_all(f->fd, buf, len) != 0) {
        sbx_stream_error("cannot write the output: %s", strerror(errno));
        return SBX_E_IO;
    }
    return SBX_OK;
}

/* The output thread's state. */
struct reader {
    sbx_handle *h;
    const char *id;
    sbx_cancel *cancel;
    uint64_t out_cursor, err_cursor;
    int done_fd;  /* written once when the thread ends */
    int rc;       /* SBX_OK at the end of the process, else the failure */
    sbx_error err;
    struct sbx_proc_read_result res;
    bool raw;
};

static void *reader_main(void *arg)
{
    struct reader *r = arg;
    struct fd_sink o = {1}, e = {2};
    struct sbx_sink out = SBX_SINK_INIT(&o, fd_write), errs = SBX_SINK_INIT(&e, fd_write);
    r->rc = SBX_OK;
    for (;;) {
        struct sbx_proc_read_args a;
        memset(&a, 0, sizeof a);
        a.size = sizeof a;
        a.wait_ms = 1000;
        a.out_cursor = r->out_cursor;
        a.err_cursor = r->err_cursor;
        a.max_bytes = TERM_READ_MAX;
        a.out = &out;
        a.err = &errs;
        memset(&r->res, 0, sizeof r->res);
        r->res.size = sizeof r->res;
        int rc = sbx_proc_read(r->h, r->id, &a, &r->res, r->cancel, &r->err);
        if (rc != SBX_OK) {
            r->rc = rc;
            break;
        }
        if (r->res.out_lost || r->res.err_lost) {
            char msg[200];
            int n = snprintf(msg, sizeof msg,
                             "%ssbx: %llu bytes of output were dropped by the replay "
                             "buffer before this point%s",
                             r->raw ? "\r\n" : "", (unsigned long long)(r->res.out_lost +
                                                                        r->res.err_lost),
                             r->raw ? "\r\n" : "\n");
            if (n > 0)
                write_all(2, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
        }
        r->out_cursor = r->res.out_cursor;
        r->err_cursor = r->res.err_cursor;
        if (r->res.eof)
            break;
    }
    ssize_t n = write(r->done_fd, "!", 1);
    (void)n;
    return NULL;
}

static void send_window_size(const struct cli_term_options *o)
{
    unsigned rows, cols;
    if (!o->pty || !window_size(&rows, &cols))
        return;
    sbx_error err;
    /* A failed resize is not worth stopping a session for. */
    sbx_proc_resize(o->h, o->id, rows, cols, NULL, &err);
}

/* Copy what our stdin has to the process. Returns 1 at our EOF, 0 to go
 * on, -1 on failure (err set). */
static int forward_stdin(const struct cli_term_options *o, char *buf, sbx_cancel *cancel,
                         sbx_error *err)
{
    ssize_t n = read(0, buf, TERM_CHUNK);
    if (n < 0)
        return errno == EINTR || errno == EAGAIN ? 0 : 1; /* unreadable: as EOF */
    if (n == 0) {
        if (o->close_at_eof && sbx_proc_write(o->h, o->id, NULL, 0, SBX_PROC_WRITE_CLOSE,
                                              cancel, err) != SBX_OK)
            return err->status == SBX_E_INVALID ? 1 : -1; /* already ended */
        return 1;
    }
    if (sbx_proc_write(o->h, o->id, buf, (size_t)n, 0, cancel, err) != SBX_OK)
        return err->status == SBX_E_INVALID ? 1 : -1; /* it ended: stop sending */
    return 0;
}

int cli_term_run(const struct cli_term_options *o)
{
    int done[2] = {-1, -1};
    char *buf = malloc(TERM_CHUNK);
    struct reader r;
    memset(&r, 0, sizeof r);
    if (!buf || pipe2(done, O_CLOEXEC) != 0 || sbx_cancel_new(&r.cancel) != SBX_OK ||
        signals_setup(o->hangup_on_exit) != 0) {
        cli_error("cannot set up the terminal session: %s", strerror(errno));
        free(buf);
        for (int i = 0; i < 2; i++)
            if (done[i] >= 0)
                close(done[i]);
        sbx_cancel_free(r.cancel);
        signals_teardown();
        return CLI_EXIT_SBX;
    }
    r.h = o->h;
    r.id = o->id;
    r.out_cursor = o->out_cursor;
    r.err_cursor = o->err_cursor;
    r.done_fd = done[1];
    r.raw = o->raw;

    int status = CLI_EXIT_SBX;
    if (o->raw && raw_mode() != 0) {
        cli_error("cannot put the terminal in raw mode: %s", strerror(errno));
        goto out;
    }
    send_window_size(o);
    pthread_t tid;
    if (pthread_create(&tid, NULL, reader_main, &r) != 0) {
        restore_terminal();
        cli_error("cannot start the output thread");
        goto out;
    }

    bool stdin_open = o->forward_stdin;
    sbx_error werr;
    sbx_error_clear(&werr);
    int wrc = SBX_OK;
    for (;;) {
        struct pollfd pfd[3] = {{done[0], POLLIN, 0}, {sig_pipe[0], POLLIN, 0},
                                {stdin_open ? 0 : -1, POLLIN, 0}};
        int n = poll(pfd, 3, -1);
        if (n < 0 && errno != EINTR)
            break;
        if (pfd[0].revents)
            break; /* the process ended, or reading failed */
        if (pfd[1].revents) {
            char drain[64];
            while (read(sig_pipe[0], drain, sizeof drain) > 0) {
            }
        }
        if (term_signal_caught)
            break;
        if (winch_pending) {
            winch_pending = 0;
            send_window_size(o);
        }
        if (forward_pending) {
            /* Without raw mode our terminal made the signal: the process
             * gets it, as `docker run -t` passes it on. */
            int sig = forward_pending;
            forward_pending = 0;
            sbx_error e;
            sbx_proc_signal(o->h, o->id, sig, NULL, &e);
        }
        if (stdin_open && (pfd[2].revents & (POLLIN | POLLHUP | POLLERR))) {
            int f = forward_stdin(o, buf, write_cancel, &werr);
            if (f < 0) {
                wrc = werr.status;
                break;
            }
            if (f > 0)
                stdin_open = false;
        }
    }
    /* Stop the reader (a no-op when it is done) and wait for it. */
    sbx_cancel_fire(r.cancel);
    pthread_join(tid, NULL);
    restore_terminal();

    if (term_signal_caught) {
        int sig = term_signal_caught;
        if (o->hangup_on_exit && (sig == SIGTERM || sig == SIGHUP)) {
            sbx_error e;
            sbx_proc_signal(o->h, o->id, SIGHUP, NULL, &e);
        } else {
            cli_error("detached from process %s (it keeps running: 'sbx attach "
                      "SESSION %s')",
                      o->id, o->id);
        }
        status = CLI_EXIT_SIGNAL + sig;
    } else if (wrc != SBX_OK) {
        cli_error("%s", werr.message[0] ? werr.message : sbx_strerror(wrc));
    } else if (r.rc != SBX_OK) {
        cli_error("%s", r.err.message[0] ? r.err.message : sbx_strerror(r.rc));
    } else {
        status = cli_proc_exit_status(r.res.exit_code, r.res.term_signal,
                                      r.res.timed_out);
    }
out:
    restore_terminal();
    signals_teardown();
    sbx_cancel_free(r.cancel);
    close(done[0]);
    close(done[1]);
    free(buf);
    return status;
}
