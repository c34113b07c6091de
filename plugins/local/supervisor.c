/*
 * supervisor.c - find, start and stop the process supervisor of a `local`
 * sandbox (the client side of sup_main.c, the sbx-local-supervisor
 * program).
 *
 * Processes of SBX_CAP_PROCESSES must outlive the host process that
 * started them, so they are not its children: one supervisor per sandbox,
 * a detached daemon (double fork, setsid, its own session, every
 * descriptor but its own closed) holds them, their PTYs and their replay
 * buffers. Its files are in the sandbox's state directory (state.c),
 * outside the workspace:
 *
 *   supervisor.lock  flock'ed by whoever starts or stops a supervisor, and
 *                    by the supervisor when it exits idle: a client never
 *                    connects to one that is going away
 *   supervisor.pid   its pid, written once it listens
 *   supervisor.sock  its unix stream socket
 *
 * Authentication, both ways: the client opens the socket beneath the state
 * directory's descriptor without following any symlink, requires a socket
 * owned by its own uid, connects through /proc/self/fd/N of that
 * descriptor, and requires the SO_PEERCRED pid of the connection (the
 * process that listens) to be the pid of the pid file and its uid its own;
 * the supervisor refuses a peer of another uid. local is not a security
 * boundary (a command runs as the same user and could signal the
 * supervisor); this keeps another user, a stale socket or a planted
 * symlink from being taken for it.
 */
#include "local.h"

#include "clock.h"
#include "confine.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

/* How long a client waits for the lock and for a new supervisor to say it
 * listens; and destroy for a supervisor to end its processes and exit
 * after SIGTERM (then SIGKILL): at most this, and at most the configured
 * supervisor_timeout_ms. */
#define SUP_LOCK_MS 10000
#define SUP_START_MS 10000
#define SUP_STOP_MS 5000

int local_sup_default_path(char **out)
{
    Dl_info info;
    char *so = NULL;
    if (dladdr((void *)local_sup_default_path, &info) && info.dli_fname)
        so = realpath(info.dli_fname, NULL);
    const char *slash = so ? strrchr(so, '/') : NULL;
    int n = slash ? (int)(slash - so) : 0;
    size_t cap = (size_t)n + sizeof "/" LOCAL_SUP_NAME;
    *out = malloc(cap);
    if (*out)
        snprintf(*out, cap, "%.*s/" LOCAL_SUP_NAME, n, so ? so : "");
    free(so);
    return *out ? 0 : -1;
}

/* Take the lock file's flock, waiting at most SUP_LOCK_MS (a stopped
 * holder must not hang the caller). An fd, or -1 with the error set. */
static int take_lock(const struct sbx_host *host, sbx_call *call, int statefd, int *rc)
{
    int fd = openat(statefd, LOCAL_SUP_LOCK, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        *rc = host->set_error(host, call, SBX_E_IO,
                              "local: cannot open the supervisor's lock: %s", strerror(errno));
        return -1;
    }
    int64_t end = sbxs_now_ms() + SUP_LOCK_MS;
    while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK && errno != EINTR) {
            *rc = host->set_error(host, call, SBX_E_IO,
                                  "local: cannot lock the supervisor's lock: %s",
                                  strerror(errno));
            close(fd);
            return -1;
        }
        if (host->cancelled != NULL && host->cancelled(host, call)) {
            close(fd);
            *rc = host->set_error(host, call, SBX_E_CANCELLED,
                                  "local: cancelled waiting for the supervisor's lock");
            return -1;
        }
        if (sbxs_now_ms() >= end) {
            close(fd);
            *rc = host->set_error(host, call, SBX_E_TIMEOUT,
                                  "local: the supervisor's lock is held by another "
                                  "process for more than %d ms",
                                  SUP_LOCK_MS);
            return -1;
        }
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return fd;
}

/* The pid in the pid file, or 0 when there is none (or it is malformed). */
static pid_t read_pid(int statefd)
{
    int fd = sbxp_confine_open_strict(statefd, LOCAL_SUP_PID, O_RDONLY | O_NOFOLLOW | O_NONBLOCK,
                                      0);
    if (fd < 0)
        return 0;
    char buf[32];
    struct stat st;
    ssize_t n = -1;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
        n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    char *end;
    long v = strtol(buf, &end, 10);
    if (end == buf || (*end != '\n' && *end != '\0') || v <= 1 || v > INT_MAX)
        return 0;
    return (pid_t)v;
}

