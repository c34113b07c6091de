/* cancel.h - the inside of a cancellation token (internal to libsbx). */
#ifndef SBX_HOST_CANCEL_H
#define SBX_HOST_CANCEL_H

#include <sbx/sbx.h>

#include <stdatomic.h>

struct sbx_cancel {
    atomic_int fired;
    int fd; /* eventfd, readable once fired */
    sbx_progress_fn progress; /* sbx_cancel_set_progress, or NULL */
    void *progress_ud;
};

/* Report progress to the token's callback, if it has one (NULL c: none).
 * unit is "bytes" or "steps". */
void sbxh_progress(sbx_cancel *c, const char *what, const char *unit, uint64_t done,
                   uint64_t total, const char *detail, bool finished);

#endif
