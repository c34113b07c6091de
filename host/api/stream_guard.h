/*
 * stream_guard.h - the caller's sinks and sources, wrapped so that their
 * own failure reaches the caller's error (internal).
 *
 * A sink or source that fails returns a status; the provider then stops
 * and usually reports something generic ("the sink stopped the transfer").
 * What went wrong is known only to the callback, which can say it with
 * sbx_stream_error() (sbx.h) on the thread it runs on. libsbx hands the
 * provider wrappers of the caller's sinks and sources that pick that
 * message up at once, on that same thread, and keep the first one per call;
 * sbxh_guard_finish then puts it in front of the provider's message.
 */
#ifndef SBX_HOST_STREAM_GUARD_H
#define SBX_HOST_STREAM_GUARD_H

#include <sbx/sbx.h>

#include <stdatomic.h>

/* The first stream failure of one call. */
struct sbx_stream_failure {
    atomic_int taken; /* 0 until a wrapper records a failure */
    int status;
    char message[SBX_ERROR_MAX];
};

/* A wrapped sink or source: the wrapper the provider sees, and the
 * caller's original. */
struct sbx_guarded_sink {
    struct sbx_sink sink;
    const struct sbx_sink *inner;
    struct sbx_stream_failure *failure;
    const char *what; /* "stdout", "the read sink", ... */
};

struct sbx_guarded_source {
    struct sbx_source source;
    const struct sbx_source *inner;
    struct sbx_stream_failure *failure;
    const char *what;
};

/* Wrap inner (may be NULL: returns NULL). The guard must outlive the op. */
const struct sbx_sink *sbxh_guard_sink(struct sbx_guarded_sink *g,
                                       const struct sbx_sink *inner,
                                       struct sbx_stream_failure *f, const char *what);
const struct sbx_source *sbxh_guard_source(struct sbx_guarded_source *g,
                                           const struct sbx_source *inner,
                                           struct sbx_stream_failure *f,
                                           const char *what);

/* After the op: when a stream failed and the op failed, the stream's own
 * message leads the caller's error (the provider's follows it). */
void sbxh_guard_finish(const struct sbx_stream_failure *f, int rc, sbx_error *err);

#endif
