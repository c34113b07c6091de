/*
 * cases_mounts.c - FILE_MOUNTS: a verified blob published read-only at
 * /mnt/session/uploads/<path>; a blob whose size or SHA-256 differs never
 * appears; a write from inside the sandbox fails; removal is idempotent,
 * also from a new instance after a restart.
 */
#include "cf_internal.h"

#include <stdlib.h>
#include <string.h>

#define UP "/mnt/session/uploads"

/* Digests of the fixed contents below (sha256sum). */
#define TEXT1 "uploaded content\n"
#define SHA1 "56a929dca4fd4fdfe134f3bf0ba20286c79b9e576d0f7e65a99a9b93313c05a4"
#define TEXT2 "second version\n"
#define SHA2 "66ed1142ab3b2f1cdb29e8b81c9471444a5d9e6fb657a54d089073ab8bd34e27"

static int put(sbx_handle *h, const char *path, const char *text, uint64_t length,
               const char *sha, sbx_error *err)
{
    struct sbx_memory_source m = {text, strlen(text), 0};
    struct sbx_source src = sbx_memory_source(&m);
    struct sbx_blob b;
    memset(&b, 0, sizeof b);
    b.size = sizeof b;
    b.src = &src;
    b.length = length;
    b.sha256 = sha;
    sbx_error_clear(err);
    return sbx_mount_put(h, path, &b, NULL, err);
}

void cf_case_mount_put_read_only(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    if (!h)
        return;
    sbx_error err;
    if (!cf_expect_ok(t, put(h, "data/in.txt", TEXT1, strlen(TEXT1), SHA1, &err), &err,
                      "mount_put data/in.txt"))
        return;
    char *o = cf_sh(t, h, "cat " UP "/data/in.txt");
    if (o && strcmp(o, TEXT1) != 0)
        cf_fail(t, "the sandbox reads %s from the upload", o);
    free(o);
    if (!o || cf_failed(t))
        return;
    /* Read-only inside: neither the file nor the directory can change. */
    o = cf_sh_any(t, h,
                  "echo evil > " UP "/data/in.txt 2>/dev/null && echo wrote-file; "
                  "touch " UP "/new 2>/dev/null && echo created-file; "
                  "rm -f " UP "/data/in.txt 2>/dev/null; cat " UP "/data/in.txt");
    if (o && strcmp(o, TEXT1) != 0)
        cf_fail(t, "writing into the uploads from inside the sandbox was not "
                   "refused: the shell printed %s",
                o);
    free(o);
    if (!o || cf_failed(t))
        return;
    /* Putting again replaces the file whole. */
    if (!cf_expect_ok(t, put(h, "data/in.txt", TEXT2, strlen(TEXT2), SHA2, &err), &err,
                      "mount_put data/in.txt again"))
        return;
    o = cf_sh(t, h, "cat " UP "/data/in.txt");
    if (o && strcmp(o, TEXT2) != 0)
        cf_fail(t, "after the second put the sandbox reads %s", o);
    free(o);
}

void cf_case_mount_put_verifies(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    if (!h)
        return;
    sbx_error err;
    struct {
        const char *what, *text;
        uint64_t length;
        const char *sha;
    } bad[] = {
        {"a wrong SHA-256", TEXT1, strlen(TEXT1), SHA2},
        {"a shorter blob than declared", TEXT1, strlen(TEXT1) + 1, SHA1},
        {"a longer blob than declared", TEXT1, strlen(TEXT1) - 1, SHA1},
        {"a malformed SHA-256", TEXT1, strlen(TEXT1), "xyz"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = put(h, "bad.txt", bad[i].text, bad[i].length, bad[i].sha, &err);
        if (rc != SBX_E_INVALID)
            return (void)cf_fail(t, "mount_put with %s returned %s (%s); want "
                                    "SBX_E_INVALID",
                                 bad[i].what, cf_status_name(rc), err.message);
        if (!err.message[0])
            return (void)cf_fail(t, "mount_put with %s: no message", bad[i].what);
    }
    const char *paths[] = {"../escape.txt", "/etc/x", "a/../../x", NULL};
    for (size_t i = 0; paths[i]; i++) {
        int rc = put(h, paths[i], TEXT1, strlen(TEXT1), SHA1, &err);
        if (rc != SBX_E_INVALID)
            return (void)cf_fail(t, "mount_put to %s returned %s (%s); want "
                                    "SBX_E_INVALID",
                                 paths[i], cf_status_name(rc), err.message);
    }
    char *o = cf_sh_any(t, h, "ls -A " UP "; ls / | grep -x escape.txt; true");
    if (o && *o)
        cf_fail(t, "refused blobs left traces: the sandbox lists %s", o);
    free(o);
}

void cf_case_mount_remove_idempotent(struct cf_test *t)
{
    sbx_provider *p = NULL;
    sbx_handle *h = cf_sandbox(t, &p);
    if (!h)
        return;
    sbx_error err;
    if (!cf_expect_ok(t, put(h, "gone/soon.txt", TEXT1, strlen(TEXT1), SHA1, &err),
                      &err, "mount_put gone/soon.txt") ||
        !cf_expect_ok(t, sbx_mount_remove(h, "gone/soon.txt", NULL, &err), &err,
                      "mount_remove gone/soon.txt") ||
        !cf_expect_ok(t, sbx_mount_remove(h, "gone/soon.txt", NULL, &err), &err,
                      "mount_remove gone/soon.txt a second time") ||
        !cf_expect_ok(t, sbx_mount_remove(h, "never/there.txt", NULL, &err), &err,
                      "mount_remove of a path never put"))
        return;
    char *o = cf_sh_any(t, h, "test -e " UP "/gone/soon.txt && echo still-there; true");
    if (o && *o)
        cf_fail(t, "after mount_remove the sandbox still sees the file");
    free(o);
    if (!o || cf_failed(t))
        return;
    if (sbx_mount_remove(h, "../x", NULL, &err) != SBX_E_INVALID)
        return (void)cf_fail(t, "mount_remove ../x was not refused");
    /* From a new instance after a restart. */
    if (!cf_expect_ok(t, put(h, "kept.txt", TEXT1, strlen(TEXT1), SHA1, &err), &err,
                      "mount_put kept.txt"))
        return;
    sbx_handle *h2 = cf_attach_after_restart(t, p, h);
    if (!h2)
        return;
    o = cf_sh(t, h2, "cat " UP "/kept.txt");
    if (o && strcmp(o, TEXT1) != 0)
        cf_fail(t, "after a restart the upload reads %s", o);
    free(o);
    if (!o || cf_failed(t))
        return;
    if (!cf_expect_ok(t, sbx_mount_remove(h2, "kept.txt", NULL, &err), &err,
                      "mount_remove after a restart") ||
        !cf_expect_ok(t, sbx_mount_remove(h2, "kept.txt", NULL, &err), &err,
                      "mount_remove after a restart, again"))
        return;
}
