/*
 * cases_exec.c - running commands: exit codes, deaths by signal, argv
 * without a shell, missing commands, separate output streams, streamed
 * stdin, the environment and the working directory.
 */
#include "cf_internal.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Guard so that a provider that never closes stdin fails instead of
 * hanging the suite. */
#define CF_GUARD_MS 20000

void cf_case_exec_exit_codes(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    if (!h)
        return;
    static const int codes[] = {0, 3, 255};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        char script[32];
        snprintf(script, sizeof script, "exit %d", codes[i]);
        const char *argv[] = {"sh", "-c", script, NULL};
        struct cf_exec e;
        memset(&e, 0, sizeof e);
        e.argv = argv;
        e.timeout_ms = CF_GUARD_MS;
        cf_exec(&e, h);
        bool ok = true;
        if (e.status != SBX_OK)
            ok = cf_fail(t, "sh -c '%s': %s: %s (a command that ran and failed "
                            "is SBX_OK)",
                         script, cf_status_name(e.status), e.err.message);
        else if (e.res.exit_code != codes[i] || e.res.term_signal != 0 ||
                 e.res.timed_out)
            ok = cf_fail(t, "sh -c '%s' gave exit_code %d, term_signal %d, "
                            "timed_out %d; want %d, 0, 0",
                         script, e.res.exit_code, e.res.term_signal,
                         e.res.timed_out, codes[i]);
        cf_exec_free(&e);
        if (!ok)
            return;
    }
}

void cf_case_exec_killed_by_signal(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    if (!h)
        return;
    /* The shell kills itself: nothing else is involved, so the only way to
     * see exit code 0 (or 143) is a provider that maps the wait status
     * wrongly. */
    static const struct {
        const char *script;
        int sig;
        const char *name;
    } deaths[] = {
        {"kill -TERM $$", SIGTERM, "SIGTERM"},
        {"kill -KILL $$", SIGKILL, "SIGKILL"},
    };
    for (size_t i = 0; i < sizeof deaths / sizeof deaths[0]; i++) {
        const char *argv[] = {"sh", "-c", deaths[i].script, NULL};
        struct cf_exec e;
        memset(&e, 0, sizeof e);
        e.argv = argv;
        e.timeout_ms = CF_GUARD_MS;
        cf_exec(&e, h);
        bool ok = true;
        if (e.status != SBX_OK)
            ok = cf_fail(t, "sh -c '%s': %s: %s (a command killed by a signal "
                            "is SBX_OK with term_signal set)",
                         deaths[i].script, cf_status_name(e.status), e.err.message);
        else if (e.res.exit_code != -1 || e.res.term_signal != deaths[i].sig ||
                 e.res.timed_out)
            ok = cf_fail(t, "sh -c '%s' gave exit_code %d, term_signal %d, "
                            "timed_out %d; want -1, %d (%s), 0: a command killed "
                            "by a signal must be reported as killed, never as a "
                            "normal exit",
                         deaths[i].script, e.res.exit_code, e.res.term_signal,
                         e.res.timed_out, deaths[i].sig, deaths[i].name);
        cf_exec_free(&e);
        if (!ok)
            return;
    }
}

/* The hex value of a "Key:\tvalue" line of /proc/<pid>/status text, or
 * NULL when the line is missing. */
static const char *status_field(const char *text, const char *key, char *buf, size_t cap)
{
    size_t klen = strlen(key);
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
        if (strncmp(l, key, klen) != 0 || l[klen] != ':')
            continue;
        const char *v = l + klen + 1;
        while (*v == '\t' || *v == ' ')
            v++;
        size_t n = strcspn(v, "\n");
        snprintf(buf, cap, "%.*s", (int)(n < cap ? n : cap - 1), v);
        return buf;
    }
    return NULL;
}

