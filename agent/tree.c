/*
 * tree.c - killing everything a command started.
 *
 * The connection handler that runs a command is a child subreaper
 * (PR_SET_CHILD_SUBREAPER): every process the command starts stays its
 * descendant, whatever it does (setsid, double fork, a cleared
 * environment): an orphan is re-parented to the handler, never to the
 * container's init. Killing the tree is then a walk of /proc for the
 * handler's descendants, SIGKILL to each, reaping, and again until a walk
 * finds none alive, so a process forked during a walk is caught by the
 * next one (its parent died, it was re-parented to the handler).
 *
 * The agent's init uses the same walk for strays: when a handler ends
 * without having done this (a root command SIGKILLed or SIGSTOPped it),
 * its command's processes are re-parented to the init. Every descendant
 * of the init that is not in a live handler's subtree is then killed the
 * same way: nothing a command started outlives it, even when the command
 * killed its own subreaper.
 */
#include "agent.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

struct proc {
    pid_t pid, ppid;
    int zombie;
    int mine;
};

static int read_stat(pid_t pid, struct proc *p)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    char *rp = strrchr(buf, ')'); /* the command name may hold anything */
    char state;
    int ppid;
    if (!rp || sscanf(rp + 1, " %c %d", &state, &ppid) != 2)
        return -1;
    p->pid = pid;
    p->ppid = (pid_t)ppid;
    p->zombie = state == 'Z' || state == 'X';
    p->mine = 0;
    return 0;
}

static int kept(pid_t pid, const pid_t *keep, size_t nkeep)
{
    for (size_t i = 0; i < nkeep; i++)
        if (keep[i] == pid)
            return 1;
    return 0;
}

/* One walk: SIGKILL every live descendant of this process but the
 * subtrees of the children in keep. Returns how many were signalled (0:
 * none alive), -1 when /proc cannot be read. */
static int kill_pass(const pid_t *keep, size_t nkeep)
{
    DIR *d = opendir("/proc");
    if (!d)
        return -1;
    size_t n = 0, cap = 256;
    struct proc *v = malloc(cap * sizeof *v);
    struct dirent *de;
    pid_t me = getpid();
    while (v && (de = readdir(d))) {
        char *end;
        long pid = strtol(de->d_name, &end, 10);
        if (*end || pid <= 0 || pid == me)
            continue;
        if (n == cap) {
            struct proc *more = realloc(v, 2 * cap * sizeof *v);
            if (!more)
                break;
            v = more;
            cap *= 2;
        }
        if (read_stat((pid_t)pid, &v[n]) == 0)
            n++;
    }
    closedir(d);
    if (!v)
        return -1;
    /* the descendants: children of me, then of those, until nothing changes */
    for (int changed = 1; changed;) {
        changed = 0;
        for (size_t i = 0; i < n; i++) {
            if (v[i].mine)
                continue;
            int parent_mine = v[i].ppid == me && !kept(v[i].pid, keep, nkeep);
            for (size_t j = 0; !parent_mine && j < n; j++)
                parent_mine = v[j].mine && v[j].pid == v[i].ppid;
            if (parent_mine)
                v[i].mine = changed = 1;
        }
    }
    int killed = 0;
    for (size_t i = 0; i < n; i++)
        if (v[i].mine && !v[i].zombie && kill(v[i].pid, SIGKILL) == 0)
            killed++;
    free(v);
    return killed;
}

static int gave_up;

int agent_tree_kill_except(pid_t *const *keep, const size_t *nkeep, void (*reap)(void *),
                     void *ctx)
{
    for (int pass = 0; pass < 1000; pass++) {
        /* keep is read again each pass: reap may shrink it */
        int k = kill_pass(keep ? *keep : NULL, nkeep ? *nkeep : 0);
        reap(ctx);
        if (k == 0)
            return 0;
        if (k < 0)
            break;
    }
    gave_up = 1;
    return -1;
}

int agent_tree_kill(void (*reap)(void *), void *ctx)
{
    return agent_tree_kill_except(NULL, NULL, reap, ctx);
}

int agent_tree_gave_up(void)
{
    return gave_up;
}
