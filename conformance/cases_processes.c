/*
 * cases_processes.c - SBX_CAP_PROCESSES (ABI 1.2): processes that outlive
 * the call, read by byte cursor from a bounded replay buffer.
 *
 * Every case runs sh and POSIX utilities only. Output is checked byte for
 * byte against what the command must have written, so a repeated, skipped
 * or uncounted byte fails; times are bounded with cf_bound (the suite's
 * time scale).
 */
#include "cf_internal.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct sbx_proc_spec spec_of(const char *const *argv)
{
    struct sbx_proc_spec s;
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    s.argv = argv;
    return s;
}

/* The process ended with exit code `code` (or by signal `sig`, code -1). */
static bool expect_end(struct cf_test *t, const struct cf_proc *p, int code, int sig,
                       const char *what)
{
    const struct sbx_proc_read_result *r = &p->res;
    if (r->state != SBX_PROC_EXITED || r->exit_code != code || r->term_signal != sig)
        return cf_fail(t, "%s: ended with state %u, exit_code %d, term_signal %d; want "
                          "exited, %d, %d",
                       what, (unsigned)r->state, r->exit_code, r->term_signal, code, sig);
    return true;
}

static bool expect_text(struct cf_test *t, const char *stream, const char *got, size_t len,
                        const char *want)
{
    if (len == strlen(want) && (!len || !memcmp(got, want, len)))
        return true;
    char q[300], w[300];
    return cf_fail(t, "%s was %s; want %s", stream, cf_quote(got ? got : "", len, q, sizeof q),
                   cf_quote(want, strlen(want), w, sizeof w));
}

void cf_case_proc_exit_and_streams(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    struct cf_proc p;
    if (!h || !cf_proc_sh(t, h, &p, "echo out1; echo err1 >&2; echo out2; exit 7", 0))
        return;
    if (cf_proc_until_eof(t, &p, 10) && expect_end(t, &p, 7, 0, "sh -c '...; exit 7'") &&
        expect_text(t, "stdout", p.out, p.out_len, "out1\nout2\n") &&
        expect_text(t, "stderr", p.err, p.err_len, "err1\n") &&
        (p.out_cursor != 10 || p.err_cursor != 5))
        cf_fail(t, "at the end the cursors are %llu and %llu; want 10 and 5 (the bytes of "
                   "each stream)",
                (unsigned long long)p.out_cursor, (unsigned long long)p.err_cursor);
    /* Once ended and read, it stays so: nothing more, eof again. */
    if (!cf_failed(t)) {
        int rc = cf_proc_read(t, &p, 0, 0);
        if (rc != SBX_OK || !p.res.eof || p.out_len != 10)
            cf_fail(t, "a read at the end gave %s, eof %d, %zu bytes in all; want SBX_OK, "
                       "eof, nothing new",
                    cf_status_name(rc), p.res.eof, p.out_len);
    }
    cf_proc_free(&p);
}

void cf_case_proc_killed_by_signal(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    struct cf_proc p;
    if (!h || !cf_proc_sh(t, h, &p, "echo before; kill -TERM $$; echo after", 0))
        return;
    if (cf_proc_until_eof(t, &p, 10) &&
        expect_end(t, &p, -1, SIGTERM, "a shell that sent itself SIGTERM"))
        expect_text(t, "stdout", p.out, p.out_len, "before\n");
    cf_proc_free(&p);
}