void cf_case_exec_signals_default(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    if (!h)
        return;
    /* The kernel's view of what the provider gave the command: cat, run
     * without a shell (a shell may ignore signals for itself), prints its
     * own status. The process running the suite blocks and ignores signals
     * of its own; none of that may reach the command. */
    const char *argv[] = {"cat", "/proc/self/status", NULL};
    struct cf_exec e;
    memset(&e, 0, sizeof e);
    e.argv = argv;
    e.timeout_ms = CF_GUARD_MS;
    cf_exec(&e, h);
    char *out = NULL;
    if (e.status == SBX_OK && e.res.exit_code != 0) {
        cf_skip(t, "the sandbox has no /proc/self/status to read dispositions from");
        goto done;
    }
    if (!cf_expect_ok(t, e.status, &e.err, "exec cat /proc/self/status"))
        goto done;
    if (!(out = cf_capture_string(&e.out)))
        goto done;
    char ign[64], blk[64];
    if (!status_field(out, "SigIgn", ign, sizeof ign) ||
        !status_field(out, "SigBlk", blk, sizeof blk)) {
        cf_skip(t, "/proc/self/status has no SigIgn and SigBlk lines");
        goto done;
    }
    if (strspn(ign, "0") != strlen(ign) || strspn(blk, "0") != strlen(blk))
        cf_fail(t, "the command started with SigIgn:%s SigBlk:%s (signals ignored or "
                   "blocked); every signal must start at its default disposition, "
                   "the mask empty",
                ign, blk);
done:
    free(out);
    cf_exec_free(&e);
}

void cf_case_exec_argv_no_shell(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    if (!h)
        return;
    /* Each argument must arrive verbatim: no splitting, no expansion. */
    const char *argv[] = {"echo", "a  b", "$HOME", "*", ";", "`id`", "'q'", NULL};
    const char *want = "a  b $HOME * ; `id` 'q'\n";
    struct cf_exec e;
    memset(&e, 0, sizeof e);
    e.argv = argv;
    e.timeout_ms = CF_GUARD_MS;
    cf_exec(&e, h);
    char *out = NULL;
    char q[300];
    if (!cf_expect_ok(t, e.status, &e.err, "exec echo"))
        goto done;
    if (!(out = cf_capture_string(&e.out)))
        goto done;
    if (e.res.exit_code != 0 || strcmp(out, want) != 0)
        cf_fail(t, "echo with special arguments printed %s (exit %d); the "
                   "arguments must reach the program verbatim, without a shell",
                cf_quote(out, strlen(out), q, sizeof q), e.res.exit_code);
done:
    free(out);
    cf_exec_free(&e);
}

void cf_case_exec_missing_command(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    if (!h)
        return;
    char prog[64];
    snprintf(prog, sizeof prog, "sbx-conformance-missing-%.8s", t->token);
    const char *argv[] = {prog, NULL};
    struct cf_exec e;
    memset(&e, 0, sizeof e);
    e.argv = argv;
    e.timeout_ms = CF_GUARD_MS;
    cf_exec(&e, h);
    /* Either the provider knows (SBX_E_NO_COMMAND) or a shell in between
     * reported it the POSIX way (exit status 127). */
    if (e.status == SBX_E_NO_COMMAND) {
        if (!e.err.message[0])
            cf_fail(t, "SBX_E_NO_COMMAND without a message");
    } else if (e.status == SBX_OK) {
        if (e.res.exit_code != 127)
            cf_fail(t, "running a command that does not exist gave SBX_OK with "
                       "exit code %d; want SBX_E_NO_COMMAND or exit code 127",
                    e.res.exit_code);
    } else {
        cf_fail(t, "running a command that does not exist gave %s (%s); want "
                   "SBX_E_NO_COMMAND or exit code 127",
                cf_status_name(e.status), e.err.message);
    }
    cf_exec_free(&e);
}

void cf_case_exec_stdout_stderr(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    if (!h)
        return;
    const char *argv[] = {"sh", "-c",
                          "echo out1; echo err1 >&2; echo out2; echo err2 >&2; "
                          "exit 0",
                          NULL};
    struct cf_exec e;
    memset(&e, 0, sizeof e);
    e.argv = argv;
    e.timeout_ms = CF_GUARD_MS;
    cf_exec(&e, h);
    char *out = NULL, *err = NULL;
    char q1[200], q2[200];
    if (!cf_expect_ok(t, e.status, &e.err, "exec"))
        goto done;
    out = cf_capture_string(&e.out);
    err = cf_capture_string(&e.errout);
    if (!out || !err) {
        cf_fail(t, "out of memory");
        goto done;
    }
    if (strcmp(out, "out1\nout2\n") != 0 || strcmp(err, "err1\nerr2\n") != 0) {
        cf_fail(t, "stdout was %s and stderr %s; want \"out1\\nout2\\n\" and "
                   "\"err1\\nerr2\\n\"",
                cf_quote(out, strlen(out), q1, sizeof q1),
                cf_quote(err, strlen(err), q2, sizeof q2));
        goto done;
    }
    if (e.res.out_bytes != 10 || e.res.err_bytes != 10)
        cf_fail(t, "result counts %llu stdout and %llu stderr bytes; want 10 and 10",
                (unsigned long long)e.res.out_bytes,
                (unsigned long long)e.res.err_bytes);
done:
    free(out);
    free(err);
    cf_exec_free(&e);
}

