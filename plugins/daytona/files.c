/*
 * files.c - read_file and write_file through the toolbox's
 * /files/download and /files/upload, streamed both ways. A write goes to
 * a temporary name beside the target (parents made first), gets its mode
 * and takes the target's name (/files/move for a new file, rename(2) in
 * the sandbox over an existing one: the toolbox's move does not replace),
 * so readers see the old content or the new, never a part; a failed write
 * removes the temporary.
 * See daytona.h.
 */
#include "daytona.h"

#include "hex.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int daytona_read_file(sbx_sandbox *sb, sbx_call *call, const char *path,
                      const struct sbx_sink *sink)
{
    struct daytona_state *st = sb->st;
    char *abs = NULL;
    int type;
    int rc = daytona_resolve(sb, call, "read_file", path, 0, &abs, &type);
    if (rc != SBX_OK)
        return rc;
    if (type == DT_FT_NONE)
        rc = daytona_error(st, call, SBX_E_NOT_FOUND, DT ": read_file: %s does not exist", path);
    else if (type != DT_FT_FILE)
        rc = daytona_error(st, call, SBX_E_INVALID, DT ": read_file: %s is not a regular file",
                           path);
    if (rc != SBX_OK) {
        free(abs);
        return rc;
    }
    sbxp_http_error err;
    rc = daytona_tb_download(sb, call, abs, sink, &err);
    free(abs);
    if (rc == SBX_OK || err.from_callback)
        return rc; /* a sink's stop: the sink said why */
    if (rc == SBX_E_NOT_FOUND && err.http_status == 404)
        return daytona_error(st, call, SBX_E_NOT_FOUND, DT ": read_file: %s does not exist", path);
    return daytona_tb_report(sb, call, &err, "read_file %s", path);
}

/* "<dir>/.<base>.sbx-<hex>" beside abs (malloc'd). */
static char *temp_name(const char *abs)
{
    char hex[17];
    sbxs_random_hex(hex, 8);
    const char *slash = strrchr(abs, '/');
    size_t len = strlen(abs) + 32;
    char *t = malloc(len);
    if (t)
        snprintf(t, len, "%.*s/.%s.sbx-%s", (int)(slash - abs), abs, slash + 1, hex);
    return t;
}

int daytona_write_file(sbx_sandbox *sb, sbx_call *call, const char *path,
                       const struct sbx_source *src, unsigned mode)
{
    struct daytona_state *st = sb->st;
    if (mode & ~0777u)
        return daytona_error(st, call, SBX_E_INVALID,
                             DT ": write_file: mode %o has bits outside 0777", mode);
    if (mode == 0)
        mode = 0644;
    char *abs = NULL;
    int type;
    int rc = daytona_resolve(sb, call, "write_file", path, 0, &abs, &type);
    if (rc != SBX_OK)
        return rc;
    if (type != DT_FT_NONE && type != DT_FT_FILE) {
        free(abs);
        return daytona_error(st, call, SBX_E_INVALID, DT ": write_file: %s is not a regular file",
                             path);
    }
    char *tmp = temp_name(abs);
    if (!tmp) {
        free(abs);
        return daytona_error(st, call, SBX_E_NOMEM, "out of memory");
    }
    sbxp_http_error err;
    char *slash = strrchr(abs, '/');
    *slash = '\0';
    rc = abs[0] ? daytona_tb_mkdir(sb, call, abs, 0755, &err) : SBX_OK;
    *slash = '/';
    if (rc != SBX_OK) {
        rc = daytona_tb_report(sb, call, &err, "write_file %s: creating its directory", path);
        goto out;
    }
    rc = daytona_tb_upload(sb, call, tmp, src, &err);
    if (rc != SBX_OK) {
        if (!err.from_callback)
            rc = daytona_tb_report(sb, call, &err, "write_file %s", path);
        goto fail;
    }
    rc = daytona_tb_chmod(sb, call, tmp, mode, &err);
    if (rc != SBX_OK) {
        rc = daytona_tb_report(sb, call, &err, "write_file %s: setting mode %04o", path, mode);
        goto fail;
    }
    /* The toolbox's move refuses to replace a file (409), so a file that
     * exists is replaced by rename(2) in the sandbox (mv -f on one file
     * system), a new one moved by the toolbox. */
    rc = type == DT_FT_NONE ? daytona_tb_move(sb, call, tmp, abs, &err) : SBX_E_EXISTS;
    if (rc == SBX_E_EXISTS) {
        const char *argv[] = {"mv", "-f", "--", tmp, abs, NULL};
        char msg[256];
        int code = -1;
        rc = daytona_exec_helper(sb, call, "/", argv, NULL, st->cfg.request_timeout_ms, &code, msg,
                                 sizeof msg);
        if (rc == SBX_OK && code != 0)
            rc = daytona_error(st, call, SBX_E_IO, DT ": write_file %s: renaming into place: %s",
                               path, msg);
        if (rc != SBX_OK)
            goto fail;
    } else if (rc != SBX_OK) {
        rc = daytona_tb_report(sb, call, &err, "write_file %s: renaming into place", path);
        goto fail;
    }
    goto out;
fail: {
    sbxp_http_error e2;
    daytona_tb_remove(sb, NULL, tmp, 0, &e2);
}
out:
    free(tmp);
    free(abs);
    return rc;
}
