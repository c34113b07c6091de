/*
 * cancel.c - cancellation tokens.
 *
 * A token is an atomic flag plus an eventfd. Providers poll() the eventfd
 * next to their own descriptors (pipes, sockets), so a cancel wakes a
 * blocked exec at once instead of at the next timeout tick. Nobody reads the
 * eventfd, so it stays readable once fired.
 */
#include "base/cancel.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

SBX_API int sbx_cancel_new(sbx_cancel **out)
{
    sbx_cancel *c = calloc(1, sizeof *c);
    if (!c)
        return SBX_E_NOMEM;
    c->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (c->fd < 0) {
        free(c);
        return SBX_E_IO;
    }
    atomic_init(&c->fired, 0);
    *out = c;
    return SBX_OK;
}

SBX_API void sbx_cancel_fire(sbx_cancel *c)
{
    if (!c)
        return;
    int saved = errno; /* may run in a signal handler */
    if (atomic_exchange(&c->fired, 1) == 0) {
        uint64_t one = 1;
        ssize_t n = write(c->fd, &one, sizeof one);
        (void)n; /* EAGAIN only if already signalled: fine */
    }
    errno = saved;
}

SBX_API bool sbx_cancel_fired(const sbx_cancel *c)
{
    return c && atomic_load(&((sbx_cancel *)c)->fired) != 0;
}

SBX_API void sbx_cancel_set_progress(sbx_cancel *c, sbx_progress_fn fn, void *ud)
{
    if (!c)
        return;
    c->progress = fn;
    c->progress_ud = ud;
}

void sbxh_progress(sbx_cancel *c, const char *what, const char *unit, uint64_t done,
                   uint64_t total, const char *detail, bool finished)
{
    if (!c || !c->progress)
        return;
    struct sbx_progress p = {.size = sizeof p, .what = what ? what : "", .done = done,
                             .total = total, .unit = unit, .detail = detail,
                             .finished = finished};
    c->progress(c->progress_ud, &p);
}

void sbxh_meter_add(struct sbxh_meter *m, uint64_t n)
{
    m->done += n;
    if (!m->cancel || !m->cancel->progress || m->done < m->threshold ||
        m->done - m->reported < 1024 * 1024)
        return;
    m->reported = m->done;
    m->shown = true;
    sbxh_progress(m->cancel, m->what, "bytes", m->done, m->total, NULL, false);
}

void sbxh_meter_end(struct sbxh_meter *m)
{
    if (m->shown)
        sbxh_progress(m->cancel, m->what, "bytes", m->done, m->total ? m->total : m->done,
                      NULL, true);
    m->shown = false;
}

SBX_API void sbx_cancel_free(sbx_cancel *c)
{
    if (!c)
        return;
    close(c->fd);
    free(c);
}
