/*
 * main.c - sbx-agent: the container's init and its host-facing channel.
 *
 *   sbx-agent serve --socket PATH [--user SPEC] [--own-workspace] --root DIR
 *                   [--root DIR...]
 *   sbx-agent version
 *
 * As PID 1 it reaps every orphan and forwards the signals a container gets
 * (docker stop's SIGTERM, ...) to every other process, exiting once they
 * are gone. It listens on one unix socket (in a directory the host binds
 * in; no TCP) and serves each connection in a process of its own (conn.c).
 *
 * Trust boundary: a connection is served only when its peer is outside the
 * container's PID namespace (SO_PEERCRED then reports pid 0): the host. A
 * process inside the container, root or not, is refused, whatever the
 * permissions of the socket. The socket directory is also owned by the
 * host side and closed to everyone else (mode 0700), and the socket itself
 * is given to that directory's owner with mode 0600. Root in the container
 * can still replace the socket (the directory is a read-write bind): the
 * host then finds a listener that is not this process (PID 1) and refuses
 * it (plugins/docker/agent_client.c). The agent and its handlers are not
 * dumpable, so root in the container without CAP_SYS_PTRACE can neither
 * ptrace them nor take their descriptors (the listening socket, the
 * host's connections) through /proc or pidfd_getfd.
 *
 * Strays: a command's handler is its subreaper, and kills its tree when
 * it ends (exec.c). A root command can SIGKILL or SIGSTOP its handler
 * instead; its processes are then re-parented here. So a handler that
 * ends other than by returning from its connection, or that is seen
 * stopped (it is killed then), makes this process kill every descendant
 * that is not in a live handler's subtree, until none is left (tree.c).
 * As PID 1 it cannot itself be killed or stopped from inside its PID
 * namespace.
 */
#include "agent.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct agent_cfg agent_cfg;

/* The live connection handlers (the children serve_one forked), and
 * whether one ended abnormally since the last sweep for strays. */
static pid_t *handlers;
static size_t nhandlers, cap_handlers;
static int strays_pending;


static void usage(void)
{
    fprintf(stderr, "usage: sbx-agent serve --socket PATH [--user SPEC] [--own-workspace] "
                    "--root DIR [--root DIR...]\n       sbx-agent ping SOCKET\n"
                    "       sbx-agent version\n");
    exit(2);
}

/* sbx-agent ping SOCKET: ask an agent for its version (a diagnostic; from
 * inside the container it shows that the agent refuses such peers). */
static int ping(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        printf("connect %s: %s\n", path, strerror(errno));
        return 1;
    }
    unsigned char pre[AP_PREAMBLE_LEN], hdr[AP_HDR_LEN];
    sbxs_ap_preamble(pre, AP_VERSION);
    sbxs_ap_header(hdr, AP_PING, 0);
    /* a refused peer may find the connection closed already: read the
     * answer anyway */
    if (agent_wire_write_full(fd, pre, sizeof pre) == 0)
        agent_wire_write_full(fd, hdr, sizeof hdr);
    unsigned char *buf = malloc(AP_FRAME_MAX);
    int type;
    uint32_t len, version;
    /* a refused peer gets an error frame without a preamble */
    if (!buf || agent_wire_read_full(fd, pre, sizeof pre) != 0) {
        printf("no answer\n");
        return 1;
    }
    if (sbxs_ap_parse_preamble(pre, &version) != 0) {
        /* the 8 bytes were the start of an error frame */
        memcpy(hdr, pre, AP_HDR_LEN);
        if (sbxs_ap_parse_header(hdr, &type, &len) == 0 && type == AP_ERROR && len >= 3 &&
            len < 4096 && agent_wire_read_full(fd, buf + 3, len - 3) == 0) {
            memcpy(buf, pre + AP_HDR_LEN, 3);
            struct ap_in in;
            sbxs_ap_in_begin(&in, buf, len);
            uint32_t e = sbxs_ap_get_u32(&in);
            char *stage = sbxs_ap_get_str(&in), *msg = sbxs_ap_get_str(&in);
            printf("refused (errno %u, %s): %s\n", e, stage ? stage : "?", msg ? msg : "?");
        } else {
            printf("not an sbx-agent\n");
        }
        return 1;
    }
    if (agent_wire_read_frame(fd, &type, buf, AP_FRAME_MAX, &len) != 0 || type != AP_PONG) {
        printf("no pong\n");
        return 1;
    }
    printf("sbx-agent protocol %u\n", version);
    return 0;
}

