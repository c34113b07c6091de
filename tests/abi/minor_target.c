/*
 * minor_target.c - a provider that uses nothing newer than ABI 1.0, built
 * by target_minor.sh against a simulated newer header, with and without
 * -DSBX_ABI_TARGET_MINOR=0.
 *
 * It never names a member a later minor appended, so the same source is a
 * valid 1.0 provider whatever header it is compiled with; only the minor
 * its descriptor claims (SBX_ABI_TARGET_MINOR, by default the header's)
 * decides which hosts accept it. The ops keep a state and answer, but make
 * no sandboxes: the test is about the handshake.
 *
 * With -DTARGETED_CAPS_1_2 it also declares the ABI 1.2 capabilities
 * (processes, pty, file_ops, ports) and fills their ops: a descriptor that
 * claims minor 2 must then load, one that claims minor 1 must be refused.
 */
#include <sbx/provider.h>

#include <stdlib.h>

struct targeted {
    const struct sbx_host *host;
};

static int t_init(const struct sbx_host *host, sbx_call *call, void **state)
{
    struct targeted *t = malloc(sizeof *t);
    if (!t)
        return host->set_error(host, call, SBX_E_NOMEM, "targeted: out of memory");
    t->host = host;
    *state = t;
    return SBX_OK;
}

static void t_fini(void *state)
{
    free(state);
}

static int t_create(void *state, sbx_call *call, const struct sbx_create_args *args,
                    char *ref, sbx_sandbox **out)
{
    const struct sbx_host *host = ((struct targeted *)state)->host;
    (void)args;
    (void)ref;
    (void)out;
    return host->set_error(host, call, SBX_E_UNSUPPORTED, "targeted makes no sandboxes");
}

static int t_attach(void *state, sbx_call *call, const struct sbx_attach_args *args,
                    sbx_sandbox **out)
{
    const struct sbx_host *host = ((struct targeted *)state)->host;
    (void)out;
    return host->set_error(host, call, SBX_E_NOT_FOUND, "targeted has no sandbox %s",
                           args->ref);
}

/* No handle is ever produced, so the handle ops are unreachable. */
static int t_exec(sbx_sandbox *sb, sbx_call *call, const struct sbx_exec_args *args,
                  struct sbx_exec_result *res)
{
    (void)sb;
    (void)call;
    (void)args;
    (void)res;
    return SBX_E_UNSUPPORTED;
}

static int t_read_file(sbx_sandbox *sb, sbx_call *call, const char *path,
                       const struct sbx_sink *sink)
{
    (void)sb;
    (void)call;
    (void)path;
    (void)sink;
    return SBX_E_UNSUPPORTED;
}

static int t_write_file(sbx_sandbox *sb, sbx_call *call, const char *path,
                        const struct sbx_source *src, unsigned mode)
{
    (void)sb;
    (void)call;
    (void)path;
    (void)src;
    (void)mode;
    return SBX_E_UNSUPPORTED;
}

static const char *t_root(sbx_sandbox *sb)
{
    (void)sb;
    return "/";
}

static void t_release(sbx_sandbox *sb)
{
    (void)sb;
}

static int t_destroy(void *state, sbx_call *call, const struct sbx_destroy_args *args)
{
    (void)state;
    (void)call;
    (void)args;
    return SBX_OK;
}

#ifdef TARGETED_CAPS_1_2
/* Unreachable as well: no handle. */
static int t_proc_start(sbx_sandbox *sb, sbx_call *call, const struct sbx_proc_spec *spec,
                        char id[SBX_PROC_ID_MAX])
{
    (void)sb, (void)call, (void)spec, (void)id;
    return SBX_E_UNSUPPORTED;
}

static int t_proc_write(sbx_sandbox *sb, sbx_call *call, const char *id, const void *data,
                        size_t len, uint32_t flags)
{
    (void)sb, (void)call, (void)id, (void)data, (void)len, (void)flags;
    return SBX_E_UNSUPPORTED;
}

