/*
 * exec_kill.c - killing every process of one exec.
 *
 * Docker has no call to kill an exec. Every exec gets a random tag in its
 * environment (SBX_EXEC_TAG=<128-bit hex>) and runc makes it the leader of
 * a session of its own. The kill runs on a thread of its own while the
 * caller keeps draining the exec's output (a command blocked writing to an
 * undrained stream would otherwise hold the daemon up), and is over by a
 * fixed deadline (providers.docker.kill_timeout).
 *
 * From the host, first. When the daemon runs on this machine its
 * containers' processes are ours to see in /proc, whatever the daemon is
 * doing (even stopped with SIGSTOP), and nothing has to be forked in the
 * container (which a command that used up pids_limit forbids). A process
 * is the container's when its cgroup path names the container ID; among
 * those, every process carrying the tag, every process in the session of
 * one that does, and every process in the exec's own session (its leader's
 * host PID comes from exec inspect) gets SIGKILL, pass after pass, until a
 * pass finds none alive. PID reuse cannot misdirect this: only processes
 * of this container are looked at, a session ID stays allocated while any
 * process is in that session, and the tag is unguessable.
 *
 * In the container, as a fallback: when the host sees none of the
 * container's processes (a remote daemon, another PID namespace) or may not
 * read or signal them (sbx is not root and the container's processes are
 * not its own), a killer exec runs a small sh script doing the same by tag
 * and session inside the container, as the command's user, within what is
 * left of the deadline. When the host could see the exec's leader, its PID
 * in the container (NSpid) is handed over, so its session is killed too.
 *
 * A descendant that both scrubbed its environment and started a session
 * of its own is not found either way (docs/providers/docker.md).
 */
#include "exec_internal.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Sessions remembered per kill: the exec's and those its processes made. */
#define MAX_SESSIONS 64
/* Longest environment read when looking for the tag. */
#define ENVIRON_MAX (1024 * 1024)

/* $1 is the tag line "SBX_EXEC_TAG=<hex>" to look for, $2 (may be empty)
 * the exec's session (its leader's PID in the container). */
static const char kill_script[] =
    "tag=$1; lead=$2; me=$$; pass=0\n"
    "while [ $pass -lt 20 ]; do\n"
    "  hit=0; sids=' '; [ -n \"$lead\" ] && sids=\" $lead \"\n"
    "  for d in /proc/[0-9]*; do\n"
    "    p=${d#/proc/}; [ \"$p\" = \"$me\" ] && continue\n"
    "    if tr '\\000' '\\n' < $d/environ 2>/dev/null | grep -qxF \"$tag\"; then\n"
    "      s=$(cat $d/stat 2>/dev/null) || continue\n"
    "      s=${s##*) }; set -- $s\n"
    "      [ \"$4\" != 1 ] && sids=\"$sids$4 \"\n"
    "      kill -9 $p 2>/dev/null; hit=1\n"
    "    fi\n"
    "  done\n"
    "  if [ \"$sids\" != ' ' ]; then\n"
    "    for d in /proc/[0-9]*; do\n"
    "      p=${d#/proc/}; [ \"$p\" = \"$me\" ] && continue\n"
    "      s=$(cat $d/stat 2>/dev/null) || continue\n"
    "      s=${s##*) }; set -- $s\n"
    "      case \"$sids\" in *\" $4 \"*) kill -9 $p 2>/dev/null; hit=1;; esac\n"
    "    done\n"
    "  fi\n"
    "  [ $hit = 0 ] && exit 0\n"
    "  pass=$((pass+1))\n"
    "done\n"
    "exit 1\n";

/* ---- from the host ------------------------------------------------------ */

struct scan {
    const char *cid;     /* container ID, 64 hex */
    const char *tag_env; /* "SBX_EXEC_TAG=<hex>" */
    pid_t sessions[MAX_SESSIONS];
    size_t nsessions;
    /* per pass */
    unsigned seen;   /* processes of the container */
    unsigned denied; /* of the container, but not ours to read or signal */
    unsigned alive;  /* targets still alive (signalled this pass) */
};

static ssize_t read_small(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t used = 0;
    while (used + 1 < cap) {
        ssize_t n = read(fd, buf + used, cap - 1 - used);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        used += (size_t)n;
    }
    close(fd);
    buf[used] = '\0';
    return (ssize_t)used;
}

/* Is pid in the container's cgroup? (Every cgroup line of its processes
 * names the container ID: /docker/<id>, docker-<id>.scope, ...) */
static int in_container(pid_t pid, const char *cid)
{
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%d/cgroup", (int)pid);
    return read_small(path, buf, sizeof buf) > 0 && strstr(buf, cid) != NULL;
}

