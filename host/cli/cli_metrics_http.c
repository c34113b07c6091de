/*
 * cli_metrics_http.c - GET /metrics over HTTP with libmicrohttpd, on a
 * loopback address only: the page tells how many sessions each provider
 * holds and how its backend behaves, which is nobody else's business, and
 * it has no authentication. The listening socket is made here (so a port
 * in use is reported with the address and the system's reason); the HTTP
 * is libmicrohttpd's, in its own thread, with a small connection limit and
 * timeout so that idle or slow clients cannot pile up.
 */
#include "cli.h"
#include "metrics.h"
#include "mhd_lazy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CONNECTION_LIMIT 16
#define CONNECTION_TIMEOUT_S 10

struct cli_http {
    struct MHD_Daemon *daemon;
};

static bool is_loopback(const struct sockaddr_storage *sa)
{
    if (sa->ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    }
    if (sa->ss_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_LOOPBACK(a))
            return true;
        return IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127;
    }
    return false;
}

bool cli_metrics_parse_addr(const char *addr, struct sockaddr_storage *sa, socklen_t *salen,
                            char *msg, size_t msglen)
{
    char host[256];
    const char *port;
    memset(sa, 0, sizeof *sa);
    if (addr[0] == '[') {
        const char *close = strchr(addr, ']');
        if (!close || close[1] != ':' || (size_t)(close - addr - 1) >= sizeof host) {
            snprintf(msg, msglen, "invalid --metrics address '%.200s' (expected "
                     "[IPV6]:PORT, e.g. [::1]:9464)", addr);
            return false;
        }
        memcpy(host, addr + 1, (size_t)(close - addr - 1));
        host[close - addr - 1] = '\0';
        port = close + 2;
    } else {
        const char *colon = strrchr(addr, ':');
        if (!colon || strchr(addr, ':') != colon || (size_t)(colon - addr) >= sizeof host) {
            snprintf(msg, msglen, "invalid --metrics address '%.200s' (expected HOST:PORT, "
                     "e.g. 127.0.0.1:9464 or [::1]:9464)", addr);
            return false;
        }
        memcpy(host, addr, (size_t)(colon - addr));
        host[colon - addr] = '\0';
        port = colon + 1;
    }
    char *end;
    errno = 0;
    unsigned long p = strtoul(port, &end, 10);
    if (!*port || *end || errno || p > 65535 || port[0] == '-' || port[0] == '+') {
        snprintf(msg, msglen, "invalid port '%.40s' in --metrics address '%.200s' (0..65535)",
                 port, addr);
        return false;
    }
    if (!strcmp(host, "localhost"))
        snprintf(host, sizeof host, "127.0.0.1");
    struct sockaddr_in *in4 = (struct sockaddr_in *)sa;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)sa;
    if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons((uint16_t)p);
        *salen = sizeof *in4;
    } else if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)p);
        *salen = sizeof *in6;
    } else {
        snprintf(msg, msglen, "invalid --metrics address '%.200s': '%s' is not an IP "
                 "address (use 127.0.0.1, ::1 or localhost)", addr, host);
        return false;
    }
    if (!is_loopback(sa)) {
        snprintf(msg, msglen, "--metrics address '%.200s' is not a loopback address: the "
                 "metrics are served without authentication, so only 127.0.0.0/8 and ::1 "
                 "are allowed (put a proxy in front to expose them)", addr);
        return false;
    }
    return true;
}

/* libmicrohttpd, loaded by cli_http_start (mhd_lazy.h) */
static const struct cli_mhd *mhd;

