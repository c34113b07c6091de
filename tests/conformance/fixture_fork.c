/*
 * fixture_fork.c - cfproc's fork (SBX_CAP_FORK): the source's workspace
 * tree copied into the new sandbox's through descriptors (every name
 * opened beneath its directory's descriptor, nothing followed), with the
 * defects the fork cases must catch, and the record of which fork came
 * from which owner (for fork_keeps_old_key).
 */
#include "fixture_fork.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Deep enough for any case's tree; a bound, so a loop cannot recurse. */
#define FXF_DEPTH_MAX 32

static int copy_bytes(int from, int to)
{
    char buf[65536];
    for (;;) {
        ssize_t n = read(from, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -1 : 0;
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(to, buf + off, (size_t)(n - off));
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0)
                return -1;
            off += w;
        }
    }
}

/* Copy the regular file name (opened with open_flags beneath sfd) to a new
 * file of that name beneath dfd with mode. */
static int copy_file(int sfd, int dfd, const char *name, int open_flags, mode_t mode)
{
    int in = openat(sfd, name, O_RDONLY | O_CLOEXEC | open_flags);
    if (in < 0)
        return -1;
    int out = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (out < 0) {
        close(in);
        return -1;
    }
    int rc = copy_bytes(in, out);
    if (rc == 0)
        rc = fchmod(out, mode);
    close(in);
    if (close(out) != 0)
        rc = -1;
    return rc;
}

static int copy_dir(int sfd, int dfd, int mode, int depth, char *why, size_t cap);

static int copy_entry(int sfd, int dfd, const char *name, int mode, int depth, char *why,
                      size_t cap)
{
    struct stat st;
    if (fstatat(sfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return snprintf(why, cap, "stat %s: %s", name, strerror(errno)), -1;
    mode_t perm = st.st_mode & 07777;
    if (S_ISLNK(st.st_mode)) {
        struct stat target;
        /* The deliberate defect of fork_follows_symlinks: a link to a file
         * becomes a copy of the file (reading through it, never writing). */
        if (mode == FXF_FOLLOWS_SYMLINKS && fstatat(sfd, name, &target, 0) == 0 &&
            S_ISREG(target.st_mode))
            return copy_file(sfd, dfd, name, 0, target.st_mode & 0777) == 0
                       ? 0
                       : (snprintf(why, cap, "copy %s: %s", name, strerror(errno)), -1);
        char link[4096];
        ssize_t n = readlinkat(sfd, name, link, sizeof link - 1);
        if (n < 0)
            return snprintf(why, cap, "readlink %s: %s", name, strerror(errno)), -1;
        link[n] = '\0';
        if (symlinkat(link, dfd, name) != 0)
            return snprintf(why, cap, "symlink %s: %s", name, strerror(errno)), -1;
        return 0;
    }
    if (S_ISREG(st.st_mode)) {
        int rc;
        if (mode == FXF_HARDLINKS) /* the deliberate defect: one inode for both */
            rc = linkat(sfd, name, dfd, name, 0);
        else
            rc = copy_file(sfd, dfd, name, O_NOFOLLOW,
                           mode == FXF_DROPS_MODES ? 0644 : perm);
        if (rc != 0)
            snprintf(why, cap, "copy %s: %s", name, strerror(errno));
        return rc;
    }
    if (!S_ISDIR(st.st_mode))
        return 0; /* FIFOs, sockets, devices: not part of a fork's copy */
    if (depth >= FXF_DEPTH_MAX)
        return snprintf(why, cap, "%s: deeper than %d levels", name, FXF_DEPTH_MAX), -1;
    if (mkdirat(dfd, name, 0700) != 0)
        return snprintf(why, cap, "mkdir %s: %s", name, strerror(errno)), -1;
    int s = openat(sfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int d = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int rc = s < 0 || d < 0 ? (snprintf(why, cap, "open %s: %s", name, strerror(errno)), -1)
                            : copy_dir(s, d, mode, depth + 1, why, cap);
    /* the mode last, so that a directory without write permission fills */
    if (rc == 0 && fchmod(d, mode == FXF_DROPS_MODES ? 0755 : perm) != 0)
        rc = (snprintf(why, cap, "chmod %s: %s", name, strerror(errno)), -1);
    if (s >= 0)
        close(s);
    if (d >= 0)
        close(d);
    return rc;
}

static int copy_dir(int sfd, int dfd, int mode, int depth, char *why, size_t cap)
{
    int listing = dup(sfd);
    DIR *dir = listing >= 0 ? fdopendir(listing) : NULL;
    if (!dir) {
        if (listing >= 0)
            close(listing);
        return snprintf(why, cap, "cannot list a directory: %s", strerror(errno)), -1;
    }
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(dir)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            rc = copy_entry(sfd, dfd, de->d_name, mode, depth, why, cap);
    closedir(dir);
    return rc;
}

int fxf_copy_tree(const char *from_root, const char *to_root, int mode, char *why,
                  size_t cap)
{
    int s = open(from_root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (s < 0)
        return snprintf(why, cap, "the source's workspace: %s", strerror(errno)), -1;
    int d = open(to_root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (d < 0) {
        close(s);
        return snprintf(why, cap, "the fork's workspace: %s", strerror(errno)), -1;
    }
    int rc = copy_dir(s, d, mode, 0, why, cap);
    close(s);
    close(d);
    return rc;
}

int fxf_empty(const char *root)
{
    DIR *dir = opendir(root);
    if (!dir)
        return 0;
    struct dirent *de;
    int empty = 1;
    while (empty && (de = readdir(dir)))
        empty = !strcmp(de->d_name, ".") || !strcmp(de->d_name, "..");
    closedir(dir);
    return empty;
}

/* ---- which owner a fork came from ------------------------------------- */

#define FXF_PARENTS 64
static struct {
    char fork[SBX_KEY_HASH_LEN + 1], source[SBX_KEY_HASH_LEN + 1];
} fxf_parents[FXF_PARENTS];
static unsigned fxf_next;
static pthread_mutex_t fxf_lock = PTHREAD_MUTEX_INITIALIZER;

void fxf_parent_record(const char *fork_owner, const char *source_owner)
{
    pthread_mutex_lock(&fxf_lock);
    unsigned i = fxf_next++ % FXF_PARENTS;
    snprintf(fxf_parents[i].fork, sizeof fxf_parents[i].fork, "%s", fork_owner);
    snprintf(fxf_parents[i].source, sizeof fxf_parents[i].source, "%s", source_owner);
    pthread_mutex_unlock(&fxf_lock);
}

bool fxf_is_parent(const char *fork_owner, const char *owner)
{
    bool found = false;
    pthread_mutex_lock(&fxf_lock);
    for (unsigned i = 0; i < FXF_PARENTS && !found; i++)
        found = !strcmp(fxf_parents[i].fork, fork_owner) &&
                !strcmp(fxf_parents[i].source, owner);
    pthread_mutex_unlock(&fxf_lock);
    return found;
}
