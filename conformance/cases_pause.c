/*
 * cases_pause.c - SBX_CAP_PAUSE (ABI 1.2): pause and resume are idempotent,
 * nothing of a paused sandbox runs, its workspace survives, every other op
 * (exec, the file ops, attach from another instance) resumes it first
 * without an error, a paused sandbox can be destroyed, and pausing a gone
 * one is SBX_E_NOT_FOUND.
 */
#include "cf_internal.h"

#include <stdlib.h>
#include <string.h>

static bool do_pause(struct cf_test *t, sbx_handle *h, const char *what)
{
    sbx_error err;
    return cf_expect_ok(t, sbx_pause(h, NULL, &err), &err, what);
}

static bool do_resume(struct cf_test *t, sbx_handle *h, const char *what)
{
    sbx_error err;
    return cf_expect_ok(t, sbx_resume(h, NULL, &err), &err, what);
}

void cf_case_pause_idempotent(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    if (!h || !do_resume(t, h, "resume of a running sandbox") ||
        !do_pause(t, h, "first pause") || !do_pause(t, h, "second pause (already paused)") ||
        !do_resume(t, h, "first resume") || !do_resume(t, h, "second resume (already running)"))
        return;
    char *out = cf_sh(t, h, "echo alive");
    if (out && strcmp(out, "alive\n"))
        cf_fail(t, "after pause, pause, resume, resume: echo printed \"%s\"", out);
    free(out);
}

/* Bytes in the ticks file (each tick is "t\n"), or -1 after failing. */
static long ticks(struct cf_test *t, sbx_handle *h)
{
    char *out = cf_sh(t, h, "wc -c < ticks 2>/dev/null || echo 0");
    if (!out)
        return -1;
    long n = strtol(out, NULL, 10) / 2;
    free(out);
    return n;
}

void cf_case_pause_freezes_processes(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    struct cf_proc p;
    if (!h || !cf_proc_sh(t, h, &p,
                          "while :; do echo t >> ticks; sleep 0.05 2>/dev/null || "
                          "usleep 50000; done",
                          0))
        return;
    sbx_error err;
    double window = cf_bound(1.0);
    /* the loop's rate while running, measured over the same window */
    long a = -1, b = -1, c = -1, d = -1;
    double deadline = cf_now() + cf_bound(10);
    while ((a = ticks(t, h)) == 0 && cf_now() < deadline)
        cf_sleep_ms(50);
    if (a <= 0) {
        if (!cf_failed(t))
            cf_fail(t, "the tick loop never wrote a tick");
        goto out;
    }
    double t0 = cf_now();
    cf_sleep_ms((long)(window * 1000));
    if ((b = ticks(t, h)) < 0)
        goto out;
    double rate = (double)(b - a) / (cf_now() - t0);
    if (rate <= 0) {
        cf_fail(t, "the tick loop made no progress in %.1f s while running", window);
        goto out;
    }
    double t1 = cf_now();
    if ((c = ticks(t, h)) < 0 || !do_pause(t, h, "pause"))
        goto out;
    cf_sleep_ms((long)(window * 1000));
    if (!do_resume(t, h, "resume") || (d = ticks(t, h)) < 0)
        goto out;
    double span = cf_now() - t1, running = span - window;
    /* while running it makes `rate` ticks a second; frozen for `window`
     * it may only have made those of the time around the pause */
    double allowed = rate * running + rate * window / 2 + 2;
    if ((double)(d - c) > allowed)
        cf_fail(t, "a process kept running while paused: %ld ticks in %.2f s around a pause "
                   "of %.2f s, at %.1f ticks/s while running (at most %.0f allowed)",
                d - c, span, window, rate, allowed);
    else if (cf_proc_read(t, &p, 0, 0) == SBX_OK && p.res.eof)
        cf_fail(t, "the tick loop ended across the pause (exit code %d)", p.res.exit_code);
out:
    sbx_proc_signal(h, p.id, 9, NULL, &err);
    cf_proc_free(&p);
}

void cf_case_pause_keeps_workspace(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    if (!h || !cf_write_text(t, h, "kept.txt", "before the pause\n") ||
        !cf_write_text(t, h, "d/e/deep.txt", "deep\n") || !do_pause(t, h, "pause") ||
        !do_resume(t, h, "resume"))
        return;
    if (cf_expect_file(t, h, "kept.txt", "before the pause\n"))
        cf_expect_file(t, h, "d/e/deep.txt", "deep\n");
}

