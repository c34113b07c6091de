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
#include "memory_internal.h"

#include "archive_check.h"
#include "confine.h"
#include "memory_slug.h"
#include "mkdirs.h"
#include "tree_remove.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

void docker_list_free(struct docker_mem_list *l)
{
    sbxp_path_list_free(l->v, l->n, sizeof *l->v);
    memset(l, 0, sizeof *l);
}

int docker_list_add(struct docker_mem_list *l, const char *path, const struct stat *s)
{
    struct docker_mem_file *v = sbxp_path_list_append(l->v, l->n, &l->cap, sizeof *v, path);
    if (!v)
        return -1;
    l->v = v;
    struct docker_mem_file *f = &l->v[l->n];
    f->ino = (uint64_t)s->st_ino;
    f->size = (int64_t)s->st_size;
    f->mtime_ns = (int64_t)s->st_mtim.tv_sec * 1000000000 + s->st_mtim.tv_nsec;
    f->ctime_ns = (int64_t)s->st_ctim.tv_sec * 1000000000 + s->st_ctim.tv_nsec;
    f->mode = (uint32_t)s->st_mode;
    f->seq = l->n;
    l->n++;
    return 0;
}

int docker_list_add_file(struct docker_mem_list *l, const struct docker_mem_file *f)
{
    struct stat s;
    memset(&s, 0, sizeof s);
    s.st_ino = (ino_t)f->ino;
    s.st_size = (off_t)f->size;
    s.st_mode = (mode_t)f->mode;
    s.st_mtim.tv_sec = f->mtime_ns / 1000000000;
    s.st_mtim.tv_nsec = f->mtime_ns % 1000000000;
    s.st_ctim.tv_sec = f->ctime_ns / 1000000000;
    s.st_ctim.tv_nsec = f->ctime_ns % 1000000000;
    return docker_list_add(l, f->path, &s);
}

const struct docker_mem_file *docker_list_find(const struct docker_mem_list *l, const char *path)
{
    return sbxp_path_list_find(l->v, l->n, sizeof *l->v, path);
}

int docker_same_stat(const struct docker_mem_file *a, const struct docker_mem_file *b)
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
            !sbxp_memory_slug_valid(a->slug) || a->access > SBX_MEMORY_READ_WRITE)
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
        const char *dst = sbxp_json_str(m, from_inspect ? "Destination" : "Target");
        const char *src = sbxp_json_str(m, "Source");
        if (!dst || !src || strncmp(dst, DOCKER_MEMORY "/", sizeof DOCKER_MEMORY) != 0 ||
            !sbxp_memory_slug_valid(dst + sizeof DOCKER_MEMORY))
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

void docker_memory_watch_stop(struct docker_memory *mem)
{
    if (mem->inotify_fd >= 0)
        close(mem->inotify_fd);
    mem->inotify_fd = -1;
    mem->armed = 0;
    for (size_t i = 0; i < mem->nwd; i++)
        free(mem->wd_paths[i]);
    free(mem->wd_paths);
    mem->wd_paths = NULL;
    mem->nwd = 0;
}

void docker_memory_free(sbx_sandbox *sb)
{
    for (size_t i = 0; i < sb->nmemory; i++) {
        docker_memory_watch_stop(&sb->memory[i]);
        docker_list_free(&sb->memory[i].last);
        docker_list_free(&sb->memory[i].base);
        docker_list_free(&sb->memory[i].changed);
        for (size_t k = 0; k < sb->memory[i].nremoved; k++)
            free(sb->memory[i].removed[k]);
        free(sb->memory[i].removed);
        free(sb->memory[i].tree);
        free(sb->memory[i].state);
    }
    free(sb->memory);
    sb->memory = NULL;
    sb->nmemory = 0;
}

/* ---- the baseline file -------------------------------------------------- */

int docker_baseline_write(struct docker_state *st, sbx_call *call,
                          struct docker_memory *mem, const struct docker_mem_list *l)
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
    mem->journal_lines = l->n;
    return SBX_OK;
}

static int by_path_seq(const void *a, const void *b)
{
    const struct docker_mem_file *x = a, *y = b;
    int c = strcmp(x->path, y->path);
    return c ? c : (x->seq > y->seq) - (x->seq < y->seq);
}

/* The baseline; a missing file is an empty one (a tree never loaded). Its
 * lines are records in the order written: a later record of a path
 * replaces an earlier one, and "- PATH" removes it (accepts append). */
