/*
 * procs.c - the process ops of the `local` provider (SBX_CAP_PROCESSES,
 * SBX_CAP_PTY): proc_start .. proc_resize, spoken to the sandbox's
 * supervisor (supervisor.c, sup_main.c) through the shared process client
 * (plugins/common/proc_client.h).
 *
 * A handle keeps two clients, each with its own cached channels: one for
 * proc_start, whose channels start a supervisor when none runs, and one
 * for every other op, which never does (an id asked of a sandbox without
 * a supervisor is unknown: SBX_E_NOT_FOUND). Both are made on first use,
 * under the handle's lock.
 */
#include "local.h"

#include "proc_client.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct local_procs {
    pthread_mutex_t lock;
    struct local_channel_ctx {
        sbx_sandbox *sb;
        int start;
        atomic_uint opens; /* channels opened (or tried) so far */
    } ctx[2];
    struct sbxp_proc_client *cl[2]; /* [0]: never starts; [1]: starts */
};

/* The open callback of the process client: connect to the supervisor
 * (starting one for a start), authenticate it, and open the channel. */
static int channel_open(void *ctx, sbx_call *call, int64_t deadline, int *fd)
{
    struct local_channel_ctx *c = ctx;
    const struct sbx_host *host = c->sb->st->host;
    atomic_fetch_add(&c->opens, 1);
    int rc = SBX_OK;
    int s = local_sup_connect(c->sb, call, c->start, &rc);
    if (s < 0)
        return rc;
    char msg[256];
    if (sbxp_proc_handshake(s, deadline, msg, sizeof msg) != 0) {
        close(s);
        return host->set_error(host, call, SBX_E_UNAVAILABLE,
                               "local: the process supervisor of '%s': %s", c->sb->path, msg);
    }
    *fd = s;
    return SBX_OK;
}

int local_procs_init(sbx_sandbox *sb)
{
    struct local_procs *p = calloc(1, sizeof *p);
    if (p == NULL)
        return -1;
    pthread_mutex_init(&p->lock, NULL);
    for (int i = 0; i < 2; i++) {
        p->ctx[i].sb = sb;
        p->ctx[i].start = i;
        atomic_init(&p->ctx[i].opens, 0);
    }
    sb->procs = p;
    return 0;
}

void local_procs_free(sbx_sandbox *sb)
{
    struct local_procs *p = sb->procs;
    if (p == NULL)
        return;
    for (int i = 1; i >= 0; i--) /* the start client refers to the other */
        if (p->cl[i] != NULL)
            sbxp_proc_client_free(p->cl[i]);
    pthread_mutex_destroy(&p->lock);
    free(p);
    sb->procs = NULL;
}

/* The client (start: the one whose channels start a supervisor), or NULL
 * with the error set. */
static struct sbxp_proc_client *client(sbx_sandbox *sb, sbx_call *call, int start)
{
    const struct sbx_host *host = sb->st->host;
    struct local_procs *p = sb->procs;
    pthread_mutex_lock(&p->lock);
    /* the start client keeps what it learns of a process (its first read)
     * with the other, which reads it: that one first */
    for (int i = 0; i <= start; i++) {
        if (p->cl[i] != NULL)
            continue;
        char what[SBX_REF_MAX + 64];
        snprintf(what, sizeof what, "local: the process supervisor of '%s'", sb->path);
        struct sbxp_proc_client_cfg cfg = {
            .host = host,
            .what = what,
            .open = channel_open,
            .ctx = &p->ctx[i],
            .request_timeout_ms = sb->st->supervisor_timeout_ms,
            .default_buffer = sb->st->process_buffer,
            .reads = i ? p->cl[0] : NULL,
        };
        if (i && !p->cl[0])
            break; /* out of memory */
        p->cl[i] = sbxp_proc_client_new(&cfg);
    }
    struct sbxp_proc_client *cl = p->cl[start];
    pthread_mutex_unlock(&p->lock);
    if (cl == NULL)
        host->set_error(host, call, SBX_E_NOMEM, "local: out of memory");
    return cl;
}

int local_proc_start(sbx_sandbox *sb, sbx_call *call, const struct sbx_proc_spec *spec,
                     char id[SBX_PROC_ID_MAX])
{
    struct sbxp_proc_client *cl = client(sb, call, 1);
    if (cl == NULL)
        return SBX_E_NOMEM;
    unsigned opens = atomic_load(&sb->procs->ctx[1].opens);
    int rc = sbxp_proc_start(cl, call, NULL, spec, id);
    if (rc == SBX_E_UNAVAILABLE && atomic_load(&sb->procs->ctx[1].opens) == opens) {
        /* a cached channel to a supervisor that has ended (killed, or
         * idle) broke: nothing was started by it; once more on a new one,
         * which starts a new supervisor. (A new channel that failed is
         * not tried again.) */
        sbxp_proc_client_reset(cl);
        rc = sbxp_proc_start(cl, call, NULL, spec, id);
    }
    return rc;
}

/* A channel broke (the supervisor ended): the call reports it; the next
 * one opens a new channel instead of finding the dead one cached. */
static int broken(struct sbxp_proc_client *cl, int rc)
{
    if (rc == SBX_E_UNAVAILABLE)
        sbxp_proc_client_reset(cl);
    return rc;
}

int local_proc_write(sbx_sandbox *sb, sbx_call *call, const char *id, const void *data,
                     size_t len, uint32_t flags)
{
    struct sbxp_proc_client *cl = client(sb, call, 0);
    return cl == NULL ? SBX_E_NOMEM : broken(cl, sbxp_proc_write(cl, call, id, data, len, flags));
}

int local_proc_read(sbx_sandbox *sb, sbx_call *call, const char *id,
                    const struct sbx_proc_read_args *args, struct sbx_proc_read_result *res)
{
    struct sbxp_proc_client *cl = client(sb, call, 0);
    return cl == NULL ? SBX_E_NOMEM : broken(cl, sbxp_proc_read(cl, call, id, args, res));
}

int local_proc_signal(sbx_sandbox *sb, sbx_call *call, const char *id, int signo)
{
    struct sbxp_proc_client *cl = client(sb, call, 0);
    return cl == NULL ? SBX_E_NOMEM : broken(cl, sbxp_proc_signal(cl, call, id, signo));
}

int local_proc_resize(sbx_sandbox *sb, sbx_call *call, const char *id, uint16_t rows,
                      uint16_t cols)
{
    struct sbxp_proc_client *cl = client(sb, call, 0);
    return cl == NULL ? SBX_E_NOMEM : broken(cl, sbxp_proc_resize(cl, call, id, rows, cols));
}

/* A sandbox without a supervisor has no process (list takes no id, so
 * its only SBX_E_NOT_FOUND is that). */
int local_proc_list(sbx_sandbox *sb, sbx_call *call, const struct sbx_proc_list_sink *sink)
{
    struct sbxp_proc_client *cl = client(sb, call, 0);
    if (cl == NULL)
        return SBX_E_NOMEM;
    int rc = broken(cl, sbxp_proc_list(cl, call, sink));
    return rc == SBX_E_NOT_FOUND ? SBX_OK : rc;
}
