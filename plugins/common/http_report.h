/*
 * http_report.h - a failed request of a provider as the error of its
 * host call, with the operator's next step: set a valid key when the
 * service refused the credentials, or the provider's own hint (docker:
 * "is the Docker daemon running?").
 */
#ifndef SBXP_HTTP_REPORT_H
#define SBXP_HTTP_REPORT_H

#include "http_client.h"

/* How a provider names itself, its credential and its hints in those
 * messages. Static data of the provider, or of its instance. */
struct sbxp_reporter {
    const char *who;      /* "daytona": the messages' first word */
    const char *service;  /* "service", "server": who refused */
    const char *key;      /* where the key comes from ("E2B_API_KEY"), or
                             NULL: no credential, 401/403 get no advice */
    const char *key_noun; /* "key", "API key" */
    /* A text appended to the message of err (" (is it running?)"), or
     * NULL; the function may be NULL. */
    const char *(*hint)(const sbxp_http_error *err);
};

/*
 * Report err on call (or log it when call is NULL, as sbxp_call_error):
 * "<who>: <what>: <err's message><hint>" with err's status, where what is
 * the printf-style rest; with a key, a 401 or 403 becomes SBX_E_CONFIG
 * with "; the <service> refused the credentials: set <key> to a valid
 * <key_noun>" instead of the hint. Returns the status set.
 */
int sbxp_http_report(const struct sbx_host *host, sbx_call *call, const struct sbxp_reporter *r,
                     const sbxp_http_error *err, const char *fmt, ...) SBX_PRINTF_LIKE(5, 6);

#endif /* SBXP_HTTP_REPORT_H */