void cf_case_proc_stdin(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    struct cf_proc p;
    const char *cat[] = {"cat", NULL};
    struct sbx_proc_spec s = spec_of(cat);
    if (!h || !cf_proc_start(t, h, &p, &s))
        return;
    sbx_error err;
    int rc = sbx_proc_write(h, p.id, "hello\n", 6, 0, NULL, &err);
    if (cf_expect_ok(t, rc, &err, "proc_write") &&
        cf_proc_until_text(t, &p, "hello\n", 5) && p.res.state == SBX_PROC_RUNNING) {
        rc = sbx_proc_write(h, p.id, "world", 5, SBX_PROC_WRITE_CLOSE, NULL, &err);
        if (cf_expect_ok(t, rc, &err, "proc_write with SBX_PROC_WRITE_CLOSE") &&
            cf_proc_until_eof(t, &p, 5) && expect_end(t, &p, 0, 0, "cat after EOF"))
            expect_text(t, "stdout of cat", p.out, p.out_len, "hello\nworld");
    }
    if (!cf_failed(t)) {
        rc = sbx_proc_write(h, p.id, "late", 4, 0, NULL, &err);
        cf_proc_expect_status(t, rc, &err, SBX_E_INVALID, "proc_write after the end");
    }
    cf_proc_free(&p);
    if (cf_failed(t))
        return;
    /* 1 MiB through stdin into a file, compared byte for byte. */
    const char *sh[] = {"sh", "-c", "cat > stdin.bin", NULL};
    s = spec_of(sh);
    if (!cf_proc_start(t, h, &p, &s))
        return;
    enum { TOTAL = 1 << 20, CHUNK = 65536 };
    unsigned char *buf = malloc(CHUNK);
    for (uint64_t off = 0; buf && off < TOTAL && !cf_failed(t); off += CHUNK) {
        for (size_t i = 0; i < CHUNK; i++)
            buf[i] = cf_pattern_byte(off + i, 7);
        rc = sbx_proc_write(h, p.id, buf, CHUNK, off + CHUNK == TOTAL ? SBX_PROC_WRITE_CLOSE : 0,
                            NULL, &err);
        cf_expect_ok(t, rc, &err, "proc_write of 1 MiB in 64 KiB pieces");
    }
    free(buf);
    if (!cf_failed(t) && cf_proc_until_eof(t, &p, 20) &&
        expect_end(t, &p, 0, 0, "cat > stdin.bin")) {
        struct cf_pattern_sink ps;
        struct sbx_sink sink = cf_pattern_sink(&ps, 7);
        rc = sbx_read(h, "stdin.bin", &sink, NULL, &err);
        if (cf_expect_ok(t, rc, &err, "read stdin.bin") &&
            (ps.pos != TOTAL || ps.mismatch != UINT64_MAX))
            cf_fail(t, "1 MiB written to stdin arrived as %llu bytes, first difference at "
                       "%lld",
                    (unsigned long long)ps.pos,
                    ps.mismatch == UINT64_MAX ? -1LL : (long long)ps.mismatch);
    }
    cf_proc_free(&p);
}

/* The lines "1000000\n" .. : 8 bytes each, so byte i is easy to know. */
static char seq_byte(uint64_t i)
{
    uint64_t line = 1000000 + i / 8;
    unsigned pos = (unsigned)(i % 8);
    if (pos == 7)
        return '\n';
    char d[24];
    snprintf(d, sizeof d, "%07llu", (unsigned long long)line);
    return d[pos];
}

/* First offset where buf (bytes from `from` on) differs from the
 * sequence, or -1. */
static long long seq_mismatch(const char *buf, size_t len, uint64_t from)
{
    for (size_t i = 0; i < len; i++)
        if (buf[i] != seq_byte(from + i))
            return (long long)(from + i);
    return -1;
}

