/*
 * pause.c - the consumer API of SBX_CAP_PAUSE: a sandbox paused in place
 * and resumed.
 */
#include "api/cap_call.h"
#include "api/handle.h"
#include "registry/call.h"
#include "registry/provider.h"

SBX_API int sbx_pause(sbx_handle *h, sbx_cancel *cancel, sbx_error *err)
{
    int rc = sbxh_cap_call_begin(h, SBX_CAP_PAUSE, cancel, err);
    if (rc != SBX_OK)
        return rc;
    struct sbx_call call;
    sbxh_call_begin(&call, err, cancel);
    rc = SBX_PROVIDER_OP(h->provider, pause)(h->sb, &call, 0);
    return sbxh_call_end(&call, rc, h->provider->plugin.name, "pause");
}

SBX_API int sbx_resume(sbx_handle *h, sbx_cancel *cancel, sbx_error *err)
{
    int rc = sbxh_cap_call_begin(h, SBX_CAP_PAUSE, cancel, err);
    if (rc != SBX_OK)
        return rc;
    struct sbx_call call;
    sbxh_call_begin(&call, err, cancel);
    rc = SBX_PROVIDER_OP(h->provider, resume)(h->sb, &call);
    return sbxh_call_end(&call, rc, h->provider->plugin.name, "resume");
}
