/*
 * memory.c - memory stores (SBX_CAP_MEMORY): the tree of each attached
 * store is a provider-owned host directory bound at /mnt/memory/<slug>
 * (read-only binds for read-only attachments: not writable even by the
 * container's root).
 *
 * Layout below the session's resource directory:
 *   memory/<slug>/            the bound tree
 *   memory-state/<slug>.base  the baseline: one line per regular file of
 *                             the tree as last loaded or accepted (inode,
 *                             size, mtime, ctime, mode, path), out of the
 *                             container's reach
 *   memory-state/<slug>.load  staging of a load (removed after)
 *
 * A change is any difference in those stat fields: ctime moves with every
 * write, chmod, rename or link, and no process can set it back, so a
 * content change cannot hide behind a restored mtime.
 *
 * The check after a command is a walk of the tree with one fstatat per
 * entry, unless memory_watch armed an inotify watch on every directory of
 * a tree equal to its baseline: then a command that queued no event (and
 * no overflow) changed nothing, and the diff reports nothing without
 * walking. Any event falls back to the walk. An open for writing always
 * ends in IN_CLOSE_WRITE (at close or at exit), so writes through mmap are
 * seen too.
 */
#include "docker.h"

#include "archive_check.h"
#include "confine.h"
#include "mkdirs.h"
#include "tree_remove.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

/* Deepest directory nesting walked: store paths are at most 1024 bytes,
 * so anything deeper cannot be committed and is refused by name. */
#define MEMORY_MAX_DEPTH 128

static void list_free(struct docker_mem_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i].path);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static int list_add(struct docker_mem_list *l, const char *path, const struct stat *s)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        struct docker_mem_file *v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return -1;
        l->v = v;
        l->cap = cap;
    }
    struct docker_mem_file *f = &l->v[l->n];
    if (!(f->path = strdup(path)))
        return -1;
    f->ino = (uint64_t)s->st_ino;
    f->size = (int64_t)s->st_size;
    f->mtime_ns = (int64_t)s->st_mtim.tv_sec * 1000000000 + s->st_mtim.tv_nsec;
    f->ctime_ns = (int64_t)s->st_ctim.tv_sec * 1000000000 + s->st_ctim.tv_nsec;
    f->mode = (uint32_t)s->st_mode;
    l->n++;
    return 0;
}

static int by_path(const void *a, const void *b)
{
    return strcmp(((const struct docker_mem_file *)a)->path, ((const struct docker_mem_file *)b)->path);
}

static const struct docker_mem_file *list_find(const struct docker_mem_list *l, const char *path)
{
    struct docker_mem_file key = {.path = (char *)path};
    return l->n ? bsearch(&key, l->v, l->n, sizeof *l->v, by_path) : NULL;
}

static int same_stat(const struct docker_mem_file *a, const struct docker_mem_file *b)
{
    return a->ino == b->ino && a->size == b->size && a->mtime_ns == b->mtime_ns &&
           a->ctime_ns == b->ctime_ns && a->mode == b->mode;
}

/* ---- the attachments of a handle -------------------------------------- */

struct docker_memory *docker_memory_find(sbx_sandbox *sb, sbx_call *call,
                                         const char *slug)
{
    for (size_t i = 0; i < sb->nmemory; i++)
        if (strcmp(sb->memory[i].slug, slug) == 0)
            return &sb->memory[i];
    sb->st->host->set_error(sb->st->host, call, SBX_E_NOT_FOUND,
                            "docker: memory store \"%.63s\" is not attached to this "
                            "sandbox (attachments are fixed at create)",
                            slug ? slug : "");
    return NULL;
}

static int slug_valid(const char *s)
{
    size_t n = 0;
    for (; s && s[n]; n++)
        if (!((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= '0' && s[n] <= '9') || s[n] == '-'))
            return 0;
    return n >= 1 && n <= 63;
}

