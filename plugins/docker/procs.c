/*
 * procs.c - SBX_CAP_PROCESSES and SBX_CAP_PTY: processes that outlive the
 * call, run by the process supervisor of the container's sbx-agent
 * (agent/procs.c, shared/proc_supervisor.h) and reached over protocol 3's
 * process channel (plugins/common/proc_client.h).
 *
 * A channel is an agent connection opened and authenticated like every
 * other (agent_client.c: the socket beneath its directory, the listener's
 * SO_PEERCRED pid against the container's init) whose request is
 * AP_PROC_CHANNEL; the handle keeps a few open, so that a keystroke costs a
 * write and a read on an open connection. The processes and their replay
 * buffers live in the container: a host process that attaches the
 * sandbox later continues with the same ids and cursors.
 */
#include "docker.h"

#include "agent_proto/proto.h"
#include "proc_client.h"

#include <stdio.h>
#include <stdlib.h>

static int open_channel(void *ctx, sbx_call *call, int64_t deadline, int *fd)
{
    sbx_sandbox *sb = ctx;
    unsigned char req[AP_HDR_LEN];
    sbxs_ap_header(req, AP_PROC_CHANNEL, 0);
    struct docker_agent_conn c;
    int rc = docker_agent_open(sb, call, req, sizeof req, deadline, &c);
    if (rc != SBX_OK)
        return rc;
    *fd = c.fd;
    return SBX_OK;
}

/* The handle's client in *out, made on first use. */
static int client(sbx_sandbox *sb, sbx_call *call, const char *op,
                  struct sbxp_proc_client **out)
{
    struct docker_state *st = sb->st;
    struct sbxp_proc_client *cl = atomic_load(&sb->procs);
    if ((*out = cl))
        return SBX_OK;
    if (!sb->agent_dir) {
        return docker_error(st, call, SBX_E_UNSUPPORTED,
                     "docker: %s: container %.12s runs without sbx-agent "
                     "(providers.docker.agent was false when it was created), which runs "
                     "the processes",
                     op, sb->id);
    }
    char what[128];
    snprintf(what, sizeof what, "docker: the sbx agent of container %.12s", sb->id);
    struct sbxp_proc_client_cfg cfg = {
        .host = st->host,
        .what = what,
        .open = open_channel,
        .ctx = sb,
        .request_timeout_ms = st->cfg.request_timeout_ms,
        .default_buffer = st->cfg.process_buffer,
    };
    cl = sbxp_proc_client_new(&cfg);
    if (!cl)
        return docker_error(st, call, SBX_E_NOMEM, "out of memory");
    struct sbxp_proc_client *none = NULL;
    if (!atomic_compare_exchange_strong(&sb->procs, &none, cl)) {
        sbxp_proc_client_free(cl); /* another thread was first */
        cl = none;
    }
    *out = cl;
    return SBX_OK;
}

void docker_procs_free(sbx_sandbox *sb)
{
    sbxp_proc_client_free(atomic_exchange(&sb->procs, NULL));
}

int docker_proc_start(sbx_sandbox *sb, sbx_call *call, const struct sbx_proc_spec *spec,
                      char id[SBX_PROC_ID_MAX])
{
    struct sbxp_proc_client *cl;
    int rc = client(sb, call, "proc_start", &cl);
    return rc != SBX_OK ? rc : sbxp_proc_start(cl, call, docker_call_user(sb->st, call), spec, id);
}

int docker_proc_write(sbx_sandbox *sb, sbx_call *call, const char *id, const void *data,
                      size_t len, uint32_t flags)
{
    struct sbxp_proc_client *cl;
    int rc = client(sb, call, "proc_write", &cl);
    return rc != SBX_OK ? rc : sbxp_proc_write(cl, call, id, data, len, flags);
}

int docker_proc_read(sbx_sandbox *sb, sbx_call *call, const char *id,
                     const struct sbx_proc_read_args *args, struct sbx_proc_read_result *res)
{
    struct sbxp_proc_client *cl;
    int rc = client(sb, call, "proc_read", &cl);
    return rc != SBX_OK ? rc : sbxp_proc_read(cl, call, id, args, res);
}

int docker_proc_signal(sbx_sandbox *sb, sbx_call *call, const char *id, int signo)
{
    struct sbxp_proc_client *cl;
    int rc = client(sb, call, "proc_signal", &cl);
    return rc != SBX_OK ? rc : sbxp_proc_signal(cl, call, id, signo);
}

int docker_proc_list(sbx_sandbox *sb, sbx_call *call, const struct sbx_proc_list_sink *sink)
{
    struct sbxp_proc_client *cl;
    int rc = client(sb, call, "proc_list", &cl);
    return rc != SBX_OK ? rc : sbxp_proc_list(cl, call, sink);
}

int docker_proc_resize(sbx_sandbox *sb, sbx_call *call, const char *id, uint16_t rows,
                       uint16_t cols)
{
    struct sbxp_proc_client *cl;
    int rc = client(sb, call, "proc_resize", &cl);
    return rc != SBX_OK ? rc : sbxp_proc_resize(cl, call, id, rows, cols);
}
