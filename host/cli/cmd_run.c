/*
 * cmd_run.c - `sbx run`: create a sandbox under a fresh random session key,
 * run one command in it with its output streamed live to our stdout and
 * stderr, then destroy the sandbox, also when interrupted.
 *
 * Interruption: SIGINT, SIGTERM and SIGHUP only fire a cancellation token
 * and write a byte to a wake-up pipe (both async-signal-safe). The running
 * call returns SBX_E_CANCELLED after the provider killed the command's
 * process tree; we then destroy the sandbox and exit 128+signal. A second
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
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

enum stdin_mode { STDIN_AUTO, STDIN_ALWAYS, STDIN_NEVER };

struct run_options {
    const char *provider;
    int64_t timeout_ms;
    const char *cwd;
    const char **env; /* NULL-terminated, borrowed from argv */
    size_t nenv;
    enum stdin_mode stdin_mode;
};

/* A sink writing to one of our own descriptors. A reader that went away
 * (EPIPE) stops the command, as a pipe would, and is reported quietly. */
struct term_sink {
    int fd;
    bool broken;
};

/* Our stdin as the command's stdin. */
struct term_source {
    int fd;
};

/* Signal state: written by the handler, read after the calls return. */
static sbx_cancel *run_cancel;     /* cancels create and exec */
static sbx_cancel *cleanup_cancel; /* cancels destroy (second signal) */
static volatile sig_atomic_t caught_signal;
static int wake_pipe[2] = {-1, -1}; /* readable once a signal was caught */

static const int handled_signals[] = {SIGINT, SIGTERM, SIGHUP};
#define NHANDLED (sizeof handled_signals / sizeof handled_signals[0])

static void usage(FILE *f)
{
    fputs("Usage: sbx run [OPTIONS] [--] COMMAND [ARGS...]\n"
          "\n"
          "Create a sandbox with a fresh session key, run COMMAND in its\n"
          "workspace with output streamed live, then destroy the sandbox (also\n"
          "on Ctrl-C or SIGTERM). No shell is involved: use 'sh -c' for one.\n"
          "\n"
          "Options:\n"
          "  -p, --provider NAME  use this provider (else $SBX_PROVIDER, else\n"
          "                       default_provider, else local)\n"
          "  -t, --timeout DUR    kill the command's process tree after DUR\n"
          "                       seconds (1.5, or with a suffix: 500ms, 2m, 1h);\n"
          "                       0 means no timeout\n"
          "  -C, --cwd DIR        workspace-relative working directory\n"
          "  -e, --env NAME=VALUE set a variable (repeatable); nothing else of\n"
          "                       this environment reaches the command\n"
          "  -i, --stdin          stream standard input even when it is a terminal\n"
          "      --no-stdin       give the command an empty standard input\n"
          "                       (default: stream it unless it is a terminal)\n"
          "  -c, --config FILE    read this configuration file\n"
          "  -h, --help           show this help\n"
          "\n"
          "Exit status: the command's own; 124 when it timed out; 125 when sbx\n"
          "failed; 126 when it cannot be executed; 127 when it was not found;\n"
          "128+N when it was killed by signal N (130 after Ctrl-C).\n", f);
}

/* Parse a duration: a non-negative decimal number of seconds with an
 * optional ms/s/m/h suffix. Returns false when malformed or too large. */
static bool parse_duration_ms(const char *text, int64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || errno == ERANGE || !isfinite(v) || v < 0 || text[0] == '-')
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

