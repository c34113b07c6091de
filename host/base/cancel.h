/* cancel.h - the inside of a cancellation token (internal to libsbx). */
#ifndef SBX_HOST_CANCEL_H
#define SBX_HOST_CANCEL_H

#include <sbx/sbx.h>

#include <stdatomic.h>

struct sbx_cancel {
    atomic_int fired;
    int fd; /* eventfd, readable once fired */
};

#endif
