/*
 * yield_fake.c - a provider whose processes are scripted, for the tests of
 * libsbx's yield calls (test_cli_yield.c): deterministic output, a replay
 * buffer of the spec's size, reads that hand back at most a chunk, and a
 * stdin that echoes to stdout. Nothing runs.
 *
 *   argv = {"fake", OUT, ERR, STATE, CHUNK}
 *     OUT, ERR  bytes the process has written to stdout / stderr at start
 *               (byte i of a stream is 'a' + i % 26)
 *     STATE     "run" (never ends) or "exit:N" (ended with status N)
 *     CHUNK     at most this many bytes per stream per read (0: no limit)
 *   argv[0] "missing" fails as a command that does not exist.
 *
 * Bytes written to stdin are appended to stdout. A read with nothing to
 * give and the process running sleeps wait_ms (as a real provider waits).
 */
#include <sbx/provider.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_PROCS 16
#define ECHO_MAX 65536

struct fake_proc {
    char id[16];
    uint64_t out_total, err_total, buffer;
    uint64_t chunk;
    int running, exit_code;
    char echo[ECHO_MAX]; /* stdin bytes, appended to stdout after out_total */
    size_t echo_len;
};

struct sbx_sandbox {
    const struct sbx_host *host;
    pthread_mutex_t mu;
    struct fake_proc procs[MAX_PROCS];
    int nprocs;
};

struct fake_state {
    const struct sbx_host *host;
};

static int fake_init(const struct sbx_host *host, sbx_call *call, void **state)
{
    (void)call;
    struct fake_state *st = calloc(1, sizeof *st);
    if (!st)
        return SBX_E_NOMEM;
    st->host = host;
    *state = st;
    return SBX_OK;
}

static void fake_fini(void *state)
{
    free(state);
}

static int new_sandbox(struct fake_state *st, sbx_sandbox **out)
{
    sbx_sandbox *sb = calloc(1, sizeof *sb);
    if (!sb)
        return SBX_E_NOMEM;
    sb->host = st->host;
    pthread_mutex_init(&sb->mu, NULL);
    *out = sb;
    return SBX_OK;
}

static int fake_create(void *state, sbx_call *call, const struct sbx_create_args *args,
                       char *ref, sbx_sandbox **out)
{
    (void)call;
    (void)args;
    snprintf(ref, SBX_REF_MAX, "fake-1");
    return new_sandbox(state, out);
}

static int fake_attach(void *state, sbx_call *call, const struct sbx_attach_args *args,
                       sbx_sandbox **out)
{
    (void)call;
    (void)args;
    return new_sandbox(state, out);
}

static int fake_destroy(void *state, sbx_call *call, const struct sbx_destroy_args *args)
{
    (void)state;
    (void)call;
    (void)args;
    return SBX_OK;
}

static int fake_exec(sbx_sandbox *sb, sbx_call *call, const struct sbx_exec_args *args,
                     struct sbx_exec_result *res)
{
    (void)args;
    (void)res;
    return sb->host->set_error(sb->host, call, SBX_E_UNSUPPORTED, "fake: no exec");
}

static int fake_read_file(sbx_sandbox *sb, sbx_call *call, const char *path,
                          const struct sbx_sink *sink)
{
    (void)path;
    (void)sink;
    return sb->host->set_error(sb->host, call, SBX_E_UNSUPPORTED, "fake: no files");
}

static int fake_write_file(sbx_sandbox *sb, sbx_call *call, const char *path,
                           const struct sbx_source *src, unsigned mode)
{
    (void)path;
    (void)src;
    (void)mode;
    return sb->host->set_error(sb->host, call, SBX_E_UNSUPPORTED, "fake: no files");
}

static const char *fake_root(sbx_sandbox *sb)
{
    (void)sb;
    return "/";
}

static void fake_release(sbx_sandbox *sb)
{
    pthread_mutex_destroy(&sb->mu);
    free(sb);
}

