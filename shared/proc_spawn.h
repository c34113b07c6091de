/*
 * proc_spawn.h - starting one supervised process (proc_supervisor.h): its
 * own session, pipes or a pseudo-terminal as stdio, the user, the working
 * directory beneath the workspace, the environment, and the exec rules of
 * abi/sbx/provider.h (every signal at its default disposition, an empty
 * mask, only descriptors 0, 1 and 2).
 */
#ifndef SBXS_PROC_SPAWN_H
#define SBXS_PROC_SPAWN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* A resolved user. ngroups 0: keep the supervisor's groups. */
struct sbxs_psv_user {
    uid_t uid;
    gid_t gid;
    gid_t groups[64];
    size_t ngroups;
    char home[512]; /* HOME when the environment has none; "" for none */
};

struct sbxs_spawn_req {
    char *const *argv;       /* argv[0] is the program */
    char *const *env;        /* the whole environment, NULL-terminated */
    int cwd_fd;              /* the working directory (O_PATH is fine) */
    const struct sbxs_psv_user *user; /* NULL: the supervisor's own */
    int pty;                 /* nonzero: a pseudo-terminal of rows x cols */
    uint16_t rows, cols;
};

struct sbxs_spawn_out {
    pid_t pid;               /* the leader: its own session and group */
    int in_fd, out_fd, err_fd; /* non-blocking, close-on-exec; with a PTY
                                  in_fd == out_fd == the master, err_fd -1 */
};

/* Stages of a start that failed. */
enum { SBXS_SPAWN_SETUP = 1, SBXS_SPAWN_USER, SBXS_SPAWN_CWD, SBXS_SPAWN_EXEC };

/* Start the process. 0, or -1 with *stage and *err (an errno) saying what
 * failed; nothing is left running then. */
int sbxs_spawn(const struct sbxs_spawn_req *req, struct sbxs_spawn_out *out, int *stage,
               int *err);

#endif
