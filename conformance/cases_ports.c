/*
 * cases_ports.c - SBX_CAP_PORTS (ABI 1.2): a port declared at create
 * resolves to an endpoint a client outside the sandbox reaches (fetched
 * with libcurl from a small HTTP server the sandbox runs), an undeclared
 * one is SBX_E_NOT_FOUND, and an endpoint on loopback is not reachable
 * through this machine's other addresses.
 *
 * The port is derived from the case's token (20000..29999), so that runs
 * side by side do not collide.
 */
#include "cf_internal.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static uint16_t case_port(const struct cf_test *t)
{
    return (uint16_t)(20000 + strtoul(t->token + 24, NULL, 16) % 10000);
}

static sbx_handle *with_port(struct cf_test *t, uint16_t port)
{
    sbx_provider *p = cf_open(t);
    if (!p)
        return NULL;
    char key[CF_KEY_MAX];
    cf_new_key(t, key);
    const uint16_t ports[] = {port, 0};
    return cf_create_ports(t, p, key, ports);
}

static bool resolve(struct cf_test *t, sbx_handle *h, uint16_t port,
                    struct sbx_port_endpoint *ep)
{
    memset(ep, 0, sizeof *ep);
    ep->size = sizeof *ep;
    sbx_error err;
    int rc = sbx_port_resolve(h, port, ep, NULL, &err);
    char what[64];
    snprintf(what, sizeof what, "port_resolve of the declared port %u", (unsigned)port);
    if (!cf_expect_ok(t, rc, &err, what))
        return false;
    if (!ep->host[0] || !ep->port ||
        (strncmp(ep->url, "http://", 7) && strncmp(ep->url, "https://", 8)))
        return cf_fail(t, "port %u resolved to host \"%s\" port %u url \"%s\"; want a host, "
                          "a port and an http(s) URL",
                       (unsigned)port, ep->host, (unsigned)ep->port, ep->url);
    return true;
}

void cf_case_ports_resolve(struct cf_test *t)
{
    uint16_t port = case_port(t);
    sbx_handle *h = with_port(t, port);
    struct sbx_port_endpoint ep;
    if (!h || !resolve(t, h, port, &ep))
        return;
    memset(&ep, 0, sizeof ep);
    ep.size = sizeof ep;
    sbx_error err;
    int rc = sbx_port_resolve(h, (unsigned)port + 1, &ep, NULL, &err);
    cf_proc_expect_status(t, rc, &err, SBX_E_NOT_FOUND, "port_resolve of a port not declared");
}

/* A response body, bounded. */
struct body {
    char buf[4096];
    size_t len;
};

static size_t body_write(char *data, size_t size, size_t n, void *ud)
{
    struct body *b = ud;
    size_t len = size * n, room = sizeof b->buf - 1 - b->len;
    size_t k = len < room ? len : room;
    memcpy(b->buf + b->len, data, k);
    b->len += k;
    b->buf[b->len] = '\0';
    return len;
}

/* GET url (with the endpoint's header); the status, or -1 with the
 * transfer's error in errbuf. */
static long http_get(const char *url, const char *header, struct body *b, char *errbuf)
{
    CURL *c = curl_easy_init();
    if (!c) {
        snprintf(errbuf, CURL_ERROR_SIZE, "curl_easy_init failed");
        return -1;
    }
    struct curl_slist *hdrs = header && *header ? curl_slist_append(NULL, header) : NULL;
    b->len = 0;
    b->buf[0] = '\0';
    errbuf[0] = '\0';
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, body_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, b);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 3000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    long code = -1;
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(c);
    return code;
}

