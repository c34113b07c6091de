/*
 * call_cancel.h - a host call's cancellation (sbx_host cancelled/cancel_fd)
 * as the HTTP client's struct sbx_http_cancel. (The monotonic clock is
 * shared/clock.h's sbxs_now_ms.)
 */
#ifndef SBX_PLUGIN_CALL_CANCEL_H
#define SBX_PLUGIN_CALL_CANCEL_H

#include "http_client.h"

#include <stdint.h>

struct sbx_call_cancel {
    const struct sbx_host *host;
    sbx_call *call;
    struct sbx_http_cancel c; /* pass &c to a request */
};

/* call may be NULL (cleanup that must run even after a cancellation). */
void sbx_call_cancel_init(struct sbx_call_cancel *c, const struct sbx_host *host,
                          sbx_call *call);

#endif /* SBX_PLUGIN_CALL_CANCEL_H */
