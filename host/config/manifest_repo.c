/*
 * manifest_repo.c - what a git_repo entry whose url is a host path may make
 * git read. The url's directory is confined (manifest_check.c), but git
 * follows pointers inside a repository to other places: a gitfile (`.git`
 * holding "gitdir: PATH"), a `.git` symlink, `commondir`,
 * `objects/info/alternates` (and http-alternates), `info/grafts`, symlinked
 * objects, packs or refs, and config that includes other files or names
 * alternates or promisor remotes. A repository holding any of these is
 * refused, naming the file; everything is looked at through descriptors
 * beneath the confined directory, never followed. To clone, the git
 * directory is copied the same way into sbx's private temporary directory
 * and the copy is checked: git reads only that copy, so a change to the
 * source after the check cannot reach it.
 */
#include "config/manifest_internal.h"
#include "base/text_escape.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* Bounds of the walk of one git directory. */
#define REPO_FILES_MAX 200000
#define REPO_DEPTH_MAX 16
#define REPO_CONFIG_MAX (256 * 1024)

static int refuse(const struct sbx_manifest *m, const struct manifest_entry *e,
                  sbx_error *err, const char *file, const char *why)
{
    char shown[160], fshown[200];
    return sbx_error_set(err, SBX_E_INVALID, "%s:%d: entry %s: git repository %s: %s %s",
                         m->name, e->line, sbxh_text_escape(shown, sizeof shown, e->path, 120),
                         e->url, sbxh_text_escape(fshown, sizeof fshown, file, 160), why);
}

/* Files by which a repository names another one. */
static const char *const pointers[] = {"commondir", "objects/info/alternates",
                                       "objects/info/http-alternates", "info/grafts",
                                       "gitdir"};

/* Config keys (lowercase substrings) that make git read elsewhere. */
static const char *const config_words[] = {"include", "alternate", "promisor",
                                           "partialclone", "worktree"};

static int check_config(const struct sbx_manifest *m, const struct manifest_entry *e,
                        int gitdir, const char *shown_dir, sbx_error *err)
{
    char name[PATH_MAX];
    snprintf(name, sizeof name, "%sconfig", shown_dir);
    int fd = sbxh_manifest_openat(gitdir, "config", O_RDONLY);
    if (fd < 0)
        return errno == ENOENT ? SBX_OK : refuse(m, e, err, name, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > REPO_CONFIG_MAX) {
        close(fd);
        return refuse(m, e, err, name, "is not a regular file of at most 256 KiB");
    }
    size_t got = 0;
    char *text = sbxh_manifest_read_fd(fd, (size_t)st.st_size, &got);
    close(fd);
    if (!text)
        return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    for (size_t i = 0; i < got; i++)
        text[i] = text[i] ? (char)(text[i] >= 'A' && text[i] <= 'Z' ? text[i] + 32 : text[i])
                          : ' ';
    text[got] = '\0';
    int rc = SBX_OK;
    for (size_t i = 0; rc == SBX_OK && i < sizeof config_words / sizeof *config_words; i++)
        if (strstr(text, config_words[i])) {
            char why[120];
            snprintf(why, sizeof why, "mentions \"%s\" (config that makes git read other "
                                      "files or repositories is refused)",
                     config_words[i]);
            rc = refuse(m, e, err, name, why);
        }
    free(text);
    return rc;
}

/* Copy the regular file `rel` of gitdir (opened once, beneath it, checked
 * on its descriptor) to `rel` in dest; *bytes counts against max. */
