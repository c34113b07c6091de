/*
 * outputs.c - OUTPUT_EXPORT: /mnt/session/outputs, made at create through
 * the toolbox (its daemon may write /mnt, the sandbox user may not), else
 * by the sandbox user through sudo, and opened to every user, exported as a tar made in the sandbox by tar and
 * streamed out unchanged. Validating the archive (symlinks, hard links,
 * devices, "..") is the host's job, as for the other providers. See
 * daytona.h.
 */
#include "daytona.h"

#include <stdio.h>

/* $1 directory, $2 octal mode: as the sandbox user, else through sudo -n
 * (Daytona's images give their user passwordless sudo), owned by the
 * user in the end. */
static const char SHARED_DIR_SH[] =
    "{ mkdir -p \"$1\" && chmod \"$2\" \"$1\"; } 2>/dev/null || "
    "{ sudo -n mkdir -p \"$1\" && sudo -n chown \"$(id -u):$(id -g)\" \"$1\" && "
    "chmod \"$2\" \"$1\"; }";

int daytona_shared_dir(sbx_sandbox *sb, sbx_call *call, const char *abs, unsigned mode)
{
    sbxp_http_error err;
    int rc = daytona_tb_mkdir(sb, call, abs, mode, &err);
    if (rc == SBX_OK)
        rc = daytona_tb_chmod(sb, call, abs, mode, &err);
    if (rc == SBX_OK || rc == SBX_E_CANCELLED)
        return rc == SBX_OK ? SBX_OK : daytona_error(sb->st, call, rc, DT ": cancelled");
    /* The toolbox may run with no more rights than the sandbox user. */
    char first[SBXP_HTTP_MSG_MAX];
    snprintf(first, sizeof first, "%s", err.message);
    char m[8], msg[256];
    snprintf(m, sizeof m, "%04o", mode);
    const char *argv[] = {"sh", "-c", SHARED_DIR_SH, "sbx", abs, m, NULL};
    int code = -1;
    rc = daytona_exec_helper(sb, call, "/", argv, NULL, sb->st->cfg.request_timeout_ms, &code, msg,
                             sizeof msg);
    if (rc != SBX_OK)
        return rc;
    if (code != 0)
        return daytona_error(sb->st, call, SBX_E_IO,
                             DT ": creating %s in sandbox %s: the toolbox refused (%s) and so did "
                           "the sandbox user, with and without sudo (exit %d: %s)",
                        abs, sb->id, first, code, msg);
    return SBX_OK;
}

int daytona_outputs_prepare(sbx_sandbox *sb, sbx_call *call)
{
    return daytona_shared_dir(sb, call, DT_OUTPUTS, 0777);
}

int daytona_export_outputs(sbx_sandbox *sb, sbx_call *call, const struct sbx_sink *tar_sink)
{
    /* "." as the only member: entries come out as "./a", "./sub/b". */
    const char *argv[] = {"tar", "-C", DT_OUTPUTS, "-cf", "-", ".", NULL};
    char msg[512];
    int code = -1;
    int rc = daytona_exec_helper(sb, call, "/", argv, tar_sink, 0, &code, msg, sizeof msg);
    if (rc != SBX_OK)
        return rc; /* reported (a sink's stop by the sink) */
    if (code != 0)
        return daytona_error(sb->st, call, SBX_E_IO,
                             DT ": exporting %s of sandbox %s: tar exit %d: %s", DT_OUTPUTS, sb->id,
                             code, msg);
    return SBX_OK;
}
