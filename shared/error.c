/* error.c - the shared helpers' error (see error.h). */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>

void sbxs_error_clear(struct sbxs_error *err)
{
    if (!err)
        return;
    err->status = SBX_OK;
    err->message[0] = '\0';
}

int sbxs_error_set(struct sbxs_error *err, int status, const char *fmt, ...)
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
