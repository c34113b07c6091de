/* op_samples.c - the per-op sample spool: records, the writer, the checks
 * the reader applies (op_samples.h). */
#include "op_samples.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

_Static_assert(sizeof(struct sbxs_op_sample) == 64, "a sample is 64 bytes");

/* How often a writer without a server (or whose spool failed) looks again. */
#define RECHECK_NS (5ull * 1000 * 1000 * 1000)
#define DAY_NS (86400ull * 1000 * 1000 * 1000)

uint64_t sbxs_op_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

bool sbxs_op_spool_dir(char *out, size_t len)
{
    out[0] = '\0';
    const char *dir = getenv("SBX_METRICS_DIR");
    int n;
    if (dir && *dir) {
        if (!strcmp(dir, "off") || dir[0] != '/')
            return false;
        n = snprintf(out, len, "%s", dir);
    } else if ((dir = getenv("XDG_STATE_HOME")) && dir[0] == '/') {
        n = snprintf(out, len, "%s/sbx/metrics", dir);
    } else if ((dir = getenv("HOME")) && dir[0] == '/') {
        n = snprintf(out, len, "%s/.local/state/sbx/metrics", dir);
    } else {
        return false;
    }
    if (n < 0 || (size_t)n >= len) {
        out[0] = '\0';
        return false;
    }
    return true;
}