/* Run argv with a pattern on stdin and the output checked against the
 * pattern; returns false after failing the case. */
static bool stdin_through(struct cf_test *t, sbx_handle *h,
                          const char *const *argv, uint64_t in_len,
                          uint64_t want_out, const char *what)
{
    struct cf_pattern_source ps;
    struct sbx_source src = cf_pattern_source(&ps, in_len, 11);
    struct cf_pattern_sink check;
    struct sbx_sink out = cf_pattern_sink(&check, 11);
    sbx_capture errc;
    sbx_capture_init(&errc, 4096, 0);
    struct sbx_sink err = sbx_capture_sink(&errc);
    struct sbx_exec_args a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.argv = argv;
    a.in = &src;
    a.timeout_ms = CF_GUARD_MS;
    a.out = &out;
    a.err = &err;
    struct sbx_exec_result res;
    memset(&res, 0, sizeof res);
    res.size = sizeof res;
    sbx_error e;
    sbx_error_clear(&e);
    int rc = sbx_exec(h, &a, &res, NULL, &e);
    bool ok = false;
    char q[200];
    if (rc != SBX_OK)
        cf_fail(t, "%s: %s: %s", what, cf_status_name(rc), e.message);
    else if (res.timed_out)
        cf_fail(t, "%s: timed out after %d s (stdin never reached its end?)", what,
                CF_GUARD_MS / 1000);
    else if (res.exit_code != 0)
        cf_fail(t, "%s: exit code %d, stderr %s", what, res.exit_code,
                cf_quote(errc.head, errc.head_len, q, sizeof q));
    else if (check.pos != want_out || res.out_bytes != want_out)
        cf_fail(t, "%s: got %llu bytes of output (result says %llu); want %llu",
                what, (unsigned long long)check.pos,
                (unsigned long long)res.out_bytes, (unsigned long long)want_out);
    else if (check.mismatch != UINT64_MAX)
        cf_fail(t, "%s: output differs from the input at byte %llu", what,
                (unsigned long long)check.mismatch);
    else
        ok = true;
    sbx_capture_free(&errc);
    return ok;
}

void cf_case_exec_stdin(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    if (!h)
        return;
    const char *cat[] = {"cat", NULL};
    uint64_t big = 1024 * 1024 + 4099;
    if (!stdin_through(t, h, cat, big, big, "1 MiB of stdin through cat"))
        return;
    if (!stdin_through(t, h, cat, 0, 0, "empty stdin to cat"))
        return;
    /* The command stops reading early: the provider must neither hang nor
     * fail (nor take the host down with SIGPIPE). */
    const char *head[] = {"head", "-c", "10", NULL};
    if (!stdin_through(t, h, head, 4 * 1024 * 1024, 10,
                       "4 MiB of stdin to a command that reads 10 bytes"))
        return;
    /* No stdin at all: the command sees end of file at once. */
    struct cf_exec e;
    memset(&e, 0, sizeof e);
    e.argv = cat;
    e.timeout_ms = CF_GUARD_MS;
    cf_exec(&e, h);
    if (cf_expect_ok(t, e.status, &e.err, "cat without stdin")) {
        if (e.res.timed_out)
            cf_fail(t, "cat without stdin timed out: stdin must be empty and "
                       "closed when none is given");
        else if (e.res.exit_code != 0 || e.out.total != 0)
            cf_fail(t, "cat without stdin: exit code %d, %llu bytes of output; "
                       "want 0 and 0",
                    e.res.exit_code, (unsigned long long)e.out.total);
    }
    cf_exec_free(&e);
}

