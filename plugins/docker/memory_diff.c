/*
 * memory_diff.c - what changed in a memory tree since its baseline
 * (memory_diff), making the tree the baseline (memory_accept), and the
 * inotify watch that makes both O(changes) (memory_watch); memory.c has
 * the model.
 *
 * Armed right before a command on a tree equal to its baseline, the watch
 * names every file a command touched (IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE,
 * IN_CREATE, IN_DELETE, moves) and every directory it made; the diff then
 * looks at exactly those, and accept appends them to the baseline file. An
 * event the watch cannot resolve exactly (an overflow, a directory removed
 * or renamed, a watch gone) falls back to comparing the whole tree, and
 * the watch is re-armed before the next command. A watch that saw nothing
 * stays armed across commands.
 */
#include "memory_internal.h"

#include "archive_sink.h"
#include "confine.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>


struct diff {
    struct archive *a;
    struct sbxp_archive_sink out;
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

/* A symlink, FIFO, device or socket: its header only, as what it is (the
 * host refuses it by name). A symlink's target is read from the entry
 * `name` of linkfd ("" with an O_PATH descriptor of the link itself). */
static int write_other(struct walk *w, int linkfd, const char *name, const char *path,
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
        ssize_t n = readlinkat(linkfd, name, target, sizeof target - 1);
        target[n > 0 ? n : 0] = '\0';
        archive_entry_copy_symlink(e, target);
    }
    int rc = archive_write_header(d->a, e) < ARCHIVE_WARN ? tar_fail(w, path) : SBX_OK;
    archive_entry_free(e);
    return rc;
}

static int diff_other(struct walk *w, int dirfd, const char *name, const char *path,
                      const struct stat *s)
{
    return write_other(w, dirfd, name, path, s);
}

static int diff_file(struct walk *w, int treefd, const struct docker_mem_file *f)
{
    struct diff *d = w->ud;
    docker_memory_race_point("diff-open", f->path, treefd, f->path);
    /* The entry as it is now (the walk saw it a moment ago), no symlink
     * followed anywhere on its path. O_PATH opens nothing: a FIFO or a
     * device swapped in since is looked at, never opened. */
    int pfd = sbxp_confine_open_strict(treefd, f->path, O_PATH | O_NOFOLLOW, 0);
    if (pfd == -ENOENT || pfd == -ENOTDIR)
        return SBX_OK; /* gone since the walk: reported as removed next time */
    if (pfd < 0)
        return w->st->host->set_error(
            w->st->host, w->call, SBX_E_INVALID,
            "docker: memory file \"%.200s\": %s; nothing is read through one", f->path,
            pfd == -ELOOP ? "a symbolic link is on its path now (the tree changed while it "
                            "was read)"
                          : strerror(-pfd));
    struct stat s;
    if (fstat(pfd, &s) != 0) {
        int e = errno;
        close(pfd);
        return w->st->host->set_error(w->st->host, w->call, SBX_E_IO,
                                      "docker: stat of memory file \"%.200s\": %s", f->path,
                                      strerror(e));
    }
    if (!S_ISREG(s.st_mode)) {
        /* swapped since the walk: sent as what it is now */
        int rc = S_ISDIR(s.st_mode) ? SBX_OK : write_other(w, pfd, "", f->path, &s);
        close(pfd);
        return rc;
    }
    int fd = sbxp_confine_reopen(pfd, O_RDONLY | O_NONBLOCK | O_NOCTTY);
    close(pfd);
    if (fd < 0)
        return w->st->host->set_error(w->st->host, w->call, SBX_E_IO,
                                      "docker: cannot open memory file \"%.200s\": %s",
                                      f->path, strerror(-fd));
    int rc = SBX_OK;
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


/* ---- the watch's events ------------------------------------------------- */

/* What the events since the watch was armed name: files to look at, new
 * directories to walk, or "walk everything" (whole). */
struct events {
    char **files;
    size_t nfiles, cap;
    char **dirs;
    size_t ndirs, dcap;
    int whole;
};

static void events_free(struct events *e)
{
    for (size_t i = 0; i < e->nfiles; i++)
        free(e->files[i]);
    for (size_t i = 0; i < e->ndirs; i++)
        free(e->dirs[i]);
    free(e->files);
    free(e->dirs);
}

static int push(char ***v, size_t *n, size_t *cap, const char *dir, const char *name)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 16;
        char **g = realloc(*v, c * sizeof *g);
        if (!g)
            return -1;
        *v = g;
        *cap = c;
    }
    size_t dl = strlen(dir), nl = strlen(name);
    char *p = malloc(dl + nl + 2);
    if (!p)
        return -1;
    if (dl)
        snprintf(p, dl + nl + 2, "%s/%s", dir, name);
    else
        memcpy(p, name, nl + 1);
    (*v)[(*n)++] = p;
    return 0;
}