/* Connect to the supervisor that the pid file names. A connected fd; -1
 * when none listens (no socket or no pid file, something else than a
 * socket in its place, ECONNREFUSED: dead or never started; *why NULL);
 * -2 when something else answers (*why says what). */
static int try_connect(int statefd, pid_t *pid_out, const char **why)
{
    *why = NULL;
    pid_t pid = read_pid(statefd);
    int sfd = sbxp_confine_open_strict(statefd, LOCAL_SUP_SOCK, O_PATH | O_NOFOLLOW, 0);
    if (sfd < 0 || pid == 0) {
        if (sfd >= 0)
            close(sfd);
        return -1;
    }
    struct stat st;
    if (fstat(sfd, &st) != 0 || !S_ISSOCK(st.st_mode)) {
        /* a symlink or a file in its place (opened as itself, never
         * followed): nothing listens there; a start replaces it */
        close(sfd);
        return -1;
    }
    if (st.st_uid != geteuid()) {
        close(sfd);
        *why = "the supervisor's socket belongs to another user";
        return -2;
    }
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "/proc/self/fd/%d", sfd);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        close(sfd);
        *why = "cannot make a socket";
        return -2;
    }
    int r;
    while ((r = connect(fd, (struct sockaddr *)&sa, sizeof sa)) != 0 && errno == EINTR)
        ;
    int err = errno;
    close(sfd);
    if (r != 0) {
        close(fd);
        if (err == ECONNREFUSED || err == ENOENT)
            return -1;
        *why = "cannot connect to the supervisor's socket";
        return -2;
    }
    struct ucred cr;
    socklen_t len = sizeof cr;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0 || cr.uid != geteuid() ||
        cr.pid != pid) {
        close(fd);
        *why = "the process listening on the supervisor's socket is not the supervisor "
               "of the pid file";
        return -2;
    }
    *pid_out = pid;
    return fd;
}

/* The kernel's struct sigaction, for resetting every disposition in the
 * new process (as child.c does). */
struct sup_ksigaction {
    void (*handler)(int);
    unsigned long flags;
    void (*restorer)(void);
    unsigned long mask;
};

/* In the intermediate child (system calls only): a new session, then the
 * supervisor in a grandchild, which init or a subreaper reaps. */
static void launch_child(const char *path, char *const *argv, int statefd, int wsfd,
                         int ready_fd) __attribute__((noreturn));
static void launch_child(const char *path, char *const *argv, int statefd, int wsfd,
                         int ready_fd)
{
    if (setsid() < 0)
        _exit(1);
    pid_t pid = _Fork();
    if (pid != 0)
        _exit(pid < 0 ? 1 : 0);
    struct sup_ksigaction dfl = {SIG_DFL, 0, 0, 0};
    for (int s = 1; s <= 64; s++)
        if (s != SIGKILL && s != SIGSTOP)
            syscall(SYS_rt_sigaction, s, &dfl, NULL, sizeof dfl.mask);
    /* 3: the state directory, 4: the workspace, 5: the ready pipe; moved
     * above 5 first so that the dup2s cannot clobber one another. */
    int a = fcntl(statefd, F_DUPFD, 10), b = fcntl(wsfd, F_DUPFD, 10),
        c = fcntl(ready_fd, F_DUPFD, 10);
    if (a < 0 || b < 0 || c < 0 || dup2(a, 3) < 0 || dup2(b, 4) < 0 || dup2(c, 5) < 0)
        _exit(1);
    syscall(SYS_close_range, 6, ~0U, 0);
    int null = open("/dev/null", O_RDWR);
    if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0)
        _exit(1);
    if (null > 5)
        close(null);
    if (chdir("/") != 0)
        _exit(1);
    unsigned long none = 0;
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, sizeof none);
    char *const envp[] = {NULL};
    execve(path, argv, envp);
    int err = errno;
    char msg[1 + sizeof err] = {'e'};
    memcpy(msg + 1, &err, sizeof err);
    (void)!write(5, msg, sizeof msg);
    _exit(127);
}

/* Start a supervisor for the state directory and workspace, and wait until
 * it listens. SBX_OK, or the error set. */