void cf_case_proc_cursor_continues(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    struct cf_proc p;
    /* 16384 lines = 128 KiB, written while the reads go on */
    if (!h || !cf_proc_sh(t, h, &p, "seq 1000000 1016383", 0))
        return;
    double deadline = cf_now() + cf_bound(15);
    /* A failure leaves the loop (not the case): p's buffers are freed below. */
    while (!p.res.eof && !cf_failed(t)) {
        uint64_t before = p.out_cursor;
        int rc = cf_proc_read(t, &p, 200, 1000); /* small reads: many cursors */
        if (rc != SBX_OK)
            cf_fail(t, "proc_read at cursor %llu: %s: %s", (unsigned long long)before,
                    cf_status_name(rc), p.err_msg.message);
        else if (p.res.out_lost)
            cf_fail(t, "128 KiB in a default (1 MiB) buffer: a read at %llu lost %llu bytes",
                    (unsigned long long)before, (unsigned long long)p.res.out_lost);
        else if (cf_now() > deadline)
            cf_fail(t, "not at eof after %.0f s (cursor %llu)", cf_bound(15),
                    (unsigned long long)p.out_cursor);
    }
    long long bad = seq_mismatch(p.out, p.out_len, 0);
    if (!cf_failed(t) && (p.out_len != 131072 || bad >= 0))
        cf_fail(t, "read in pieces of at most 1000 bytes from each new cursor, seq's "
                   "131072 bytes came back as %zu bytes, first wrong byte at %lld (a "
                   "repeated or skipped byte)",
                p.out_len, bad);
    if (!cf_failed(t) && p.reads < 10)
        cf_fail(t, "131072 bytes with max_bytes 1000 took only %u reads", p.reads);
    /* The buffer replays: from an earlier cursor the same bytes again. */
    if (!cf_failed(t)) {
        struct cf_proc again = p;
        again.out = again.err = NULL;
        again.out_len = again.out_cap = again.err_len = again.err_cap = 0;
        again.out_cursor = 50000;
        again.res.eof = 0;
        int rc = cf_proc_read(t, &again, 0, 4096);
        long long bad2 = seq_mismatch(again.out, again.out_len, 50000);
        if (rc != SBX_OK || again.out_len != 4096 || again.out_cursor != 54096 || bad2 >= 0)
            cf_fail(t, "a read again from cursor 50000 gave %s, %zu bytes, cursor %llu, "
                       "first wrong byte at %lld; want the same 4096 bytes, cursor 54096",
                    cf_status_name(rc), again.out_len,
                    (unsigned long long)again.out_cursor, bad2);
        cf_proc_free(&again);
    }
    cf_proc_free(&p);
}

void cf_case_proc_replay_bounded(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    if (!h)
        return;
    /* 1 MiB of output into a 64 KiB buffer, read only after the end */
    const char *argv[] = {"seq", "1000000", "1131071", NULL};
    struct sbx_proc_spec s = spec_of(argv);
    s.buffer_bytes = 64 * 1024;
    struct cf_proc p;
    if (!cf_proc_start(t, h, &p, &s))
        return;
    double deadline = cf_now() + cf_bound(15);
    for (;;) {
        struct cf_proc probe = p;
        probe.out = probe.err = NULL;
        probe.out_len = probe.out_cap = probe.err_len = probe.err_cap = 0;
        /* from the end's side: nothing is read, only the state */
        int rc = cf_proc_read(t, &probe, 100, 1);
        free(probe.out);
        free(probe.err);
        if (rc != SBX_OK)
            return (void)cf_fail(t, "proc_read: %s: %s", cf_status_name(rc),
                                 probe.err_msg.message);
        if (probe.res.state == SBX_PROC_EXITED)
            break;
        if (cf_now() > deadline)
            return (void)cf_fail(t, "seq of 1 MiB did not end within %.0f s", cf_bound(15));
        cf_sleep_ms(50);
    }
    if (!cf_proc_until_eof(t, &p, 15))
        return;
    const uint64_t total = 1 << 20, kept = 64 * 1024;
    /* what was delivered starts where the loss ended */
    long long bad = seq_mismatch(p.out, p.out_len, p.out_lost);
    if (p.out_cursor != total || p.out_lost != total - kept || p.out_seen != kept || bad >= 0)
        cf_fail(t, "1 MiB written into a 64 KiB replay buffer, read from cursor 0 after "
                   "the end: final cursor %llu, lost %llu, delivered %llu, first wrong byte "
                   "at %lld; want cursor 1048576, lost 983040 (exactly), the last 65536 "
                   "bytes intact",
                (unsigned long long)p.out_cursor, (unsigned long long)p.out_lost,
                (unsigned long long)p.out_seen, bad);
    cf_proc_free(&p);
}

