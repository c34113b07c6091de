/* http_retry.c - which failures are transient, and backoff between attempts.
 * See http_retry.h. */
#include "http_retry.h"
#include "http_json.h"

#include "clock.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

int sbxp_http_transient(const sbxp_http_error *err)
{
    if (err->from_callback)
        return 0;
    switch (err->http_status) {
    case 429:
    case 502:
    case 503:
    case 504:
        /* envd's proxy answers 502 for a sandbox that is gone: final. */
        return strstr(err->message, "not found") == NULL;
    case 0:
        /* No answer at all: refused, reset, closed before answering. A
         * timeout is not repeated: it already took the caller's time. */
        return err->status == SBX_E_UNAVAILABLE;
    default:
        return 0;
    }
}

int sbxp_http_backoff(const struct sbxp_http_retry *r, int attempt,
                 const struct sbxp_http_cancel *cancel)
{
    int64_t ceiling = r->base_ms;
    for (int i = 1; i < attempt && ceiling < r->cap_ms; i++)
        ceiling *= 2;
    if (ceiling > r->cap_ms)
        ceiling = r->cap_ms;
    uint32_t rnd = 0;
    if (getrandom(&rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd)
        rnd = (uint32_t)sbxs_now_ms();
    /* Full jitter: anywhere between half the ceiling and the ceiling, so
     * that clients that failed together do not come back together. */
    int64_t wait = ceiling / 2 + (ceiling > 1 ? (int64_t)(rnd % (uint32_t)(ceiling / 2 + 1)) : 0);
    int64_t end = sbxs_now_ms() + wait;
    for (;;) {
        if (cancel && cancel->check && cancel->check(cancel->ctx))
            return SBX_E_CANCELLED;
        int64_t left = end - sbxs_now_ms();
        if (left <= 0)
            return SBX_OK;
        struct pollfd p = {cancel ? cancel->fd : -1, POLLIN, 0};
        int n = poll(&p, p.fd >= 0 ? 1 : 0, (int)(left > 100 ? 100 : left));
        if (n > 0)
            return SBX_E_CANCELLED;
        if (n < 0 && errno != EINTR)
            return SBX_OK;
    }
}

int sbxp_http_json_retry(sbxp_http *h, const struct sbxp_http_request *req,
                    json_object *body, json_object **out, long *http_status,
                    sbxp_http_error *err, const struct sbxp_http_retry *r)
{
    int attempts = r && r->attempts > 1 ? r->attempts : 1;
    int rc = SBX_OK;
    for (int a = 1;; a++) {
        json_object *doc = NULL;
        memset(err, 0, sizeof *err);
        rc = sbxp_http_json_body(h, req, body, &doc, http_status, err);
        if (rc == SBX_OK) {
            if (out)
                *out = doc;
            else
                json_object_put(doc);
            return SBX_OK;
        }
        json_object_put(doc);
        if (a >= attempts || !sbxp_http_transient(err))
            return rc;
        sbxp_http_error keep = *err;
        if (sbxp_http_backoff(r, a, req->cancel) != SBX_OK) {
            *err = keep;
            return sbxp_http_fail(err, SBX_E_CANCELLED, "cancelled while retrying: %s",
                                  keep.message);
        }
    }
}