static int copy_file(const struct sbx_manifest *m, const struct manifest_entry *e,
                     int gitdir, const char *rel, int dest, const char *name,
                     long long *bytes, long long max, sbx_error *err)
{
    struct stat st;
    int in = sbxh_manifest_openat(gitdir, rel, O_RDONLY);
    if (in < 0 || fstat(in, &st) != 0 || !S_ISREG(st.st_mode)) {
        int e2 = errno;
        if (in >= 0)
            close(in);
        return refuse(m, e, err, name, in < 0 ? strerror(e2) : "is no longer a regular file");
    }
    int out = openat(dest, rel, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    int rc = SBX_OK;
    if (out < 0)
        rc = sbx_error_set(err, SBX_E_IO, "%s: copying %s: %s", m->name, name,
                           strerror(errno));
    char buf[65536];
    while (rc == SBX_OK) {
        ssize_t n = read(in, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = refuse(m, e, err, name, strerror(errno));
            break;
        }
        if (n == 0)
            break;
        if ((*bytes += n) > max) {
            char why[160];
            snprintf(why, sizeof why, "makes the repository larger than the limit of %lld "
                                      "bytes (manifest.max_bytes)",
                     max);
            rc = refuse(m, e, err, name, why);
            break;
        }
        for (ssize_t done = 0; rc == SBX_OK && done < n;) {
            ssize_t w = write(out, buf + done, (size_t)(n - done));
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0)
                rc = sbx_error_set(err, SBX_E_IO, "%s: copying %s: %s", m->name, name,
                                   strerror(errno));
            else
                done += w;
        }
    }
    if (out >= 0 && close(out) != 0 && rc == SBX_OK)
        rc = sbx_error_set(err, SBX_E_IO, "%s: copying %s: %s", m->name, name,
                           strerror(errno));
    close(in);
    return rc;
}

/* Walk the git directory: directories and regular files only. With dest
 * >= 0, copy them there (at most max bytes). */
static int walk(const struct sbx_manifest *m, const struct manifest_entry *e, int gitdir,
                const char *shown_dir, int dest, long long max, sbx_error *err)
{
    size_t cap = 64, head = 0, tail = 0, files = 0;
    long long bytes = 0;
    char **queue = malloc(cap * sizeof *queue);
    int *depth = malloc(cap * sizeof *depth);
    int rc = queue && depth && (queue[tail] = strdup("")) ? SBX_OK
                                                          : sbx_error_set(err, SBX_E_NOMEM,
                                                                          "out of memory");
    if (rc == SBX_OK)
        depth[tail++] = 0;
    char name[PATH_MAX + 64];
    while (rc == SBX_OK && head < tail) {
        char *rel = queue[head];
        int level = depth[head++];
        int dfd = sbxh_manifest_openat(gitdir, rel, O_RDONLY | O_DIRECTORY);
        DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
        if (!d) {
            snprintf(name, sizeof name, "%s%s", shown_dir, rel);
            rc = refuse(m, e, err, name, strerror(errno));
            if (dfd >= 0)
                close(dfd);
            break;
        }
        struct dirent *de;
        while (rc == SBX_OK && (de = readdir(d))) {
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                continue;
            snprintf(name, sizeof name, "%s%s%s%s", shown_dir, rel, rel[0] ? "/" : "",
                     de->d_name);
            struct stat st;
            if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
                rc = refuse(m, e, err, name, strerror(errno));
            else if (++files > REPO_FILES_MAX)
                rc = refuse(m, e, err, shown_dir, "holds more than 200000 files");
            else if (S_ISLNK(st.st_mode))
                rc = refuse(m, e, err, name, "is a symlink (git would follow it)");
            else if (S_ISDIR(st.st_mode)) {
                if (level + 1 > REPO_DEPTH_MAX) {
                    rc = refuse(m, e, err, name, "is deeper than 16 levels");
                    break;
                }
                if (tail == cap) {
                    cap *= 2;
                    char **nq = realloc(queue, cap * sizeof *queue);
                    if (nq)
                        queue = nq;
                    int *nd = nq ? realloc(depth, cap * sizeof *depth) : NULL;
                    if (nd)
                        depth = nd;
                    if (!nq || !nd) {
                        rc = sbx_error_set(err, SBX_E_NOMEM, "out of memory");
                        break;
                    }
                }
                size_t l = strlen(rel) + strlen(de->d_name) + 2;
                if (!(queue[tail] = malloc(l))) {
                    rc = sbx_error_set(err, SBX_E_NOMEM, "out of memory");
                    break;
                }
                snprintf(queue[tail], l, "%s%s%s", rel, rel[0] ? "/" : "", de->d_name);
                if (dest >= 0 && mkdirat(dest, queue[tail], 0700) != 0) {
                    rc = sbx_error_set(err, SBX_E_IO, "%s: copying %s: %s", m->name, name,
                                       strerror(errno));
                    free(queue[tail]);
                    break;
                }
                depth[tail++] = level + 1;
            } else if (!S_ISREG(st.st_mode)) {
                rc = refuse(m, e, err, name, "is not a regular file or directory");
            } else if (dest >= 0) {
                char path[PATH_MAX];
                snprintf(path, sizeof path, "%s%s%s", rel, rel[0] ? "/" : "", de->d_name);
                rc = copy_file(m, e, gitdir, path, dest, name, &bytes, max, err);
            }
        }
        closedir(d);
    }
    for (size_t i = 0; i < tail; i++)
        free(queue[i]);
    free(queue);
    free(depth);
    return rc;
}

