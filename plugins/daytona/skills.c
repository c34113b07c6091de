/*
 * skills.c - SKILLS: a pinned bundle published read-only at
 * <workspace>/skills/<name>/ (the handle's root + "/skills").
 *
 * The bundle (tar, tar.gz or zip) is spooled into an unlinked temporary
 * file on this host while its length and SHA-256 are checked; only a
 * verified bundle is read, with the same entry checks as every archive
 * (shared/archive_check.c: regular files and directories only, relative
 * names without "..", no duplicates, size limits), and rewritten as a
 * plain tar of just those entries (files 0644 or 0755, directories
 * 0755). Nothing of a refused bundle reaches the sandbox. The clean tar
 * is uploaded and unpacked in the sandbox into a hidden directory beside
 * the target, made read-only, and renamed into place (an older version is
 * renamed away first, then removed); the skills directory itself stays
 * read-only for the sandbox user between installs. See daytona.h.
 */
#include "daytona.h"

#include "archive_check.h"
#include "archive_pax.h"
#include "fd_source.h"
#include "hex.h"
#include "skill_name.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHUNK (64 * 1024)

static int tmpfile_fd(void)
{
    const char *d = getenv("TMPDIR");
    int fd = open(d && *d ? d : "/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    return fd >= 0 ? fd : -errno;
}

/* Copy the blob into fd, checking length and SHA-256. */
static int spool(struct daytona_state *st, sbx_call *call, const char *name,
                 const struct sbx_blob *b, int fd)
{
    unsigned char *buf = malloc(CHUNK);
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    int rc = SBX_OK;
    if (!buf || !md || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
        rc = daytona_error(st, call, SBX_E_NOMEM, "out of memory");
        goto out;
    }
    uint64_t total = 0;
    for (;;) {
        if (st->host->cancelled && call && st->host->cancelled(st->host, call)) {
            rc = daytona_error(st, call, SBX_E_CANCELLED, DT ": skill_install %s cancelled", name);
            goto out;
        }
        long n = b->src->read(b->src->ctx, buf, CHUNK);
        if (n < 0) {
            rc = SBX_E_IO; /* the source has set the call's error */
            goto out;
        }
        if (n == 0)
            break;
        total += (uint64_t)n;
        if (total > b->length) {
            rc = daytona_error(st, call, SBX_E_INVALID,
                               DT ": skill_install %s: the bundle is longer than its pinned %llu "
                             "bytes",
                          name, (unsigned long long)b->length);
            goto out;
        }
        EVP_DigestUpdate(md, buf, (size_t)n);
        for (long off = 0; off < n;) {
            ssize_t w = write(fd, buf + off, (size_t)(n - off));
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0) {
                rc = daytona_error(st, call, SBX_E_IO, DT ": skill_install %s: spooling: %s", name,
                                   strerror(errno));
                goto out;
            }
            off += w;
        }
    }
    if (total != b->length) {
        rc = daytona_error(st, call, SBX_E_INVALID,
                           DT ": skill_install %s: the bundle has %llu bytes, pinned %llu", name,
                           (unsigned long long)total, (unsigned long long)b->length);
        goto out;
    }
    unsigned char dig[EVP_MAX_MD_SIZE];
    unsigned dl = 0;
    EVP_DigestFinal_ex(md, dig, &dl);
    char hex[2 * EVP_MAX_MD_SIZE + 1];
    for (unsigned i = 0; i < dl; i++)
        snprintf(hex + 2 * i, 3, "%02x", dig[i]);
    if (!b->sha256 || strcmp(hex, b->sha256) != 0)
        rc = daytona_error(st, call, SBX_E_INVALID,
                           DT ": skill_install %s: SHA-256 mismatch: the bundle's is %s, pinned %s",
                           name, hex, b->sha256 ? b->sha256 : "(none)");
out:
    EVP_MD_CTX_free(md);
    free(buf);
    return rc;
}

/* Read the verified bundle from in_fd, check every entry and write the
 * entries as a plain tar to out_fd. */
