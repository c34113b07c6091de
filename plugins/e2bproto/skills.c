/*
 * skills.c - SKILLS: skill_install publishes a pinned bundle read-only at
 * <workspace>/skills/<name>/ (E2B's workspace root is /home/user/workspace,
 * so /home/user/workspace/skills/<name>/: what root() + "skills" gives).
 *
 *   1. skills/ is made (as root, 0755, owned by root: the sandbox user can
 *      neither add nor remove entries) with a staging directory
 *      skills/.staging-<hex> (0700) in it;
 *   2. the bundle is streamed there as root (blobs.c: counted and hashed on
 *      the way, hashed again in the sandbox); the same bytes go through
 *      the shared archive entry checks on the host as they pass (a thread
 *      reading them from a pipe with libarchive), so a bundle with a
 *      symlink, a hard link, a device, a ".." or an absolute name is
 *      refused before anything of it is unpacked;
 *   3. a root script unpacks it into the staging directory with tar,
 *      makes it root's and read-only (files 0444, 0555 when executable,
 *      directories 0555), moves it to the version directory
 *      skills/.v-<hex>-<name> and publishes it by renaming a symlink
 *      skills/<name> -> .v-<hex>-<name> over the previous one: readers see
 *      the old version or the new, whole. Versions no symlink names any
 *      more are removed, under flock on skills/ when the sandbox has flock.
 *
 * Everything lives in the sandbox, so an installed skill survives a
 * restart of the host and attach. Staging directories left by a crash are
 * removed by a later install once they are an hour old.
 */
#include "e2b_core.h"
#include "archive_check.h"
#include "hex.h"
#include "skill_name.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK_CHUNK 65536

int e2b_in_skill(sbx_sandbox *sb, const char *abs)
{
    const char *ws = sb->st->cfg.workspace;
    size_t wl = strlen(ws);
    if (strncmp(abs, ws, wl) != 0 || strncmp(abs + wl, "/skills/", 8) != 0)
        return 0;
    const char *rest = abs + wl + 8;
    return !strncmp(rest, ".v-", 3) || !strncmp(rest, ".staging-", 9);
}

/* ---- the entry checks, fed from the upload ------------------------------ */

struct checker {
    int fds[2];
    pthread_t th;
    const char *format;
    int status;
    char msg[SBXS_ERROR_MAX];
    unsigned char buf[CHECK_CHUNK];
};

static la_ssize_t pipe_read(struct archive *a, void *ud, const void **out)
{
    struct checker *k = ud;
    (void)a;
    for (;;) {
        ssize_t n = read(k->fds[0], k->buf, sizeof k->buf);
        if (n < 0 && errno == EINTR)
            continue;
        *out = k->buf;
        return n < 0 ? -1 : (la_ssize_t)n;
    }
}

static int check_all(struct checker *k, struct sbxs_error *e)
{
    sbxs_archive_check *c = NULL;
    int rc = sbxs_archive_check_new(NULL, &c, e);
    if (rc != SBX_OK)
        return rc;
    struct archive *a = archive_read_new();
    char *name = malloc(4096);
    if (!a || !name) {
        rc = sbxs_error_set(e, SBX_E_NOMEM, "out of memory");
        goto out;
    }
    archive_read_support_format_tar(a);
    if (!strcmp(k->format, "tar.gz"))
        archive_read_support_filter_gzip(a);
    if (archive_read_open(a, k, NULL, pipe_read, NULL) != ARCHIVE_OK) {
        rc = sbxs_error_set(e, SBX_E_INVALID, "not a valid %s archive: %s", k->format,
                            archive_error_string(a));
        goto out;
    }
    for (;;) {
        struct archive_entry *en;
        int h = archive_read_next_header(a, &en);
        if (h == ARCHIVE_EOF)
            break;
        if (h != ARCHIVE_OK && h != ARCHIVE_WARN) {
            rc = sbxs_error_set(e, SBX_E_INVALID, "bad archive: %s", archive_error_string(a));
            goto out;
        }
        int is_dir = 0;
        if ((rc = sbxs_archive_check_entry(c, en, name, 4096, &is_dir, e)) != SBX_OK)
            goto out;
        const void *blk;
        size_t len;
        la_int64_t off;
        int r;
        while ((r = archive_read_data_block(a, &blk, &len, &off)) == ARCHIVE_OK)
            if ((rc = sbxs_archive_check_data(c, len, e)) != SBX_OK)
                goto out;
        if (r != ARCHIVE_EOF) {
            rc = sbxs_error_set(e, SBX_E_INVALID, "bad archive: %s", archive_error_string(a));
            goto out;
        }
    }
    rc = SBX_OK;
out:
    if (a)
        archive_read_free(a);
    free(name);
    sbxs_archive_check_free(c);
    return rc;
}

