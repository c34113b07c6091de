/*
 * files.c - file operations beneath one of the agent's roots (the
 * workspace, the outputs directory), as the configured user.
 *
 * Every path is opened with openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)
 * from the root, so neither "..", an absolute symlink nor a symlink swapped
 * in by a racing process can lead out of it. A write goes to a fresh
 * temporary beside the target and is renamed over it only after the host
 * sent the whole length and its SHA-256 and both matched; on anything else
 * (a cut connection, a bad trailer, an unexpected frame) the temporary is
 * removed and the old file stays.
 *
 * stat, list, mkdir, remove and rename (protocol 3) never follow the last
 * component of their path (see do_stat).
 */

#include "agent.h"
#include "tree_remove.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE 1u /* <linux/fs.h> */
#endif

uint32_t agent_conn_version;

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static int openat2_beneath(int dirfd, const char *path, int flags, mode_t mode)
{
    struct open_how how = {.flags = (uint64_t)flags, .mode = mode,
                           .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS};
    return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how);
}

static ssize_t fd_path(int fd, char *buf, size_t cap)
{
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, buf, cap - 1);
    if (n >= 0)
        buf[n] = '\0';
    return n;
}

/*
 * RESOLVE_BENEATH refuses every absolute symlink, also one that names a
 * place inside the root (/workspace/data -> /workspace/shared/data), which
 * the workspace's own tools create and which the Engine API path follows.
 * For those, the kernel is asked where the path leads (an O_PATH open,
 * which touches nothing), and when that is inside the root the path
 * relative to it is opened beneath the root again: the open that counts is
 * always confined, a swap in between can only make it fail.
 */
int agent_beneath(int dirfd, const char *path, int flags, mode_t mode)
{
    int fd = openat2_beneath(dirfd, path, flags, mode);
    if (fd >= 0 || errno != EXDEV)
        return fd;
    char real[4096], base[4096];
    int p = openat(dirfd, path, O_PATH | O_CLOEXEC);
    ssize_t n = p >= 0 ? fd_path(p, real, sizeof real) : -1;
    if (p >= 0)
        close(p);
    ssize_t b = fd_path(dirfd, base, sizeof base);
    if (n >= 0 && b > 0) {
        if (strcmp(real, base) == 0)
            return openat2_beneath(dirfd, ".", flags, mode);
        if (strncmp(real, base, (size_t)b) == 0 && real[b] == '/' && real[b + 1])
            return openat2_beneath(dirfd, real + b + 1, flags, mode);
    }
    errno = EXDEV;
    return -1;
}

int agent_files_open_root(int fd, const char *root)
{
    for (size_t i = 0; i < agent_cfg.nroots; i++)
        if (root && strcmp(root, agent_cfg.roots[i]) == 0) {
            int r = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
            if (r < 0)
                agent_wire_error(fd, errno, "root", "%s: %s", root, strerror(errno));
            return r;
        }
    agent_wire_error(fd, EACCES, "root", "%s is not a root this agent serves", root ? root : "");
    return -1;
}

static uint32_t kind_of(mode_t m)
{
    return S_ISREG(m) ? AP_KIND_FILE : S_ISDIR(m) ? AP_KIND_DIR
                     : S_ISLNK(m) ? AP_KIND_SYMLINK : AP_KIND_OTHER;
}

static int ok(int fd)
{
    return agent_wire_send(fd, AP_OK, NULL, 0);
}

static void fail_errno(int fd, const char *stage, const char *path)
{
    int e = errno;
    agent_wire_error(fd, e, stage, "%s: %s", path,
               e == EXDEV || e == ELOOP ? "leads out of its root" : strerror(e));
}

/* The directory holding path's last component (made when mk), opened
 * O_PATH beneath rootfd, and that component in *name. */
