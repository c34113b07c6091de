/*
 * mounts.c - FILE_MOUNTS without mounts: E2B has no way to attach an
 * independently stored object to a sandbox, so an upload is copied in.
 * mount_put streams the blob as root to /mnt/session/.staging/<hex>
 * (blobs.c: counted and hashed on the way, hashed again in the sandbox),
 * makes it root's and 0444 and renames it to /mnt/session/uploads/<path>
 * (rename(2): the old file or the new one, never a part). /mnt/session,
 * uploads/ and its directories are root's and 0755, so the sandbox user
 * can read an upload but neither change, remove nor add one.
 * mount_remove deletes the file (absent is fine) and the directories it
 * leaves empty. Staging files a crash left behind are removed by a later
 * mount_put once they are an hour old. See e2b_core.h.
 */
#include "e2b_core.h"
#include "hex.h"

#include <stdio.h>
#include <string.h>

#define UPLOADS "/mnt/session/uploads"
#define STAGING "/mnt/session/.staging"

/* A relative path of plain components: no "", ".", "..", no control
 * characters, no leading or doubled slash. */
static int check_path(struct e2b_state *st, sbx_call *call, const char *what,
                      const char *path)
{
    const char *why = NULL;
    size_t len = path ? strlen(path) : 0;
    if (!len)
        why = "is empty";
    else if (len > 1024)
        why = "is longer than 1024 bytes";
    else if (path[0] == '/')
        why = "is absolute; upload paths are relative to " UPLOADS;
    for (const char *p = path; !why && *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            why = "has a control character";
    for (const char *c = path; !why && c && *c;) {
        const char *e = strchr(c, '/');
        size_t n = e ? (size_t)(e - c) : strlen(c);
        if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
            why = "has an empty, \".\" or \"..\" component";
        c = e ? e + 1 : NULL;
        if (e && !*c)
            why = "ends with a slash";
    }
    if (why)
        return e2b_error(st, call, SBX_E_INVALID, "%s: %s: the path \"%.200s\" %s",
                         st->cfg.provider, what, path ? path : "", why);
    return SBX_OK;
}

/* $1 staging file name. */
static const char prepare_sh[] =
    "umask 022; mkdir -p " UPLOADS " " STAGING " && chown 0:0 /mnt/session " UPLOADS
    " " STAGING " && chmod 0755 /mnt/session " UPLOADS " && chmod 0700 " STAGING " && "
    "find " STAGING " -mindepth 1 -maxdepth 1 -mmin +60 -exec rm -f -- {} + 2>/dev/null; "
    "true";

/* $1 relative path, $2 staged file. Exit 3: refused. */
static const char publish_sh[] =
    "umask 022; cd " UPLOADS " || exit 1; d=$(dirname -- \"$1\"); "
    "if [ \"$d\" != . ]; then mkdir -p -- \"$d\" || exit 3; fi; "
    "[ -d \"$1\" ] && { echo \"$1 is a directory\" >&2; exit 3; }; "
    "chown 0:0 -- \"$2\" && chmod 0444 -- \"$2\" && mv -T -f -- \"$2\" \"$1\"";

/* $1 relative path. */
static const char remove_sh[] =
    "cd " UPLOADS " 2>/dev/null || exit 0; "
    "[ -d \"$1\" ] && [ ! -L \"$1\" ] && { echo \"$1 is a directory\" >&2; exit 3; }; "
    "rm -f -- \"$1\" || exit 1; d=$(dirname -- \"$1\"); "
    "while [ \"$d\" != . ]; do rmdir -- \"$d\" 2>/dev/null || break; d=$(dirname -- \"$d\"); "
    "done; true";

int e2b_mount_put(sbx_sandbox *sb, sbx_call *call, const char *path,
                  const struct sbx_blob *blob)
{
    struct e2b_state *st = sb->st;
    char what[1200];
    snprintf(what, sizeof what, "mount_put %.1024s", path ? path : "");
    int rc = check_path(st, call, "mount_put", path);
    if (rc == SBX_OK)
        rc = e2b_blob_args(st, call, what, blob);
    if (rc != SBX_OK)
        return rc;
    e2b_keep_alive(sb, call);
    const char *prep[] = {"sh", "-c", prepare_sh, NULL};
    if ((rc = e2b_root_script(sb, call, "preparing " UPLOADS, prep)) != SBX_OK)
        return rc;
    char hex[17], staged[64];
    sbxs_random_hex(hex, 8);
    snprintf(staged, sizeof staged, STAGING "/%s", hex);
    rc = e2b_blob_upload(sb, call, what, blob, staged, NULL);
    if (rc == SBX_OK) {
        const char *pub[] = {"sh", "-c", publish_sh, "sh", path, staged, NULL};
        rc = e2b_root_script(sb, call, what, pub);
    }
    if (rc != SBX_OK) {
        const char *rm[] = {"rm", "-f", "--", staged, NULL};
        int code = -1;
        if (e2b_exec_helper_as(sb, NULL, "root", "/", rm, NULL, 30000, &code, NULL, 0) !=
                SBX_OK ||
            code != 0)
            st->host->log(st->host, SBX_LOG_WARN, "%s: removing %s in sandbox %s failed",
                          st->cfg.provider, staged, sb->id);
    }
    return rc;
}

int e2b_mount_remove(sbx_sandbox *sb, sbx_call *call, const char *path)
{
    struct e2b_state *st = sb->st;
    int rc = check_path(st, call, "mount_remove", path);
    if (rc != SBX_OK)
        return rc;
    char what[1200];
    snprintf(what, sizeof what, "mount_remove %.1024s", path);
    e2b_keep_alive(sb, call);
    const char *argv[] = {"sh", "-c", remove_sh, "sh", path, NULL};
    return e2b_root_script(sb, call, what, argv);
}