static void parse_args(int argc, char **argv)
{
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--socket") == 0 && v)
            agent_cfg.socket_path = v, i++;
        else if (strcmp(a, "--user") == 0 && v)
            agent_cfg.user = v, i++;
        else if (strcmp(a, "--own-workspace") == 0)
            agent_cfg.own_workspace = 1;
        else if (strcmp(a, "--root") == 0 && v && v[0] == '/' &&
                 agent_cfg.nroots < AGENT_MAX_ROOTS)
            agent_cfg.roots[agent_cfg.nroots++] = v, i++;
#ifdef SBX_AGENT_TEST_HOOKS
        else if (strcmp(a, "--trust-local-peers") == 0)
            agent_cfg.trust_local_peers = 1;
#endif
        else {
            fprintf(stderr, "sbx-agent: unknown or incomplete argument %s\n", a);
            usage();
        }
    }
    if (!agent_cfg.socket_path || agent_cfg.nroots == 0)
        usage();
}

static int listen_socket(void)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(agent_cfg.socket_path) >= sizeof sa.sun_path) {
        fprintf(stderr, "sbx-agent: socket path too long\n");
        return -1;
    }
    strcpy(sa.sun_path, agent_cfg.socket_path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    unlink(sa.sun_path); /* the socket of an earlier run of this container */
    mode_t old = umask(0177);
    int rc = bind(fd, (struct sockaddr *)&sa, sizeof sa);
    umask(old);
    if (rc != 0 || listen(fd, 256) != 0) {
        fprintf(stderr, "sbx-agent: cannot listen on %s: %s\n", sa.sun_path,
                strerror(errno));
        close(fd);
        return -1;
    }
    /* the host side owns the directory: give it the socket */
    char dir[sizeof sa.sun_path];
    snprintf(dir, sizeof dir, "%s", sa.sun_path);
    char *slash = strrchr(dir, '/');
    struct stat ds;
    if (slash && slash != dir) {
        *slash = '\0';
        if (stat(dir, &ds) == 0 && lchown(sa.sun_path, ds.st_uid, ds.st_gid) != 0)
            fprintf(stderr, "sbx-agent: chown %s: %s\n", sa.sun_path, strerror(errno));
    }
    return fd;
}

/* A reason not to start, for the host: written beside the socket (the
 * directory the host reads), and on stderr (docker logs). */
static int fatal(const char *msg)
{
    fprintf(stderr, "sbx-agent: %s\n", msg);
    char path[4096];
    snprintf(path, sizeof path, "%s.err", agent_cfg.socket_path);
    FILE *f = fopen(path, "we");
    if (f) {
        fprintf(f, "%s\n", msg);
        fclose(f);
    }
    return 1;
}

/* Is this connection's peer the host (outside our PID namespace)? */
static int peer_allowed(int fd)
{
    struct ucred cr;
    socklen_t len = sizeof cr;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0)
        return 0;
    if (cr.pid == 0 || agent_cfg.trust_local_peers)
        return 1;
    fprintf(stderr, "sbx-agent: refused a connection from pid %d (uid %u) inside the "
                    "container\n",
            (int)cr.pid, (unsigned)cr.uid);
    return 0;
}

static int handler_slot(void)
{
    if (nhandlers < cap_handlers)
        return 0;
    size_t cap = cap_handlers ? 2 * cap_handlers : 64;
    pid_t *more = realloc(handlers, cap * sizeof *more);
    if (!more)
        return -1;
    handlers = more;
    cap_handlers = cap;
    return 0;
}

static void serve_one(int lfd, int sfd, const sigset_t *old)
{
    int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (c < 0)
        return;
    if (!peer_allowed(c)) {
        agent_wire_error(c, EPERM, "connect",
                   "connections from inside the container are refused");
        close(c);
        return;
    }
    /* room in the table first: an untracked handler would be a stray */
    if (handler_slot() != 0) {
        agent_wire_error(c, ENOMEM, "fork", "the agent is out of memory");
        close(c);
        return;
    }
    /* the process supervisor, tracked like a handler (the sweep for
     * strays spares its subtree); handlers inherit the way to it */
    int not_its[] = {lfd, sfd, c};
    pid_t sp = agent_procs_ensure(not_its, 3, old);
    if (sp > 0)
        handlers[nhandlers++] = sp;
    if (handler_slot() != 0) {
        agent_wire_error(c, ENOMEM, "fork", "the agent is out of memory");
        close(c);
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(lfd);
        close(sfd);
        for (int s = 1; s < NSIG; s++)
            signal(s, SIG_DFL);
        sigprocmask(SIG_SETMASK, old, NULL);
        prctl(PR_SET_DUMPABLE, 0); /* inherited already; said again */
        agent_conn_serve(c);
        _exit(agent_tree_gave_up() ? 1 : 0);
    }
    if (pid < 0)
        agent_wire_error(c, errno, "fork", "the agent cannot fork: %s", strerror(errno));
    else
        handlers[nhandlers++] = pid;
    close(c);
}

