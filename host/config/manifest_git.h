/*
 * manifest_git.h - running host git for a git_repo entry (internal to
 * libsbx): no terminal, no credential helpers, no system or global config,
 * a deadline, and a process group that is killed whole.
 */
#ifndef SBX_HOST_MANIFEST_GIT_H
#define SBX_HOST_MANIFEST_GIT_H

#include <sbx/sbx.h>

struct sbx_manifest_git {
    const char *what;       /* "git clone of URL", for messages */
    const char *cwd;        /* where git runs, or NULL */
    int out_fd;             /* git's stdout, or -1: /dev/null */
    long long fsize_max;    /* RLIMIT_FSIZE of git (bytes), or 0 */
    long long timeout_ms;   /* what is left of the deadline for this command */
    long long total_ms;     /* the whole deadline (manifest.git_timeout), for messages */
    sbx_cancel *cancel;     /* may be NULL */
};

/*
 * Run git with args (NULL-terminated, without "git") as g says. git gets
 * its own session (setsid: no controlling terminal), stdin /dev/null,
 * GIT_TERMINAL_PROMPT=0, empty GIT_ASKPASS, SSH_ASKPASS_REQUIRE=never,
 * GIT_CONFIG_NOSYSTEM=1, GIT_CONFIG_GLOBAL=/dev/null, no other GIT_*
 * variable of ours, ssh in batch mode with a connect timeout, and the
 * protocols file, git, http, https and ssh only. On the deadline or a
 * cancel its whole process group is killed (and in every case after it
 * exits, so that nothing it started outlives it). Errors (message "WHAT
 * failed: <the end of git's stderr>", "WHAT timed out: the git
 * commands of an entry have N s (manifest.git_timeout)"): SBX_E_IO, SBX_E_TIMEOUT, SBX_E_CANCELLED,
 * SBX_E_NO_COMMAND when git is not installed. fsize_max bounds every file
 * git writes: the caller measures what it left to name its own limit.
 */
int sbxh_manifest_git_run(const struct sbx_manifest_git *g, const char *const *args,
                          sbx_error *err);

#endif
