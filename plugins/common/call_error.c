/* call_error.c - a provider's failure on its host call (see call_error.h). */
#include "call_error.h"

#include <stdarg.h>
#include <stdio.h>

int sbxp_call_error(const struct sbx_host *host, sbx_call *call, int status, const char *fmt,
                    ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (call)
        return host->set_error(host, call, status, "%s", msg);
    host->log(host, SBX_LOG_WARN, "%s", msg);
    return status;
}