static enum MHD_Result respond(struct MHD_Connection *c, unsigned status, const char *type,
                               char *body, size_t len, enum MHD_ResponseMemoryMode mode)
{
    struct MHD_Response *r = mhd->create_response_from_buffer(len, body, mode);
    if (!r) {
        if (mode == MHD_RESPMEM_MUST_FREE)
            free(body);
        return MHD_NO;
    }
    mhd->add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    enum MHD_Result ret = mhd->queue_response(c, status, r);
    mhd->destroy_response(r);
    return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_size, void **state)
{
    (void)version;
    (void)upload_data;
    struct cli_metrics *mx = cls;
    static int marker;
    if (!*state) {
        /* the first call is for the headers only */
        *state = &marker;
        return MHD_YES;
    }
    if (*upload_size) {
        *upload_size = 0; /* a body is ignored (and refused below) */
        return MHD_YES;
    }
    static char not_allowed[] = "only GET and HEAD\n", not_found[] = "not found: try /metrics\n";
    if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
        return respond(c, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain; charset=utf-8",
                       not_allowed, sizeof not_allowed - 1, MHD_RESPMEM_PERSISTENT);
    if (strcmp(url, "/metrics"))
        return respond(c, MHD_HTTP_NOT_FOUND, "text/plain; charset=utf-8", not_found,
                       sizeof not_found - 1, MHD_RESPMEM_PERSISTENT);
    size_t len = 0;
    char *body = cli_metrics_render(mx, &len);
    if (!body)
        return MHD_NO;
    return respond(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", body, len,
                   MHD_RESPMEM_MUST_FREE);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && msg[n - 1] == '\n')
        msg[--n] = '\0';
    cli_error("metrics server: %s", msg);
}

struct cli_http *cli_http_start(struct cli_metrics *mx, const char *addr)
{
    struct sockaddr_storage sa;
    socklen_t salen;
    char msg[512];
    if (!cli_metrics_parse_addr(addr, &sa, &salen, msg, sizeof msg)) {
        cli_error("%s", msg);
        return NULL;
    }
    if (!mhd && !(mhd = cli_mhd_load()))
        return NULL;
    int fd = socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) {
        cli_error("--metrics %s: cannot make a socket: %s", addr, strerror(errno));
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    if (sa.ss_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&sa, salen) != 0 || listen(fd, 64) != 0) {
        int e = errno;
        cli_error("--metrics %s: cannot listen there: %s%s", addr, strerror(e),
                  e == EADDRINUSE ? " (another process has this port: pick another, "
                                    "e.g. --metrics 127.0.0.1:9465)"
                                  : "");
        close(fd);
        return NULL;
    }
    struct sockaddr_storage bound;
    socklen_t blen = sizeof bound;
    char host[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (getsockname(fd, (struct sockaddr *)&bound, &blen) == 0) {
        if (bound.ss_family == AF_INET) {
            inet_ntop(AF_INET, &((struct sockaddr_in *)&bound)->sin_addr, host, sizeof host);
            port = ntohs(((struct sockaddr_in *)&bound)->sin_port);
        } else {
            inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&bound)->sin6_addr, host,
                      sizeof host);
            port = ntohs(((struct sockaddr_in6 *)&bound)->sin6_port);
        }
    }
    struct cli_http *h = calloc(1, sizeof *h);
    if (!h) {
        close(fd);
        cli_error("out of memory");
        return NULL;
    }
    /* The server's thread takes no signals: SIGINT and SIGTERM stay the
     * main thread's, which ends the watch loop. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
    if (sa.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    h->daemon = mhd->start_daemon(flags, 0, NULL, NULL, on_request, mx,
                                 MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
                                 MHD_OPTION_LISTEN_SOCKET, fd,
                                 MHD_OPTION_CONNECTION_LIMIT, (unsigned)CONNECTION_LIMIT,
                                 MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)CONNECTION_TIMEOUT_S,
                                 MHD_OPTION_END);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!h->daemon) {
        /* (whether libmicrohttpd closed the socket on failure depends on
         * where it failed; the process exits, so it is not closed twice) */
        cli_error("--metrics %s: the HTTP server did not start", addr);
        free(h);
        return NULL;
    }
    printf(bound.ss_family == AF_INET6 ? "metrics: http://[%s]:%u/metrics\n"
                                       : "metrics: http://%s:%u/metrics\n",
           host, port);
    fflush(stdout);
    return h;
}

void cli_http_stop(struct cli_http *h)
{
    if (!h)
        return;
    mhd->stop_daemon(h->daemon); /* closes the listening socket too */
    free(h);
}
