/*
 * ports.c - the consumer API of SBX_CAP_PORTS: a declared port resolved to
 * an endpoint outside the sandbox.
 */
#include "api/cap_call.h"
#include "api/handle.h"
#include "base/struct_size.h"
#include "registry/call.h"
#include "registry/provider.h"

#include <string.h>

SBX_API int sbx_port_resolve(sbx_handle *h, unsigned port, struct sbx_port_endpoint *out,
                             sbx_cancel *cancel, sbx_error *err)
{
    int rc = sbxh_cap_call_begin(h, SBX_CAP_PORTS, cancel, err);
    if (rc != SBX_OK)
        return rc;
    if (port < 1 || port > 65535)
        return sbx_error_set(err, SBX_E_INVALID, "port_resolve: %u is not a TCP port", port);
    if (!out || sbx_struct_size(out) < offsetof(struct sbx_port_endpoint, header) +
                                           sizeof out->header)
        return sbx_error_set(err, SBX_E_INVALID,
                             "port_resolve: no struct sbx_port_endpoint, or its size is "
                             "not set");
    struct sbx_port_endpoint ep;
    memset(&ep, 0, sizeof ep);
    ep.size = sizeof ep;
    struct sbx_call call;
    sbxh_call_begin(&call, err, cancel);
    rc = SBX_PROVIDER_OP(h->provider, port_resolve)(h->sb, &call, (uint16_t)port, &ep);
    rc = sbxh_call_end(&call, rc, h->provider->plugin.name, "port_resolve");
    if (rc != SBX_OK)
        return rc;
    /* the strings must end inside their arrays, and say where to go */
    if (!memchr(ep.host, '\0', sizeof ep.host) || !memchr(ep.url, '\0', sizeof ep.url) ||
        !memchr(ep.header, '\0', sizeof ep.header) || !ep.host[0] || !ep.port ||
        (strncmp(ep.url, "http://", 7) && strncmp(ep.url, "https://", 8) && ep.url[0]))
        return sbx_error_set(err, SBX_E_PROTOCOL,
                             "provider \"%s\": port_resolve gave a malformed endpoint "
                             "for port %u",
                             h->provider->plugin.name, port);
    sbx_struct_out(out, &ep, sizeof ep);
    return SBX_OK;
}
