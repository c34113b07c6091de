/*
 * manifest_apply.c - materializing a manifest in a sandbox through provider
 * operations only (sbx_write, sbx_exec), so it works on every provider.
 *
 * Order: entries by path, parents first. `dir` entries and the directories
 * of a `local_dir` are made with `mkdir -p` (in batches) and, for a `dir`
 * with a mode, `chmod`; files are written by the provider's atomic write.
 * A `local_dir` is walked below its resolved root with openat2
 * (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS): a symlink or special file in it
 * stops the apply naming it, and nothing outside the root is read. A
 * `git_repo` is cloned on the host into a private temporary directory
 * (`git clone`, `git ls-tree` to bound the size of REF's tree, then
 * `git checkout REF`; git run by manifest_git.c), its work tree (without
 * .git) is copied like a `local_dir`, and the clone is removed whatever
 * happened. Local sources are opened beneath the directory descriptor they
 * were checked under (manifest_check.c), never by their path again; a
 * local_dir or a clone copies at most manifest.max_bytes.
 *
 * Users and groups (SBX_CAP_USERS) come first: groups, then users, so that
 * an entry's `group` exists when the entry is written; an entry with a
 * group is given it with `chgrp` (`-R` for a tree). Everything runs as the
 * sandbox's default user, whatever the handle acts as; entries stay owned
 * by it. Last, a run_as user other than root gets the workspace root
 * directory itself (`chown`), so that it can make files there.
 */
#include "api/exec_quiet.h"
#include "api/handle_user.h"
#include "config/manifest_git.h"
#include "config/manifest_internal.h"
#include "base/text_escape.h"
#include "tree_remove.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* Directories per `mkdir -p` exec. */
#define MKDIR_BATCH 128
/* Bounds of one local_dir or cloned tree. */
#define TREE_FILES_MAX 100000
#define TREE_DEPTH_MAX 64
#define READ_CHUNK (256 * 1024)

struct apply {
    sbx_handle *h;
    const struct sbx_manifest *m;
    sbx_cancel *cancel;
    sbx_error *err;
    const char *dirs[MKDIR_BATCH + 4];
    char *owned[MKDIR_BATCH]; /* the batch's strings that we allocated */
    size_t ndirs;
};

static int entry_error(struct apply *a, const struct manifest_entry *e, int rc,
                       const char *what, const char *detail)
{
    char shown[160];
    return sbx_error_set(a->err, rc, "%s:%d: entry %s: %s: %s", a->m->name, e->line,
                         sbxh_text_escape(shown, sizeof shown, e->path, 120), what,
                         detail);
}

static int entry_fail(struct apply *a, const struct manifest_entry *e, int rc,
                      const char *msg)
{
    char shown[160];
    return sbx_error_set(a->err, rc, "%s:%d: entry %s: %s", a->m->name, e->line,
                         sbxh_text_escape(shown, sizeof shown, e->path, 120), msg);
}

static long long max_bytes(const struct apply *a)
{
    return a->m->max_bytes > 0 ? a->m->max_bytes : SBX_MANIFEST_MAX_BYTES_DEFAULT;
}

/* ---- commands in the sandbox ------------------------------------------- */

static int run(struct apply *a, const struct manifest_entry *e, const char *const *argv)
{
    char detail[600];
    int rc = sbxh_exec_quiet(a->h, argv, NULL, NULL, a->cancel, detail, sizeof detail);
    return rc == SBX_OK ? SBX_OK : entry_error(a, e, rc, argv[0], detail);
}

/* Make the batched directories. */
static int flush_dirs(struct apply *a, const struct manifest_entry *e)
{
    if (a->ndirs == 0)
        return SBX_OK;
    const char *argv[MKDIR_BATCH + 4];
    argv[0] = "mkdir";
    argv[1] = "-p";
    argv[2] = "--";
    memcpy(argv + 3, a->dirs, a->ndirs * sizeof *argv);
    argv[3 + a->ndirs] = NULL;
    int rc = run(a, e, argv);
    for (size_t i = 0; i < a->ndirs; i++)
        free(a->owned[i]);
    a->ndirs = 0;
    return rc;
}

