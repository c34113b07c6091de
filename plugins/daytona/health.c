/*
 * health.c - the optional health op: GET /sandbox?limit=1 on the API
 * (openapi.yaml listSandboxes, cursor-paginated), an authenticated list
 * that creates nothing. See api_health.h.
 */
#include "daytona.h"

#include "api_health.h"

int daytona_health(void *state, sbx_call *call, char detail[SBX_HEALTH_DETAIL_MAX])
{
    struct daytona_state *st = state;
    static const struct sbxp_health_probe probe = {
        .who = DT,
        .service = "Daytona API",
        .key_var = "DAYTONA_API_KEY",
        .path = "/sandbox?limit=1",
        .want_array = 0,
    };
    return sbxp_api_health(&st->ctl, call, &probe, detail);
}
