/*
 * api_health.h - the health op of a remote provider (ABI 1.2): one
 * authenticated read of its control plane that creates nothing, with the
 * verdict a monitor needs: the service unreachable, the API key refused,
 * the service failing (5xx), or a malformed answer.
 */
#ifndef SBXP_API_HEALTH_H
#define SBXP_API_HEALTH_H

#include "api_call.h"

#include <sbx/provider.h>

/* What the check reads and how its provider names itself. */
struct sbxp_health_probe {
    const char *who;     /* "e2b": the messages' first word */
    const char *service; /* "E2B API": the detail's first words */
    const char *key_var; /* where the key comes from ("E2B_API_KEY") */
    const char *path;    /* "/v2/sandboxes?limit=1" */
    int want_array;      /* the answer is a JSON array, else an object
                            (with an "items" array when it lists) */
};

/*
 * GET probe->path once on api (no retries: a monitor wants the state
 * now), within api's timeouts and call's cancellation. SBX_OK with detail
 * "<service> at <scheme://host:port>: GET <path> answered 200 (<n>
 * listed)" (never the key, never a query beyond the path given).
 * Failures, each naming the host:
 *   no answer (refused, unresolved, timed out): SBX_E_UNAVAILABLE or
 *     SBX_E_TIMEOUT, "cannot reach ...";
 *   401/403: SBX_E_DENIED, "...: the API key was refused (HTTP 401): set
 *     <key_var> to a valid key" (or "no API key is set" without one);
 *   5xx: SBX_E_UNAVAILABLE, "... is failing (HTTP 503) ...";
 *   an answer of the wrong shape: SBX_E_PROTOCOL.
 */
int sbxp_api_health(const struct sbxp_api *api, sbx_call *call,
                    const struct sbxp_health_probe *probe, char detail[SBX_HEALTH_DETAIL_MAX]);

#endif /* SBXP_API_HEALTH_H */