/* Queue a directory (owned: freed after the batch). */
static int add_dir(struct apply *a, const struct manifest_entry *e, char *path)
{
    a->dirs[a->ndirs] = path;
    a->owned[a->ndirs++] = path;
    return a->ndirs == MKDIR_BATCH ? flush_dirs(a, e) : SBX_OK;
}

/* ---- sources ------------------------------------------------------------ */

struct mem_source {
    const unsigned char *p;
    size_t left;
};

static long mem_read(void *ctx, void *buf, size_t cap)
{
    struct mem_source *s = ctx;
    size_t n = s->left < cap ? s->left : cap;
    memcpy(buf, s->p, n);
    s->p += n;
    s->left -= n;
    return (long)n;
}

/* A host file; left: how much more may be read (-1: all of it), so that a
 * file growing while it is copied cannot pass the size it was counted at. */
struct fd_source {
    int fd;
    long long left;
};

static long fd_read(void *ctx, void *buf, size_t cap)
{
    struct fd_source *s = ctx;
    if (cap > READ_CHUNK)
        cap = READ_CHUNK;
    if (s->left >= 0 && (long long)cap > s->left)
        cap = (size_t)s->left;
    if (cap == 0)
        return 0;
    for (;;) {
        ssize_t n = read(s->fd, buf, cap);
        if (n >= 0 && s->left >= 0)
            s->left -= n;
        if (n >= 0 || errno != EINTR)
            return n;
    }
}

static int write_fd(struct apply *a, const struct manifest_entry *e, const char *dest,
                    int fd, unsigned mode, long long limit)
{
    struct fd_source fs = {fd, limit};
    struct sbx_source src = SBX_SOURCE_INIT(&fs, fd_read);
    sbx_error why;
    int rc = sbxh_write_as(a->h, SBX_AS_DEFAULT, dest, &src, mode, a->cancel, &why);
    return rc == SBX_OK ? SBX_OK : entry_error(a, e, rc, dest, why.message);
}

/* ---- trees (local_dir, a clone) ----------------------------------------- */

static char *join(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    char *s = malloc(la + lb + 2);
    if (!s)
        return NULL;
    memcpy(s, a, la);
    size_t k = la;
    if (la && lb)
        s[k++] = '/';
    memcpy(s + k, b, lb + 1);
    return s;
}

/* Copy the tree at root (an fd of a host directory) to dest, breadth
 * first: a queue of relative directory paths, one directory open at a
 * time, each opened beneath root with no symlink resolution, each file
 * opened once (O_NONBLOCK: a FIFO put there does not block) and checked on
 * its descriptor. skip_git: leave out a top-level ".git". label names the
 * source in messages; at most max_bytes of file content are copied. */
