/*
 * agent_client.c - the provider's side of the sbx-agent channel
 * (shared/agent_proto/PROTOCOL.md): one unix-socket connection per operation, the
 * preamble and version check, frames under a deadline and the call's
 * cancellation, and the agent's errors turned into statuses.
 *
 * The socket lives in the session's resource directory (agent/, bound
 * read-write at /.sbx/run in the container), so its path is known from the
 * container's mounts. What is in that directory is the container's to
 * change: root in the container can replace the socket with a symlink (to
 * another session's socket), with a socket of its own, or plant a FIFO or
 * a device where the host reads. So nothing in it is ever reached by path:
 * the socket is opened O_PATH beneath the directory's descriptor with no
 * symlink resolved, must be a socket, and is connected to through
 * /proc/self/fd/N (that very inode); and the process that listens on it
 * must be the container's init (SO_PEERCRED against the daemon's
 * State.Pid), checked before anything is sent. agent.sock.err is read the
 * same way, only when it is a regular file, and only its start.
 */
#include "docker.h"

#include "confine.h"
#include "agent_proto/proto.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* How long a connect may find the agent's listen queue full before the
 * operation fails (the agent accepts within microseconds; a queue that
 * stays full is a listener that never accepts). */
#define AGENT_QUEUE_WAIT_MS 2000

int docker_agent_default_path(char **out)
{
    /* absolute: the daemon binds it (a plugin loaded through a relative
     * SBX_PLUGIN_PATH has a relative file name) */
    Dl_info info;
    char *so = NULL;
    if (dladdr((void *)docker_agent_default_path, &info) && info.dli_fname)
        so = realpath(info.dli_fname, NULL);
    const char *slash = so ? strrchr(so, '/') : NULL;
    int n = slash ? (int)(slash - so) : 0;
    size_t cap = (size_t)n + sizeof "/sbx-agent";
    *out = malloc(cap);
    if (*out)
        snprintf(*out, cap, "%.*s/sbx-agent", n, so ? so : "");
    free(so);
    return *out ? 0 : -1;
}

static int conn_error(struct docker_agent_conn *c, int status, const char *fmt, ...)
    SBX_PRINTF_LIKE(3, 4);
static int conn_error(struct docker_agent_conn *c, int status, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return docker_error(c->sb->st, c->call, status, "docker: the sbx agent of container %.12s: %s",
                        c->sb->id, msg);
}

/* Wait for fd to be ready for events. SBX_OK, or the error set. */
static int wait_fd(struct docker_agent_conn *c, short events, const char *what)
{
    for (;;) {
        int timeout = -1;
        if (c->deadline) {
            int64_t left = c->deadline - docker_now_ms();
            if (left <= 0)
                return conn_error(c, SBX_E_TIMEOUT, "%s: no answer in time", what);
            timeout = left > 60000 ? 60000 : (int)left;
        }
        struct pollfd p[2] = {{.fd = c->fd, .events = events},
                              {.fd = c->cancel_fd, .events = POLLIN}};
        int r = poll(p, c->cancel_fd >= 0 ? 2 : 1, timeout);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return conn_error(c, SBX_E_IO, "%s: poll: %s", what, strerror(errno));
        if (c->cancel_fd >= 0 && (p[1].revents & POLLIN))
            return docker_error(c->sb->st, c->call, SBX_E_CANCELLED, "docker: cancelled");
        if (p[0].revents)
            return SBX_OK;
    }
}

static int send_all(struct docker_agent_conn *c, const void *buf, size_t n)
{
    size_t off = 0;
    while (off < n) {
        ssize_t k = send(c->fd, (const char *)buf + off, n - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && errno == EAGAIN) {
            int rc = wait_fd(c, POLLOUT, "sending");
            if (rc != SBX_OK)
                return rc;
            continue;
        }
        if (k < 0)
            return conn_error(c, SBX_E_UNAVAILABLE, "the connection broke while sending (%s)",
                              strerror(errno));
        off += (size_t)k;
    }
    return SBX_OK;
}

