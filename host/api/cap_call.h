/*
 * cap_call.h - the start of every capability op on a handle (internal;
 * defined in sandbox.c, used by the files of each capability's wrappers).
 */
#ifndef SBX_HOST_API_CAP_CALL_H
#define SBX_HOST_API_CAP_CALL_H

#include <sbx/sbx.h>

#include <stdint.h>

/* Clear err, then refuse a closed handle (SBX_E_INVALID), a provider that
 * does not declare cap (SBX_E_UNSUPPORTED naming both) and a cancellation
 * that already fired (SBX_E_CANCELLED). SBX_OK when the op may run. */
int sbxh_cap_call_begin(sbx_handle *h, uint64_t cap, sbx_cancel *cancel, sbx_error *err);

/* The user an op of h acts as (as: SBX_AS_HANDLE or SBX_AS_DEFAULT of
 * handle_user.h), or NULL for the sandbox's default user. */
const char *sbxh_acting_user(const sbx_handle *h, int as);

#endif
