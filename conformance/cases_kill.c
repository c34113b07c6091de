/*
 * cases_kill.c - cancellation and timeouts must stop the command's whole
 * process tree. Survivors are looked for from inside the sandbox (with
 * kill -0 on pids the command wrote down), so the check also works for
 * providers whose processes are not host processes.
 */
#include "cf_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The command: a child in the background, pids written down, then wait. */
static const char tree_script[] =
    "sleep 30 & echo $! > child; echo $$ > pid; wait";

/* Fail the case when a process of the command survived. */
static void expect_no_survivors(struct cf_test *t, sbx_handle *h, const char *after)
{
    bool no_pids = false;
    char *out = cf_survivors(t, h, &no_pids);
    if (!out)
        return;
    if (no_pids)
        cf_fail(t, "after %s: the command had not written its pids (%s); it "
                   "was stopped before it started",
                after, out);
    else if (*out)
        cf_fail(t, "after %s these processes of the command are still alive: %s",
                after, out);
    free(out);
}

struct canceller {
    sbx_handle *h;
    sbx_cancel *cancel;
    double fired_at;
    bool saw_pid;
};

/* Waits until the command has written its pid (a read on the same handle,
 * concurrent with the exec), then fires the token 200 ms later. */
static void *cancel_later(void *arg)
{
    struct canceller *k = arg;
    double deadline = cf_now() + 15.0;
    while (!k->saw_pid && cf_now() < deadline) {
        sbx_capture c;
        sbx_capture_init(&c, 64, 0);
        struct sbx_sink sink = sbx_capture_sink(&c);
        sbx_error err;
        sbx_error_clear(&err);
        if (sbx_read(k->h, "pid", &sink, NULL, &err) == SBX_OK && c.head_len > 0 &&
            c.head[c.head_len - 1] == '\n')
            k->saw_pid = true;
        sbx_capture_free(&c);
        if (!k->saw_pid)
            cf_sleep_ms(50);
    }
    cf_sleep_ms(200);
    k->fired_at = cf_now();
    sbx_cancel_fire(k->cancel);
    return NULL;
}

void cf_case_cancel_running(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    if (!h)
        return;
    sbx_cancel *cancel = NULL;
    if (sbx_cancel_new(&cancel) != SBX_OK)
        return (void)cf_fail(t, "could not allocate a cancellation token");
    struct canceller k = {h, cancel, 0, false};
    pthread_t th;
    if (pthread_create(&th, NULL, cancel_later, &k) != 0) {
        sbx_cancel_free(cancel);
        return (void)cf_fail(t, "could not start a thread");
    }
    const char *argv[] = {"sh", "-c", tree_script, NULL};
    struct cf_exec e;
    memset(&e, 0, sizeof e);
    e.argv = argv;
    e.cancel = cancel;
    cf_exec(&e, h);
    double returned_at = cf_now();
    pthread_join(th, NULL);
    sbx_cancel_free(cancel);

    double late = returned_at - k.fired_at;
    if (!k.saw_pid)
        cf_fail(t, "the command never wrote its pid file within 15 s (read "
                   "concurrently with exec)");
    else if (e.status != SBX_E_CANCELLED)
        cf_fail(t, "cancelling a running sleep 30 returned %s (%s) after %.2f s; "
                   "want SBX_E_CANCELLED",
                cf_status_name(e.status), e.err.message, e.seconds);
    else if (late > cf_bound(1.0))
        cf_fail(t, "exec returned SBX_E_CANCELLED %.2f s after the token fired; "
                   "want within %.1f s",
                late, cf_bound(1.0));
    cf_exec_free(&e);
    if (!cf_failed(t))
        expect_no_survivors(t, h, "cancellation");
}

void cf_case_timeout_kills_children(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    if (!h)
        return;
    const char *argv[] = {"sh", "-c", tree_script, NULL};
    struct cf_exec e;
    memset(&e, 0, sizeof e);
    e.argv = argv;
    e.timeout_ms = 500;
    cf_exec(&e, h);
    if (e.status != SBX_OK)
        cf_fail(t, "exec with a 500 ms timeout returned %s (%s); want SBX_OK "
                   "with timed_out set",
                cf_status_name(e.status), e.err.message);
    else if (!e.res.timed_out)
        cf_fail(t, "exec with a 500 ms timeout of a 30 s command: timed_out is "
                   "not set (exit code %d, signal %d, %.2f s)",
                e.res.exit_code, e.res.term_signal, e.seconds);
    else if (e.seconds > cf_bound(5.0))
        cf_fail(t, "exec with a 500 ms timeout returned after %.2f s; the "
                   "command's children kept it waiting",
                e.seconds);
    cf_exec_free(&e);
    if (!cf_failed(t))
        expect_no_survivors(t, h, "the timeout");
}
