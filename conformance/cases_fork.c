/*
 * cases_fork.c - SBX_CAP_FORK (ABI 1.2): a fork's workspace is a copy of
 * its source's at the call (modes, symlinks as links, contents), the fork
 * belongs to its own key alone, nothing is shared afterwards (writes in
 * place, destroys), the source keeps running or stays paused, and a fork
 * of a destroyed sandbox is SBX_E_NOT_FOUND.
 */
#include "cf_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* sbx_fork of src (made through p) into key; the fork is tracked and
 * remembered for the cleanup. NULL after failing the case. */
static sbx_handle *fork_of(struct cf_test *t, sbx_provider *p, sbx_handle *src,
                           const char *key)
{
    struct sbx_create_options co;
    memset(&co, 0, sizeof co);
    co.size = sizeof co;
    sbx_error err;
    sbx_error_clear(&err);
    sbx_handle *h = NULL;
    int rc = sbx_fork(src, key, &co, NULL, &h, &err);
    if (rc == SBX_E_UNSUPPORTED) {
        cf_fail(t, "fork of a plain running sandbox is SBX_E_UNSUPPORTED although the "
                   "provider declares SBX_CAP_FORK: %s", err.message);
        return NULL;
    }
    if (!cf_expect_ok(t, rc, &err, "fork"))
        return NULL;
    const char *ref = sbx_handle_ref(h);
    if (!ref || !*ref || strlen(ref) >= SBX_REF_MAX) {
        sbx_release(h);
        cf_fail(t, "fork returned an empty or overlong reference");
        return NULL;
    }
    if (!cf_remember(t, key, ref)) {
        sbx_release(h);
        return NULL;
    }
    cf_track(t, p, h);
    return cf_failed(t) ? NULL : h;
}

/* The key of the case's most recent sandbox, copied into key[CF_KEY_MAX]. */
static void last_key(struct cf_test *t, char *key)
{
    snprintf(key, CF_KEY_MAX, "%s", t->sandboxes[t->nsandboxes - 1].key);
}

/* A tree with every kind of entry a fork must keep as it is. */
static const char tree_script[] =
    "set -e; mkdir -p d/e; chmod 0750 d; chmod 0711 d/e; printf 'data\\n' > d/e/f; "
    "chmod 0751 d/e/f; printf x > ro; chmod 0604 ro; : > empty; chmod 0640 empty; "
    "ln -s d/e/f rel; ln -s /etc/hostname abs; ln -s no/such dangling; ln -s d dirlink; "
    "i=0; while [ $i -lt 2000 ]; do echo \"line $i of a file larger than one buffer\"; "
    "i=$((i+1)); done > big; chmod 0600 big";

/* One line per entry: a link's target, else mode, type and size, and a
 * regular file's checksum. Run alike in source and fork, then compared. */
static const char describe_script[] =
    "for p in d d/e d/e/f ro empty rel abs dangling dirlink big; do "
    "if [ -L \"$p\" ]; then echo \"$p link $(readlink \"$p\")\"; "
    "elif [ -e \"$p\" ]; then echo \"$p $(stat -c '%a %F %s' \"$p\")\"; "
    "if [ -f \"$p\" ]; then echo \"$p sum $(cksum < \"$p\")\"; fi; "
    "else echo \"$p missing\"; fi; done";

/* The first line where a and b differ, quoted into buf for a message. */
static const char *first_difference(const char *a, const char *b, char *buf, size_t cap)
{
    while (*a && *b) {
        size_t la = strcspn(a, "\n"), lb = strcspn(b, "\n");
        if (la != lb || memcmp(a, b, la)) {
            char qa[200], qb[200];
            snprintf(buf, cap, "source %s, fork %s", cf_quote(a, la, qa, sizeof qa),
                     cf_quote(b, lb, qb, sizeof qb));
            return buf;
        }
        a += la + (a[la] == '\n');
        b += lb + (b[lb] == '\n');
    }
    snprintf(buf, cap, "one listing is longer: source \"%.60s\", fork \"%.60s\"", a, b);
    return buf;
}

