/*
 * call.h - the per-call context handed to provider ops (internal).
 *
 * A call carries where the provider's error message goes and which
 * cancellation token applies. It lives on the host's stack for one op.
 */
#ifndef SBX_HOST_CALL_H
#define SBX_HOST_CALL_H

#include <sbx/provider.h>
#include <sbx/sbx.h>

#include <stdbool.h>
#include <stdint.h>

struct sbx_call {
    sbx_error *err;     /* never NULL: points at scratch when the caller
                           passed none */
    sbx_cancel *cancel; /* may be NULL */
    const char *user;   /* the user the op acts as (SBX_CAP_USERS), or NULL;
                           borrowed from the handle */
    sbx_error scratch;
    /* the provider's last progress report (host->progress), repeated as
     * finished when the op returns */
    bool progressed;
    char progress_what[128];
    uint64_t progress_done, progress_total;
    uint64_t started_ns; /* monotonic: the op's latency sample (op_samples.h) */
};

/* Prepare a call for one op. */
void sbxh_call_begin(struct sbx_call *call, sbx_error *err, sbx_cancel *cancel);

/*
 * Finish a call: when the op failed without a message, write a generic one
 * naming the provider and the op; copy the result into the caller's error.
 * Records the op's latency and status in the metrics spool (op_samples.h).
 * Returns rc.
 */
int sbxh_call_end(struct sbx_call *call, int rc, const char *provider,
                  const char *op);

#endif
