/*
 * frozen10.c - a real provider written from a frozen ABI header alone.
 *
 * It stands for a provider whose author took a frozen sbx/provider.h and
 * never looked at sbx again. It is built twice, each time with one frozen
 * header's directory as its only include path and no other project header
 * or library: with -I tests/abi/frozen/1.0 it is `frozen10` (its descriptor
 * claims ABI 1.0), with -I tests/abi/frozen/1.1 it is `frozen11` (the
 * descriptor SBX_PROVIDER_DEFINE fills in then claims 1.1 and carries the
 * 1.1 ops table size, with every appended op NULL). CI runs the whole
 * conformance suite against both on the current host. Keep it that way: it
 * uses only what the 1.0 header has, so one file serves both headers, and
 * when a later minor adds something, this file does not learn about it.
 * Like `local`, it declares no capability: those 1.1 added (memory stores,
 * egress, users) need a boundary that plain host processes lack (mounts
 * out of the command's reach, a network of its own, other uids).
 *
 * What it does (isolation none: commands are ordinary host processes):
 *  - workspaces are directories <root>/<key_hash> under the `root` key; the
 *    reference is that path, and the key hash in it is the owner record;
 *  - exec runs argv with fork + execve under a keeper process (the leader
 *    of a process group of its own and a child subreaper), feeds stdin
 *    from a thread, streams stdout and stderr to the sinks from the
 *    calling thread; the keeper kills the command's whole tree, also what
 *    left the group, on timeout, cancellation, a failing sink or source,
 *    destroy of the workspace, and 250 ms after the command has exited;
 *    the command inherits no descriptor but its stdio;
 *  - file ops resolve every path with openat2(RESOLVE_BENEATH); writes go
 *    to a temporary file renamed over the target once the source ended.
 *
 * This file and the provider template (examples/provider-template/
 * template.c) repeat each other on purpose: workspaces, the keeper, exec
 * and the file ops are largely the same code in both. Each has to stand
 * alone against one header (this one a frozen copy, the template the
 * installed sbx/provider.h) with no other source or library, so there is
 * no common file they could share; a fix to one is made in the other too.
 * The local provider's keeper (plugins/local/child.c) is the project's
 * own and may use the project's libraries.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pipe2, asprintf, NSIG */
#endif

#include <sbx/provider.h>

#if SBX_ABI_MAJOR != 1 || (SBX_ABI_MINOR != 0 && SBX_ABI_MINOR != 1)
#error "frozen10.c is built against a frozen header only (-I tests/abi/frozen/1.0 or 1.1)"
#endif

/* The provider is named after the header it was built from: the loader
 * wants the descriptor's name to be the file's (frozen10.so, frozen11.so). */
#if SBX_ABI_MINOR == 0
#define F10_NAME "frozen10"
#define F10_VERSION "1.0.0"
#define F10_DESCRIPTION "test provider built from the frozen ABI 1.0 header alone"
#else
#define F10_NAME "frozen11"
#define F10_VERSION "1.1.0"
#define F10_DESCRIPTION "test provider built from the frozen ABI 1.1 header alone"
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Buffer size for streaming files and command I/O. */
#define F10_CHUNK (64 * 1024)
/* Where argv[0] is looked up when the command's environment has no PATH. */
#define F10_DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin"
/* Once the keeper has exited (nothing of the command's tree is left), the
 * pipes are read for this long, then for at most F10_LINGER_MS more: a
 * process outside the tree (one the command passed a descriptor to) may
 * hold them forever. */
#define F10_DRAIN_MS 250
/* See F10_DRAIN_MS. */
#define F10_LINGER_MS 1000
/* After the command exits, the processes it left run this long before its
 * keeper kills them. */
#define F10_GRACE_MS 250
/* A keeper told to kill that has not exited after this long (one stopped
 * by the command) gets SIGKILL with its group. */
#define F10_KEEPER_WAIT_MS 1000
/* Deepest directory tree destroy walks into. */
#define F10_MAX_DEPTH 512

/* A command exec is running, listed in the instance so that destroy can
 * have it killed (exec on another handle, in another thread). */
struct running {
    dev_t ws_dev; /* the workspace directory */
    ino_t ws_ino;
    int ctl_fd;   /* the host's end of the keeper's control socket */
    struct running *next;
};

/* One instance. Immutable after init except the list of running commands
 * (under lock), so ops may share it across threads. */
struct f10 {
    const struct sbx_host *host;
    char root[PATH_MAX]; /* canonical absolute path of the root directory */
    size_t root_len;
    int root_fd; /* O_PATH fd of root */
    pthread_mutex_t lock;
    struct running *running;
};

/* A handle: one workspace. Immutable, so exec and the file ops may run on
 * it concurrently. */
struct sbx_sandbox {
    struct f10 *st;
    int dirfd;              /* O_PATH fd of the workspace */
    char path[SBX_REF_MAX]; /* the workspace path, also the reference */
};

/* Report an error through the host table and return its status. */
#define FAIL(st_, call_, status_, ...) \
    ((st_)->host->set_error((st_)->host, (call_), (status_), __VA_ARGS__))

/* ------------------------------------------------------------------------ */
/* Small helpers                                                              */
/* ------------------------------------------------------------------------ */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Whether s is SBX_KEY_HASH_LEN lowercase hex digits. */
static int is_key_hash(const char *s)
{
    if (!s)
        return 0;
    size_t n = 0;
    for (; s[n]; n++) {
        if (n >= SBX_KEY_HASH_LEN)
            return 0;
        if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f')))
            return 0;
    }
    return n == SBX_KEY_HASH_LEN;
}

/* openat2 confined to dirfd: absolute paths, ".." above dirfd and symbolic
 * links leading out fail with EXDEV. EAGAIN (a concurrent rename while
 * resolving "..") is retried. */
static int open_beneath(int dirfd, const char *path, int flags)
{
    struct open_how how;
    memset(&how, 0, sizeof how);
    how.flags = (uint64_t)(flags | O_CLOEXEC);
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    for (int i = 0; i < 16; i++) {
        long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof how);
        if (fd >= 0 || errno != EAGAIN)
            return (int)fd;
    }
    return -1;
}

/* The error of a failed path lookup in a workspace. */
static int path_error(struct f10 *st, sbx_call *call, const char *op,
                      const char *path, int e)
{
    switch (e) {
    case ENOENT:
    case ENOTDIR:
        return FAIL(st, call, SBX_E_NOT_FOUND, F10_NAME ": %s %s: no such file", op,
                    path);
    case EXDEV:
        return FAIL(st, call, SBX_E_INVALID,
                    F10_NAME ": %s %s: the path escapes the workspace", op, path);
    case ENXIO:
        return FAIL(st, call, SBX_E_INVALID, F10_NAME ": %s %s: not a regular file",
                    op, path);
    case ELOOP:
    case ENAMETOOLONG:
    case EINVAL:
        return FAIL(st, call, SBX_E_INVALID, F10_NAME ": %s %s: %s", op, path,
                    strerror(e));
    case EACCES:
    case EPERM:
        return FAIL(st, call, SBX_E_DENIED, F10_NAME ": %s %s: %s", op, path,
                    strerror(e));
    case ENOMEM:
        return FAIL(st, call, SBX_E_NOMEM, F10_NAME ": %s %s: out of memory", op,
                    path);
    default:
        return FAIL(st, call, SBX_E_IO, F10_NAME ": %s %s: %s", op, path, strerror(e));
    }
}

