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
 * is given to that directory's owner with mode 0600.
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
    ap_preamble(pre, AP_VERSION);
    ap_header(hdr, AP_PING, 0);
    /* a refused peer may find the connection closed already: read the
     * answer anyway */
    if (wire_write_full(fd, pre, sizeof pre) == 0)
        wire_write_full(fd, hdr, sizeof hdr);
    unsigned char *buf = malloc(AP_FRAME_MAX);
    int type;
    uint32_t len, version;
    /* a refused peer gets an error frame without a preamble */
    if (!buf || wire_read_full(fd, pre, sizeof pre) != 0) {
        printf("no answer\n");
        return 1;
    }
    if (ap_parse_preamble(pre, &version) != 0) {
        /* the 8 bytes were the start of an error frame */
        memcpy(hdr, pre, AP_HDR_LEN);
        if (ap_parse_header(hdr, &type, &len) == 0 && type == AP_ERROR && len >= 3 &&
            len < 4096 && wire_read_full(fd, buf + 3, len - 3) == 0) {
            memcpy(buf, pre + AP_HDR_LEN, 3);
            struct ap_in in;
            ap_in_begin(&in, buf, len);
            uint32_t e = ap_get_u32(&in);
            char *stage = ap_get_str(&in), *msg = ap_get_str(&in);
            printf("refused (errno %u, %s): %s\n", e, stage ? stage : "?", msg ? msg : "?");
        } else {
            printf("not an sbx-agent\n");
        }
        return 1;
    }
    if (wire_read_frame(fd, &type, buf, AP_FRAME_MAX, &len) != 0 || type != AP_PONG) {
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
        if (stat(dir, &ds) == 0 && chown(sa.sun_path, ds.st_uid, ds.st_gid) != 0)
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

static void serve_one(int lfd, int sfd, const sigset_t *old)
{
    int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (c < 0)
        return;
    if (!peer_allowed(c)) {
        wire_error(c, EPERM, "connect",
                   "connections from inside the container are refused");
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
        conn_serve(c);
        _exit(0);
    }
    if (pid < 0)
        wire_error(c, errno, "fork", "the agent cannot fork: %s", strerror(errno));
    close(c);
}

static void reap_all(void)
{
    while (waitpid(-1, NULL, WNOHANG) > 0)
        ;
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
    if (getpid() != 1)
        prctl(PR_SET_CHILD_SUBREAPER, 1); /* reap like an init even when not one */

    /* the user must exist when the container starts, as Docker demands of
     * a container's User */
    struct agent_user u;
    char msg[256];
    if (user_resolve(agent_cfg.user, &u, msg, sizeof msg) != 0)
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
            reap_all();
        }
        if (p[0].revents & POLLIN)
            for (int i = 0; i < 64; i++) {
                serve_one(lfd, sfd, &old);
                struct pollfd q = {.fd = lfd, .events = POLLIN};
                if (poll(&q, 1, 0) <= 0)
                    break;
            }
        reap_all();
    }
}