/* Open the git directory of the entry's repository beneath its root: the
 * directory itself (bare) or its .git directory. *top and *gitdir are
 * descriptors the caller closes (one, when they are the same). */
static int open_gitdir(const struct sbx_manifest *m, const struct manifest_entry *e,
                       int *top_out, int *gitdir_out, const char **shown_out, sbx_error *err)
{
    struct stat st;
    int top = sbxh_manifest_open_source(m, e->root, e->rel, O_RDONLY | O_DIRECTORY, &st);
    if (top < 0)
        return refuse(m, e, err, ".", strerror(-top));
    int gitdir = top;
    const char *shown_dir = "";
    if (fstatat(top, ".git", &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (!S_ISDIR(st.st_mode)) {
            close(top);
            return refuse(m, e, err, ".git",
                          S_ISLNK(st.st_mode)
                              ? "is a symlink (it would make git read another repository)"
                              : "is not a directory (a gitfile names another repository)");
        }
        gitdir = sbxh_manifest_openat(top, ".git", O_RDONLY | O_DIRECTORY);
        shown_dir = ".git/";
        if (gitdir < 0) {
            int e2 = errno;
            close(top);
            return refuse(m, e, err, ".git", strerror(e2));
        }
    } else if (errno != ENOENT) {
        int e2 = errno;
        close(top);
        return refuse(m, e, err, ".git", strerror(e2));
    }
    *top_out = top;
    *gitdir_out = gitdir;
    *shown_out = shown_dir;
    return SBX_OK;
}

/* HEAD and objects there; no pointer file; config that reads nothing else. */
static int check_gitdir(const struct sbx_manifest *m, const struct manifest_entry *e,
                        int gitdir, const char *shown_dir, sbx_error *err)
{
    struct stat st;
    int rc = SBX_OK;
    char name[64];
    if (fstatat(gitdir, "HEAD", &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
        fstatat(gitdir, "objects", &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(name, sizeof name, "%s", shown_dir[0] ? ".git" : ".");
        rc = refuse(m, e, err, name, "is not a git directory (no HEAD file and objects "
                                     "directory)");
    }
    for (size_t i = 0; rc == SBX_OK && i < sizeof pointers / sizeof *pointers; i++)
        if (fstatat(gitdir, pointers[i], &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT) {
            snprintf(name, sizeof name, "%s%s", shown_dir, pointers[i]);
            rc = refuse(m, e, err, name, "names another repository (refused: git would "
                                         "read it)");
        }
    if (rc == SBX_OK)
        rc = check_config(m, e, gitdir, shown_dir, err);
    return rc;
}

int sbxh_manifest_check_repo(const struct sbx_manifest *m, const struct manifest_entry *e,
                             sbx_error *err)
{
    int top, gitdir;
    const char *shown_dir;
    int rc = open_gitdir(m, e, &top, &gitdir, &shown_dir, err);
    if (rc != SBX_OK)
        return rc;
    rc = check_gitdir(m, e, gitdir, shown_dir, err);
    if (rc == SBX_OK)
        rc = walk(m, e, gitdir, shown_dir, -1, 0, err);
    if (gitdir != top)
        close(gitdir);
    close(top);
    return rc;
}

int sbxh_manifest_copy_repo(const struct sbx_manifest *m, const struct manifest_entry *e,
                            int dest, long long max_bytes, sbx_error *err)
{
    int top, gitdir;
    const char *shown_dir;
    int rc = open_gitdir(m, e, &top, &gitdir, &shown_dir, err);
    if (rc != SBX_OK)
        return rc;
    rc = walk(m, e, gitdir, shown_dir, dest, max_bytes, err);
    /* what git will read is the copy: it is what is checked */
    if (rc == SBX_OK)
        rc = check_gitdir(m, e, dest, shown_dir, err);
    if (gitdir != top)
        close(gitdir);
    close(top);
    return rc;
}
