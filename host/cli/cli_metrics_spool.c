/*
 * cli_metrics_spool.c - the metrics server's side of the op sample spool
 * (shared/op_samples.h): it creates the directory, holds the server lock
 * that tells writers to record, and folds the records into the histograms.
 *
 * Each "*.ops" file is read from the offset reached last time, in whole
 * records; an invalid record is counted and skipped. A file whose
 * exclusive lock can be taken has no writer any more: it is read to the
 * end and removed. A file is read at most up to the size a writer makes
 * (SBXS_OP_SPOOL_FILE_MAX): anything larger was not written by sbx and is
 * removed once unlocked. Files are opened beneath the directory's
 * descriptor without following symlinks, and only regular files are read.
 */
#include "cli.h"
#include "metrics.h"
#include "mkdirs.h"
#include "op_samples.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TRACKED_MAX 4096        /* files read part way, remembered */
#define FILES_PER_FOLD 4096     /* files looked at per fold */
#define TMP_STALE_S 60          /* a writer's dot file older than this is left over */
#define CHUNK_RECORDS 512

struct tracked {
    dev_t dev;
    ino_t ino;
    off_t off;
    bool seen;
};

struct cli_spool {
    char path[4096];
    int dirfd, lockfd;
    struct tracked *files;
    size_t nfiles;
};

struct cli_spool *cli_spool_open(void)
{
    struct cli_spool *sp = calloc(1, sizeof *sp);
    if (!sp) {
        cli_error("out of memory");
        return NULL;
    }
    sp->dirfd = sp->lockfd = -1;
    if (!sbxs_op_spool_dir(sp->path, sizeof sp->path)) {
        cli_error("--metrics: no spool directory for op samples: set SBX_METRICS_DIR to an "
                  "absolute path (it is \"off\" or not absolute), or XDG_STATE_HOME or HOME");
        free(sp);
        return NULL;
    }
    char failed[4096];
    if (sbxs_mkdirs(sp->path, 0700, failed, sizeof failed) != 0) {
        cli_error("--metrics: cannot create the spool directory '%s': %s", failed,
                  strerror(errno));
        free(sp);
        return NULL;
    }
    sp->dirfd = sbxs_op_spool_open(sp->path);
    if (sp->dirfd < 0) {
        cli_error("--metrics: cannot use the spool directory '%s': %s", sp->path,
                  errno == EPERM ? "other users may write it (chmod o-w)" : strerror(errno));
        free(sp);
        return NULL;
    }
    sp->lockfd = sbxs_op_spool_openat(sp->dirfd, SBXS_OP_SPOOL_SERVER, O_RDWR | O_CREAT, 0644);
    struct stat st;
    if (sp->lockfd < 0 || fstat(sp->lockfd, &st) != 0 || !S_ISREG(st.st_mode)) {
        cli_error("--metrics: cannot open '%s/%s': %s", sp->path, SBXS_OP_SPOOL_SERVER,
                  sp->lockfd < 0 ? strerror(errno) : "not a regular file");
        cli_spool_close(sp);
        return NULL;
    }
    if (flock(sp->lockfd, LOCK_EX | LOCK_NB) != 0) {
        cli_error("--metrics: another metrics server already uses the spool directory '%s' "
                  "(its lock %s is held)", sp->path, SBXS_OP_SPOOL_SERVER);
        cli_spool_close(sp);
        return NULL;
    }
    sp->files = calloc(TRACKED_MAX, sizeof *sp->files);
    if (!sp->files) {
        cli_error("out of memory");
        cli_spool_close(sp);
        return NULL;
    }
    return sp;
}

void cli_spool_close(struct cli_spool *sp)
{
    if (!sp)
        return;
    if (sp->lockfd >= 0)
        close(sp->lockfd); /* writers stop at their next file */
    if (sp->dirfd >= 0)
        close(sp->dirfd);
    free(sp->files);
    free(sp);
}

static struct tracked *find(struct cli_spool *sp, const struct stat *st)
{
    for (size_t i = 0; i < sp->nfiles; i++)
        if (sp->files[i].dev == st->st_dev && sp->files[i].ino == st->st_ino)
            return &sp->files[i];
    return NULL;
}

