/*
 * files_ops.c - SBX_CAP_FILE_OPS for docker: list, stat, mkdir, remove and
 * rename through the container's sbx-agent (protocol 3).
 *
 * The agent does the confinement: it drops to the call's user, opens the
 * directory holding the last component beneath the root's descriptor
 * (openat2 RESOLVE_BENEATH, in-root symlinks among the parents followed,
 * nothing out of the root) and acts on that component with *at calls that
 * never follow it (agent/files.c). Here: the lexical check of the paths,
 * the request, and the replies turned into the ABI's answers. A listing is
 * streamed: each entry frame goes to the sink as it arrives, so memory is
 * one frame whatever the directory holds.
 *
 * A container without the agent (providers.docker.agent: false) has no
 * such server: the Engine API's archive endpoint runs as root and follows
 * symlinks, so these ops are SBX_E_UNSUPPORTED there rather than half
 * confined.
 */
#include "docker.h"

#include "agent_proto/proto.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The agent's errno for a file op, as the ABI's status. */
static int file_status(uint32_t e, const char *stage)
{
    (void)stage;
    switch (e) {
    case ENOENT:
        return SBX_E_NOT_FOUND;
    case EEXIST:
    case ENOTEMPTY:
        return SBX_E_EXISTS;
    case EACCES:
    case EPERM:
    case EROFS:
        return SBX_E_DENIED;
    case EXDEV:
    case ELOOP:
    case EISDIR:
    case ENOTDIR:
    case EINVAL:
    case ENAMETOOLONG:
    case EBUSY:
        return SBX_E_INVALID;
    case EBADMSG:
    case EPROTO:
    case EPROTONOSUPPORT:
        return SBX_E_PROTOCOL;
    case ENOMEM:
        return SBX_E_NOMEM;
    default:
        return SBX_E_IO;
    }
}

/* The root and checked relative path of an op; allow_root lets NULL, ""
 * and "." name the workspace itself. *rel is malloc'd. */
static int op_path(sbx_sandbox *sb, sbx_call *call, const char *what, const char *path,
                   int allow_root, const char **root, char **rel)
{
    if (!sb->agent_sock)
        return docker_error(sb->st, call, SBX_E_UNSUPPORTED,
                            "docker: %s: container %.12s runs without the sbx agent "
                            "(providers.docker.agent: false), which file operations "
                            "need; recreate it with the agent",
                            what, sb->id);
    size_t on = strlen(DOCKER_OUTPUTS);
    if (allow_root && path && sb->outputs_src && !strncmp(path, DOCKER_OUTPUTS, on) &&
        path[on + strspn(path + on, "/")] == '\0') {
        *root = DOCKER_OUTPUTS; /* the outputs directory itself */
        *rel = strdup("");
        return *rel ? SBX_OK : docker_error(sb->st, call, SBX_E_NOMEM, "out of memory");
    }
    if (allow_root && (!path || !path[0] || !strcmp(path, "."))) {
        *root = DOCKER_WORKSPACE;
        *rel = strdup("");
        return *rel ? SBX_OK : docker_error(sb->st, call, SBX_E_NOMEM, "out of memory");
    }
    int rc = docker_path_rooted(sb, call, what, path, root, rel);
    /* A path ending in "/" or "/." names what its last component leads to
     * (POSIX), which the lexical check normalizes away: the agent gets
     * "<path>/." so that it opens that component as the directory (beneath
     * the root: a link out of it is refused) and acts on "." in it. */
    size_t n = path ? strlen(path) : 0;
    int dir_suffix = n && (path[n - 1] == '/' || (path[n - 1] == '.' &&
                                                  (n == 1 || path[n - 2] == '/')));
    if (rc == SBX_OK && dir_suffix && (*rel)[0]) {
        size_t l = strlen(*rel);
        char *r = realloc(*rel, l + 3);
        if (!r) {
            free(*rel);
            *rel = NULL;
            return docker_error(sb->st, call, SBX_E_NOMEM, "out of memory");
        }
        memcpy(r + l, "/.", 3);
        *rel = r;
    }
    return rc;
}

/* Build the request (str root, str path [, str to] [, u32 mode] [, u32
 * flags]), connect and send it. */
static int op_open(sbx_sandbox *sb, sbx_call *call, int type, const char *root,
                   const char *rel, const char *to, const uint32_t *mode,
                   const uint32_t *flags, struct docker_agent_conn *c)
{
    unsigned char req[AP_HDR_LEN + 3 * 8192 + 64];
    struct ap_out o;
    sbxs_ap_out_begin(&o, req, sizeof req, type);
    sbxs_ap_put_str(&o, root);
    sbxs_ap_put_str(&o, rel);
    if (to)
        sbxs_ap_put_str(&o, to);
    if (mode)
        sbxs_ap_put_u32(&o, *mode);
    if (flags)
        sbxs_ap_put_u32(&o, *flags);
    size_t n = sbxs_ap_out_end(&o);
    if (!n)
        return docker_error(sb->st, call, SBX_E_INVALID, "docker: file op: path too long");
    return docker_agent_open(sb, call, req, n,
                             docker_now_ms() + sb->st->cfg.request_timeout_ms, c);
}

