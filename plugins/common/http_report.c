/* http_report.c - a failed request as a call's error (see http_report.h). */
#include "http_report.h"

#include "call_error.h"

#include <stdarg.h>
#include <stdio.h>

int sbxp_http_report(const struct sbx_host *host, sbx_call *call, const struct sbxp_reporter *r,
                     const sbxp_http_error *err, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (r->key && (err->http_status == 401 || err->http_status == 403))
        return sbxp_call_error(host, call, SBX_E_CONFIG,
                               "%s: %s: %s; the %s refused the credentials: set %s to a valid "
                               "%s",
                               r->who, what, err->message, r->service, r->key, r->key_noun);
    const char *hint = r->hint ? r->hint(err) : NULL;
    return sbxp_call_error(host, call, err->status, "%s: %s: %s%s", r->who, what, err->message,
                           hint ? hint : "");
}
