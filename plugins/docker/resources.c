/*
 * resources.c - the host-side resource directory of a session.
 *
 * Every container gets a directory <resource_dir>/<container name> on the
 * daemon's host, owned by the provider:
 *
 *   outputs/   bound read-write at /mnt/session/outputs (OUTPUT_EXPORT)
 *   uploads/   bound read-only at /mnt/session/uploads (FILE_MOUNTS)
 *   skills/    bound read-only at /workspace/skills (SKILLS)
 *   staging/   not mounted: uploads and bundles are verified here, then
 *              renamed into place (same file system, so the rename is atomic)
 *   skill-state/<name>/  not mounted: each installed skill's verified bundle
 *              and what its published tree must look like (skills.c)
 *   agent/     bound at /.sbx/run when the container runs under sbx-agent:
 *              the agent's socket (mode 0700: only the provider's user)
 *
 * The directories are made before the container is created (a bind needs
 * its source). Only the creator of a fresh container empties them, so a
 * workspace re-created under the same name starts empty; the directories
 * themselves are never replaced while a container may have them bound.
 */
#include "docker.h"

#include "confine.h"
#include "mkdirs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The first three are bound into the container. */
static const char *const subdirs[] = {"outputs", "uploads", "skills", "staging",
                                      "skill-state", "agent", "memory", "memory-state"};

int docker_res_dir(struct docker_state *st, const char *name, const char *sub,
                   char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "%s/%s%s%s", st->cfg.resource_dir, name,
                     sub ? "/" : "", sub ? sub : "");
    return (n < 0 || (size_t)n >= cap) ? -1 : 0;
}

/* mkdir -p of an absolute path; existing directories are kept as they are. */
int docker_res_mkdirs(const char *path, mode_t mode)
{
    if (sbxs_mkdirs(path, mode, NULL, 0) != 0)
        return -1;
    struct stat s;
    if (lstat(path, &s) != 0)
        return -1;
    if (!S_ISDIR(s.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

/* Remove everything inside the directory at path (not the directory). */
static int empty_dir(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    DIR *d = fdopendir(fd);
    if (!d) {
        int e = -errno;
        close(fd);
        return e;
    }
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        rc = sbxp_confine_remove_tree(dirfd(d), de->d_name);
    }
    closedir(d);
    return rc;
}

int docker_res_prepare(struct docker_state *st, sbx_call *call, const char *name)
{
    char path[4096];
    if (docker_res_dir(st, name, NULL, path, sizeof path) != 0)
        return st->host->set_error(st->host, call, SBX_E_CONFIG,
                                   "docker: providers.docker.resource_dir is too long");
    /* The session directory is private to the provider; what a sandbox may
     * see is only ever reached through its binds. */
    if (docker_res_mkdirs(path, 0700) != 0)
        return st->host->set_error(st->host, call, SBX_E_IO,
                                   "docker: cannot create the resource directory "
                                   "%s: %s (providers.docker.resource_dir)",
                                   path, strerror(errno));
    for (size_t i = 0; i < sizeof subdirs / sizeof subdirs[0]; i++) {
        char sub[4096];
        docker_res_dir(st, name, subdirs[i], sub, sizeof sub);
        /* bound directories are 0755; the provider's own are private */
        int bound = i < 3;
        mode_t mode = bound ? 0755 : 0700;
        if (docker_res_mkdirs(sub, mode) != 0)
            return st->host->set_error(st->host, call, SBX_E_IO,
                                       "docker: cannot create %s: %s", sub,
                                       strerror(errno));
    }
    return SBX_OK;
}

/* Empty every directory inside path, keeping the directories: memory/
 * holds the bound trees, which a new container's binds name. */
static int empty_children(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return -errno;
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char sub[4096];
        if (snprintf(sub, sizeof sub, "%s/%s", path, de->d_name) >= (int)sizeof sub)
            rc = -ENAMETOOLONG;
        else
            rc = empty_dir(sub);
    }
    closedir(d);
    return rc;
}

int docker_res_empty(struct docker_state *st, sbx_call *call, const char *name)
{
    for (size_t i = 0; i < sizeof subdirs / sizeof subdirs[0]; i++) {
        char sub[4096];
        docker_res_dir(st, name, subdirs[i], sub, sizeof sub);
        int rc = strcmp(subdirs[i], "memory") == 0 ? empty_children(sub) : empty_dir(sub);
        if (rc < 0)
            return st->host->set_error(st->host, call, SBX_E_IO,
                                       "docker: cannot empty %s: %s", sub,
                                       strerror(-rc));
    }
    return SBX_OK;
}

int docker_res_remove(struct docker_state *st, sbx_call *call, const char *name)
{
    int fd = open(st->cfg.resource_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return SBX_OK;
        return docker_error(st, call, SBX_E_IO,
                            "docker: cannot open the resource directory %s: %s",
                            st->cfg.resource_dir, strerror(errno));
    }
    int rc = sbxp_confine_remove_tree(fd, name);
    close(fd);
    if (rc < 0)
        return docker_error(st, call, SBX_E_IO,
                            "docker: cannot remove the resource directory %s/%s: %s",
                            st->cfg.resource_dir, name, strerror(-rc));
    return SBX_OK;
}

int docker_res_own_outputs(struct docker_state *st, sbx_call *call, const char *name)
{
    if (!st->cfg.user)
        return SBX_OK;
    char path[4096];
    docker_res_dir(st, name, "outputs", path, sizeof path);
    int rc = st->cfg.user_numeric
                 ? lchown(path, (uid_t)st->cfg.uid, (gid_t)st->cfg.gid)
                 : chmod(path, 01777);
    if (rc != 0)
        return st->host->set_error(st->host, call, SBX_E_IO,
                                   "docker: giving %s to user %s failed: %s", path,
                                   st->cfg.user, strerror(errno));
    return SBX_OK;
}
