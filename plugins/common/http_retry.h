/*
 * http_retry.h - retrying idempotent HTTP calls of the remote providers:
 * which failures are transient, capped exponential backoff with jitter.
 */
#ifndef SBXP_HTTP_RETRY_H
#define SBXP_HTTP_RETRY_H

#include "http_client.h"

#include <json-c/json.h>
#include <stdint.h>

/* Retry policy for idempotent calls. */
struct sbxp_http_retry {
    int attempts;     /* total attempts, >= 1 */
    int64_t base_ms;  /* first backoff */
    int64_t cap_ms;   /* longest backoff */
};

/* Whether a failed request is worth repeating unchanged: refused or reset
 * connections, 429, 502, 503, 504. A caller's own stop (cancellation,
 * callback) never is. */
int sbxp_http_transient(const sbxp_http_error *err);

/*
 * Sleep before attempt number `attempt` (1 for the first retry): capped
 * exponential backoff with full jitter. Returns SBX_OK, or SBX_E_CANCELLED
 * when the cancellation fired during the wait.
 */
int sbxp_http_backoff(const struct sbxp_http_retry *r, int attempt,
                 const struct sbxp_http_cancel *cancel);

/*
 * A JSON request (body may be NULL) repeated per policy r (NULL: once)
 * while it fails transiently. *out (may be NULL to discard) receives the
 * parsed response of the successful attempt. *http_status may be NULL.
 */
int sbxp_http_json_retry(sbxp_http *h, const struct sbxp_http_request *req,
                    json_object *body, json_object **out, long *http_status,
                    sbxp_http_error *err, const struct sbxp_http_retry *r);

#endif /* SBXP_HTTP_RETRY_H */