void cf_case_proc_reattach(struct cf_test *t)
{
    sbx_provider *prov = NULL;
    sbx_handle *h = cf_sandbox(t, &prov);
    struct cf_proc p;
    if (!h || !cf_proc_sh(t, h, &p, "echo first; read x; echo \"got $x\"", 0))
        return;
    if (!cf_proc_until_text(t, &p, "first\n", 10))
        return cf_proc_free(&p);
    /* The first instance goes away; a second attaches and continues with
     * the same id from the same cursor. */
    sbx_handle *h2 = cf_attach_after_restart(t, prov, h);
    if (!h2)
        return cf_proc_free(&p);
    p.h = h2;
    struct sbx_proc_info info;
    if (!cf_proc_listed(t, h2, p.id, &info))
        cf_fail(t, "after the restart, proc_list does not list process %s", p.id);
    sbx_error err;
    int rc = cf_failed(t) ? SBX_OK
                          : sbx_proc_write(h2, p.id, "zz\n", 3, SBX_PROC_WRITE_CLOSE, NULL, &err);
    if (!cf_failed(t) && cf_expect_ok(t, rc, &err, "proc_write through the second instance") &&
        cf_proc_until_eof(t, &p, 10) && expect_end(t, &p, 0, 0, "the reattached process"))
        expect_text(t, "stdout, read across the restart", p.out, p.out_len,
                    "first\ngot zz\n");
    cf_proc_free(&p);
}

void cf_case_proc_wait_ms(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    struct cf_proc p;
    if (!h || !cf_proc_sh(t, h, &p, "sleep 0.3; echo hi; sleep 30", 0))
        return;
    /* Data ends the wait early. */
    double t0 = cf_now();
    while (!cf_proc_out_has(&p, "hi\n") && !cf_failed(t) && cf_now() - t0 < cf_bound(5)) {
        int rc = cf_proc_read(t, &p, 10000, 0);
        if (rc != SBX_OK)
            return (void)cf_fail(t, "proc_read with wait_ms 10000: %s: %s", cf_status_name(rc),
                                 p.err_msg.message);
    }
    double early = cf_now() - t0;
    if (!cf_failed(t) && (!cf_proc_out_has(&p, "hi\n") || early > cf_bound(3.0)))
        cf_fail(t, "proc_read with wait_ms 10000 of a command printing after 0.3 s returned "
                   "its output after %.2f s; want it as the output arrives (within %.1f s)",
                early, cf_bound(3.0));
    /* Nothing comes: the wait lasts about wait_ms. */
    if (!cf_failed(t)) {
        uint64_t before = p.out_cursor;
        t0 = cf_now();
        int rc = cf_proc_read(t, &p, 400, 0);
        double idle = cf_now() - t0;
        if (rc != SBX_OK)
            cf_fail(t, "idle proc_read: %s: %s", cf_status_name(rc), p.err_msg.message);
        else if (p.out_cursor != before || p.res.state != SBX_PROC_RUNNING)
            cf_fail(t, "idle proc_read moved the cursor or ended the process");
        else if (idle < 0.3 || idle > cf_bound(2.0))
            cf_fail(t, "proc_read with wait_ms 400 and no output returned after %.2f s; "
                       "want about 0.4 s (0.3 to %.1f)",
                    idle, cf_bound(2.0));
        /* wait_ms 0 returns at once */
        t0 = cf_now();
        rc = cf_proc_read(t, &p, 0, 0);
        if (!cf_failed(t) && (rc != SBX_OK || cf_now() - t0 > cf_bound(1.0)))
            cf_fail(t, "proc_read with wait_ms 0 took %.2f s (%s)", cf_now() - t0,
                    cf_status_name(rc));
    }
    /* The end ends a wait too. */
    if (!cf_failed(t)) {
        sbx_error err;
        int rc = sbx_proc_signal(h, p.id, SIGKILL, NULL, &err);
        t0 = cf_now();
        if (cf_expect_ok(t, rc, &err, "proc_signal SIGKILL")) {
            while (!p.res.eof && cf_now() - t0 < cf_bound(5) &&
                   cf_proc_read(t, &p, 10000, 0) == SBX_OK)
                ;
            if (!p.res.eof || cf_now() - t0 > cf_bound(3.0))
                cf_fail(t, "after SIGKILL, proc_read with wait_ms 10000 saw the end after "
                           "%.2f s (eof %d); want within %.1f s",
                        cf_now() - t0, p.res.eof, cf_bound(3.0));
        }
    }
    cf_proc_free(&p);
}