/* Read whole records from *off up to `end`; fold them. */
static void read_records(int fd, off_t *off, off_t end, struct cli_metrics *mx)
{
    struct sbxs_op_sample buf[CHUNK_RECORDS];
    while (*off + (off_t)sizeof buf[0] <= end) {
        size_t want = (size_t)(end - *off) / sizeof buf[0];
        if (want > CHUNK_RECORDS)
            want = CHUNK_RECORDS;
        ssize_t n = pread(fd, buf, want * sizeof buf[0], *off);
        if (n <= 0)
            return;
        size_t got = (size_t)n / sizeof buf[0];
        if (got == 0)
            return;
        uint64_t invalid = 0;
        for (size_t i = 0; i < got; i++) {
            if (sbxs_op_sample_valid(&buf[i]))
                cli_metrics_sample(mx, buf[i].provider, buf[i].op, buf[i].status,
                                   buf[i].duration_ns);
            else
                invalid++;
        }
        if (invalid)
            cli_metrics_samples_invalid(mx, invalid);
        *off += (off_t)(got * sizeof buf[0]);
    }
}

static bool has_suffix(const char *name, const char *suffix)
{
    size_t n = strlen(name), k = strlen(suffix);
    return n > k && !strcmp(name + n - k, suffix);
}

/* One "*.ops" file. */
static void fold_file(struct cli_spool *sp, const char *name, struct cli_metrics *mx)
{
    int fd = sbxs_op_spool_openat(sp->dirfd, name, O_RDONLY, 0);
    if (fd < 0)
        return;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd); /* a directory or fifo planted under a spool name: left alone */
        return;
    }
    /* taken: its writer closed it or exited, nothing more will come */
    bool done = flock(fd, LOCK_EX | LOCK_NB) == 0;
    if (done && fstat(fd, &st) != 0)
        st.st_size = 0;
    struct tracked *t = find(sp, &st);
    if (!t && !done && sp->nfiles >= TRACKED_MAX) {
        /* no room to remember how far it was read: left for a later fold
         * (reading it now would count its records again next time) */
        close(fd);
        return;
    }
    off_t off = t ? t->off : 0;
    off_t end = st.st_size;
    if (end > (off_t)SBXS_OP_SPOOL_FILE_MAX)
        end = SBXS_OP_SPOOL_FILE_MAX; /* not a writer's: the rest is ignored */
    read_records(fd, &off, end, mx);
    if (done) {
        /* a trailing partial record (a writer killed mid-write, a full
         * disk) is dropped with the file */
        if (off < st.st_size)
            cli_metrics_samples_invalid(mx, 1);
        unlinkat(sp->dirfd, name, 0);
        if (t)
            *t = sp->files[--sp->nfiles];
    } else if (t) {
        t->off = off;
        t->seen = true;
    } else {
        sp->files[sp->nfiles++] = (struct tracked){st.st_dev, st.st_ino, off, true};
    }
    close(fd);
}

/* A writer's ".PID-SEQ.tmp" left by a kill between create and rename. */
static void maybe_remove_tmp(struct cli_spool *sp, const char *name)
{
    int fd = sbxs_op_spool_openat(sp->dirfd, name, O_RDONLY, 0);
    if (fd < 0)
        return;
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
        st.st_mtime + TMP_STALE_S < time(NULL) && flock(fd, LOCK_EX | LOCK_NB) == 0)
        unlinkat(sp->dirfd, name, 0);
    close(fd);
}

void cli_spool_fold(struct cli_spool *sp, struct cli_metrics *mx)
{
    int dfd = sbxs_op_spool_openat(sp->dirfd, ".", O_RDONLY | O_DIRECTORY, 0);
    if (dfd < 0)
        return;
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return;
    }
    for (size_t i = 0; i < sp->nfiles; i++)
        sp->files[i].seen = false;
    struct dirent *e;
    size_t looked = 0;
    while ((e = readdir(d)) && looked < FILES_PER_FOLD) {
        if (e->d_type != DT_REG && e->d_type != DT_UNKNOWN)
            continue;
        if (e->d_name[0] == '.') {
            if (has_suffix(e->d_name, ".tmp")) {
                looked++;
                maybe_remove_tmp(sp, e->d_name);
            }
            continue;
        }
        if (!has_suffix(e->d_name, ".ops"))
            continue;
        looked++;
        fold_file(sp, e->d_name, mx);
    }
    closedir(d);
    /* forget the files that are gone */
    for (size_t i = 0; i < sp->nfiles;)
        if (!sp->files[i].seen)
            sp->files[i] = sp->files[--sp->nfiles];
        else
            i++;
}
