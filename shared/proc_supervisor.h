/*
 * proc_supervisor.h - the process supervisor: processes that outlive the
 * call that started them, with a pseudo-terminal or pipes, their output
 * drained continuously into bounded replay buffers (proc_ring.h) read by
 * byte cursor, served to clients over the process channel of the sbx-agent
 * protocol, version 3 (shared/agent_proto/PROTOCOL.md, "Version 3").
 *
 * One event loop (poll), single-threaded and non-blocking, owns the table
 * of processes and every client connection: a flooding writer never waits
 * for a reader (its bytes go into the ring, the oldest are dropped and
 * counted), a slow or stalled client stalls only its own connection, and
 * memory is bounded by the rings (buffer_bytes per stream, at most
 * SBXS_PSV_BUFFER_MAX) times the table size (SBXS_PSV_MAX_PROCS) plus one
 * frame per connection (at most SBXS_PSV_MAX_CONNS). A connection carries
 * any number of requests, one after another, so that a keystroke costs one
 * write request and one read on an open connection, never a connect.
 *
 * Embedding it (the docker agent, agent/procs.c; a local supervisor):
 *
 *   struct sbxs_psv_config cfg = {
 *       .listen_fd = lfd,     // a listening unix stream socket, or -1
 *       .auth = my_auth,      // called on every accepted connection
 *       .handoff_fd = -1,     // or a socket passing connections (below)
 *       .root_fd = wsfd,      // the workspace: cwd is opened beneath it
 *       .resolve_user = NULL, // NULL: only "" (the supervisor's user)
 *       .base_env = environ,  // or NULL: a request's env is the whole one
 *       .ctx = my_ctx,
 *   };
 *   struct sbxs_psv *s = sbxs_psv_new(&cfg);   // NULL: out of memory
 *   sbxs_psv_run(s);                            // until stop_fd / idle
 *   sbxs_psv_free(s);                           // kills what still runs
 *
 * - listen_fd: connections accepted there are served after auth(ctx, fd)
 *   returns 0 (check SO_PEERCRED there); refused ones get AP_ERROR EPERM.
 *   The supervisor then sends its preamble, reads the client's (version 3
 *   or later) and its AP_PROC_CHANNEL request, and answers AP_OK.
 * - handoff_fd: a unix socket on which an already authenticated
 *   connection arrives as one SCM_RIGHTS descriptor per message, its
 *   preamble and AP_PROC_CHANNEL request consumed by the sender (the
 *   agent's connection handlers); the supervisor answers AP_OK on it.
 * - root_fd: a directory descriptor (O_PATH is fine); a start's cwd is
 *   opened beneath it with openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)
 *   ("" is the root itself); leaving it is EXDEV.
 * - resolve_user(ctx, spec, &u, msg, cap): the user a start names ("" the
 *   default): 0, or -1 with a message (the start fails with EINVAL, stage
 *   "user"). The child switches to u (setgroups, setgid, setuid) when it
 *   differs from the supervisor's own ids.
 * - base_env: the environment a start's env is laid over (HOME from the
 *   user unless one of them sets it; TERM=xterm-256color on a PTY unless
 *   one sets it).
 * - kill_tree(ctx, reap, reap_ctx): optional, called by kill-all after
 *   every process group was sent SIGKILL, to kill what left its group
 *   (setsid); the agent walks its subreaper's descendants. It must call
 *   reap(reap_ctx) instead of waiting for children itself.
 * - stop_fd: optional (-1): run returns when it becomes readable or hangs up.
 * - idle_exit_ms: optional (0: never): run returns once no process has run
 *   or been kept, and no connection has been open, for that long.
 * - hold_us: optional (0: SBXS_PSV_HOLD_US): the longest a read of a
 *   flooding stream is held for more bytes; negative: never (every read is
 *   answered at its first byte).
 *
 * The embedding program gives the supervisor its process: run blocks
 * SIGCHLD (a signalfd wakes it) and ignores SIGPIPE; the loop reaps every
 * child with waitpid(-1), so nothing else in the process may wait for
 * children. Make the process a child subreaper (PR_SET_CHILD_SUBREAPER)
 * to keep what a process leaves behind within reach.
 */
#ifndef SBXS_PROC_SUPERVISOR_H
#define SBXS_PROC_SUPERVISOR_H

#include "proc_spawn.h"

#include <stddef.h>
#include <stdint.h>

#define SBXS_PSV_MAX_PROCS 256          /* running and ended, kept */
#define SBXS_PSV_MAX_CONNS 512          /* open client connections */
#define SBXS_PSV_BUFFER_DEFAULT (1u << 20) /* per stream, when a start says 0 */
#define SBXS_PSV_BUFFER_MAX (64u << 20) /* the largest buffer_bytes accepted */
#define SBXS_PSV_KEEP_MS (10 * 60 * 1000) /* an ended process stays this long at least */
#define SBXS_PSV_FORGET_MS (60 * 60 * 1000) /* ... and is forgotten after this */
#define SBXS_PSV_LINGER_MS 250 /* output may stay open this long after the leader's exit */
/* Coalescing (proc_supervisor.c, "Coalescing"): a read waiting on a stream
 * that floods (at least SBXS_PSV_FLOOD_BYTES in the current and previous
 * SBXS_PSV_FLOOD_WINDOW_US; or at least SBXS_PSV_FLOOD_CHUNK bytes to send
 * and a flood less than SBXS_PSV_FLOOD_MEMORY_US ago) is answered when
 * max_bytes are there, when the stream or the process ends, or
 * SBXS_PSV_HOLD_US after its first byte; any other read at its first
 * byte. */
#define SBXS_PSV_FLOOD_BYTES (16u * 1024)
#define SBXS_PSV_FLOOD_WINDOW_US 10000
#define SBXS_PSV_FLOOD_CHUNK 1024u
#define SBXS_PSV_FLOOD_MEMORY_US 1000000
#define SBXS_PSV_HOLD_US 4000

struct sbxs_psv_config {
    int listen_fd;
    int (*auth)(void *ctx, int fd);
    int handoff_fd;
    int root_fd;
    int (*resolve_user)(void *ctx, const char *spec, struct sbxs_psv_user *u, char *msg,
                        size_t cap);
    char *const *base_env;
    int (*kill_tree)(void *ctx, void (*reap)(void *), void *reap_ctx);
    int stop_fd;
    int64_t idle_exit_ms;
    uint64_t default_buffer; /* 0: SBXS_PSV_BUFFER_DEFAULT */
    int64_t hold_us;         /* 0: SBXS_PSV_HOLD_US; < 0: never hold a read */
    void *ctx;
};

struct sbxs_psv;

struct sbxs_psv *sbxs_psv_new(const struct sbxs_psv_config *cfg);
/* Serve until stop_fd or idle_exit_ms: 0, or -1 when the loop cannot run
 * (signalfd, poll failed; errno set). */
int sbxs_psv_run(struct sbxs_psv *s);
/* SIGKILL every running process's group (and kill_tree), reaping. */
void sbxs_psv_kill_all(struct sbxs_psv *s);
/* kill_all, close every connection and free. */
void sbxs_psv_free(struct sbxs_psv *s);

#endif
