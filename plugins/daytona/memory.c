/*
 * memory.c - memory stores (SBX_CAP_MEMORY) for daytona: the shared
 * remote-memory helper (plugins/common/remote_memory.c) driven through the
 * toolbox. Commands run as the sandbox's user (the toolbox has no other);
 * daytona_exec_helper's stdout is byte-exact, so the listing and the archive of
 * changed files are read from it. Attachments and baselines live in
 * <state_dir>/<sandbox id>/.
 */
#include "daytona.h"

static int mem_run(void *ctx, sbx_call *call, const char *const *argv,
                   const struct sbx_sink *out, int64_t timeout_ms, int *code, char *msg,
                   size_t cap)
{
    return daytona_exec_helper(ctx, call, "/", argv, out, timeout_ms, code, msg, cap);
}

static int mem_upload(void *ctx, sbx_call *call, const char *abs, const struct sbx_source *src,
                      const char *what)
{
    sbxp_http_error err;
    if (daytona_tb_upload(ctx, call, abs, src, &err) == SBX_OK)
        return SBX_OK;
    return err.from_callback ? err.status : daytona_tb_report(ctx, call, &err, "%s", what);
}

/* The toolbox's file calls run as root, commands as the sandbox's user:
 * the root of the trees is made by the toolbox, writable by that user. */
static const struct sbxp_rmem_ops mem_ops = {
    .run = mem_run, .upload = mem_upload, .download = NULL, .shared_root = 1, .keep_alive = NULL};

int daytona_memory_setup(sbx_sandbox *sb, sbx_call *call, const struct sbx_create_args *args)
{
    struct daytona_state *st = sb->st;
    sbxp_rmem_init(&sb->mem, st->host, DT, st->cfg.state_dir, sb->id, &mem_ops, sb);
    if (!args)
        return sbxp_rmem_open(&sb->mem, call);
    if (args->size >= SBX_CREATE_ARGS_SIZE_MEMORY_1_1 && args->memory && args->memory[0]) {
        int rc = daytona_shared_dir(sb, call, SBXP_RMEM_ROOT, 0777);
        if (rc != SBX_OK)
            return rc;
    }
    return sbxp_rmem_create(&sb->mem, call, args);
}

SBXP_RMEM_DEFINE_OPS(daytona, mem)
