/*
 * manifest_git.c - host git for git_repo entries (manifest_git.h).
 *
 * git is started with fork and execve (not posix_spawn, which cannot set
 * a resource limit or reset every signal in the child) into a session of
 * its own, so it has no controlling terminal to prompt on and its children
 * (ssh, remote helpers, index-pack) share one process group that is
 * killed whole. Its environment is built before the fork: the child only
 * makes async-signal-safe calls.
 */
#include "base/cancel.h"
#include "clock.h"
#include "config/manifest_git.h"
#include "base/text_escape.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define ERR_TAIL 600

/* The first executable "git" on PATH into buf, or false. */
static bool find_git(char *buf, size_t cap)
{
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        size_t l = strcspn(path, ":");
        if (l > 0 && (size_t)snprintf(buf, cap, "%.*s/git", (int)l, path) < cap &&
            access(buf, X_OK) == 0)
            return true;
        path += l;
        if (*path == ':')
            path++;
    }
    return false;
}

/* Our environment without GIT_* and the askpass variables, plus git's. */
static char **git_environment(char *ssh_command)
{
    size_t n = 0;
    while (environ[n])
        n++;
    static char *const ours[] = {
        "GIT_TERMINAL_PROMPT=0",  "GIT_ASKPASS=",
        "SSH_ASKPASS_REQUIRE=never", "GIT_CONFIG_NOSYSTEM=1",
        "GIT_CONFIG_GLOBAL=/dev/null", "GIT_ALLOW_PROTOCOL=file:git:http:https:ssh",
        "GIT_PROTOCOL_FROM_USER=0", "GCM_INTERACTIVE=never",
    };
    size_t nours = sizeof ours / sizeof *ours;
    char **env = calloc(n + nours + 2, sizeof *env);
    if (!env)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "GIT_", 4) && strncmp(environ[i], "SSH_ASKPASS", 11) &&
            strncmp(environ[i], "DISPLAY=", 8))
            env[k++] = environ[i];
    for (size_t i = 0; i < nours; i++)
        env[k++] = ours[i];
    env[k++] = ssh_command;
    env[k] = NULL;
    return env;
}

/* In the child: only async-signal-safe calls. */
static void child(const char *git, char *const *argv, char *const *env,
                  const struct sbx_manifest_git *g, int devnull, int err_w)
{
    setsid();
    sigset_t none;
    sigemptyset(&none);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int s = 1; s < NSIG; s++)
        if (s != SIGKILL && s != SIGSTOP)
            sigaction(s, &dfl, NULL);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (dup2(devnull, STDIN_FILENO) < 0 ||
        dup2(g->out_fd >= 0 ? g->out_fd : devnull, STDOUT_FILENO) < 0 ||
        dup2(err_w, STDERR_FILENO) < 0)
        _exit(126);
    if (g->fsize_max > 0) {
        struct rlimit rl = {(rlim_t)g->fsize_max, (rlim_t)g->fsize_max};
        setrlimit(RLIMIT_FSIZE, &rl);
    }
    if (g->cwd && chdir(g->cwd) != 0)
        _exit(126);
    execve(git, argv, env);
    _exit(127);
}

/* The last bytes of git's stderr, one line, escaped. */
static void tail_text(const char *buf, size_t len, char *out, size_t cap)
{
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r' || buf[len - 1] == ' '))
        len--;
    char tmp[ERR_TAIL + 1];
    size_t k = 0;
    for (size_t i = 0; i < len && k < ERR_TAIL; i++)
        tmp[k++] = buf[i] == '\n' || buf[i] == '\r' ? ' ' : buf[i];
    tmp[k] = '\0';
    sbxh_text_escape(out, cap, k ? tmp : "(no message)", ERR_TAIL);
}

