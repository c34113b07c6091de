/*
 * workspace.c - the workspace directories of the `local` provider: create,
 * attach, destroy, release.
 *
 * Layout: <root>/<sha256(session_key) in hex>/. The persisted reference is
 * the directory's name, the key hash, relative to the configured root (so
 * serialized session state carries no host path); references written as
 * the absolute path "<root>/<hash>" are still accepted. Ownership is the
 * name itself: attach and destroy recompute the hash of the session key
 * and refuse a reference naming another key's directory.
 */
#include "local.h"
#include "hex.h"

#include "confine.h"
#include "mkdirs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Workspaces and the directories created above them are private to the
 * user running the host. */
#define LOCAL_DIR_MODE 0700

/* mkdir -p of the root: every missing component is created; existing ones
 * are fine. Returns an O_PATH fd of the root, or -1 with the error set. */
static int open_root_creating(struct local_state *st, sbx_call *call, int *rc)
{
    const struct sbx_host *host = st->host;
    char failed[4096];
    if (sbxs_mkdirs(st->root, LOCAL_DIR_MODE, failed, sizeof failed) != 0) {
        int e = errno;
        *rc = host->set_error(host, call,
                              e == EACCES || e == EPERM ? SBX_E_DENIED : SBX_E_IO,
                              "local: cannot create directory '%s': %s", failed,
                              strerror(e));
        return -1;
    }

    int fd = open(st->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        *rc = host->set_error(host, call, SBX_E_IO,
                              "local: cannot open root '%s': %s", st->root,
                              strerror(errno));
    return fd;
}

/* Allocate a handle for the workspace `hash` under rootfd. The entry must be
 * a real directory (not a symlink). Returns SBX_OK or an error status with
 * the message set; `missing` is the status to use when it does not exist. */
static int open_workspace(struct local_state *st, sbx_call *call, int rootfd,
                          const char *hash, int missing, sbx_sandbox **out)
{
    const struct sbx_host *host = st->host;
    sbx_sandbox *sb = calloc(1, sizeof *sb);
    if (sb == NULL)
        return host->set_error(host, call, SBX_E_NOMEM, "local: out of memory");
    snprintf(sb->path, sizeof sb->path, "%s/%s", st->root, hash);
    snprintf(sb->hash, sizeof sb->hash, "%s", hash);
    sb->st = st;
    if (local_procs_init(sb) != 0) {
        free(sb);
        return host->set_error(host, call, SBX_E_NOMEM, "local: out of memory");
    }
    sb->dirfd = openat(rootfd, hash,
                       O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sb->dirfd < 0) {
        int err = errno;
        int rc;
        if (err == ENOENT)
            rc = host->set_error(host, call, missing,
                                 "local: workspace '%s' does not exist",
                                 sb->path);
        else if (err == ELOOP || err == ENOTDIR)
            rc = host->set_error(host, call,
                                 missing == SBX_E_NOT_FOUND ? SBX_E_NOT_FOUND
                                                            : SBX_E_EXISTS,
                                 "local: '%s' exists but is not a workspace "
                                 "directory",
                                 sb->path);
        else
            rc = host->set_error(host, call, SBX_E_IO,
                                 "local: cannot open workspace '%s': %s",
                                 sb->path, strerror(err));
        local_procs_free(sb);
        free(sb);
        return rc;
    }
    *out = sb;
    return SBX_OK;
}

int local_create(void *state, sbx_call *call,
                 const struct sbx_create_args *args, char *ref,
                 sbx_sandbox **out)
{
    struct local_state *st = state;
    const struct sbx_host *host = st->host;
    const size_t need = offsetof(struct sbx_create_args, key_hash) +
                        sizeof args->key_hash;

    if (args == NULL || args->size < need || args->session_key == NULL ||
        ref == NULL || out == NULL)
        return host->set_error(host, call, SBX_E_INVALID,
                               "local: create: missing arguments");
    if (!sbxs_is_hex(args->key_hash, SBX_KEY_HASH_LEN))
        return host->set_error(host, call, SBX_E_INVALID,
                               "local: create: key hash is not %d lowercase "
                               "hex digits",
                               SBX_KEY_HASH_LEN);
    /* The directory is named by the key hash: attach and destroy get the
     * same hash from the host and compare it with the name. */
    const char *hash = args->key_hash;

    int rc = SBX_OK;
    int rootfd = open_root_creating(st, call, &rc);
    if (rootfd < 0)
        return rc;
    /* EEXIST: created before, maybe by another instance. open_workspace
     * then checks it is a directory and not a symlink. */
    if (mkdirat(rootfd, hash, LOCAL_DIR_MODE) < 0 && errno != EEXIST) {
        int err = errno;
        rc = host->set_error(host, call,
                             err == EACCES || err == EPERM ? SBX_E_DENIED
                                                           : SBX_E_IO,
                             "local: cannot create workspace '%s/%s': %s",
                             st->root, hash, strerror(err));
        close(rootfd);
        return rc;
    }
    *out = NULL;
    rc = open_workspace(st, call, rootfd, hash, SBX_E_IO, out);
    close(rootfd);
    if (rc == SBX_OK)
        rc = local_ports_record(*out, call, args);
    if (rc != SBX_OK && *out != NULL) {
        local_release(*out);
        *out = NULL;
    }
    if (rc == SBX_OK)
        snprintf(ref, SBX_REF_MAX, "%s", hash);
    return rc;
}

/* Check that ref is <key hash> (or the older <root>/<key hash>): the
 * workspace directory is the owner record. A reference that is not a
 * workspace directly under this root was never written by this instance:
 * SBX_E_INVALID. One whose
 * directory is another key's: SBX_E_DENIED. The session key never appears
 * in messages. */
static int check_ownership(struct local_state *st, sbx_call *call, const char *op,
                           uint32_t size, const char *key_hash, const char *ref)
{
    const struct sbx_host *host = st->host;
    /* attach and destroy args share this layout up to ref */
    const size_t need = offsetof(struct sbx_attach_args, ref) + sizeof(const char *);
    if (size < need || key_hash == NULL || ref == NULL)
        return host->set_error(host, call, SBX_E_INVALID,
                               "local: %s: missing key hash or reference", op);
    if (!sbxs_is_hex(key_hash, SBX_KEY_HASH_LEN))
        return host->set_error(host, call, SBX_E_INVALID,
                               "local: %s: key hash is not %d lowercase hex digits",
                               op, SBX_KEY_HASH_LEN);
    size_t ref_len = strnlen(ref, SBX_REF_MAX);
    const char *name = ref;
    if (ref_len == st->root_len + 1 + SBX_KEY_HASH_LEN &&
        memcmp(ref, st->root, st->root_len) == 0 && ref[st->root_len] == '/')
        name = ref + st->root_len + 1; /* the older absolute form */
    else if (ref_len != SBX_KEY_HASH_LEN)
        name = NULL;
    if (!name || !sbxs_is_hex(name, SBX_KEY_HASH_LEN))
        return host->set_error(host, call, SBX_E_INVALID,
                               "local: %s: reference '%.*s' is not a "
                               "workspace directly under the root '%s'",
                               op, (int)ref_len, ref, st->root);
    if (memcmp(name, key_hash, SBX_KEY_HASH_LEN) != 0)
        return host->set_error(host, call, SBX_E_DENIED,
                               "local: %s: workspace '%s' does not belong to "
                               "this session key (expected %s)",
                               op, ref, key_hash);
    return SBX_OK;
}

int local_attach(void *state, sbx_call *call, const struct sbx_attach_args *args,
                 sbx_sandbox **out)
{
    struct local_state *st = state;
    const struct sbx_host *host = st->host;

    if (args == NULL || out == NULL)
        return host->set_error(host, call, SBX_E_INVALID,
                               "local: attach: missing arguments");
    const char *ref = args->ref, *hash = args->key_hash;
    int rc = check_ownership(st, call, "attach", args->size, hash, ref);
    if (rc != SBX_OK)
        return rc;
    /* Never recreate anything here: a lost workspace is NOT_FOUND. */
    int rootfd = open(st->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0) {
        int err = errno;
        if (err == ENOENT)
            return host->set_error(host, call, SBX_E_NOT_FOUND,
                                   "local: workspace '%s' does not exist "
                                   "(root '%s' is gone)",
                                   ref, st->root);
        return host->set_error(host, call, SBX_E_IO,
                               "local: cannot open root '%s': %s", st->root,
                               strerror(err));
    }
    rc = open_workspace(st, call, rootfd, hash, SBX_E_NOT_FOUND, out);
    close(rootfd);
    if (rc == SBX_OK && (rc = local_ports_load(*out, call)) != SBX_OK) {
        local_release(*out);
        *out = NULL;
    }
    return rc;
}

int local_destroy(void *state, sbx_call *call, const struct sbx_destroy_args *args)
{
    struct local_state *st = state;
    const struct sbx_host *host = st->host;

    if (args == NULL)
        return host->set_error(host, call, SBX_E_INVALID,
                               "local: destroy: missing arguments");
    const char *ref = args->ref, *hash = args->key_hash;
    int rc = check_ownership(st, call, "destroy", args->size, hash, ref);
    if (rc != SBX_OK)
        return rc;
    int rootfd = open(st->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0) {
        if (errno == ENOENT)
            return SBX_OK;
        return host->set_error(host, call, SBX_E_IO,
                               "local: cannot open root '%s': %s", st->root,
                               strerror(errno));
    }
    /* Commands still running in it (exec calls of other threads) are
     * killed first: their keepers kill their trees. */
    struct stat ws;
    if (fstatat(rootfd, hash, &ws, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(ws.st_mode))
        local_running_kill(ws.st_dev, ws.st_ino);
    /* and its supervisor with every process it holds (any host process's:
     * they are the sandbox's), before a file of it is removed */
    rc = local_sup_stop(st, call, rootfd, hash);
    if (rc != SBX_OK) {
        close(rootfd);
        return rc;
    }
    int err = sbxp_confine_remove_tree(rootfd, hash);
    if (err == 0) {
        /* the state directory last: a destroy that failed above can be
         * retried and still finds the supervisor */
        char state_dir[SBX_KEY_HASH_LEN + sizeof LOCAL_STATE_SUFFIX];
        snprintf(state_dir, sizeof state_dir, "%s%s", hash, LOCAL_STATE_SUFFIX);
        err = sbxp_confine_remove_tree(rootfd, state_dir);
    }
    close(rootfd);
    if (err < 0)
        return host->set_error(host, call,
                               err == -EACCES || err == -EPERM ? SBX_E_DENIED
                                                               : SBX_E_IO,
                               "local: cannot remove workspace '%s': %s", ref,
                               strerror(-err));
    return SBX_OK;
}

void local_release(sbx_sandbox *sb)
{
    if (sb == NULL)
        return;
    if (sb->dirfd >= 0)
        close(sb->dirfd);
    local_procs_free(sb);
    free(sb);
}

const char *local_root(sbx_sandbox *sb)
{
    return sb->path;
}
