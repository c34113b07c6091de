/*
 * sup_main.c - sbx-local-supervisor, the process supervisor of one `local`
 * sandbox (supervisor.c starts, finds and stops it; docs/providers/local.md,
 * "Processes").
 *
 *   sbx-local-supervisor serve --idle-ms MS --buffer BYTES
 *       descriptors: 3 the sandbox's state directory, 4 its workspace,
 *       5 a pipe that gets "k" once the supervisor listens
 *   sbx-local-supervisor version
 *
 * It runs detached (the client double-forks and calls setsid before exec),
 * with only those descriptors and /dev/null as 0-2. It listens on
 * supervisor.sock in the state directory (bound through /proc/self/fd/3, so
 * no path of the host is involved), writes supervisor.pid, and serves the
 * process requests of the agent protocol (shared/proc_supervisor.h). It
 * is a child subreaper, so everything its processes leave behind stays
 * its child and dies with them; and it runs under a guard, its parent (the
 * program as started, forked in two), a subreaper too that holds nothing:
 * when the supervisor ends, however (SIGKILL included), everything it held
 * is reparented to the guard, which kills it all and exits. It exits:
 *   - on SIGTERM (destroy): after killing every process tree it holds and
 *     reaping them;
 *   - idle: when it has had no process and no connection for --idle-ms,
 *     holding supervisor.lock while it removes its socket and pid file so
 *     that no client connects to it on its way out.
 */
#include "local.h"

#include "clock.h"
#include "proc_supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define SUP_STATE_FD 3
#define SUP_WS_FD 4
#define SUP_READY_FD 5

struct sup_opts {
    int64_t idle_ms;
    uint64_t buffer;
};

static int parse(int argc, char **argv, struct sup_opts *o)
{
    o->idle_ms = LOCAL_SUP_IDLE_MS_DEFAULT;
    o->buffer = SBX_PROC_BUFFER_DEFAULT;
    for (int i = 2; i < argc; i++) {
        char *end;
        if (strcmp(argv[i], "--idle-ms") == 0 && i + 1 < argc) {
            o->idle_ms = strtoll(argv[++i], &end, 10);
            if (*end || o->idle_ms < 1)
                return -1;
        } else if (strcmp(argv[i], "--buffer") == 0 && i + 1 < argc) {
            o->buffer = strtoull(argv[++i], &end, 10);
            if (*end || o->buffer < 1)
                return -1;
        } else {
            return -1;
        }
    }
    return 0;
}