int docker_memory_binds(struct docker_state *st, sbx_call *call, const char *name,
                        const struct sbx_create_args *args, json_object *mounts)
{
    if (args->size < SBX_CREATE_ARGS_SIZE_MEMORY_1_1 || !args->memory)
        return SBX_OK;
    char state[4096];
    docker_res_dir(st, name, "memory-state", state, sizeof state);
    if (docker_res_mkdirs(state, 0700) != 0)
        return st->host->set_error(st->host, call, SBX_E_IO, "docker: cannot create %s: %s",
                                   state, strerror(errno));
    /* Slugs sorted, so that the mounts stay sorted by destination. */
    const struct sbx_memory_attachment *sorted[64];
    size_t n = 0;
    for (; args->memory[n]; n++) {
        const struct sbx_memory_attachment *a = args->memory[n];
        if (n == 64)
            return st->host->set_error(st->host, call, SBX_E_INVALID,
                                       "docker: at most 64 memory stores per sandbox");
        if (a->size < offsetof(struct sbx_memory_attachment, slug) + sizeof a->slug ||
            !slug_valid(a->slug) || a->access > SBX_MEMORY_READ_WRITE)
            return st->host->set_error(st->host, call, SBX_E_INVALID,
                                       "docker: memory attachment %zu is malformed", n);
        size_t j = n;
        while (j > 0 && strcmp(sorted[j - 1]->slug, a->slug) > 0) {
            sorted[j] = sorted[j - 1];
            j--;
        }
        if (j > 0 && strcmp(sorted[j - 1]->slug, a->slug) == 0)
            return st->host->set_error(st->host, call, SBX_E_INVALID,
                                       "docker: memory store \"%s\" attached twice", a->slug);
        sorted[j] = a;
    }
    for (size_t i = 0; i < n; i++) {
        char sub[128], src[4096], target[128];
        snprintf(sub, sizeof sub, "memory/%s", sorted[i]->slug);
        snprintf(target, sizeof target, DOCKER_MEMORY "/%s", sorted[i]->slug);
        if (docker_res_dir(st, name, sub, src, sizeof src) != 0 ||
            docker_res_mkdirs(src, 0755) != 0)
            return st->host->set_error(st->host, call, SBX_E_IO,
                                       "docker: cannot create the memory tree %s: %s", src,
                                       strerror(errno));
        /* Writable by every user of the container when read-write: the
         * sandbox's users share the session's attachment. */
        if (chmod(src, sorted[i]->access == SBX_MEMORY_READ_WRITE ? 0777 : 0755) != 0)
            return st->host->set_error(st->host, call, SBX_E_IO, "docker: chmod %s: %s",
                                       src, strerror(errno));
        json_object *m = json_object_new_object();
        json_object_object_add(m, "Type", json_object_new_string("bind"));
        json_object_object_add(m, "Source", json_object_new_string(src));
        json_object_object_add(m, "Target", json_object_new_string(target));
        json_object_object_add(
            m, "ReadOnly", json_object_new_boolean(sorted[i]->access != SBX_MEMORY_READ_WRITE));
        json_object_array_add(mounts, m);
    }
    return SBX_OK;
}

int docker_memory_from_mounts(sbx_sandbox *sb, json_object *mounts, int from_inspect)
{
    size_t n = mounts ? json_object_array_length(mounts) : 0;
    for (size_t i = 0; i < n; i++) {
        json_object *m = json_object_array_get_idx(mounts, i);
        const char *dst = sbx_json_str(m, from_inspect ? "Destination" : "Target");
        const char *src = sbx_json_str(m, "Source");
        if (!dst || !src || strncmp(dst, DOCKER_MEMORY "/", sizeof DOCKER_MEMORY) != 0 ||
            !slug_valid(dst + sizeof DOCKER_MEMORY))
            continue;
        json_object *v;
        int rw = from_inspect ? (json_object_object_get_ex(m, "RW", &v) &&
                                 json_object_get_boolean(v))
                              : !(json_object_object_get_ex(m, "ReadOnly", &v) &&
                                  json_object_get_boolean(v));
        struct docker_memory *grown = realloc(sb->memory, (sb->nmemory + 1) * sizeof *grown);
        if (!grown)
            return -1;
        sb->memory = grown;
        struct docker_memory *mem = &sb->memory[sb->nmemory];
        memset(mem, 0, sizeof *mem);
        mem->inotify_fd = -1;
        snprintf(mem->slug, sizeof mem->slug, "%s", dst + sizeof DOCKER_MEMORY);
        mem->read_write = rw;
        /* memory-state/ is the sibling of memory/, two levels up */
        size_t len = strlen(src);
        mem->tree = strdup(src);
        mem->state = malloc(len + sizeof "-state/" + 64 + sizeof ".base");
        if (!mem->tree || !mem->state)
            return -1;
        const char *slash = strrchr(src, '/');
        snprintf(mem->state, len + sizeof "-state/" + 64 + sizeof ".base", "%.*s-state/%s",
                 (int)(slash - src), src, mem->slug);
        sb->nmemory++;
    }
    return 0;
}