void cf_case_proc_timeout(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    if (!h)
        return;
    const char *argv[] = {"sh", "-c", "sleep 30 & echo started; wait", NULL};
    struct sbx_proc_spec s = spec_of(argv);
    s.timeout_ms = 500;
    struct cf_proc p;
    if (!cf_proc_start(t, h, &p, &s))
        return;
    double t0 = cf_now();
    if (cf_proc_until_eof(t, &p, 10)) {
        double took = cf_now() - t0;
        if (!p.res.timed_out || p.res.exit_code != -1 || p.res.term_signal != SIGKILL)
            cf_fail(t, "a 30 s command with timeout_ms 500 ended with timed_out %d, "
                       "exit_code %d, term_signal %d; want timed_out, -1, 9 (SIGKILL)",
                    p.res.timed_out, p.res.exit_code, p.res.term_signal);
        else if (took > cf_bound(5.0))
            cf_fail(t, "timeout_ms 500: the end came after %.2f s", took);
    }
    cf_proc_free(&p);
}

void cf_case_proc_signal(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    struct cf_proc p;
    if (!h || !cf_proc_sh(t, h, &p, "echo up; sleep 30 & wait", 0) ||
        !cf_proc_until_text(t, &p, "up\n", 10))
        return;
    sbx_error err;
    int rc = sbx_proc_signal(h, p.id, SIGTERM, NULL, &err);
    double t0 = cf_now();
    if (cf_expect_ok(t, rc, &err, "proc_signal SIGTERM") && cf_proc_until_eof(t, &p, 5) &&
        expect_end(t, &p, -1, SIGTERM, "a shell sent SIGTERM") && cf_now() - t0 > cf_bound(3))
        cf_fail(t, "SIGTERM to the process group: the end came after %.2f s (its child "
                   "sleep kept the output open?)",
                cf_now() - t0);
    if (!cf_failed(t)) {
        rc = sbx_proc_signal(h, p.id, SIGTERM, NULL, &err);
        cf_proc_expect_status(t, rc, &err, SBX_OK, "proc_signal of a process that ended");
    }
    if (!cf_failed(t)) {
        rc = sbx_proc_signal(h, p.id, 0, NULL, &err);
        cf_proc_expect_status(t, rc, &err, SBX_E_INVALID, "proc_signal with signal 0");
    }
    cf_proc_free(&p);
}

void cf_case_proc_list(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    if (!h)
        return;
    struct cf_proc a, b, c;
    if (!cf_proc_sh(t, h, &a, "exit 4", 0))
        return;
    if (!cf_proc_until_eof(t, &a, 10) || !cf_proc_sh(t, h, &b, "sleep 30", 0)) {
        cf_proc_free(&a);
        return;
    }
    if (!cf_proc_sh(t, h, &c, "sleep 31", 0)) {
        cf_proc_free(&a);
        cf_proc_free(&b);
        return;
    }
    struct sbx_proc_info ia, ib, ic;
    bool la = cf_proc_listed(t, h, a.id, &ia), lb = cf_proc_listed(t, h, b.id, &ib),
         lc = cf_proc_listed(t, h, c.id, &ic);
    if (!cf_failed(t) && (!la || !lb || !lc))
        cf_fail(t, "proc_list lists %s %s, %s %s, %s %s; want all three", a.id,
                la ? "yes" : "no", b.id, lb ? "yes" : "no", c.id, lc ? "yes" : "no");
    else if (ia.state != SBX_PROC_EXITED || ia.exit_code != 4)
        cf_fail(t, "proc_list: the ended process has state %u, exit_code %d; want exited, 4",
                (unsigned)ia.state, ia.exit_code);
    else if (ib.state != SBX_PROC_RUNNING || ic.state != SBX_PROC_RUNNING)
        cf_fail(t, "proc_list: the sleeping processes have states %u and %u; want running",
                (unsigned)ib.state, (unsigned)ic.state);
    else if (!strcmp(a.id, b.id) || !strcmp(b.id, c.id) || !strcmp(a.id, c.id))
        cf_fail(t, "three processes, ids %s %s %s: not distinct", a.id, b.id, c.id);
    sbx_error err;
    sbx_proc_signal(h, b.id, SIGKILL, NULL, &err);
    sbx_proc_signal(h, c.id, SIGKILL, NULL, &err);
    cf_proc_free(&a);
    cf_proc_free(&b);
    cf_proc_free(&c);
}

