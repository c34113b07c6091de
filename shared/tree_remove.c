/*
 * tree_remove.c - an iterative, bounded-descriptor `rm -rf` below a
 * directory descriptor (see tree_remove.h).
 *
 * The walk keeps one directory open (the current one, as a DIR stream) and
 * a stack of the names and identities of the directories above it. Going
 * down opens the child by name with O_NOFOLLOW and checks it is the
 * directory just stat'ed; going up opens ".." and checks it is the parent
 * recorded on the way down, so a directory moved meanwhile cannot lead the
 * walk out of the tree (the walk then restarts from the top).
 */
#include "tree_remove.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Retries when a concurrent writer changes the tree under the walk. */
#define RETRIES 64

struct level {
    dev_t dev;
    ino_t ino;
    char *name; /* in the level above; level 0's is the caller's name */
};

struct walk {
    struct level *lv;
    size_t depth, cap; /* lv[depth - 1] is the current directory */
};

static bool same(const struct stat *st, const struct level *l)
{
    return st->st_dev == l->dev && st->st_ino == l->ino;
}

static int push(struct walk *w, const struct stat *st, const char *name)
{
    if (w->depth == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 32;
        struct level *lv = realloc(w->lv, cap * sizeof *lv);
        if (!lv)
            return -ENOMEM;
        w->lv = lv;
        w->cap = cap;
    }
    char *copy = strdup(name);
    if (!copy)
        return -ENOMEM;
    w->lv[w->depth++] = (struct level){st->st_dev, st->st_ino, copy};
    return 0;
}

static void pop(struct walk *w)
{
    free(w->lv[--w->depth].name);
}

/* Open the directory `name` of dirfd, checking it is the one in *st. A
 * command may have taken away the owner's permissions (chmod 000): they are
 * given back, to the owner only, so the entries can be listed and removed,
 * always through a descriptor of the directory checked to be that one
 * (O_PATH needs no permission), never by a name that could have been
 * swapped meanwhile. */
