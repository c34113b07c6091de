/*
 * outputs.c - OUTPUT_EXPORT: /mnt/session/outputs, made at create through
 * the toolbox (its daemon may write /mnt, the sandbox user may not) and
 * opened to every user, exported as a tar made in the sandbox by tar and
 * streamed out unchanged. Validating the archive (symlinks, hard links,
 * devices, "..") is the host's job, as for the other providers. See
 * daytona.h.
 */
#include "daytona.h"

int dt_outputs_prepare(sbx_sandbox *sb, sbx_call *call)
{
    sbx_http_error err;
    int rc = dt_tb_mkdir(sb, call, DT_OUTPUTS, 0777, &err);
    if (rc == SBX_OK)
        rc = dt_tb_chmod(sb, call, DT_OUTPUTS, 0777, &err);
    if (rc != SBX_OK)
        return dt_tb_report(sb, call, &err, "creating %s", DT_OUTPUTS);
    return SBX_OK;
}

int dt_export_outputs(sbx_sandbox *sb, sbx_call *call, const struct sbx_sink *tar_sink)
{
    /* "." as the only member: entries come out as "./a", "./sub/b". */
    const char *argv[] = {"tar", "-C", DT_OUTPUTS, "-cf", "-", ".", NULL};
    char msg[512];
    int code = -1;
    int rc = dt_exec_helper(sb, call, "/", argv, tar_sink, 0, &code, msg, sizeof msg);
    if (rc != SBX_OK)
        return rc; /* reported (a sink's stop by the sink) */
    if (code != 0)
        return dt_error(sb->st, call, SBX_E_IO, DT ": exporting %s of sandbox %s: tar exit %d: %s",
                        DT_OUTPUTS, sb->id, code, msg);
    return SBX_OK;
}