void cf_case_proc_foreign_id(struct cf_test *t)
{
    sbx_provider *prov = NULL;
    sbx_handle *mine = cf_sandbox(t, &prov);
    if (!mine)
        return;
    char key[CF_KEY_MAX];
    cf_new_key(t, key);
    sbx_handle *other = cf_create(t, prov, key);
    struct cf_proc p;
    if (!other || !cf_proc_sh(t, mine, &p, "echo secret; sleep 30", 0) ||
        !cf_proc_until_text(t, &p, "secret", 10))
        return;
    /* The other session's handle may not touch it. */
    struct cf_proc theirs = p;
    theirs.h = other;
    theirs.out = theirs.err = NULL;
    theirs.out_len = theirs.out_cap = theirs.err_len = theirs.err_cap = 0;
    theirs.out_cursor = theirs.err_cursor = 0;
    int rc = cf_proc_read(t, &theirs, 0, 0);
    cf_proc_expect_status(t, rc, &theirs.err_msg, SBX_E_NOT_FOUND,
                          "proc_read of another session's process id");
    if (!cf_failed(t) && theirs.out_len)
        cf_fail(t, "proc_read of another session's process delivered its output");
    cf_proc_free(&theirs);
    sbx_error err;
    if (!cf_failed(t)) {
        rc = sbx_proc_write(other, p.id, "x\n", 2, 0, NULL, &err);
        cf_proc_expect_status(t, rc, &err, SBX_E_NOT_FOUND,
                              "proc_write to another session's process id");
    }
    if (!cf_failed(t)) {
        rc = sbx_proc_signal(other, p.id, SIGKILL, NULL, &err);
        cf_proc_expect_status(t, rc, &err, SBX_E_NOT_FOUND,
                              "proc_signal of another session's process id");
    }
    struct sbx_proc_info info;
    if (!cf_failed(t) && cf_proc_listed(t, other, p.id, &info))
        cf_fail(t, "proc_list of another session lists process %s", p.id);
    /* still running: the signal did not reach it */
    if (!cf_failed(t) && (!cf_proc_listed(t, mine, p.id, &info) ||
                          info.state != SBX_PROC_RUNNING))
        cf_fail(t, "process %s no longer runs after another session signalled it", p.id);
    /* Unknown and malformed ids. */
    static const char *const bad[] = {"", "../x", "a/b", "id with spaces", NULL};
    for (size_t i = 0; bad[i] && !cf_failed(t); i++) {
        rc = sbx_proc_signal(mine, bad[i], SIGKILL, NULL, &err);
        char what[96];
        snprintf(what, sizeof what, "proc_signal of the malformed id \"%s\"", bad[i]);
        cf_proc_expect_status(t, rc, &err, SBX_E_INVALID, what);
    }
    if (!cf_failed(t)) {
        char unknown[64];
        snprintf(unknown, sizeof unknown, "no-such-process-%.16s", t->token);
        rc = sbx_proc_signal(mine, unknown, SIGKILL, NULL, &err);
        cf_proc_expect_status(t, rc, &err, SBX_E_NOT_FOUND, "proc_signal of an unknown id");
    }
    sbx_proc_signal(mine, p.id, SIGKILL, NULL, &err);
    cf_proc_free(&p);
}

#define CONCURRENT 32

void cf_case_proc_concurrent(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    if (!h)
        return;
    struct cf_proc *p = calloc(CONCURRENT, sizeof *p);
    if (!p)
        return (void)cf_fail(t, "out of memory");
    /* None can end before the file "go" exists: all 32 run at once. */
    size_t started = 0;
    for (; started < CONCURRENT && !cf_failed(t); started++) {
        char script[160];
        snprintf(script, sizeof script,
                 "echo start %zu; i=0; while [ ! -e go ] && [ $i -lt 600 ]; do sleep 0.05; "
                 "i=$((i+1)); done; echo done %zu",
                 started, started);
        if (!cf_proc_sh(t, h, &p[started], script, 0))
            break;
    }
    size_t running = 0;
    for (size_t i = 0; i < started && !cf_failed(t); i++) {
        struct sbx_proc_info info;
        if (cf_proc_listed(t, h, p[i].id, &info) && info.state == SBX_PROC_RUNNING)
            running++;
    }
    if (!cf_failed(t) && running != CONCURRENT)
        cf_fail(t, "of 32 processes waiting for a file, %zu were listed running", running);
    double t0 = cf_now();
    if (!cf_failed(t))
        cf_write_text(t, h, "go", "");
    for (size_t i = 0; i < started && !cf_failed(t); i++) {
        char want[64];
        snprintf(want, sizeof want, "start %zu\ndone %zu\n", i, i);
        if (cf_proc_until_eof(t, &p[i], 20) && expect_end(t, &p[i], 0, 0, "one of 32"))
            expect_text(t, "stdout of one of 32 processes", p[i].out, p[i].out_len, want);
    }
    if (!cf_failed(t) && cf_now() - t0 > cf_bound(10))
        cf_fail(t, "32 processes took %.1f s to end once released", cf_now() - t0);
    for (size_t i = 0; i < started; i++)
        cf_proc_free(&p[i]);
    free(p);
}