void cf_case_fork_copies_workspace(struct cf_test *t)
{
    sbx_provider *p = NULL;
    sbx_handle *src = cf_sandbox(t, &p);
    char *made = src ? cf_sh(t, src, tree_script) : NULL;
    char *before = made ? cf_sh(t, src, describe_script) : NULL;
    free(made);
    if (!before)
        return;
    /* the listing itself must have seen the tree, or equal listings prove nothing */
    if (!strstr(before, "d/e/f 751 regular file 5\n") || !strstr(before, "rel link d/e/f\n") ||
        !strstr(before, "d 750 directory")) {
        cf_fail(t, "the source's tree did not come out as made: %.300s", before);
        free(before);
        return;
    }
    char key[CF_KEY_MAX], why[512];
    cf_new_key(t, key);
    sbx_handle *fk = fork_of(t, p, src, key);
    char *forked = fk ? cf_sh(t, fk, describe_script) : NULL;
    char *after = forked ? cf_sh(t, src, describe_script) : NULL;
    if (forked && strcmp(before, forked))
        cf_fail(t, "the fork's workspace is not the source's (modes, link targets, "
                   "contents): %s",
                first_difference(before, forked, why, sizeof why));
    else if (after && strcmp(before, after))
        cf_fail(t, "the fork changed the source's workspace: %s",
                first_difference(before, after, why, sizeof why));
    free(before);
    free(forked);
    free(after);
}

/* attach of ref with key, expecting want; a handle obtained is tracked. */
static bool attach_expect(struct cf_test *t, sbx_provider *p, const char *key,
                          const char *ref, int want, const char *what)
{
    sbx_handle *h = NULL;
    sbx_error err;
    sbx_error_clear(&err);
    int rc = sbx_attach(p, key, ref, NULL, &h, &err);
    if (rc == SBX_OK)
        cf_track(t, p, h);
    return cf_proc_expect_status(t, rc, &err, want, what);
}

void cf_case_fork_own_identity(struct cf_test *t)
{
    sbx_provider *p = NULL;
    sbx_handle *src = cf_sandbox(t, &p);
    if (!src || !cf_write_text(t, src, "mark.txt", "source\n"))
        return;
    char src_key[CF_KEY_MAX], src_ref[SBX_REF_MAX], key[CF_KEY_MAX], ref[SBX_REF_MAX];
    last_key(t, src_key);
    snprintf(src_ref, sizeof src_ref, "%s", sbx_handle_ref(src));
    cf_new_key(t, key);
    sbx_handle *fk = fork_of(t, p, src, key);
    if (!fk)
        return;
    snprintf(ref, sizeof ref, "%s", sbx_handle_ref(fk));
    if (!strcmp(ref, src_ref))
        return (void)cf_fail(t, "the fork has the source's reference %s", ref);
    /* a new instance: what the backend recorded, not what the first one holds */
    sbx_provider *q = cf_open(t);
    if (!q || !attach_expect(t, q, key, ref, SBX_OK, "attach of the fork with its own key") ||
        !attach_expect(t, q, src_key, ref, SBX_E_DENIED,
                       "attach of the fork with the source's key") ||
        !attach_expect(t, q, key, src_ref, SBX_E_DENIED,
                       "attach of the source with the fork's key"))
        return;
    sbx_error err;
    sbx_error_clear(&err);
    int rc = sbx_destroy(q, src_key, ref, NULL, &err);
    if (!cf_proc_expect_status(t, rc, &err, SBX_E_DENIED,
                               "destroy of the fork with the source's key"))
        return;
    /* as if create had made it: create of the fork's key finds the fork */
    sbx_handle *again = cf_create(t, q, key);
    if (!again)
        return;
    if (strcmp(sbx_handle_ref(again), ref))
        return (void)cf_fail(t, "create with the fork's key gave %s, not the fork %s",
                             sbx_handle_ref(again), ref);
    cf_expect_file(t, again, "mark.txt", "source\n");
}

