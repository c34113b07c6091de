/*
 * memory_walk.c - walking a memory tree on the host (memory.c has the
 * model): every entry lstat'ed below a directory fd, never following a
 * symlink, bounded in depth; optionally an inotify watch per directory.
 */
#include "memory_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- walking a tree ---------------------------------------------------- */

int watch_map(struct docker_memory *mem, int wd, const char *path, size_t len)
{
    if (wd < 0 || (size_t)wd > 1u << 24)
        return -1;
    if ((size_t)wd >= mem->nwd) {
        size_t n = (size_t)wd + 64;
        char **g = realloc(mem->wd_paths, n * sizeof *g);
        if (!g)
            return -1;
        memset(g + mem->nwd, 0, (n - mem->nwd) * sizeof *g);
        mem->wd_paths = g;
        mem->nwd = n;
    }
    char *p = strndup(path, len);
    if (!p)
        return -1;
    free(mem->wd_paths[wd]);
    mem->wd_paths[wd] = p;
    return 0;
}

int walk_dir(struct walk *w, int dirfd, char *path, size_t len, int depth)
{
    if (depth > MEMORY_MAX_DEPTH)
        return w->st->host->set_error(w->st->host, w->call, SBX_E_INVALID,
                                      "docker: memory tree nested deeper than %d levels at "
                                      "\"%.200s\"",
                                      MEMORY_MAX_DEPTH, path);
    if (w->inotify_fd >= 0) {
        char proc[64];
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", dirfd);
        int wd = inotify_add_watch(w->inotify_fd, proc,
                                   IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_CREATE |
                                       IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO |
                                       IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR);
        if (wd < 0 || watch_map(w->watch_mem, wd, path, len) != 0) {
            w->inotify_fd = -1; /* no watch for this tree: the caller drops it */
            w->watch_failed = 1;
        }
    }
    int dup = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
    DIR *d = dup >= 0 ? fdopendir(dup) : NULL;
    if (!d) {
        if (dup >= 0)
            close(dup);
        return w->st->host->set_error(w->st->host, w->call, SBX_E_IO,
                                      "docker: cannot read memory directory \"%.200s\": %s",
                                      len ? path : ".", strerror(errno));
    }
    int rc = SBX_OK;
    struct dirent *de;
    while (rc == SBX_OK && (errno = 0, de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        size_t nl = strlen(de->d_name);
        if (len + 1 + nl >= 4096) {
            rc = w->st->host->set_error(w->st->host, w->call, SBX_E_INVALID,
                                        "docker: memory path too long below \"%.200s\"",
                                        path);
            break;
        }
        size_t at = len;
        if (len)
            path[at++] = '/';
        memcpy(path + at, de->d_name, nl + 1);
        if (w->dirs_only && de->d_type != DT_DIR && de->d_type != DT_UNKNOWN) {
            path[len] = '\0';
            continue;
        }
        struct stat s;
        if (fstatat(dirfd, de->d_name, &s, AT_SYMLINK_NOFOLLOW) != 0) {
            if (errno != ENOENT)
                rc = w->st->host->set_error(w->st->host, w->call, SBX_E_IO,
                                            "docker: stat of memory file \"%.200s\": %s",
                                            path, strerror(errno));
        } else if (S_ISDIR(s.st_mode)) {
            memory_race_point("walk-entry", path, dirfd, de->d_name);
            if (w->fix_modes)
                fchmodat(dirfd, de->d_name, 0777, 0);
            int sub = openat(dirfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub < 0)
                rc = w->st->host->set_error(w->st->host, w->call, SBX_E_IO,
                                            "docker: cannot open memory directory "
                                            "\"%.200s\": %s",
                                            path, strerror(errno));
            else {
                rc = walk_dir(w, sub, path, at + nl, depth + 1);
                close(sub);
            }
        } else if (w->dirs_only) {
            /* not a directory: nothing to watch */
        } else if (S_ISREG(s.st_mode)) {
            memory_race_point("walk-entry", path, dirfd, de->d_name);
            if (w->fix_modes && (s.st_mode & 07777) != 0666) {
                fchmodat(dirfd, de->d_name, 0666, 0);
                fstatat(dirfd, de->d_name, &s, AT_SYMLINK_NOFOLLOW);
            }
            if (list_add(&w->files, path, &s) != 0)
                rc = w->st->host->set_error(w->st->host, w->call, SBX_E_NOMEM,
                                            "out of memory");
        } else if (w->on_other) {
            rc = w->on_other(w, dirfd, de->d_name, path, &s);
        }
        path[len] = '\0';
    }
    if (rc == SBX_OK && errno)
        rc = w->st->host->set_error(w->st->host, w->call, SBX_E_IO,
                                    "docker: reading memory directory \"%.200s\": %s",
                                    len ? path : ".", strerror(errno));
    closedir(d);
    return rc;
}

int walk_tree(struct walk *w, const char *tree)
{
    int fd = open(tree, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return w->st->host->set_error(w->st->host, w->call, SBX_E_IO,
                                      "docker: cannot open the memory tree %s: %s", tree,
                                      strerror(errno));
    char path[4096] = "";
    int rc = walk_dir(w, fd, path, 0, 0);
    close(fd);
    if (rc == SBX_OK && w->files.n)
        qsort(w->files.v, w->files.n, sizeof *w->files.v, by_path);
    return rc;
}

