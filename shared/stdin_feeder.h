/*
 * stdin_feeder.h - a thread that streams a caller's sbx_source into a
 * command's stdin: the write end of a pipe (local) or the write side of a
 * connection the daemon turns into the command's stdin (docker).
 *
 * Why a thread: a source may block until its own input arrives (a terminal,
 * a socket). Reading it from the output loop would stop stdout and stderr
 * from streaming meanwhile, so the feeder runs beside that loop.
 */
#ifndef SBXS_STDIN_FEEDER_H
#define SBXS_STDIN_FEEDER_H

#include <sbx/provider.h>

#include <stddef.h>

struct sbxs_feeder;

/* fd is a borrowed socket: at the end its write side is shut down (the fd
 * stays open, its owner closes it), and the peer hanging up stops the
 * feed. Without it, fd is a pipe's write end that the feeder owns and
 * closes at the end. */
#define SBXS_FEED_SOCKET 1u

/*
 * Start feeding src into fd (non-blocking, O_CLOEXEC) from a new thread,
 * in reads of at most `chunk` bytes. The feed ends at the source's end, when
 * the command stops reading (EPIPE, the peer hung up), when the source
 * fails, or on sbxs_feeder_stop; a stop that comes during a read drops what
 * was read, so a stopped feed never looks complete. SIGPIPE is blocked on
 * the feeder's own thread only. Returns 0 and stores the feeder, or an
 * errno value with nothing left running (a pipe fd is closed then too).
 */
int sbxs_feeder_start(struct sbxs_feeder **out, const struct sbx_source *src,
                      int fd, unsigned flags, size_t chunk);

/* An fd that becomes readable once the feed has ended (for poll()). Owned
 * by the feeder. */
int sbxs_feeder_done_fd(const struct sbxs_feeder *f);

/* Nonzero once the source has reported an error (its message is set). */
int sbxs_feeder_failed(const struct sbxs_feeder *f);

/* Ask the feeder to stop where it is; returns at once. NULL is ignored. */
void sbxs_feeder_stop(struct sbxs_feeder *f);

/*
 * Stop the feeder, wait for its thread and free it. A read of the source in
 * progress is waited for: the source is the caller's and must not be used
 * after exec returns. *complete (may be NULL) is set to 1 when the source's
 * end was reached and everything was written. Returns nonzero when the
 * source had failed. NULL is ignored (returns 0, *complete untouched).
 */
int sbxs_feeder_finish(struct sbxs_feeder *f, int *complete);

#endif
