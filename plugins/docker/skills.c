/*
 * skills.c - SKILLS: skill_install and the repair of published skills.
 *
 * The session's skills/ host directory is bound read-only at
 * /workspace/skills when the container is created (resources.c); a skill
 * is the directory skills/<name>, so the sandbox sees it as
 * /workspace/skills/<name>/ and cannot write into it.
 *
 * Install: the bundle (tar, tar.gz or zip) is streamed into a locked
 * staging file while its size and SHA-256 are checked; only a verified
 * bundle is extracted, into a staging directory, with libsbx's archive
 * entry checks (archive_check.c: regular files and directories only,
 * relative UTF-8 names without "..", no duplicates, size limits). Then:
 *
 *   1. skill-state/<name>/ receives the verified bundle and a "meta" file
 *      (its SHA-256, length and format, and the digest of the extracted
 *      tree), replacing the previous state by an exchange of directories;
 *   2. skills/<name> is published the same way: renameat2(RENAME_EXCHANGE)
 *      swaps the new tree in whole, then the old one is removed.
 *   A crash between the two leaves a state whose files are not published
 *   yet; the repair installs them (rolling forward).
 *
 * Repair (at attach, i.e. before a restarted process uses the sandbox):
 * every skill in skill-state/ is checked against its published tree's
 * digest; a tree that is missing or differs (a crash between the two
 * steps above, or damage on the host) is extracted again from the kept
 * bundle after re-checking the bundle's SHA-256. A skill whose bundle is
 * damaged too is removed (better absent than wrong) and the removal is
 * logged. A published skill without state was never completely installed
 * and is removed.
 *
 * Bundles are kept until the session is destroyed, so a skill costs its
 * bundle's size plus its files' on the daemon's host.
 */
#include "docker.h"

#include "archive_check.h"
#include "confine.h"
#include "fd_source.h"
#include "skill_name.h"

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

