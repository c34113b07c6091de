/*
 * write_stream.c - the data of a write: one exec, fed with the data and a
 * trailer, that publishes only a complete and verified file.
 *
 * Why a trailer: the data travels on the stdin of an exec, and whatever
 * ends that stdin early (sbx killed, even with SIGKILL; dockerd killed; the
 * connection lost; a cancellation) looks to the command in the container
 * exactly like the end of the data. So the end of input proves nothing.
 * After the caller's source has ended without error, the host appends
 *
 *   "SBXEND1 " <length, right-aligned in 20> " " <SHA-256, 64 hex> " "
 *   <nonce, 32 hex> "\n"                                    (127 bytes)
 *
 * where length and SHA-256 are those of the data, computed while it
 * streams (nothing is spooled), and the nonce is a random value given to
 * the script in its arguments, so that no data, however crafted, can end
 * with a trailer that passes. The script (sh and busybox-level tools) runs
 * `cat > tmp`, then checks the last 127 bytes: the magic, the nonce, and
 * that the file is exactly length + 127 bytes; cuts the trailer off with
 * dd, checks the size again and, when the image has sha256sum (and
 * providers.docker.verify_writes is not false), the digest;
 * then applies the mode and renames tmp over the target. In every other
 * case it removes tmp and exits non-zero. A stream cut anywhere has no
 * valid trailer, so the container itself removes the partial file: the
 * cleanup never depends on the host surviving. On cancellation or a
 * failing source the host ends stdin without the trailer and lets the
 * script clean up the same way.
 *
 * What is left: a container killed or stopped while the script runs keeps
 * its tmp (.sbx-<hex>.tmp) until someone removes it.
 */
#include "docker.h"
#include "hex.h"

#include <openssl/evp.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRAILER_LEN 127
#define NONCE_HEX 32

/* Exit codes of the script, each naming one check. */
enum {
    WS_CAT = 10,      /* cat > tmp failed (space, permission) */
    WS_TAIL = 11,     /* the end of tmp could not be read */
    WS_PARTIAL = 12,  /* no valid trailer, or the size does not match */
    WS_TRUNCATE = 13, /* the trailer could not be cut off */
    WS_DIGEST = 14,   /* the data differs from what was sent */
    WS_ISDIR = 15,    /* the target became a directory meanwhile */
    WS_PUBLISH = 16   /* chmod or mv failed */
};

/* $1 tmp, $2 final, $3 mode (octal), $4 nonce, $5 1 to check the digest;
 * stdin: data + trailer. */
static const char write_script[] =
    "set -f -C\n"
    "trap '' PIPE\n"
    "tmp=$1 final=$2 mode=$3 nonce=$4 verify=$5\n"
    "trap 'rm -f \"$tmp\"' EXIT\n"
    "trap 'exit 129' HUP INT TERM\n"
    "size() { set -- $(ls -ln \"$1\") && echo \"$5\"; }\n"
    "cat > \"$tmp\" || exit 10\n"
    "t=$(tail -c 127 \"$tmp\") || exit 11\n"
    "set -- $t\n"
    "[ $# = 4 ] && [ \"$1\" = SBXEND1 ] && [ \"$4\" = \"$nonce\" ] || exit 12\n"
    "len=$2 sum=$3\n"
    "case $len in ''|*[!0-9]*) exit 12;; esac\n"
    "[ \"$(size \"$tmp\")\" = $((len + 127)) ] || exit 12\n"
    "dd if=/dev/null of=\"$tmp\" bs=1 seek=\"$len\" count=0 2>/dev/null || exit 13\n"
    "[ \"$(size \"$tmp\")\" = \"$len\" ] || exit 13\n"
    "if [ \"$verify\" = 1 ] && command -v sha256sum >/dev/null 2>&1; then\n"
    "  set -- $(sha256sum < \"$tmp\") && [ \"$1\" = \"$sum\" ] || exit 14\n"
    "fi\n"
    "[ -d \"$final\" ] && exit 15\n"
    "chmod \"$mode\" \"$tmp\" && mv -f \"$tmp\" \"$final\" || exit 16\n";

/* The caller's source, counted and hashed, then the trailer. */
struct trailed {
    struct docker_state *st;
    sbx_call *call;
    const char *rel;
    const struct sbx_source *src;
    int64_t announced; /* -1: unknown */
    uint64_t count;
    EVP_MD_CTX *md;
    const char *nonce;
    char trailer[TRAILER_LEN + 1];
    size_t trailer_off;
    int ended; /* the source ended; the trailer is being delivered */
};

static int trailed_fail(struct trailed *t, const char *fmt, ...) SBX_PRINTF_LIKE(2, 3);

static int trailed_fail(struct trailed *t, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    t->st->host->set_error(t->st->host, t->call, SBX_E_IO, "docker: write %.200s: %s",
                           t->rel, msg);
    return -1;
}