static int parent_of(int rootfd, char *path, int mk, char **name)
{
    char *slash = strrchr(path, '/');
    if (!slash) {
        *name = path;
        return dup(rootfd);
    }
    *slash = '\0';
    *name = slash + 1;
    if (mk) {
        for (char *p = path;; p++) {
            if (*p != '/' && *p != '\0')
                continue;
            char save = *p;
            *p = '\0';
            char *comp = strrchr(path, '/');
            int pfd = comp ? (*comp = '\0', agent_beneath(rootfd, path, O_PATH | O_DIRECTORY | O_CLOEXEC, 0))
                           : dup(rootfd);
            if (comp)
                *comp = '/';
            if (pfd < 0)
                return -1;
            int r = mkdirat(pfd, comp ? comp + 1 : path, 0755);
            int e = errno;
            close(pfd);
            *p = save;
            if (r != 0 && e != EEXIST) {
                errno = e;
                return -1;
            }
            if (save == '\0')
                break;
        }
    }
    int d = agent_beneath(rootfd, path, O_PATH | O_DIRECTORY | O_CLOEXEC, 0);
    *slash = '/';
    return d;
}

static void do_read(int fd, int rootfd, const char *path)
{
    int f = agent_beneath(rootfd, path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0);
    struct stat s;
    if (f < 0 || fstat(f, &s) != 0)
        return fail_errno(fd, "open", path);
    if (!S_ISREG(s.st_mode)) {
        errno = S_ISDIR(s.st_mode) ? EISDIR : EINVAL;
        agent_wire_error(fd, errno, "open", "%s: %s", path,
                   S_ISDIR(s.st_mode) ? "is a directory" : "is not a regular file");
        close(f);
        return;
    }
    fcntl(f, F_SETFL, 0);
    unsigned char *buf = malloc(AP_HDR_LEN + AP_CHUNK);
    uint64_t total = 0;
    for (;;) {
        ssize_t n = buf ? read(f, buf + AP_HDR_LEN, AP_CHUNK) : -1;
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            fail_errno(fd, "read", path);
            break;
        }
        if (n == 0) {
            unsigned char end[16];
            struct ap_out o;
            sbxs_ap_out_begin(&o, end, sizeof end, AP_END);
            sbxs_ap_put_u64(&o, total);
            agent_wire_write_full(fd, end, sbxs_ap_out_end(&o));
            break;
        }
        sbxs_ap_header(buf, AP_DATA, (uint32_t)n);
        if (agent_wire_write_full(fd, buf, AP_HDR_LEN + (size_t)n) != 0)
            break;
        total += (uint64_t)n;
    }
    free(buf);
    close(f);
}

/* Receive the data and the trailer into the open temporary: 0 when both
 * match, -1 after replying with the error. */
static int receive(int fd, int tmpfd, const char *path)
{
    unsigned char *buf = malloc(AP_FRAME_MAX);
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    uint64_t total = 0;
    int rc = -1;
    if (!buf || !md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL)) {
        agent_wire_error(fd, ENOMEM, "write", "out of memory");
        goto out;
    }
    for (;;) {
        int type;
        uint32_t len;
        int r = agent_wire_read_frame(fd, &type, buf, AP_FRAME_MAX, &len);
        if (r != 0) {
            if (r == -2)
                agent_wire_error(fd, EPROTO, "write", "%s: malformed frame", path);
            goto out; /* cut: nothing is published */
        }
        if (type == AP_DATA) {
            for (uint32_t off = 0; off < len;) {
                ssize_t k = write(tmpfd, buf + off, len - off);
                if (k < 0 && errno == EINTR)
                    continue;
                if (k < 0) {
                    fail_errno(fd, "write", path);
                    goto out;
                }
                off += (uint32_t)k;
            }
            EVP_DigestUpdate(md, buf, len);
            total += len;
            continue;
        }
        if (type != AP_TRAILER || len != 8 + 32) {
            agent_wire_error(fd, EPROTO, "write", "%s: unexpected frame 0x%02x in a write", path,
                       type);
            goto out;
        }
        struct ap_in in;
        sbxs_ap_in_begin(&in, buf, len);
        uint64_t want = sbxs_ap_get_u64(&in);
        unsigned char digest[32], have[32];
        sbxs_ap_get_bytes(&in, digest, 32);
        unsigned int dl = 0;
        EVP_DigestFinal_ex(md, have, &dl);
        if (want != total) {
            agent_wire_error(fd, EBADMSG, "verify",
                       "%s: the host announced %llu bytes, %llu arrived", path,
                       (unsigned long long)want, (unsigned long long)total);
            goto out;
        }
        if (memcmp(digest, have, 32) != 0) {
            agent_wire_error(fd, EBADMSG, "verify", "%s: SHA-256 of the data does not match",
                       path);
            goto out;
        }
        rc = 0;
        break;
    }
