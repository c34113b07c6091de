/*
 * blobs.c - pinned objects (struct sbx_blob: exact length and SHA-256) put
 * into the sandbox for FILE_MOUNTS and SKILLS. The bytes are streamed once,
 * as root, to a staging path through POST /files while the host counts and
 * hashes them on the way (a source that gives more than the declared length
 * is cut off there); then the staged file is hashed again inside the sandbox
 * (sha256sum) so that what gets published is the pinned content both as it
 * was sent and as it landed. See e2b_core.h.
 */
#include "e2b_core.h"
#include "hex.h"
#include "text_sink.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int e2b_blob_args(struct e2b_state *st, sbx_call *call, const char *what,
                  const struct sbx_blob *b)
{
    if (!b || !b->src || !b->src->read)
        return e2b_error(st, call, SBX_E_INVALID, "%s: %s: no blob source given",
                         st->cfg.provider, what);
    if (!sbxs_is_hex(b->sha256, 64))
        return e2b_error(st, call, SBX_E_INVALID,
                         "%s: %s: the expected SHA-256 must be 64 lowercase hex digits",
                         st->cfg.provider, what);
    return SBX_OK;
}

/* The upload's source: the blob's, counted, hashed and copied to a tap. */
struct tee {
    const struct sbx_source *src;
    const struct sbx_sink *tap;
    EVP_MD_CTX *md;
    uint64_t got, want;
    int over;       /* more bytes than declared: cut off */
    int src_failed; /* the blob's source failed (and said why) */
    int tap_rc;     /* the tap's failure */
};

static long tee_read(void *ctx, void *buf, size_t cap)
{
    struct tee *t = ctx;
    long n = t->src->read(t->src->ctx, buf, cap);
    if (n < 0) {
        t->src_failed = 1;
        return -1;
    }
    if (n == 0)
        return 0;
    t->got += (uint64_t)n;
    if (t->got > t->want) {
        t->over = 1;
        return -1;
    }
    EVP_DigestUpdate(t->md, buf, (size_t)n);
    if (t->tap && (t->tap_rc = t->tap->write(t->tap->ctx, buf, (size_t)n)) != 0)
        return -1;
    return n;
}

/* sha256sum and size of abs as the sandbox sees them, against the pin. */
static int check_landed(sbx_sandbox *sb, sbx_call *call, const char *what, const char *abs,
                        const struct sbx_blob *b)
{
    struct e2b_state *st = sb->st;
    const char *argv[] = {"sh", "-c", "sha256sum < \"$1\" && stat -c %s \"$1\"", "sh", abs,
                          NULL};
    char answer[256];
    struct sbxp_text_sink k;
    sbxp_text_sink_init(&k, answer, sizeof answer);
    char msg[256];
    int code = -1;
    int rc = e2b_exec_helper_as(sb, call, "root", "/", argv, &k.sink, 60000, &code, msg,
                                sizeof msg);
    if (rc != SBX_OK)
        return rc;
    char sum[65] = "";
    unsigned long long size = 0;
    if (code != 0 || sscanf(k.buf, "%64s -\n%llu", sum, &size) != 2)
        return e2b_error(st, call, SBX_E_IO,
                         "%s: %s: cannot hash the staged copy in sandbox %s (exit %d): %s",
                         st->cfg.provider, what, sb->id, code, msg);
    if (strcmp(sum, b->sha256) != 0 || size != b->length)
        return e2b_error(st, call, SBX_E_IO,
                         "%s: %s: the copy in sandbox %s is damaged: %llu bytes with "
                         "SHA-256 %s, sent %llu bytes with SHA-256 %s",
                         st->cfg.provider, what, sb->id, size, sum,
                         (unsigned long long)b->length, b->sha256);
    return SBX_OK;
}

int e2b_blob_upload(sbx_sandbox *sb, sbx_call *call, const char *what,
                    const struct sbx_blob *b, const char *abs, const struct sbx_sink *tap)
{
    struct e2b_state *st = sb->st;
    struct tee t = {b->src, tap, EVP_MD_CTX_new(), 0, b->length, 0, 0, 0};
    if (!t.md || EVP_DigestInit_ex(t.md, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(t.md);
        return e2b_error(st, call, SBX_E_NOMEM, "out of memory");
    }
    /* No length: the body goes chunked, so a source longer than declared
     * is seen (and cut off) instead of silently truncated. */
    struct sbx_source src = {.size = sizeof(struct sbx_source), .ctx = &t, .read = tee_read};
    sbxp_http_error err;
    int rc = e2b_files_upload(sb, call, abs, "root", &src, &err);
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned dlen = 0;
    EVP_DigestFinal_ex(t.md, d, &dlen);
    EVP_MD_CTX_free(t.md);
    if (t.over)
        return e2b_error(st, call, SBX_E_INVALID,
                         "%s: %s: the source gives more than the declared %llu bytes",
                         st->cfg.provider, what, (unsigned long long)b->length);
    if (t.src_failed)
        return SBX_E_IO; /* the source has said why */
    if (t.tap_rc)
        return e2b_error(st, call, t.tap_rc, "%s: %s: passing the bytes on failed",
                         st->cfg.provider, what);
    if (rc != SBX_OK)
        return e2b_envd_report(sb, call, &err, "%s: uploading to %s", what, abs);
    if (t.got != b->length)
        return e2b_error(st, call, SBX_E_INVALID,
                         "%s: %s: the source gave %llu bytes, %llu were declared",
                         st->cfg.provider, what, (unsigned long long)t.got,
                         (unsigned long long)b->length);
    char hex[65];
    sbxs_hex(d, dlen < 32 ? dlen : 32, hex);
    if (strcmp(hex, b->sha256) != 0)
        return e2b_error(st, call, SBX_E_INVALID,
                         "%s: %s: SHA-256 mismatch: the content has %s, %s was pinned",
                         st->cfg.provider, what, hex, b->sha256);
    return check_landed(sb, call, what, abs, b);
}