static int parse_options(int argc, char **argv, struct cli_globals *globals,
                         struct run_options *ro, bool *help)
{
    static const struct option longopts[] = {
        {"provider", required_argument, NULL, 'p'},
        {"timeout", required_argument, NULL, 't'},
        {"cwd", required_argument, NULL, 'C'},
        {"env", required_argument, NULL, 'e'},
        {"stdin", no_argument, NULL, 'i'},
        {"no-stdin", no_argument, NULL, 'N'},
        {"config", required_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+:p:t:C:e:ic:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'p':
            ro->provider = optarg;
            break;
        case 't':
            if (!parse_duration_ms(optarg, &ro->timeout_ms))
                return cli_usage_error("run", CLI_EXIT_SBX,
                                       "invalid --timeout '%s' (expected seconds "
                                       "such as 30 or 1.5, or 500ms, 2m, 1h)",
                                       optarg);
            break;
        case 'C':
            ro->cwd = optarg;
            break;
        case 'e': {
            const char *eq = strchr(optarg, '=');
            if (!eq || eq == optarg)
                return cli_usage_error("run", CLI_EXIT_SBX,
                                       "invalid --env '%s' (expected NAME=VALUE)",
                                       optarg);
            ro->env[ro->nenv++] = optarg;
            break;
        }
        case 'i':
            ro->stdin_mode = STDIN_ALWAYS;
            break;
        case 'N':
            ro->stdin_mode = STDIN_NEVER;
            break;
        case 'c':
            globals->config_path = optarg;
            break;
        case 'h':
            *help = true;
            return CLI_EXIT_OK;
        default:
            return cli_option_error("run", CLI_EXIT_SBX, c, argv);
        }
    }
    if (optind >= argc)
        return cli_usage_error("run", CLI_EXIT_SBX,
                               "missing command (usage: sbx run [OPTIONS] -- "
                               "COMMAND [ARGS...])");
    if (argv[optind][0] == '\0')
        return cli_usage_error("run", CLI_EXIT_SBX, "the command name is empty");
    return CLI_EXIT_OK;
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
 * killing us before the sandbox is destroyed. Unlike SIG_IGN, a handler is
 * reset by exec, so commands still get the default SIGPIPE. */
static void on_sigpipe(int sig)
{
    (void)sig;
}

static void install_handlers(void)
{
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
}

static void restore_handlers(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = SIG_DFL;
    for (size_t i = 0; i < NHANDLED; i++)
        sigaction(handled_signals[i], &sa, NULL);
    sigaction(SIGPIPE, &sa, NULL);
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
    struct term_source *t = ctx;
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

/* A session key nobody else will use: 128 random bits. */
static int make_session_key(char *out, size_t len)
{
    unsigned char raw[16];
    size_t got = 0;
    while (got < sizeof raw) {
        ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        got += (size_t)n;
    }
    size_t used = (size_t)snprintf(out, len, "sbx-run-");
    for (size_t i = 0; i < sizeof raw && used + 2 < len; i++)
        used += (size_t)snprintf(out + used, len - used, "%02x", raw[i]);
    return 0;
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

/* Create, exec, destroy. Returns the exit status. */
static int run_in_sandbox(sbx_provider *p, const struct run_options *ro,
                          char *const *cmd)
{
    if (caught_signal)
        return CLI_EXIT_SIGNAL + caught_signal;
    char key[64];
    if (make_session_key(key, sizeof key) != 0) {
        cli_error("cannot make a session key: getrandom: %s", strerror(errno));
        return CLI_EXIT_SBX;
    }
    struct sbx_create_options copts;
    memset(&copts, 0, sizeof copts);
    copts.size = sizeof copts;
    sbx_handle *h;
    sbx_error err;
    int rc = sbx_create(p, key, &copts, run_cancel, &h, &err);
    if (rc != SBX_OK) {
        if (caught_signal)
            return CLI_EXIT_SIGNAL + caught_signal;
        cli_error("%s", err.message);
        return CLI_EXIT_SBX;
    }
    char *ref = strdup(sbx_handle_ref(h));
    if (!ref) {
        sbx_release(h);
        cli_error("out of memory");
        return CLI_EXIT_SBX;
    }

    struct term_source in_t = {0};
    struct sbx_source in = {&in_t, term_read};
    bool use_stdin = ro->stdin_mode == STDIN_ALWAYS ||
                     (ro->stdin_mode == STDIN_AUTO && !isatty(0));
    struct term_sink out_t = {1, false}, err_t = {2, false};
    struct sbx_sink out = {&out_t, term_write}, errs = {&err_t, term_write};
    struct sbx_exec_args args;
    memset(&args, 0, sizeof args);
    args.size = sizeof args;
    args.argv = (const char *const *)cmd;
    args.env = ro->nenv ? ro->env : NULL;
    args.cwd = ro->cwd;
    args.in = use_stdin ? &in : NULL;
    args.timeout_ms = ro->timeout_ms;
    args.out = &out;
    args.err = &errs;
    struct sbx_exec_result res;
    memset(&res, 0, sizeof res);
    res.size = sizeof res;
    sbx_error exec_err;
    sbx_error_clear(&exec_err);
    int status;
    if (caught_signal) {
        status = CLI_EXIT_SIGNAL + caught_signal; /* interrupted before exec */
    } else {
        rc = sbx_exec(h, &args, &res, run_cancel, &exec_err);
        status = exec_exit_status(rc, &res, &exec_err, &out_t, &err_t);
    }
    sbx_release(h);

    rc = sbx_destroy(p, key, ref, cleanup_cancel, &err);
    if (rc != SBX_OK) {
        cli_error("cannot destroy the sandbox (provider %s, reference %s): %s",
                  sbx_provider_desc(p)->name, ref, err.message);
        status = CLI_EXIT_SBX;
    }
    free(ref);
    return status;
}

int cmd_run(const struct cli_globals *g, int argc, char **argv)
{
    struct cli_globals globals = *g;
    struct run_options ro;
    memset(&ro, 0, sizeof ro);
    /* Every --env fits: at most one per argument. */
    ro.env = calloc((size_t)argc + 1, sizeof *ro.env);
    if (!ro.env) {
        cli_error("out of memory");
        return CLI_EXIT_SBX;
    }
    bool help = false;
    int status = parse_options(argc, argv, &globals, &ro, &help);
    if (status != CLI_EXIT_OK || help) {
        if (help)
            usage(stdout);
        free(ro.env);
        return status;
    }
    char *const *cmd = argv + optind;

    if (sbx_cancel_new(&run_cancel) != SBX_OK ||
        sbx_cancel_new(&cleanup_cancel) != SBX_OK ||
        pipe2(wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
        cli_error("cannot set up interruption: %s", strerror(errno));
        sbx_cancel_free(run_cancel);
        sbx_cancel_free(cleanup_cancel);
        free(ro.env);
        return CLI_EXIT_SBX;
    }
    install_handlers();

    sbx_ctx *ctx = NULL;
    sbx_provider *p;
    sbx_error err;
    if (cli_open(&globals, ro.provider, &ctx) != SBX_OK) {
        status = caught_signal ? CLI_EXIT_SIGNAL + caught_signal : CLI_EXIT_SBX;
    } else if (sbx_provider_lookup(ctx, ro.provider, &p, &err) != SBX_OK) {
        cli_error("%s", err.message);
        status = CLI_EXIT_SBX;
    } else {
        status = run_in_sandbox(p, &ro, cmd);
    }
    sbx_close(ctx);

    /* The handlers use the tokens: put them back before freeing those. */
    restore_handlers();
    sbx_cancel_free(run_cancel);
    sbx_cancel_free(cleanup_cancel);
    run_cancel = cleanup_cancel = NULL;
    close(wake_pipe[0]);
    close(wake_pipe[1]);
    wake_pipe[0] = wake_pipe[1] = -1;
    free(ro.env);
    return status;
}