static void watch_stop(struct docker_memory *mem)
{
    if (mem->inotify_fd >= 0)
        close(mem->inotify_fd);
    mem->inotify_fd = -1;
    mem->armed = 0;
}

void docker_memory_free(sbx_sandbox *sb)
{
    for (size_t i = 0; i < sb->nmemory; i++) {
        watch_stop(&sb->memory[i]);
        list_free(&sb->memory[i].last);
        free(sb->memory[i].tree);
        free(sb->memory[i].state);
    }
    free(sb->memory);
    sb->memory = NULL;
    sb->nmemory = 0;
}

/* ---- walking a tree ---------------------------------------------------- */

/* What a walk does with each entry: regular files go to `files` (with
 * chmod first when `fix_modes`), everything else that is not a directory
 * to `on_other`. */
struct walk {
    struct docker_state *st;
    sbx_call *call;
    struct docker_mem_list files;
    int fix_modes; /* after a load of a read-write tree: 0666 files, 0777 dirs */
    int inotify_fd; /* >= 0: add a watch on every directory */
    int dirs_only;  /* skip the stat of entries readdir says are not
                       directories (arming a watch) */
    int (*on_other)(struct walk *w, int dirfd, const char *name, const char *path,
                    const struct stat *s);
    void *ud;
};

static int walk_dir(struct walk *w, int dirfd, char *path, size_t len, int depth)
{
    if (depth > MEMORY_MAX_DEPTH)
        return w->st->host->set_error(w->st->host, w->call, SBX_E_INVALID,
                                      "docker: memory tree nested deeper than %d levels at "
                                      "\"%.200s\"",
                                      MEMORY_MAX_DEPTH, path);
    if (w->inotify_fd >= 0) {
        char proc[64];
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", dirfd);
        if (inotify_add_watch(w->inotify_fd, proc,
                              IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_CREATE | IN_DELETE |
                                  IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF |
                                  IN_MOVE_SELF | IN_ONLYDIR) < 0) {
            close(w->inotify_fd); /* no watch for this tree: walks it is */
            w->inotify_fd = -1;
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

static int walk_tree(struct walk *w, const char *tree)
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

/* ---- the baseline file -------------------------------------------------- */

static int baseline_write(struct docker_state *st, sbx_call *call,
                          const struct docker_memory *mem, const struct docker_mem_list *l)
{
    char path[4200], tmp[4300];
    snprintf(path, sizeof path, "%s.base", mem->state);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "we");
    if (!f)
        return st->host->set_error(st->host, call, SBX_E_IO, "docker: cannot write %s: %s",
                                   tmp, strerror(errno));
    for (size_t i = 0; i < l->n; i++) {
        const struct docker_mem_file *m = &l->v[i];
        if (strchr(m->path, '\n'))
            continue; /* never committed (control characters): never a base */
        fprintf(f, "%" PRIu64 " %" PRId64 " %" PRId64 " %" PRId64 " %" PRIu32 " %s\n", m->ino,
                m->size, m->mtime_ns, m->ctime_ns, m->mode, m->path);
    }
    int bad = fflush(f) != 0 || fsync(fileno(f)) != 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return st->host->set_error(st->host, call, SBX_E_IO, "docker: cannot write %s: %s",
                                   path, strerror(e));
    }
    return SBX_OK;
}

/* The baseline; a missing file is an empty one (a tree never loaded). */
static int baseline_read(struct docker_state *st, sbx_call *call,
                         const struct docker_memory *mem, struct docker_mem_list *l)
{
    char path[4200];
    snprintf(path, sizeof path, "%s.base", mem->state);
    FILE *f = fopen(path, "re");
    if (!f) {
        if (errno == ENOENT)
            return SBX_OK;
        return st->host->set_error(st->host, call, SBX_E_IO, "docker: cannot read %s: %s",
                                   path, strerror(errno));
    }
    char line[4400];
    int rc = SBX_OK;
    while (rc == SBX_OK && fgets(line, sizeof line, f)) {
        struct stat s;
        memset(&s, 0, sizeof s);
        uint64_t ino;
        int64_t size, mt, ct;
        uint32_t mode;
        int off = 0;
        size_t n = strlen(line);
        if (n && line[n - 1] == '\n')
            line[--n] = '\0';
        if (sscanf(line, "%" SCNu64 " %" SCNd64 " %" SCNd64 " %" SCNd64 " %" SCNu32 " %n", &ino,
                   &size, &mt, &ct, &mode, &off) != 5 ||
            !off || !line[off]) {
            rc = st->host->set_error(st->host, call, SBX_E_IO,
                                     "docker: the memory baseline %s is damaged", path);
            break;
        }
        s.st_ino = (ino_t)ino;
        s.st_size = (off_t)size;
        s.st_mtim.tv_sec = mt / 1000000000;
        s.st_mtim.tv_nsec = mt % 1000000000;
        s.st_ctim.tv_sec = ct / 1000000000;
        s.st_ctim.tv_nsec = ct % 1000000000;
        s.st_mode = (mode_t)mode;
        if (list_add(l, line + off, &s) != 0)
            rc = st->host->set_error(st->host, call, SBX_E_NOMEM, "out of memory");
    }
    fclose(f);
    if (rc == SBX_OK && l->n)
        qsort(l->v, l->n, sizeof *l->v, by_path);
    return rc;
}

/* ---- memory_load ------------------------------------------------------ */

/* Remove every entry of the directory fd. */
static int empty_tree(int fd)
{
    int dup = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    DIR *d = dup >= 0 ? fdopendir(dup) : NULL;
    if (!d) {
        if (dup >= 0)
            close(dup);
        return -errno;
    }
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            rc = sbxs_remove_tree(fd, de->d_name);
    closedir(d);
    return rc;
}

/* Move every entry of the directory from into the (empty) directory to. */
static int move_entries(int from, int to)
{
    int dup = fcntl(from, F_DUPFD_CLOEXEC, 0);
    DIR *d = dup >= 0 ? fdopendir(dup) : NULL;
    if (!d) {
        if (dup >= 0)
            close(dup);
        return -errno;
    }
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
            renameat(from, de->d_name, to, de->d_name) != 0)
            rc = -errno;
    closedir(d);
    return rc;
}

