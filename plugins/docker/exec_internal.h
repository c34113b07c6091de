/*
 * exec_internal.h - what the exec files of the Engine API path share: one
 * exec's spec and outcome, the output demultiplexer and the killer (exec
 * through the agent is exec_agent.c, which needs none of it).
 *
 *   exec.c         the exec op and the helper execs (argument checks,
 *                  results, messages)
 *   exec_run.c     one exec from create to inspect: start, read, stop
 *   exec_stream.c  the frame demultiplexer
 *   exec_kill.c    killing a command's processes (from the host through
 *                  /proc, else by a killer exec in the container)
 *   exec_probe.c   why a command could not start (missing or not
 *                  executable), asked of the container's file system
 */
#ifndef SBX_DOCKER_EXEC_INTERNAL_H
#define SBX_DOCKER_EXEC_INTERNAL_H

#include "docker.h"

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

/* "SBX_EXEC_TAG=" + 32 hex digits + NUL. */
#define EXEC_TAG_ENV_LEN (sizeof DOCKER_EXEC_TAG_VAR + 1 + 32)

/* How an exec is stopped on timeout, cancellation or a refusing sink. */
enum exec_stop {
    /* a user's command: tagged, and its whole tree is killed */
    EXEC_STOP_KILL,
    /* a helper fed through stdin that publishes only a complete input (the
     * write script): its stdin is ended without completing the input and
     * it cleans up by itself; nothing is killed */
    EXEC_STOP_EOF,
    /* a helper that is simply abandoned at its deadline (the killer) */
    EXEC_STOP_NONE
};

struct exec_spec {
    const char *const *argv;
    const char *const *env;
    const char *workdir;          /* absolute, or NULL for the container's */
    const struct sbx_source *in;  /* stdin, or NULL */
    int64_t timeout_ms;           /* the command's own timeout, 0: none */
    const struct sbx_sink *out;
    const struct sbx_sink *err;
    const char *user;             /* NULL: the container's user */
    enum exec_stop stop;
    int cancellable;              /* honour the call's cancellation */
    int64_t deadline;             /* absolute (docker_now_ms) bound on the
                                     whole exec and each of its requests,
                                     0: none (helpers such as the killer) */
};

struct exec_outcome {
    int exit_code;
    int term_signal;
    int timed_out;
    int cancelled;
    int sink_status;    /* a sink stopped us */
    int source_failed;  /* the stdin source reported an error */
    int input_complete; /* the source's end was delivered (stdin closed
                           after all of it) */
    uint64_t out_bytes, err_bytes;
    int start_failed;   /* the daemon could not start the command: its exec
                           never got a process (inspect: Pid 0, ExitCode) */
    int start_exit;     /* the exit code the daemon recorded for that */
    char start_msg[512]; /* what the daemon wrote on stdout about it */
    int kill_failed;    /* could not make sure every process is gone */
    char kill_msg[384];
};

/* ---- exec.c ------------------------------------------------------------ */

/* A sink keeping the first cap-1 bytes in buf (NUL-terminated), dropping
 * the rest: a helper's messages. */
struct exec_bounded {
    char *buf;
    size_t cap, len;
};
struct sbx_sink docker_exec_bounded_sink(struct exec_bounded *b, char *buf, size_t cap);

/* ---- exec_run.c -------------------------------------------------------- */

/* Run one exec to its end. SBX_OK when the command ran (whatever its exit)
 * or could not start (oc->start_failed); the outcome says how it ended.
 * Otherwise the call's error is set (a daemon that failed or stopped
 * answering; the command was stopped as its spec says). */
int docker_exec_run(sbx_sandbox *sb, sbx_call *call, const struct exec_spec *spec,
             struct exec_outcome *oc);

/* GET /exec/{id}/json within `timeout_ms`: *pid the exec's process on the
 * daemon's host (0 when it never got one), *running, *exit_code (-1 when
 * not recorded yet). */
int docker_exec_inspect_once(struct docker_state *st, const char *eid, int64_t timeout_ms,
                      int *pid, int *running, int *exit_code, sbxp_http_error *err);

/* ---- exec_stream.c ------------------------------------------------------ */

/* Bytes the stdin feeder (shared/stdin_feeder.h) moves per read and send. */
#define FEED_CHUNK (256 * 1024)

/* Parses the daemon's multiplexed frames (8-byte header: stream, 3 zero
 * bytes, big-endian length) as bytes arrive; payloads go to the sinks. */
struct exec_demux {
    unsigned char hdr[8];
    size_t hdr_len;
    uint32_t left;   /* payload bytes left in the current frame */
    int stream;      /* 1 stdout, 2 stderr */
    const struct exec_spec *spec;
    struct exec_outcome *oc;
    int discard;     /* count, do not deliver (after a stop) */
    /* The daemon reports a command that could not start as text on stdout
     * ("OCI runtime exec failed: ..."). The first stdout bytes that read
     * like it are held back, and the daemon is asked (exec inspect) whether
     * the exec got a process: if it did they are output like any other. */
    int hold;        /* 0 not yet decided, 1 holding, 2 decided (deliver) */
    int daemon_text; /* the held bytes are the daemon's own message */
    char held[32];
    size_t held_len;
    /* asks whether the exec got a process: 1 yes, 0 no (start failed) */
    int (*started)(void *ctx);
    void *started_ctx;
};

/* Feed received bytes through the parser. 0, a sink's status, or -1 for a
 * malformed stream. */
int docker_exec_demux_feed(struct exec_demux *d, const char *p, size_t n);
/* At the end of the stream: deliver what is still held unless it is the
 * daemon's message (start_failed). Returns a sink's status or 0. */
int docker_exec_demux_finish(struct exec_demux *d, int start_failed);

/* ---- exec_kill.c --------------------------------------------------------- */

/* Kills an exec's processes on a thread of its own, so the caller keeps
 * draining the exec's output meanwhile. */
struct exec_killer {
    sbx_sandbox *sb;
    const char *tag_env; /* "SBX_EXEC_TAG=<hex>" */
    const char *eid;     /* the exec */
    int64_t deadline;    /* absolute: everything is over by then */
    int leader_nspid;    /* the exec's leader as the container sees it, or 0 */
    pthread_t thread;
    int running;
    /* results, read after the join */
    int ok;
    char msg[384];
};

/* Start killing (a thread). When no thread can be made the kill runs here
 * and now. */
void docker_exec_killer_start(struct exec_killer *k, sbx_sandbox *sb, const char *tag_env,
                       const char *eid, int64_t deadline);
void docker_exec_killer_join(struct exec_killer *k);

/* ---- exec_probe.c -------------------------------------------------------- */

/* Why the command argv0 (as given, run in workdir with the PATH of env or
 * the container's) could not start: SBX_E_NO_COMMAND when no such program
 * exists, SBX_E_NOT_EXEC when it exists but cannot be executed, or
 * SBX_E_INVALID when the working directory is missing. Looked up with the
 * daemon's path stat (HEAD archive), never from the daemon's message.
 * When the lookup itself fails, fallback (from the exit code) is
 * returned. */
int docker_exec_probe_start_failure(sbx_sandbox *sb, sbx_call *call, const char *argv0,
                             const char *const *env, const char *workdir,
                             int fallback);

#endif /* SBX_DOCKER_EXEC_INTERNAL_H */
