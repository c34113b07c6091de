/*
 * call_error.h - reporting a provider's failure on the host call that it
 * belongs to (symbols prefixed sbxp_, as everything in plugins/common).
 */
#ifndef SBXP_CALL_ERROR_H
#define SBXP_CALL_ERROR_H

#include <sbx/provider.h>

/*
 * Set the call's error to status and the printf-style message, or, when
 * call is NULL (cleanup that runs after the call has ended, or for no
 * call at all), log the message as a warning instead. Returns status, so
 * that a failing path can `return sbxp_call_error(...)`.
 */
int sbxp_call_error(const struct sbx_host *host, sbx_call *call, int status, const char *fmt,
                    ...) SBX_PRINTF_LIKE(4, 5);

#endif /* SBXP_CALL_ERROR_H */