static int record_baseline(struct docker_state *st, sbx_call *call,
                           struct docker_memory *mem, int fix_modes)
{
    struct walk w = {.st = st, .call = call, .fix_modes = fix_modes, .inotify_fd = -1};
    int rc = walk_tree(&w, mem->tree);
    if (rc == SBX_OK)
        rc = baseline_write(st, call, mem, &w.files);
    list_free(&w.files);
    return rc;
}

int docker_memory_load(sbx_sandbox *sb, sbx_call *call, const char *slug,
                       const struct sbx_source *tar)
{
    struct docker_state *st = sb->st;
    struct docker_memory *mem = docker_memory_find(sb, call, slug);
    if (!mem)
        return SBX_E_NOT_FOUND;
    watch_stop(mem);
    char staging[4200];
    snprintf(staging, sizeof staging, "%s.load", mem->state);
    const char *base = strrchr(staging, '/') + 1;
    char state_dir[4200];
    snprintf(state_dir, sizeof state_dir, "%.*s", (int)(base - staging - 1), staging);
    int sfd = open(state_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sfd < 0)
        return st->host->set_error(st->host, call, SBX_E_IO, "docker: cannot open %s: %s",
                                   state_dir, strerror(errno));
    int rc = SBX_OK;
    int e = sbxs_remove_tree(sfd, base);
    if (e < 0 || mkdirat(sfd, base, 0700) != 0) {
        rc = st->host->set_error(st->host, call, SBX_E_IO, "docker: cannot prepare %s: %s",
                                 staging, strerror(e < 0 ? -e : errno));
        close(sfd);
        return rc;
    }
    int dfd = openat(sfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int tfd = open(mem->tree, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0 || tfd < 0) {
        rc = st->host->set_error(st->host, call, SBX_E_IO, "docker: cannot open %s: %s",
                                 dfd < 0 ? staging : mem->tree, strerror(errno));
    } else {
        struct sbxs_error err;
        sbxs_error_clear(&err);
        rc = sbxs_archive_extract(tar, "tar", dfd, NULL, &err);
        if (rc != SBX_OK)
            rc = st->host->set_error(st->host, call, rc,
                                     "docker: memory store \"%s\": %s", slug, err.message);
    }
    /* The archive is whole and valid: only now does the tree change. */
    if (rc == SBX_OK && ((e = empty_tree(tfd)) < 0 || (e = move_entries(dfd, tfd)) < 0))
        rc = st->host->set_error(st->host, call, SBX_E_IO,
                                 "docker: cannot publish memory store \"%s\" in %s: %s", slug,
                                 mem->tree, strerror(-e));
    if (rc == SBX_OK)
        rc = record_baseline(st, call, mem, mem->read_write);
    if (dfd >= 0)
        close(dfd);
    if (tfd >= 0)
        close(tfd);
    sbxs_remove_tree(sfd, base);
    close(sfd);
    return rc;
}

/* ---- memory_diff ------------------------------------------------------ */

struct tar_out {
    const struct sbx_sink *sink;
    int status;
};

static la_ssize_t tar_write(struct archive *a, void *ud, const void *buf, size_t len)
{
    struct tar_out *t = ud;
    if (t->status == SBX_OK && t->sink && t->sink->write)
        t->status = t->sink->write(t->sink->ctx, buf, len);
    if (t->status != SBX_OK) {
        archive_set_error(a, EPIPE, "sink stopped");
        return -1;
    }
    return (la_ssize_t)len;
}

struct diff {
    struct archive *a;
    struct tar_out out;
};

static int tar_fail(struct walk *w, const char *path)
{
    struct diff *d = w->ud;
    if (d->out.status != SBX_OK)
        return d->out.status; /* the sink set the error */
    return w->st->host->set_error(w->st->host, w->call, SBX_E_IO,
                                  "docker: writing memory file \"%.200s\" to the archive: %s",
                                  path, archive_error_string(d->a));
}

/* A symlink, FIFO, device or socket: its header only, as what it is. */
static int diff_other(struct walk *w, int dirfd, const char *name, const char *path,
                      const struct stat *s)
{
    struct diff *d = w->ud;
    struct archive_entry *e = archive_entry_new();
    if (!e)
        return w->st->host->set_error(w->st->host, w->call, SBX_E_NOMEM, "out of memory");
    archive_entry_copy_pathname(e, path);
    archive_entry_copy_stat(e, s);
    archive_entry_set_size(e, 0);
    if (S_ISLNK(s->st_mode)) {
        char target[4096];
        ssize_t n = readlinkat(dirfd, name, target, sizeof target - 1);
        target[n > 0 ? n : 0] = '\0';
        archive_entry_copy_symlink(e, target);
    }
    int rc = archive_write_header(d->a, e) < ARCHIVE_WARN ? tar_fail(w, path) : SBX_OK;
    archive_entry_free(e);
    return rc;
}

static int diff_file(struct walk *w, int treefd, const struct docker_mem_file *f)
{
    struct diff *d = w->ud;
    int fd = confine_open(treefd, f->path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0);
    if (fd < 0) {
        errno = -fd;
        if (errno == ENOENT)
            return SBX_OK; /* gone since the walk: reported as removed next time */
        return w->st->host->set_error(w->st->host, w->call, SBX_E_IO,
                                      "docker: cannot open memory file \"%.200s\": %s",
                                      f->path, strerror(errno));
    }
    struct stat s;
    int rc = SBX_OK;
    if (fstat(fd, &s) != 0 || !S_ISREG(s.st_mode)) {
        close(fd);
        return SBX_OK;
    }
    struct archive_entry *e = archive_entry_new();
    if (!e) {
        close(fd);
        return w->st->host->set_error(w->st->host, w->call, SBX_E_NOMEM, "out of memory");
    }
    archive_entry_copy_pathname(e, f->path);
    archive_entry_copy_stat(e, &s);
    if (archive_write_header(d->a, e) < ARCHIVE_WARN)
        rc = tar_fail(w, f->path);
    char buf[65536];
    int64_t left = (int64_t)s.st_size;
    while (rc == SBX_OK && left > 0) {
        if (w->st->host->cancelled(w->st->host, w->call)) {
            rc = w->st->host->set_error(w->st->host, w->call, SBX_E_CANCELLED, "cancelled");
            break;
        }
        ssize_t n = read(fd, buf, left < (int64_t)sizeof buf ? (size_t)left : sizeof buf);
        if (n <= 0) {
            /* shrank while read: pad, the header's size stands (the host
             * checks content by hash, and ctime moved: diffed again) */
            memset(buf, 0, sizeof buf);
            n = left < (int64_t)sizeof buf ? (ssize_t)left : (ssize_t)sizeof buf;
        }
        if (archive_write_data(d->a, buf, (size_t)n) < 0)
            rc = tar_fail(w, f->path);
        left -= n;
    }
    archive_entry_free(e);
    close(fd);
    return rc;
}

int docker_memory_diff(sbx_sandbox *sb, sbx_call *call, const char *slug, uint32_t flags,
                       const struct sbx_memory_changes *out)
{
    struct docker_state *st = sb->st;
    struct docker_memory *mem = docker_memory_find(sb, call, slug);
    if (!mem)
        return SBX_E_NOT_FOUND;
    if (!out || out->size < offsetof(struct sbx_memory_changes, removed) + sizeof out->removed)
        return st->host->set_error(st->host, call, SBX_E_INVALID,
                                   "docker: memory_diff: struct sbx_memory_changes too small");
    int quiet = 0;
    if (mem->armed && !(flags & SBX_MEMORY_DIFF_ALL)) {
        /* armed on a tree equal to its baseline: no event, no change */
        char ev[4096];
        ssize_t n = read(mem->inotify_fd, ev, sizeof ev);
        quiet = n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
        if (!quiet)
            watch_stop(mem);
    }

    struct diff d = {.out = {out->tar, SBX_OK}};
    d.a = archive_write_new();
    if (!d.a || archive_write_set_format_pax_restricted(d.a) != ARCHIVE_OK ||
        archive_write_set_bytes_in_last_block(d.a, 1) != ARCHIVE_OK ||
        archive_write_open2(d.a, &d.out, NULL, tar_write, NULL, NULL) != ARCHIVE_OK) {
        if (d.a)
            archive_write_free(d.a);
        return st->host->set_error(st->host, call, SBX_E_NOMEM,
                                   "docker: cannot start the memory archive");
    }
    struct docker_mem_list base = {0};
    struct walk w = {.st = st, .call = call, .inotify_fd = -1, .on_other = diff_other, .ud = &d};
    int rc = SBX_OK;
    if (!quiet) {
        rc = baseline_read(st, call, mem, &base);
        if (rc == SBX_OK)
            rc = walk_tree(&w, mem->tree);
    }
    int tfd = quiet ? -1 : open(mem->tree, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    for (size_t i = 0; rc == SBX_OK && i < w.files.n; i++) {
        const struct docker_mem_file *b = list_find(&base, w.files.v[i].path);
        if ((flags & SBX_MEMORY_DIFF_ALL) || !b || !same_stat(b, &w.files.v[i]))
            rc = diff_file(&w, tfd, &w.files.v[i]);
    }
    for (size_t i = 0; rc == SBX_OK && i < base.n; i++)
        if (!list_find(&w.files, base.v[i].path) && out->removed)
            rc = out->removed(out->ctx, base.v[i].path);
    if (tfd >= 0)
        close(tfd);
    if (rc == SBX_OK && archive_write_close(d.a) != ARCHIVE_OK)
        rc = tar_fail(&w, "(end of archive)");
    archive_write_free(d.a);
    /* The walk is what accept will record (no command runs in between). */
    list_free(&mem->last);
    if (rc == SBX_OK && !quiet) {
        mem->last = w.files;
        mem->last_valid = 1;
    } else {
        list_free(&w.files);
        mem->last_valid = quiet && rc == SBX_OK;
        mem->last_quiet = quiet;
    }
    list_free(&base);
    return rc;
}

/* ---- memory_accept and memory_watch ----------------------------------- */

int docker_memory_accept(sbx_sandbox *sb, sbx_call *call, const char *slug)
{
    struct docker_memory *mem = docker_memory_find(sb, call, slug);
    if (!mem)
        return SBX_E_NOT_FOUND;
    if (mem->last_valid && mem->last_quiet) {
        mem->last_valid = 0; /* nothing changed: the baseline stands */
        return SBX_OK;
    }
    int rc;
    if (mem->last_valid)
        rc = baseline_write(sb->st, call, mem, &mem->last);
    else
        rc = record_baseline(sb->st, call, mem, 0);
    list_free(&mem->last);
    mem->last_valid = 0;
    return rc;
}

int docker_memory_watch(sbx_sandbox *sb, sbx_call *call, const char *slug)
{
    struct docker_memory *mem = docker_memory_find(sb, call, slug);
    if (!mem)
        return SBX_E_NOT_FOUND;
    watch_stop(mem);
    struct walk w = {.st = sb->st, .call = call, .inotify_fd = -1, .dirs_only = 1};
    w.inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (w.inotify_fd < 0)
        return SBX_OK; /* no watch: the next diff walks */
    /* Only directories are watched; the walk's own opens are not events. */
    int rc = walk_tree(&w, mem->tree);
    list_free(&w.files);
    if (rc != SBX_OK || w.inotify_fd < 0) {
        if (w.inotify_fd >= 0)
            close(w.inotify_fd);
        return rc;
    }
    mem->inotify_fd = w.inotify_fd;
    mem->armed = 1;
    return SBX_OK;
}