/* Drain the inotify queue into e. Anything the events cannot say exactly
 * (an overflow, a directory removed or renamed, an unknown watch) asks
 * for a whole walk. */
static int read_events(struct docker_memory *mem, struct events *e)
{
    char buf[65536] __attribute__((aligned(__alignof__(struct inotify_event))));
    for (;;) {
        ssize_t n = read(mem->inotify_fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (n <= 0) {
            e->whole = 1;
            return 0;
        }
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            p += sizeof *ev + ev->len;
            if (e->whole)
                continue;
            const char *dir = ev->wd >= 0 && (size_t)ev->wd < mem->nwd ? mem->wd_paths[ev->wd]
                                                                      : NULL;
            if ((ev->mask & (IN_Q_OVERFLOW | IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF)) ||
                !dir || !ev->len) {
                e->whole = 1;
                continue;
            }
            if (ev->mask & IN_ISDIR) {
                if (ev->mask & (IN_DELETE | IN_MOVED_FROM))
                    e->whole = 1;
                else if ((ev->mask & (IN_CREATE | IN_MOVED_TO)) &&
                         push(&e->dirs, &e->ndirs, &e->dcap, dir, ev->name) != 0)
                    return -1;
                continue; /* a directory's own attributes are not committed */
            }
            if (push(&e->files, &e->nfiles, &e->cap, dir, ev->name) != 0)
                return -1;
        }
    }
}

static int by_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* ---- memory_diff ------------------------------------------------------ */

struct diff_run {
    struct docker_memory *mem;
    const struct sbx_memory_changes *out;
    struct walk w;
    struct diff d;
    int treefd;
};

static void forget_diff(struct docker_memory *mem)
{
    docker_list_free(&mem->last);
    docker_list_free(&mem->changed);
    for (size_t i = 0; i < mem->nremoved; i++)
        free(mem->removed[i]);
    free(mem->removed);
    mem->removed = NULL;
    mem->nremoved = 0;
    mem->diff_valid = mem->diff_quiet = mem->diff_whole = 0;
}

static int note_removed(struct diff_run *r, const char *path)
{
    struct docker_memory *mem = r->mem;
    char **g = realloc(mem->removed, (mem->nremoved + 1) * sizeof *g);
    if (!g || !(g[mem->nremoved] = strdup(path))) {
        if (g)
            mem->removed = g;
        return r->w.st->host->set_error(r->w.st->host, r->w.call, SBX_E_NOMEM, "out of memory");
    }
    mem->removed = g;
    mem->nremoved++;
    return r->out->removed ? r->out->removed(r->out->ctx, path) : SBX_OK;
}

/* The whole tree against the baseline (flags: SBX_MEMORY_DIFF_ALL). */
static int diff_whole(struct diff_run *r, uint32_t flags)
{
    struct docker_memory *mem = r->mem;
    int rc = docker_walk_tree(&r->w, mem->tree);
    for (size_t i = 0; rc == SBX_OK && i < r->w.files.n; i++) {
        const struct docker_mem_file *b = docker_list_find(&mem->base, r->w.files.v[i].path);
        if ((flags & SBX_MEMORY_DIFF_ALL) || !b || !docker_same_stat(b, &r->w.files.v[i]))
            rc = diff_file(&r->w, r->treefd, &r->w.files.v[i]);
    }
    for (size_t i = 0; rc == SBX_OK && i < mem->base.n; i++)
        if (!docker_list_find(&r->w.files, mem->base.v[i].path) && r->out->removed)
            rc = r->out->removed(r->out->ctx, mem->base.v[i].path);
    if (rc == SBX_OK) {
        mem->last = r->w.files; /* what accept records */
        memset(&r->w.files, 0, sizeof r->w.files);
        mem->diff_whole = 1;
    }
    return rc;
}