/* Prints "alive" when a process whose command line holds token runs as
 * pid (the pid file's), else "gone"; "unknown" when /proc cannot tell. */
static const char alive_script[] =
    "p=$1; tok=$2; if [ ! -d /proc/self ]; then echo unknown; "
    "elif [ -r /proc/$p/cmdline ] && tr '\\000' ' ' < /proc/$p/cmdline | grep -q \"$tok\"; "
    "then echo alive; else echo gone; fi";

static char *alive(struct cf_test *t, sbx_handle *h, const char *pid, const char *token)
{
    char script[512];
    snprintf(script, sizeof script, "set -- %s %s; %s", pid, token, alive_script);
    return cf_sh(t, h, script);
}

void cf_case_proc_destroy_kills(struct cf_test *t)
{
    sbx_provider *prov = NULL;
    sbx_handle *h = cf_sandbox(t, &prov);
    if (!h)
        return;
    char key[CF_KEY_MAX], ref[SBX_REF_MAX];
    snprintf(key, sizeof key, "%s", t->sandboxes[t->nsandboxes - 1].key);
    snprintf(ref, sizeof ref, "%s", sbx_handle_ref(h));
    /* Two processes, one with a child; each notes its pid. The loop ends
     * by itself after about a minute should everything else fail. */
    char script[256];
    snprintf(script, sizeof script,
             ": sbxcf-%.16s; echo $$ > pid.$1; sleep 60 & i=0; "
             "while [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done",
             t->token);
    struct cf_proc p[2];
    char pids[2][32] = {"", ""};
    char tok[40];
    snprintf(tok, sizeof tok, "sbxcf-%.16s", t->token);
    for (int i = 0; i < 2; i++) {
        const char *argv[] = {"sh", "-c", script, "sh", i ? "b" : "a", NULL};
        struct sbx_proc_spec s = spec_of(argv);
        s.flags = 0;
        if (!cf_proc_start(t, h, &p[i], &s))
            return;
        cf_proc_free(&p[i]);
    }
    /* their pids, and a check that this sandbox can tell they run */
    double deadline = cf_now() + cf_bound(10);
    for (int i = 0; i < 2 && !cf_failed(t); i++) {
        char path[16];
        snprintf(path, sizeof path, "pid.%c", i ? 'b' : 'a');
        while (!pids[i][0] && cf_now() < deadline) {
            sbx_capture c;
            sbx_capture_init(&c, 32, 0);
            struct sbx_sink sink = sbx_capture_sink(&c);
            sbx_error err;
            if (sbx_read(h, path, &sink, NULL, &err) == SBX_OK && c.head_len > 1 &&
                c.head[c.head_len - 1] == '\n')
                snprintf(pids[i], sizeof pids[i], "%.*s", (int)c.head_len - 1, c.head);
            sbx_capture_free(&c);
            if (!pids[i][0])
                cf_sleep_ms(50);
        }
        if (!pids[i][0])
            cf_fail(t, "process %s never wrote %s", p[i].id, path);
    }
    if (cf_failed(t))
        return;
    char *before = alive(t, h, pids[0], tok);
    bool can_tell = before && !strcmp(before, "alive\n");
    free(before);
    if (cf_failed(t))
        return;
    /* destroy, then the same key again */
    sbx_error err;
    cf_release(t, h);
    int rc = sbx_destroy(prov, key, ref, NULL, &err);
    if (!cf_expect_ok(t, rc, &err, "destroy"))
        return;
    sbx_handle *h2 = cf_create(t, prov, key);
    if (!h2)
        return;
    struct sbx_proc_info info;
    for (int i = 0; i < 2 && !cf_failed(t); i++) {
        if (cf_proc_listed(t, h2, p[i].id, &info))
            cf_fail(t, "after destroy and a new create of the same key, proc_list still "
                       "lists process %s (state %u; the processes were pids=%s,%s)",
                    p[i].id, (unsigned)info.state, pids[0], pids[1]);
    }
    for (int i = 0; i < 2 && !cf_failed(t) && can_tell; i++) {
        char *after = NULL;
        for (int tries = 0; tries < 20; tries++) { /* up to 2 s to die */
            free(after);
            after = alive(t, h2, pids[i], tok);
            if (!after || strcmp(after, "alive\n"))
                break;
            cf_sleep_ms(100);
        }
        if (after && !strcmp(after, "alive\n"))
            cf_fail(t, "destroy left a process running: pid %s still runs the command "
                       "of process %s (the processes were pids=%s,%s)",
                    pids[i], p[i].id, pids[0], pids[1]);
        free(after);
    }
    struct cf_proc gone = p[0];
    gone.h = h2;
    gone.out = gone.err = NULL;
    gone.out_len = gone.out_cap = gone.err_len = gone.err_cap = 0;
    if (!cf_failed(t)) {
        rc = cf_proc_read(t, &gone, 0, 0);
        cf_proc_expect_status(t, rc, &gone.err_msg, SBX_E_NOT_FOUND,
                              "proc_read of a process of the destroyed sandbox");
    }
    cf_proc_free(&gone);
}