static int launch(sbx_sandbox *sb, sbx_call *call, int statefd)
{
    struct local_state *st = sb->st;
    const struct sbx_host *host = st->host;
    char idle[32], buffer[32];
    snprintf(idle, sizeof idle, "%lld", (long long)st->supervisor_idle_ms);
    snprintf(buffer, sizeof buffer, "%llu", (unsigned long long)st->process_buffer);
    char *const argv[] = {(char *)LOCAL_SUP_NAME, (char *)"serve", (char *)"--idle-ms", idle,
                          (char *)"--buffer", buffer, NULL};
    int ready[2];
    if (pipe2(ready, O_CLOEXEC) != 0)
        return host->set_error(host, call, SBX_E_IO, "local: cannot make a pipe: %s",
                               strerror(errno));
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pid_t pid = fork();
    if (pid == 0)
        launch_child(st->supervisor_path, argv, statefd, sb->dirfd, ready[1]);
    int fork_err = errno;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    close(ready[1]);
    if (pid < 0) {
        close(ready[0]);
        return host->set_error(host, call, SBX_E_IO,
                               "local: cannot start the process supervisor: %s",
                               strerror(fork_err));
    }
    int ws;
    while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
        ;
    /* 'k' once it listens; 'e' + errno when exec failed; EOF when it
     * died before listening. */
    char msg[1 + sizeof(int)] = {0};
    size_t got = 0;
    int64_t end = sbxs_now_ms() + SUP_START_MS;
    while (got < 1 || (msg[0] == 'e' && got < sizeof msg)) {
        int64_t left = end - sbxs_now_ms();
        struct pollfd p = {ready[0], POLLIN, 0};
        if (left <= 0 || poll(&p, 1, (int)left) == 0) {
            close(ready[0]);
            return host->set_error(host, call, SBX_E_TIMEOUT,
                                   "local: the process supervisor %s did not start in %d ms",
                                   st->supervisor_path, SUP_START_MS);
        }
        ssize_t n = read(ready[0], msg + got, sizeof msg - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(ready[0]);
    if (got >= 1 && msg[0] == 'k')
        return SBX_OK;
    if (got == sizeof msg && msg[0] == 'e') {
        int err;
        memcpy(&err, msg + 1, sizeof err);
        return host->set_error(host, call,
                               err == ENOENT ? SBX_E_CONFIG : SBX_E_IO,
                               "local: cannot run the process supervisor %s: %s (install "
                               "it next to local.so or set providers.local.supervisor_path)",
                               st->supervisor_path, strerror(err));
    }
    return host->set_error(host, call, SBX_E_UNAVAILABLE,
                           "local: the process supervisor %s exited before it listened",
                           st->supervisor_path);
}

int local_sup_connect(sbx_sandbox *sb, sbx_call *call, int start, int *rc)
{
    const struct sbx_host *host = sb->st->host;
    *rc = SBX_OK;
    struct stat ws;
    if (fstat(sb->dirfd, &ws) == 0 && ws.st_nlink == 0) {
        *rc = host->set_error(host, call, SBX_E_NOT_FOUND, "local: workspace '%s' was removed",
                              sb->path);
        return -1;
    }
    int statefd = local_state_open_sb(sb, start);
    if (statefd == -ENOENT) {
        *rc = host->set_error(host, call, SBX_E_NOT_FOUND,
                              "local: no process supervisor runs for '%s'", sb->path);
        return -1;
    }
    if (statefd < 0) {
        *rc = host->set_error(host, call, SBX_E_IO,
                              "local: cannot open the state directory of '%s': %s", sb->path,
                              strerror(-statefd));
        return -1;
    }
    int lock = take_lock(host, call, statefd, rc);
    if (lock < 0) {
        close(statefd);
        return -1;
    }
    pid_t pid = 0;
    const char *why = NULL;
    int fd = try_connect(statefd, &pid, &why);
    if (fd == -1 && start) {
        /* none listens: whatever the old one left is stale */
        (void)unlinkat(statefd, LOCAL_SUP_SOCK, 0);
        (void)unlinkat(statefd, LOCAL_SUP_PID, 0);
        *rc = launch(sb, call, statefd);
        if (*rc == SBX_OK) {
            fd = try_connect(statefd, &pid, &why);
            if (fd == -1)
                why = "the new supervisor does not answer";
        }
    }
    close(lock); /* releases the flock */
    close(statefd);
    if (fd >= 0) {
        *rc = SBX_OK;
        return fd;
    }
    if (why != NULL)
        *rc = host->set_error(host, call, SBX_E_UNAVAILABLE,
                              "local: the process supervisor of '%s': %s", sb->path, why);
    else if (!start || *rc == SBX_OK)
        *rc = host->set_error(host, call, SBX_E_NOT_FOUND,
                              "local: no process supervisor runs for '%s' (its processes "
                              "ended with it)",
                              sb->path);
    return -1;
}

/* A pidfd of the guard, the supervisor's parent (sup_main.c), taken while
 * the supervisor lives (its pidfd held), so that its parent is still the
 * guard, checked to run the same program; -1 when it cannot be had. */
static int guard_pidfd(pid_t sup)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)sup);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    const char *paren = strrchr(buf, ')');
    long ppid = 0;
    if (paren == NULL || sscanf(paren + 1, " %*c %ld", &ppid) != 1 || ppid <= 1)
        return -1;
    char a[PATH_MAX], b[PATH_MAX], pa[64];
    snprintf(path, sizeof path, "/proc/%d/exe", (int)sup);
    snprintf(pa, sizeof pa, "/proc/%ld/exe", ppid);
    ssize_t la = readlink(path, a, sizeof a - 1), lb = readlink(pa, b, sizeof b - 1);
    if (la <= 0 || la != lb || memcmp(a, b, (size_t)la) != 0)
        return -1;
    return (int)syscall(SYS_pidfd_open, (pid_t)ppid, 0);
}