/* Variables a sandbox may set on its own even when the caller passed
 * none (shells and container runtimes do). */
static bool env_allowed(const char *name, size_t len)
{
    static const char *const names[] = {
        "PATH", "HOME", "PWD", "OLDPWD", "SHLVL", "HOSTNAME", "TERM", "USER",
        "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR", "_", NULL};
    for (size_t i = 0; names[i]; i++)
        if (strlen(names[i]) == len && !strncmp(name, names[i], len))
            return true;
    return len > 3 && !strncmp(name, "LC_", 3);
}

/* Whether text contains line as a whole line. */
static bool has_line(const char *text, const char *line, size_t len)
{
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t l = nl ? (size_t)(nl - p) : strlen(p);
        if (l == len && !memcmp(p, line, len))
            return true;
        if (!nl)
            break;
        p = nl + 1;
    }
    return false;
}

void cf_case_exec_env(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    if (!h)
        return;
    const char *env[] = {"FOO=bar", "SBX_CF_SPACES=a b  c", "SBX_CF_EQ=x=y", NULL};
    const char *argv[] = {"env", NULL};
    struct cf_exec e;
    memset(&e, 0, sizeof e);
    e.argv = argv;
    e.env = env;
    e.timeout_ms = CF_GUARD_MS;
    cf_exec(&e, h);
    char *out = NULL;
    if (!cf_expect_ok(t, e.status, &e.err, "exec env"))
        goto done;
    if (e.res.exit_code != 0) {
        cf_fail(t, "env exited with %d", e.res.exit_code);
        goto done;
    }
    if (e.out.truncated) {
        cf_fail(t, "env printed more than %d bytes", 2 * CF_CAPTURE_MAX);
        goto done;
    }
    if (!(out = cf_capture_string(&e.out))) {
        cf_fail(t, "out of memory");
        goto done;
    }
    for (size_t i = 0; env[i]; i++) {
        if (!has_line(out, env[i], strlen(env[i]))) {
            cf_fail(t, "the variable %s passed to exec is not in the command's "
                       "environment",
                    env[i]);
            goto done;
        }
    }
    /* Nothing of the host's own environment may leak in. Only names are
     * reported: values may be secrets. */
    for (char **v = environ; v && *v; v++) {
        const char *eq = strchr(*v, '=');
        if (!eq || env_allowed(*v, (size_t)(eq - *v)))
            continue;
        if (has_line(out, *v, strlen(*v))) {
            cf_fail(t, "the host's variable %.*s leaked into the command's "
                       "environment; only what the caller passes may be there",
                    (int)(eq - *v), *v);
            goto done;
        }
    }
done:
    free(out);
    cf_exec_free(&e);
}

/* Run `sh -c script` in cwd; require exit 0 and output ending with want. */
static bool pwd_in(struct cf_test *t, sbx_handle *h, const char *cwd,
                   const char *script, const char *want)
{
    const char *argv[] = {"sh", "-c", script, NULL};
    struct cf_exec e;
    memset(&e, 0, sizeof e);
    e.argv = argv;
    e.cwd = cwd;
    e.timeout_ms = CF_GUARD_MS;
    cf_exec(&e, h);
    bool ok = false;
    char *out = NULL;
    char what[200], q[300];
    snprintf(what, sizeof what, "exec with cwd %s", cwd);
    if (!cf_expect_ok(t, e.status, &e.err, what))
        goto done;
    if (!(out = cf_capture_string(&e.out))) {
        cf_fail(t, "out of memory");
        goto done;
    }
    size_t ol = strlen(out), wl = strlen(want);
    if (e.res.exit_code != 0 || ol < wl || strcmp(out + ol - wl, want) != 0) {
        cf_fail(t, "sh -c '%s' in cwd %s printed %s (exit %d); want it to end "
                   "with %s",
                script, cwd, cf_quote(out, ol, q, sizeof q), e.res.exit_code, want);
        goto done;
    }
    ok = true;
done:
    free(out);
    cf_exec_free(&e);
    return ok;
}