int sbxh_manifest_git_run(const struct sbx_manifest_git *g, const char *const *args,
                          sbx_error *err)
{
    char git[4096];
    if (!find_git(git, sizeof git))
        return sbx_error_set(err, SBX_E_NO_COMMAND, "%s: git is not installed on the host",
                             g->what);
    long long timeout_s = (g->total_ms + 999) / 1000;
    char ssh_command[200];
    snprintf(ssh_command, sizeof ssh_command,
             "GIT_SSH_COMMAND=ssh -o BatchMode=yes -o ConnectTimeout=%lld "
             "-o ServerAliveInterval=15 -o ServerAliveCountMax=2",
             timeout_s < 1 ? 1 : timeout_s > 60 ? 60 : timeout_s);
    /* git -c ... ARGS: no credential helper or askpass from any config */
    static const char *const pre[] = {"git",
                                      "-c", "credential.helper=",
                                      "-c", "core.askPass=",
                                      "-c", "core.sshCommand=",
                                      "-c", "core.fsmonitor=false",
                                      "-c", "core.hooksPath=/dev/null",
                                      "-c", "protocol.ext.allow=never",
                                      "-c", "advice.detachedHead=false"};
    size_t npre = sizeof pre / sizeof *pre, nargs = 0;
    while (args[nargs])
        nargs++;
    const char **argv = calloc(npre + nargs + 1, sizeof *argv);
    char **env = argv ? git_environment(ssh_command) : NULL;
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    int pipefd[2] = {-1, -1};
    if (!argv || !env || devnull < 0 || pipe2(pipefd, O_CLOEXEC) != 0) {
        int e = errno;
        free(argv);
        free(env);
        if (devnull >= 0)
            close(devnull);
        return sbx_error_set(err, env ? SBX_E_IO : SBX_E_NOMEM, "%s: %s", g->what,
                             env ? strerror(e) : "out of memory");
    }
    memcpy(argv, pre, npre * sizeof *argv);
    memcpy(argv + npre, args, (nargs + 1) * sizeof *argv);
    pid_t pid = fork();
    if (pid == 0)
        child(git, (char *const *)argv, env, g, devnull, pipefd[1]);
    int fork_errno = errno;
    close(pipefd[1]);
    close(devnull);
    free(argv);
    free(env);
    if (pid < 0) {
        close(pipefd[0]);
        return sbx_error_set(err, SBX_E_IO, "%s: fork: %s", g->what, strerror(fork_errno));
    }
    /* git's stderr (its tail kept), the deadline, the cancel */
    char tail[ERR_TAIL * 2];
    size_t tlen = 0;
    long long deadline = sbxs_now_ms() + g->timeout_ms;
    bool timed_out = false, cancelled = false, eof = false, exited = false;
    int status = 0;
    for (;;) {
        if (!exited) {
            /* noticed, not reaped (WNOWAIT): until it is reaped, git's pid
             * cannot name another process group than its own */
            siginfo_t si;
            si.si_pid = 0;
            int r = waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT);
            if ((r == 0 && si.si_pid == pid) || (r < 0 && errno != EINTR))
                exited = true;
        }
        if (exited && eof)
            break;
        if (!exited) {
            if (g->cancel && sbx_cancel_fired(g->cancel))
                cancelled = true;
            else if (sbxs_now_ms() >= deadline)
                timed_out = true;
            if (cancelled || timed_out)
                break;
        }
        struct pollfd pfd[2] = {{eof ? -1 : pipefd[0], POLLIN, 0},
                                {g->cancel ? g->cancel->fd : -1, POLLIN, 0}};
        long long left = deadline - sbxs_now_ms();
        /* once git exited, only what is already buffered is read: a child
         * of it may hold the pipe open (it is killed below) */
        int wait_ms = exited ? 0 : (int)(left < 0 ? 0 : left > 100 ? 100 : left);
        int ready = poll(pfd, 2, wait_ms);
        if (ready > 0 && (pfd[0].revents & (POLLIN | POLLHUP | POLLERR))) {
            char buf[4096];
            ssize_t n = read(pipefd[0], buf, sizeof buf);
            if (n > 0) {
                if ((size_t)n >= sizeof tail) {
                    memcpy(tail, buf + n - sizeof tail, sizeof tail);
                    tlen = sizeof tail;
                } else {
                    if (tlen + (size_t)n > sizeof tail) {
                        size_t drop = tlen + (size_t)n - sizeof tail;
                        memmove(tail, tail + drop, tlen - drop);
                        tlen -= drop;
                    }
                    memcpy(tail + tlen, buf, (size_t)n);
                    tlen += (size_t)n;
                }
            } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
                eof = true;
            }
        } else if (exited && ready <= 0) {
            break;
        }
    }
    close(pipefd[0]);
    /* whatever git started goes with it (and git itself on a deadline or a
     * cancel), then git is reaped */
    kill(-pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            status = -1;
            break;
        }
    }
    if (cancelled)
        return sbx_error_set(err, SBX_E_CANCELLED, "%s: cancelled", g->what);
    if (timed_out)
        return sbx_error_set(err, SBX_E_TIMEOUT,
                             "%s timed out: the git commands of an entry have %lld s "
                             "(manifest.git_timeout)",
                             g->what, (g->total_ms + 999) / 1000);
    if (status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return SBX_OK;
    char shown[ERR_TAIL * 4 + 8];
    tail_text(tail, tlen, shown, sizeof shown);
    if (status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 127 && !tlen)
        return sbx_error_set(err, SBX_E_NO_COMMAND, "%s: %s could not be run", g->what, git);
    if (status >= 0 && WIFSIGNALED(status))
        return sbx_error_set(err, SBX_E_IO, "%s failed: killed by signal %d: %s", g->what,
                             WTERMSIG(status), shown);
    return sbx_error_set(err, SBX_E_IO, "%s failed: %s", g->what, shown);
}
