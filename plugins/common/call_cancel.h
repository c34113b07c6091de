/*
 * call_cancel.h - a host call's cancellation (sbx_host cancelled/cancel_fd)
 * as the HTTP client's struct sbxp_http_cancel. (The monotonic clock is
 * shared/clock.h's sbxs_now_ms.)
 */
#ifndef SBXP_CALL_CANCEL_H
#define SBXP_CALL_CANCEL_H

#include "http_client.h"

#include <stdint.h>

struct sbxp_call_cancel {
    const struct sbx_host *host;
    sbx_call *call;
    struct sbxp_http_cancel c; /* pass &c to a request */
};

/* call may be NULL (cleanup that must run even after a cancellation). */
void sbxp_call_cancel_init(struct sbxp_call_cancel *c, const struct sbx_host *host,
                           sbx_call *call);

#endif /* SBXP_CALL_CANCEL_H */