int docker_baseline_read(struct docker_state *st, sbx_call *call, const struct docker_memory *mem,
                  struct docker_mem_list *l)
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
        size_t n = strlen(line);
        if (n && line[n - 1] == '\n')
            line[--n] = '\0';
        const char *name;
        if (line[0] == '-' && line[1] == ' ' && line[2]) {
            name = line + 2; /* a removal: mode 0 */
        } else {
            uint64_t ino;
            int64_t size, mt, ct;
            uint32_t mode;
            int off = 0;
            if (sscanf(line, "%" SCNu64 " %" SCNd64 " %" SCNd64 " %" SCNd64 " %" SCNu32 " %n",
                       &ino, &size, &mt, &ct, &mode, &off) != 5 ||
                !off || !line[off] || !mode) {
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
            name = line + off;
        }
        if (docker_list_add(l, name, &s) != 0)
            rc = st->host->set_error(st->host, call, SBX_E_NOMEM, "out of memory");
    }
    fclose(f);
    if (rc != SBX_OK || !l->n)
        return rc;
    /* keep the last record of each path; drop removals */
    qsort(l->v, l->n, sizeof *l->v, by_path_seq);
    size_t out = 0;
    for (size_t i = 0; i < l->n; i++) {
        bool last = i + 1 == l->n || strcmp(l->v[i].path, l->v[i + 1].path) != 0;
        if (last && l->v[i].mode)
            l->v[out++] = l->v[i];
        else
            free(l->v[i].path);
    }
    l->n = out;
    return SBX_OK;
}

int docker_baseline_append(struct docker_state *st, sbx_call *call, struct docker_memory *mem,
                    const struct docker_mem_list *changed, char *const *removed,
                    size_t nremoved)
{
    char path[4200];
    snprintf(path, sizeof path, "%s.base", mem->state);
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    FILE *f = fd >= 0 ? fdopen(fd, "a") : NULL;
    if (!f) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return st->host->set_error(st->host, call, SBX_E_IO, "docker: cannot append to %s: %s",
                                   path, strerror(e));
    }
    for (size_t i = 0; i < changed->n; i++) {
        const struct docker_mem_file *m = &changed->v[i];
        if (!strchr(m->path, '\n'))
            fprintf(f, "%" PRIu64 " %" PRId64 " %" PRId64 " %" PRId64 " %" PRIu32 " %s\n",
                    m->ino, m->size, m->mtime_ns, m->ctime_ns, m->mode, m->path);
    }
    for (size_t i = 0; i < nremoved; i++)
        if (!strchr(removed[i], '\n'))
            fprintf(f, "- %s\n", removed[i]);
    int bad = fflush(f) != 0 || fsync(fileno(f)) != 0;
    bad |= fclose(f) != 0;
    if (bad)
        return st->host->set_error(st->host, call, SBX_E_IO, "docker: cannot append to %s: %s",
                                   path, strerror(errno));
    mem->journal_lines += changed->n + nremoved;
    return SBX_OK;
}

/* ---- memory_load ------------------------------------------------------ */

/* Call fn(fd, name, to) for every entry of the directory fd but "." and
 * "..", stopping at the first nonzero (-errno) result. */
static int each_entry(int fd, int to, int (*fn)(int fd, const char *name, int to))
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
            rc = fn(fd, de->d_name, to);
    closedir(d);
    return rc;
}

static int remove_entry(int fd, const char *name, int to)
{
    (void)to;
    return sbxs_remove_tree(fd, name);
}

static int move_entry(int fd, const char *name, int to)
{
    return renameat(fd, name, to, name) == 0 ? 0 : -errno;
}

int docker_record_baseline(struct docker_state *st, sbx_call *call,
                           struct docker_memory *mem, int fix_modes)
{
    struct walk w = {.st = st, .call = call, .fix_modes = fix_modes, .inotify_fd = -1};
    int rc = docker_walk_tree(&w, mem->tree);
    if (rc == SBX_OK)
        rc = docker_baseline_write(st, call, mem, &w.files);
    /* the walk is the baseline now: kept for the next diff */
    docker_list_free(&mem->base);
    mem->base_valid = rc == SBX_OK;
    if (rc == SBX_OK)
        mem->base = w.files;
    else
        docker_list_free(&w.files);
    return rc;
}

int docker_memory_load(sbx_sandbox *sb, sbx_call *call, const char *slug,
                       const struct sbx_source *tar)
{
    struct docker_state *st = sb->st;
    struct docker_memory *mem = docker_memory_find(sb, call, slug);
    if (!mem)
        return SBX_E_NOT_FOUND;
    docker_memory_watch_stop(mem);
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
    if (rc == SBX_OK)
        docker_memory_race_point("load-empty", "", tfd, NULL);
    if (rc == SBX_OK && ((e = each_entry(tfd, -1, remove_entry)) < 0 ||
                          (e = each_entry(dfd, tfd, move_entry)) < 0))
        rc = st->host->set_error(st->host, call, SBX_E_IO,
                                 "docker: cannot publish memory store \"%s\" in %s: %s", slug,
                                 mem->tree, strerror(-e));
    if (rc == SBX_OK) {
        docker_memory_race_point("load-published", "", tfd, NULL);
        rc = docker_record_baseline(st, call, mem, mem->read_write);
    }
    if (dfd >= 0)
        close(dfd);
    if (tfd >= 0)
        close(tfd);
    sbxs_remove_tree(sfd, base);
    close(sfd);
    return rc;
}