/* Wait for the agent's `k` (or its error). */
static int op_done(struct docker_agent_conn *c, const char *what)
{
    unsigned char buf[4096];
    int type;
    uint32_t len;
    int rc = docker_agent_recv(c, &type, buf, sizeof buf, &len);
    if (rc == SBX_OK && !(type == AP_OK && len == 0))
        rc = docker_agent_fail(c, what, type, buf, len, file_status);
    return rc;
}

static int kind_to_type(uint32_t kind)
{
    switch (kind) {
    case AP_KIND_FILE:
        return SBX_FILE_REGULAR;
    case AP_KIND_DIR:
        return SBX_FILE_DIR;
    case AP_KIND_SYMLINK:
        return SBX_FILE_SYMLINK;
    case AP_KIND_OTHER:
        return SBX_FILE_OTHER;
    default:
        return 0;
    }
}

/* Copy what fits of info into the caller's struct (its size member says
 * how large it was built). */
static void info_out(struct sbx_file_info *out, const struct sbx_file_info *info)
{
    uint32_t size = out->size;
    memcpy(out, info, size < sizeof *info ? size : sizeof *info);
    out->size = size;
}

/* Does the provider's skills directory (the host side of the read-only
 * /workspace/skills bind, which nothing in the container can write) hold
 * nothing? Its mount point in the workspace root is the provider's, not
 * the sandbox's content, until a skill is installed. */
static int skills_empty(const sbx_sandbox *sb)
{
    if (!sb->skills_src)
        return 0;
    int fd = open(sb->skills_src, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return 0;
    }
    int empty = 1;
    struct dirent *de;
    while (empty && (de = readdir(d)))
        empty = !strcmp(de->d_name, ".") || !strcmp(de->d_name, "..");
    closedir(d);
    return empty;
}

int docker_file_list(sbx_sandbox *sb, sbx_call *call, const char *path,
                     const struct sbx_file_list_sink *sink)
{
    const char *root;
    char *rel = NULL;
    int rc = op_path(sb, call, "file_list", path, 1, &root, &rel);
    if (rc != SBX_OK)
        return rc;
    char what[300];
    snprintf(what, sizeof what, "listing \"%.200s\"", rel[0] ? rel : ".");
    struct docker_agent_conn c;
    rc = op_open(sb, call, AP_LIST, root, rel, NULL, NULL, NULL, &c);
    if (rc != SBX_OK) {
        free(rel);
        return rc;
    }
    /* an entry frame: a name of at most 255 bytes and four fields */
    unsigned char buf[AP_STR_MAX + 64];
    for (;;) {
        int type;
        uint32_t len;
        c.deadline = docker_now_ms() + sb->st->cfg.request_timeout_ms;
        rc = docker_agent_recv(&c, &type, buf, sizeof buf, &len);
        if (rc != SBX_OK)
            break;
        if (type == AP_OK && len == 0)
            break;
        if (type != AP_ENTRY) {
            rc = docker_agent_fail(&c, what, type, buf, len, file_status);
            break;
        }
        struct ap_in in;
        sbxs_ap_in_begin(&in, buf, len);
        /* the name into a buffer of this call: no allocation per entry (a
         * Linux name is at most NAME_MAX bytes) */
        char name[NAME_MAX + 1];
        uint32_t nl = sbxs_ap_get_u32(&in);
        int bad_name = in.bad || nl == 0 || nl > NAME_MAX || nl > in.left;
        if (!bad_name) {
            sbxs_ap_get_bytes(&in, name, nl);
            name[nl] = '\0';
            bad_name = memchr(name, '\0', nl) != NULL;
        }
        struct sbx_file_info fi = {.size = sizeof fi};
        fi.type = (uint32_t)kind_to_type(sbxs_ap_get_u32(&in));
        fi.mode = sbxs_ap_get_u32(&in);
        fi.bytes = sbxs_ap_get_u64(&in);
        fi.mtime_ns = (int64_t)sbxs_ap_get_u64(&in);
        fi.name = name;
        if (bad_name || !sbxs_ap_in_done(&in) || !fi.type) {
            rc = docker_error(sb->st, call, SBX_E_PROTOCOL,
                              "docker: %s: the agent sent a malformed entry", what);
            break;
        }
        /* the empty skills mount point of the root is left out */
        if (!rel[0] && !strcmp(root, DOCKER_WORKSPACE) && fi.type == SBX_FILE_DIR &&
            !strcmp(name, "skills") && skills_empty(sb))
            continue;
        int s = sink->entry(sink->ctx, &fi);
        if (s) {
            /* closing the connection stops the agent's listing */
            rc = s;
            break;
        }
    }
    docker_agent_close(&c);
    free(rel);
    return rc;
}