void cf_case_exec_resumes_paused(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    if (!h || !cf_write_text(t, h, "f.txt", "one\n") || !do_pause(t, h, "pause before exec"))
        return;
    char *out = cf_sh(t, h, "cat f.txt");
    if (!out)
        return;
    bool ok = !strcmp(out, "one\n");
    free(out);
    if (!ok)
        return (void)cf_fail(t, "exec on a paused sandbox: cat printed something else than "
                                "the file");
    if (!do_pause(t, h, "pause before read_file") || !cf_expect_file(t, h, "f.txt", "one\n") ||
        !do_pause(t, h, "pause before write_file") || !cf_write_text(t, h, "g.txt", "two\n"))
        return;
    cf_expect_file(t, h, "g.txt", "two\n");
}

void cf_case_attach_resumes_paused(struct cf_test *t)
{
    sbx_provider *p = cf_open(t);
    if (!p)
        return;
    char key[CF_KEY_MAX];
    cf_new_key(t, key);
    sbx_handle *h = cf_create(t, p, key);
    if (!h || !cf_write_text(t, h, "a.txt", "attached\n") || !do_pause(t, h, "pause"))
        return;
    char ref[SBX_REF_MAX];
    snprintf(ref, sizeof ref, "%s", sbx_handle_ref(h));
    cf_release(t, h);
    sbx_provider *q = cf_open(t);
    if (!q)
        return;
    sbx_handle *h2 = NULL;
    sbx_error err;
    if (!cf_expect_ok(t, sbx_attach(q, key, ref, NULL, &h2, &err), &err,
                      "attach from a new instance to a paused sandbox"))
        return;
    cf_track(t, q, h2);
    char *out = cf_sh(t, h2, "cat a.txt");
    if (out && strcmp(out, "attached\n"))
        cf_fail(t, "after attach to a paused sandbox: cat printed something else than the "
                   "file");
    free(out);
}

void cf_case_destroy_paused(struct cf_test *t)
{
    sbx_provider *p = cf_open(t);
    if (!p)
        return;
    char key[CF_KEY_MAX];
    cf_new_key(t, key);
    sbx_handle *h = cf_create(t, p, key);
    if (!h || !cf_write_text(t, h, "left.txt", "x\n") || !do_pause(t, h, "pause"))
        return;
    char ref[SBX_REF_MAX];
    snprintf(ref, sizeof ref, "%s", sbx_handle_ref(h));
    sbx_error err;
    if (!cf_expect_ok(t, sbx_destroy(p, key, ref, NULL, &err), &err,
                      "destroy of a paused sandbox") ||
        !cf_expect_ok(t, sbx_destroy(p, key, ref, NULL, &err), &err,
                      "second destroy of the paused sandbox"))
        return;
    sbx_handle *h2 = NULL;
    int rc = sbx_attach(p, key, ref, NULL, &h2, &err);
    if (rc == SBX_OK)
        cf_track(t, p, h2);
    if (!cf_proc_expect_status(t, rc, &err, SBX_E_NOT_FOUND,
                               "attach after destroying the paused sandbox"))
        return;
    /* nothing left: a new create of the key starts empty */
    sbx_handle *h3 = cf_create(t, p, key);
    if (!h3)
        return;
    char *out = cf_sh(t, h3, "test -e left.txt && echo present; true");
    if (out && *out)
        cf_fail(t, "a new create of the key after destroying its paused sandbox still has "
                   "the file written before the pause");
    free(out);
}

void cf_case_pause_gone(struct cf_test *t)
{
    sbx_provider *p = NULL;
    sbx_handle *h = cf_sandbox(t, &p);
    if (!h)
        return;
    char key[CF_KEY_MAX];
    snprintf(key, sizeof key, "%s", t->sandboxes[t->nsandboxes - 1].key);
    sbx_error err;
    if (!cf_expect_ok(t, sbx_destroy(p, key, sbx_handle_ref(h), NULL, &err), &err, "destroy"))
        return;
    int rc = sbx_pause(h, NULL, &err);
    if (!cf_proc_expect_status(t, rc, &err, SBX_E_NOT_FOUND,
                               "pause of a destroyed sandbox (through a handle kept open)"))
        return;
    if (!err.message[0])
        return (void)cf_fail(t, "pause of a destroyed sandbox gave no message");
    rc = sbx_resume(h, NULL, &err);
    cf_proc_expect_status(t, rc, &err, SBX_E_NOT_FOUND, "resume of a destroyed sandbox");
}
