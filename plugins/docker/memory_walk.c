/*
 * memory_walk.c - walking a memory tree on the host (memory.c has the
 * model): every entry lstat'ed below a directory fd, never following a
 * symlink, never acted on by name, bounded in depth; optionally an inotify
 * watch per directory.
 */
#include "memory_internal.h"

#include "confine.h"

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

int docker_watch_map(struct docker_memory *mem, int wd, const char *path, size_t len)
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

/* Times an entry is looked at again when it changed type between the
 * look and the open (a container swapping it): then the walk gives up,
 * naming it. */
#define ENTRY_TRIES 4

/*
 * One entry `name` of dirfd (tree-relative path[0..len)). The tree is
 * writable by the container, which can swap any entry for a symlink, a
 * FIFO or a device at any moment: nothing here acts on the entry by name.
 * A directory is opened with O_NOFOLLOW (a single component below a
 * descriptor opened the same way: no symlink anywhere), its type and mode
 * taken from the descriptor, and its mode fixed with fchmod on it; a file
 * whose mode is fixed is opened O_PATH (which opens nothing: no FIFO
 * blocks, no device acts) and chmod'ed through that descriptor. What is
 * neither is only lstat'ed and handed to on_other. An entry that changed
 * type between the lstat and the open is looked at again.
 */
static int walk_entry(struct walk *w, int dirfd, const char *name, char *path, size_t len,
                      int depth)
{
    for (int tries = 0; tries < ENTRY_TRIES; tries++) {
        struct stat s;
        if (fstatat(dirfd, name, &s, AT_SYMLINK_NOFOLLOW) != 0) {
            if (errno == ENOENT)
                return SBX_OK; /* gone meanwhile */
            return w->st->host->set_error(w->st->host, w->call, SBX_E_IO,
                                          "docker: stat of memory file \"%.200s\": %s", path,
                                          strerror(errno));
        }
        if (S_ISDIR(s.st_mode)) {
            int sub = openat(dirfd, name,
                             O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
            if (sub < 0 && (errno == ELOOP || errno == ENOTDIR || errno == ENOENT))
                continue; /* not a directory any more */
            if (sub < 0 || fstat(sub, &s) != 0) {
                int e = errno;
                if (sub >= 0)
                    close(sub);
                return w->st->host->set_error(w->st->host, w->call, SBX_E_IO,
                                              "docker: cannot open memory directory "
                                              "\"%.200s\": %s",
                                              path, strerror(e));
            }
            docker_memory_race_point("walk-entry", path, dirfd, name);
            if (w->fix_modes && (s.st_mode & 07777) != 0777)
                (void)fchmod(sub, 0777);
            int rc = docker_walk_dir(w, sub, path, len, depth + 1);
            close(sub);
            return rc;
        }
        if (w->dirs_only)
            return SBX_OK; /* not a directory: nothing to watch */
        if (S_ISREG(s.st_mode) && w->fix_modes && (s.st_mode & 07777) != 0666) {
            int fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
            if (fd < 0 && errno == ENOENT)
                continue;
            if (fd < 0 || fstat(fd, &s) != 0) {
                int e = errno;
                if (fd >= 0)
                    close(fd);
                return w->st->host->set_error(w->st->host, w->call, SBX_E_IO,
                                              "docker: cannot open memory file \"%.200s\": "
                                              "%s",
                                              path, strerror(e));
            }
            if (!S_ISREG(s.st_mode)) {
                close(fd);
                continue; /* swapped since the lstat */
            }
            docker_memory_race_point("walk-entry", path, dirfd, name);
            int e = sbxp_confine_fchmod(fd, 0666);
            if (e == 0)
                e = fstat(fd, &s) == 0 ? 0 : -errno;
            close(fd);
            if (e < 0)
                return w->st->host->set_error(w->st->host, w->call, SBX_E_IO,
                                              "docker: chmod of memory file \"%.200s\": %s",
                                              path, strerror(-e));
        }
        if (S_ISREG(s.st_mode))
            return docker_list_add(&w->files, path, &s) == 0
                       ? SBX_OK
                       : w->st->host->set_error(w->st->host, w->call, SBX_E_NOMEM,
                                                "out of memory");
        return w->on_other ? w->on_other(w, dirfd, name, path, &s) : SBX_OK;
    }
    return w->st->host->set_error(w->st->host, w->call, SBX_E_IO,
                                  "docker: memory entry \"%.200s\" kept changing type while "
                                  "the tree was walked",
                                  path);
}

int docker_walk_dir(struct walk *w, int dirfd, char *path, size_t len, int depth)
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
        if (wd < 0 || docker_watch_map(w->watch_mem, wd, path, len) != 0) {
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
        rc = walk_entry(w, dirfd, de->d_name, path, at + nl, depth);
        path[len] = '\0';
    }
    if (rc == SBX_OK && errno)
        rc = w->st->host->set_error(w->st->host, w->call, SBX_E_IO,
                                    "docker: reading memory directory \"%.200s\": %s",
                                    len ? path : ".", strerror(errno));
    closedir(d);
    return rc;
}

int docker_walk_tree(struct walk *w, const char *tree)
{
    int fd = open(tree, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return w->st->host->set_error(w->st->host, w->call, SBX_E_IO,
                                      "docker: cannot open the memory tree %s: %s", tree,
                                      strerror(errno));
    char path[4096] = "";
    int rc = docker_walk_dir(w, fd, path, 0, 0);
    close(fd);
    if (rc == SBX_OK && w->files.n)
        sbxp_path_list_sort(w->files.v, w->files.n, sizeof *w->files.v);
    return rc;
}