static int rewrite(struct daytona_state *st, sbx_call *call, const char *name, const char *format,
                   int in_fd, int out_fd)
{
    struct archive *r = archive_read_new(), *w = archive_write_new();
    struct archive_entry *oe = archive_entry_new();
    sbxs_archive_check *chk = NULL;
    struct sbxs_error se;
    sbxs_error_clear(&se);
    unsigned char *buf = malloc(CHUNK);
    int rc = SBX_OK;
    if (!r || !w || !oe || !buf || sbxs_archive_check_new(NULL, &chk, &se) != SBX_OK) {
        rc = daytona_error(st, call, SBX_E_NOMEM, "out of memory");
        goto out;
    }
    if (format && !strcmp(format, "zip")) {
        archive_read_support_format_zip(r);
    } else {
        archive_read_support_filter_gzip(r);
        archive_read_support_format_tar(r);
        if (!format)
            archive_read_support_format_zip(r);
    }
    sbxs_archive_write_pax_bytes(w);
    if (archive_read_open_fd(r, in_fd, CHUNK) != ARCHIVE_OK ||
        archive_write_open_fd(w, out_fd) != ARCHIVE_OK) {
        rc = daytona_error(st, call, SBX_E_INVALID, DT ": skill_install %s: not a %s archive: %s",
                           name, format ? format : "tar/zip", archive_error_string(r));
        goto out;
    }
    for (;;) {
        struct archive_entry *e;
        int h = archive_read_next_header(r, &e);
        if (h == ARCHIVE_EOF)
            break;
        if (h != ARCHIVE_OK && h != ARCHIVE_WARN) {
            rc = daytona_error(st, call, SBX_E_INVALID, DT ": skill_install %s: bad archive: %s",
                               name, archive_error_string(r));
            goto out;
        }
        char ename[4096];
        int is_dir = 0;
        if (sbxs_archive_check_entry(chk, e, ename, sizeof ename, &is_dir, &se) != SBX_OK) {
            rc = daytona_error(st, call, SBX_E_INVALID, DT ": skill_install %s: %s", name,
                               se.message);
            goto out;
        }
        if (!ename[0])
            continue;
        archive_entry_clear(oe);
        archive_entry_set_pathname(oe, ename);
        if (is_dir) {
            archive_entry_set_filetype(oe, AE_IFDIR);
            archive_entry_set_perm(oe, 0755);
        } else {
            archive_entry_set_filetype(oe, AE_IFREG);
            archive_entry_set_perm(oe, (archive_entry_perm(e) & 0111) ? 0755 : 0644);
            archive_entry_set_size(oe, archive_entry_size(e));
        }
        if (archive_write_header(w, oe) != ARCHIVE_OK) {
            rc = daytona_error(st, call, SBX_E_IO, DT ": skill_install %s: %s", name,
                               archive_error_string(w));
            goto out;
        }
        if (is_dir)
            continue;
        for (;;) {
            la_ssize_t n = archive_read_data(r, buf, CHUNK);
            if (n < 0) {
                rc = daytona_error(st, call, SBX_E_INVALID, DT ": skill_install %s: %s: %s", name,
                                   ename, archive_error_string(r));
                goto out;
            }
            if (n == 0)
                break;
            if (sbxs_archive_check_data(chk, (uint64_t)n, &se) != SBX_OK) {
                rc = daytona_error(st, call, SBX_E_INVALID, DT ": skill_install %s: %s", name,
                                   se.message);
                goto out;
            }
            if (archive_write_data(w, buf, (size_t)n) != n) {
                rc = daytona_error(st, call, SBX_E_IO, DT ": skill_install %s: %s", name,
                                   archive_error_string(w));
                goto out;
            }
        }
    }
    if (archive_write_close(w) != ARCHIVE_OK)
        rc = daytona_error(st, call, SBX_E_IO, DT ": skill_install %s: %s", name,
                           archive_error_string(w));
out:
    sbxs_archive_check_free(chk);
    if (r)
        archive_read_free(r);
    if (w)
        archive_write_free(w);
    archive_entry_free(oe);
    free(buf);
    return rc;
}