void cf_case_exec_cwd(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    if (!h)
        return;
    /* A directory made by the file API ... */
    if (!cf_write_text(t, h, "sub/dir/marker.txt", "cwd-marker\n"))
        return;
    if (!pwd_in(t, h, "sub/dir", "cat marker.txt && pwd", "/sub/dir\n"))
        return;
    {
        /* ... and one made by a command. */
        char *out = cf_sh(t, h, "mkdir -p made/by/shell");
        free(out);
        if (!out)
            return;
    }
    if (!pwd_in(t, h, "made/by/shell", "pwd", "/made/by/shell\n"))
        return;

    static const char *const bad[] = {"..", "sub/../..", "/etc", NULL};
    for (size_t i = 0; bad[i]; i++) {
        const char *argv[] = {"sh", "-c", "pwd", NULL};
        struct cf_exec e;
        memset(&e, 0, sizeof e);
        e.argv = argv;
        e.cwd = bad[i];
        e.timeout_ms = CF_GUARD_MS;
        cf_exec(&e, h);
        bool ok = e.status == SBX_E_INVALID || e.status == SBX_E_DENIED;
        if (!ok) {
            char q[200];
            char *out = cf_capture_string(&e.out);
            cf_fail(t, "exec with cwd %s outside the workspace returned %s "
                       "(printed %s); want SBX_E_INVALID",
                    bad[i], cf_status_name(e.status),
                    out ? cf_quote(out, strlen(out), q, sizeof q) : "?");
            free(out);
        }
        cf_exec_free(&e);
        if (!ok)
            return;
    }
}

/*
 * A caller's stdin that stays open and says nothing (an interactive pipe)
 * must not keep exec from returning once the command has exited: the source
 * offers a pollable fd, and the provider stops feeding when the command is
 * done. Then the source is still open, so a provider that waits for its end
 * would hang until the guard.
 */
void cf_case_exec_stdin_left_open(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    if (!h)
        return;
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return (void)cf_fail(t, "pipe2 failed");
    struct sbx_source in = sbx_fd_source(&p[0]);
    const char *argv[] = {"sh", "-c", "exit 5", NULL};
    struct cf_exec e;
    memset(&e, 0, sizeof e);
    e.argv = argv;
    e.in = &in;
    e.timeout_ms = CF_GUARD_MS;
    cf_exec(&e, h);
    if (cf_expect_ok(t, e.status, &e.err, "sh -c 'exit 5' with stdin left open")) {
        if (e.res.timed_out || e.seconds > cf_bound(5.0))
            cf_fail(t, "exec returned after %.1f s (timed out: %d): it waited for "
                       "the end of a stdin the command never read",
                    e.seconds, e.res.timed_out);
        else if (e.res.exit_code != 5)
            cf_fail(t, "exit code %d, want 5", e.res.exit_code);
    }
    cf_exec_free(&e);
    close(p[0]);
    close(p[1]);
}

/*
 * cwd must be an existing directory: a missing one, or a file, is
 * SBX_E_INVALID and nothing runs (the command would write a marker in the
 * directory it ran in, wherever that is).
 */
void cf_case_exec_cwd_missing(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    if (!h)
        return;
    if (!cf_write_text(t, h, "file.txt", "a file\n"))
        return;
    static const char *const bad[] = {"no/such/dir", "file.txt", NULL};
    static const char *const what[] = {"a missing directory", "a file"};
    for (size_t i = 0; bad[i]; i++) {
        const char *argv[] = {"sh", "-c", "echo ran > ran.txt; pwd", NULL};
        struct cf_exec e;
        memset(&e, 0, sizeof e);
        e.argv = argv;
        e.cwd = bad[i];
        e.timeout_ms = CF_GUARD_MS;
        cf_exec(&e, h);
        bool ok = e.status == SBX_E_INVALID;
        if (!ok) {
            char q[200];
            char *out = cf_capture_string(&e.out);
            cf_fail(t, "exec with cwd %s (%s) returned %s (%s; printed %s); want "
                       "SBX_E_INVALID",
                    bad[i], what[i], cf_status_name(e.status), e.err.message,
                    out ? cf_quote(out, strlen(out), q, sizeof q) : "?");
            free(out);
        }
        cf_exec_free(&e);
        if (!ok)
            return;
    }
    char *out = cf_sh(t, h, "find . -name ran.txt");
    if (out && *out) {
        char q[200];
        cf_fail(t, "exec with a bad cwd was refused but the command ran: %s",
                cf_quote(out, strlen(out), q, sizeof q));
    }
    free(out);
}