void cf_case_fork_shares_nothing(struct cf_test *t)
{
    sbx_provider *p = NULL;
    sbx_handle *src = cf_sandbox(t, &p);
    char *out = src ? cf_sh(t, src, "echo one > f; mkdir dir; echo in > dir/g") : NULL;
    if (!out)
        return;
    free(out);
    char src_key[CF_KEY_MAX], key[CF_KEY_MAX], ref[SBX_REF_MAX];
    last_key(t, src_key);
    cf_new_key(t, key);
    sbx_handle *fk = fork_of(t, p, src, key);
    if (!fk)
        return;
    snprintf(ref, sizeof ref, "%s", sbx_handle_ref(fk));
    /* writes in place (appends), which a shared inode or directory would show */
    char *a = cf_sh(t, src, "echo two >> f; echo src >> dir/g; echo s > only_src");
    char *b = a ? cf_sh(t, fk, "echo three >> f; echo fork >> dir/g; echo k > only_fork") : NULL;
    free(a);
    free(b);
    if (!b)
        return;
    static const char look[] =
        "cat f dir/g; for n in only_src only_fork; do [ -e $n ] && echo $n; done; true";
    char *in_src = cf_sh(t, src, look);
    char *in_fork = in_src ? cf_sh(t, fk, look) : NULL;
    if (in_fork && strcmp(in_src, "one\ntwo\nin\nsrc\nonly_src\n"))
        cf_fail(t, "after writes on both sides the source holds \"%.200s\"", in_src);
    else if (in_fork && strcmp(in_fork, "one\nthree\nin\nfork\nonly_fork\n"))
        cf_fail(t, "after writes on both sides the fork holds \"%.200s\"", in_fork);
    free(in_src);
    free(in_fork);
    if (cf_failed(t))
        return;
    /* destroying either leaves the other whole */
    sbx_error err;
    sbx_error_clear(&err);
    if (!cf_expect_ok(t, sbx_destroy(p, key, ref, NULL, &err), &err, "destroy of the fork") ||
        !cf_expect_file(t, src, "f", "one\ntwo\n"))
        return;
    char key2[CF_KEY_MAX];
    cf_new_key(t, key2);
    sbx_handle *fk2 = fork_of(t, p, src, key2);
    if (!fk2 || !cf_expect_ok(t, sbx_destroy(p, src_key, sbx_handle_ref(src), NULL, &err),
                              &err, "destroy of the source"))
        return;
    char *left = cf_sh(t, fk2, "cat f dir/g");
    if (left && strcmp(left, "one\ntwo\nin\nsrc\n"))
        cf_fail(t, "a fork read \"%.200s\" after its source was destroyed", left);
    free(left);
}

/* Whether proc_list of h names a process with this id. */
static bool listed(struct cf_test *t, sbx_handle *h, const char *id)
{
    struct sbx_proc_info info;
    return cf_proc_listed(t, h, id, &info);
}

void cf_case_fork_source_keeps_running(struct cf_test *t)
{
    sbx_provider *p = NULL;
    sbx_handle *src = cf_sandbox(t, &p);
    struct cf_proc pr;
    if (!src || !cf_proc_sh(t, src, &pr,
                            "i=0; while :; do i=$((i+1)); echo \"tick $i\"; "
                            "sleep 0.1 2>/dev/null || usleep 100000; done",
                            0))
        return;
    char key[CF_KEY_MAX];
    cf_new_key(t, key);
    sbx_handle *fk = NULL;
    if (!cf_proc_until_text(t, &pr, "tick 2\n", 10) || !(fk = fork_of(t, p, src, key)))
        goto out;
    /* still running: it goes on printing after the fork */
    uint64_t seen = pr.out_seen;
    double deadline = cf_now() + cf_bound(5);
    int rc = SBX_OK;
    while (!cf_failed(t) && rc == SBX_OK && pr.out_seen < seen + 12 && cf_now() < deadline &&
           pr.res.state == SBX_PROC_RUNNING)
        rc = cf_proc_read(t, &pr, 200, 0);
    if (cf_failed(t))
        goto out;
    if (rc != SBX_OK)
        cf_fail(t, "reading the source's process after the fork: %s: %s", cf_status_name(rc),
                pr.err_msg.message);
    else
    if (pr.res.state != SBX_PROC_RUNNING)
        cf_fail(t, "the source's process ended with the fork (exit %d, signal %d)",
                pr.res.exit_code, pr.res.term_signal);
    else if (pr.out_seen < seen + 12)
        cf_fail(t, "the source's process printed nothing for %.0f s after the fork",
                cf_bound(5));
    else if (!listed(t, src, pr.id) && !cf_failed(t))
        cf_fail(t, "the source's process %s is no longer listed after the fork", pr.id);
    else if (listed(t, fk, pr.id))
        cf_fail(t, "the fork lists the source's process %s: processes are not carried over",
                pr.id);
out:
    cf_proc_free(&pr);
}

