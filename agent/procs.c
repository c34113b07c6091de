/*
 * procs.c - the agent's process supervisor (protocol 3's process channel,
 * shared/proc_supervisor.h).
 *
 * The supervisor is one long-lived child of the init, started with the
 * first connection (and again at the next one after it ended), which runs the
 * shared event loop. It is a child subreaper: everything its processes
 * start stays in its subtree, so kill-all (destroy) reaches what left its
 * process group too (agent_tree_kill over the subtree), and the init's
 * sweep for strays, which spares the subtrees of the children it tracks,
 * spares it: the init tracks it like a connection handler. When the
 * supervisor itself is killed (root in the container can), its processes
 * are re-parented to the init and swept like any handler's strays: no
 * process outlives its supervisor, and the host's next request on the
 * channel fails (the connection ends) instead of waiting.
 *
 * Connections reach it through the main socket and its authentication
 * unchanged: a connection handler that reads AP_PROC_CHANNEL passes its
 * connection, by SCM_RIGHTS over a socket pair only the init and its
 * handlers hold, to the supervisor, which answers AP_OK and serves the
 * channel from then on. The listening socket (and so SO_PEERCRED's pid,
 * which the host checks) stays the init's.
 */
#include "agent.h"

#include "proc_supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

extern char **environ;

static pid_t sup_pid;    /* 0: none running */
static int sup_fd = -1;  /* the init's (and its handlers') end of the pair */

static int resolve_user(void *ctx, const char *spec, struct sbxs_psv_user *u, char *msg,
                        size_t cap)
{
    (void)ctx;
    struct agent_user a;
    if (agent_user_resolve(spec && spec[0] ? spec : agent_cfg.user, &a, msg, cap) != 0)
        return -1;
    memset(u, 0, sizeof *u);
    u->uid = a.uid;
    u->gid = a.gid;
    memcpy(u->groups, a.groups, a.ngroups * sizeof a.groups[0]);
    u->ngroups = a.ngroups;
    snprintf(u->home, sizeof u->home, "%s", a.home);
    return 0;
}

static int kill_tree(void *ctx, void (*reap)(void *), void *reap_ctx)
{
    (void)ctx;
    return agent_tree_kill(reap, reap_ctx);
}

static void supervise(int fd, const sigset_t *old, pid_t init) __attribute__((noreturn));
static void supervise(int fd, const sigset_t *old, pid_t init)
{
    for (int s = 1; s < NSIG; s++)
        signal(s, SIG_DFL);
    sigprocmask(SIG_SETMASK, old, NULL);
    /* it does not outlive the agent (which matters where the agent is not
     * the container's init, as in tests: there nothing else would end it) */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != init)
        _exit(1);
    prctl(PR_SET_DUMPABLE, 0);
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    int root = open(agent_cfg.roots[0], O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root < 0) {
        fprintf(stderr, "sbx-agent: supervisor: cannot open %s: %s\n", agent_cfg.roots[0],
                strerror(errno));
        _exit(1);
    }
    struct sbxs_psv_config cfg = {
        .listen_fd = -1,
        .handoff_fd = fd,
        .root_fd = root,
        .resolve_user = resolve_user,
        .base_env = environ,
        .kill_tree = kill_tree,
        .stop_fd = -1,
    };
    struct sbxs_psv *s = sbxs_psv_new(&cfg);
    if (!s || sbxs_psv_run(s) != 0)
        fprintf(stderr, "sbx-agent: supervisor: %s\n", strerror(errno));
    sbxs_psv_free(s);
    _exit(1);
}

pid_t agent_procs_ensure(const int *close_fds, size_t nclose, const sigset_t *old)
{
    if (sup_pid > 0)
        return 0;
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) != 0)
        return -1;
    pid_t init = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        for (size_t i = 0; i < nclose; i++)
            close(close_fds[i]);
        close(sp[0]);
        if (sup_fd >= 0)
            close(sup_fd);
        supervise(sp[1], old, init);
    }
    close(sp[1]);
    if (pid < 0) {
        close(sp[0]);
        return -1;
    }
    if (sup_fd >= 0)
        close(sup_fd);
    sup_fd = sp[0];
    sup_pid = pid;
    return pid;
}

void agent_procs_ended(pid_t pid)
{
    if (pid != sup_pid || pid <= 0)
        return;
    fprintf(stderr, "sbx-agent: the process supervisor (pid %d) ended; its processes are "
                    "killed with it\n",
            (int)pid);
    sup_pid = 0;
    if (sup_fd >= 0)
        close(sup_fd);
    sup_fd = -1;
}

void agent_procs_serve(int fd, uint32_t len)
{
    if (len != 0) {
        agent_wire_error(fd, EPROTO, "request", "malformed process channel request");
        return;
    }
    if (sup_fd < 0) {
        agent_wire_error(fd, EAGAIN, "request", "the agent has no process supervisor");
        return;
    }
    char byte = 'c';
    struct iovec iov = {&byte, 1};
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } u;
    memset(&u, 0, sizeof u);
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                       .msg_controllen = sizeof u.buf};
    struct cmsghdr *h = CMSG_FIRSTHDR(&m);
    h->cmsg_level = SOL_SOCKET;
    h->cmsg_type = SCM_RIGHTS;
    h->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(h), &fd, sizeof fd);
    ssize_t n;
    while ((n = sendmsg(sup_fd, &m, MSG_NOSIGNAL)) < 0 && errno == EINTR)
        ;
    if (n != 1)
        agent_wire_error(fd, EAGAIN, "request", "the process supervisor does not answer: %s",
                         strerror(errno));
}
