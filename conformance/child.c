/*
 * child.c - run a function in a forked child process with a deadline,
 * reading the records it sends on a pipe while it runs.
 *
 * The parent waits on the pipe and on a pidfd of the child (or, on kernels
 * without pidfd_open, wakes every 50 ms to look at the child), so it learns
 * at once when the child ends, however it ends, and reads everything the
 * child managed to send before. A child still running at the deadline is
 * killed with SIGKILL.
 */
#include "cf_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CF_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define CF_ASAN 1
#endif
#ifdef CF_ASAN
#include <sanitizer/lsan_interface.h>
#endif

/* How often to look at the child when there is no pidfd to poll. */
#define POLL_SLICE_MS 50

const char *cf_signal_name(int sig, char *buf, size_t cap)
{
#define SIG(s) {s, #s}
    static const struct {
        int sig;
        const char *name;
    } names[] = {
        SIG(SIGHUP),  SIG(SIGINT),    SIG(SIGQUIT), SIG(SIGILL),  SIG(SIGTRAP),
        SIG(SIGABRT), SIG(SIGBUS),    SIG(SIGFPE),  SIG(SIGKILL), SIG(SIGUSR1),
        SIG(SIGSEGV), SIG(SIGUSR2),   SIG(SIGPIPE), SIG(SIGALRM), SIG(SIGTERM),
        SIG(SIGCHLD), SIG(SIGCONT),   SIG(SIGSTOP), SIG(SIGTSTP), SIG(SIGTTIN),
        SIG(SIGTTOU), SIG(SIGURG),    SIG(SIGXCPU), SIG(SIGXFSZ), SIG(SIGVTALRM),
        SIG(SIGPROF), SIG(SIGWINCH),  SIG(SIGSYS),
    };
#undef SIG
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].sig == sig)
            return names[i].name;
    snprintf(buf, cap, "signal %d", sig);
    return buf;
}

const char *cf_child_end_text(const struct cf_child_end *e, char *buf, size_t cap)
{
    char tmp[32];
    if (e->signal)
        snprintf(buf, cap, "killed by signal %d (%s)%s", e->signal,
                 cf_signal_name(e->signal, tmp, sizeof tmp),
                 e->core ? ", core dumped" : "");
    else if (e->exited)
        snprintf(buf, cap, "exited with status %d", e->exit_status);
    else
        snprintf(buf, cap, "ended with a status the runner could not collect "
                           "(is SIGCHLD ignored?)");
    return buf;
}

/* The child's side: run the body, then leave without running the
 * parent's exit handlers or flushing its stdio buffers. */
static _Noreturn void child_main(cf_child_fn fn, void *arg, int report_fd)
{
    fn(arg, report_fd);
#ifdef CF_ASAN
    /* _exit skips LeakSanitizer's check at exit: run it here so that what
     * a case leaks is still reported (on stderr, as before isolation). */
    __lsan_do_recoverable_leak_check();
#endif
    _exit(0);
}

static void fill_end(struct cf_child_end *end, int status)
{
    if (WIFEXITED(status)) {
        end->exited = true;
        end->exit_status = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
        end->signal = WTERMSIG(status);
#ifdef WCOREDUMP
        end->core = WCOREDUMP(status) != 0;
#endif
    } else {
        end->unknown = true;
    }
}

/* Read what is in the pipe now; false at end of file or on an error. */
static bool read_some(int fd, struct cf_channel_reader *rd, cf_record_fn fn, void *ud)
{
    long n = cf_channel_read(fd, rd, fn, ud);
    if (n > 0)
        return true;
    if (n < 0 && errno == EAGAIN)
        return true;
    return false;
}

int cf_child_run(cf_child_fn fn, void *arg, double timeout_s,
                 cf_record_fn on_record, void *ud, struct cf_child_end *end,
                 sbx_error *err)
{
    memset(end, 0, sizeof *end);
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return sbx_error_set(err, SBX_E_IO, "conformance: cannot create a pipe: %s",
                             strerror(errno));
    /* A child that ends through exit() after all (a provider calling it)
     * must not write the parent's buffered output a second time. */
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(p[0]);
        close(p[1]);
        return sbx_error_set(err, SBX_E_IO, "conformance: cannot fork: %s",
                             strerror(e));
    }
    if (pid == 0) {
        close(p[0]);
        child_main(fn, arg, p[1]);
    }
    close(p[1]);
    int rfd = p[0];
    (void)fcntl(rfd, F_SETFL, O_NONBLOCK);
    long pidfd = syscall(SYS_pidfd_open, pid, 0);

    struct cf_channel_reader rd;
    memset(&rd, 0, sizeof rd);
    bool open_pipe = true;
    double deadline = cf_now() + timeout_s;
    int status = 0;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) {
            fill_end(end, status);
            break;
        }
        if (w < 0 && errno == ECHILD) {
            end->unknown = true; /* reaped behind our back */
            break;
        }
        double left = deadline - cf_now();
        if (left <= 0) {
            kill(pid, SIGKILL);
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
            end->timed_out = true;
            end->signal = SIGKILL;
            break;
        }
        struct pollfd fds[2];
        nfds_t n = 0;
        if (open_pipe)
            fds[n++] = (struct pollfd){.fd = rfd, .events = POLLIN};
        if (pidfd >= 0)
            fds[n++] = (struct pollfd){.fd = (int)pidfd, .events = POLLIN};
        int ms = (int)(left * 1000.0) + 1;
        if (pidfd < 0 && ms > POLL_SLICE_MS)
            ms = POLL_SLICE_MS;
        if (poll(fds, n, ms) < 0 && errno != EINTR)
            (void)poll(NULL, 0, POLL_SLICE_MS); /* do not spin on a poll error */
        if (open_pipe && fds[0].revents)
            open_pipe = read_some(rfd, &rd, on_record, ud);
    }
    /* The child is gone: what it sent is in the pipe. The fd is
     * non-blocking, so a straggler holding the write end cannot keep us. */
    while (open_pipe && cf_channel_read(rfd, &rd, on_record, ud) > 0)
        ;
    close(rfd);
    if (pidfd >= 0)
        close((int)pidfd);
    return SBX_OK;
}