/* The source ended: check the announced length, make the trailer. */
static long trailed_end(struct trailed *t)
{
    if (t->announced >= 0 && t->count < (uint64_t)t->announced)
        return trailed_fail(t, "the source ended after %llu of the %lld bytes it "
                               "announced",
                            (unsigned long long)t->count, (long long)t->announced);
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int dlen = 0;
    if (EVP_DigestFinal_ex(t->md, digest, &dlen) != 1 || dlen != 32)
        return trailed_fail(t, "computing the SHA-256 failed");
    char hex[65];
    sbxs_hex(digest, 32, hex);
    int n = snprintf(t->trailer, sizeof t->trailer, "SBXEND1 %20llu %s %s\n",
                     (unsigned long long)t->count, hex, t->nonce);
    if (n != TRAILER_LEN)
        return trailed_fail(t, "internal error: a trailer of %d bytes", n);
    t->ended = 1;
    return 0;
}

static long trailed_read(void *ctx, void *buf, size_t cap)
{
    struct trailed *t = ctx;
    if (!t->ended) {
        long n = t->src->read(t->src->ctx, buf, cap);
        if (n < 0)
            return -1; /* the source has set the call's error */
        if (n > 0) {
            if ((size_t)n > cap)
                n = (long)cap; /* a misbehaving read: never past the buffer */
            t->count += (uint64_t)n;
            if (t->announced >= 0 && t->count > (uint64_t)t->announced)
                return trailed_fail(t, "the source delivered more than the %lld bytes "
                                       "it announced",
                                    (long long)t->announced);
            if (EVP_DigestUpdate(t->md, buf, (size_t)n) != 1)
                return trailed_fail(t, "computing the SHA-256 failed");
            return n;
        }
        if (trailed_end(t) < 0)
            return -1;
    }
    size_t left = TRAILER_LEN - t->trailer_off;
    size_t k = left < cap ? left : cap;
    memcpy(buf, t->trailer + t->trailer_off, k);
    t->trailer_off += k;
    return (long)k;
}

/* While the caller's data flows, its descriptor tells when to read; the
 * trailer is always ready. */
static int trailed_poll_fd(void *ctx)
{
    struct trailed *t = ctx;
    if (t->ended || !t->src->poll_fd)
        return -1;
    return t->src->poll_fd(t->src->ctx);
}

/* The message of a script that did not publish. */
static int script_failed(struct docker_state *st, sbx_call *call, const char *rel,
                         int code, int complete, const char *text)
{
    const char *what;
    int status = SBX_E_IO;
    switch (code) {
    case WS_CAT: what = "storing the data in the container failed"; break;
    case WS_TAIL: what = "reading back the end of the data failed"; break;
    case WS_PARTIAL:
        what = complete ? "the container did not receive the data whole"
                        : "the data did not all reach the container";
        status = complete ? SBX_E_PROTOCOL : SBX_E_IO;
        break;
    case WS_TRUNCATE: what = "cutting off the trailer failed (the image needs dd)"; break;
    case WS_DIGEST:
        what = "the data arrived altered (SHA-256 mismatch)";
        status = SBX_E_PROTOCOL;
        break;
    case WS_ISDIR:
        what = "the target became a directory";
        status = SBX_E_INVALID;
        break;
    case WS_PUBLISH: what = "applying the mode or renaming failed"; break;
    default:
        what = "the write script failed (the image needs sh, cat, tail, ls, dd, chmod, "
               "mv, rm)";
        break;
    }
    size_t n = strlen(text);
    while (n && (text[n - 1] == '\n' || text[n - 1] == '\r'))
        n--;
    return st->host->set_error(st->host, call, status,
                               "docker: write %.200s: %s (exit %d%s%.*s)", rel, what,
                               code, n ? ": " : "", (int)(n > 300 ? 300 : n), text);
}

int docker_write_stream(sbx_sandbox *sb, sbx_call *call, const char *rel,
                        const struct sbx_source *src, const char *tmp,
                        const char *final, unsigned perm)
{
    struct docker_state *st = sb->st;
    char nonce[NONCE_HEX + 1];
    docker_random_hex(nonce, NONCE_HEX / 2);
    struct trailed t = {.st = st, .call = call, .rel = rel, .src = src, .nonce = nonce};
    t.announced = src->length ? src->length(src->ctx) : -1;
    t.md = EVP_MD_CTX_new();
    if (!t.md || EVP_DigestInit_ex(t.md, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(t.md);
        return st->host->set_error(st->host, call, SBX_E_NOMEM, "out of memory");
    }
    struct sbx_source in = {.size = sizeof in, .ctx = &t, .read = trailed_read,
                            .poll_fd = trailed_poll_fd};
    char perm_text[16];
    snprintf(perm_text, sizeof perm_text, "%o", perm);
    const char *argv[] = {"sh", "-c", write_script, "sbx-write", tmp, final, perm_text,
                          nonce, st->cfg.verify_writes ? "1" : "0", NULL};
    int code = -1, complete = 0;
    char text[512];
    int rc = docker_exec_feed(sb, call, argv, &in, &code, &complete, text, sizeof text);
    EVP_MD_CTX_free(t.md);
    if (rc == SBX_E_CANCELLED)
        return st->host->set_error(
            st->host, call, SBX_E_CANCELLED,
            complete ? "docker: write %.200s cancelled after all of its data was sent: "
                       "the container may still publish it whole"
                     : "docker: write %.200s cancelled; nothing was published",
            rel);
    if (rc != SBX_OK)
        return rc;
    if (code != 0)
        return script_failed(st, call, rel, code, complete, text);
    return SBX_OK;
}