static int copy_tree(struct apply *a, const struct manifest_entry *e, int root,
                     const char *dest, bool skip_git, const char *label)
{
    size_t cap = 64, head = 0, tail = 0, files = 0;
    long long bytes = 0;
    char **queue = malloc(cap * sizeof *queue);
    int *depth = malloc(cap * sizeof *depth);
    int rc = queue && depth && (queue[tail] = strdup("")) ? SBX_OK
                                                          : sbx_error_set(a->err, SBX_E_NOMEM, "out of memory");
    if (rc == SBX_OK)
        depth[tail++] = 0;
    char shown[200];
    while (rc == SBX_OK && head < tail) {
        char *rel = queue[head];
        int level = depth[head++];
        int dfd = sbxh_manifest_openat(root, rel, O_RDONLY | O_DIRECTORY);
        DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
        if (!d) {
            if (dfd >= 0)
                close(dfd);
            rc = entry_error(a, e, SBX_E_IO, rel[0] ? rel : ".", strerror(errno));
            break;
        }
        struct dirent *de;
        while (rc == SBX_OK && (de = readdir(d))) {
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                continue;
            if (skip_git && !rel[0] && !strcmp(de->d_name, ".git"))
                continue;
            char *child = join(rel, de->d_name);
            char *target = child ? join(dest, child) : NULL;
            struct stat st;
            if (!target) {
                rc = sbx_error_set(a->err, SBX_E_NOMEM, "out of memory");
            } else if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
                rc = entry_error(a, e, SBX_E_IO, child, strerror(errno));
            } else if (++files > TREE_FILES_MAX) {
                rc = entry_error(a, e, SBX_E_INVALID, "source", "more than 100000 files");
            } else if (S_ISDIR(st.st_mode)) {
                if (level + 1 > TREE_DEPTH_MAX) {
                    rc = entry_error(a, e, SBX_E_INVALID, child,
                                     "deeper than 64 levels");
                } else if (tail == cap) {
                    cap *= 2;
                    char **nq = realloc(queue, cap * sizeof *queue);
                    int *nd = nq ? realloc(depth, cap * sizeof *depth) : NULL;
                    if (nq)
                        queue = nq;
                    if (nd)
                        depth = nd;
                    if (!nq || !nd)
                        rc = sbx_error_set(a->err, SBX_E_NOMEM, "out of memory");
                }
                if (rc == SBX_OK) {
                    queue[tail] = child;
                    depth[tail++] = level + 1;
                    child = NULL;
                    rc = add_dir(a, e, target);
                    target = NULL;
                }
            } else if (S_ISREG(st.st_mode)) {
                int fd = sbxh_manifest_openat(root, child, O_RDONLY);
                if (fd < 0 || fstat(fd, &st) != 0)
                    rc = entry_error(a, e, SBX_E_IO,
                                     sbxh_text_escape(shown, sizeof shown, child, 160),
                                     strerror(errno));
                else if (!S_ISREG(st.st_mode))
                    rc = entry_error(a, e, SBX_E_INVALID,
                                     sbxh_text_escape(shown, sizeof shown, child, 160),
                                     "is no longer a regular file");
                else if ((bytes += st.st_size) > max_bytes(a)) {
                    char msg[400];
                    snprintf(msg, sizeof msg,
                             "%s is larger than the limit of %lld bytes "
                             "(manifest.max_bytes)",
                             label, max_bytes(a));
                    rc = entry_fail(a, e, SBX_E_INVALID, msg);
                } else
                    rc = write_fd(a, e, target, fd, (unsigned)(st.st_mode & 0777),
                                  (long long)st.st_size);
                if (fd >= 0)
                    close(fd);
            } else {
                rc = entry_error(a, e, SBX_E_INVALID,
                                 sbxh_text_escape(shown, sizeof shown, child, 160),
                                 S_ISLNK(st.st_mode)
                                     ? "a symlink (manifests copy regular files and "
                                       "directories only)"
                                     : "not a regular file or directory");
            }
            free(child);
            free(target);
        }
        closedir(d);
    }
    if (rc == SBX_OK)
        rc = flush_dirs(a, e);
    for (size_t i = head; i < tail; i++)
        free(queue[i]);
    for (size_t i = 0; i < head; i++)
        free(queue[i]);
    free(queue);
    free(depth);
    return rc;
}

/* ---- git ---------------------------------------------------------------- */

/* Bytes of the regular files below directory fd dir (not following
 * links), at most `depth` levels down. */
static long long tree_bytes(int dir, int depth)
{
    DIR *d = fdopendir(dir);
    if (!d) {
        close(dir);
        return 0;
    }
    long long sum = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        struct stat st;
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
            fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        if (S_ISREG(st.st_mode))
            sum += st.st_size;
        else if (S_ISDIR(st.st_mode) && depth > 0) {
            int sub = sbxh_manifest_openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY);
            if (sub >= 0)
                sum += tree_bytes(sub, depth - 1);
        }
    }
    closedir(d);
    return sum;
}

static long long dir_bytes(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    return fd < 0 ? 0 : tree_bytes(fd, TREE_DEPTH_MAX);
}