/* Bytes in the file ticks (each tick "t\n") of h, or -1 after failing. */
static long ticks_in(struct cf_test *t, sbx_handle *h)
{
    char *out = cf_sh(t, h, "wc -c < ticks 2>/dev/null || echo 0");
    if (!out)
        return -1;
    long n = strtol(out, NULL, 10) / 2;
    free(out);
    return n;
}

void cf_case_fork_paused_source_stays_paused(struct cf_test *t)
{
    sbx_provider *p = NULL;
    sbx_handle *src = cf_sandbox(t, &p);
    struct cf_proc pr;
    if (!src || !cf_proc_sh(t, src, &pr,
                            "while :; do echo t >> ticks; sleep 0.05 2>/dev/null || "
                            "usleep 50000; done",
                            0))
        return;
    double window = cf_bound(1.0);
    long a = 0, b;
    double deadline = cf_now() + cf_bound(10);
    while ((a = ticks_in(t, src)) == 0 && cf_now() < deadline)
        cf_sleep_ms(50);
    if (a <= 0) {
        if (!cf_failed(t))
            cf_fail(t, "the tick loop never wrote a tick");
        goto out;
    }
    double t0 = cf_now();
    cf_sleep_ms((long)(window * 1000));
    if ((b = ticks_in(t, src)) < 0)
        goto out;
    double rate = (double)(b - a) / (cf_now() - t0);
    if (rate <= 0) {
        cf_fail(t, "the tick loop made no progress in %.1f s", window);
        goto out;
    }
    sbx_error err;
    sbx_error_clear(&err);
    if (!cf_expect_ok(t, sbx_pause(src, NULL, &err), &err, "pause of the source"))
        goto out;
    char key[CF_KEY_MAX];
    cf_new_key(t, key);
    sbx_handle *fk = fork_of(t, p, src, key);
    if (!fk)
        goto out;
    /* the fork's copy is the count at the fork; a source still paused adds
     * nothing until the next command resumes it */
    cf_sleep_ms((long)(window * 1000));
    long at_fork = ticks_in(t, fk);
    long now = at_fork >= 0 ? ticks_in(t, src) : -1;
    if (now < 0)
        goto out;
    double allowed = rate * window / 2 > 3 ? rate * window / 2 : 3;
    if ((double)(now - at_fork) > allowed)
        cf_fail(t, "the paused source ran on after the fork: %ld ticks in the fork's copy, "
                   "%ld in the source %.1f s later (%.1f ticks/s while running)",
                at_fork, now, window, rate);
out:
    cf_proc_free(&pr);
}

void cf_case_fork_gone(struct cf_test *t)
{
    sbx_provider *p = NULL;
    sbx_handle *src = cf_sandbox(t, &p);
    if (!src || !cf_write_text(t, src, "mark.txt", "gone\n"))
        return;
    char src_key[CF_KEY_MAX], key[CF_KEY_MAX];
    last_key(t, src_key);
    sbx_error err;
    sbx_error_clear(&err);
    if (!cf_expect_ok(t, sbx_destroy(p, src_key, sbx_handle_ref(src), NULL, &err), &err,
                      "destroy"))
        return;
    cf_new_key(t, key);
    struct sbx_create_options co;
    memset(&co, 0, sizeof co);
    co.size = sizeof co;
    sbx_handle *h = NULL;
    int rc = sbx_fork(src, key, &co, NULL, &h, &err);
    if (rc == SBX_OK) {
        if (!cf_remember(t, key, sbx_handle_ref(h)))
            return (void)sbx_release(h);
        cf_track(t, p, h);
    }
    if (!cf_proc_expect_status(t, rc, &err, SBX_E_NOT_FOUND,
                               "fork of a destroyed sandbox (through a handle kept open)"))
        return;
    if (!err.message[0])
        cf_fail(t, "fork of a destroyed sandbox gave no message");
}