/* ---- tree digest ---------------------------------------------------------- */

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int hash_file(int dfd, const char *name, EVP_MD_CTX *tree, char *buf)
{
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -1;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    int rc = md && EVP_DigestInit_ex(md, EVP_sha256(), NULL) == 1 ? 0 : -1;
    for (;;) {
        if (rc != 0)
            break;
        ssize_t n = read(fd, buf, CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            rc = -1;
        if (n <= 0)
            break;
        EVP_DigestUpdate(md, buf, (size_t)n);
    }
    close(fd);
    if (rc == 0) {
        unsigned char d[EVP_MAX_MD_SIZE];
        unsigned dlen = 0;
        EVP_DigestFinal_ex(md, d, &dlen);
        EVP_DigestUpdate(tree, d, dlen);
    }
    EVP_MD_CTX_free(md);
    return rc;
}

/* Feed a canonical description of the tree below dfd into the digest:
 * entries in name order, each with its relative path, type, execute bit,
 * size and content hash. Anything but files and directories makes it
 * differ from every extracted tree (-1). */
static int digest_tree(int dfd, const char *prefix, EVP_MD_CTX *tree, char *buf,
                       int depth)
{
    if (depth > 128)
        return -1;
    int fd = dup(dfd);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    char **names = NULL;
    size_t n = 0;
    int rc = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char **more = realloc(names, (n + 1) * sizeof *names);
        if (!more || !(more[n] = strdup(de->d_name))) {
            names = more ? more : names;
            rc = -1;
            break;
        }
        names = more;
        n++;
    }
    closedir(d);
    if (rc == 0 && n > 1)
        qsort(names, n, sizeof *names, cmp_names);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        struct stat s;
        char path[4096 + 8];
        snprintf(path, sizeof path, "%s%s", prefix, names[i]);
        if (fstatat(dfd, names[i], &s, AT_SYMLINK_NOFOLLOW) != 0) {
            rc = -1;
        } else if (S_ISDIR(s.st_mode)) {
            char line[4200];
            int k = snprintf(line, sizeof line, "d %s\n", path);
            EVP_DigestUpdate(tree, line, (size_t)k);
            int sub = openat(dfd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            char next[4200];
            snprintf(next, sizeof next, "%s/", path);
            rc = sub < 0 ? -1 : digest_tree(sub, next, tree, buf, depth + 1);
            if (sub >= 0)
                close(sub);
        } else if (S_ISREG(s.st_mode)) {
            char line[4200];
            int k = snprintf(line, sizeof line, "f %c %lld %s\n",
                             (s.st_mode & 0111) ? 'x' : '-', (long long)s.st_size, path);
            EVP_DigestUpdate(tree, line, (size_t)k);
            rc = hash_file(dfd, names[i], tree, buf);
        } else {
            rc = -1;
        }
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return rc;
}

/* Digest of the tree at dirfd/name into hex; -1 when it is missing or
 * holds something an extraction never makes. */
static int tree_digest_at(int dirfd, const char *name, char hex[65])
{
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -1;
    EVP_MD_CTX *tree = EVP_MD_CTX_new();
    char *buf = malloc(CHUNK);
    int rc = tree && buf && EVP_DigestInit_ex(tree, EVP_sha256(), NULL) == 1
                 ? digest_tree(fd, "", tree, buf, 0)
                 : -1;
    close(fd);
    if (rc == 0) {
        unsigned char d[EVP_MAX_MD_SIZE];
        unsigned dlen = 0;
        EVP_DigestFinal_ex(tree, d, &dlen);
        for (unsigned i = 0; i < 32; i++)
            snprintf(hex + 2 * i, 3, "%02x", d[i]);
    }
    EVP_MD_CTX_free(tree);
    free(buf);
    return rc;
}

/* ---- extraction and publication --------------------------------------- */

/* A fresh locked directory in staging: its name into name, its fd (which
 * holds the lock) into *fd. */
static int staging_dir(struct docker_state *st, sbx_call *call, int sdfd,
                       const char *kind, char *name, size_t cap, int *fd)
{
    *fd = -1;
    if (docker_staging_name(kind, name, cap) != 0 || mkdirat(sdfd, name, 0755) != 0)
        return st->host->set_error(st->host, call, SBX_E_IO,
                                   "docker: cannot create a staging directory: %s",
                                   strerror(errno));
    *fd = openat(sdfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (*fd < 0 || flock(*fd, LOCK_EX) != 0) {
        int e = errno;
        if (*fd >= 0)
            close(*fd);
        *fd = -1;
        unlinkat(sdfd, name, AT_REMOVEDIR);
        return st->host->set_error(st->host, call, SBX_E_IO,
                                   "docker: cannot lock a staging directory: %s",
                                   strerror(e));
    }
    return SBX_OK;
}

/* Extract the bundle at bundle_fd (from its start) into the staging
 * directory tfd with the archive entry checks. */
static int extract(struct docker_state *st, sbx_call *call, const char *name,
                   int bundle_fd, const char *format, int tfd)
{
    if (lseek(bundle_fd, 0, SEEK_SET) != 0)
        return st->host->set_error(st->host, call, SBX_E_IO, "docker: skill %s: %s",
                                   name, strerror(errno));
    struct sbxp_fd_source fs;
    struct sbx_source src = sbxp_fd_source(&fs, bundle_fd, -1);
    struct sbxs_error e;
    sbxs_error_clear(&e);
    int rc = sbxs_archive_extract(&src, format, tfd, NULL, &e);
    if (rc != SBX_OK)
        return st->host->set_error(st->host, call, rc,
                                   "docker: skill %s: the bundle is refused: %s", name,
                                   e.message);
    return SBX_OK;
}

/* Move staging/<tmp> to dir/<name>, replacing what is there whole; the
 * replaced tree is removed. */
static int publish(struct docker_state *st, sbx_call *call, int sdfd, const char *tmp,
                   int dirfd, const char *name, const char *what)
{
    if (renameat2(sdfd, tmp, dirfd, name, RENAME_NOREPLACE) == 0)
        return SBX_OK;
    if (errno == EEXIST && renameat2(sdfd, tmp, dirfd, name, RENAME_EXCHANGE) == 0) {
        int r = sbxp_confine_remove_tree(sdfd, tmp); /* the previous version */
        if (r < 0)
            st->host->log(st->host, SBX_LOG_WARN,
                          "docker: removing the previous %s of %s: %s", what, name,
                          strerror(-r));
        return SBX_OK;
    }
    return st->host->set_error(st->host, call, SBX_E_IO,
                               "docker: publishing the %s of skill %s failed: %s", what,
                               name, strerror(errno));
}

static int open_dir(struct docker_state *st, sbx_call *call, const char *path, int *fd)
{
    *fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (*fd < 0)
        return st->host->set_error(st->host, call, SBX_E_IO, "docker: cannot open %s: %s",
                                   path, strerror(errno));
    return SBX_OK;
}

/* Extract a verified bundle into a new locked staging directory: its name
 * into tmp, its lock into *tfd, the digest of the tree into digest. On
 * failure nothing is left. */
static int extract_staged(struct docker_state *st, sbx_call *call, int sdfd,
                          const char *name, int bundle_fd, const char *format,
                          char tmp[64], int *tfd, char digest[65])
{
    int rc = staging_dir(st, call, sdfd, "skill", tmp, 64, tfd);
    if (rc != SBX_OK)
        return rc;
    rc = extract(st, call, name, bundle_fd, format, *tfd);
    if (rc == SBX_OK && tree_digest_at(sdfd, tmp, digest) != 0)
        rc = st->host->set_error(st->host, call, SBX_E_IO,
                                 "docker: skill %s: cannot read back the extracted "
                                 "tree",
                                 name);
    if (rc != SBX_OK) {
        sbxp_confine_remove_tree(sdfd, tmp);
        close(*tfd);
        *tfd = -1;
    }
    return rc;
}

/* Publish staging/<tmp> as skills/<name>; the staging lock tfd is closed. */
static int publish_files(sbx_sandbox *sb, sbx_call *call, int sdfd, const char *tmp,
                         int tfd, const char *name)
{
    int skfd = -1;
    int rc = open_dir(sb->st, call, sb->skills_src, &skfd);
    if (rc == SBX_OK)
        rc = publish(sb->st, call, sdfd, tmp, skfd, name, "files");
    if (rc != SBX_OK)
        sbxp_confine_remove_tree(sdfd, tmp);
    if (skfd >= 0)
        close(skfd);
    close(tfd);
    return rc;
}

/* The meta file of a skill's state. */
struct meta {
    char sha256[65];
    char format[8];
    unsigned long long length;
    char tree[65];
};

static int meta_write(int dirfd, const struct meta *m)
{
    int fd = openat(dirfd, "meta", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                    0600);
    if (fd < 0)
        return -1;
    char buf[256];
    int n = snprintf(buf, sizeof buf, "sha256 %s\nformat %s\nlength %llu\ntree %s\n",
                     m->sha256, m->format, m->length, m->tree);
    int rc = write(fd, buf, (size_t)n) == n && fsync(fd) == 0 ? 0 : -1;
    close(fd);
    return rc;
}

static int meta_read(int dirfd, struct meta *m)
{
    int fd = openat(dirfd, "meta", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char buf[512];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    if (sscanf(buf, "sha256 %64s\nformat %7s\nlength %llu\ntree %64s", m->sha256,
               m->format, &m->length, m->tree) != 4 ||
        !sbxp_skill_format(m->format))
        return -1;
    return 0;
}

int docker_skill_install(sbx_sandbox *sb, sbx_call *call, const char *name,
                         const struct sbx_blob *bundle)
{
    struct docker_state *st = sb->st;
    if (!sbxp_skill_name_valid(name))
        return st->host->set_error(st->host, call, SBX_E_INVALID,
                                   "docker: skill name \"%.80s\" is not valid (1 to %d "
                                   "of A-Z a-z 0-9 . _ -, not starting with . or -)",
                                   name ? name : "", SBXP_SKILL_NAME_MAX);
    char what[128];
    snprintf(what, sizeof what, "skill %s", name);
    int rc = docker_blob_args(st, call, what, bundle);
    if (rc != SBX_OK)
        return rc;
    const char *format = sbxp_skill_format(bundle->size > offsetof(struct sbx_blob, format)
                                           ? bundle->format
                                           : NULL);
    if (!format)
        return st->host->set_error(st->host, call, SBX_E_INVALID,
                                   "docker: skill %s: bundle format \"%s\" is not "
                                   "supported (tar, tar.gz, zip)",
                                   name, bundle->format ? bundle->format : "(none)");
    if (!sb->skills_src || !sb->skill_state)
        return st->host->set_error(st->host, call, SBX_E_UNSUPPORTED,
                                   "docker: skill %s: container %.12s was created "
                                   "without the %s mount",
                                   name, sb->id, DOCKER_SKILLS);
    int sdfd = -1, bfd = -1, stfd = -1, ssfd = -1, tfd = -1;
    char bname[64] = "", stname[64] = "", tmp[64] = "";
    if ((rc = docker_staging_open(sb, call, what, &sdfd)) != SBX_OK)
        return rc;
    docker_staging_sweep(sdfd);

    /* 1. the bundle, verified, inside a new state directory */
    rc = staging_dir(st, call, sdfd, "state", stname, sizeof stname, &stfd);
    if (rc != SBX_OK) {
        stname[0] = '\0';
        goto out;
    }
    rc = docker_staging_file(st, call, sdfd, "bundle", bname, sizeof bname, &bfd);
    if (rc != SBX_OK) {
        bname[0] = '\0';
        goto out;
    }
    if ((rc = docker_blob_copy(st, call, what, bundle, bfd)) != SBX_OK)
        goto out;
    if (renameat(sdfd, bname, stfd, "bundle") != 0) {
        rc = st->host->set_error(st->host, call, SBX_E_IO, "docker: %s: %s", what,
                                 strerror(errno));
        goto out;
    }
    bname[0] = '\0';

    /* 2. extracted with the entry checks into staging */
    struct meta m;
    memset(&m, 0, sizeof m);
    snprintf(m.sha256, sizeof m.sha256, "%s", bundle->sha256);
    snprintf(m.format, sizeof m.format, "%s", format);
    m.length = bundle->length;
    rc = extract_staged(st, call, sdfd, name, bfd, format, tmp, &tfd, m.tree);
    if (rc != SBX_OK)
        goto out;
    if (meta_write(stfd, &m) != 0) {
        rc = st->host->set_error(st->host, call, SBX_E_IO,
                                 "docker: %s: writing its state failed: %s", what,
                                 strerror(errno));
        goto out;
    }
    /* 3. the state first, then the files: a crash in between leaves a state
     * whose files the repair at attach installs (rolling forward) */
    if ((rc = open_dir(st, call, sb->skill_state, &ssfd)) != SBX_OK)
        goto out;
    rc = publish(st, call, sdfd, stname, ssfd, name, "state");
    if (rc != SBX_OK)
        goto out;
    stname[0] = '\0';
    rc = publish_files(sb, call, sdfd, tmp, tfd, name);
    tfd = -1;
    tmp[0] = '\0';
out:
    if (tfd >= 0) {
        sbxp_confine_remove_tree(sdfd, tmp);
        close(tfd);
    }
    if (bname[0])
        unlinkat(sdfd, bname, 0);
    if (stname[0])
        sbxp_confine_remove_tree(sdfd, stname);
    if (bfd >= 0)
        close(bfd);
    if (stfd >= 0)
        close(stfd);
    if (ssfd >= 0)
        close(ssfd);
    close(sdfd);
    return rc;
}

/* ---- repair -------------------------------------------------------------- */

/* Re-check the bundle of state directory `name` and republish it. */
static int reinstall(sbx_sandbox *sb, sbx_call *call, int sdfd, int ssfd,
                     const char *name, const struct meta *m)
{
    struct docker_state *st = sb->st;
    int dfd = openat(ssfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int bfd = dfd >= 0 ? openat(dfd, "bundle", O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : -1;
    if (dfd >= 0)
        close(dfd);
    if (bfd < 0)
        return SBX_E_NOT_FOUND;
    struct sbxp_fd_source fs;
    struct sbx_source src = sbxp_fd_source(&fs, bfd, -1);
    struct sbx_blob b = {sizeof b, &src, m->length, m->sha256, m->format};
    /* check the kept bundle the way a new one is checked, into a scratch
     * file (bounded memory: streamed) */
    char scratch[64];
    int xfd = -1;
    int rc = docker_staging_file(st, call, sdfd, "bundle", scratch, sizeof scratch, &xfd);
    if (rc == SBX_OK) {
        rc = docker_blob_copy(st, call, name, &b, xfd);
        unlinkat(sdfd, scratch, 0);
        close(xfd);
    }
    if (rc == SBX_OK) {
        char tmp[64], digest[65];
        int tfd = -1;
        rc = extract_staged(st, call, sdfd, name, bfd, m->format, tmp, &tfd, digest);
        if (rc == SBX_OK && strcmp(digest, m->tree) != 0) {
            sbxp_confine_remove_tree(sdfd, tmp);
            close(tfd);
            rc = SBX_E_PROTOCOL;
        } else if (rc == SBX_OK) {
            rc = publish_files(sb, call, sdfd, tmp, tfd, name);
        }
    }
    close(bfd);
    return rc;
}

int docker_skills_repair(sbx_sandbox *sb, sbx_call *call)
{
    struct docker_state *st = sb->st;
    if (!sb->skills_src || !sb->skill_state || !sb->staging)
        return SBX_OK; /* a container without skills */
    int sdfd = -1, ssfd = -1, skfd = -1;
    /* the provider's own directories may have vanished with the host's */
    if (docker_res_mkdirs(sb->staging, 0700) != 0 ||
        docker_res_mkdirs(sb->skill_state, 0700) != 0)
        return st->host->set_error(st->host, call, SBX_E_IO,
                                   "docker: container %.12s: cannot make %s: %s", sb->id,
                                   sb->staging, strerror(errno));
    int rc = docker_staging_open(sb, call, "repairing skills", &sdfd);
    if (rc == SBX_OK)
        rc = open_dir(st, call, sb->skill_state, &ssfd);
    if (rc == SBX_OK)
        rc = open_dir(st, call, sb->skills_src, &skfd);
    if (rc != SBX_OK)
        goto out;
    docker_staging_sweep(sdfd);

    /* published skills without a state: never completely installed */
    DIR *d = fdopendir(dup(skfd));
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (faccessat(ssfd, de->d_name, F_OK, AT_SYMLINK_NOFOLLOW) != 0) {
            st->host->log(st->host, SBX_LOG_WARN,
                          "docker: container %.12s: removing skill %s, which has no "
                          "recorded bundle",
                          sb->id, de->d_name);
            sbxp_confine_remove_tree(skfd, de->d_name);
        }
    }
    if (d)
        closedir(d);

    d = fdopendir(dup(ssfd));
    while (rc == SBX_OK && d && (de = readdir(d))) {
        const char *name = de->d_name;
        if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
            continue;
        struct meta m;
        int sfd = openat(ssfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int ok = sfd >= 0 && meta_read(sfd, &m) == 0;
        if (sfd >= 0)
            close(sfd);
        char have[65];
        if (ok && sbxp_skill_name_valid(name) && tree_digest_at(skfd, name, have) == 0 &&
            strcmp(have, m.tree) == 0)
            continue; /* intact */
        int r = ok && sbxp_skill_name_valid(name) ? reinstall(sb, call, sdfd, ssfd, name, &m)
                                       : SBX_E_NOT_FOUND;
        if (r == SBX_OK) {
            st->host->log(st->host, SBX_LOG_INFO,
                          "docker: container %.12s: skill %s was missing or damaged "
                          "and was restored from its bundle",
                          sb->id, name);
            continue;
        }
        if (r == SBX_E_CANCELLED) {
            rc = r;
            break;
        }
        /* fail closed: better no skill than a wrong one */
        st->host->log(st->host, SBX_LOG_ERROR,
                      "docker: container %.12s: skill %s is damaged and its bundle "
                      "cannot restore it; removed (install it again)",
                      sb->id, name);
        sbxp_confine_remove_tree(skfd, name);
        sbxp_confine_remove_tree(ssfd, name);
    }
    if (d)
        closedir(d);
out:
    if (sdfd >= 0)
        close(sdfd);
    if (ssfd >= 0)
        close(ssfd);
    if (skfd >= 0)
        close(skfd);
    return rc;
}
