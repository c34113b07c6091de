/*
 * api_call.h - JSON calls to a remote provider's control plane (E2B's,
 * OpenSandbox's lifecycle server, Daytona's API): the credential header,
 * the time bounds, the host call's cancellation and the retry of
 * idempotent calls, set once per provider instance.
 */
#ifndef SBXP_API_CALL_H
#define SBXP_API_CALL_H

#include "http_client.h"
#include "http_retry.h"

#include <json-c/json.h>
#include <stddef.h>
#include <stdint.h>

/* A control plane as a provider instance reaches it. Borrowed pointers:
 * they live as long as the instance. */
struct sbxp_api {
    sbxp_http *http;
    const struct sbx_host *host;
    const char *header;          /* the credential header line, or NULL */
    int64_t timeout_ms;          /* whole request */
    int64_t connect_timeout_ms;
    const struct sbxp_http_retry *retry; /* policy of idempotent calls */
};

/*
 * One JSON call: method and path (escaped), body (borrowed, NULL for
 * none), *out the parsed answer (NULL discards). Cancelled with call
 * (NULL: cleanup that runs on); repeated per api->retry while it fails
 * transiently when idempotent, else sent once (a lost answer to a create
 * is recovered by a lookup, never by posting twice).
 */
int sbxp_api_json(const struct sbxp_api *api, sbx_call *call, const char *method,
                  const char *path, json_object *body, json_object **out, int idempotent,
                  sbxp_http_error *err);

/*
 * An idempotent call on one sandbox: method on
 * "<prefix><escaped id><suffix>" ("/sandboxes/", id, "/connect") with
 * body (NULL: none). With out, the answer must be a JSON object, else
 * SBX_E_PROTOCOL "<method> <prefix><id><suffix>: not an object"; *out
 * receives it (NULL on failure). A DELETE that finds nothing (404) is
 * SBX_OK: the sandbox is already gone.
 */
int sbxp_api_sandbox(const struct sbxp_api *api, sbx_call *call, const char *method,
                     const char *prefix, const char *id, const char *suffix, json_object *body,
                     json_object **out, sbxp_http_error *err);

/*
 * The ownership labels (metadata) of a sandbox a provider creates:
 * managed_key "true", owner_key key_hash and, when spec_hash is given,
 * spec_key spec_hash. len 0 keeps the hashes whole; len > 0 takes their
 * first len characters (a service whose label values are shorter) and
 * leaves out a spec_hash shorter than that. NULL when out of memory.
 */
json_object *sbxp_api_owner_labels(const char *managed_key, const char *owner_key,
                                   const char *spec_key, const char *key_hash,
                                   const char *spec_hash, size_t len);

/* "<prefix><escaped id><suffix>" into buf ("/sandboxes/" id "/connect");
 * SBX_E_INVALID when it does not fit. */
int sbxp_api_path(char *buf, size_t cap, const char *prefix, const char *id,
                  const char *suffix, sbxp_http_error *err);

#endif /* SBXP_API_CALL_H */
