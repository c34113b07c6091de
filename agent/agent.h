/*
 * agent.h - what the parts of sbx-agent share.
 *
 *   main.c   arguments, the init duties (reaping, forwarding signals), the
 *            socket and its peer check, one process per connection, and
 *            the strays of a handler that was killed or stopped
 *   conn.c   a connection: preamble, the request, dispatch
 *   wire.c   blocking frame I/O with an idle limit, error replies
 *   user.c   the command user (from /etc/passwd and /etc/group) and the
 *            command environment
 *   exec.c   exec under a per-command subreaper
 *   tree.c   killing every descendant of the subreaper (or every one
 *            outside the live handlers)
 *   files.c  read, write (atomic), stat, list, mkdir, remove beneath a root
 *   accounts.c  groups and users made in /etc/group and /etc/passwd
 *   procs.c  the process supervisor (protocol 3) in a child of the init,
 *            reached by handing it the connection
 */
#ifndef SBX_AGENT_H
#define SBX_AGENT_H

#include "agent_proto/proto.h"

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define AGENT_MAX_ROOTS 4
/* How long a connection may stay silent while the agent waits for a frame. */
#define AGENT_IDLE_MS (600 * 1000)

struct agent_cfg {
    const char *socket_path;
    const char *user;            /* "" or NULL: root */
    const char *roots[AGENT_MAX_ROOTS];
    size_t nroots;
    int own_workspace;           /* give the first root to the user at start */
    int trust_local_peers;       /* test builds only: accept same-namespace peers */
};

extern struct agent_cfg agent_cfg;

/* ---- wire.c ---------------------------------------------------------- */

/* Read exactly n bytes within the idle limit: 0, 1 at a clean end of
 * stream before the first byte, -1 on error or a cut (errno set). */
int agent_wire_read_full(int fd, void *buf, size_t n);
int agent_wire_write_full(int fd, const void *buf, size_t n);
/* One frame: *type, the payload into buf (cap >= AP_FRAME_MAX is never
 * needed: a payload longer than cap is -2). 0, 1 at end of stream, -1 on
 * error, -2 on a malformed header. */
int agent_wire_read_frame(int fd, int *type, unsigned char *buf, size_t cap, uint32_t *len);
int agent_wire_send(int fd, int type, const void *payload, size_t len);
/* Send AP_ERROR (errno e, what failed, message). Best effort. */
void agent_wire_error(int fd, int e, const char *stage, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* ---- user.c ---------------------------------------------------------- */

struct agent_user {
    uid_t uid;
    gid_t gid;
    gid_t groups[64];
    size_t ngroups;
    char home[512];
    char name[128];
};

/* Resolve spec ("" = root, name, uid, name:group, uid:gid) in the
 * container's /etc/passwd and /etc/group. 0, or -1 with a message. */
int agent_user_resolve(const char *spec, struct agent_user *u, char *msg, size_t cap);
/* setgroups, setgid, setuid: 0 or -1 (errno). */
int agent_user_become(const struct agent_user *u);

/* ---- exec.c / files.c ---------------------------------------------------- */

/* ---- tree.c ---------------------------------------------------------- */

/* SIGKILL every descendant of this process, pass after pass, calling reap
 * between passes, until a pass finds none alive: 0, or -1 when /proc
 * cannot be read or 1000 passes did not get there. */
int agent_tree_kill(void (*reap)(void *), void *ctx);
/* The same, sparing the children *keep[0..*nkeep) and their subtrees (the
 * live handlers: the list is read again before every pass, so reap may
 * change it). */
int agent_tree_kill_except(pid_t *const *keep, const size_t *nkeep, void (*reap)(void *),
                     void *ctx);
/* Did an agent_tree_kill of this process ever fail? A handler then exits 1, so
 * that the init sweeps for what it left. */
int agent_tree_gave_up(void);

/* ---- conn.c / exec.c / files.c --------------------------------------- */

/* The protocol version of this process's connection (conn.c sets it
 * before dispatch; protocol 3 changes the shape of some file replies). */
extern uint32_t agent_conn_version;

/* Serve one connection (in its own process). */
void agent_conn_serve(int fd);
/* user: the request's user (protocol 2), "" for agent_cfg.user. */
void agent_exec_serve(int fd, const unsigned char *req, uint32_t len, const char *user);
void agent_files_serve(int fd, int type, const unsigned char *req, uint32_t len,
                 const char *user);
/* AP_GROUP_ADD, AP_USER_ADD (as root, whatever the request's user). */
void agent_accounts_serve(int fd, int type, const unsigned char *req, uint32_t len);

/* The root (one of agent_cfg.roots) a request names, opened O_PATH, or -1
 * after replying with an error. */
int agent_files_open_root(int fd, const char *root);
/* openat2 RESOLVE_BENEATH below dirfd. */
int agent_beneath(int dirfd, const char *path, int flags, mode_t mode);

/* ---- procs.c --------------------------------------------------------- */

/* In the init: start the process supervisor unless it runs (its child
 * closes close_fds and takes the signal mask old). Its pid when started
 * now, 0 when it ran already, -1 when it cannot start. */
pid_t agent_procs_ensure(const int *close_fds, size_t nclose, const sigset_t *old);
/* In the init: pid was reaped; forget it when it was the supervisor. */
void agent_procs_ended(pid_t pid);
/* In a connection handler: AP_PROC_CHANNEL (its payload after the user
 * field len bytes long): pass the connection to the supervisor, which
 * answers it. */
void agent_procs_serve(int fd, uint32_t len);

#endif /* SBX_AGENT_H */