static struct fake_proc *find(sbx_sandbox *sb, const char *id)
{
    for (int i = 0; i < sb->nprocs; i++)
        if (!strcmp(sb->procs[i].id, id))
            return &sb->procs[i];
    return NULL;
}

static int fake_proc_start(sbx_sandbox *sb, sbx_call *call, const struct sbx_proc_spec *spec,
                           char id[SBX_PROC_ID_MAX])
{
    const char *const *a = spec->argv;
    if (!strcmp(a[0], "missing"))
        return sb->host->set_error(sb->host, call, SBX_E_NO_COMMAND,
                                   "fake: no command \"missing\"");
    if (!a[1] || !a[2] || !a[3] || !a[4])
        return sb->host->set_error(sb->host, call, SBX_E_INVALID,
                                   "fake: argv is fake OUT ERR STATE CHUNK");
    pthread_mutex_lock(&sb->mu);
    if (sb->nprocs == MAX_PROCS) {
        pthread_mutex_unlock(&sb->mu);
        return sb->host->set_error(sb->host, call, SBX_E_UNAVAILABLE, "fake: full");
    }
    struct fake_proc *p = &sb->procs[sb->nprocs];
    memset(p, 0, sizeof *p);
    snprintf(p->id, sizeof p->id, "fp-%d", sb->nprocs + 1);
    sb->nprocs++;
    p->out_total = strtoull(a[1], NULL, 10);
    p->err_total = strtoull(a[2], NULL, 10);
    p->running = strcmp(a[3], "run") == 0;
    p->exit_code = p->running ? 0 : atoi(a[3] + 5);
    p->chunk = strtoull(a[4], NULL, 10);
    p->buffer = spec->buffer_bytes ? spec->buffer_bytes : SBX_PROC_BUFFER_DEFAULT;
    snprintf(id, SBX_PROC_ID_MAX, "%s", p->id);
    pthread_mutex_unlock(&sb->mu);
    return SBX_OK;
}

static int fake_proc_write(sbx_sandbox *sb, sbx_call *call, const char *id,
                           const void *data, size_t len, uint32_t flags)
{
    (void)flags;
    pthread_mutex_lock(&sb->mu);
    struct fake_proc *p = find(sb, id);
    int rc = SBX_OK;
    if (!p)
        rc = sb->host->set_error(sb->host, call, SBX_E_NOT_FOUND, "fake: no process %s", id);
    else if (!p->running)
        rc = sb->host->set_error(sb->host, call, SBX_E_INVALID, "fake: %s ended", id);
    else if (p->echo_len + len > ECHO_MAX)
        rc = sb->host->set_error(sb->host, call, SBX_E_NOMEM, "fake: echo full");
    else {
        memcpy(p->echo + p->echo_len, data, len);
        p->echo_len += len;
    }
    pthread_mutex_unlock(&sb->mu);
    return rc;
}

/* Deliver stream bytes [from, end) to sink, at most max, in pieces of 4 KiB. */
static int deliver(const struct fake_proc *p, bool is_out, uint64_t *cursor, uint64_t end,
                   uint64_t max, const struct sbx_sink *sink, uint64_t *lost)
{
    uint64_t oldest = end > p->buffer ? end - p->buffer : 0;
    *lost = 0;
    if (*cursor < oldest) {
        *lost = oldest - *cursor;
        *cursor = oldest;
    }
    uint64_t n = end - *cursor;
    if (n > max)
        n = max;
    if (p->chunk && n > p->chunk)
        n = p->chunk;
    char buf[4096];
    while (n > 0) {
        size_t k = n > sizeof buf ? sizeof buf : (size_t)n;
        for (size_t i = 0; i < k; i++) {
            uint64_t pos = *cursor + i;
            buf[i] = is_out && pos >= p->out_total ? p->echo[pos - p->out_total]
                                                    : (char)('a' + pos % 26);
        }
        if (sink) {
            int rc = sink->write(sink->ctx, buf, k);
            if (rc)
                return rc;
        }
        *cursor += k;
        n -= k;
    }
    return SBX_OK;
}

