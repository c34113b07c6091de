/*
 * ports.c - SBX_CAP_PORTS. The ports a session declares at create are
 * recorded in the sandbox's metadata on the lifecycle server
 * (sbx.port.<i> = <port>), out of the sandbox's reach, so that a later
 * attach knows them; port_resolve answers only for those, through
 * GET /sandboxes/{id}/endpoints/{port} (with ?use_server_proxy=true when
 * configured: the server's proxy form). execd's and the egress sidecar's
 * ports cannot be declared. See osb.h.
 */
#include "osb.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int osb_ports_check(struct osb_state *st, sbx_call *call, const uint16_t *ports)
{
    size_t n = 0;
    for (const uint16_t *p = ports; p && *p; p++, n++) {
        if (*p == OSB_EXECD_PORT || *p == OSB_EGRESS_PORT)
            return osb_error(st, call, SBX_E_INVALID,
                             "opensandbox: port %u is reserved (%s): it cannot be exposed",
                             (unsigned)*p, *p == OSB_EXECD_PORT ? "execd" : "the egress sidecar");
        if (n >= OSB_PORTS_MAX)
            return osb_error(st, call, SBX_E_INVALID,
                             "opensandbox: more than %d ports declared", OSB_PORTS_MAX);
    }
    return SBX_OK;
}

void osb_ports_meta(json_object *meta, const uint16_t *ports)
{
    size_t i = 0;
    for (const uint16_t *p = ports; p && *p; p++) {
        int dup = 0;
        for (const uint16_t *q = ports; q < p; q++)
            dup |= *q == *p;
        if (dup)
            continue;
        char k[32], v[8];
        snprintf(k, sizeof k, OSB_META_PORT "%zu", i++);
        snprintf(v, sizeof v, "%u", (unsigned)*p);
        json_object_object_add(meta, k, json_object_new_string(v));
    }
}

void osb_ports_load(sbx_sandbox *sb, json_object *sandbox)
{
    sb->nports = 0;
    json_object *meta = sbxp_json_obj(sandbox, "metadata");
    if (!meta || !json_object_is_type(meta, json_type_object))
        return;
    json_object_object_foreach(meta, k, v)
    {
        if (strncmp(k, OSB_META_PORT, strlen(OSB_META_PORT)) || sb->nports >= OSB_PORTS_MAX)
            continue;
        const char *s = json_object_get_string(v);
        char *end;
        long port = s ? strtol(s, &end, 10) : 0;
        if (s && *s && !*end && port > 0 && port < 65536)
            sb->ports[sb->nports++] = (uint16_t)port;
    }
}

/* A header name or value from the server: printable, no CR/LF. */
static int header_ok(const char *s, int name)
{
    if (!*s)
        return !name;
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f || (name && *s == ':'))
            return 0;
    return 1;
}

int osb_port_resolve(sbx_sandbox *sb, sbx_call *call, uint16_t port,
                     struct sbx_port_endpoint *out)
{
    struct osb_state *st = sb->st;
    int declared = 0;
    for (size_t i = 0; i < sb->nports; i++)
        declared |= sb->ports[i] == port;
    if (!declared)
        return osb_error(st, call, SBX_E_NOT_FOUND,
                         "opensandbox: port %u was not declared when sandbox %s was created",
                         (unsigned)port, sb->id);
    json_object *doc = NULL;
    sbxp_http_error err;
    int rc = osb_api_endpoint(st, call, sb->id, port, &doc, &err);
    if (rc != SBX_OK)
        return osb_report(st, call, &err, "resolving the endpoint of port %u of sandbox %s",
                          (unsigned)port, sb->id);
    uint32_t size = out->size;
    memset(out, 0, sizeof *out);
    out->size = size;
    const char *ep = sbxp_json_str(doc, "endpoint");
    const char *scheme = strncmp(st->cfg.api_url, "https://", 8) ? "http" : "https";
    int n = strstr(ep, "://") ? snprintf(out->url, sizeof out->url, "%s", ep)
                              : snprintf(out->url, sizeof out->url, "%s://%s", scheme, ep);
    for (const char *p = out->url; rc == SBX_OK && *p; p++)
        if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f)
            rc = osb_error(st, call, SBX_E_PROTOCOL,
                           "opensandbox: the endpoint of port %u has unusable characters",
                           (unsigned)port);
    if (rc == SBX_OK && (n < 0 || (size_t)n >= sizeof out->url))
        rc = osb_error(st, call, SBX_E_PROTOCOL, "opensandbox: the endpoint of port %u is too long",
                       (unsigned)port);
    if (rc == SBX_OK) {
        out->tls = !strncmp(out->url, "https://", 8);
        const char *h = strstr(out->url, "://") + 3;
        size_t hl;
        const char *after;
        if (*h == '[') {
            const char *close = strchr(h, ']');
            hl = close ? (size_t)(close - h + 1) : strlen(h);
            after = h + hl;
        } else {
            hl = strcspn(h, ":/?");
            after = h + hl;
        }
        if (hl == 0 || hl >= sizeof out->host)
            rc = osb_error(st, call, SBX_E_PROTOCOL,
                           "opensandbox: the endpoint of port %u names no host", (unsigned)port);
        else {
            memcpy(out->host, h, hl);
            out->host[hl] = '\0';
            long p = out->tls ? 443 : 80;
            if (*after == ':') {
                char *end;
                p = strtol(after + 1, &end, 10);
                if (end == after + 1 || p <= 0 || p > 65535 || (*end && *end != '/' && *end != '?'))
                    rc = osb_error(st, call, SBX_E_PROTOCOL,
                                   "opensandbox: the endpoint of port %u has a bad port",
                                   (unsigned)port);
            }
            out->port = (uint16_t)p;
        }
    }
    json_object *hs = sbxp_json_obj(doc, "headers");
    if (rc == SBX_OK && hs && json_object_is_type(hs, json_type_object)) {
        size_t count = 0;
        json_object_object_foreach(hs, k, v)
        {
            const char *val = json_object_get_string(v);
            if (++count > 1 || !val || !header_ok(k, 1) || !header_ok(val, 0) ||
                snprintf(out->header, sizeof out->header, "%s: %s", k, val) >=
                    (int)sizeof out->header) {
                rc = osb_error(st, call, SBX_E_PROTOCOL,
                               "opensandbox: the endpoint of port %u needs headers sbx cannot "
                               "pass on (more than one, or unusable)",
                               (unsigned)port);
                break;
            }
        }
    }
    json_object_put(doc);
    if (rc != SBX_OK) {
        volatile char *p = out->header; /* may hold an access token */
        while (*p)
            *p++ = 0;
    }
    return rc;
}
