/* call.c - per-call contexts for provider ops. */
#include "registry/call.h"
#include "base/cancel.h"
#include "op_samples.h"

#include <string.h>

void sbxh_call_begin(struct sbx_call *call, sbx_error *err, sbx_cancel *cancel)
{
    sbx_error_clear(&call->scratch);
    call->err = err ? err : &call->scratch;
    call->cancel = cancel;
    call->user = NULL;
    call->progressed = false;
    sbx_error_clear(call->err);
    call->started_ns = sbxs_op_now_ns();
}

int sbxh_call_end(struct sbx_call *call, int rc, const char *provider,
                  const char *op)
{
    if (call->progressed)
        sbxh_progress(call->cancel, call->progress_what, "bytes", call->progress_done,
                      call->progress_total, NULL, true);
    sbxs_op_sample_record(provider, op, rc, sbxs_op_now_ns() - call->started_ns);
    if (rc == SBX_OK) {
        sbx_error_clear(call->err);
        return rc;
    }
    if (call->err->message[0] == '\0' || call->err->status != rc) {
        /* The provider returned a status without (or with a stale) message:
         * keep its text but make the status authoritative. */
        if (call->err->message[0] == '\0')
            sbx_error_set(call->err, rc, "provider \"%s\": %s failed: %s",
                          provider, op, sbx_strerror((sbx_status)rc));
        call->err->status = rc;
    }
    return rc;
}
