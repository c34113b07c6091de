/*
 * ports.c - SBX_CAP_PORTS for docker: the ports a session declares are
 * published at create, and port_resolve tells where the host reaches them.
 *
 * A container cannot publish a port after it was created, so create adds
 * every declared port to the container's ExposedPorts and to its
 * HostConfig.PortBindings with HostIp = providers.docker.publish_address
 * (127.0.0.1 unless the operator chose another address) and HostPort ""
 * (the daemon picks a free host port). The declared set is recorded in the
 * sbx.ports label (canonical: ascending, comma-separated): labels are the
 * container's configuration, out of reach of anything running inside it,
 * and attach reads the set back from there. port_resolve answers only for
 * a declared port (SBX_E_NOT_FOUND otherwise) and reads the host address
 * and port the daemon bound from the inspect's NetworkSettings.Ports; they
 * change when the container restarts, so nothing is cached.
 */
#include "docker.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int docker_ports_config(const struct sbx_host *host, sbx_call *call,
                        struct docker_config *cfg)
{
    const char *v = host->config_get ? host->config_get(host, "publish_address") : NULL;
    unsigned char a[16];
    if (v && inet_pton(AF_INET, v, a) != 1 && inet_pton(AF_INET6, v, a) != 1)
        return host->set_error(host, call, SBX_E_CONFIG,
                               "providers.docker.publish_address: \"%.100s\" is not an "
                               "IPv4 or IPv6 address (default 127.0.0.1)",
                               v);
    cfg->publish_address = strdup(v ? v : "127.0.0.1");
    return cfg->publish_address ? SBX_OK
                                : host->set_error(host, call, SBX_E_NOMEM, "out of memory");
}

static int cmp_port(const void *a, const void *b)
{
    return (int)*(const uint16_t *)a - (int)*(const uint16_t *)b;
}

/* The create's ports (when its args reach the member), checked, sorted. */
static int wanted(struct docker_state *st, sbx_call *call, const struct sbx_create_args *args,
                  uint16_t out[DOCKER_PORTS_MAX], size_t *n)
{
    *n = 0;
    const uint16_t *p =
        args->size >= SBX_CREATE_ARGS_SIZE_PORTS_1_2 ? args->ports : NULL;
    for (size_t i = 0; p && p[i]; i++) {
        if (*n == DOCKER_PORTS_MAX)
            return docker_error(st, call, SBX_E_INVALID,
                                "docker: more than %d ports declared", DOCKER_PORTS_MAX);
        out[(*n)++] = p[i];
    }
    qsort(out, *n, sizeof *out, cmp_port);
    for (size_t i = 1; i < *n; i++)
        if (out[i] == out[i - 1])
            return docker_error(st, call, SBX_E_INVALID,
                                "docker: port %u is declared twice", (unsigned)out[i]);
    return SBX_OK;
}

/* "8080,9000" into text (cap >= DOCKER_PORTS_TEXT). */
static void ports_text(const uint16_t *ports, size_t n, char *text, size_t cap)
{
    size_t used = 0;
    text[0] = '\0';
    for (size_t i = 0; i < n && used < cap; i++)
        used += (size_t)snprintf(text + used, cap - used, "%s%u", i ? "," : "",
                                 (unsigned)ports[i]);
}

int docker_ports_spec(struct docker_state *st, sbx_call *call,
                      const struct sbx_create_args *args, char text[DOCKER_PORTS_TEXT])
{
    uint16_t p[DOCKER_PORTS_MAX];
    size_t n;
    int rc = wanted(st, call, args, p, &n);
    if (rc != SBX_OK)
        return rc;
    if (n && strcmp(st->cfg.network, "none") == 0)
        return docker_error(st, call, SBX_E_UNSUPPORTED,
                            "docker: the session declares ports, but "
                            "providers.docker.network is \"none\" (a container without "
                            "a network cannot publish one): configure a bridge network");
    ports_text(p, n, text, DOCKER_PORTS_TEXT);
    return SBX_OK;
}

