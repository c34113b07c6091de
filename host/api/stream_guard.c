/*
 * stream_guard.c - wrappers of the caller's sinks and sources that keep
 * the message of their first failure (see stream_guard.h).
 */
#include "api/stream_guard.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The message the callback running on this thread gave, "" when none. */
static _Thread_local char pending[SBX_ERROR_MAX - 100];

SBX_API void sbx_stream_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pending, sizeof pending, fmt, ap);
    va_end(ap);
}

/* Record a failure of `what` with the pending message, first one wins. */
static void record(struct sbx_stream_failure *f, const char *what, int status)
{
    int expected = 0;
    if (atomic_compare_exchange_strong(&f->taken, &expected, 1)) {
        f->status = status;
        if (pending[0])
            snprintf(f->message, sizeof f->message, "%s: %.900s", what, pending);
        else
            snprintf(f->message, sizeof f->message, "%s failed: %s", what,
                     sbx_strerror((sbx_status)status));
    }
    pending[0] = '\0';
}

static int guarded_write(void *ctx, const void *buf, size_t len)
{
    struct sbx_guarded_sink *g = ctx;
    pending[0] = '\0';
    int rc = g->inner->write(g->inner->ctx, buf, len);
    if (rc != 0)
        record(g->failure, g->what, rc);
    return rc;
}

static long guarded_read(void *ctx, void *buf, size_t cap)
{
    struct sbx_guarded_source *g = ctx;
    pending[0] = '\0';
    long n = g->inner->read(g->inner->ctx, buf, cap);
    if (n < 0)
        record(g->failure, g->what, SBX_E_IO);
    return n;
}

static int guarded_poll_fd(void *ctx)
{
    struct sbx_guarded_source *g = ctx;
    return g->inner->poll_fd(g->inner->ctx);
}

static int64_t guarded_length(void *ctx)
{
    struct sbx_guarded_source *g = ctx;
    return g->inner->length(g->inner->ctx);
}

const struct sbx_sink *sbxh_guard_sink(struct sbx_guarded_sink *g,
                                       const struct sbx_sink *inner,
                                       struct sbx_stream_failure *f, const char *what)
{
    if (!inner)
        return NULL;
    g->sink = (struct sbx_sink)SBX_SINK_INIT(g, guarded_write);
    g->inner = inner;
    g->failure = f;
    g->what = what;
    return &g->sink;
}

const struct sbx_source *sbxh_guard_source(struct sbx_guarded_source *g,
                                           const struct sbx_source *inner,
                                           struct sbx_stream_failure *f,
                                           const char *what)
{
    if (!inner)
        return NULL;
    /* the optional members stay optional: present only when the caller's
     * source has them */
    g->source = (struct sbx_source)SBX_SOURCE_INIT(g, guarded_read);
    if (inner->poll_fd)
        g->source.poll_fd = guarded_poll_fd;
    if (inner->length)
        g->source.length = guarded_length;
    g->inner = inner;
    g->failure = f;
    g->what = what;
    return &g->source;
}

void sbxh_guard_finish(const struct sbx_stream_failure *f, int rc, sbx_error *err)
{
    if (rc == SBX_OK || !atomic_load(&f->taken) || !err)
        return;
    char provider[SBX_ERROR_MAX];
    snprintf(provider, sizeof provider, "%s", err->message);
    if (provider[0])
        sbx_error_set(err, rc, "%s (%s)", f->message, provider);
    else
        sbx_error_set(err, rc, "%s", f->message);
}
