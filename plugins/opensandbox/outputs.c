/*
 * outputs.c - OUTPUT_EXPORT: /mnt/session/outputs, made at create (sticky
 * and world-writable like /tmp, so that the command user can write it).
 * Export makes the tar in the sandbox (execd's output events are text, so
 * a binary archive cannot travel through them), downloads it streamed and
 * removes it. Validating the archive (links, devices, "..") is the host's
 * job, as for the other providers. See osb.h.
 */
#include "osb.h"

#include <stdio.h>
#include <string.h>
#include <sys/random.h>

int osb_outputs_prepare(sbx_sandbox *sb, sbx_call *call)
{
    char msg[256];
    int code = -1;
    int rc = osb_sh(sb, call, "mkdir -p " OSB_OUTPUTS " && chmod 1777 " OSB_OUTPUTS, NULL, 30000,
                    &code, msg, sizeof msg);
    if (rc == SBX_OK && code != 0)
        rc = osb_error(sb->st, call, SBX_E_IO, "opensandbox: creating %s in sandbox %s: exit %d: %s",
                       OSB_OUTPUTS, sb->id, code, msg);
    return rc;
}

int osb_export_outputs(sbx_sandbox *sb, sbx_call *call, const struct sbx_sink *tar_sink)
{
    unsigned char r[8];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
        return osb_error(sb->st, call, SBX_E_IO, "opensandbox: export: no randomness");
    char tar[96], text[256];
    snprintf(tar, sizeof tar, "/tmp/.sbx-export-%02x%02x%02x%02x%02x%02x%02x%02x.tar", r[0], r[1],
             r[2], r[3], r[4], r[5], r[6], r[7]);
    /* "." as the only member: entries come out as "./a", "./sub/b". */
    snprintf(text, sizeof text, "exec tar -C " OSB_OUTPUTS " -cf '%s' .", tar);
    char msg[512];
    int code = -1;
    int rc = osb_sh(sb, call, text, NULL, 0, &code, msg, sizeof msg);
    if (rc == SBX_OK && code != 0)
        rc = osb_error(sb->st, call, SBX_E_IO, "opensandbox: exporting %s of sandbox %s: tar exit %d: %s",
                       OSB_OUTPUTS, sb->id, code, msg);
    if (rc == SBX_OK)
        rc = osb_download(sb, call, tar, "export_outputs", tar_sink);
    osb_remove(sb, NULL, tar);
    return rc;
}