/* $1 name, $2 uploaded tar, $3 unique suffix, $4 the skills directory. */
static const char PUBLISH_SH[] =
    "s=$4; n=$1; b=$2; t=$s/.new-$3; o=$s/.old-$3; "
    "chmod u+w \"$s\" || exit 1; "
    "if ! { mkdir \"$t\" && tar -xf \"$b\" -C \"$t\" --no-same-owner -m && chmod -R a-w \"$t\"; }; "
    "then chmod -R u+w \"$t\" 2>/dev/null; rm -rf \"$t\"; chmod a-w \"$s\"; exit 1; fi; "
    "if [ -e \"$s/$n\" ]; then chmod u+w \"$s/$n\" && mv \"$s/$n\" \"$o\" || exit 1; fi; "
    "mv \"$t\" \"$s/$n\"; c=$?; "
    "if [ -e \"$o\" ]; then chmod -R u+w \"$o\"; rm -rf \"$o\"; fi; "
    "chmod a-w \"$s\"; exit $c";

int daytona_skill_install(sbx_sandbox *sb, sbx_call *call, const char *name,
                          const struct sbx_blob *bundle)
{
    struct daytona_state *st = sb->st;
    if (!sbxp_skill_name_valid(name))
        return daytona_error(st, call, SBX_E_INVALID,
                             DT ": skill_install: bad skill name \"%s\" (letters, digits, . _ -; "
                           "no slash, not starting with . or -)",
                        name ? name : "");
    const char *fmt = bundle->format;
    if (fmt && !sbxp_skill_format(fmt))
        return daytona_error(st, call, SBX_E_INVALID, DT ": skill_install %s: unknown format %s",
                             name, fmt);
    int in = tmpfile_fd(), out = in >= 0 ? tmpfile_fd() : -1;
    int rc;
    if (in < 0 || out < 0) {
        rc = daytona_error(st, call, SBX_E_IO, DT ": skill_install %s: temporary file: %s", name,
                           strerror(in < 0 ? -in : -out));
        goto done;
    }
    if ((rc = spool(st, call, name, bundle, in)) != SBX_OK)
        goto done;
    if (lseek(in, 0, SEEK_SET) != 0) {
        rc = daytona_error(st, call, SBX_E_IO, DT ": skill_install %s: %s", name, strerror(errno));
        goto done;
    }
    if ((rc = rewrite(st, call, name, fmt, in, out)) != SBX_OK)
        goto done;
    off_t len = lseek(out, 0, SEEK_END);
    if (len < 0 || lseek(out, 0, SEEK_SET) != 0) {
        rc = daytona_error(st, call, SBX_E_IO, DT ": skill_install %s: %s", name, strerror(errno));
        goto done;
    }
    char hex[17], tarpath[64];
    sbxs_random_hex(hex, 8);
    snprintf(tarpath, sizeof tarpath, "/tmp/.sbx-skill-%s.tar", hex);
    sbxp_http_error err;
    char skills[4200];
    snprintf(skills, sizeof skills, "%s/" DT_SKILLS_DIR, st->cfg.workspace);
    if ((rc = daytona_shared_dir(sb, call, skills, 0555)) != SBX_OK)
        goto done;
    struct sbxp_fd_source fs;
    struct sbx_source src = sbxp_fd_source(&fs, out, (int64_t)len);
    rc = daytona_tb_upload(sb, call, tarpath, &src, &err);
    if (rc != SBX_OK) {
        rc = daytona_tb_report(sb, call, &err, "skill_install %s: uploading", name);
        daytona_tb_remove(sb, NULL, tarpath, 0, &err);
        goto done;
    }
    const char *argv[] = {"sh", "-c", PUBLISH_SH, "sbx", name, tarpath, hex, skills, NULL};
    char msg[512];
    int code = -1;
    rc = daytona_exec_helper(sb, call, "/", argv, NULL, st->cfg.request_timeout_ms, &code, msg,
                             sizeof msg);
    daytona_tb_remove(sb, NULL, tarpath, 0, &err);
    if (rc == SBX_OK && code != 0)
        rc = daytona_error(st, call, SBX_E_IO,
                           DT ": skill_install %s: publishing failed (exit %d): %s", name, code,
                           msg);
done:
    if (in >= 0)
        close(in);
    if (out >= 0)
        close(out);
    return rc;
}
