/*
 * spawn.c - start a command of the `local` provider: find the program and
 * hand it to local_child_start (child.c).
 *
 * The child gets the pipes as stdin/stdout/stderr, starts in the workspace
 * (fchdir in the child, so the host's cwd is never touched), becomes the
 * leader of a new process group (so timeouts can kill the whole tree), has
 * every other fd closed, an empty signal mask and every signal at its
 * default disposition. A bare command name is searched in the PATH of the
 * command's own environment, not the host's.
 */
#include "local.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The value of PATH in envp, or the default. */
static const char *search_path(const char *const *envp)
{
    for (const char *const *e = envp; *e != NULL; e++)
        if (strncmp(*e, "PATH=", 5) == 0)
            return *e + 5;
    return LOCAL_DEFAULT_PATH;
}

/* Describe a failed spawn of `prog` (as named by the user: `name`). */
static int spawn_error(const struct sbx_host *host, sbx_call *call,
                       const char *name, const char *prog, int err,
                       int cwd_fd)
{
    struct stat st;
    switch (err) {
    case ENOENT:
        /* The file is there but its interpreter or loader is not. */
        if (fstatat(cwd_fd, prog, &st, 0) == 0)
            return host->set_error(host, call, SBX_E_NOT_EXEC,
                                   "local: cannot execute '%s': its "
                                   "interpreter or loader is missing",
                                   prog);
        return host->set_error(host, call, SBX_E_NO_COMMAND,
                               "local: command not found: '%s'", name);
    case ENOTDIR:
        return host->set_error(host, call, SBX_E_NO_COMMAND,
                               "local: command not found: '%s'", name);
    case EACCES:
    case EPERM:
    case ENOEXEC:
    case EISDIR:
    case ETXTBSY:
    case ELIBBAD:
    case ELOOP:
        return host->set_error(host, call, SBX_E_NOT_EXEC,
                               "local: cannot execute '%s': %s", prog,
                               strerror(err));
    case E2BIG:
        return host->set_error(host, call, SBX_E_INVALID,
                               "local: cannot execute '%s': %s", name,
                               strerror(err));
    case ENOMEM:
        return host->set_error(host, call, SBX_E_NOMEM,
                               "local: cannot execute '%s': %s", name,
                               strerror(err));
    default:
        return host->set_error(host, call, SBX_E_IO,
                               "local: cannot start '%s': %s", name,
                               strerror(err));
    }
}

/* Search PATH (from envp) for name and spawn the first candidate that can
 * be executed, with execvp's rules: a candidate refused with EACCES is
 * remembered and the search goes on; other failures stop it. Empty PATH
 * entries are skipped (they would mean "the current directory"). Relative
 * entries are resolved from the command's working directory. */
static int spawn_searching(const struct sbx_host *host, sbx_call *call,
                           pid_t *pid, const char *name, char *const *argv,
                           char *const *envp, int cwd_fd, const int stdio_fds[3],
                           int *ctl)
{
    const char *path = search_path((const char *const *)envp);
    size_t name_len = strlen(name);
    char candidate[PATH_MAX];
    char denied[PATH_MAX];
    int denied_err = 0;

    for (const char *p = path;;) {
        const char *end = strchr(p, ':');
        size_t dir_len = end != NULL ? (size_t)(end - p) : strlen(p);
        if (dir_len > 0 && dir_len + 1 + name_len < sizeof candidate) {
            memcpy(candidate, p, dir_len);
            candidate[dir_len] = '/';
            memcpy(candidate + dir_len + 1, name, name_len + 1);

            struct stat st;
            if (fstatat(cwd_fd, candidate, &st, 0) == 0) {
                int err = S_ISDIR(st.st_mode)
                              ? EACCES
                              : local_child_start(candidate, argv, envp, cwd_fd,
                                                  stdio_fds, pid, ctl);
                if (err == 0)
                    return SBX_OK;
                if (err != EACCES)
                    return spawn_error(host, call, name, candidate, err,
                                       cwd_fd);
                if (denied_err == 0) {
                    memcpy(denied, candidate, sizeof denied);
                    denied_err = err;
                }
            }
        }
        if (end == NULL)
            break;
        p = end + 1;
    }
    if (denied_err != 0)
        return spawn_error(host, call, name, denied, denied_err, cwd_fd);
    return host->set_error(host, call, SBX_E_NO_COMMAND,
                           "local: command not found: '%s' (searched %s)",
                           name, path);
}

int local_spawn(const struct sbx_host *host, sbx_call *call,
                const char *const *argv, const char *const *envp, int cwd_fd,
                const int stdio_fds[3], int *pid_out, int *ctl_out)
{
    /* execve takes non-const arrays but does not modify them. */
    char *const *av = (char *const *)argv;
    char *const *ev = (char *const *)envp;
    pid_t pid = -1;
    int rc;
    if (strchr(argv[0], '/') != NULL) {
        int err = local_child_start(argv[0], av, ev, cwd_fd, stdio_fds, &pid, ctl_out);
        rc = err == 0 ? SBX_OK
                      : spawn_error(host, call, argv[0], argv[0], err, cwd_fd);
    } else {
        rc = spawn_searching(host, call, &pid, argv[0], av, ev, cwd_fd, stdio_fds, ctl_out);
    }
    if (rc == SBX_OK)
        *pid_out = pid;
    return rc;
}
