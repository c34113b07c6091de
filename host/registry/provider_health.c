/*
 * provider_health.c - sbx_provider_health: a provider's init and its live
 * check of the backend (the optional health op of ABI 1.2), timed.
 */
#include "base/struct_size.h"
#include "registry/call.h"
#include "registry/provider.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

SBX_API int sbx_provider_health(sbx_provider *p, sbx_cancel *cancel, struct sbx_health *out,
                                sbx_error *err)
{
    sbx_error_clear(err);
    if (!p || !out || sbx_struct_size(out) < sizeof *out)
        return sbx_error_set(err, SBX_E_INVALID,
                             "health: no provider, or no struct sbx_health with its size set");
    struct sbx_health h;
    memset(&h, 0, sizeof h);
    h.size = sizeof h;
    bool was = p->initialized;
    uint64_t t0 = now_us();
    int rc = sbx_provider_ready(p, cancel, err);
    if (rc != SBX_OK)
        return rc;
    h.init_us = was ? 0 : now_us() - t0;
    int (*check)(void *, sbx_call *, char[SBX_HEALTH_DETAIL_MAX]) =
        SBX_PROVIDER_OP(p, health);
    if (!check) {
        snprintf(h.detail, sizeof h.detail,
                 "initialized; the provider has no live check of its backend");
    } else {
        char detail[SBX_HEALTH_DETAIL_MAX] = "";
        struct sbx_call call;
        sbxh_call_begin(&call, err, cancel);
        t0 = now_us();
        rc = check(p->state, &call, detail);
        h.check_us = now_us() - t0;
        rc = sbxh_call_end(&call, rc, p->plugin.name, "health");
        if (rc != SBX_OK)
            return rc;
        if (!memchr(detail, '\0', sizeof detail))
            return sbx_error_set(err, SBX_E_PROTOCOL,
                                 "provider \"%s\": health gave an unterminated detail",
                                 p->plugin.name);
        h.checked = true;
        snprintf(h.detail, sizeof h.detail, "%s", detail);
    }
    sbx_struct_out(out, &h, sizeof h);
    return SBX_OK;
}
