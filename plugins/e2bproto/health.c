/*
 * health.c - the optional health op of both providers: GET
 * /v2/sandboxes?limit=1, an authenticated list that creates nothing (E2B
 * openapi.yml "List sandboxes (v2)"; CubeAPI serves the same route,
 * cubesandbox openapi.yml list_sandboxes_v2). See api_health.h.
 */
#include "e2b_core.h"

#include "api_health.h"

#include <string.h>

int e2b_health(void *state, sbx_call *call, char detail[SBX_HEALTH_DETAIL_MAX])
{
    struct e2b_state *st = state;
    int cube = !strcmp(st->cfg.provider, "cube");
    const struct sbxp_health_probe probe = {
        .who = st->cfg.provider,
        .service = cube ? "CubeAPI" : "E2B API",
        .key_var = st->cfg.key_source,
        .path = "/v2/sandboxes?limit=1",
        .want_array = 1,
    };
    return sbxp_api_health(&st->ctl, call, &probe, detail);
}
