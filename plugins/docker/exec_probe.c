/*
 * exec_probe.c - why a command could not start.
 *
 * What Docker 20.10 (Engine API 1.41, runc 1.1) reports when an exec cannot
 * start: the exec start stream carries one stdout frame, "OCI runtime exec
 * failed: exec failed: unable to start container process: ...", and exec
 * inspect says Running false, Pid 0, ExitCode 126, for a missing program
 * ("executable file not found in $PATH", "no such file or directory"), a
 * file without execute permission ("permission denied"), a directory and a
 * missing working directory ("chdir to cwd") alike: no HTTP status or
 * inspect field tells them apart (later engines record 127 for some of
 * them, not all). Only the message does, and a message is not an
 * interface. So the provider looks for itself, with the daemon's path stat
 * (HEAD /containers/{id}/archive), the way the runtime searched: the
 * working directory, then the program (argv[0] with a '/' as a path from
 * the working directory, else each directory of PATH). A program that is
 * not there is SBX_E_NO_COMMAND; one that is there and still could not be
 * started (no execute bit, a directory, a bad binary) is SBX_E_NOT_EXEC,
 * as local's execvp rules have it.
 *
 * A script whose interpreter is missing is not a start failure to the
 * daemon: runc starts, its execve fails inside the container and the exec
 * exits 1 with runc's message on stderr. That stays the command's result.
 */
#include "exec_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin"

/* 1: exists (a symlink is followed once, as the daemon resolves it), 0:
 * absent, -1: the lookup failed. *dir receives whether it is a directory. */
static int exists(sbx_sandbox *sb, sbx_call *call, const char *path, int *dir)
{
    struct docker_stat s;
    sbxp_http_error err;
    if (docker_stat_path(sb, call, path, &s, &err) != SBX_OK)
        return -1;
    if (s.exists && (s.mode & DOCKER_MODE_SYMLINK)) {
        if (!s.link_target[0])
            return 0;
        char target[sizeof s.link_target];
        snprintf(target, sizeof target, "%s", s.link_target);
        if (docker_stat_path(sb, call, target, &s, &err) != SBX_OK)
            return -1;
    }
    *dir = s.exists && (s.mode & DOCKER_MODE_DIR);
    return s.exists;
}

/* path, or workdir/path for a relative one, into buf. */
static void from_workdir(char *buf, size_t cap, const char *workdir, const char *path)
{
    if (path[0] == '/' || !workdir)
        snprintf(buf, cap, "%s", path);
    else
        snprintf(buf, cap, "%s/%s", workdir, path);
}

/* The PATH the runtime searched: the exec's environment overrides the
 * container's, which has the image's. NULL when neither sets one; the
 * caller frees a non-NULL result. */
static char *search_path(sbx_sandbox *sb, sbx_call *call, const char *const *env)
{
    for (const char *const *e = env; e && *e; e++)
        if (strncmp(*e, "PATH=", 5) == 0)
            return strdup(*e + 5);
    json_object *info = NULL;
    sbxp_http_error err;
    if (docker_json(sb->st, call, "GET", NULL, &info, &err, "/containers/%s/json",
                    sb->id) != SBX_OK)
        return NULL;
    char *found = NULL;
    json_object *cenv = sbxp_json_obj(sbxp_json_obj(info, "Config"), "Env");
    size_t n = cenv && json_object_is_type(cenv, json_type_array)
                   ? json_object_array_length(cenv)
                   : 0;
    for (size_t i = 0; i < n && !found; i++) {
        const char *s = json_object_get_string(json_object_array_get_idx(cenv, i));
        if (s && strncmp(s, "PATH=", 5) == 0)
            found = strdup(s + 5);
    }
    json_object_put(info);
    return found;
}

/* Is there a program called name (no '/') in PATH? 1, 0, -1 lookup failed. */
static int in_path(sbx_sandbox *sb, sbx_call *call, const char *name,
                   const char *const *env, const char *workdir)
{
    char *path = search_path(sb, call, env);
    const char *p = path ? path : DEFAULT_PATH;
    int found = 0;
    while (!found) {
        size_t n = strcspn(p, ":");
        char dir[4096], cand[8192];
        /* an empty entry is the working directory */
        snprintf(dir, sizeof dir, "%.*s", (int)(n ? n : 1), n ? p : ".");
        snprintf(cand, sizeof cand, "%s/%s", dir, name);
        char full[8192 + 4096];
        from_workdir(full, sizeof full, workdir, cand);
        int is_dir = 0;
        int e = exists(sb, call, full, &is_dir);
        if (e < 0) {
            found = -1;
            break;
        }
        found = e && !is_dir;
        if (!p[n])
            break;
        p += n + 1;
    }
    free(path);
    return found;
}

int docker_exec_probe_start_failure(sbx_sandbox *sb, sbx_call *call, const char *argv0,
                             const char *const *env, const char *workdir,
                             int fallback)
{
    int is_dir = 0;
    if (workdir) {
        int w = exists(sb, call, workdir, &is_dir);
        if (w < 0)
            return fallback;
        if (!w || !is_dir)
            return SBX_E_INVALID;
    }
    int found;
    if (strchr(argv0, '/')) {
        char full[8192];
        from_workdir(full, sizeof full, workdir, argv0);
        found = exists(sb, call, full, &is_dir);
    } else {
        found = in_path(sb, call, argv0, env, workdir);
    }
    if (found < 0)
        return fallback;
    return found ? SBX_E_NOT_EXEC : SBX_E_NO_COMMAND;
}