/* State and session of pid from /proc/<pid>/stat. 0, or -1 when gone. */
static int proc_stat(pid_t pid, char *state, pid_t *sid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if (read_small(path, buf, sizeof buf) <= 0)
        return -1;
    /* the name may hold anything: the fields follow its last ')' */
    const char *p = strrchr(buf, ')');
    char st;
    int ppid, pgrp, session;
    if (!p || sscanf(p + 1, " %c %d %d %d", &st, &ppid, &pgrp, &session) != 4)
        return -1;
    *state = st;
    *sid = (pid_t)session;
    return 0;
}

/* Does pid's environment hold the tag? 1 yes, 0 no, -1 not ours to read
 * (or gone). */
static int tagged(pid_t pid, const char *tag_env)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT || errno == ESRCH ? 0 : -1;
    size_t cap = 16384, used = 0;
    char *buf = malloc(cap + 1);
    int found = 0, failed = 0;
    while (buf) {
        if (used == cap) {
            if (cap >= ENVIRON_MAX)
                break;
            char *more = realloc(buf, 2 * cap + 1);
            if (!more)
                break;
            buf = more;
            cap *= 2;
        }
        ssize_t n = read(fd, buf + used, cap - used);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            failed = errno == EACCES || errno == EPERM;
        if (n <= 0)
            break;
        used += (size_t)n;
    }
    close(fd);
    if (!buf)
        return 0;
    size_t tlen = strlen(tag_env);
    for (size_t i = 0; i < used && !found;) {
        size_t len = strnlen(buf + i, used - i);
        found = len == tlen && memcmp(buf + i, tag_env, tlen) == 0;
        i += len + 1;
    }
    free(buf);
    return found ? 1 : failed ? -1 : 0;
}

static int has_session(const struct scan *s, pid_t sid)
{
    for (size_t i = 0; i < s->nsessions; i++)
        if (s->sessions[i] == sid)
            return 1;
    return 0;
}

static void add_session(struct scan *s, pid_t sid)
{
    if (sid > 1 && !has_session(s, sid) && s->nsessions < MAX_SESSIONS)
        s->sessions[s->nsessions++] = sid;
}

/* One pass over /proc: SIGKILL every target that is still alive. */
static void scan_pass(struct scan *s)
{
    s->seen = s->denied = s->alive = 0;
    DIR *d = opendir("/proc");
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!isdigit((unsigned char)de->d_name[0]))
            continue;
        pid_t pid = (pid_t)strtol(de->d_name, NULL, 10);
        if (pid <= 1 || !in_container(pid, s->cid))
            continue;
        s->seen++;
        char state;
        pid_t sid;
        if (proc_stat(pid, &state, &sid) != 0 || state == 'Z' || state == 'X')
            continue; /* gone, or dead and waiting to be reaped */
        int target = has_session(s, sid);
        if (!target) {
            int t = tagged(pid, s->tag_env);
            if (t < 0) {
                s->denied++;
                continue;
            }
            if (t)
                add_session(s, sid);
            target = t;
        }
        if (!target)
            continue;
        if (kill(pid, SIGKILL) == 0)
            s->alive++;
        else if (errno == EPERM)
            s->denied++;
    }
    closedir(d);
}

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Passes until none of the targets is alive or the deadline. 0 when none
 * is left, 1 when some are. */
static int scan_until_gone(struct scan *s, int64_t deadline)
{
    long nap = 1;
    for (;;) {
        scan_pass(s);
        if (s->alive == 0)
            return 0;
        if (docker_now_ms() + nap >= deadline)
            return 1;
        nap_ms(nap);
        if (nap < 16)
            nap *= 2;
    }
}

/* The PID of pid in its innermost namespace (the last NSpid field of
 * /proc/<pid>/status, readable by anyone), or 0. */
static int inner_pid(pid_t pid)
{
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    if (read_small(path, buf, sizeof buf) <= 0)
        return 0;
    const char *p = strstr(buf, "\nNSpid:");
    if (!p)
        return 0;
    p += strlen("\nNSpid:");
    int last = 0;
    for (;;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p)
            break;
        last = (int)v;
        p = end;
    }
    return last;
}

/* The exec's leader, as a session to kill: its host PID from exec inspect,
 * used only when that process is of this container and leads its session.
 * It matters when the leader and everything in its session dropped the
 * tag (`exec env -i ...`). Its PID in the container is kept for the
 * in-container killer. */
static void add_exec_session(struct exec_killer *k, struct scan *s)
{
    struct docker_state *st = k->sb->st;
    int64_t left = k->deadline - docker_now_ms();
    if (left <= 0)
        return;
    int pid = 0, running = 0, code = -1;
    sbxp_http_error err;
    if (docker_exec_inspect_once(st, k->eid, left, &pid, &running, &code, &err) != SBX_OK) {
        snprintf(k->msg, sizeof k->msg, "exec inspect failed (%.300s)", err.message);
        return;
    }
    char state;
    pid_t sid;
    if (pid > 1 && in_container(pid, s->cid) && proc_stat(pid, &state, &sid) == 0 &&
        sid == pid) {
        add_session(s, pid);
        k->leader_nspid = inner_pid(pid);
    }
}