static int fake_proc_read(sbx_sandbox *sb, sbx_call *call, const char *id,
                          const struct sbx_proc_read_args *args,
                          struct sbx_proc_read_result *res)
{
    pthread_mutex_lock(&sb->mu);
    struct fake_proc *p = find(sb, id);
    if (!p) {
        pthread_mutex_unlock(&sb->mu);
        return sb->host->set_error(sb->host, call, SBX_E_NOT_FOUND, "fake: no process %s",
                                   id);
    }
    uint64_t out_end = p->out_total + p->echo_len, err_end = p->err_total;
    bool nothing = args->out_cursor >= out_end && args->err_cursor >= err_end;
    if (nothing && p->running) {
        pthread_mutex_unlock(&sb->mu);
        struct timespec ts = {args->wait_ms / 1000, (long)(args->wait_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&sb->mu);
        out_end = p->out_total + p->echo_len;
    }
    uint64_t oc = args->out_cursor, ec = args->err_cursor;
    int rc = deliver(p, true, &oc, out_end, args->max_bytes, args->out, &res->out_lost);
    if (rc == SBX_OK)
        rc = deliver(p, false, &ec, err_end, args->max_bytes, args->err, &res->err_lost);
    res->out_cursor = oc;
    res->err_cursor = ec;
    res->state = p->running ? SBX_PROC_RUNNING : SBX_PROC_EXITED;
    res->exit_code = p->exit_code;
    res->eof = !p->running && oc == out_end && ec == err_end;
    pthread_mutex_unlock(&sb->mu);
    return rc;
}

static int fake_proc_signal(sbx_sandbox *sb, sbx_call *call, const char *id, int signo)
{
    pthread_mutex_lock(&sb->mu);
    struct fake_proc *p = find(sb, id);
    if (p && p->running) {
        p->running = 0;
        p->exit_code = -1;
    }
    pthread_mutex_unlock(&sb->mu);
    (void)signo;
    return p ? SBX_OK
             : sb->host->set_error(sb->host, call, SBX_E_NOT_FOUND, "fake: no process %s",
                                   id);
}

static int fake_proc_list(sbx_sandbox *sb, sbx_call *call,
                          const struct sbx_proc_list_sink *sink)
{
    (void)call;
    pthread_mutex_lock(&sb->mu);
    int rc = SBX_OK;
    for (int i = 0; i < sb->nprocs && rc == SBX_OK; i++) {
        struct sbx_proc_info info;
        memset(&info, 0, sizeof info);
        info.size = sizeof info;
        info.id = sb->procs[i].id;
        info.command = "fake";
        info.state = sb->procs[i].running ? SBX_PROC_RUNNING : SBX_PROC_EXITED;
        info.exit_code = sb->procs[i].exit_code;
        rc = sink->entry(sink->ctx, &info);
    }
    pthread_mutex_unlock(&sb->mu);
    return rc;
}

static const struct sbx_provider_ops fake_ops = {
    .init = fake_init,
    .fini = fake_fini,
    .create = fake_create,
    .attach = fake_attach,
    .exec = fake_exec,
    .read_file = fake_read_file,
    .write_file = fake_write_file,
    .root = fake_root,
    .release = fake_release,
    .destroy = fake_destroy,
    .proc_start = fake_proc_start,
    .proc_write = fake_proc_write,
    .proc_read = fake_proc_read,
    .proc_signal = fake_proc_signal,
    .proc_list = fake_proc_list,
};

SBX_PROVIDER_DEFINE("yieldfake", "0.1.0", "scripted processes for the yield tests",
                    SBX_ISOLATION_NONE, SBX_CAP_PROCESSES, &fake_ops, NULL)