static int open_child(int dirfd, const char *name, const struct stat *st)
{
    const int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
    int fd = openat(dirfd, name, flags);
    if (fd < 0 && errno == EACCES) {
        int pfd = openat(dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (pfd < 0)
            return -errno;
        struct stat got;
        if (fstat(pfd, &got) != 0 || got.st_dev != st->st_dev || got.st_ino != st->st_ino) {
            close(pfd);
            return -EAGAIN; /* replaced between the stat and the open */
        }
        char proc[64];
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", pfd);
        if (chmod(proc, (got.st_mode & 07777) | S_IRWXU) != 0) {
            close(pfd);
            return -EACCES;
        }
        fd = openat(pfd, ".", O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC);
        close(pfd);
    }
    if (fd < 0)
        return -errno;
    struct stat got;
    if (fstat(fd, &got) != 0 || got.st_dev != st->st_dev || got.st_ino != st->st_ino) {
        close(fd);
        return -EAGAIN; /* replaced between the stat and the open */
    }
    if ((got.st_mode & S_IRWXU) != S_IRWXU)
        (void)fchmod(fd, (got.st_mode & 07777) | S_IRWXU);
    return fd;
}

/* The next entry of d other than "." and "..", or NULL at the end. */
static struct dirent *next_entry(DIR *d)
{
    struct dirent *e;
    errno = 0;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            return e;
    return NULL;
}

/* Reopen the current directory as a fresh stream from its start. */
static DIR *reopen(DIR *d)
{
    int fd = openat(dirfd(d), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    closedir(d);
    if (fd < 0)
        return NULL;
    DIR *n = fdopendir(fd);
    if (!n)
        close(fd);
    return n;
}

/* Step from the current directory to its parent (checked against the
 * stack) and remove the current one there. Returns the parent's stream, or
 * NULL with *rc set. */
static DIR *ascend(struct walk *w, DIR *d, int top_fd, int *rc)
{
    int pfd;
    if (w->depth == 1) {
        pfd = -1; /* the parent is the caller's directory */
    } else {
        pfd = openat(dirfd(d), "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        struct stat st;
        if (pfd < 0 || fstat(pfd, &st) != 0 || !same(&st, &w->lv[w->depth - 2])) {
            if (pfd >= 0)
                close(pfd);
            closedir(d);
            *rc = -EAGAIN; /* moved: restart from the top */
            return NULL;
        }
    }
    closedir(d);
    int in = pfd >= 0 ? pfd : top_fd;
    if (unlinkat(in, w->lv[w->depth - 1].name, AT_REMOVEDIR) != 0 && errno != ENOENT) {
        int e = errno;
        if (pfd >= 0)
            close(pfd);
        /* ENOTEMPTY: something was added meanwhile; restart finds it */
        *rc = e == ENOTEMPTY || e == EEXIST ? -EAGAIN : -e;
        return NULL;
    }
    pop(w);
    if (pfd < 0) {
        *rc = 0; /* the whole tree is gone */
        return NULL;
    }
    DIR *p = fdopendir(pfd);
    if (!p) {
        close(pfd);
        *rc = -ENOMEM;
    }
    return p;
}

/* One attempt at removing the directory lv[0] (already pushed) of top_fd. */
static int walk_once(struct walk *w, int top_fd, DIR *d)
{
    int rc = 0;
    while (d) {
        struct dirent *e = next_entry(d);
        if (!e) {
            if (errno) {
                rc = -errno;
                closedir(d);
                return rc;
            }
            d = ascend(w, d, top_fd, &rc);
            if (d && !(d = reopen(d)))
                return -errno;
            continue;
        }
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            if (errno == ENOENT)
                continue;
            rc = -errno;
            break;
        }
        if (!S_ISDIR(st.st_mode)) {
            if (unlinkat(dirfd(d), e->d_name, 0) != 0 && errno != ENOENT) {
                rc = errno == EISDIR ? -EAGAIN : -errno;
                break;
            }
            continue;
        }
        /* Down: the stream of the child replaces the current one. */
        int fd = open_child(dirfd(d), e->d_name, &st);
        if (fd == -ENOENT)
            continue;
        if (fd < 0) {
            rc = fd == -ELOOP || fd == -ENOTDIR ? -EAGAIN : fd;
            break;
        }
        if ((rc = push(w, &st, e->d_name)) != 0) {
            close(fd);
            break;
        }
        closedir(d);
        d = fdopendir(fd);
        if (!d) {
            close(fd);
            return -ENOMEM;
        }
    }
    if (d)
        closedir(d);
    return rc;
}

int sbxs_remove_tree(int dirfd, const char *name)
{
    if (!name || !*name || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, ".."))
        return -EINVAL;
    struct walk w = {0};
    int rc = -EAGAIN;
    for (int round = 0; round < RETRIES && rc == -EAGAIN; round++) {
        while (w.depth)
            pop(&w);
        struct stat st;
        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            rc = errno == ENOENT ? 0 : -errno;
            break;
        }
        if (!S_ISDIR(st.st_mode)) {
            rc = unlinkat(dirfd, name, 0) == 0 || errno == ENOENT ? 0
                 : errno == EISDIR                             ? -EAGAIN
                                                                : -errno;
            continue;
        }
        int fd = open_child(dirfd, name, &st);
        if (fd == -ENOENT) {
            rc = 0;
            break;
        }
        if (fd < 0) {
            rc = fd == -ELOOP || fd == -ENOTDIR ? -EAGAIN : fd;
            continue;
        }
        DIR *d = fdopendir(fd);
        if (!d) {
            close(fd);
            rc = -ENOMEM;
            break;
        }
        if ((rc = push(&w, &st, name)) != 0) {
            closedir(d);
            break;
        }
        rc = walk_once(&w, dirfd, d);
    }
    while (w.depth)
        pop(&w);
    free(w.lv);
    return rc;
}