static int t_proc_read(sbx_sandbox *sb, sbx_call *call, const char *id,
                       const struct sbx_proc_read_args *args,
                       struct sbx_proc_read_result *res)
{
    (void)sb, (void)call, (void)id, (void)args, (void)res;
    return SBX_E_UNSUPPORTED;
}

static int t_proc_signal(sbx_sandbox *sb, sbx_call *call, const char *id, int signo)
{
    (void)sb, (void)call, (void)id, (void)signo;
    return SBX_E_UNSUPPORTED;
}

static int t_proc_list(sbx_sandbox *sb, sbx_call *call,
                       const struct sbx_proc_list_sink *sink)
{
    (void)sb, (void)call, (void)sink;
    return SBX_E_UNSUPPORTED;
}

static int t_proc_resize(sbx_sandbox *sb, sbx_call *call, const char *id, uint16_t rows,
                         uint16_t cols)
{
    (void)sb, (void)call, (void)id, (void)rows, (void)cols;
    return SBX_E_UNSUPPORTED;
}

static int t_file_list(sbx_sandbox *sb, sbx_call *call, const char *path,
                       const struct sbx_file_list_sink *sink)
{
    (void)sb, (void)call, (void)path, (void)sink;
    return SBX_E_UNSUPPORTED;
}

static int t_file_stat(sbx_sandbox *sb, sbx_call *call, const char *path,
                       struct sbx_file_info *out)
{
    (void)sb, (void)call, (void)path, (void)out;
    return SBX_E_UNSUPPORTED;
}

static int t_file_mkdir(sbx_sandbox *sb, sbx_call *call, const char *path, unsigned mode,
                        uint32_t flags)
{
    (void)sb, (void)call, (void)path, (void)mode, (void)flags;
    return SBX_E_UNSUPPORTED;
}

static int t_file_remove(sbx_sandbox *sb, sbx_call *call, const char *path, uint32_t flags)
{
    (void)sb, (void)call, (void)path, (void)flags;
    return SBX_E_UNSUPPORTED;
}

static int t_file_rename(sbx_sandbox *sb, sbx_call *call, const char *from, const char *to,
                         uint32_t flags)
{
    (void)sb, (void)call, (void)from, (void)to, (void)flags;
    return SBX_E_UNSUPPORTED;
}

static int t_port_resolve(sbx_sandbox *sb, sbx_call *call, uint16_t port,
                          struct sbx_port_endpoint *out)
{
    (void)sb, (void)call, (void)port, (void)out;
    return SBX_E_UNSUPPORTED;
}

#define T_CAPS (SBX_CAP_PROCESSES | SBX_CAP_PTY | SBX_CAP_FILE_OPS | SBX_CAP_PORTS)
#else
#define T_CAPS 0
#endif

static const struct sbx_provider_ops t_ops = {
    .init = t_init,
    .fini = t_fini,
    .create = t_create,
    .attach = t_attach,
    .exec = t_exec,
    .read_file = t_read_file,
    .write_file = t_write_file,
    .root = t_root,
    .release = t_release,
    .destroy = t_destroy,
#ifdef TARGETED_CAPS_1_2
    .proc_start = t_proc_start,
    .proc_write = t_proc_write,
    .proc_read = t_proc_read,
    .proc_signal = t_proc_signal,
    .proc_list = t_proc_list,
    .proc_resize = t_proc_resize,
    .file_list = t_file_list,
    .file_stat = t_file_stat,
    .file_mkdir = t_file_mkdir,
    .file_remove = t_file_remove,
    .file_rename = t_file_rename,
    .port_resolve = t_port_resolve,
#endif
};

SBX_PROVIDER_DEFINE("targeted", "1.0.0", "a 1.0 provider built against a newer header",
                    SBX_ISOLATION_NONE, T_CAPS, &t_ops, NULL)