/* Only what the watch's events name: O(changes). */
static int diff_events(struct diff_run *r, struct events *e)
{
    struct docker_memory *mem = r->mem;
    struct docker_state *st = r->w.st;
    int rc = SBX_OK;
    if (e->nfiles)
        qsort(e->files, e->nfiles, sizeof *e->files, by_str);
    for (size_t i = 0; rc == SBX_OK && i < e->nfiles; i++) {
        if (i && !strcmp(e->files[i], e->files[i - 1]))
            continue;
        const char *path = e->files[i];
        const char *slash = strrchr(path, '/');
        const char *name = slash ? slash + 1 : path;
        char dir[4096];
        snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
        int dfd = sbxp_confine_open_strict(r->treefd, dir,
                                      O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK, 0);
        struct stat s;
        const struct docker_mem_file *b = docker_list_find(&mem->base, path);
        if (dfd < 0 || fstatat(dfd, name, &s, AT_SYMLINK_NOFOLLOW) != 0) {
            if (dfd >= 0)
                close(dfd);
            if (b)
                rc = note_removed(r, path);
            continue;
        }
        if (S_ISREG(s.st_mode)) {
            struct docker_mem_list one = {0};
            if (docker_list_add(&one, path, &s) != 0) {
                close(dfd);
                return st->host->set_error(st->host, r->w.call, SBX_E_NOMEM, "out of memory");
            }
            if (!b || !docker_same_stat(b, &one.v[0])) {
                rc = diff_file(&r->w, r->treefd, &one.v[0]);
                if (rc == SBX_OK && docker_list_add(&mem->changed, path, &s) != 0)
                    rc = st->host->set_error(st->host, r->w.call, SBX_E_NOMEM, "out of memory");
            }
            docker_list_free(&one);
        } else if (S_ISDIR(s.st_mode)) {
            /* its files come with an IN_ISDIR event of its own */
            if (b)
                rc = note_removed(r, path);
        } else {
            rc = diff_other(&r->w, dfd, name, path, &s);
            if (b && rc == SBX_OK)
                rc = note_removed(r, path);
        }
        close(dfd);
    }
    /* New directories: walked whole (and watched from now on); one inside
     * another new one is part of that walk. */
    if (e->ndirs)
        qsort(e->dirs, e->ndirs, sizeof *e->dirs, by_str);
    size_t nfiles = mem->changed.n; /* the sorted part */
    const char *outer = NULL;
    for (size_t i = 0; rc == SBX_OK && i < e->ndirs; i++) {
        size_t ol = outer ? strlen(outer) : 0;
        if (outer && (!strcmp(e->dirs[i], outer) ||
                      (!strncmp(e->dirs[i], outer, ol) && e->dirs[i][ol] == '/')))
            continue;
        outer = e->dirs[i];
        int dfd = sbxp_confine_open_strict(r->treefd, e->dirs[i],
                                      O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK, 0);
        if (dfd < 0)
            continue; /* gone again (or not a directory now): its files with it */
        char path[4096];
        snprintf(path, sizeof path, "%s", e->dirs[i]);
        struct walk sub = r->w;
        memset(&sub.files, 0, sizeof sub.files);
        sub.inotify_fd = mem->inotify_fd;
        sub.watch_mem = mem;
        rc = docker_walk_dir(&sub, dfd, path, strlen(path), 1);
        close(dfd);
        if (sub.watch_failed)
            e->whole = 1;
        for (size_t k = 0; rc == SBX_OK && k < sub.files.n; k++) {
            const struct docker_mem_file *b = docker_list_find(&mem->base, sub.files.v[k].path);
            if (b && docker_same_stat(b, &sub.files.v[k]))
                continue;
            struct docker_mem_list named = {mem->changed.v, nfiles, 0};
            if (docker_list_find(&named, sub.files.v[k].path))
                continue; /* named by an event of its own too */
            rc = diff_file(&r->w, r->treefd, &sub.files.v[k]);
            if (rc == SBX_OK && docker_list_add_file(&mem->changed, &sub.files.v[k]) != 0)
                rc = st->host->set_error(st->host, r->w.call, SBX_E_NOMEM, "out of memory");
        }
        docker_list_free(&sub.files);
    }
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
    /* A diff that was not accepted (a refused writeback) consumed the
     * events it saw: its changes are only found again by a whole walk. */
    int unaccepted = mem->diff_valid && !mem->diff_quiet;
    forget_diff(mem);
    int rc = SBX_OK;
    if (!mem->base_valid) {
        docker_list_free(&mem->base);
        if ((rc = docker_baseline_read(st, call, mem, &mem->base)) != SBX_OK)
            return rc;
        mem->base_valid = 1;
    }
    struct events e = {0};
    int incremental = mem->armed && !unaccepted && !(flags & SBX_MEMORY_DIFF_ALL);
    if (incremental && read_events(mem, &e) != 0) {
        events_free(&e);
        return st->host->set_error(st->host, call, SBX_E_NOMEM, "out of memory");
    }
    if (incremental && e.whole)
        incremental = 0;
    if (!incremental)
        docker_memory_watch_stop(mem); /* re-armed before the next command */
    if (incremental && !e.nfiles && !e.ndirs) {
        events_free(&e);
        mem->diff_valid = mem->diff_quiet = 1;
        /* an empty archive: no change */
        static const char end[1024];
        return out->tar->write(out->tar->ctx, end, sizeof end);
    }

    struct diff_run r = {.mem = mem, .out = out, .treefd = -1};
    r.d.out.sink = out->tar;
    r.d.out.status = SBX_OK;
    r.w = (struct walk){.st = st, .call = call, .inotify_fd = -1, .on_other = diff_other,
                        .ud = &r.d};
    r.d.a = sbxp_archive_sink_open(&r.d.out);
    if (!r.d.a) {
        events_free(&e);
        return st->host->set_error(st->host, call, SBX_E_NOMEM,
                                   "docker: cannot start the memory archive");
    }
    r.treefd = open(mem->tree, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (r.treefd < 0)
        rc = st->host->set_error(st->host, call, SBX_E_IO, "docker: cannot open %s: %s",
                                 mem->tree, strerror(errno));
    if (rc == SBX_OK)
        rc = incremental ? diff_events(&r, &e) : diff_whole(&r, flags);
    if (r.treefd >= 0)
        close(r.treefd);
    if (rc == SBX_OK && archive_write_close(r.d.a) != ARCHIVE_OK)
        rc = tar_fail(&r.w, "(end of archive)");
    archive_write_free(r.d.a);
    docker_list_free(&r.w.files);
    events_free(&e);
    if (rc == SBX_OK) {
        mem->diff_valid = 1;
    } else {
        forget_diff(mem);
        docker_memory_watch_stop(mem); /* its events are spent */
    }
    return rc;
}

/* ---- memory_accept and memory_watch ----------------------------------- */

/* Fold the last incremental diff into the cached baseline. */
static int apply_changes(struct docker_memory *mem)
{
    /* Lookups first, while the cached baseline is sorted; new files are
     * appended after. */
    struct docker_mem_list added = {0};
    for (size_t i = 0; i < mem->nremoved; i++) {
        struct docker_mem_file *b =
            (struct docker_mem_file *)docker_list_find(&mem->base, mem->removed[i]);
        if (b)
            b->mode = 0; /* dropped below */
    }
    for (size_t i = 0; i < mem->changed.n; i++) {
        const struct docker_mem_file *c = &mem->changed.v[i];
        struct docker_mem_file *b = (struct docker_mem_file *)docker_list_find(&mem->base, c->path);
        if (b) {
            char *keep = b->path;
            *b = *c;
            b->path = keep;
        } else if (docker_list_add_file(&added, c) != 0) {
            docker_list_free(&added);
            return -1;
        }
    }
    /* drop removals (order kept), then merge the new files in: O(n), no
     * sort of the whole baseline per accept */
    size_t kept = 0;
    for (size_t i = 0; i < mem->base.n; i++) {
        if (mem->base.v[i].mode)
            mem->base.v[kept++] = mem->base.v[i];
        else
            free(mem->base.v[i].path);
    }
    mem->base.n = kept;
    if (added.n) {
        sbxp_path_list_sort(added.v, added.n, sizeof *added.v);
        size_t total = kept + added.n;
        struct docker_mem_file *v = malloc(total * sizeof *v);
        if (!v) {
            docker_list_free(&added);
            return -1;
        }
        size_t a = 0, b = 0, o = 0;
        while (a < kept || b < added.n)
            v[o++] = b == added.n || (a < kept && strcmp(mem->base.v[a].path,
                                                         added.v[b].path) < 0)
                         ? mem->base.v[a++]
                         : added.v[b++];
        free(mem->base.v);
        free(added.v); /* its paths moved into v */
        mem->base.v = v;
        mem->base.n = mem->base.cap = total;
    }
    return 0;
}

int docker_memory_accept(sbx_sandbox *sb, sbx_call *call, const char *slug)
{
    struct docker_state *st = sb->st;
    struct docker_memory *mem = docker_memory_find(sb, call, slug);
    if (!mem)
        return SBX_E_NOT_FOUND;
    int rc = SBX_OK;
    if (mem->diff_valid && mem->diff_quiet) {
        /* nothing changed: the baseline stands */
    } else if (mem->diff_valid && mem->diff_whole) {
        rc = docker_baseline_write(st, call, mem, &mem->last);
        if (rc == SBX_OK) {
            docker_list_free(&mem->base);
            mem->base = mem->last;
            memset(&mem->last, 0, sizeof mem->last);
            mem->base_valid = 1;
        }
    } else if (mem->diff_valid) {
        if (apply_changes(mem) != 0) {
            mem->base_valid = 0;
            rc = st->host->set_error(st->host, call, SBX_E_NOMEM, "out of memory");
        } else if (mem->journal_lines > 2 * mem->base.n + 256) {
            rc = docker_baseline_write(st, call, mem, &mem->base); /* compact */
        } else {
            rc = docker_baseline_append(st, call, mem, &mem->changed, mem->removed, mem->nremoved);
        }
        if (rc != SBX_OK)
            mem->base_valid = 0; /* read back from the file next time */
    } else {
        docker_memory_watch_stop(mem);
        rc = docker_record_baseline(st, call, mem, 0);
    }
    forget_diff(mem);
    if (rc != SBX_OK)
        docker_memory_watch_stop(mem);
    return rc;
}

int docker_memory_watch(sbx_sandbox *sb, sbx_call *call, const char *slug)
{
    struct docker_memory *mem = docker_memory_find(sb, call, slug);
    if (!mem)
        return SBX_E_NOT_FOUND;
    int pending = 0;
    if (mem->armed && ioctl(mem->inotify_fd, FIONREAD, &pending) == 0 && pending == 0)
        return SBX_OK; /* still watching a tree equal to its baseline */
    docker_memory_watch_stop(mem);
    struct walk w = {.st = sb->st, .call = call, .dirs_only = 1, .watch_mem = mem};
    w.inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (w.inotify_fd < 0)
        return SBX_OK; /* no watch: the next diff walks */
    int fd = w.inotify_fd;
    /* Only directories are watched; the walk's own opens are not events. */
    int rc = docker_walk_tree(&w, mem->tree);
    docker_list_free(&w.files);
    if (rc != SBX_OK || w.watch_failed) {
        close(fd);
        for (size_t i = 0; i < mem->nwd; i++)
            free(mem->wd_paths[i]);
        free(mem->wd_paths);
        mem->wd_paths = NULL;
        mem->nwd = 0;
        return rc;
    }
    mem->inotify_fd = fd;
    mem->armed = 1;
    return SBX_OK;
}