static bool is_loopback_host(const char *host)
{
    struct in_addr a4;
    struct in6_addr a6;
    if (!strcmp(host, "localhost"))
        return true;
    if (inet_pton(AF_INET, host, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    return inet_pton(AF_INET6, host, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

/* Whether a TCP connection to addr:port is accepted within 500 ms. */
static bool connects(const struct sockaddr_in *addr, uint16_t port)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0)
        return false;
    struct sockaddr_in a = *addr;
    a.sin_port = htons(port);
    bool ok = false;
    if (connect(s, (struct sockaddr *)&a, sizeof a) == 0) {
        ok = true;
    } else if (errno == EINPROGRESS) {
        struct pollfd pf = {s, POLLOUT, 0};
        int e = 0;
        socklen_t len = sizeof e;
        ok = poll(&pf, 1, 500) == 1 && getsockopt(s, SOL_SOCKET, SO_ERROR, &e, &len) == 0 &&
             e == 0;
    }
    close(s);
    return ok;
}

/* The first non-loopback IPv4 address of this machine where the endpoint
 * port answers, into buf; false when none does (or there is none). */
static bool reachable_elsewhere(uint16_t port, char *buf, size_t cap)
{
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) < 0)
        return false;
    bool found = false;
    for (struct ifaddrs *i = ifs; i && !found; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || (i->ifa_flags & IFF_LOOPBACK) ||
            !(i->ifa_flags & IFF_UP))
            continue;
        const struct sockaddr_in *a = (const struct sockaddr_in *)i->ifa_addr;
        if ((ntohl(a->sin_addr.s_addr) >> 24) == 127)
            continue;
        if (connects(a, port)) {
            char ip[INET_ADDRSTRLEN];
            inet_ntop(AF_INET, &a->sin_addr, ip, sizeof ip);
            snprintf(buf, cap, "%s:%u (%s)", ip, (unsigned)port, i->ifa_name);
            found = true;
        }
    }
    freeifaddrs(ifs);
    return found;
}

void cf_case_ports_reachable(struct cf_test *t)
{
    uint16_t port = case_port(t);
    sbx_handle *h = with_port(t, port);
    if (!h)
        return;
    char page[80];
    snprintf(page, sizeof page, "served by the sandbox %s\n", t->token);
    if (!cf_write_text(t, h, "www/index.html", page))
        return;
    /* The first HTTP server the sandbox has; each runs in the foreground
     * until killed, so a missing one falls through to the next. */
    char script[400];
    snprintf(script, sizeof script,
             "cd www || exit 9; busybox httpd -f -p %u -h . 2>/dev/null; "
             "httpd -f -p %u -h . 2>/dev/null; exec python3 -m http.server %u",
             (unsigned)port, (unsigned)port, (unsigned)port);
    struct cf_proc p;
    struct sbx_port_endpoint ep;
    if (!cf_proc_sh(t, h, &p, script, 0))
        return;
    if (!resolve(t, h, port, &ep)) {
        cf_proc_free(&p);
        return;
    }
    char url[SBX_ENDPOINT_URL_MAX + 16];
    size_t ul = strlen(ep.url);
    snprintf(url, sizeof url, "%s%sindex.html", ep.url, ul && ep.url[ul - 1] == '/' ? "" : "/");
    struct body b;
    char errbuf[CURL_ERROR_SIZE];
    long code = -1;
    double deadline = cf_now() + cf_bound(10);
    while (cf_now() < deadline) {
        code = http_get(url, ep.header, &b, errbuf);
        if (code == 200 && !strcmp(b.buf, page))
            break;
        /* the server may have failed to start */
        if (cf_proc_read(t, &p, 0, 0) == SBX_OK && p.res.eof)
            break;
        cf_sleep_ms(200);
    }
    char q[200], e[300];
    if (code != 200 || strcmp(b.buf, page)) {
        cf_fail(t, "GET %s (the endpoint of port %u) gave %ld %s%s; want 200 with the "
                   "served file (the server %s, its output %s)",
                url, (unsigned)port, code, code < 0 ? errbuf : "",
                cf_quote(b.buf, b.len, q, sizeof q), p.res.eof ? "ended" : "runs",
                cf_quote(p.out ? p.out : "", p.out_len, e, sizeof e));
    } else if (is_loopback_host(ep.host)) {
        char where[96];
        if (reachable_elsewhere(ep.port, where, sizeof where))
            cf_fail(t, "port %u is published on loopback (%s:%u) but also answers at %s: it "
                       "is bound on every interface",
                    (unsigned)port, ep.host, (unsigned)ep.port, where);
    }
    sbx_error err;
    sbx_proc_signal(h, p.id, SIGKILL, NULL, &err);
    cf_proc_free(&p);
}