/* Sum the blob sizes and count the entries of `git ls-tree -r -l` output. */
static void listing_size(const char *path, long long *bytes, size_t *count)
{
    *bytes = 0;
    *count = 0;
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0) {
        (*count)++;
        /* <mode> SP <type> SP <object> SP+ <size> TAB <path> */
        char *tab = strchr(line, '\t');
        if (!tab || strncmp(strchr(line, ' ') ? strchr(line, ' ') + 1 : "", "blob ", 5))
            continue;
        char *p = tab;
        while (p > line && p[-1] >= '0' && p[-1] <= '9')
            p--;
        *bytes += strtoll(p, NULL, 10);
    }
    free(line);
    fclose(f);
}

static long long mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One git command of an entry; manifest.git_timeout bounds all of the
 * entry's git commands together (deadline: on mono_ms). */
static int git_step(struct apply *a, const struct manifest_entry *e, const char *what,
                    const char *cwd, int out_fd, const char *const *args,
                    long long deadline)
{
    long long left = deadline - mono_ms();
    struct sbx_manifest_git g = {.what = what,
                                 .cwd = cwd,
                                 .out_fd = out_fd,
                                 .fsize_max = max_bytes(a),
                                 .timeout_ms = left > 0 ? left : 1,
                                 .total_ms = a->m->git_timeout_ms > 0
                                                 ? a->m->git_timeout_ms
                                                 : SBX_MANIFEST_GIT_TIMEOUT_MS_DEFAULT,
                                 .cancel = a->cancel};
    sbx_error why;
    sbx_error_clear(&why);
    int rc = sbxh_manifest_git_run(&g, args, &why);
    return rc == SBX_OK ? SBX_OK : entry_fail(a, e, rc, why.message);
}

/* Clone into dir (a private temporary directory), check the size of the
 * clone and of the work tree of REF before checking it out, check it out,
 * copy it. */