/* Reap every child that ended. A handler that did not end by returning
 * from its connection with its command's tree killed (_exit(0)) was
 * killed, by something in the container or by the host, or could not
 * kill that tree: what its command started is now ours, and a sweep for
 * strays is due. A handler seen stopped can neither serve nor
 * kill its command's tree: it is killed (and counted when it is reaped). */
static void reap_all(void *ctx)
{
    (void)ctx;
    int status;
    pid_t p;
    while ((p = waitpid(-1, &status, WNOHANG | WUNTRACED)) > 0) {
        size_t i = 0;
        while (i < nhandlers && handlers[i] != p)
            i++;
        if (i == nhandlers)
            continue; /* an orphan, reaped */
        agent_procs_ended(p);
        if (WIFSTOPPED(status)) {
            fprintf(stderr, "sbx-agent: handler %d was stopped (signal %d): killing it and "
                            "what its command started\n",
                    (int)p, WSTOPSIG(status));
            kill(p, SIGKILL);
            continue;
        }
        handlers[i] = handlers[--nhandlers];
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            if (WIFSIGNALED(status))
                fprintf(stderr, "sbx-agent: handler %d was killed (signal %d): killing "
                                "what its command started\n",
                        (int)p, WTERMSIG(status));
            strays_pending = 1;
        }
    }
}

/* Kill every process re-parented to us that no live handler holds. */
static void sweep_strays(void)
{
    while (strays_pending) {
        strays_pending = 0;
        agent_tree_kill_except(&handlers, &nhandlers, reap_all, NULL);
    }
}

/* A stop signal: pass it to every process, wait a little for them, exit. */
static void shut_down(int sig)
{
    if (getpid() != 1) /* not the container's init (a test run) */
        exit(0);
    kill(-1, sig);
    struct timespec end, now;
    clock_gettime(CLOCK_MONOTONIC, &end);
    end.tv_sec += 3;
    for (;;) {
        pid_t p = waitpid(-1, NULL, WNOHANG);
        if (p < 0 && errno == ECHILD)
            break;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec > end.tv_sec ||
            (now.tv_sec == end.tv_sec && now.tv_nsec >= end.tv_nsec))
            break;
        if (p <= 0)
            usleep(10000);
    }
    unlink(agent_cfg.socket_path);
    exit(0);
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "version") == 0) {
        printf("sbx-agent protocol %u\n", AP_VERSION);
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "ping") == 0)
        return ping(argv[2]);
    if (argc < 2 || strcmp(argv[1], "serve") != 0)
        usage();
    parse_args(argc, argv);
    /* no ptrace, no /proc/1/fd, no pidfd_getfd from inside the container
     * (without CAP_SYS_PTRACE); handlers inherit it */
    prctl(PR_SET_DUMPABLE, 0);
    if (getpid() != 1)
        prctl(PR_SET_CHILD_SUBREAPER, 1); /* reap like an init even when not one */

    /* the user must exist when the container starts, as Docker demands of
     * a container's User */
    struct agent_user u;
    char msg[256];
    if (agent_user_resolve(agent_cfg.user, &u, msg, sizeof msg) != 0)
        return fatal(msg);
    /* the workspace belongs to the sandbox user (the directory itself; what
     * is inside is the user's doing) */
    if (agent_cfg.own_workspace && chown(agent_cfg.roots[0], u.uid, u.gid) != 0)
        return fatal("cannot give the workspace to the sandbox user");
    char errpath[4096];
    snprintf(errpath, sizeof errpath, "%s.err", agent_cfg.socket_path);
    unlink(errpath);

    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old);
    int sfd = signalfd(-1, &all, SFD_CLOEXEC | SFD_NONBLOCK);
    int lfd = listen_socket();
    if (sfd < 0 || lfd < 0)
        return 1;
    for (;;) {
        struct pollfd p[2] = {{.fd = lfd, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
        if (poll(p, 2, -1) < 0)
            continue;
        if (p[1].revents & POLLIN) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof si) == sizeof si) {
                int s = (int)si.ssi_signo;
                if (s == SIGCHLD)
                    continue;
                if (s == SIGTERM || s == SIGINT || s == SIGQUIT || s == SIGPWR)
                    shut_down(s);
                if (getpid() == 1 && s != SIGPIPE && s != SIGWINCH && s != SIGURG)
                    kill(-1, s); /* forward to every process but us */
            }
            reap_all(NULL);
            sweep_strays();
        }
        if (p[0].revents & POLLIN)
            for (int i = 0; i < 64; i++) {
                serve_one(lfd, sfd, &old);
                struct pollfd q = {.fd = lfd, .events = POLLIN};
                if (poll(&q, 1, 0) <= 0)
                    break;
            }
        reap_all(NULL);
        sweep_strays();
    }
}
