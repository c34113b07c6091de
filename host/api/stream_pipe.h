/*
 * stream_pipe.h - a byte stream that a provider call pushes into a sink on
 * a thread of its own, read here through a source (internal to libsbx).
 *
 * Provider calls write archives into sinks (export_outputs, the stdout of
 * exec); libarchive pulls from a source. A socket pair joins the two, so
 * nothing is buffered beyond the socket's own buffer, and when the reader
 * stops (a refused entry) it shuts its end: the producer's next write fails
 * (EPIPE, with MSG_NOSIGNAL: no signal) and its transfer stops, so a
 * hostile stream is never read in full.
 */
#ifndef SBX_HOST_STREAM_PIPE_H
#define SBX_HOST_STREAM_PIPE_H

#include <sbx/sbx.h>

#include <pthread.h>
#include <stdbool.h>

/* The producer: write the stream into sink; an sbx_status with err set. */
typedef int (*sbx_pipe_producer)(void *ud, const struct sbx_sink *sink, sbx_error *err);

struct sbx_stream_pipe {
    /* producer side, owned by the thread until the join */
    sbx_pipe_producer produce;
    void *ud;
    int write_fd;
    bool sink_failed; /* the reader went away: a write failed */
    int status;
    sbx_error err;
    pthread_t thread;
    /* reader side */
    int read_fd;
    int read_errno; /* of a failed read */
};

/* Start produce(ud, sink) on a thread. SBX_OK, or an error (nothing left
 * running). */
int sbxh_stream_pipe_start(struct sbx_stream_pipe *p, sbx_pipe_producer produce, void *ud,
                           sbx_error *err);

/* The reader's source (borrowed from p). */
struct sbx_source sbxh_stream_pipe_source(struct sbx_stream_pipe *p);

/* Read and drop the rest of the stream (after a complete archive, so the
 * producer's transfer ends normally). */
void sbxh_stream_pipe_drain(struct sbx_stream_pipe *p);

/* Stop reading: the producer's next write fails. */
void sbxh_stream_pipe_abort(struct sbx_stream_pipe *p);

/* Wait for the producer and close everything. Afterwards p->status,
 * p->sink_failed and p->err tell how it went. */
void sbxh_stream_pipe_join(struct sbx_stream_pipe *p);

#endif
