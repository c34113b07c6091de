/*
 * proc_client.h - a provider's side of the process channel of the
 * sbx-agent protocol, version 3 (shared/agent_proto/PROTOCOL.md,
 * "Version 3: processes"), spoken to a process supervisor
 * (shared/proc_supervisor.h): the docker agent's, or a local one.
 *
 * The client keeps a few open channels (one per thread at a time: a call
 * takes one, runs its request and gives it back), so a keystroke is one
 * write request and one read on a connection that is already open. A
 * channel is opened by the provider's callback, which owns the transport
 * and its authentication:
 *
 *   open(ctx, call, deadline, &fd): connect, authenticate the listener,
 *   exchange the preambles and send AP_PROC_CHANNEL (docker: through
 *   docker_agent_open; a plain unix socket: sbxp_proc_handshake). SBX_OK
 *   with a connected socket, or the call's error set. The client reads the
 *   supervisor's AP_OK itself.
 *
 * Errors the supervisor reports become statuses: an unknown id
 * SBX_E_NOT_FOUND, a bad cwd or user, a write after the end, resize
 * without a PTY and a bad signal SBX_E_INVALID, a missing program
 * SBX_E_NO_COMMAND, one that cannot run SBX_E_NOT_EXEC, a full table
 * SBX_E_UNAVAILABLE. A channel that breaks (the supervisor died) is
 * SBX_E_UNAVAILABLE naming it, never a hang: every answer is awaited
 * under a deadline (the read's wait plus request_timeout_ms) and the
 * call's cancellation.
 *
 * Writes are pipelined: a write to a process this client started or has
 * read is sent without waiting for its answer, which the next write to
 * it reads first (writes stay in order, one in flight per process). A
 * write the process could not take (it had ended) is reported by the next
 * write to it and every later one ("an earlier write ... was not
 * delivered"); a close, and a write to a process not known here, wait as
 * before; the client, when freed or reset, reads every answer still owed
 * (a supervisor drops a queued write whose channel closes). Signals and
 * resizes do not wait for an owed write. The rules:
 * shared/agent_proto/PROTOCOL.md, "Pipelined writes".
 *
 * A start without a PTY asks for its first read (AP_PS_READ): the read
 * from 0 of the process, answered by the supervisor at its end or
 * 25 ms after; a read from 0 that follows is answered from it when it
 * reports the end (a quick command: no second round trip). A supervisor
 * without AP_PS_READ refuses such a start as malformed: the client starts
 * again without it, and never asks that supervisor again.
 *
 * A write to a process the client does not know asks the supervisor to
 * answer with the output that follows it (AP_PW_PEEK: the echo, waited
 * for at most AP_PW_PEEK_MS), which the client keeps; a read whose cursor
 * falls in it is answered from there, without a round trip. Bytes keep
 * their offsets in the stream forever, so such an answer is never stale;
 * it reports the process running (the next read from the supervisor
 * tells an end).
 */
#ifndef SBXP_PROC_CLIENT_H
#define SBXP_PROC_CLIENT_H

#include <sbx/provider.h>

#include <stdint.h>

struct sbxp_proc_client;

struct sbxp_proc_client_cfg {
    const struct sbx_host *host;
    const char *what; /* names the supervisor in messages: "docker: the sbx agent of
                         container 0123456789ab" */
    int (*open)(void *ctx, sbx_call *call, int64_t deadline, int *fd);
    void *ctx;
    int64_t request_timeout_ms; /* 0: 30 s */
    uint64_t default_buffer;    /* a start's buffer_bytes 0 means this (0: the
                                   supervisor's default) */
    struct sbxp_proc_client *reads; /* the client the provider reads and writes
                                       this one's processes with (NULL: this
                                       one): a start's first read is kept
                                       there, and the process known to run */
};

/* NULL when out of memory. cfg->what is copied. */
struct sbxp_proc_client *sbxp_proc_client_new(const struct sbxp_proc_client_cfg *cfg);
/* Close the idle channels and free. */
void sbxp_proc_client_free(struct sbxp_proc_client *cl);
/* Close the idle channels (after the supervisor's end, say). */
void sbxp_proc_client_reset(struct sbxp_proc_client *cl);

/* The provider ops, over the client. user: the call's user ("" or NULL
 * for the default). */
int sbxp_proc_start(struct sbxp_proc_client *cl, sbx_call *call, const char *user,
                    const struct sbx_proc_spec *spec, char id[SBX_PROC_ID_MAX]);
int sbxp_proc_write(struct sbxp_proc_client *cl, sbx_call *call, const char *id,
                    const void *data, size_t len, uint32_t flags);
int sbxp_proc_read(struct sbxp_proc_client *cl, sbx_call *call, const char *id,
                   const struct sbx_proc_read_args *args, struct sbx_proc_read_result *res);
int sbxp_proc_signal(struct sbxp_proc_client *cl, sbx_call *call, const char *id, int signo);
int sbxp_proc_list(struct sbxp_proc_client *cl, sbx_call *call,
                   const struct sbx_proc_list_sink *sink);
int sbxp_proc_resize(struct sbxp_proc_client *cl, sbx_call *call, const char *id,
                     uint16_t rows, uint16_t cols);
/* Kill every process of the supervisor (destroy). */
int sbxp_proc_kill_all(struct sbxp_proc_client *cl, sbx_call *call);

/* How many reads were answered with a write's echo, and how many writes
 * were pipelined (for tests and benchmarks). */
uint64_t sbxp_proc_client_echo_hits(struct sbxp_proc_client *cl);
uint64_t sbxp_proc_client_pipelined(struct sbxp_proc_client *cl);
/* How many reads from 0 a start's first read answered (AP_PS_READ). */
uint64_t sbxp_proc_client_first_hits(struct sbxp_proc_client *cl);

/* For a connected plain socket to a supervisor's listen_fd: send the
 * preamble and AP_PROC_CHANNEL and check the supervisor's preamble, within
 * deadline (monotonic ms, 0: none). 0, or -1 with a message. */
int sbxp_proc_handshake(int fd, int64_t deadline, char *msg, size_t cap);

#endif /* SBXP_PROC_CLIENT_H */