/* Listen on supervisor.sock in the state directory. The fd or -1. */
static int sup_listen(void)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "/proc/self/fd/%d/" LOCAL_SUP_SOCK,
             SUP_STATE_FD);
    (void)unlinkat(SUP_STATE_FD, LOCAL_SUP_SOCK, 0);
    mode_t old = umask(077);
    int r = bind(fd, (struct sockaddr *)&sa, sizeof sa);
    umask(old);
    if (r != 0 || listen(fd, 64) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Write supervisor.pid (whole, then renamed into place). 0 or -1. */
static int write_pid(void)
{
    char text[32];
    int n = snprintf(text, sizeof text, "%d\n", (int)getpid());
    int fd = openat(SUP_STATE_FD, LOCAL_SUP_PID ".tmp",
                    O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    int ok = write(fd, text, (size_t)n) == n;
    close(fd);
    if (!ok || renameat(SUP_STATE_FD, LOCAL_SUP_PID ".tmp", SUP_STATE_FD, LOCAL_SUP_PID) != 0)
        return -1;
    return 0;
}

/* Idle exit: holding the lock, no client is between finding the socket
 * and connecting; a connection already queued keeps the supervisor. 1 when
 * it may exit (socket and pid file removed), 0 to go on. */
static int sup_may_exit(int listen_fd)
{
    int lock = openat(SUP_STATE_FD, LOCAL_SUP_LOCK, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
                      0600);
    if (lock < 0)
        return 0;
    if (flock(lock, LOCK_EX | LOCK_NB) != 0) {
        close(lock);
        return 0;
    }
    struct pollfd p = {listen_fd, POLLIN, 0};
    if (poll(&p, 1, 0) > 0) {
        close(lock);
        return 0;
    }
    (void)unlinkat(SUP_STATE_FD, LOCAL_SUP_SOCK, 0);
    (void)unlinkat(SUP_STATE_FD, LOCAL_SUP_PID, 0);
    close(lock);
    return 1;
}

/* The pids of this process's children ("/proc/self/task/TID/children"
 * of its one thread), into pids; how many (at most cap). */
static size_t sup_children(pid_t *pids, size_t cap)
{
    char path[64], buf[8192];
    snprintf(path, sizeof path, "/proc/self/task/%d/children", (int)getpid());
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0)
        close(fd);
    buf[n > 0 ? n : 0] = '\0';
    size_t k = 0;
    for (char *p = buf; *p && k < cap;) {
        char *end;
        long pid = strtol(p, &end, 10);
        if (end == p)
            break;
        if (pid > 1)
            pids[k++] = (pid_t)pid;
        p = end;
    }
    return k;
}

/* kill_tree of the supervisor: what left its process group (setsid, a
 * double fork) was reparented to this subreaper: SIGKILL each child until
 * none is left (the children of a killed one become children in turn),
 * reaping through the supervisor's reap. Bounded: 2 s. */
static int sup_kill_tree(void *ctx, void (*reap)(void *), void *reap_ctx)
{
    (void)ctx;
    int64_t end = sbxs_now_ms() + 2000;
    for (;;) {
        pid_t pids[256];
        size_t n = sup_children(pids, 256);
        for (size_t i = 0; i < n; i++)
            kill(pids[i], SIGKILL);
        reap(reap_ctx);
        if (n == 0 || sbxs_now_ms() >= end)
            return 0;
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* Connections of another user are refused. */
static int sup_auth(void *ctx, int fd)
{
    (void)ctx;
    struct ucred cr;
    socklen_t len = sizeof cr;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0 || cr.uid != geteuid())
        return -1;
    return 0;
}

/* The guard: the parent of the supervisor, holding nothing but its child.
 * When the supervisor ends, however it ended (SIGKILL included), its
 * processes and what they left were reparented to this subreaper: kill
 * them all, then exit. So no process of the sandbox outlives its
 * supervisor. */
static void sup_guard(pid_t sup) __attribute__((noreturn));
static void sup_guard(pid_t sup)
{
    for (int fd = 0; fd < 1024; fd++)
        close(fd);
    signal(SIGTERM, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    for (;;) {
        int ws;
        pid_t w = waitpid(-1, &ws, 0);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 || w == sup)
            break;
    }
    for (;;) {
        pid_t pids[256];
        size_t n = sup_children(pids, 256);
        for (size_t i = 0; i < n; i++)
            kill(pids[i], SIGKILL);
        int ws;
        pid_t w = waitpid(-1, &ws, 0);
        if (w < 0 && errno == ECHILD)
            _exit(0);
    }
}

/* The supervisor proper: listen, say so, serve until SIGTERM or idle. */
static int sup_run(const struct sup_opts *o, pid_t guard)
{
    /* its parent, the guard, gone: stop as on SIGTERM */
    prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0);
    if (getppid() != guard)
        return 1;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigprocmask(SIG_BLOCK, &set, NULL);
    int stop_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
    int listen_fd = sup_listen();
    if (stop_fd < 0 || listen_fd < 0 || write_pid() != 0)
        return 1;
    struct sbxs_psv_config cfg = {
        .listen_fd = listen_fd,
        .auth = sup_auth,
        .handoff_fd = -1,
        .root_fd = SUP_WS_FD,
        .resolve_user = NULL,
        .base_env = NULL,
        .kill_tree = sup_kill_tree,
        .stop_fd = stop_fd,
        .idle_exit_ms = o->idle_ms,
        .default_buffer = o->buffer,
        .ctx = NULL,
    };
    struct sbxs_psv *s = sbxs_psv_new(&cfg);
    if (s == NULL)
        return 1;
    (void)!write(SUP_READY_FD, "k", 1);
    close(SUP_READY_FD);
    int rc = 0;
    for (;;) {
        if (sbxs_psv_run(s) != 0) {
            rc = 1;
            break;
        }
        struct pollfd p = {stop_fd, POLLIN, 0};
        if (poll(&p, 1, 0) > 0)
            break; /* SIGTERM: destroy */
        if (sup_may_exit(listen_fd))
            break; /* idle, and nobody is about to connect */
    }
    /* kills every process still running, and what they left */
    sbxs_psv_free(s);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "version") == 0) {
        printf(LOCAL_SUP_NAME " for ABI %d.%d\n", SBX_ABI_MAJOR, SBX_ABI_MINOR);
        return 0;
    }
    struct sup_opts o;
    if (argc < 2 || strcmp(argv[1], "serve") != 0 || parse(argc, argv, &o) != 0) {
        fprintf(stderr, "usage: " LOCAL_SUP_NAME " serve [--idle-ms MS] [--buffer BYTES]\n"
                        "       (descriptors 3: state directory, 4: workspace, 5: ready "
                        "pipe)\n       " LOCAL_SUP_NAME " version\n");
        return 2;
    }
    struct stat st;
    if (fstat(SUP_STATE_FD, &st) != 0 || !S_ISDIR(st.st_mode) || fstat(SUP_WS_FD, &st) != 0 ||
        !S_ISDIR(st.st_mode)) {
        fprintf(stderr, LOCAL_SUP_NAME ": descriptors 3 and 4 must be directories\n");
        return 2;
    }
    /* not dumpable: another process of the user cannot ptrace it for its
     * descriptors without CAP_SYS_PTRACE */
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    /* both the guard and the supervisor are subreapers: what a process
     * leaves is the supervisor's, and the guard's once it is gone */
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    pid_t guard = getpid();
    pid_t sup = fork();
    if (sup < 0)
        return 1;
    if (sup > 0)
        sup_guard(sup);
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    return sup_run(&o, guard);
}
