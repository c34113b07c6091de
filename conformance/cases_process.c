/*
 * cases_process.c - what a command may keep of its provider and what it
 * may leave behind: it starts with only the standard streams open, the
 * processes it leaves when it exits are killed before exec returns, and
 * destroy kills the commands still running in the sandbox.
 *
 * Survivors are looked for from inside the sandbox (kill -0 on pids the
 * command wrote down), so the checks also work for providers whose
 * processes are not host processes; after destroy there is no inside any
 * more, and the pids are checked on the host only when the provider runs
 * commands as host processes (isolation "none").
 */
#include "cf_internal.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CF_GUARD_MS 20000

/* ---- exec_no_inherited_fds ----------------------------------------------- */

/* Whether name (an entry of /proc/self/fd) is all digits. */
static bool all_digits(const char *s, size_t n)
{
    if (!n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

/*
 * `ls -l /proc/self/fd`, run without a shell, lists the descriptors of ls
 * itself: 0, 1 and 2, plus the one ls opened to read the directory (its
 * target is /proc/<pid>/fd), which is ignored. Any other entry came from
 * the provider (or its host). Lines are "... <fd> -> <target>".
 */
void cf_case_exec_no_inherited_fds(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    if (!h)
        return;
    /* A second sandbox with a file written and a command run: its
     * descriptors (if the provider keeps any) exist while the first runs. */
    sbx_handle *other = cf_sandbox(t, NULL);
    if (!other || !cf_write_text(t, other, "other.txt", "another session\n"))
        return;
    char *o = cf_sh(t, other, "cat other.txt >/dev/null");
    free(o);
    if (!o)
        return;

    const char *argv[] = {"ls", "-l", "/proc/self/fd", NULL};
    struct cf_exec e;
    memset(&e, 0, sizeof e);
    e.argv = argv;
    e.timeout_ms = CF_GUARD_MS;
    cf_exec(&e, h);
    char *out = NULL;
    if (e.status != SBX_OK || e.res.exit_code != 0) {
        char *err = cf_capture_string(&e.errout);
        char q[300];
        cf_fail(t, "ls -l /proc/self/fd returned %s (%s), exit code %d, stderr %s",
                cf_status_name(e.status), e.err.message, e.res.exit_code,
                err ? cf_quote(err, strlen(err), q, sizeof q) : "?");
        free(err);
    } else if (!(out = cf_capture_string(&e.out))) {
        cf_fail(t, "out of memory");
    }
    cf_exec_free(&e);
    if (!out)
        return;

    char extra[CF_MESSAGE_MAX / 2] = "";
    bool saw[3] = {false, false, false};
    for (char *line = out; *line;) {
        char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        char *arrow = memmem(line, len, " -> ", 4);
        if (arrow) {
            char *name = arrow;
            while (name > line && name[-1] != ' ')
                name--;
            size_t nlen = (size_t)(arrow - name);
            const char *target = arrow + 4;
            size_t tlen = len - (size_t)(target - line);
            bool lister = tlen > 9 && !strncmp(target, "/proc/", 6) &&
                          !strncmp(target + tlen - 3, "/fd", 3);
            if (all_digits(name, nlen)) {
                long fd = strtol(name, NULL, 10);
                if (fd >= 0 && fd <= 2)
                    saw[fd] = true;
                else if (!lister)
                    cf_appendf(extra, sizeof extra, "%s%.*s -> %.*s", extra[0] ? ", " : "",
                               (int)nlen, name, (int)tlen, target);
            }
        }
        line += len + (nl ? 1 : 0);
    }
    char q[400];
    if (extra[0])
        cf_fail(t, "a command inherited descriptors beyond 0, 1 and 2: %s", extra);
    else if (!saw[0] || !saw[1] || !saw[2])
        cf_fail(t, "ls -l /proc/self/fd did not list 0, 1 and 2 (printed %s)",
                cf_quote(out, strlen(out), q, sizeof q));
    free(out);
}

/* ---- exec_leftovers_killed ----------------------------------------------- */

/*
 * The command leaves two processes and exits 0 at once: a background job
 * that still holds its stdout ("child"), and a double-forked one that left
 * the session with setsid (when there is a setsid) and holds nothing
 * ("pid"). Both must be dead when exec returns.
 */
static const char leave_script[] =
    "sleep 300 & echo $! > child; "
    "if command -v setsid >/dev/null 2>&1; then s=setsid; else s=; fi; "
    "( $s sh -c 'echo $$ > pid.tmp && mv pid.tmp pid; exec sleep 300' "
    "</dev/null >/dev/null 2>&1 & ); "
    "i=0; while ! test -s pid && test $i -lt 100; do sleep 0.05; i=$((i+1)); done; "
    "exit 0";

void cf_case_exec_leftovers_killed(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    if (!h)
        return;
    const char *argv[] = {"sh", "-c", leave_script, NULL};
    struct cf_exec e;
    memset(&e, 0, sizeof e);
    e.argv = argv;
    e.timeout_ms = CF_GUARD_MS;
    cf_exec(&e, h);
    if (e.status != SBX_OK || e.res.exit_code != 0 || e.res.timed_out)
        cf_fail(t, "a command leaving two processes behind returned %s (%s), exit "
                   "code %d, timed_out %d after %.2f s; want SBX_OK, 0",
                cf_status_name(e.status), e.err.message, e.res.exit_code,
                e.res.timed_out, e.seconds);
    else if (e.seconds > cf_bound(10.0))
        cf_fail(t, "exec returned %.2f s after a command that exits at once; the "
                   "processes it left kept it waiting",
                e.seconds);
    cf_exec_free(&e);
    if (cf_failed(t))
        return;
    bool no_pids = false;
    char *out = cf_survivors(t, h, &no_pids);
    if (!out)
        return;
    if (no_pids)
        cf_fail(t, "the command had not written the pids of what it left (%s)", out);
    else if (*out)
        cf_fail(t, "processes a command left behind are still alive after exec "
                   "returned (child: a background job, pid: a setsid double fork): %s",
                out);
    free(out);
}

/* ---- destroy_kills_running ----------------------------------------------- */

/* A tree: a background child, pids written down, then wait. */
static const char tree_script[] =
    "sleep 30 & echo $! > child; echo $$ > pid.tmp && mv pid.tmp pid; wait";

struct runner {
    sbx_handle *h;
    struct cf_exec e;
    double returned_at;
};

static void *run_tree(void *arg)
{
    struct runner *r = arg;
    const char *argv[] = {"sh", "-c", tree_script, NULL};
    r->e.argv = argv;
    r->e.timeout_ms = 10000;
    cf_exec(&r->e, r->h);
    r->returned_at = cf_now();
    return NULL;
}

/* The pid written in path, or 0 while there is none. */
static long read_pid(sbx_handle *h, const char *path)
{
    sbx_capture c;
    sbx_capture_init(&c, 64, 0);
    struct sbx_sink sink = sbx_capture_sink(&c);
    sbx_error err;
    sbx_error_clear(&err);
    long pid = 0;
    if (sbx_read(h, path, &sink, NULL, &err) == SBX_OK && c.head_len > 1 &&
        c.head_len < 32 && c.head[c.head_len - 1] == '\n') {
        char buf[32];
        memcpy(buf, c.head, c.head_len);
        buf[c.head_len] = '\0';
        pid = strtol(buf, NULL, 10);
    }
    sbx_capture_free(&c);
    return pid;
}

/* A host process that is alive and not a zombie. */
static bool host_alive(long pid)
{
    if (pid <= 0 || (kill((pid_t)pid, 0) != 0 && errno == ESRCH))
        return false;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *close = strrchr(buf, ')');
    return !(close && close[1] == ' ' && close[2] == 'Z');
}

void cf_case_destroy_kills_running(struct cf_test *t)
{
    sbx_provider *p = NULL;
    sbx_handle *h = cf_sandbox(t, &p);
    if (!h)
        return;
    char key[CF_KEY_MAX], ref[SBX_REF_MAX];
    snprintf(key, sizeof key, "%s", t->sandboxes[0].key);
    snprintf(ref, sizeof ref, "%s", t->sandboxes[0].ref);
    /* The command runs on a handle of its own, as from another worker
     * thread. */
    sbx_handle *hr = NULL;
    sbx_error err;
    sbx_error_clear(&err);
    if (!cf_expect_ok(t, sbx_attach(p, key, ref, NULL, &hr, &err), &err, "attach"))
        return;
    cf_track(t, p, hr);
    struct runner r;
    memset(&r, 0, sizeof r);
    r.h = hr;
    pthread_t th;
    if (pthread_create(&th, NULL, run_tree, &r) != 0)
        return (void)cf_fail(t, "could not start a thread");
    long pid = 0, child = 0;
    for (double until = cf_now() + 10.0; cf_now() < until && !pid;) {
        pid = read_pid(h, "pid");
        if (!pid)
            cf_sleep_ms(50);
    }
    if (pid)
        child = read_pid(h, "child");
    double called = cf_now();
    int rc = SBX_OK;
    if (pid) {
        sbx_error_clear(&err);
        rc = sbx_destroy(p, key, ref, NULL, &err);
    }
    double destroyed = cf_now();
    pthread_join(th, NULL);
    double late = r.returned_at - called;
    int isolation = sbx_provider_info_isolation(sbx_provider_get_info(p));
    if (!pid)
        cf_fail(t, "the command never wrote its pid within 10 s (read concurrently "
                   "with exec)");
    else if (rc != SBX_OK)
        cf_fail(t, "destroy while a command runs returned %s (%s)", cf_status_name(rc),
                err.message);
    else if (late > cf_bound(5.0))
        cf_fail(t, "the running command's exec returned %.2f s after destroy was "
                   "called (destroy took %.2f s; exec %s, timed_out %d); want the "
                   "command killed and exec back within 5 s",
                late, destroyed - called, cf_status_name(r.e.status), r.e.res.timed_out);
    else if (isolation == SBX_ISOLATION_NONE) {
        cf_sleep_ms(100);
        if (host_alive(pid) || host_alive(child))
            cf_fail(t, "after destroy the command's processes are alive: pid %ld%s, "
                       "child %ld%s",
                    pid, host_alive(pid) ? " (alive)" : "", child,
                    host_alive(child) ? " (alive)" : "");
    }
    cf_exec_free(&r.e);
}
