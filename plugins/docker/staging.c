/*
 * staging.c - the session's staging directory: verifying pinned blobs
 * (size and SHA-256) into temporary files before they are published by a
 * rename, and sweeping what a crashed process left behind.
 *
 * Every staging entry is a file or directory named "<kind>-<random>" that
 * its creator holds an exclusive flock(2) on (through an fd it keeps open)
 * for as long as it works on it. A sweep removes the entries nobody holds a
 * lock on: those of processes that died mid-way. The lock dies with its
 * process, so no timeout or pid guessing is needed, and entries of
 * concurrent operations (other threads, other processes) are left alone.
 */
#include "docker.h"

#include "hex.h"

#include "confine.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHUNK (64 * 1024)

int docker_staging_open(sbx_sandbox *sb, sbx_call *call, const char *what, int *dirfd_out)
{
    struct docker_state *st = sb->st;
    *dirfd_out = -1;
    if (!sb->staging)
        return st->host->set_error(st->host, call, SBX_E_UNSUPPORTED,
                                   "docker: %s: container %.12s was created without "
                                   "the session's resource directory binds",
                                   what, sb->id);
    int fd = open(sb->staging, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return st->host->set_error(st->host, call,
                                   errno == ENOENT ? SBX_E_NOT_FOUND : SBX_E_IO,
                                   "docker: %s: the staging directory %s cannot be "
                                   "opened: %s",
                                   what, sb->staging, strerror(errno));
    *dirfd_out = fd;
    return SBX_OK;
}

/* Remove one entry if no live process holds its lock. */
static void sweep_one(int dfd, const char *name)
{
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        /* a symlink or something unopenable: not ours to keep */
        if (errno == ELOOP)
            unlinkat(dfd, name, 0);
        return;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) == 0)
        sbxp_confine_remove_tree(dfd, name);
    close(fd);
}

void docker_staging_sweep(int dfd)
{
    int fd = dup(dfd);
    if (fd < 0)
        return;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return;
    }
    /* collect first: removing while iterating may skip entries */
    char **names = NULL;
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char **more = realloc(names, (n + 1) * sizeof *names);
        if (!more)
            break;
        names = more;
        if (!(names[n] = strdup(de->d_name)))
            break;
        n++;
    }
    closedir(d);
    for (size_t i = 0; i < n; i++) {
        sweep_one(dfd, names[i]);
        free(names[i]);
    }
    free(names);
}

int docker_staging_name(const char *kind, char *out, size_t cap)
{
    char r[2 * 12 + 1];
    int n = snprintf(out, cap, "%s-%s", kind, sbxs_random_hex(r, 12));
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

int docker_staging_file(struct docker_state *st, sbx_call *call, int dfd,
                        const char *kind, char *name, size_t cap, int *fd_out)
{
    *fd_out = -1;
    if (docker_staging_name(kind, name, cap) != 0)
        return st->host->set_error(st->host, call, SBX_E_IO,
                                   "docker: no random bytes for a staging name");
    int fd = openat(dfd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return st->host->set_error(st->host, call, SBX_E_IO,
                                   "docker: cannot create a staging file: %s",
                                   strerror(errno));
    if (flock(fd, LOCK_EX) != 0) {
        int e = errno;
        close(fd);
        unlinkat(dfd, name, 0);
        return st->host->set_error(st->host, call, SBX_E_IO,
                                   "docker: cannot lock a staging file: %s", strerror(e));
    }
    *fd_out = fd;
    return SBX_OK;
}

int docker_blob_args(struct docker_state *st, sbx_call *call, const char *what,
                     const struct sbx_blob *blob)
{
    if (!blob || blob->size < offsetof(struct sbx_blob, format) || !blob->src ||
        !blob->src->read)
        return st->host->set_error(st->host, call, SBX_E_INVALID,
                                   "docker: %s: no blob source given", what);
    if (!sbxs_is_hex(blob->sha256, 64))
        return st->host->set_error(st->host, call, SBX_E_INVALID,
                                   "docker: %s: the expected SHA-256 must be 64 "
                                   "lowercase hex digits",
                                   what);
    return SBX_OK;
}

int docker_blob_copy(struct docker_state *st, sbx_call *call, const char *what,
                     const struct sbx_blob *blob, int fd)
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    char *buf = malloc(CHUNK);
    int rc = SBX_OK;
    if (!md || !buf || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
        rc = st->host->set_error(st->host, call, SBX_E_NOMEM, "out of memory");
        goto out;
    }
    uint64_t total = 0;
    for (;;) {
        if (st->host->cancelled && st->host->cancelled(st->host, call)) {
            rc = st->host->set_error(st->host, call, SBX_E_CANCELLED,
                                     "docker: %s: cancelled", what);
            goto out;
        }
        long n = blob->src->read(blob->src->ctx, buf, CHUNK);
        if (n < 0) {
            rc = SBX_E_IO; /* the source has said why */
            goto out;
        }
        if (n == 0)
            break;
        total += (uint64_t)n;
        if (total > blob->length) {
            rc = st->host->set_error(st->host, call, SBX_E_INVALID,
                                     "docker: %s: the blob is longer than the "
                                     "expected %llu bytes",
                                     what, (unsigned long long)blob->length);
            goto out;
        }
        EVP_DigestUpdate(md, buf, (size_t)n);
        size_t off = 0;
        while (off < (size_t)n) {
            ssize_t w = write(fd, buf + off, (size_t)n - off);
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0) {
                rc = st->host->set_error(st->host, call, SBX_E_IO,
                                         "docker: %s: staging failed: %s", what,
                                         strerror(errno));
                goto out;
            }
            off += (size_t)w;
        }
    }
    if (total != blob->length) {
        rc = st->host->set_error(st->host, call, SBX_E_INVALID,
                                 "docker: %s: the blob has %llu bytes; expected %llu",
                                 what, (unsigned long long)total,
                                 (unsigned long long)blob->length);
        goto out;
    }
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned dlen = 0;
    char hex[65];
    EVP_DigestFinal_ex(md, d, &dlen);
    sbxs_hex(d, 32, hex);
    if (strcmp(hex, blob->sha256) != 0) {
        rc = st->host->set_error(st->host, call, SBX_E_INVALID,
                                 "docker: %s: SHA-256 mismatch: the blob has %s; "
                                 "expected %s",
                                 what, hex, blob->sha256);
        goto out;
    }
    if (fsync(fd) != 0)
        rc = st->host->set_error(st->host, call, SBX_E_IO,
                                 "docker: %s: staging failed: %s", what, strerror(errno));
out:
    EVP_MD_CTX_free(md);
    free(buf);
    return rc;
}
