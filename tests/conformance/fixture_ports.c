/*
 * fixture_ports.c - exposed ports of "cfproc": the sandbox's processes are
 * host processes, so a port declared at create is published as docker
 * does it, by a forwarder: a listening socket on 127.0.0.1 (an ephemeral
 * port; on 0.0.0.0 with FXP_PORT_ALL_INTERFACES, the defect) whose
 * connections are relayed to 127.0.0.1:<declared port>. One thread
 * accepts per port, one relays per connection.
 */
#include "fixture_procs.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define PORT_SLOTS 32

static struct fwd {
    char owner[SBX_KEY_HASH_LEN + 1];
    uint16_t port;     /* in the sandbox */
    uint16_t outside;  /* where it is published */
    int listen_fd;
    int stop[2];       /* a byte on stop[1] ends the acceptor */
    pthread_t thread;
} fwds[PORT_SLOTS];
static pthread_mutex_t fwds_lock = PTHREAD_MUTEX_INITIALIZER;

/* Relay between two sockets until either side is done. */
static void *relay(void *arg)
{
    int *fds = arg;
    int a = fds[0], b = fds[1];
    free(fds);
    char buf[16384];
    int open_a = 1, open_b = 1;
    while (open_a || open_b) {
        struct pollfd pf[2] = {{open_a ? a : -1, POLLIN, 0}, {open_b ? b : -1, POLLIN, 0}};
        if (poll(pf, 2, 30000) <= 0)
            break;
        for (int i = 0; i < 2; i++) {
            if (!pf[i].revents)
                continue;
            int from = i ? b : a, to = i ? a : b;
            ssize_t n = recv(from, buf, sizeof buf, 0);
            if (n <= 0) {
                shutdown(to, SHUT_WR);
                if (i)
                    open_b = 0;
                else
                    open_a = 0;
                continue;
            }
            for (ssize_t off = 0; off < n;) {
                ssize_t w = send(to, buf + off, (size_t)(n - off), MSG_NOSIGNAL);
                if (w <= 0) {
                    open_a = open_b = 0;
                    break;
                }
                off += w;
            }
        }
    }
    close(a);
    close(b);
    return NULL;
}

static void *acceptor(void *arg)
{
    struct fwd *f = arg;
    for (;;) {
        struct pollfd pf[2] = {{f->listen_fd, POLLIN, 0}, {f->stop[0], POLLIN, 0}};
        if (poll(pf, 2, -1) < 0 && errno != EINTR)
            break;
        if (pf[1].revents)
            break;
        if (!pf[0].revents)
            continue;
        int c = accept4(f->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0)
            continue;
        int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(f->port)};
        to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        int *fds = malloc(2 * sizeof *fds);
        pthread_t th;
        if (s < 0 || !fds || connect(s, (struct sockaddr *)&to, sizeof to) < 0) {
            close(c); /* nothing listens in the sandbox: refused, as docker's proxy */
            if (s >= 0)
                close(s);
            free(fds);
            continue;
        }
        fds[0] = c;
        fds[1] = s;
        if (pthread_create(&th, NULL, relay, fds) != 0) {
            close(c);
            close(s);
            free(fds);
            continue;
        }
        pthread_detach(th);
    }
    return NULL;
}

/* The slot of (owner, port), or -1. Lock held. */
static int slot_of(const char *owner, uint16_t port)
{
    for (int i = 0; i < PORT_SLOTS; i++)
        if (fwds[i].port == port && !strcmp(fwds[i].owner, owner))
            return i;
    return -1;
}

static int publish(struct fwd *f, int mode)
{
    f->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (f->listen_fd < 0)
        return -errno;
    int one = 1;
    setsockopt(f->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(mode == FXP_PORT_ALL_INTERFACES ? INADDR_ANY : INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (bind(f->listen_fd, (struct sockaddr *)&a, sizeof a) < 0 ||
        listen(f->listen_fd, 64) < 0 ||
        getsockname(f->listen_fd, (struct sockaddr *)&a, &len) < 0 ||
        pipe2(f->stop, O_CLOEXEC) < 0) {
        int e = errno;
        close(f->listen_fd);
        return -e;
    }
    f->outside = ntohs(a.sin_port);
    if (pthread_create(&f->thread, NULL, acceptor, f) != 0) {
        close(f->listen_fd);
        close(f->stop[0]);
        close(f->stop[1]);
        return -EAGAIN;
    }
    return 0;
}

int fxp_ports_declare(const struct sbx_host *host, sbx_call *call, const char *owner,
                      const uint16_t *ports, int mode)
{
    int rc = SBX_OK;
    pthread_mutex_lock(&fwds_lock);
    for (size_t i = 0; ports && ports[i] && rc == SBX_OK; i++) {
        if (slot_of(owner, ports[i]) >= 0)
            continue; /* a second create of the same sandbox */
        int s = slot_of("", 0);
        if (s < 0) {
            rc = host->set_error(host, call, SBX_E_NOMEM, "cfproc: more than %d ports",
                                 PORT_SLOTS);
            break;
        }
        struct fwd *f = &fwds[s];
        int e = publish(f, mode);
        if (e < 0) {
            rc = host->set_error(host, call, SBX_E_IO, "cfproc: publishing port %u: %s",
                                 (unsigned)ports[i], strerror(-e));
            break;
        }
        snprintf(f->owner, sizeof f->owner, "%s", owner);
        f->port = ports[i];
    }
    pthread_mutex_unlock(&fwds_lock);
    return rc;
}

int fxp_port_resolve(const struct fxp_sandbox *sb, sbx_call *call, uint16_t port,
                     struct sbx_port_endpoint *out)
{
    pthread_mutex_lock(&fwds_lock);
    int s = slot_of(sb->owner, port);
    uint16_t outside = s >= 0 ? fwds[s].outside : 0;
    pthread_mutex_unlock(&fwds_lock);
    if (s < 0)
        return sb->host->set_error(sb->host, call, SBX_E_NOT_FOUND,
                                   "cfproc: port %u was not declared at create",
                                   (unsigned)port);
    out->port = outside;
    out->tls = 0;
    snprintf(out->host, sizeof out->host, "127.0.0.1");
    snprintf(out->url, sizeof out->url, "http://127.0.0.1:%u", (unsigned)outside);
    out->header[0] = '\0';
    return SBX_OK;
}

void fxp_ports_destroy(const char *owner)
{
    pthread_mutex_lock(&fwds_lock);
    for (int i = 0; i < PORT_SLOTS; i++) {
        struct fwd *f = &fwds[i];
        if (!f->port || strcmp(f->owner, owner))
            continue;
        ssize_t w = write(f->stop[1], "x", 1);
        (void)w;
        pthread_join(f->thread, NULL);
        close(f->listen_fd);
        close(f->stop[0]);
        close(f->stop[1]);
        memset(f, 0, sizeof *f);
    }
    pthread_mutex_unlock(&fwds_lock);
}
