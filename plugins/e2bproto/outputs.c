/*
 * outputs.c - OUTPUT_EXPORT: /mnt/session/outputs, made at create (as
 * root, sticky and world-writable like /tmp so that the sandbox user can
 * write it whatever its uid), exported as a tar made in the sandbox by tar
 * and streamed out of the command's stdout unchanged. Validating the
 * archive (symlinks, hard links, devices, "..") is the host's job
 * (sbx_export_to_dir), as for docker. See e2b_core.h.
 */
#include "e2b_core.h"

#include <string.h>

int e2b_outputs_prepare(sbx_sandbox *sb, sbx_call *call)
{
    struct e2b_state *st = sb->st;
    const char *argv[] = {"sh", "-c",
                          "mkdir -p " E2B_OUTPUTS " && chmod 1777 " E2B_OUTPUTS, NULL};
    char msg[256];
    int code = -1;
    int rc = e2b_exec_helper_as(sb, call, "root", "/", argv, NULL, 30000, &code, msg,
                                sizeof msg);
    if (rc != SBX_OK)
        return rc;
    if (code != 0)
        return e2b_error(st, call, SBX_E_IO, "%s: creating %s in sandbox %s: exit %d: %s",
                         st->cfg.provider, E2B_OUTPUTS, sb->id, code, msg);
    return SBX_OK;
}

struct relay {
    const struct sbx_sink *sink;
    int status;
};

static int relay_write(void *ctx, const void *buf, size_t len)
{
    struct relay *r = ctx;
    int s = r->sink && r->sink->write ? r->sink->write(r->sink->ctx, buf, len) : 0;
    if (s != 0)
        r->status = s;
    return s;
}

int e2b_export_outputs(sbx_sandbox *sb, sbx_call *call, const struct sbx_sink *tar_sink)
{
    struct e2b_state *st = sb->st;
    /* "." as the only member: entries come out as "./a", "./sub/b". */
    const char *argv[] = {"tar", "-C", E2B_OUTPUTS, "-cf", "-", ".", NULL};
    struct relay r = {tar_sink, 0};
    e2b_keep_alive(sb, call);
    struct sbx_sink sink = SBX_SINK_INIT(&r, relay_write);
    char msg[512];
    int code = -1;
    int rc = e2b_exec_helper_as(sb, call, NULL, "/", argv, &sink, 0, &code, msg, sizeof msg);
    if (rc != SBX_OK)
        return rc; /* reported (a sink's stop by the sink) */
    if (code != 0)
        return e2b_error(st, call, SBX_E_IO, "%s: exporting %s of sandbox %s: tar exit %d: %s",
                         st->cfg.provider, E2B_OUTPUTS, sb->id, code, msg);
    return SBX_OK;
}