/* Kill from the host. 0: done, nothing left. 1: the host cannot do it
 * (or not all of it): the in-container killer must try. */
static int kill_from_host(struct exec_killer *k)
{
    struct scan s;
    memset(&s, 0, sizeof s);
    s.cid = k->sb->id;
    s.tag_env = k->tag_env;
    scan_until_gone(&s, k->deadline);
    if (s.seen == 0) {
        snprintf(k->msg, sizeof k->msg,
                 "the container's processes are not visible from this host");
        return 1;
    }
    add_exec_session(k, &s);
    int left = scan_until_gone(&s, k->deadline);
    if (s.denied) {
        snprintf(k->msg, sizeof k->msg,
                 "%u of the container's processes may not be read or signalled by "
                 "this user",
                 s.denied);
        return 1;
    }
    if (left) {
        snprintf(k->msg, sizeof k->msg,
                 "%u processes were still alive after SIGKILL at the deadline "
                 "(providers.docker.kill_timeout)",
                 s.alive);
        return 1;
    }
    return 0;
}

/* ---- in the container ------------------------------------------------ */

static void kill_in_container(struct exec_killer *k, const char *why_not_host)
{
    char lead[16] = "";
    if (k->leader_nspid > 1)
        snprintf(lead, sizeof lead, "%d", k->leader_nspid);
    const char *argv[] = {"sh", "-c", kill_script, "sbx-kill", k->tag_env, lead, NULL};
    char out[256];
    struct exec_bounded b;
    struct sbx_sink sink = docker_exec_bounded_sink(&b, out, sizeof out);
    struct exec_spec spec = {
        .argv = argv,
        .out = &sink,
        .err = &sink,
        .stop = EXEC_STOP_NONE,
        .deadline = k->deadline,
    };
    struct exec_outcome oc;
    char host_why[384];
    snprintf(host_why, sizeof host_why, "%s", why_not_host);
    if (docker_now_ms() >= k->deadline) {
        snprintf(k->msg, sizeof k->msg,
                 "%.150s, and no time was left for a killer exec in the container",
                 host_why);
        return;
    }
    int rc = docker_exec_run(k->sb, NULL, &spec, &oc);
    if (rc == SBX_OK && !oc.start_failed && !oc.timed_out && oc.exit_code == 0) {
        k->ok = 1;
        return;
    }
    size_t n = strlen(out);
    while (n && (out[n - 1] == '\n' || out[n - 1] == '\r'))
        out[--n] = '\0';
    if (rc != SBX_OK)
        snprintf(k->msg, sizeof k->msg, "%.150s, and the killer exec failed (%s)", host_why,
                 sbx_strerror((sbx_status)rc));
    else if (oc.start_failed)
        snprintf(k->msg, sizeof k->msg,
                 "%.150s, and the killer exec could not start: %.150s", host_why,
                 oc.start_msg[0] ? oc.start_msg : "(no message)");
    else if (oc.timed_out)
        snprintf(k->msg, sizeof k->msg,
                 "%.150s, and the killer exec did not finish by the deadline "
                 "(providers.docker.kill_timeout)",
                 host_why);
    else
        snprintf(k->msg, sizeof k->msg,
                 "%.150s, and the killer exec exited %d%s%.100s (the image needs sh, "
                 "tr, grep, cat and kill)",
                 host_why, oc.exit_code, out[0] ? ": " : "", out);
}

/* ---- the thread ------------------------------------------------------ */

static void *kill_main(void *arg)
{
    struct exec_killer *k = arg;
    k->msg[0] = '\0';
    if (kill_from_host(k) == 0) {
        k->ok = 1;
        return NULL;
    }
    char why[384];
    snprintf(why, sizeof why, "%s", k->msg);
    kill_in_container(k, why);
    return NULL;
}

void docker_exec_killer_start(struct exec_killer *k, sbx_sandbox *sb, const char *tag_env,
                       const char *eid, int64_t deadline)
{
    memset(k, 0, sizeof *k);
    k->sb = sb;
    k->tag_env = tag_env;
    k->eid = eid;
    k->deadline = deadline;
    if (pthread_create(&k->thread, NULL, kill_main, k) == 0)
        k->running = 1;
    else
        kill_main(k);
}

void docker_exec_killer_join(struct exec_killer *k)
{
    if (k->running)
        pthread_join(k->thread, NULL);
    k->running = 0;
}