/* Peak RSS growth allowed while a process floods its output. */
#define FLOOD_GROWTH_MAX_KIB (32 * 1024)

void cf_case_proc_output_flood(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    if (!h)
        return;
    /* as fast as it can, without end, into a 1 MiB buffer */
    const char *argv[] = {"yes", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde",
                          NULL};
    struct sbx_proc_spec s = spec_of(argv);
    s.buffer_bytes = 1 << 20;
    struct cf_proc p;
    bool reset = cf_peak_rss_reset();
    long before = cf_status_kib("VmHWM");
    if (!cf_proc_start(t, h, &p, &s))
        return;
    /* Nobody reads for a second: the buffer must drop, not grow. */
    cf_sleep_ms(1000);
    struct sbx_proc_read_args a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.max_bytes = 1 << 20; /* NULL sinks: the bytes are skipped, still counted */
    struct sbx_proc_read_result r;
    uint64_t cursor = 0, lost = 0, first_lost = 0;
    unsigned reads = 0;
    sbx_error err;
    double end = cf_now() + 1.5;
    while (cf_now() < end) {
        memset(&r, 0, sizeof r);
        r.size = sizeof r;
        a.out_cursor = cursor;
        a.wait_ms = 200;
        int rc = sbx_proc_read(h, p.id, &a, &r, NULL, &err);
        if (!cf_expect_ok(t, rc, &err, "proc_read of a flooding process"))
            break;
        if (!reads++)
            first_lost = r.out_lost;
        lost += r.out_lost;
        cursor = r.out_cursor;
    }
    long after = cf_status_kib("VmHWM");
    sbx_proc_signal(h, p.id, SIGKILL, NULL, &err);
    if (cf_failed(t))
        return cf_proc_free(&p);
    if (before < 0 || after < 0)
        cf_fail(t, "cannot read VmHWM from /proc/self/status");
    else if (after - before > FLOOD_GROWTH_MAX_KIB)
        cf_fail(t, "peak RSS grew by %ld KiB while a process flooded %llu bytes into a "
                   "1 MiB replay buffer (limit %d KiB%s)",
                after - before, (unsigned long long)cursor, FLOOD_GROWTH_MAX_KIB,
                reset ? "" : ", peak could not be reset");
    else if (cursor > (4u << 20) && first_lost == 0)
        cf_fail(t, "%llu bytes written in all, a second without a reader, then the first "
                   "read from cursor 0 lost nothing: the 1 MiB replay buffer kept more "
                   "than 1 MiB",
                (unsigned long long)cursor);
    cf_proc_free(&p);
}