static int recv_all(struct docker_agent_conn *c, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t k = recv(c->fd, (char *)buf + got, n - got, MSG_DONTWAIT);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && errno == EAGAIN) {
            int rc = wait_fd(c, POLLIN, "receiving");
            if (rc != SBX_OK)
                return rc;
            continue;
        }
        if (k <= 0)
            return conn_error(c, SBX_E_UNAVAILABLE,
                              "the connection ended in the middle of an answer (%s); the "
                              "agent or its container may have died",
                              k < 0 ? strerror(errno) : "end of stream");
        got += (size_t)k;
    }
    return SBX_OK;
}

int docker_agent_send(struct docker_agent_conn *c, int type, const void *p, size_t n)
{
    unsigned char hdr[AP_HDR_LEN];
    sbxs_ap_header(hdr, type, (uint32_t)n);
    int rc = send_all(c, hdr, sizeof hdr);
    return rc == SBX_OK && n ? send_all(c, p, n) : rc;
}

int docker_agent_recv(struct docker_agent_conn *c, int *type, unsigned char *buf,
                      size_t cap, uint32_t *len)
{
    unsigned char hdr[AP_HDR_LEN];
    int rc = recv_all(c, hdr, sizeof hdr);
    if (rc != SBX_OK)
        return rc;
    if (sbxs_ap_parse_header(hdr, type, len) != 0 || *len > cap)
        return conn_error(c, SBX_E_PROTOCOL, "a frame of %u bytes is larger than allowed",
                          *len);
    return *len ? recv_all(c, buf, *len) : SBX_OK;
}

/* errno values the agent reports, as statuses */
static int status_of(uint32_t e)
{
    switch (e) {
    case ENOENT:
        return SBX_E_NOT_FOUND;
    case EACCES:
    case EPERM:
    case EROFS:
        return SBX_E_DENIED;
    case EXDEV:
    case ELOOP:
    case EISDIR:
    case ENOTDIR:
    case EINVAL:
    case EEXIST:
    case ENOTEMPTY:
    case ENAMETOOLONG:
        return SBX_E_INVALID;
    case EBADMSG:
    case EPROTO:
    case EPROTONOSUPPORT:
        return SBX_E_PROTOCOL;
    case ENOMEM:
        return SBX_E_NOMEM;
    default:
        return SBX_E_IO;
    }
}

int docker_agent_fail(struct docker_agent_conn *c, const char *what, int type,
                      const unsigned char *payload, uint32_t len,
                      int (*map)(uint32_t e, const char *stage))
{
    if (type != AP_ERROR)
        return conn_error(c, SBX_E_PROTOCOL, "%s: unexpected frame type 0x%02x", what, type);
    struct ap_in in;
    sbxs_ap_in_begin(&in, payload, len);
    uint32_t e = sbxs_ap_get_u32(&in);
    char *stage = sbxs_ap_get_str(&in);
    char *msg = sbxs_ap_get_str(&in);
    int rc = !sbxs_ap_in_done(&in)
                 ? conn_error(c, SBX_E_PROTOCOL, "%s: malformed error frame", what)
                 : docker_error(c->sb->st, c->call, map ? map(e, stage) : status_of(e),
                                "docker: %s: %s", what, msg);
    free(stage);
    free(msg);
    return rc;
}

void docker_agent_close(struct docker_agent_conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
}

/* name in the agent's directory, opened O_PATH with no symlink resolved
 * (a trailing symlink is opened as itself), and its fstat. -1 with errno. */
