/* error.c - the sbx_error helpers of the consumer API. */
#include <sbx/sbx.h>

#include <stdarg.h>
#include <stdio.h>

SBX_API void sbx_error_clear(sbx_error *err)
{
    if (!err)
        return;
    err->status = SBX_OK;
    err->message[0] = '\0';
}

SBX_API int sbx_error_set(sbx_error *err, int status, const char *fmt, ...)
{
    if (!err)
        return status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
    err->status = status;
    return status;
}