bool sbxs_op_sample_name_ok(const char *name, size_t cap)
{
    size_t i = 0;
    for (; name[i]; i++) {
        char c = name[i];
        if (i + 1 >= cap ||
            !((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
            return false;
    }
    return i > 0;
}

/* A field read from a file: NUL-terminated within cap, NUL-padded after,
 * and a good name. */
static bool field_ok(const char *f, size_t cap)
{
    size_t n = strnlen(f, cap);
    if (n == 0 || n >= cap)
        return false;
    for (size_t i = n; i < cap; i++)
        if (f[i])
            return false;
    return sbxs_op_sample_name_ok(f, cap);
}

bool sbxs_op_sample_valid(const struct sbxs_op_sample *s)
{
    return s->magic == SBXS_OP_SAMPLE_MAGIC && s->version == SBXS_OP_SAMPLE_VERSION &&
           s->size == sizeof *s && s->reserved == 0 && s->status >= 0 &&
           s->status <= 255 && s->duration_ns < DAY_NS &&
           field_ok(s->provider, sizeof s->provider) && field_ok(s->op, sizeof s->op);
}

int sbxs_op_spool_openat(int dirfd, const char *name, int flags, unsigned mode)
{
    struct open_how how = {.flags = (uint64_t)(flags | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK),
                           .mode = (flags & O_CREAT) ? mode : 0,
                           .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS};
    long fd = syscall(SYS_openat2, dirfd, name, &how, sizeof how);
    return (int)fd;
}

int sbxs_op_spool_open(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode)) {
        close(fd);
        errno = ENOTDIR;
        return -1;
    }
    if (st.st_mode & S_IWOTH) {
        /* anyone could plant files or swap names: not ours to read or write */
        close(fd);
        errno = EPERM;
        return -1;
    }
    return fd;
}

/* The writer's state, one per process. */
static struct {
    pthread_mutex_t lock;
    pid_t pid;           /* this process (names its files); 0 until opened */
    int dirfd, fd;       /* -1 when closed */
    uint64_t written;    /* bytes in the current file */
    uint64_t next_check; /* monotonic ns: when a closed writer looks again */
    unsigned seq;
} w = {PTHREAD_MUTEX_INITIALIZER, 0, -1, -1, 0, 0, 0};

/* fork: the child must not append to the parent's file (its pid names
 * it) nor inherit a lock held mid-record. */
static void before_fork(void)
{
    pthread_mutex_lock(&w.lock);
}

static void after_fork_parent(void)
{
    pthread_mutex_unlock(&w.lock);
}

static void after_fork_child(void)
{
    if (w.fd >= 0)
        close(w.fd); /* the child's copy; the parent's lock stays */
    if (w.dirfd >= 0)
        close(w.dirfd);
    w.fd = w.dirfd = -1;
    w.pid = 0;
    w.seq = 0;
    w.written = 0;
    w.next_check = 0;
    pthread_mutex_unlock(&w.lock);
}

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void register_fork(void)
{
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

static void writer_close(void)
{
    if (w.fd >= 0)
        close(w.fd); /* releases the shared lock: the server may take it */
    if (w.dirfd >= 0)
        close(w.dirfd);
    w.fd = w.dirfd = -1;
    w.written = 0;
}

/* Whether a metrics server holds the spool's server lock. */
static bool server_running(int dirfd)
{
    int fd = sbxs_op_spool_openat(dirfd, SBXS_OP_SPOOL_SERVER, O_RDONLY, 0);
    if (fd < 0)
        return false;
    struct stat st;
    bool held = false;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
        if (flock(fd, LOCK_SH | LOCK_NB) != 0)
            held = errno == EWOULDBLOCK;
    }
    close(fd); /* drops the probe's shared lock, if it got one */
    return held;
}

/* Open a new file of this process: made under a dot name, locked, then
 * renamed into place, so the server never sees it unlocked and empty. */
static bool writer_open(void)
{
    char dir[4096];
    if (!sbxs_op_spool_dir(dir, sizeof dir))
        return false;
    w.dirfd = sbxs_op_spool_open(dir);
    if (w.dirfd < 0)
        return false;
    if (!server_running(w.dirfd)) {
        writer_close();
        return false;
    }
    if (w.pid == 0)
        w.pid = getpid();
    char tmp[64], name[64];
    unsigned seq = w.seq++;
    snprintf(tmp, sizeof tmp, ".%ld-%u.tmp", (long)w.pid, seq);
    snprintf(name, sizeof name, "%ld-%u.ops", (long)w.pid, seq);
    unlinkat(w.dirfd, tmp, 0);
    /* group-readable: in a shared setgid spool the server runs as another
     * member of the group (docs/OPERATIONS.md); a record holds no secret */
    w.fd = sbxs_op_spool_openat(w.dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_APPEND,
                                0640);
    if (w.fd < 0 || flock(w.fd, LOCK_SH | LOCK_NB) != 0 ||
        renameat(w.dirfd, tmp, w.dirfd, name) != 0) {
        unlinkat(w.dirfd, tmp, 0);
        writer_close();
        return false;
    }
    w.written = 0;
    return true;
}

void sbxs_op_sample_reset(void)
{
    pthread_mutex_lock(&w.lock);
    writer_close();
    w.pid = 0;
    w.seq = 0;
    w.next_check = 0;
    pthread_mutex_unlock(&w.lock);
}

void sbxs_op_sample_record(const char *provider, const char *op, int status,
                           uint64_t duration_ns)
{
    if (!provider || !op || !sbxs_op_sample_name_ok(provider, SBXS_OP_SAMPLE_PROVIDER_MAX) ||
        !sbxs_op_sample_name_ok(op, SBXS_OP_SAMPLE_OP_MAX) || status < 0 || status > 255)
        return;
    struct sbxs_op_sample s;
    memset(&s, 0, sizeof s);
    s.magic = SBXS_OP_SAMPLE_MAGIC;
    s.version = SBXS_OP_SAMPLE_VERSION;
    s.size = sizeof s;
    s.status = status;
    s.duration_ns = duration_ns < DAY_NS ? duration_ns : DAY_NS - 1;
    memcpy(s.provider, provider, strlen(provider));
    memcpy(s.op, op, strlen(op));

    pthread_once(&fork_once, register_fork);
    pthread_mutex_lock(&w.lock);
    uint64_t now = sbxs_op_now_ns();
    if (w.fd >= 0 && now >= w.next_check) {
        /* an open writer looks again too: when the server stopped, its
         * file is closed (the next server folds it) and nothing more is
         * written */
        w.next_check = now + RECHECK_NS;
        if (!server_running(w.dirfd))
            writer_close();
    } else if (w.fd < 0) {
        if (now < w.next_check) {
            pthread_mutex_unlock(&w.lock);
            return;
        }
        w.next_check = now + RECHECK_NS;
        if (!writer_open()) {
            pthread_mutex_unlock(&w.lock);
            return;
        }
    }
    if (w.fd < 0) {
        pthread_mutex_unlock(&w.lock);
        return;
    }
    ssize_t n = write(w.fd, &s, sizeof s);
    if (n != (ssize_t)sizeof s) {
        /* a full disk or a removed spool: stop until the next check */
        writer_close();
        w.next_check = sbxs_op_now_ns() + RECHECK_NS;
    } else if ((w.written += sizeof s) >= SBXS_OP_SPOOL_FILE_MAX) {
        writer_close(); /* the next sample starts a file (if a server runs) */
        w.next_check = 0;
    }
    pthread_mutex_unlock(&w.lock);
}
