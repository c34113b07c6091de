/*
 * memory.c - memory stores (SBX_CAP_MEMORY) for e2b and cube: the shared
 * remote-memory helper (plugins/common/remote_memory.c) driven through
 * envd, commands run as root, files uploaded as root, stdout byte-exact.
 * Attachments and baselines live in <state_dir>/<sandbox id>/.
 */
#include "e2b_core.h"

static int mem_run(void *ctx, sbx_call *call, const char *const *argv,
                   const struct sbx_sink *out, int64_t timeout_ms, int *code, char *msg,
                   size_t cap)
{
    return e2b_exec_helper_as(ctx, call, "root", "/", argv, out, timeout_ms, code, msg, cap);
}

static int mem_upload(void *ctx, sbx_call *call, const char *abs, const struct sbx_source *src,
                      const char *what)
{
    sbxp_http_error err;
    int rc = e2b_files_upload(ctx, call, abs, "root", src, &err);
    return rc == SBX_OK ? SBX_OK : e2b_envd_report(ctx, call, &err, "%s", what);
}

static void mem_keep_alive(void *ctx, sbx_call *call)
{
    e2b_keep_alive(ctx, call);
}

static const struct sbxp_rmem_ops mem_ops = {
    .run = mem_run,
    .upload = mem_upload,
    .download = NULL,
    .shared_root = 0,
    .keep_alive = mem_keep_alive};

int e2b_root_script(sbx_sandbox *sb, sbx_call *call, const char *what,
                    const char *const *argv)
{
    struct sbxp_rmem m;
    sbxp_rmem_init(&m, sb->st->host, sb->st->cfg.provider, sb->st->cfg.state_dir, sb->id,
                   &mem_ops, sb);
    return sbxp_rmem_script(&m, call, what, argv);
}

static void mem_init(sbx_sandbox *sb)
{
    sbxp_rmem_free(&sb->mem);
    sbxp_rmem_init(&sb->mem, sb->st->host, sb->st->cfg.provider, sb->st->cfg.state_dir, sb->id,
                   &mem_ops, sb);
}

int e2b_memory_create(sbx_sandbox *sb, sbx_call *call, const struct sbx_create_args *args)
{
    mem_init(sb);
    return sbxp_rmem_create(&sb->mem, call, args);
}

int e2b_memory_open(sbx_sandbox *sb, sbx_call *call)
{
    mem_init(sb);
    return sbxp_rmem_open(&sb->mem, call);
}

void e2b_memory_forget(struct e2b_state *st, const char *id)
{
    sbxp_rmem_forget(st->host, st->cfg.provider, st->cfg.state_dir, id);
}

void e2b_memory_free(sbx_sandbox *sb)
{
    sbxp_rmem_free(&sb->mem);
}

SBXP_RMEM_DEFINE_OPS(e2b, mem)
