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
};

SBX_PROVIDER_DEFINE("targeted", "1.0.0", "a 1.0 provider built against a newer header",
                    SBX_ISOLATION_NONE, 0, &t_ops, NULL)