int docker_file_stat(sbx_sandbox *sb, sbx_call *call, const char *path,
                     struct sbx_file_info *out)
{
    const char *root;
    char *rel = NULL;
    int rc = op_path(sb, call, "file_stat", path, 1, &root, &rel);
    if (rc != SBX_OK)
        return rc;
    char what[300];
    snprintf(what, sizeof what, "stat \"%.200s\"", rel[0] ? rel : ".");
    struct docker_agent_conn c;
    rc = op_open(sb, call, AP_STAT, root, rel, NULL, NULL, NULL, &c);
    if (rc == SBX_OK) {
        unsigned char buf[4096];
        int type;
        uint32_t len;
        rc = docker_agent_recv(&c, &type, buf, sizeof buf, &len);
        if (rc == SBX_OK && type == AP_STATR) {
            struct ap_in in;
            sbxs_ap_in_begin(&in, buf, len);
            struct sbx_file_info fi = {.size = sizeof fi};
            fi.type = (uint32_t)kind_to_type(sbxs_ap_get_u32(&in));
            fi.mode = sbxs_ap_get_u32(&in);
            fi.bytes = sbxs_ap_get_u64(&in);
            (void)sbxs_ap_get_u64(&in); /* seconds (protocol 1 and 2) */
            fi.mtime_ns = (int64_t)sbxs_ap_get_u64(&in);
            if (!sbxs_ap_in_done(&in) || !fi.type)
                rc = docker_error(sb->st, call, SBX_E_PROTOCOL,
                                  "docker: %s: the agent sent a malformed answer", what);
            else
                info_out(out, &fi);
        } else if (rc == SBX_OK) {
            rc = docker_agent_fail(&c, what, type, buf, len, file_status);
        }
        docker_agent_close(&c);
    }
    free(rel);
    return rc;
}

int docker_file_mkdir(sbx_sandbox *sb, sbx_call *call, const char *path, unsigned mode,
                      uint32_t flags)
{
    if ((mode & ~0777u) || (flags & ~SBX_MKDIR_PARENTS))
        return docker_error(sb->st, call, SBX_E_INVALID,
                            "docker: file_mkdir: mode %#o or flags 0x%x out of range", mode,
                            (unsigned)flags);
    const char *root;
    char *rel = NULL;
    int rc = op_path(sb, call, "file_mkdir", path, 0, &root, &rel);
    if (rc != SBX_OK)
        return rc;
    char what[300];
    snprintf(what, sizeof what, "mkdir \"%.200s\"", rel);
    uint32_t m = mode ? mode : 0755, f = (flags & SBX_MKDIR_PARENTS) ? AP_MKPARENTS : 0;
    struct docker_agent_conn c;
    rc = op_open(sb, call, AP_MKDIR, root, rel, NULL, &m, &f, &c);
    if (rc == SBX_OK) {
        rc = op_done(&c, what);
        docker_agent_close(&c);
    }
    free(rel);
    return rc;
}

int docker_file_remove(sbx_sandbox *sb, sbx_call *call, const char *path, uint32_t flags)
{
    if (flags & ~SBX_REMOVE_RECURSIVE)
        return docker_error(sb->st, call, SBX_E_INVALID,
                            "docker: file_remove: unknown flags 0x%x", (unsigned)flags);
    const char *root;
    char *rel = NULL;
    int rc = op_path(sb, call, "file_remove", path, 0, &root, &rel);
    if (rc != SBX_OK)
        return rc;
    char what[300];
    snprintf(what, sizeof what, "remove \"%.200s\"", rel);
    uint32_t f = (flags & SBX_REMOVE_RECURSIVE) ? AP_RECURSIVE : 0;
    struct docker_agent_conn c;
    rc = op_open(sb, call, AP_REMOVE, root, rel, NULL, NULL, &f, &c);
    if (rc == SBX_OK) {
        rc = op_done(&c, what);
        docker_agent_close(&c);
    }
    free(rel);
    return rc;
}

int docker_file_rename(sbx_sandbox *sb, sbx_call *call, const char *from, const char *to,
                       uint32_t flags)
{
    if (flags & ~SBX_RENAME_NOREPLACE)
        return docker_error(sb->st, call, SBX_E_INVALID,
                            "docker: file_rename: unknown flags 0x%x", (unsigned)flags);
    const char *root, *to_root;
    char *rel = NULL, *to_rel = NULL;
    int rc = op_path(sb, call, "file_rename", from, 0, &root, &rel);
    if (rc == SBX_OK)
        rc = op_path(sb, call, "file_rename", to, 0, &to_root, &to_rel);
    if (rc == SBX_OK && strcmp(root, to_root) != 0)
        rc = docker_error(sb->st, call, SBX_E_INVALID,
                          "docker: file_rename \"%.200s\" -> \"%.200s\": the workspace and "
                          "%s are different file systems (copy, then remove)",
                          from, to, DOCKER_OUTPUTS);
    if (rc == SBX_OK) {
        char what[500];
        snprintf(what, sizeof what, "rename \"%.200s\" -> \"%.200s\"", rel, to_rel);
        uint32_t f = (flags & SBX_RENAME_NOREPLACE) ? AP_NOREPLACE : 0;
        struct docker_agent_conn c;
        rc = op_open(sb, call, AP_RENAME, root, rel, to_rel, NULL, &f, &c);
        if (rc == SBX_OK) {
            rc = op_done(&c, what);
            docker_agent_close(&c);
        }
    }
    free(rel);
    free(to_rel);
    return rc;
}