/* Wait up to ms for the process of pidfd to end: 1 when it did. */
static int wait_exit(int pidfd, int ms)
{
    struct pollfd p = {pidfd, POLLIN, 0};
    int n;
    while ((n = poll(&p, 1, ms)) < 0 && errno == EINTR)
        ;
    return n > 0;
}

int local_sup_stop(struct local_state *st, sbx_call *call, int rootfd, const char *hash)
{
    const struct sbx_host *host = st->host;
    int statefd = local_state_open(rootfd, hash, 0);
    if (statefd < 0)
        return SBX_OK; /* no state: no supervisor was ever started */
    int rc = SBX_OK;
    int lock = take_lock(host, call, statefd, &rc);
    if (lock < 0) {
        close(statefd);
        return rc;
    }
    pid_t pid = 0;
    const char *why = NULL;
    int fd = try_connect(statefd, &pid, &why);
    int pidfd = -1, gfd = -1;
    if (fd >= 0) {
        /* the pid is the supervisor's for as long as the connection is
         * open: take pidfds before letting go of it */
        pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (pidfd >= 0)
            gfd = guard_pidfd(pid);
        close(fd);
    }
    if (pidfd >= 0) {
        /* SIGTERM: it kills every process tree it holds, waits for them,
         * and exits; then its guard exits, having killed whatever was
         * left. SIGKILL after the wait: the guard still kills the rest. */
        int wait_ms = st->supervisor_timeout_ms < SUP_STOP_MS ? (int)st->supervisor_timeout_ms
                                                              : SUP_STOP_MS;
        syscall(SYS_pidfd_send_signal, pidfd, SIGTERM, NULL, 0);
        if (!wait_exit(pidfd, wait_ms)) {
            syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
            if (!wait_exit(pidfd, SUP_STOP_MS))
                rc = host->set_error(host, call, SBX_E_TIMEOUT,
                                     "local: the process supervisor %d did not exit", pid);
        }
        if (rc == SBX_OK && gfd >= 0 && !wait_exit(gfd, SUP_STOP_MS))
            rc = host->set_error(host, call, SBX_E_TIMEOUT,
                                 "local: the process supervisor's guard did not exit");
        close(pidfd);
    } else if (fd == -2) {
        rc = host->set_error(host, call, SBX_E_UNAVAILABLE, "local: destroy: %s", why);
    }
    if (gfd >= 0)
        close(gfd);
    (void)unlinkat(statefd, LOCAL_SUP_SOCK, 0);
    (void)unlinkat(statefd, LOCAL_SUP_PID, 0);
    close(lock);
    close(statefd);
    return rc;
}
