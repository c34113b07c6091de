/*
 * error.h - the error of a shared helper: a status and a message (shared
 * by the host and the plugins; symbols prefixed sbxs_).
 *
 * Its own small type, so that the shared code depends on neither libsbx's
 * API nor the ABI's host table: callers copy it into whatever reports
 * errors on their side (an sbx_error, host->set_error).
 */
#ifndef SBXS_ERROR_H
#define SBXS_ERROR_H

#include <sbx/provider.h>

#define SBXS_ERROR_MAX 1024

struct sbxs_error {
    int status;                  /* an sbx_status */
    char message[SBXS_ERROR_MAX]; /* "" when status is SBX_OK */
};

/* Clear err (NULL is ignored). */
void sbxs_error_clear(struct sbxs_error *err);

/* Set err's status and printf-style message; returns status (err may be
 * NULL). */
int sbxs_error_set(struct sbxs_error *err, int status, const char *fmt, ...)
    SBX_PRINTF_LIKE(3, 4);

#endif