/* Write all of buf to a blocking fd; 0 or -1 with errno. */
static int write_full(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t w = write(fd, buf, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -1;
        buf += w;
        len -= (size_t)w;
    }
    return 0;
}

/* The source's pollable fd, or -1 when it offers none. */
static int source_poll_fd(const struct sbx_source *src)
{
    if (src->size < offsetof(struct sbx_source, poll_fd) + sizeof src->poll_fd ||
        !src->poll_fd)
        return -1;
    return src->poll_fd(src->ctx);
}

/* ------------------------------------------------------------------------ */
/* Instance                                                                   */
/* ------------------------------------------------------------------------ */

/* mkdir -p: every missing component of an absolute path is created. */
static int make_dirs(const char *path)
{
    char buf[PATH_MAX];
    size_t n = strlen(path);
    if (n >= sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != '\0')
            continue;
        char saved = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, 0700) != 0 && errno != EEXIST)
            return -1;
        buf[i] = saved;
    }
    return 0;
}

static int f10_init(const struct sbx_host *host, sbx_call *call, void **state)
{
    /* The host table of any 1.x host covers 1.0; refuse a broken one. */
    if (host->size < offsetof(struct sbx_host, cancel_fd) + sizeof host->cancel_fd)
        return SBX_E_ABI;
    const char *root = host->config_get(host, "root");
    if (!root || root[0] != '/')
        return host->set_error(host, call, SBX_E_CONFIG,
                               F10_NAME ": set `root` to an absolute directory");
    if (make_dirs(root) != 0)
        return host->set_error(host, call, SBX_E_CONFIG,
                               F10_NAME ": cannot create root %s: %s", root,
                               strerror(errno));
    struct f10 *st = calloc(1, sizeof *st);
    if (!st)
        return host->set_error(host, call, SBX_E_NOMEM, F10_NAME ": out of memory");
    st->host = host;
    /* Canonical, so that every instance writes and recognizes the same
     * references. */
    if (!realpath(root, st->root)) {
        int e = errno;
        free(st);
        return host->set_error(host, call, SBX_E_CONFIG,
                               F10_NAME ": cannot resolve root %s: %s", root,
                               strerror(e));
    }
    st->root_len = strlen(st->root);
    if (st->root_len < 2 || st->root_len + 1 + SBX_KEY_HASH_LEN >= SBX_REF_MAX) {
        free(st);
        return host->set_error(host, call, SBX_E_CONFIG,
                               F10_NAME ": root %s must be a directory other than / "
                               "with a path shorter than %d bytes",
                               root, SBX_REF_MAX - SBX_KEY_HASH_LEN - 1);
    }
    st->root_fd = open(st->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (st->root_fd < 0) {
        int e = errno;
        free(st);
        return host->set_error(host, call, SBX_E_CONFIG,
                               F10_NAME ": cannot open root %s: %s", root, strerror(e));
    }
    pthread_mutex_init(&st->lock, NULL);
    *state = st;
    return SBX_OK;
}

static void f10_fini(void *state)
{
    struct f10 *st = state;
    pthread_mutex_destroy(&st->lock);
    close(st->root_fd);
    free(st);
}

/* ------------------------------------------------------------------------ */
/* Workspaces                                                                 */
/* ------------------------------------------------------------------------ */

/* A handle on the workspace <root>/<hash>; *e is errno on failure. */
static sbx_sandbox *open_handle(struct f10 *st, const char *hash, int *e)
{
    sbx_sandbox *sb = calloc(1, sizeof *sb);
    if (!sb) {
        *e = ENOMEM;
        return NULL;
    }
    sb->dirfd = openat(st->root_fd, hash, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sb->dirfd < 0) {
        *e = errno;
        free(sb);
        return NULL;
    }
    sb->st = st;
    /* init checked that root, '/' and a key hash fit in SBX_REF_MAX */
    memcpy(sb->path, st->root, st->root_len);
    sb->path[st->root_len] = '/';
    memcpy(sb->path + st->root_len + 1, hash, SBX_KEY_HASH_LEN + 1);
    return sb;
}

static int f10_create(void *state, sbx_call *call, const struct sbx_create_args *args,
                      char *ref, sbx_sandbox **out)
{
    struct f10 *st = state;
    if (!is_key_hash(args->key_hash))
        return FAIL(st, call, SBX_E_INVALID,
                    F10_NAME ": the key hash is not %d lowercase hex digits",
                    SBX_KEY_HASH_LEN);
    int e = 0;
    /* Idempotent: an existing workspace (ours, another instance's or
     * another process's) is simply opened. A destroy racing in between
     * removes it again: try a few times. */
    for (int attempt = 0; attempt < 3; attempt++) {
        if (mkdirat(st->root_fd, args->key_hash, 0700) != 0 && errno != EEXIST) {
            e = errno;
            break;
        }
        sbx_sandbox *sb = open_handle(st, args->key_hash, &e);
        if (sb) {
            memcpy(ref, sb->path, strlen(sb->path) + 1);
            *out = sb;
            return SBX_OK;
        }
        if (e != ENOENT)
            break;
    }
    return FAIL(st, call, e == ENOMEM ? SBX_E_NOMEM : SBX_E_IO,
                F10_NAME ": cannot create workspace %s/%s: %s", st->root,
                args->key_hash, strerror(e));
}

/* Ownership: a reference is <root>/<hash> and hash must be the caller's.
 * Returns SBX_OK and sets *hash to the reference's key hash. */
static int check_owner(struct f10 *st, sbx_call *call, const char *ref,
                       const char *key_hash, const char **hash)
{
    if (!ref || strncmp(ref, st->root, st->root_len) != 0 || ref[st->root_len] != '/' ||
        !is_key_hash(ref + st->root_len + 1))
        return FAIL(st, call, SBX_E_INVALID,
                    F10_NAME ": %.100s is not a workspace reference under %s",
                    ref ? ref : "(null)", st->root);
    *hash = ref + st->root_len + 1;
    if (!key_hash || strcmp(*hash, key_hash) != 0)
        return FAIL(st, call, SBX_E_DENIED,
                    F10_NAME ": workspace %s belongs to another session", ref);
    return SBX_OK;
}

static int f10_attach(void *state, sbx_call *call, const struct sbx_attach_args *args,
                      sbx_sandbox **out)
{
    struct f10 *st = state;
    const char *hash;
    int rc = check_owner(st, call, args->ref, args->key_hash, &hash);
    if (rc != SBX_OK)
        return rc;
    int e = 0;
    sbx_sandbox *sb = open_handle(st, hash, &e);
    if (!sb) {
        if (e == ENOENT)
            return FAIL(st, call, SBX_E_NOT_FOUND, F10_NAME ": workspace %s is gone",
                        args->ref);
        return FAIL(st, call, e == ENOMEM ? SBX_E_NOMEM : SBX_E_IO,
                    F10_NAME ": cannot open workspace %s: %s", args->ref, strerror(e));
    }
    *out = sb;
    return SBX_OK;
}

static const char *f10_root(sbx_sandbox *sb)
{
    return sb->path;
}

static void f10_release(sbx_sandbox *sb)
{
    close(sb->dirfd);
    free(sb);
}

/* Ask a command's keeper to kill its tree now. A socket rather than a
 * pipe, so that telling a keeper that has already exited fails with EPIPE
 * instead of raising SIGPIPE in the host. */
static void tell_keeper(int ctl_fd)
{
    if (ctl_fd >= 0)
        (void)send(ctl_fd, "k", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
}

static void running_add(struct f10 *st, struct running *r)
{
    pthread_mutex_lock(&st->lock);
    r->next = st->running;
    st->running = r;
    pthread_mutex_unlock(&st->lock);
}

/* Unlist r; after this, destroy no longer uses its ctl_fd, which the
 * caller may close. */
static void running_remove(struct f10 *st, struct running *r)
{
    pthread_mutex_lock(&st->lock);
    for (struct running **p = &st->running; *p; p = &(*p)->next)
        if (*p == r) {
            *p = r->next;
            break;
        }
    pthread_mutex_unlock(&st->lock);
}

/* Have every command running in the workspace (dev, ino) killed. */
static void kill_running(struct f10 *st, dev_t dev, ino_t ino)
{
    pthread_mutex_lock(&st->lock);
    for (struct running *r = st->running; r; r = r->next)
        if (r->ws_dev == dev && r->ws_ino == ino)
            tell_keeper(r->ctl_fd);
    pthread_mutex_unlock(&st->lock);
}

/*
 * Remove parent/name and everything below it without following symbolic
 * links (a command may have planted some). Directories a command made
 * unwritable are opened up first. Files created while the walk runs make
 * the final rmdir fail with ENOTEMPTY; the walk is then repeated.
 */
static int remove_tree(int parent, const char *name, unsigned depth)
{
    if (unlinkat(parent, name, 0) == 0 || errno == ENOENT)
        return 0;
    if (errno != EISDIR && errno != EPERM)
        return -1;
    if (depth > F10_MAX_DEPTH) {
        errno = ELOOP;
        return -1;
    }
    for (int pass = 0; pass < 4; pass++) {
        int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 && errno == EACCES &&
            fchmodat(parent, name, 0700, AT_SYMLINK_NOFOLLOW) == 0)
            fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
            return errno == ENOENT ? 0 : -1;
        (void)fchmod(fd, 0700); /* entries of a 0500 directory cannot go */
        DIR *d = fdopendir(fd);
        if (!d) {
            close(fd);
            return -1;
        }
        int rc = 0;
        struct dirent *ent;
        while ((ent = readdir(d)) != NULL) {
            if (!strcmp(ent->d_name, ".") || !strcmp(ent->d_name, ".."))
                continue;
            if (remove_tree(dirfd(d), ent->d_name, depth + 1) != 0)
                rc = -1;
        }
        int saved = errno;
        closedir(d);
        if (rc != 0) {
            errno = saved;
            return -1;
        }
        if (unlinkat(parent, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
            return 0;
        if (errno != ENOTEMPTY && errno != EEXIST)
            return -1;
    }
    return -1;
}

static int f10_destroy(void *state, sbx_call *call, const struct sbx_destroy_args *args)
{
    struct f10 *st = state;
    const char *hash;
    int rc = check_owner(st, call, args->ref, args->key_hash, &hash);
    if (rc != SBX_OK)
        return rc;
    /* Commands still running in it (exec calls on other handles) are
     * killed first: their keepers kill their whole trees, and those exec
     * calls return. */
    struct stat ws;
    if (fstatat(st->root_fd, hash, &ws, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(ws.st_mode))
        kill_running(st, ws.st_dev, ws.st_ino);
    /* A workspace that is already gone is destroyed: SBX_OK. */
    if (remove_tree(st->root_fd, hash, 0) != 0)
        return FAIL(st, call, SBX_E_IO, F10_NAME ": cannot remove workspace %s: %s",
                    args->ref, strerror(errno));
    return SBX_OK;
}

/* ------------------------------------------------------------------------ */
/* exec: starting the command                                                 */
/* ------------------------------------------------------------------------ */

/* The value of PATH in envp, or NULL. */
static const char *env_path(char *const *envp)
{
    for (; *envp; envp++)
        if (!strncmp(*envp, "PATH=", 5))
            return *envp + 5;
    return NULL;
}

static void free_list(char **list)
{
    if (!list)
        return;
    for (char **p = list; *p; p++)
        free(*p);
    free(list);
}

/*
 * The paths to try for argv[0], NULL-terminated: the program itself when it
 * has a slash, else one per entry of the command's own PATH (relative
 * entries resolve in the command's cwd, as they would for the command
 * itself; an empty entry is the current directory). Built before fork:
 * the child may only call async-signal-safe functions.
 */
static char **candidates(const char *prog, char *const *envp)
{
    const char *path = strchr(prog, '/') ? NULL : env_path(envp);
    if (!strchr(prog, '/') && !path)
        path = F10_DEFAULT_PATH;
    size_t n = 1;
    for (const char *p = path; p && *p; p++)
        n += *p == ':';
    char **list = calloc(n + 1, sizeof *list);
    if (!list)
        return NULL;
    if (!path) {
        if (!(list[0] = strdup(prog))) {
            free(list);
            return NULL;
        }
        return list;
    }
    size_t i = 0;
    for (const char *p = path;; p++) {
        const char *end = strchr(p, ':');
        int dlen = (int)(end ? (size_t)(end - p) : strlen(p));
        if (asprintf(&list[i], "%.*s/%s", dlen ? dlen : 1, dlen ? p : ".", prog) < 0) {
            list[i] = NULL;
            free_list(list);
            return NULL;
        }
        i++;
        if (!end)
            break;
        p = end;
    }
    return list;
}

/* What the child reports through its error pipe when it cannot exec. */
struct child_error {
    int during_setup; /* fchdir or dup2 failed, not the exec */
    int err;
};

/* Mark every descriptor from 3 up close-on-exec (not closed: the error
 * pipe must work until the exec), also those a library of the host opened
 * without O_CLOEXEC. The loop is for kernels without close_range. */
static void cloexec_from_3(void)
{
    if (syscall(SYS_close_range, 3, ~0U, 4 /* CLOSE_RANGE_CLOEXEC */) == 0)
        return;
    struct rlimit rl;
    long max = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
                   ? (long)rl.rlim_cur
                   : 65536;
    for (long fd = 3; fd < max; fd++)
        (void)fcntl((int)fd, F_SETFD, FD_CLOEXEC);
}

/* Close every descriptor but keep (the keeper holds nothing else). */
static void close_all_but(int keep)
{
    if ((keep <= 0 || syscall(SYS_close_range, 0, (unsigned)keep - 1, 0) == 0) &&
        syscall(SYS_close_range, (unsigned)keep + 1, ~0U, 0) == 0)
        return;
    struct rlimit rl;
    long max = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
                   ? (long)rl.rlim_cur
                   : 65536;
    for (long fd = 0; fd < max; fd++)
        if (fd != keep)
            (void)close((int)fd);
}

/*
 * The command between fork and exec: only async-signal-safe calls. Every
 * signal back to its default (a disposition ignored in the host would
 * survive exec), the cwd and stdio, no other descriptor, an empty mask
 * last, then each candidate in turn. It stays in its keeper's process
 * group.
 */
static void run_child(int cwd_fd, const int stdio[3], char **cands, char *const *argv,
                      char *const *envp, int report_fd)
{
    struct child_error ce = {1, 0};
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    for (int sig = 1; sig < NSIG; sig++)
        (void)sigaction(sig, &dfl, NULL); /* fails harmlessly for KILL, STOP */
    int tmp[3];
    /* Move the fds above 2 first, so none is overwritten by another's dup2
     * (the host may have closed its own stdio). */
    for (int i = 0; i < 3; i++)
        if ((tmp[i] = fcntl(stdio[i], F_DUPFD_CLOEXEC, 3)) < 0)
            goto fail;
    for (int i = 0; i < 3; i++)
        if (dup2(tmp[i], i) < 0)
            goto fail;
    if (fchdir(cwd_fd) != 0)
        goto fail;
    cloexec_from_3();
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    ce.during_setup = 0;
    ce.err = ENOENT;
    int denied = 0;
    for (char **c = cands; *c; c++) {
        execve(*c, argv, envp);
        if (errno == EACCES)
            denied = 1;
        else if (errno != ENOENT && errno != ENOTDIR) {
            ce.err = errno;
            break;
        }
    }
    if (denied && (ce.err == ENOENT || ce.err == ENOTDIR))
        ce.err = EACCES;
    (void)!write(report_fd, &ce, sizeof ce);
    _exit(127);
fail:
    ce.err = errno;
    (void)!write(report_fd, &ce, sizeof ce);
    _exit(127);
}

/* What the keeper runs: the command and its descriptors. */
struct keeper_plan {
    int cwd_fd;
    const int *stdio;
    char **cands;
    char *const *argv, *const *envp;
    int report_fd; /* close-on-exec write end of the error pipe */
    int ctl_fd;    /* the keeper's end of the control socket */
};

/* "/proc/self/task/<pid>/children" of the (single-threaded) caller,
 * without stdio: the keeper only makes system calls. */
static void children_path(char path[64])
{
    static const char head[] = "/proc/self/task/", tail[] = "/children";
    size_t len = 0;
    for (; head[len]; len++)
        path[len] = head[len];
    char digits[24];
    int nd = 0;
    for (long pid = (long)getpid(); nd == 0 || (pid && nd < 23); pid /= 10)
        digits[nd++] = (char)('0' + pid % 10);
    while (nd)
        path[len++] = digits[--nd];
    for (size_t i = 0; i < sizeof tail; i++)
        path[len + i] = tail[i];
}

/* SIGKILL every child of the keeper until it has none: the children of a
 * killed process become the keeper's in turn (it is their subreaper).
 * *cws gets the command's status when it is reaped here. */
static void keeper_kill_all(pid_t cmd, int *cws, int *cdone)
{
    char path[64];
    children_path(path);
    int64_t giveup = -1;
    for (;;) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        char buf[4096];
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
        if (fd >= 0)
            close(fd);
        /* "pid pid ... ": a number the full buffer cut off is not killed
         * (it would be another pid); the next round reads it again. The
         * pids are the keeper's children, unreaped, so none was reused. */
        long pid = 0;
        ssize_t end = n == (ssize_t)sizeof buf - 1 ? n - 1 : n;
        for (ssize_t i = 0; i <= end; i++) {
            if (i < n && buf[i] >= '0' && buf[i] <= '9') {
                pid = pid * 10 + (buf[i] - '0');
            } else if (pid) {
                kill((pid_t)pid, SIGKILL);
                pid = 0;
            }
        }
        /* Without /proc/<pid>/children (no /proc, or a kernel without
         * CONFIG_PROC_CHILDREN) the others cannot be found: kill the
         * command at least, and wait for the rest for a bounded time only,
         * so that exec still returns (what is left then outlives it). */
        if (n < 0 && !*cdone)
            kill(cmd, SIGKILL);
        if (n < 0 && giveup < 0)
            giveup = now_ms() + F10_KEEPER_WAIT_MS / 2;
        int ws;
        pid_t w = waitpid(-1, &ws, n < 0 ? WNOHANG : 0);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return; /* ECHILD: nothing is left */
        if (w == cmd) {
            *cws = ws;
            *cdone = 1;
        }
        if (w == 0) {
            if (now_ms() >= giveup)
                return;
            struct timespec ts = {.tv_sec = 0, .tv_nsec = 20 * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
}

/*
 * The keeper: the process exec starts, the leader of the command's process
 * group and a child subreaper, so that every orphan of the command's tree
 * (what left the group with setsid, double forks) becomes its child. It is
 * forked from the host, so it only makes async-signal-safe calls. It forks
 * the command, keeps no descriptor but its end of the control socket,
 * waits for the command, lets the rest of the tree run for F10_GRACE_MS
 * after the command exited, then kills every process left and exits the
 * way the command did (its exit code, or its signal without a core file),
 * which is what exec reports. The host makes it kill at once (timeout,
 * cancellation, destroy, a failing sink or source) by sending a byte or
 * closing its end; a host that dies closes it too.
 */
static void keeper_run(const struct keeper_plan *p)
{
    /* A host that ignores SIGCHLD would make wait lose the status. */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    (void)sigaction(SIGCHLD, &dfl, NULL);
    struct child_error ce = {1, 0};
    if (setpgid(0, 0) != 0 || prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) {
        ce.err = errno;
        (void)!write(p->report_fd, &ce, sizeof ce);
        _exit(127);
    }
    pid_t cmd = fork();
    if (cmd == 0)
        run_child(p->cwd_fd, p->stdio, p->cands, p->argv, p->envp, p->report_fd);
    if (cmd < 0) {
        ce.err = errno;
        (void)!write(p->report_fd, &ce, sizeof ce);
        _exit(127);
    }
    /* The host's other descriptors (other commands' pipes among them) must
     * not stay open in here, nor the error pipe (the host waits for its
     * end of file). */
    int keep = p->ctl_fd;
    close_all_but(keep);

    int cws = 0, cdone = 0;
    int64_t grace_end = 0;
    for (;;) {
        int ws;
        pid_t w;
        while ((w = waitpid(-1, &ws, WNOHANG)) > 0)
            if (w == cmd) {
                cws = ws;
                cdone = 1;
                grace_end = now_ms() + F10_GRACE_MS;
            }
        if (w < 0 && errno == ECHILD)
            break; /* the whole tree has ended by itself */
        if (cdone && now_ms() >= grace_end)
            break;
        struct pollfd pfd = {keep, POLLIN, 0};
        if (poll(&pfd, 1, 20) > 0 && pfd.revents)
            break; /* the host asks for the kill, or is gone */
    }
    keeper_kill_all(cmd, &cws, &cdone);
    if (!cdone || WIFEXITED(cws))
        _exit(cdone ? WEXITSTATUS(cws) : 127);
    /* Die of the command's signal, without a core file of the keeper. */
    int sig = WTERMSIG(cws);
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    (void)sigaction(sig, &dfl, NULL);
    sigset_t only;
    sigfillset(&only);
    sigdelset(&only, sig);
    sigprocmask(SIG_SETMASK, &only, NULL);
    kill(getpid(), sig);
    _exit(128 + sig);
}

/* The error of a failed exec of prog. */
static int exec_error(struct f10 *st, sbx_call *call, const char *prog, int e)
{
    switch (e) {
    case ENOENT:
    case ENOTDIR:
        return FAIL(st, call, SBX_E_NO_COMMAND, F10_NAME ": command not found: %s", prog);
    case EACCES:
    case EPERM:
    case ENOEXEC:
    case EISDIR:
        return FAIL(st, call, SBX_E_NOT_EXEC, F10_NAME ": cannot execute %s: %s", prog,
                    strerror(e));
    case E2BIG:
    case ENAMETOOLONG:
        return FAIL(st, call, SBX_E_INVALID, F10_NAME ": cannot execute %s: %s", prog,
                    strerror(e));
    case ENOMEM:
        return FAIL(st, call, SBX_E_NOMEM, F10_NAME ": cannot start %s: %s", prog,
                    strerror(e));
    default:
        return FAIL(st, call, SBX_E_IO, F10_NAME ": cannot start %s: %s", prog,
                    strerror(e));
    }
}

/*
 * Start the command under its keeper (the leader of a new process group),
 * in cwd_fd, with stdio[0..2]; *pid_out is the keeper, *ctl_out the host's
 * end of its control socket. fork + execve rather than posix_spawn: glibc's
 * posix_spawn leaves its two internal real-time signals ignored in the
 * child, which then keep SIG_IGN across exec. The command reports a failed
 * exec through a close-on-exec pipe, so exec returns SBX_E_NO_COMMAND or
 * SBX_E_NOT_EXEC rather than an exit status 127.
 */
static int spawn_command(struct f10 *st, sbx_call *call, const struct sbx_exec_args *a,
                         int cwd_fd, const int stdio[3], pid_t *pid_out, int *ctl_out)
{
    static char *const empty_env[] = {NULL};
    char *const *envp = a->env ? (char *const *)a->env : empty_env;
    char **cands = candidates(a->argv[0], envp);
    if (!cands)
        return FAIL(st, call, SBX_E_NOMEM, F10_NAME ": out of memory");
    int report[2], ctl[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl) != 0) {
        free_list(cands);
        return FAIL(st, call, SBX_E_IO, F10_NAME ": socketpair: %s", strerror(errno));
    }
    if (pipe2(report, O_CLOEXEC) != 0) {
        int e = errno;
        close(ctl[0]);
        close(ctl[1]);
        free_list(cands);
        return FAIL(st, call, SBX_E_IO, F10_NAME ": pipe: %s", strerror(e));
    }
    struct keeper_plan plan = {
        .cwd_fd = cwd_fd, .stdio = stdio, .cands = cands, .argv = (char *const *)a->argv,
        .envp = envp, .report_fd = report[1], .ctl_fd = ctl[0],
    };
    /* With every signal blocked across fork, no host handler can run in the
     * child before it resets the dispositions. */
    sigset_t all, saved;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &saved);
    pid_t pid = fork();
    if (pid == 0)
        keeper_run(&plan);
    int fork_errno = errno;
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    close(report[1]);
    close(ctl[0]);
    free_list(cands);
    if (pid < 0) {
        close(report[0]);
        close(ctl[1]);
        return FAIL(st, call, fork_errno == ENOMEM ? SBX_E_NOMEM : SBX_E_IO,
                    F10_NAME ": fork: %s", strerror(fork_errno));
    }
    /* End of file: the exec succeeded (the pipe closed with it). */
    struct child_error ce;
    ssize_t n;
    while ((n = read(report[0], &ce, sizeof ce)) < 0 && errno == EINTR)
        ;
    close(report[0]);
    if (n == 0) {
        *pid_out = pid;
        *ctl_out = ctl[1];
        return SBX_OK;
    }
    close(ctl[1]); /* the keeper kills what is left and exits */
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
    if (n != (ssize_t)sizeof ce)
        return FAIL(st, call, SBX_E_IO, F10_NAME ": the command's child failed to start");
    if (ce.during_setup)
        return FAIL(st, call, SBX_E_IO, F10_NAME ": cannot prepare %s: %s", a->argv[0],
                    strerror(ce.err));
    return exec_error(st, call, a->argv[0], ce.err);
}

/* ------------------------------------------------------------------------ */
/* exec: feeding stdin                                                        */
/* ------------------------------------------------------------------------ */

/* The stdin feeder: a thread that moves bytes from the source into the
 * command's stdin pipe until the source ends, the command stops reading or
 * exec says stop. */
struct feeder {
    const struct sbx_source *src;
    int fd;        /* non-blocking write end of the command's stdin */
    int stop_fd;   /* eventfd, readable once exec wants the feeder gone */
    int ctl_fd;    /* the keeper's control socket, told when the source fails */
    char *buf;     /* F10_CHUNK bytes */
    int failed;    /* the source's read failed (read after join) */
    pthread_t thread;
};

/* Wait for `events` on fd next to the stop signal; fd < 0 only looks at
 * the stop signal, without waiting. Returns 0 once exec said stop. */
static int wait_or_stop(const struct feeder *f, int fd, short events)
{
    for (;;) {
        /* poll ignores an entry whose fd is negative */
        struct pollfd p[2] = {{f->stop_fd, POLLIN, 0}, {fd, events, 0}};
        int n = poll(p, 2, fd >= 0 ? -1 : 0);
        if (n < 0 && errno == EINTR)
            continue;
        return n >= 0 && !(p[0].revents & POLLIN);
    }
}

/* Write a chunk into the pipe; 0 when the feeder should stop (the command
 * closed its stdin, or exec said stop). */
static int feed_chunk(struct feeder *f, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t w = write(f->fd, buf, len);
        if (w > 0) {
            buf += w;
            len -= (size_t)w;
        } else if (w < 0 && errno == EINTR) {
            continue;
        } else if (w < 0 && errno == EAGAIN) {
            if (!wait_or_stop(f, f->fd, POLLOUT))
                return 0;
        } else {
            return 0; /* EPIPE: the command does not want more */
        }
    }
    return 1;
}

static void *feeder_main(void *arg)
{
    struct feeder *f = arg;
    /* A command that exits without reading makes the write fail with EPIPE;
     * with SIGPIPE blocked in this thread, the signal that comes with it
     * stays pending here and dies with the thread instead of reaching the
     * host. */
    sigset_t pipe_set;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, NULL);

    int pfd = source_poll_fd(f->src);
    for (;;) {
        /* With a pollable source, wait for data next to the stop signal, so
         * that a quiet open stdin cannot hold exec; without one, a read in
         * progress is waited for (the source is only borrowed). */
        if (!wait_or_stop(f, pfd, POLLIN))
            break;
        long n = f->src->read(f->src->ctx, f->buf, F10_CHUNK);
        if (n == 0)
            break;
        if (n < 0 || n > F10_CHUNK) {
            /* The host has set the call's error. Kill the command rather
             * than let it take a truncated stdin for a complete one. */
            f->failed = 1;
            tell_keeper(f->ctl_fd);
            break;
        }
        if (!feed_chunk(f, f->buf, (size_t)n))
            break;
    }
    close(f->fd);
    f->fd = -1;
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* exec: running and collecting                                               */
/* ------------------------------------------------------------------------ */

/* Everything one exec call owns, released in one place. */
struct run {
    struct f10 *st;
    sbx_call *call;
    pid_t pid;        /* the keeper */
    struct running node; /* listed for destroy; node.ctl_fd is the keeper's */
    int64_t told_at;  /* when the keeper was told to kill, or -1 */
    int pidfd;        /* -1 when pidfd_open is unavailable */
    int cancel_fd;    /* the host's, never closed; -1 when not cancellable */
    int out[2];       /* read ends of stdout and stderr; -1 once closed */
    const struct sbx_sink *sink[2];
    uint64_t bytes[2];
    int sink_rc;      /* first failure of a sink */
    char *buf;
};

/* Have the command's keeper kill the whole tree now. */
static void kill_group(struct run *r)
{
    tell_keeper(r->node.ctl_fd);
    if (r->told_at < 0)
        r->told_at = now_ms();
}

/* Read one chunk from stream i and pass it on; closes it at end of file. */
static void pump(struct run *r, int i)
{
    ssize_t n = read(r->out[i], r->buf, F10_CHUNK);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) {
        close(r->out[i]);
        r->out[i] = -1;
        return;
    }
    r->bytes[i] += (uint64_t)n;
    const struct sbx_sink *s = r->sink[i];
    if (s && r->sink_rc == SBX_OK) {
        int rc = s->write(s->ctx, r->buf, (size_t)n);
        if (rc != SBX_OK) {
            r->sink_rc = rc;
            kill_group(r); /* nobody wants the rest */
        }
    }
}

/* Whether the command (the group leader) has exited; it stays a zombie
 * (WNOWAIT) until reap(). */
static int leader_exited(const struct run *r)
{
    siginfo_t si;
    memset(&si, 0, sizeof si);
    if (waitid(P_PID, (id_t)r->pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0)
        return errno == ECHILD; /* somebody else reaped it: it is gone */
    return si.si_pid == r->pid;
}

static int min_timeout(int cur, int64_t until, int64_t now)
{
    if (until < 0)
        return cur;
    int64_t left = until > now ? until - now : 0;
    if (left > INT_MAX)
        left = INT_MAX;
    return cur < 0 || left < cur ? (int)left : cur;
}

/* Outcome of the wait loop. */
struct waited {
    int timed_out;
    int cancelled;
};

/*
 * Stream output until the keeper has exited and the output is drained:
 * have the tree killed at the deadline or on cancellation; stop feeding
 * stdin the moment the keeper exits (the command and what it left have
 * ended then); pipes still held after that are read for a bounded time.
 */
static struct waited wait_command(struct run *r, int64_t timeout_ms,
                                  const struct feeder *feed)
{
    const struct sbx_host *host = r->st->host;
    struct waited w = {0, 0};
    int64_t deadline = timeout_ms > 0 ? now_ms() + timeout_ms : -1;
    int exited = 0, killed = 0;
    int64_t drain_until = -1, linger_until = -1;
    for (;;) {
        int64_t t = now_ms();
        /* A keeper the command stopped cannot kill: its group is killed
         * (it is not reaped yet, so its pid, the group id, is not reused). */
        if (!exited && r->told_at >= 0 && t >= r->told_at + F10_KEEPER_WAIT_MS) {
            kill(-r->pid, SIGKILL);
            r->told_at = INT64_MAX / 2;
        }
        if (!exited && !killed && deadline >= 0 && t >= deadline) {
            w.timed_out = 1;
            kill_group(r);
            killed = 1;
        }
        if (!exited && !killed && r->cancel_fd >= 0 && host->cancelled(host, r->call)) {
            w.cancelled = 1;
            kill_group(r);
            killed = 1;
        }
        if (exited) {
            if (r->out[0] < 0 && r->out[1] < 0)
                break;
            if (linger_until < 0 && t >= drain_until) {
                kill_group(r);
                linger_until = t + F10_LINGER_MS;
            }
            if (linger_until >= 0 && t >= linger_until)
                break;
        }

        struct pollfd p[4] = {{r->out[0], POLLIN, 0},
                              {r->out[1], POLLIN, 0},
                              {exited ? -1 : r->pidfd, POLLIN, 0},
                              {exited || killed ? -1 : r->cancel_fd, POLLIN, 0}};
        int timeout = -1;
        if (!exited && !killed)
            timeout = min_timeout(timeout, deadline, t);
        if (exited)
            timeout = min_timeout(timeout, linger_until >= 0 ? linger_until : drain_until, t);
        if (!exited && r->told_at >= 0)
            timeout = min_timeout(timeout, r->told_at + F10_KEEPER_WAIT_MS, t);
        if (!exited && r->pidfd < 0)
            timeout = min_timeout(timeout, t + 20, t); /* no pidfd: look often */
        if (poll(p, 4, timeout) < 0 && errno != EINTR)
            break;
        for (int i = 0; i < 2; i++)
            if (r->out[i] >= 0 && p[i].revents)
                pump(r, i);
        if (!exited && (r->pidfd < 0 || p[2].revents) && leader_exited(r)) {
            exited = 1;
            drain_until = now_ms() + F10_DRAIN_MS;
            if (feed) {
                uint64_t one = 1;
                (void)!write(feed->stop_fd, &one, sizeof one);
            }
        }
    }
    return w;
}

/* Have what is left of the tree killed, then collect the keeper's status
 * (the command's). A keeper that does not exit within F10_KEEPER_WAIT_MS
 * (stopped by the command) is killed with its group: it is not reaped
 * yet, so its pid (the group id) cannot have been reused. */
static int reap(struct run *r)
{
    kill_group(r);
    for (int64_t end = now_ms() + F10_KEEPER_WAIT_MS; !leader_exited(r);) {
        int64_t left = end - now_ms();
        if (left <= 0) {
            kill(-r->pid, SIGKILL);
            break;
        }
        struct pollfd p = {r->pidfd, POLLIN, 0};
        (void)poll(&p, r->pidfd >= 0 ? 1 : 0, r->pidfd >= 0 ? (int)left : 20);
    }
    int status = 0;
    while (waitpid(r->pid, &status, 0) < 0 && errno == EINTR)
        ;
    return status;
}

/* Open the command's working directory (NULL or "" is the workspace root):
 * it must exist, be a directory and lie inside the workspace. */
static int open_cwd(sbx_sandbox *sb, sbx_call *call, const char *cwd, int *fd)
{
    if (!cwd || !*cwd)
        *fd = fcntl(sb->dirfd, F_DUPFD_CLOEXEC, 3);
    else
        *fd = open_beneath(sb->dirfd, cwd, O_PATH | O_DIRECTORY);
    if (*fd >= 0)
        return SBX_OK;
    int e = errno;
    if (e == ENOMEM || e == EMFILE || e == ENFILE)
        return FAIL(sb->st, call, SBX_E_IO, F10_NAME ": cwd %s: %s", cwd ? cwd : "",
                    strerror(e));
    return FAIL(sb->st, call, SBX_E_INVALID,
                F10_NAME ": cwd %s is not a directory inside the workspace (%s)",
                cwd ? cwd : "", e == EXDEV ? "it escapes" : strerror(e));
}

/* The three fds the command gets: stdin (a pipe when there is a source,
 * else /dev/null), stdout and stderr pipes. parent[] receives the ends
 * exec keeps. */
static int make_stdio(struct f10 *st, sbx_call *call, int have_in, int child[3],
                      int parent[3])
{
    for (int i = 0; i < 3; i++)
        child[i] = parent[i] = -1;
    int p[2];
    if (have_in) {
        if (pipe2(p, O_CLOEXEC) != 0)
            goto fail;
        child[0] = p[0];
        parent[0] = p[1];
        /* Non-blocking, so the feeder can wait for room next to its stop
         * signal. */
        if (fcntl(p[1], F_SETFL, O_NONBLOCK) != 0)
            goto fail;
    } else if ((child[0] = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
        goto fail;
    }
    for (int i = 1; i < 3; i++) {
        if (pipe2(p, O_CLOEXEC) != 0)
            goto fail;
        parent[i] = p[0];
        child[i] = p[1];
    }
    return SBX_OK;
fail:;
    int e = errno;
    for (int i = 0; i < 3; i++) {
        if (child[i] >= 0)
            close(child[i]);
        if (parent[i] >= 0)
            close(parent[i]);
        child[i] = parent[i] = -1;
    }
    return FAIL(st, call, SBX_E_IO, F10_NAME ": cannot create pipes: %s", strerror(e));
}

static int f10_exec(sbx_sandbox *sb, sbx_call *call, const struct sbx_exec_args *args,
                    struct sbx_exec_result *res)
{
    struct f10 *st = sb->st;
    const struct sbx_host *host = st->host;
    if (args->size < offsetof(struct sbx_exec_args, err) + sizeof args->err ||
        res->size < offsetof(struct sbx_exec_result, err_bytes) + sizeof res->err_bytes)
        return FAIL(st, call, SBX_E_INVALID,
                    F10_NAME ": exec argument structs too small");
    if (!args->argv || !args->argv[0] || !args->argv[0][0])
        return FAIL(st, call, SBX_E_INVALID,
                    F10_NAME ": exec needs a program in argv[0]");

    int cwd_fd;
    int rc = open_cwd(sb, call, args->cwd, &cwd_fd);
    if (rc != SBX_OK)
        return rc;
    struct run r;
    memset(&r, 0, sizeof r);
    r.st = st;
    r.call = call;
    r.pidfd = -1;
    r.told_at = -1;
    r.node.ctl_fd = -1;
    struct stat ws;
    if (fstat(sb->dirfd, &ws) == 0) {
        r.node.ws_dev = ws.st_dev;
        r.node.ws_ino = ws.st_ino;
    }
    r.sink[0] = args->out;
    r.sink[1] = args->err;
    r.cancel_fd = host->cancel_fd(host, call);
    struct feeder feed;
    memset(&feed, 0, sizeof feed);
    feed.stop_fd = -1;
    int child[3], parent[3];
    r.buf = malloc(F10_CHUNK);
    feed.buf = args->in ? malloc(F10_CHUNK) : NULL;
    if (!r.buf || (args->in && !feed.buf)) {
        free(r.buf);
        free(feed.buf);
        close(cwd_fd);
        return FAIL(st, call, SBX_E_NOMEM, F10_NAME ": out of memory");
    }
    rc = make_stdio(st, call, args->in != NULL, child, parent);
    if (rc == SBX_OK && args->in &&
        (feed.stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
        rc = FAIL(st, call, SBX_E_IO, F10_NAME ": eventfd: %s", strerror(errno));
    if (rc == SBX_OK)
        rc = spawn_command(st, call, args, cwd_fd, child, &r.pid, &r.node.ctl_fd);
    close(cwd_fd);
    for (int i = 0; i < 3; i++)
        if (child[i] >= 0)
            close(child[i]);
    if (rc != SBX_OK) {
        for (int i = 0; i < 3; i++)
            if (parent[i] >= 0)
                close(parent[i]);
        if (feed.stop_fd >= 0)
            close(feed.stop_fd);
        free(r.buf);
        free(feed.buf);
        return rc;
    }
    running_add(st, &r.node);
    r.out[0] = parent[1];
    r.out[1] = parent[2];
    r.pidfd = (int)syscall(SYS_pidfd_open, r.pid, 0);

    int feeding = 0;
    if (args->in) {
        feed.src = args->in;
        feed.fd = parent[0];
        feed.ctl_fd = r.node.ctl_fd;
        if (pthread_create(&feed.thread, NULL, feeder_main, &feed) == 0) {
            feeding = 1;
        } else {
            close(parent[0]);
            kill_group(&r);
            rc = FAIL(st, call, SBX_E_IO, F10_NAME ": cannot start the stdin thread");
        }
    }

    struct waited w = wait_command(&r, args->timeout_ms, feeding ? &feed : NULL);
    if (feeding) {
        uint64_t one = 1;
        (void)!write(feed.stop_fd, &one, sizeof one);
        pthread_join(feed.thread, NULL);
    }
    int status = reap(&r);
    running_remove(st, &r.node);
    close(r.node.ctl_fd);

    for (int i = 0; i < 2; i++)
        if (r.out[i] >= 0)
            close(r.out[i]);
    if (r.pidfd >= 0)
        close(r.pidfd);
    if (feed.stop_fd >= 0)
        close(feed.stop_fd);
    free(r.buf);
    free(feed.buf);

    res->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    res->term_signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    res->timed_out = w.timed_out;
    res->out_bytes = r.bytes[0];
    res->err_bytes = r.bytes[1];
    if (rc != SBX_OK)
        return rc;
    if (w.cancelled)
        return FAIL(st, call, SBX_E_CANCELLED, F10_NAME ": %s was cancelled",
                    args->argv[0]);
    if (r.sink_rc != SBX_OK)
        return r.sink_rc;
    if (feed.failed)
        return SBX_E_IO; /* the source set the message */
    return SBX_OK;
}

/* ------------------------------------------------------------------------ */
/* Files                                                                      */
/* ------------------------------------------------------------------------ */

static int f10_read_file(sbx_sandbox *sb, sbx_call *call, const char *path,
                         const struct sbx_sink *sink)
{
    struct f10 *st = sb->st;
    const struct sbx_host *host = st->host;
    if (!path || !*path)
        return FAIL(st, call, SBX_E_INVALID, F10_NAME ": read: empty path");
    /* O_NONBLOCK: opening a FIFO must not wait for a writer. */
    int fd = open_beneath(sb->dirfd, path, O_RDONLY | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return path_error(st, call, "read", path, errno);
    struct stat s;
    if (fstat(fd, &s) != 0 || !S_ISREG(s.st_mode)) {
        close(fd);
        return FAIL(st, call, SBX_E_INVALID, F10_NAME ": read %s: not a regular file",
                    path);
    }
    char *buf = malloc(F10_CHUNK);
    if (!buf) {
        close(fd);
        return FAIL(st, call, SBX_E_NOMEM, F10_NAME ": out of memory");
    }
    int rc = SBX_OK;
    for (;;) {
        if (host->cancelled(host, call)) {
            rc = FAIL(st, call, SBX_E_CANCELLED, F10_NAME ": read %s: cancelled", path);
            break;
        }
        ssize_t n = read(fd, buf, F10_CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            rc = FAIL(st, call, SBX_E_IO, F10_NAME ": read %s: %s", path,
                      strerror(errno));
            break;
        }
        if (n == 0)
            break;
        rc = sink->write(sink->ctx, buf, (size_t)n);
        if (rc != SBX_OK)
            break;
    }
    free(buf);
    close(fd);
    return rc;
}

/*
 * Open (creating as needed, 0755) the directory part of a write path
 * inside the workspace. Each prefix is resolved from the workspace root
 * with RESOLVE_BENEATH, so links that stay inside work and links leading
 * out are refused. Returns an O_PATH fd or -1 after setting the error.
 */
static int open_parent(sbx_sandbox *sb, sbx_call *call, const char *path,
                       size_t dir_len, int *rc)
{
    struct f10 *st = sb->st;
    char prefix[PATH_MAX];
    if (dir_len >= sizeof prefix) {
        *rc = FAIL(st, call, SBX_E_INVALID, F10_NAME ": write %s: path too long", path);
        return -1;
    }
    int parent = fcntl(sb->dirfd, F_DUPFD_CLOEXEC, 3);
    if (parent < 0) {
        *rc = FAIL(st, call, SBX_E_IO, F10_NAME ": write %s: %s", path, strerror(errno));
        return -1;
    }
    memcpy(prefix, path, dir_len);
    prefix[dir_len] = '\0';
    size_t start = 0;
    while (start < dir_len) {
        size_t end = start;
        while (end < dir_len && prefix[end] != '/')
            end++;
        if (end == start) { /* "a//b" */
            start++;
            continue;
        }
        char saved = prefix[end];
        prefix[end] = '\0';
        int fd = open_beneath(sb->dirfd, prefix, O_PATH | O_DIRECTORY);
        if (fd < 0 && errno == ENOENT) {
            const char *name = prefix + start;
            int made = mkdirat(parent, name, 0755) == 0;
            if (made) /* exactly 0755 whatever the umask; never through a link */
                (void)fchmodat(parent, name, 0755, AT_SYMLINK_NOFOLLOW);
            if (made || errno == EEXIST) /* EEXIST: a racing writer made it */
                fd = open_beneath(sb->dirfd, prefix, O_PATH | O_DIRECTORY);
        }
        if (fd < 0) {
            int e = errno;
            close(parent);
            if (e == ENOTDIR || e == ENOENT)
                *rc = FAIL(st, call, SBX_E_INVALID,
                           F10_NAME ": write %s: %s is not a directory", path, prefix);
            else
                *rc = path_error(st, call, "write", path, e);
            return -1;
        }
        close(parent);
        parent = fd;
        prefix[end] = saved;
        start = end + 1;
    }
    return parent;
}

/* Create a temporary file next to the target: ".frozen10-<random>.tmp". */
static int open_temp(int dirfd, char name[40])
{
    for (int attempt = 0; attempt < 16; attempt++) {
        unsigned char r[8];
        if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
            return -1;
        snprintf(name, 40, ".frozen10-%02x%02x%02x%02x%02x%02x%02x%02x.tmp", r[0], r[1],
                 r[2], r[3], r[4], r[5], r[6], r[7]);
        int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                        0600);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    errno = EEXIST;
    return -1;
}

/* Copy the source into fd, honouring cancellation between chunks (and
 * while waiting for a pollable source). */
static int copy_source(struct f10 *st, sbx_call *call, const char *path,
                       const struct sbx_source *src, int fd)
{
    const struct sbx_host *host = st->host;
    char *buf = malloc(F10_CHUNK);
    if (!buf)
        return FAIL(st, call, SBX_E_NOMEM, F10_NAME ": out of memory");
    int pfd = source_poll_fd(src);
    int cfd = host->cancel_fd(host, call);
    int rc = SBX_OK;
    for (;;) {
        if (pfd >= 0 && cfd >= 0) {
            struct pollfd p[2] = {{pfd, POLLIN, 0}, {cfd, POLLIN, 0}};
            if (poll(p, 2, -1) < 0 && errno != EINTR) {
                rc = FAIL(st, call, SBX_E_IO, F10_NAME ": poll: %s", strerror(errno));
                break;
            }
        }
        if (host->cancelled(host, call)) {
            rc = FAIL(st, call, SBX_E_CANCELLED, F10_NAME ": write %s: cancelled", path);
            break;
        }
        long n = src->read(src->ctx, buf, F10_CHUNK);
        if (n == 0)
            break;
        if (n < 0 || n > F10_CHUNK) {
            rc = SBX_E_IO; /* the source set the message */
            break;
        }
        if (write_full(fd, buf, (size_t)n) != 0) {
            rc = FAIL(st, call, SBX_E_IO, F10_NAME ": write %s: %s", path,
                      strerror(errno));
            break;
        }
    }
    free(buf);
    return rc;
}

static int f10_write_file(sbx_sandbox *sb, sbx_call *call, const char *path,
                          const struct sbx_source *src, unsigned mode)
{
    struct f10 *st = sb->st;
    if (mode & ~0777u)
        return FAIL(st, call, SBX_E_INVALID,
                    F10_NAME ": write %s: mode %o has bits outside 0777", path, mode);
    if (mode == 0)
        mode = 0644;
    if (!path || !*path)
        return FAIL(st, call, SBX_E_INVALID, F10_NAME ": write: empty path");
    if (path[0] == '/')
        return FAIL(st, call, SBX_E_INVALID,
                    F10_NAME ": write %s: the path escapes the workspace", path);
    const char *slash = strrchr(path, '/');
    const char *name = slash ? slash + 1 : path;
    if (!*name || !strcmp(name, ".") || !strcmp(name, ".."))
        return FAIL(st, call, SBX_E_INVALID, F10_NAME ": write %s: not a file name",
                    path);

    int rc = SBX_OK;
    int dir = open_parent(sb, call, path, slash ? (size_t)(slash - path) : 0, &rc);
    if (dir < 0)
        return rc;
    struct stat s;
    if (fstatat(dir, name, &s, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(s.st_mode)) {
        close(dir);
        return FAIL(st, call, SBX_E_INVALID, F10_NAME ": write %s: is a directory", path);
    }
    char tmp[40];
    int fd = open_temp(dir, tmp);
    if (fd < 0) {
        rc = path_error(st, call, "write", path, errno);
        close(dir);
        return rc;
    }
    rc = copy_source(st, call, path, src, fd);
    /* fchmod is exact: the umask applies only to creation. */
    if (rc == SBX_OK && fchmod(fd, (mode_t)mode) != 0)
        rc = FAIL(st, call, SBX_E_IO, F10_NAME ": chmod %s: %s", path, strerror(errno));
    if (close(fd) != 0 && rc == SBX_OK)
        rc = FAIL(st, call, SBX_E_IO, F10_NAME ": write %s: %s", path, strerror(errno));
    /* The rename publishes the whole file at once; a link at the target is
     * replaced, never followed. */
    if (rc == SBX_OK && renameat(dir, tmp, dir, name) != 0)
        rc = errno == EISDIR
                 ? FAIL(st, call, SBX_E_INVALID, F10_NAME ": write %s: is a directory",
                        path)
                 : FAIL(st, call, SBX_E_IO, F10_NAME ": rename to %s: %s", path,
                        strerror(errno));
    if (rc != SBX_OK)
        unlinkat(dir, tmp, 0);
    close(dir);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Descriptor                                                                 */
/* ------------------------------------------------------------------------ */

static const struct sbx_provider_ops f10_ops = {
    .init = f10_init,
    .fini = f10_fini,
    .create = f10_create,
    .attach = f10_attach,
    .exec = f10_exec,
    .read_file = f10_read_file,
    .write_file = f10_write_file,
    .root = f10_root,
    .release = f10_release,
    .destroy = f10_destroy,
};

static const struct sbx_config_key f10_keys[] = {
    SBX_CONFIG_KEY("root", SBX_CFG_STRING, "directory holding one workspace per session"),
    SBX_CONFIG_KEYS_END,
};

SBX_PROVIDER_DEFINE(F10_NAME, F10_VERSION, F10_DESCRIPTION, SBX_ISOLATION_NONE, 0,
                    &f10_ops, f10_keys)
