/*
 * ports.c - exposed ports (SBX_CAP_PORTS). Every port of an E2B sandbox is
 * served by the service's proxy at https://<port>-<sandbox id>.<domain>
 * (CubeProxy: the same Host form). With one configured address for all
 * sandboxes (cube's proxy_address, e2b's envd_url) the endpoint is that
 * address with the Host header naming the port; which ports the session declared is recorded in the
 * sandbox's metadata (sbx.ports) at create, so a later attach knows them.
 * See e2b_core.h.
 */
#include "e2b_core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int e2b_ports_record(const uint16_t *ports, char *out, size_t cap)
{
    size_t n = 0;
    out[0] = '\0';
    for (size_t i = 0; ports && ports[i]; i++) {
        if (i >= E2B_PORTS_MAX)
            return SBX_E_INVALID;
        int w = snprintf(out + n, cap - n, "%s%u", n ? "," : "", (unsigned)ports[i]);
        if (w < 0 || (size_t)w >= cap - n)
            return SBX_E_INVALID;
        n += (size_t)w;
    }
    return SBX_OK;
}

void e2b_ports_load(sbx_sandbox *sb, json_object *sandbox)
{
    json_object *meta = sbxp_json_obj(sandbox, "metadata");
    const char *s = sbxp_json_str(meta, E2B_META_PORTS);
    sb->nports = 0;
    while (s && *s && sb->nports < E2B_PORTS_MAX) {
        char *end;
        long p = strtol(s, &end, 10);
        if (end == s || p < 1 || p > 65535)
            break;
        sb->ports[sb->nports++] = (uint16_t)p;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            break;
    }
}

int e2b_port_resolve(sbx_sandbox *sb, sbx_call *call, uint16_t port,
                     struct sbx_port_endpoint *out)
{
    struct e2b_state *st = sb->st;
    int declared = 0;
    for (size_t i = 0; i < sb->nports; i++)
        declared |= sb->ports[i] == port;
    if (!declared)
        return e2b_error(st, call, SBX_E_NOT_FOUND,
                         "%s: port %u was not declared when the sandbox was created",
                         st->cfg.provider, (unsigned)port);
    uint32_t size = out->size;
    memset(out, 0, sizeof *out);
    out->size = size;
    char host[SBX_ENDPOINT_HOST_MAX];
    if (snprintf(host, sizeof host, "%u-%s.%s", (unsigned)port, sb->id, sb->domain) >=
        (int)sizeof host)
        return e2b_error(st, call, SBX_E_CONFIG, "%s: sandbox domain too long",
                         st->cfg.provider);
    if (st->cfg.route == E2B_ROUTE_PROXY || st->cfg.route == E2B_ROUTE_HEADERS) {
        /* One address for every sandbox (CubeProxy's proxy_address, or
         * e2b's envd_url): the service's proxy routes by Host, so connect
         * there and name the sandbox's port in Host. */
        const char *u = st->cfg.envd_url; /* http://<address>:<port> */
        const char *a = strstr(u, "://");
        a = a ? a + 3 : u;
        const char *colon = strrchr(a, ':');
        size_t al = colon ? (size_t)(colon - a) : strlen(a);
        if (al && a[0] == '[' && a[al - 1] == ']') {
            a++;
            al -= 2;
        }
        snprintf(out->host, sizeof out->host, "%.*s", (int)al, a);
        out->port = (uint16_t)(colon ? atoi(colon + 1) : 80);
        out->tls = 0;
        snprintf(out->url, sizeof out->url, "%s", u);
        snprintf(out->header, sizeof out->header, "Host: %s", host);
        return SBX_OK;
    }
    int tls = st->cfg.envd_https;
    snprintf(out->host, sizeof out->host, "%s", host);
    out->port = tls ? 443 : 80;
    out->tls = (uint16_t)tls;
    snprintf(out->url, sizeof out->url, "%s://%s", tls ? "https" : "http", host);
    return SBX_OK;
}
