/*
 * e2bproto.h - the wire protocol of E2B's control plane and of envd, the
 * daemon inside every E2B (and CubeSandbox) sandbox, shared by the e2b and
 * cube providers.
 *
 * Connect RPC over HTTP/1.1 with the JSON codec: unary calls are plain JSON
 * bodies; streaming calls carry "envelopes", flags(1) | length(4, big
 * endian) | JSON, the last one flagged 0x02 (end of stream) and holding the
 * call's error, if any. bytes fields travel as base64, int64 as strings.
 *
 * Nothing here knows about sandboxes or sbx handles: see e2b_core.h for the
 * provider logic built on it.
 */
#ifndef SBX_E2BPROTO_H
#define SBX_E2BPROTO_H

#include "base64.h"
#include "http_client.h"
#include "http_retry.h"

#include <json-c/json.h>
#include <stddef.h>
#include <stdint.h>

/* Envelope flags. */
#define E2B_FLAG_COMPRESSED 0x01u
#define E2B_FLAG_END 0x02u

/* Largest envelope accepted from a service (envd's data events are 32 KiB
 * or so; this bounds a misbehaving one). */
#define E2B_FRAME_MAX (4u * 1024u * 1024u)

/* ---- connect.c --------------------------------------------------------- */

/* Incremental decoder of a stream of envelopes. */
struct e2b_frames {
    unsigned char hdr[5];
    size_t hdr_got;
    unsigned char *buf;
    size_t cap;  /* allocated size of buf (only grows: no churn per frame) */
    size_t len;  /* payload bytes received of the current envelope */
    size_t need; /* payload length of the current envelope */
    int ended;   /* the end-of-stream envelope arrived */
};

/*
 * Called once per complete envelope with its flags and raw JSON payload
 * (borrowed for the call; parse it with e2b_json_parse, or look at it
 * directly for a hot path). Returns 0 to go on or an sbx_status to stop.
 */
typedef int (*e2b_frame_fn)(void *ctx, unsigned flags, const char *payload, size_t len);

/* Parse a payload as one JSON object (an empty payload is {}). NULL when
 * it is not one; the caller owns the result. */
json_object *e2b_json_parse(const char *payload, size_t len);

void e2b_frames_init(struct e2b_frames *f);
void e2b_frames_free(struct e2b_frames *f);

/*
 * Feed received bytes. Returns SBX_OK, the callback's status, or
 * SBX_E_PROTOCOL for an oversized or compressed envelope, or bytes after
 * the end-of-stream envelope.
 */
int e2b_frames_feed(struct e2b_frames *f, const void *data, size_t len,
                    e2b_frame_fn fn, void *ctx);

/* Nonzero while an envelope has started but not completed (a stream cut
 * there was truncated). */
int e2b_frames_partial(const struct e2b_frames *f);

/* One envelope holding msg serialized compactly. Returns a malloc'd buffer
 * of *len bytes, or NULL when out of memory. */
unsigned char *e2b_envelope(json_object *msg, unsigned flags, size_t *len);

/* The sbx_status a Connect error code ("not_found", "deadline_exceeded",
 * ...) stands for. Unknown codes are SBX_E_PROTOCOL. */
int e2b_code_status(const char *code);

/* ---- rpc.c ------------------------------------------------------------- */

/*
 * A unary Connect call: POST /<service>/<method> with a JSON body and the
 * Connect-Protocol-Version header added to extra (NULL-terminated "Name:
 * value" lines, may be NULL). A Connect error answer is reported with its
 * code mapped (e2b_code_status) and its message; err->http_status keeps
 * the HTTP status.
 */
int e2b_unary(sbxp_http *h, const char *const *extra, const char *rpc,
              json_object *body, json_object **out, int64_t timeout_ms,
              int64_t connect_timeout_ms, const struct sbxp_http_cancel *cancel,
              const struct sbxp_http_retry *retry, sbxp_http_error *err);

/* Headers of a call: collect up to E2B_HDR_MAX lines. */
#define E2B_HDR_MAX 12
struct e2b_headers {
    const char *v[E2B_HDR_MAX + 1];
    size_t n;
};
void e2b_headers_add(struct e2b_headers *hs, const char *line);
void e2b_headers_add_all(struct e2b_headers *hs, const char *const *lines);

#endif /* SBX_E2BPROTO_H */
