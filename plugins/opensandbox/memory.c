/*
 * memory.c - memory stores (SBX_CAP_MEMORY) for opensandbox: the shared
 * remote-memory helper (plugins/common/remote_memory.c) driven through
 * execd. Commands run as execd's user (root in a real sandbox); their
 * output events are JSON text, so what must arrive byte-exact (the tree's
 * listing, the archive of changed files) is written to a file and fetched
 * with GET /files/download. Attachments and baselines live in
 * <state_dir>/<sandbox id>/.
 */
#include "osb.h"

static int mem_run(void *ctx, sbx_call *call, const char *const *argv,
                   const struct sbx_sink *out, int64_t timeout_ms, int *code, char *msg,
                   size_t cap)
{
    return osb_helper(ctx, call, argv, out, timeout_ms, code, msg, cap);
}

static int mem_upload(void *ctx, sbx_call *call, const char *abs, const struct sbx_source *src,
                      const char *what)
{
    sbxp_http_error err;
    if (osb_upload(ctx, call, abs, 0600, src, &err) == SBX_OK)
        return SBX_OK;
    return err.from_callback ? err.status : osb_service_report(ctx, call, &err, "%s", what);
}

static int mem_download(void *ctx, sbx_call *call, const char *abs, const struct sbx_sink *sink,
                        const char *what)
{
    return osb_download(ctx, call, abs, what, sink);
}

static void mem_keep_alive(void *ctx, sbx_call *call)
{
    osb_keep_alive(ctx, call);
}

static const struct sbxp_rmem_ops mem_ops = {.run = mem_run,
                                            .upload = mem_upload,
                                            .download = mem_download,
                                            .shared_root = 0,
                                            .keep_alive = mem_keep_alive};

int osb_memory_create(sbx_sandbox *sb, sbx_call *call, const struct sbx_create_args *args)
{
    sbxp_rmem_init(&sb->mem, sb->st->host, OSB_PROVIDER, sb->st->cfg.state_dir, sb->id,
                   &mem_ops, sb);
    return sbxp_rmem_create(&sb->mem, call, args);
}

int osb_memory_open(sbx_sandbox *sb, sbx_call *call)
{
    sbxp_rmem_init(&sb->mem, sb->st->host, OSB_PROVIDER, sb->st->cfg.state_dir, sb->id,
                   &mem_ops, sb);
    return sbxp_rmem_open(&sb->mem, call);
}

SBXP_RMEM_DEFINE_OPS(osb, mem)
