/*
 * feeder.h - the stdin feeder of a `local` command (feeder.c): a thread that
 * streams the caller's source into the command's stdin pipe, so that a
 * source which blocks waiting for its own input never holds up the output.
 */
#ifndef SBX_LOCAL_FEEDER_H
#define SBX_LOCAL_FEEDER_H

#include <sbx/provider.h>

struct local_feeder;

/*
 * local_feeder_start - start feeding src into fd, the write end of the
 * command's stdin pipe, which must be non-blocking and O_CLOEXEC. fd is
 * consumed in every case: the feeder closes it at the end of the source,
 * when the command stops reading, or on a stop request. The source is read
 * from the feeder's own thread. Returns 0 and stores the feeder, or an
 * errno value (nothing left running).
 */
int local_feeder_start(struct local_feeder **out, const struct sbx_source *src,
                       int fd);

/* An fd that becomes readable once the feeder has finished (for poll()).
 * Owned by the feeder. */
int local_feeder_done_fd(const struct local_feeder *f);

/* Nonzero once the source has reported an error (its message is set). */
int local_feeder_failed(const struct local_feeder *f);

/*
 * local_feeder_stop - ask the feeder to stop, wait for its thread and free
 * it. A read of the source that is in progress is waited for: the source
 * is borrowed from the caller and must not be used after exec returns.
 * Returns nonzero when the source had failed. NULL is ignored.
 */
int local_feeder_stop(struct local_feeder *f);

#endif /* SBX_LOCAL_FEEDER_H */