out:
    EVP_MD_CTX_free(md);
    free(buf);
    return rc;
}

static void do_write(int fd, int rootfd, const char *root, char *path, uint32_t mode,
                     uint32_t flags)
{
    char *name;
    int dfd = parent_of(rootfd, path, flags & AP_MKPARENTS, &name);
    if (dfd < 0)
        return fail_errno(fd, "parent", path);
    struct stat s;
    if (fstatat(dfd, name, &s, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(s.st_mode)) {
        /* a symlink that stays inside the root is followed: write to its
         * target (resolved beneath the root) */
        int t = agent_beneath(rootfd, path, O_PATH | O_CLOEXEC, 0);
        char link[64], real[4096];
        snprintf(link, sizeof link, "/proc/self/fd/%d", t);
        ssize_t n = t >= 0 ? readlink(link, real, sizeof real - 1) : -1;
        close(dfd);
        if (t >= 0)
            close(t);
        if (n < 0)
            return fail_errno(fd, "open", path);
        real[n] = '\0';
        size_t rl = strlen(root);
        char *rel = strncmp(real, root, rl) == 0 && real[rl] == '/' ? real + rl + 1 : NULL;
        if (!rel || !rel[0]) {
            agent_wire_error(fd, EXDEV, "open", "%s: leads out of its root", path);
            return;
        }
        dfd = parent_of(rootfd, rel, 0, &name);
        if (dfd < 0)
            return fail_errno(fd, "parent", path);
    } else if (fstatat(dfd, name, &s, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(s.st_mode)) {
        close(dfd);
        agent_wire_error(fd, EISDIR, "open", "%s: is a directory", path);
        return;
    }
    unsigned char rnd[8];
    char tmp[40];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        close(dfd);
        return fail_errno(fd, "random", path);
    }
    snprintf(tmp, sizeof tmp, ".sbx-%02x%02x%02x%02x%02x%02x%02x%02x.tmp", rnd[0], rnd[1],
             rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
    /* dfd is O_PATH: make a real directory descriptor for the *at calls */
    int wd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    close(dfd);
    int t = wd >= 0 ? openat(wd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600) : -1;
    if (t < 0) {
        fail_errno(fd, "create", path);
        if (wd >= 0)
            close(wd);
        return;
    }
    int good = receive(fd, t, path) == 0;
    if (good && (fchmod(t, mode & 07777) != 0 || close(t) != 0)) {
        fail_errno(fd, "chmod", path);
        good = 0;
        t = -1;
    } else if (good) {
        t = -1;
    }
    if (t >= 0)
        close(t);
    if (good && renameat(wd, tmp, wd, name) != 0) {
        fail_errno(fd, "rename", path);
        good = 0;
    }
    if (!good)
        unlinkat(wd, tmp, 0);
    else
        ok(fd);
    close(wd);
}

static void put_stat(struct ap_out *o, const struct stat *s)
{
    sbxs_ap_put_u32(o, kind_of(s->st_mode));
    sbxs_ap_put_u32(o, (uint32_t)(s->st_mode & 07777));
    sbxs_ap_put_u64(o, (uint64_t)s->st_size);
}

/* Protocol 3 appends the modification time in nanoseconds to `a` and `y`. */
static void put_mtime_ns(struct ap_out *o, const struct stat *s)
{
    if (agent_conn_version >= 3)
        sbxs_ap_put_u64(o, (uint64_t)((int64_t)s->st_mtim.tv_sec * 1000000000 +
                                      s->st_mtim.tv_nsec));
}

/*
 * The last component of a file request is never followed: the directory
 * holding it is opened beneath the root (parent_of), and the component is
 * then looked at with AT_SYMLINK_NOFOLLOW or opened O_NOFOLLOW from that
 * descriptor, so a symlink is described, listed (refused: not a
 * directory), removed or renamed as itself, and one swapped in after a
 * check is never acted through.
 */
static void do_stat(int fd, int rootfd, char *path)
{
    struct stat s;
    char *name = NULL;
    int dfd = path[0] ? parent_of(rootfd, path, 0, &name) : dup(rootfd);
    int r = dfd < 0 ? -1 : path[0] ? fstatat(dfd, name, &s, AT_SYMLINK_NOFOLLOW) : fstat(dfd, &s);
    int e = errno;
    if (dfd >= 0)
        close(dfd);
    if (r != 0) {
        errno = e;
        return fail_errno(fd, "stat", path);
    }
    unsigned char buf[64];
    struct ap_out o;
    sbxs_ap_out_begin(&o, buf, sizeof buf, AP_STATR);
    put_stat(&o, &s);
    sbxs_ap_put_u64(&o, (uint64_t)s.st_mtime);
    put_mtime_ns(&o, &s);
    agent_wire_write_full(fd, buf, sbxs_ap_out_end(&o));
}

/* Entries go out one frame each as readdir returns them: memory stays one
 * directory buffer and one frame, whatever the directory holds (the
 * blocking writes make a slow reader slow the listing down). */
static void do_list(int fd, int rootfd, char *path)
{
    char *name = NULL;
    int f = -1;
    if (!path[0]) {
        f = openat(rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    } else {
        int dfd = parent_of(rootfd, path, 0, &name);
        if (dfd >= 0) {
            f = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
            int e = errno;
            close(dfd);
            errno = e == ELOOP ? ENOTDIR : e; /* a symlink is not a directory */
        }
    }
    DIR *d = f >= 0 ? fdopendir(f) : NULL;
    if (!d) {
        fail_errno(fd, "list", path);
        if (f >= 0)
            close(f);
        return;
    }
    struct dirent *de;
    unsigned char buf[AP_HDR_LEN + 300 + 40];
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        struct stat s;
        if (fstatat(dirfd(d), de->d_name, &s, AT_SYMLINK_NOFOLLOW) != 0)
            continue; /* removed meanwhile */
        struct ap_out o;
        sbxs_ap_out_begin(&o, buf, sizeof buf, AP_ENTRY);
        sbxs_ap_put_str(&o, de->d_name);
        put_stat(&o, &s);
        put_mtime_ns(&o, &s);
        if (agent_wire_write_full(fd, buf, sbxs_ap_out_end(&o)) != 0) {
            closedir(d);
            return; /* the client went away: no `k` */
        }
    }
    closedir(d);
    ok(fd);
}

static void do_mkdir(int fd, int rootfd, char *path, uint32_t mode, uint32_t flags)
{
    char *name;
    int dfd = parent_of(rootfd, path, flags & AP_MKPARENTS, &name);
    if (dfd < 0)
        return fail_errno(fd, "mkdir", path);
    int r = mkdirat(dfd, name, 0700);
    if (r == 0) {
        /* the exact mode, whatever the umask: on the new directory's
         * descriptor (never through a name that could be swapped) */
        int nd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        r = nd >= 0 && fchmod(nd, mode & 07777) == 0 ? 0 : -1;
        if (nd >= 0)
            close(nd);
    } else if (errno == EEXIST && (flags & AP_MKPARENTS)) {
        struct stat s;
        r = fstatat(dfd, name, &s, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(s.st_mode) ? 0 : -1;
        errno = EEXIST;
    }
    int e = errno;
    close(dfd);
    errno = e;
    if (r != 0)
        return fail_errno(fd, "mkdir", path);
    ok(fd);
}

static void do_remove(int fd, int rootfd, char *path, uint32_t flags)
{
    char *name;
    int dfd = parent_of(rootfd, path, 0, &name);
    int wd = dfd >= 0 ? openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (dfd >= 0)
        close(dfd);
    if (wd < 0)
        return fail_errno(fd, "remove", path);
    struct stat s;
    int r = fstatat(wd, name, &s, AT_SYMLINK_NOFOLLOW);
    if (r == 0) {
        if (S_ISDIR(s.st_mode) && (flags & AP_RECURSIVE)) {
            int e = sbxs_remove_tree(wd, name);
            r = e ? (errno = -e, -1) : 0;
        } else {
            r = unlinkat(wd, name, S_ISDIR(s.st_mode) ? AT_REMOVEDIR : 0);
            if (r != 0 && errno == EEXIST)
                errno = ENOTEMPTY;
        }
    }
    int e = errno;
    close(wd);
    errno = e;
    if (r != 0)
        return fail_errno(fd, "remove", path);
    ok(fd);
}

/* Protocol 3 (AP_RENAME): both names are last components of directories
 * opened beneath the root; renameat2 follows neither. */
static void do_rename(int fd, int rootfd, char *from, char *to, uint32_t flags)
{
    char *fname, *tname;
    int fdf = parent_of(rootfd, from, 0, &fname);
    if (fdf < 0)
        return fail_errno(fd, "rename", from);
    int fdt = parent_of(rootfd, to, 0, &tname);
    if (fdt < 0) {
        close(fdf);
        return fail_errno(fd, "rename", to);
    }
    int r = (int)syscall(SYS_renameat2, fdf, fname, fdt, tname,
                         (flags & AP_NOREPLACE) ? RENAME_NOREPLACE : 0u);
    int e = errno;
    close(fdf);
    close(fdt);
    errno = e;
    if (r != 0)
        return fail_errno(fd, "rename", from);
    ok(fd);
}

void agent_files_serve(int fd, int type, const unsigned char *req, uint32_t len,
                 const char *user)
{
    struct ap_in in;
    sbxs_ap_in_begin(&in, req, len);
    char *root = sbxs_ap_get_str(&in);
    char *path = sbxs_ap_get_str(&in);
    char *to = type == AP_RENAME ? sbxs_ap_get_str(&in) : NULL;
    uint32_t mode = 0, flags = 0;
    if (type == AP_WRITE || type == AP_MKDIR)
        mode = sbxs_ap_get_u32(&in);
    if (type == AP_WRITE || type == AP_MKDIR || type == AP_REMOVE || type == AP_RENAME)
        flags = sbxs_ap_get_u32(&in);
    int need_name = type == AP_READ || type == AP_WRITE || type == AP_MKDIR ||
                    type == AP_REMOVE || type == AP_RENAME;
    int bad_name = need_name && (!path || !path[0] || path[strlen(path) - 1] == '/' ||
                                 path[0] == '/');
    if (type == AP_RENAME)
        bad_name = bad_name || !to || !to[0] || to[strlen(to) - 1] == '/' || to[0] == '/';
    if (!sbxs_ap_in_done(&in) || bad_name) {
        agent_wire_error(fd, EPROTO, "request", "malformed file request (type 0x%02x)", type);
        goto out;
    }
    if (type == AP_RENAME && agent_conn_version < 3) {
        agent_wire_error(fd, EPROTO, "request", "request type 0x%02x needs protocol 3", type);
        goto out;
    }
    struct agent_user u;
    char msg[256];
    if (agent_user_resolve(user[0] ? user : agent_cfg.user, &u, msg, sizeof msg) != 0) {
        agent_wire_error(fd, EINVAL, "user", "%s", msg);
        goto out;
    }
    if (agent_user_become(&u) != 0) {
        agent_wire_error(fd, errno, "user", "cannot become the user: %s", strerror(errno));
        goto out;
    }
    int rootfd = agent_files_open_root(fd, root);
    if (rootfd < 0)
        goto out;
    switch (type) {
    case AP_READ:
        do_read(fd, rootfd, path);
        break;
    case AP_WRITE:
        do_write(fd, rootfd, root, path, mode ? mode : 0644, flags);
        break;
    case AP_STAT:
        do_stat(fd, rootfd, path);
        break;
    case AP_LIST:
        do_list(fd, rootfd, path);
        break;
    case AP_MKDIR:
        do_mkdir(fd, rootfd, path, mode ? mode : 0755, flags);
        break;
    case AP_REMOVE:
        do_remove(fd, rootfd, path, flags);
        break;
    case AP_RENAME:
        do_rename(fd, rootfd, path, to, flags);
        break;
    }
    close(rootfd);
out:
    free(root);
    free(path);
    free(to);
}