static void *checker_main(void *arg)
{
    struct checker *k = arg;
    struct sbxs_error e;
    sbxs_error_clear(&e);
    k->status = check_all(k, &e);
    if (k->status != SBX_OK)
        snprintf(k->msg, sizeof k->msg, "%s", e.message);
    /* Take the rest, so the upload never blocks on a full pipe. */
    while (read(k->fds[0], k->buf, sizeof k->buf) > 0)
        ;
    return NULL;
}

static int checker_write(void *ctx, const void *data, size_t len)
{
    struct checker *k = ctx;
    const unsigned char *p = data;
    while (len) {
        ssize_t n = write(k->fds[1], p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return SBX_E_IO;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* ---- the sandbox side ---------------------------------------------------- */

/* $1 skills dir, $2 staging name. Exit 3: refused (reported as invalid). */
static const char prepare_sh[] =
    "umask 022; [ -L \"$1\" ] && { echo \"$1 is a symlink\" >&2; exit 3; }; "
    "mkdir -p -- \"$1\" && chown 0:0 -- \"$1\" && chmod 0755 -- \"$1\" && "
    "cd -P -- \"$1\" && [ \"$(pwd -P)\" = \"$1\" ] || "
    "{ echo \"$1 is not a plain directory\" >&2; exit 3; }; "
    "find . -maxdepth 1 -name '.staging-*' -mmin +60 -exec rm -rf -- {} + 2>/dev/null; "
    "mkdir -m 0700 -- \"$2\"";

/* $1 skills dir, $2 name, $3 staging name, $4 version name, $5 tar flags. */
static const char publish_sh[] =
    "set -e; umask 022; cd -P -- \"$1\"; [ \"$(pwd -P)\" = \"$1\" ]; "
    "mkdir -- \"$3/tree\"; "
    "tar -x $5 -f \"$3/bundle\" -C \"$3/tree\" --no-same-owner --no-same-permissions; "
    "chown -R 0:0 -- \"$3/tree\"; chmod -R a-w,a+rX,u-s,g-s -- \"$3/tree\"; "
    "if command -v flock >/dev/null; then exec 9<.; flock -x 9; fi; "
    "if [ -e \"$2\" ] && [ ! -L \"$2\" ]; then "
    "echo \"$1/$2 exists and is not a published skill\" >&2; exit 3; fi; "
    "mv -- \"$3/tree\" \"$4\"; ln -s -- \"$4\" \"$3/link\"; mv -T -f -- \"$3/link\" \"$2\"; "
    "rm -rf -- \"$3\"; "
    "for v in .v-*; do if [ -d \"$v\" ] && [ ! -L \"$v\" ]; then used=; "
    "for l in *; do if [ -L \"$l\" ] && [ \"$(readlink -- \"$l\")\" = \"$v\" ]; then "
    "used=1; fi; done; if [ -z \"$used\" ]; then rm -rf -- \"$v\"; fi; fi; done";

static const char remove_sh[] = "cd -P -- \"$1\" && rm -rf -- \"$2\"";

/* Remove the staging directory; failures are logged only. */
static void drop_staging(sbx_sandbox *sb, const char *sk, const char *stage)
{
    const char *argv[] = {"sh", "-c", remove_sh, "sh", sk, stage, NULL};
    int code = -1;
    if (e2b_exec_helper_as(sb, NULL, "root", "/", argv, NULL, 30000, &code, NULL, 0) !=
            SBX_OK ||
        code != 0)
        sb->st->host->log(sb->st->host, SBX_LOG_WARN,
                          "%s: removing %s/%s in sandbox %s failed", sb->st->cfg.provider,
                          sk, stage, sb->id);
}

int e2b_skill_install(sbx_sandbox *sb, sbx_call *call, const char *name,
                      const struct sbx_blob *bundle)
{
    struct e2b_state *st = sb->st;
    if (!sbxp_skill_name_valid(name))
        return e2b_error(st, call, SBX_E_INVALID,
                         "%s: skill name \"%.80s\" is not valid (1 to %d of A-Z a-z 0-9 . "
                         "_ -, not starting with . or -)",
                         st->cfg.provider, name ? name : "", SBXP_SKILL_NAME_MAX);
    char what[128];
    snprintf(what, sizeof what, "skill %s", name);
    int rc = e2b_blob_args(st, call, what, bundle);
    if (rc != SBX_OK)
        return rc;
    const char *format =
        bundle->size >= offsetof(struct sbx_blob, format) + sizeof bundle->format
            ? bundle->format
            : NULL;
    if (!format || (strcmp(format, "tar") != 0 && strcmp(format, "tar.gz") != 0))
        return e2b_error(st, call, SBX_E_INVALID,
                         "%s: %s: bundle format \"%s\" is not supported (tar, tar.gz)",
                         st->cfg.provider, what, format ? format : "(none)");

    char sk[4200], stage[32] = ".staging-", ver[128], hex[17], bpath[4300];
    snprintf(sk, sizeof sk, "%s/skills", st->cfg.workspace);
    sbxs_random_hex(hex, 8);
    strcat(stage, hex);
    snprintf(ver, sizeof ver, ".v-%s-%s", hex, name);
    snprintf(bpath, sizeof bpath, "%s/%s/bundle", sk, stage);

    e2b_keep_alive(sb, call);
    const char *prep[] = {"sh", "-c", prepare_sh, "sh", sk, stage, NULL};
    if ((rc = e2b_root_script(sb, call, "preparing the skills directory", prep)) != SBX_OK)
        return rc;

    struct checker *k = calloc(1, sizeof *k);
    if (!k || pipe2(k->fds, O_CLOEXEC) != 0) {
        free(k);
        drop_staging(sb, sk, stage);
        return e2b_error(st, call, SBX_E_NOMEM, "%s: %s: cannot set up the bundle check",
                         st->cfg.provider, what);
    }
    k->format = format;
    if (pthread_create(&k->th, NULL, checker_main, k) != 0) {
        close(k->fds[0]);
        close(k->fds[1]);
        free(k);
        drop_staging(sb, sk, stage);
        return e2b_error(st, call, SBX_E_INTERNAL, "%s: %s: cannot start a thread",
                         st->cfg.provider, what);
    }
    struct sbx_sink tap = SBX_SINK_INIT(k, checker_write);
    rc = e2b_blob_upload(sb, call, what, bundle, bpath, &tap);
    close(k->fds[1]);
    pthread_join(k->th, NULL);
    close(k->fds[0]);
    /* A digest that differs says the bytes are not the pinned ones: that
     * comes first; the entry checks speak for pinned bytes. */
    if (rc == SBX_OK && k->status != SBX_OK)
        rc = e2b_error(st, call, k->status, "%s: %s: the bundle is refused: %s",
                       st->cfg.provider, what, k->msg);
    free(k);
    if (rc == SBX_OK) {
        const char *pub[] = {"sh", "-c", publish_sh, "sh", sk, name, stage, ver,
                             strcmp(format, "tar.gz") == 0 ? "-z" : "", NULL};
        rc = e2b_root_script(sb, call, "publishing the skill", pub);
    }
    if (rc != SBX_OK)
        drop_staging(sb, sk, stage);
    return rc;
}