int docker_ports_body(struct docker_state *st, const char *text, json_object *body,
                      json_object *hc)
{
    if (!text[0])
        return 0;
    json_object *exposed = json_object_new_object();
    json_object *bindings = json_object_new_object();
    if (!exposed || !bindings) {
        json_object_put(exposed);
        json_object_put(bindings);
        return -1;
    }
    for (const char *p = text; *p;) {
        unsigned port = (unsigned)strtoul(p, NULL, 10);
        char key[16];
        snprintf(key, sizeof key, "%u/tcp", port);
        json_object_object_add(exposed, key, json_object_new_object());
        json_object *b = json_object_new_object();
        json_object_object_add(b, "HostIp", json_object_new_string(st->cfg.publish_address));
        json_object_object_add(b, "HostPort", json_object_new_string(""));
        json_object *arr = json_object_new_array();
        json_object_array_add(arr, b);
        json_object_object_add(bindings, key, arr);
        p += strcspn(p, ",");
        p += *p == ',';
    }
    json_object_object_add(body, "ExposedPorts", exposed);
    json_object_object_add(hc, "PortBindings", bindings);
    return 0;
}

int docker_ports_set(sbx_sandbox *sb, const char *text)
{
    sb->nports = 0;
    for (const char *p = text ? text : ""; *p;) {
        char *end;
        unsigned long v = strtoul(p, &end, 10);
        if (end == p || v < 1 || v > 65535 || (*end && *end != ',') ||
            sb->nports == DOCKER_PORTS_MAX)
            return -1;
        sb->ports[sb->nports++] = (uint16_t)v;
        p = *end ? end + 1 : end;
    }
    return 0;
}

int docker_port_resolve(sbx_sandbox *sb, sbx_call *call, uint16_t port,
                        struct sbx_port_endpoint *out)
{
    struct docker_state *st = sb->st;
    size_t i = 0;
    while (i < sb->nports && sb->ports[i] != port)
        i++;
    if (i == sb->nports)
        return docker_error(st, call, SBX_E_NOT_FOUND,
                            "docker: port %u was not declared when container %.12s was "
                            "created (declare it in the session's ports)",
                            (unsigned)port, sb->id);
    json_object *info = NULL;
    sbxp_http_error err;
    int rc = docker_json(st, call, "GET", NULL, &info, &err, "/containers/%s/json", sb->id);
    if (rc != SBX_OK)
        return docker_report(st, call, &err, "inspecting container %.12s", sb->id);
    char key[16];
    snprintf(key, sizeof key, "%u/tcp", (unsigned)port);
    json_object *list = NULL;
    if (!json_object_object_get_ex(
            sbxp_json_obj(sbxp_json_obj(info, "NetworkSettings"), "Ports"), key, &list))
        list = NULL;
    const char *ip = NULL, *hp = NULL;
    size_t n = list && json_object_is_type(list, json_type_array)
                   ? json_object_array_length(list)
                   : 0;
    /* the binding this provider asked for (the daemon may add an IPv6 twin
     * for a wildcard address) */
    for (size_t k = 0; k < n && !ip; k++) {
        json_object *b = json_object_array_get_idx(list, k);
        const char *bip = sbxp_json_str(b, "HostIp"), *bport = sbxp_json_str(b, "HostPort");
        if (bip && bport && (!k || strcmp(bip, st->cfg.publish_address) == 0))
            ip = bip, hp = bport;
    }
    unsigned long hport = hp ? strtoul(hp, NULL, 10) : 0;
    if (!ip || hport < 1 || hport > 65535) {
        json_object_put(info);
        return docker_error(st, call, SBX_E_UNAVAILABLE,
                            "docker: port %u of container %.12s is not published now (is "
                            "the container running?)",
                            (unsigned)port, sb->id);
    }
    /* a wildcard binding is reached on this host through loopback */
    const char *host = !strcmp(ip, "0.0.0.0") || !ip[0] ? "127.0.0.1"
                       : !strcmp(ip, "::")              ? "::1"
                                                        : ip;
    int v6 = strchr(host, ':') != NULL;
    struct sbx_port_endpoint ep = {.size = sizeof ep};
    ep.port = (uint16_t)hport;
    ep.tls = 0;
    snprintf(ep.host, sizeof ep.host, "%s", host);
    snprintf(ep.url, sizeof ep.url, v6 ? "http://[%s]:%lu" : "http://%s:%lu", host, hport);
    json_object_put(info);
    uint32_t size = out->size;
    memcpy(out, &ep, size < sizeof ep ? size : sizeof ep);
    out->size = size;
    return SBX_OK;
}
