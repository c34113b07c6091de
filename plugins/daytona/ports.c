/*
 * ports.c - exposed ports (SBX_CAP_PORTS) as Daytona preview links. Every
 * port of a Daytona sandbox is reachable through the service's proxy, so
 * "declaring" one only records it: create puts the list in the sandbox's
 * sbx.ports label (the handle reads it back on create and attach), and
 * port_resolve refuses a port not in it. Resolving asks
 * GET /sandbox/{id}/ports/{port}/preview-url, whose answer is the URL
 * and a token the proxy wants in the x-daytona-preview-token header of
 * every request (the sandbox is created private). The token is a
 * credential: it goes into the endpoint's header and nowhere else (no log,
 * no error message). See daytona.h.
 */
#include "daytona.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int daytona_ports_label(struct daytona_state *st, sbx_call *call,
                        const struct sbx_create_args *args, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (args->size < SBX_CREATE_ARGS_SIZE_PORTS_1_2 || !args->ports)
        return SBX_OK;
    size_t len = 0, n = 0;
    for (const uint16_t *p = args->ports; *p; p++, n++) {
        for (const uint16_t *q = args->ports; q < p; q++)
            if (*q == *p)
                return daytona_error(st, call, SBX_E_INVALID,
                                     DT ": create: port %u is declared twice", (unsigned)*p);
        if (n >= DT_PORTS_MAX - 1)
            return daytona_error(st, call, SBX_E_INVALID,
                                 DT ": create: more than %d ports declared", DT_PORTS_MAX - 1);
        len += (size_t)snprintf(buf + len, cap - len, "%s%u", len ? "," : "", (unsigned)*p);
    }
    return SBX_OK;
}

void daytona_ports_load(sbx_sandbox *sb, json_object *sandbox)
{
    memset(sb->ports, 0, sizeof sb->ports);
    const char *v = sbxp_json_str(sbxp_json_obj(sandbox, "labels"), DT_LABEL_PORTS);
    size_t n = 0;
    while (v && *v && n < DT_PORTS_MAX - 1) {
        char *end;
        unsigned long p = strtoul(v, &end, 10);
        if (end == v || p == 0 || p > 65535)
            break; /* a label someone else edited: keep what parsed */
        sb->ports[n++] = (uint16_t)p;
        v = *end == ',' ? end + 1 : end;
        if (*end != ',')
            break;
    }
}

/* Split an http(s) URL into the endpoint's tls, host and port. */
static int url_parts(const char *url, struct sbx_port_endpoint *out)
{
    const char *p;
    if (!strncmp(url, "https://", 8)) {
        out->tls = 1;
        out->port = 443;
        p = url + 8;
    } else if (!strncmp(url, "http://", 7)) {
        out->tls = 0;
        out->port = 80;
        p = url + 7;
    } else {
        return -1;
    }
    size_t hl = strcspn(p, ":/?#");
    if (hl == 0 || hl >= sizeof out->host)
        return -1;
    memcpy(out->host, p, hl);
    out->host[hl] = '\0';
    if (p[hl] == ':') {
        char *end;
        unsigned long port = strtoul(p + hl + 1, &end, 10);
        if (end == p + hl + 1 || port == 0 || port > 65535 || (*end && !strchr("/?#", *end)))
            return -1;
        out->port = (uint16_t)port;
    }
    return 0;
}

int daytona_port_resolve(sbx_sandbox *sb, sbx_call *call, uint16_t port,
                         struct sbx_port_endpoint *out)
{
    struct daytona_state *st = sb->st;
    int declared = 0;
    for (size_t i = 0; port && i < DT_PORTS_MAX && sb->ports[i]; i++)
        declared |= sb->ports[i] == port;
    if (!declared)
        return daytona_error(st, call, SBX_E_NOT_FOUND,
                             DT ": port %u was not declared when sandbox %s was created",
                             (unsigned)port, sb->id);
    char suffix[48];
    snprintf(suffix, sizeof suffix, "/ports/%u/preview-url", (unsigned)port);
    json_object *doc = NULL;
    sbxp_http_error err;
    int rc = sbxp_api_sandbox(&st->ctl, call, "GET", "/sandbox/", sb->id, suffix, NULL, &doc, &err);
    if (rc != SBX_OK)
        return daytona_report(st, call, &err, "asking for the preview link of port %u of %s",
                              (unsigned)port, sb->id);
    const char *url = sbxp_json_str(doc, "url");
    const char *token = sbxp_json_str(doc, "token");
    uint32_t size = out->size;
    memset(out, 0, sizeof *out);
    out->size = size;
    if (!url || strlen(url) >= sizeof out->url || url_parts(url, out) != 0) {
        json_object_put(doc);
        return daytona_error(st, call, SBX_E_PROTOCOL,
                             DT ": the preview link of port %u of %s is not an http(s) URL",
                             (unsigned)port, sb->id);
    }
    snprintf(out->url, sizeof out->url, "%s", url);
    if (token && *token) {
        int bad = 0;
        for (const char *t = token; *t; t++)
            bad |= (unsigned char)*t <= 0x20 || (unsigned char)*t >= 0x7f;
        if (bad || snprintf(out->header, sizeof out->header, "x-daytona-preview-token: %s",
                            token) >= (int)sizeof out->header) {
            memset(out, 0, sizeof *out);
            out->size = size;
            json_object_put(doc);
            return daytona_error(st, call, SBX_E_PROTOCOL,
                                 DT ": the preview token of port %u of %s is not a header value",
                                 (unsigned)port, sb->id);
        }
    }
    json_object_put(doc);
    return SBX_OK;
}