static int clone_and_copy(struct apply *a, const struct manifest_entry *e, const char *dir)
{
    char tree[4200], listing[4200], what[1200], msg[1500], url_shown[400];
    snprintf(tree, sizeof tree, "%s/tree", dir);
    snprintf(listing, sizeof listing, "%s/ls-tree", dir);
    const char *url = e->url;
    const char *ref = e->ref ? e->ref : "HEAD";
    sbxh_text_escape(url_shown, sizeof url_shown, e->url, 300);
    long long limit = max_bytes(a);
    long long deadline = mono_ms() + (a->m->git_timeout_ms > 0
                                          ? a->m->git_timeout_ms
                                          : SBX_MANIFEST_GIT_TIMEOUT_MS_DEFAULT);
    /* a host repository: git clones a private copy of its git directory,
     * made through descriptors and checked (manifest_repo.c) */
    char src[4200];
    snprintf(src, sizeof src, "%s/src", dir);
    if (e->resolved) {
        sbx_error why;
        int dfd = mkdir(src, 0700) == 0 ? open(src, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
        if (dfd < 0)
            return entry_error(a, e, SBX_E_IO, src, strerror(errno));
        int crc = sbxh_manifest_copy_repo(a->m, e, dfd, limit, &why);
        close(dfd);
        if (crc != SBX_OK)
            return sbx_error_set(a->err, crc, "%s", why.message);
        url = src;
    }
    snprintf(what, sizeof what, "git clone of %s", url_shown);
    /* --no-local: objects come through upload-pack, never hard links or
     * copies of the source's files; --template=: no hooks or templates */
    const char *clone[] = {"clone",  "--quiet", "--no-checkout", "--template=",
                           e->resolved ? "--no-local" : "--quiet",
                           "--",     url,       tree,            NULL};
    int rc = git_step(a, e, what, NULL, -1, clone, deadline);
    long long got = dir_bytes(tree);
    if ((rc == SBX_OK && got > limit) || (rc != SBX_OK && got >= limit)) {
        snprintf(msg, sizeof msg,
                 "git repository %s: the clone is larger than the limit of %lld bytes "
                 "(manifest.max_bytes)",
                 url_shown, limit);
        return entry_fail(a, e, SBX_E_INVALID, msg);
    }
    if (rc != SBX_OK)
        return rc;
    char ref_shown[200];
    sbxh_text_escape(ref_shown, sizeof ref_shown, ref, 120);
    int out = open(listing, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (out < 0)
        return entry_error(a, e, SBX_E_IO, listing, strerror(errno));
    snprintf(what, sizeof what, "git ls-tree of %s in %s", ref_shown, url_shown);
    const char *ls[] = {"ls-tree", "-r", "-l", "--full-tree", ref, NULL};
    rc = git_step(a, e, what, tree, out, ls, deadline);
    close(out);
    if (rc != SBX_OK)
        return rc;
    long long bytes;
    size_t count;
    listing_size(listing, &bytes, &count);
    if (bytes > limit || count > TREE_FILES_MAX) {
        snprintf(msg, sizeof msg,
                 "git repository %s: the work tree of %s is larger than the limit of "
                 "%lld bytes (manifest.max_bytes) or %d files",
                 url_shown, ref_shown, limit, TREE_FILES_MAX);
        return entry_fail(a, e, SBX_E_INVALID, msg);
    }
    snprintf(what, sizeof what, "git checkout of %s in %s", ref_shown, url_shown);
    const char *checkout[] = {"checkout", "--quiet", "--detach", ref, "--", NULL};
    if ((rc = git_step(a, e, what, tree, -1, checkout, deadline)) != SBX_OK)
        return rc;
    int root = open(tree, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (root < 0)
        return entry_error(a, e, SBX_E_IO, "the clone", strerror(errno));
    char *top = strdup(e->path);
    rc = top ? add_dir(a, e, top) : sbx_error_set(a->err, SBX_E_NOMEM, "out of memory");
    snprintf(what, sizeof what, "git repository %s", url_shown);
    if (rc == SBX_OK)
        rc = copy_tree(a, e, root, e->path, true, what);
    close(root);
    return rc;
}

static int apply_git(struct apply *a, const struct manifest_entry *e)
{
    const char *tmpdir = getenv("TMPDIR");
    if (!tmpdir || tmpdir[0] != '/' || strlen(tmpdir) > 3000)
        tmpdir = "/tmp";
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/sbx-manifest-git-XXXXXX", tmpdir);
    if (!mkdtemp(dir))
        return entry_error(a, e, SBX_E_IO, "a temporary directory", strerror(errno));
    int rc = clone_and_copy(a, e, dir);
    /* the clone goes, whatever happened: one component beneath TMPDIR */
    int parent = open(tmpdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int gone = parent >= 0 ? sbxs_remove_tree(parent, strrchr(dir, '/') + 1) : -errno;
    if (parent >= 0)
        close(parent);
    if (gone != 0 && rc == SBX_OK)
        rc = entry_error(a, e, SBX_E_IO, dir, "the temporary clone cannot be removed");
    return rc;
}

/* ---- entries ------------------------------------------------------------ */

static int apply_entry(struct apply *a, const struct manifest_entry *e)
{
    int rc = SBX_OK;
    switch (e->type) {
    case MF_DIR: {
        char *p = strdup(e->path);
        rc = p ? add_dir(a, e, p) : sbx_error_set(a->err, SBX_E_NOMEM, "out of memory");
        if (rc == SBX_OK && (e->mode >= 0 || e->group))
            rc = flush_dirs(a, e);
        if (rc == SBX_OK && e->mode >= 0) {
            char mode[16];
            snprintf(mode, sizeof mode, "%o", (unsigned)e->mode & 07777u);
            const char *argv[] = {"chmod", mode, "--", e->path, NULL};
            if (rc == SBX_OK)
                rc = run(a, e, argv);
        }
        return rc;
    }
    case MF_FILE: {
        struct mem_source ms = {e->content, e->content_len};
        struct sbx_source src = SBX_SOURCE_INIT(&ms, mem_read);
        sbx_error why;
        rc = sbxh_write_as(a->h, SBX_AS_DEFAULT, e->path, &src,
                           e->mode >= 0 ? (unsigned)e->mode : 0644, a->cancel, &why);
        return rc == SBX_OK ? SBX_OK : entry_error(a, e, rc, "write", why.message);
    }
    case MF_LOCAL_FILE: {
        /* opened once, beneath the directory it was checked under */
        struct stat st;
        int fd = sbxh_manifest_open_source(a->m, e->root, e->rel, O_RDONLY, &st);
        if (fd < 0)
            return entry_error(a, e, SBX_E_IO, "source",
                               fd == -ELOOP || fd == -EXDEV
                                   ? "a component of its path became a symlink"
                                   : strerror(-fd));
        if (!S_ISREG(st.st_mode)) {
            close(fd);
            return entry_error(a, e, SBX_E_INVALID, "source", "is no longer a regular file");
        }
        rc = write_fd(a, e, e->path, fd,
                      e->mode >= 0 ? (unsigned)e->mode : (unsigned)(st.st_mode & 0777), -1);
        close(fd);
        return rc;
    }
    case MF_LOCAL_DIR: {
        struct stat st;
        int root = sbxh_manifest_open_source(a->m, e->root, e->rel, O_RDONLY | O_DIRECTORY,
                                             &st);
        if (root < 0)
            return entry_error(a, e, SBX_E_IO, "source",
                               root == -ELOOP || root == -EXDEV
                                   ? "a component of its path became a symlink"
                                   : strerror(-root));
        char label[300], shown[220];
        snprintf(label, sizeof label, "source \"%s\"",
                 sbxh_text_escape(shown, sizeof shown, e->source, 160));
        char *top = strdup(e->path);
        rc = top ? add_dir(a, e, top) : sbx_error_set(a->err, SBX_E_NOMEM, "out of memory");
        if (rc == SBX_OK)
            rc = copy_tree(a, e, root, e->path, false, label);
        close(root);
        return rc;
    }
    case MF_GIT_REPO:
        return apply_git(a, e);
    default:
        return sbx_error_set(a->err, SBX_E_INTERNAL, "manifest: unknown entry type");
    }
}

/* An entry with a group: its path (a tree: all of it) gets that group.
 * The directories of a tree are still queued: make them first. */
static int apply_group(struct apply *a, const struct manifest_entry *e)
{
    int rc = flush_dirs(a, e);
    const char *one[] = {"chgrp", "--", e->group, e->path, NULL};
    const char *tree[] = {"chgrp", "-R", "--", e->group, e->path, NULL};
    if (rc != SBX_OK)
        return rc;
    return run(a, e, e->type == MF_LOCAL_DIR || e->type == MF_GIT_REPO ? tree : one);
}

/* Groups, then users (before the entries, so that an entry's group
 * exists). */
static int apply_accounts(struct apply *a)
{
    const struct sbx_manifest *m = a->m;
    for (size_t i = 0; i < m->ngroups; i++) {
        const struct manifest_group *g = &m->groups[i];
        struct sbx_group_spec gs = {.size = sizeof gs,
                                    .gid = g->gid < 0 ? 0 : (uint32_t)g->gid,
                                    .name = g->name};
        sbx_error why;
        int rc = sbx_group_add(a->h, &gs, a->cancel, &why);
        if (rc != SBX_OK)
            return sbx_error_set(a->err, rc, "%s:%d: group %s: %s", m->name, g->line,
                                 g->name, why.message);
    }
    for (size_t i = 0; i < m->nusers; i++) {
        const struct manifest_user *u = &m->users[i];
        struct sbx_user_spec us = {.size = sizeof us,
                                   .uid = u->uid < 0 ? 0 : (uint32_t)u->uid,
                                   .name = u->name,
                                   .group = NULL,
                                   .groups = (const char *const *)u->groups};
        sbx_error why;
        int rc = sbx_user_add(a->h, &us, a->cancel, &why);
        if (rc != SBX_OK)
            return sbx_error_set(a->err, rc, "%s:%d: user %s: %s", m->name, u->line,
                                 u->name, why.message);
    }
    return SBX_OK;
}

/* run_as gets the workspace root directory (not what is in it: entries
 * stay the default user's, with their modes and groups), so that it can
 * make files there. */
static int give_root(struct apply *a)
{
    const char *argv[] = {"chown", "--", a->m->run_as, ".", NULL};
    char detail[600];
    int rc = sbxh_exec_quiet(a->h, argv, NULL, NULL, a->cancel, detail, sizeof detail);
    return rc == SBX_OK ? SBX_OK
                        : sbx_error_set(a->err, rc, "%s:%d: run_as %s: giving it the "
                                                    "workspace root: %s",
                                        a->m->name, a->m->run_as_line, a->m->run_as,
                                        detail);
}

static int by_path(const void *x, const void *y)
{
    const struct manifest_entry *const *a = x, *const *b = y;
    for (const char *p = (*a)->path, *q = (*b)->path;; p++, q++) {
        unsigned cp = *p == '/' ? 1 : (unsigned char)*p;
        unsigned cq = *q == '/' ? 1 : (unsigned char)*q;
        if (cp != cq || !cp)
            return (int)cp - (int)cq;
    }
}

/* Test builds only (SBX_TEST_HOOKS): SBX_TEST_MANIFEST_APPLY_HOOK, a shell
 * command run between the check and the apply, lets a test change the
 * sources in that window. */
static void test_hook(void)
{
#ifdef SBX_TEST_HOOKS
    const char *hook = getenv("SBX_TEST_MANIFEST_APPLY_HOOK");
    if (!hook || !*hook)
        return;
    char *argv[] = {"sh", "-c", (char *)hook, NULL};
    pid_t pid;
    int status;
    if (posix_spawn(&pid, "/bin/sh", NULL, NULL, argv, environ) == 0)
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
#endif
}

SBX_API int sbx_manifest_apply(sbx_handle *h, const sbx_manifest *m, sbx_cancel *cancel,
                               sbx_error *err)
{
    sbx_error_clear(err);
    if (!h || !m)
        return sbx_error_set(err, SBX_E_INVALID, "manifest: no sandbox or manifest");
    if (sbx_manifest_has_users(m) &&
        !(sbx_provider_info_caps(sbx_provider_get_info(sbx_handle_provider(h))) & SBX_CAP_USERS))
        return sbx_error_set(err, SBX_E_UNSUPPORTED,
                             "%s: users, groups and run_as need capability \"users\", "
                             "which provider \"%s\" does not declare",
                             m->name, sbx_provider_info_name(sbx_provider_get_info(sbx_handle_provider(h))));
    const struct manifest_entry **order = malloc((m->nentries ? m->nentries : 1) *
                                                 sizeof *order);
    if (!order)
        return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    for (size_t i = 0; i < m->nentries; i++)
        order[i] = &m->entries[i];
    qsort(order, m->nentries, sizeof *order, by_path);
    test_hook();
    struct apply a = {.h = h, .m = m, .cancel = cancel, .err = err};
    int rc = apply_accounts(&a);
    for (size_t i = 0; rc == SBX_OK && i < m->nentries; i++) {
        if (cancel && sbx_cancel_fired(cancel))
            rc = sbx_error_set(err, SBX_E_CANCELLED, "manifest: cancelled");
        else if (order[i]->type != MF_DIR && (rc = flush_dirs(&a, order[i])) != SBX_OK)
            break;
        else if ((rc = apply_entry(&a, order[i])) == SBX_OK && order[i]->group)
            rc = apply_group(&a, order[i]);
    }
    if (rc == SBX_OK && m->nentries)
        rc = flush_dirs(&a, order[m->nentries - 1]);
    if (rc == SBX_OK && m->run_as && strcmp(m->run_as, "root") != 0)
        rc = give_root(&a);
    for (size_t i = 0; i < a.ndirs; i++)
        free(a.owned[i]);
    free(order);
    return rc;
}