static int open_in_run(const sbx_sandbox *sb, const char *name, struct stat *st)
{
    int dfd = open(sb->agent_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return -1;
    int fd = sbxp_confine_open_strict(dfd, name, O_PATH | O_NOFOLLOW, 0);
    close(dfd);
    if (fd < 0) {
        errno = -fd;
        return -1;
    }
    if (fstat(fd, st) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

static const char *kind_of(mode_t m)
{
    return S_ISLNK(m)    ? "a symlink"
           : S_ISFIFO(m) ? "a FIFO"
           : S_ISREG(m)  ? "a regular file"
           : S_ISDIR(m)  ? "a directory"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
                         : "not a socket";
}

/* The start of what the agent wrote about why it did not start (it
 * leaves agent.sock.err beside its socket), or "". Only a regular file is
 * read (a FIFO, a device or a symlink root left there is not even opened
 * for reading), and only its first cap - 1 bytes. */
static void agent_err(const sbx_sandbox *sb, char *buf, size_t cap)
{
    buf[0] = '\0';
    struct stat s;
    int pfd = open_in_run(sb, DOCKER_AGENT_SOCK ".err", &s);
    if (pfd < 0)
        return;
    int fd = S_ISREG(s.st_mode) ? sbxp_confine_reopen(pfd, O_RDONLY | O_NONBLOCK) : -1;
    close(pfd);
    if (fd < 0)
        return;
    ssize_t n = read(fd, buf, cap - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
}

/* Nobody answers at the socket (errno e): say why, from the container's
 * state (gone, stopped, running) or the daemon's silence. *running tells
 * whether waiting may help. */
static int diagnose(struct docker_agent_conn *c, int e, int *running)
{
    sbx_sandbox *sb = c->sb;
    struct docker_state *st = sb->st;
    int64_t t = st->cfg.request_timeout_ms < 5000 ? st->cfg.request_timeout_ms : 5000;
    json_object *info = NULL;
    sbxp_http_error err;
    *running = 0;
    int rc = docker_json_within(st, NULL, t, "GET", NULL, &info, &err, "/containers/%s/json",
                                sb->id);
    if (rc == SBX_E_NOT_FOUND)
        return docker_error(st, c->call, SBX_E_NOT_FOUND,
                            "docker: container %.12s no longer exists (the workspace is "
                            "gone)",
                            sb->id);
    if (rc != SBX_OK)
        return docker_report(st, c->call, &err,
                             "the sbx agent of container %.12s does not answer (%s); "
                             "inspecting the container",
                             sb->id, strerror(e));
    json_object *state = sbxp_json_obj(info, "State");
    *running = sbxp_json_bool(state, "Running", 0);
    int64_t code = sbxp_json_int(state, "ExitCode", -1);
    json_object_put(info);
    char why[512];
    agent_err(sb, why, sizeof why);
    if (!*running)
        return docker_error(st, c->call, SBX_E_UNAVAILABLE,
                            "docker: container %.12s is not running (exit code %lld%s%s): "
                            "its agent, the container's init, has ended; attach to the "
                            "session again to restart it",
                            sb->id, (long long)code, why[0] ? ": " : "", why);
    return conn_error(c, SBX_E_UNAVAILABLE,
                      "no answer at %s (%s) although the container runs; attach to the "
                      "session again to restart it",
                      sb->agent_sock, strerror(e));
}

/* Connect c->fd to the agent's socket, the very inode found beneath the
 * agent's directory (see the top of this file). SBX_OK; SBX_E_UNAVAILABLE
 * with *connect_errno set when nobody listens there (no socket yet, a
 * dead listener: the caller says why); another status with the error set
 * when what is there is not the agent's socket. */
static int connect_agent(struct docker_agent_conn *c, int *connect_errno)
{
    sbx_sandbox *sb = c->sb;
    struct stat s;
    int pfd = open_in_run(sb, DOCKER_AGENT_SOCK, &s);
    if (pfd < 0) {
        int e = errno;
        if (e == ENOENT) {
            *connect_errno = e;
            return SBX_E_UNAVAILABLE;
        }
        return conn_error(c, e == EACCES || e == EPERM ? SBX_E_DENIED : SBX_E_IO,
                          "cannot open %s: %s", sb->agent_sock, strerror(e));
    }
    if (!S_ISSOCK(s.st_mode) || (s.st_uid != geteuid() && s.st_uid != 0)) {
        close(pfd);
        c->replaced = 1;
        if (!S_ISSOCK(s.st_mode))
            return conn_error(c, SBX_E_DENIED,
                              "%s is %s, not the agent's socket: a process in the "
                              "container replaced it; not following it (attach to the "
                              "session again: attach restarts the container, whose agent "
                              "makes its socket again)",
                              sb->agent_sock, kind_of(s.st_mode));
        return conn_error(c, SBX_E_DENIED,
                          "%s belongs to uid %u, not to the agent (uid 0) or this "
                          "provider (uid %u): not the agent's socket",
                          sb->agent_sock, (unsigned)s.st_uid, (unsigned)geteuid());
    }
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "/proc/self/fd/%d", pfd);
    c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (c->fd < 0) {
        int e = errno;
        close(pfd);
        return conn_error(c, SBX_E_IO, "socket: %s", strerror(e));
    }
    /* non-blocking: a listener whose queue is full (one that never
     * accepts) must not hold the call; the queue gets a short while */
    int64_t until = docker_now_ms() + AGENT_QUEUE_WAIT_MS;
    if (c->deadline && c->deadline < until)
        until = c->deadline;
    int rc, e = 0;
    while ((rc = connect(c->fd, (struct sockaddr *)&sa, sizeof sa)) != 0) {
        e = errno;
        if (e == EINTR)
            continue;
        if (e != EAGAIN || docker_now_ms() >= until)
            break;
        if (c->call && sb->st->host->cancelled && sb->st->host->cancelled(sb->st->host, c->call)) {
            close(pfd);
            return docker_error(sb->st, c->call, SBX_E_CANCELLED, "docker: cancelled");
        }
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    close(pfd);
    if (rc != 0 && e == EAGAIN)
        return conn_error(c, SBX_E_UNAVAILABLE,
                          "%s accepts no connection (its listen queue stayed full for "
                          "%d ms)",
                          sb->agent_sock, AGENT_QUEUE_WAIT_MS);
    if (rc != 0 && (e == EACCES || e == EPERM))
        return conn_error(c, SBX_E_DENIED, "permission denied connecting to %s",
                          sb->agent_sock);
    if (rc != 0) {
        *connect_errno = e;
        return SBX_E_UNAVAILABLE; /* the caller says why */
    }
    /* the rest of the exchange polls itself */
    int fl = fcntl(c->fd, F_GETFL);
    if (fl < 0 || fcntl(c->fd, F_SETFL, fl & ~O_NONBLOCK) != 0)
        return conn_error(c, SBX_E_IO, "fcntl: %s", strerror(errno));
    return SBX_OK;
}

/* The container's init pid (the host's view) from the daemon; 0 when it
 * does not run. SBX_OK or the error set. */
static int init_pid(struct docker_agent_conn *c, int *pid)
{
    struct docker_state *st = c->sb->st;
    int64_t t = st->cfg.request_timeout_ms < 5000 ? st->cfg.request_timeout_ms : 5000;
    json_object *info = NULL;
    sbxp_http_error err;
    int rc = docker_json_within(st, c->call, t, "GET", NULL, &info, &err,
                                "/containers/%s/json", c->sb->id);
    if (rc == SBX_E_NOT_FOUND)
        return docker_error(st, c->call, SBX_E_NOT_FOUND,
                            "docker: container %.12s no longer exists (the workspace is "
                            "gone)",
                            c->sb->id);
    if (rc != SBX_OK)
        return docker_report(st, c->call, &err,
                             "inspecting container %.12s to authenticate its agent",
                             c->sb->id);
    json_object *state = sbxp_json_obj(info, "State");
    *pid = sbxp_json_bool(state, "Running", 0) ? (int)sbxp_json_int(state, "Pid", 0) : 0;
    json_object_put(info);
    return SBX_OK;
}

/*
 * The process listening on the socket c->fd reached must be the
 * container's init, the agent: SO_PEERCRED names the process that called
 * listen(), in this process's PID namespace. A listener root started in
 * the container (a fake agent, or one that answers nothing) has another
 * pid, and so has another container's agent: refused before a byte is
 * sent. The init's pid is remembered in the handle and asked of the
 * daemon again only when the peer differs (a restarted container has a
 * new one).
 */
static int check_peer(struct docker_agent_conn *c)
{
    sbx_sandbox *sb = c->sb;
    struct ucred cr;
    socklen_t len = sizeof cr;
    if (getsockopt(c->fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0)
        return conn_error(c, SBX_E_IO, "SO_PEERCRED: %s", strerror(errno));
    if (cr.pid <= 0)
        return conn_error(c, SBX_E_UNSUPPORTED,
                          "the process listening at %s is outside this process's PID "
                          "namespace, so it cannot be checked to be the container's "
                          "init: run sbx in the docker daemon's PID namespace",
                          sb->agent_sock);
    if (cr.pid == atomic_load(&sb->agent_pid))
        return SBX_OK;
    int pid = 0;
    int rc = init_pid(c, &pid);
    if (rc != SBX_OK)
        return rc;
    if (pid > 0)
        atomic_store(&sb->agent_pid, pid);
    if (cr.pid == pid)
        return SBX_OK;
    c->replaced = 1;
    if (!pid)
        return conn_error(c, SBX_E_UNAVAILABLE,
                          "the container is not running, yet pid %d listens at %s; "
                          "attach to the session again to restart it",
                          (int)cr.pid, sb->agent_sock);
    return conn_error(c, SBX_E_DENIED,
                      "pid %d listens at %s, not the container's init (pid %d, the "
                      "agent): a process in the container replaced the agent's socket; "
                      "nothing was sent to it (attach to the session again: attach "
                      "restarts the container, whose agent makes its socket again)",
                      (int)cr.pid, sb->agent_sock, pid);
}

static int open_conn(sbx_sandbox *sb, sbx_call *call, const void *req, size_t req_len,
                     int64_t deadline, struct docker_agent_conn *c, int *connect_errno)
{
    struct docker_state *st = sb->st;
    c->sb = sb;
    c->call = call;
    c->deadline = deadline;
    c->cancel_fd = call && st->host->cancel_fd ? st->host->cancel_fd(st->host, call) : -1;
    c->fd = -1;
    c->replaced = 0;
    int rc = connect_agent(c, connect_errno);
    if (rc == SBX_OK)
        rc = check_peer(c);
    if (rc != SBX_OK) {
        docker_agent_close(c);
        return rc;
    }
    /* Protocol 1 unless the request needs 2 (it acts as a user, or makes
     * one) or 3 (a process channel): so that a container whose agent
     * predates users keeps serving everything else. From 2 on the user
     * field leads the payload. */
    const unsigned char *frame = req;
    int type = req_len >= AP_HDR_LEN ? frame[AP_HDR_LEN - 1] : AP_PING;
    const char *user = type == AP_PING ? NULL : docker_call_user(st, call);
    uint32_t sent = type == AP_PROC_CHANNEL                               ? 3
                    : user || type == AP_GROUP_ADD || type == AP_USER_ADD ? 2
                                                                          : 1;
    /* protocol 3: the file ops (AP_RENAME is new; stat, list, mkdir and
     * remove never follow their last component and stat and list report
     * nanosecond mtimes only from an agent of 3) */
    if (type == AP_RENAME || type == AP_STAT || type == AP_LIST || type == AP_MKDIR ||
        type == AP_REMOVE)
        sent = 3;
    unsigned char pre[AP_PREAMBLE_LEN];
    sbxs_ap_preamble(pre, sent);
    rc = send_all(c, pre, sizeof pre);
    if (rc == SBX_OK && sent == 1) {
        rc = send_all(c, req, req_len);
    } else if (rc == SBX_OK) {
        unsigned char head[AP_HDR_LEN + 4 + 256];
        size_t ul = user ? strlen(user) : 0;
        if (ul > 255)
            rc = conn_error(c, SBX_E_INVALID, "user name longer than 255 bytes");
        /* req may hold more frames after the request (exec's end of
         * stdin): only the first one gets the field */
        int t;
        uint32_t first = 0;
        if (rc == SBX_OK && (sbxs_ap_parse_header(frame, &t, &first) != 0 ||
                             AP_HDR_LEN + (size_t)first > req_len))
            rc = conn_error(c, SBX_E_INTERNAL, "a malformed request frame");
        if (rc == SBX_OK) {
            size_t body = (size_t)first + 4 + ul;
            sbxs_ap_header(head, type, (uint32_t)body);
            head[AP_HDR_LEN] = (unsigned char)(ul >> 24);
            head[AP_HDR_LEN + 1] = (unsigned char)(ul >> 16);
            head[AP_HDR_LEN + 2] = (unsigned char)(ul >> 8);
            head[AP_HDR_LEN + 3] = (unsigned char)ul;
            memcpy(head + AP_HDR_LEN + 4, user ? user : "", ul);
            rc = body > AP_FRAME_MAX
                     ? conn_error(c, SBX_E_INVALID, "the request is too large")
                     : send_all(c, head, AP_HDR_LEN + 4 + ul);
        }
        if (rc == SBX_OK)
            rc = send_all(c, frame + AP_HDR_LEN, req_len - AP_HDR_LEN);
    }
    /* the agent's preamble (sent before it reads ours): its version */
    uint32_t version = 0;
    if (rc == SBX_OK && (rc = recv_all(c, pre, sizeof pre)) == SBX_OK &&
        sbxs_ap_parse_preamble(pre, &version) != 0)
        rc = conn_error(c, SBX_E_PROTOCOL, "%s does not speak the sbx-agent protocol",
                        sb->agent_sock);
    if (rc == SBX_OK && version < sent && version >= AP_VERSION_MIN)
        rc = conn_error(c, SBX_E_UNSUPPORTED,
                        "the agent speaks protocol version %u, which cannot %s "
                        "(protocol %u can); recreate the session's container to run it "
                        "under the current sbx-agent",
                        version,
                        type == AP_PROC_CHANNEL ? "run processes that outlive the call"
                        : sent == 3             ? "serve this file operation"
                                                : "make users or act as one",
                        sent);
    else if (rc == SBX_OK && (version < AP_VERSION_MIN || version > AP_VERSION))
        rc = conn_error(c, SBX_E_PROTOCOL,
                        "the agent speaks protocol version %u, this provider %u to %u; "
                        "recreate the session's container (or install the matching "
                        "sbx-agent)",
                        version, AP_VERSION_MIN, AP_VERSION);
    if (rc != SBX_OK)
        docker_agent_close(c);
    return rc;
}

int docker_agent_open(sbx_sandbox *sb, sbx_call *call, const void *req, size_t req_len,
                      int64_t deadline, struct docker_agent_conn *c)
{
    int e = 0, running;
    int rc = open_conn(sb, call, req, req_len, deadline, c, &e);
    return e ? diagnose(c, e, &running) : rc;
}

/* One ping. *connect_errno is set when nobody listens, *replaced when
 * what listens (or lies there) is not the agent. */
static int ping_once(sbx_sandbox *sb, sbx_call *call, int64_t deadline, int *connect_errno,
                     int *replaced)
{
    unsigned char req[AP_HDR_LEN];
    sbxs_ap_header(req, AP_PING, 0);
    struct docker_agent_conn c;
    *connect_errno = 0;
    int rc = open_conn(sb, call, req, sizeof req, deadline, &c, connect_errno);
    *replaced = c.replaced;
    if (rc != SBX_OK)
        return rc;
    unsigned char buf[512];
    int type;
    uint32_t len;
    rc = docker_agent_recv(&c, &type, buf, sizeof buf, &len);
    if (rc == SBX_OK && type != AP_PONG)
        rc = docker_agent_fail(&c, "ping", type, buf, len, NULL);
    docker_agent_close(&c);
    return rc;
}

int docker_agent_ready(sbx_sandbox *sb, sbx_call *call, int64_t wait_ms, int *stopped,
                       int *replaced)
{
    *stopped = 0;
    *replaced = 0;
    int64_t end = docker_now_ms() + wait_ms, next_look = docker_now_ms() + 200;
    for (;;) {
        int e;
        int rc = ping_once(sb, call, end, &e, replaced);
        /* only "nobody listens yet" is worth waiting for: the agent of a
         * container that just started makes its socket within milliseconds;
         * now and then the container is looked at, so one whose agent
         * refused to start fails at once */
        if (!e)
            return rc;
        if (docker_now_ms() >= end || docker_now_ms() >= next_look) {
            struct docker_agent_conn c = {.fd = -1, .sb = sb, .call = call};
            int running;
            rc = diagnose(&c, e, &running);
            *stopped = !running;
            if (!running || docker_now_ms() >= end)
                return rc;
            next_look = docker_now_ms() + 200;
        }
        if (call && sb->st->host->cancelled && sb->st->host->cancelled(sb->st->host, call))
            return docker_error(sb->st, call, SBX_E_CANCELLED, "docker: cancelled");
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}
