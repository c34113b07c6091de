/*
 * health.c - the optional health op: GET /sandboxes?pageSize=1 on the
 * lifecycle server (sandbox-lifecycle.yml, ListSandboxesResponse), an
 * authenticated list that creates nothing. See api_health.h.
 */
#include "osb.h"

#include "api_health.h"

int osb_health(void *state, sbx_call *call, char detail[SBX_HEALTH_DETAIL_MAX])
{
    struct osb_state *st = state;
    static const struct sbxp_health_probe probe = {
        .who = OSB_PROVIDER,
        .service = "OpenSandbox server",
        .key_var = "OPEN_SANDBOX_API_KEY",
        .path = "/sandboxes?pageSize=1",
        .want_array = 0,
    };
    return sbxp_api_health(&st->ctl, call, &probe, detail);
}
