/*
 * cases_pty.c - SBX_CAP_PTY (ABI 1.2): a process on a pseudo-terminal is
 * on a terminal of the size asked for, sees a resize, gets SIGINT from ^C
 * and EOF from ^D through the line discipline, and takes a 1 MiB paste
 * whole in raw mode.
 *
 * Terminal output has "\r\n" line ends; the helpers ignore carriage
 * returns when they look for text.
 */
#include "cf_internal.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Scripts that need a terminal end at once, saying so, without one. */
#define TTY_GUARD "[ -t 0 ] || { echo not-a-terminal; exit 3; }; "

static bool start_pty(struct cf_test *t, sbx_handle *h, struct cf_proc *p,
                      const char *script, uint16_t rows, uint16_t cols)
{
    const char *argv[] = {"sh", "-c", script, NULL};
    struct sbx_proc_spec s;
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    s.flags = SBX_PROC_PTY;
    s.argv = argv;
    s.rows = rows;
    s.cols = cols;
    return cf_proc_start(t, h, p, &s);
}

void cf_case_pty_terminal(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    struct cf_proc p;
    if (!h || !start_pty(t, h, &p,
                         "if [ -t 0 ] && [ -t 1 ] && [ -t 2 ]; then echo tty=yes; "
                         "else echo tty=no; fi; stty size; echo \"term=$TERM.\"; "
                         "echo to-stderr >&2",
                         30, 100))
        return;
    char q[300];
    if (cf_proc_until_eof(t, &p, 10)) {
        if (!cf_proc_out_has(&p, "tty=yes\n"))
            cf_fail(t, "on a PTY, stdin, stdout and stderr are not all terminals: %s",
                    cf_quote(p.out, p.out_len, q, sizeof q));
        else if (!cf_proc_out_has(&p, "\n30 100\n"))
            cf_fail(t, "a PTY of 30 rows and 100 columns: `stty size` printed %s",
                    cf_quote(p.out, p.out_len, q, sizeof q));
        else if (cf_proc_out_has(&p, "term=.") || !cf_proc_out_has(&p, "term="))
            cf_fail(t, "TERM is not set on a PTY: %s", cf_quote(p.out, p.out_len, q, sizeof q));
        else if (p.err_cursor != 0)
            cf_fail(t, "on a PTY all output is one stream: stderr went to its own stream "
                       "(%llu bytes)",
                    (unsigned long long)p.err_cursor);
        else if (!cf_proc_out_has(&p, "to-stderr\n"))
            cf_fail(t, "what the program wrote to stderr on a PTY is missing from the "
                       "terminal's output: %s",
                    cf_quote(p.out, p.out_len, q, sizeof q));
    }
    cf_proc_free(&p);
    /* 0 x 0 is 24 x 80 */
    if (!cf_failed(t) && start_pty(t, h, &p, "stty size", 0, 0) &&
        cf_proc_until_eof(t, &p, 10) && !cf_proc_out_has(&p, "24 80\n"))
        cf_fail(t, "a PTY without a size: `stty size` printed %s; want 24 80",
                cf_quote(p.out, p.out_len, q, sizeof q));
    cf_proc_free(&p);
}

void cf_case_pty_resize(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    struct cf_proc p;
    /* The program reports its size when SIGWINCH arrives. */
    if (!h || !start_pty(t, h, &p,
                         TTY_GUARD "trap 'echo; echo \"size=$(stty size)\"' WINCH; echo ready; "
                         "i=0; while [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done",
                         24, 80))
        return;
    sbx_error err;
    if (cf_proc_until_text(t, &p, "ready\n", 10)) {
        int rc = sbx_proc_resize(h, p.id, 40, 120, NULL, &err);
        if (cf_expect_ok(t, rc, &err, "proc_resize to 40x120"))
            cf_proc_until_text(t, &p, "size=40 120\n", 5);
    }
    sbx_proc_signal(h, p.id, SIGKILL, NULL, &err);
    cf_proc_free(&p);
    /* A process without a terminal has no size. */
    if (!cf_failed(t) && cf_proc_sh(t, h, &p, "sleep 30", 0)) {
        int rc = sbx_proc_resize(h, p.id, 40, 120, NULL, &err);
        cf_proc_expect_status(t, rc, &err, SBX_E_INVALID,
                              "proc_resize of a process without a PTY");
        sbx_proc_signal(h, p.id, SIGKILL, NULL, &err);
        cf_proc_free(&p);
    }
}

void cf_case_pty_ctrl_c(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    struct cf_proc p;
    if (!h || !start_pty(t, h, &p, TTY_GUARD "echo ready; exec sleep 30", 24, 80))
        return;
    sbx_error err;
    double t0 = 0;
    if (cf_proc_until_text(t, &p, "ready\n", 10)) {
        cf_sleep_ms(100); /* the exec into sleep */
        int rc = sbx_proc_write(h, p.id, "\x03", 1, 0, NULL, &err);
        t0 = cf_now();
        if (cf_expect_ok(t, rc, &err, "proc_write of ^C") && cf_proc_until_eof(t, &p, 5) &&
            p.res.term_signal != SIGINT && p.res.exit_code != 130)
            cf_fail(t, "^C on the terminal: the foreground sleep ended with exit_code %d, "
                       "term_signal %d; want SIGINT (2)",
                    p.res.exit_code, p.res.term_signal);
        else if (!cf_failed(t) && cf_now() - t0 > cf_bound(3))
            cf_fail(t, "^C took %.2f s to end the foreground job", cf_now() - t0);
    }
    sbx_proc_signal(h, p.id, SIGKILL, NULL, &err);
    cf_proc_free(&p);
}

void cf_case_pty_eof(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    struct cf_proc p;
    sbx_error err;
    char q[200];
    /* ^D typed at the start of a line */
    if (!h || !start_pty(t, h, &p, TTY_GUARD "echo ready; cat; echo cat-done", 24, 80))
        return;
    if (cf_proc_until_text(t, &p, "ready\n", 10)) {
        int rc = sbx_proc_write(h, p.id, "abc\n\x04", 5, 0, NULL, &err);
        if (cf_expect_ok(t, rc, &err, "proc_write of abc, newline, ^D") &&
            cf_proc_until_eof(t, &p, 5) &&
            (!cf_proc_out_has(&p, "abc\nabc\ncat-done\n") || p.res.exit_code != 0))
            cf_fail(t, "cat on a terminal given \"abc\\n^D\": output %s, exit code %d; want "
                       "the echo, cat's copy, then cat ending at ^D",
                    cf_quote(p.out, p.out_len, q, sizeof q), p.res.exit_code);
    }
    sbx_proc_signal(h, p.id, SIGKILL, NULL, &err);
    cf_proc_free(&p);
    /* SBX_PROC_WRITE_CLOSE is the terminal's EOF */
    if (cf_failed(t) || !start_pty(t, h, &p, TTY_GUARD "echo ready; cat; echo cat-done", 24, 80))
        return;
    if (cf_proc_until_text(t, &p, "ready\n", 10)) {
        int rc = sbx_proc_write(h, p.id, "xyz\n", 4, SBX_PROC_WRITE_CLOSE, NULL, &err);
        if (cf_expect_ok(t, rc, &err, "proc_write with SBX_PROC_WRITE_CLOSE") &&
            cf_proc_until_eof(t, &p, 5) && !cf_proc_out_has(&p, "xyz\ncat-done\n"))
            cf_fail(t, "cat on a terminal after SBX_PROC_WRITE_CLOSE: output %s; want cat "
                       "ended by EOF",
                    cf_quote(p.out, p.out_len, q, sizeof q));
    }
    sbx_proc_signal(h, p.id, SIGKILL, NULL, &err);
    cf_proc_free(&p);
}

void cf_case_pty_paste(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    struct cf_proc p;
    enum { TOTAL = 1 << 20, CHUNK = 65536 };
    if (!h || !start_pty(t, h, &p,
                         "stty raw -echo && echo ready && head -c 1048576 > paste.bin; "
                         "echo got; wc -c < paste.bin",
                         24, 80))
        return;
    sbx_error err;
    char *buf = malloc(CHUNK);
    if (!buf)
        return (void)cf_fail(t, "out of memory");
    /* printable bytes, so that nothing depends on what raw mode passes */
    for (size_t i = 0; i < CHUNK; i++)
        buf[i] = (char)('a' + (i * 7 + i / 26) % 26);
    if (cf_proc_until_text(t, &p, "ready\n", 10)) {
        for (int off = 0; off < TOTAL && !cf_failed(t); off += CHUNK) {
            int rc = sbx_proc_write(h, p.id, buf, CHUNK, 0, NULL, &err);
            cf_expect_ok(t, rc, &err, "proc_write of a 1 MiB paste in 64 KiB pieces");
        }
        if (!cf_failed(t) && cf_proc_until_text(t, &p, "got\n", 20) &&
            cf_proc_until_eof(t, &p, 10) && !cf_proc_out_has(&p, "1048576")) {
            char q[200];
            cf_fail(t, "a 1 MiB paste on a raw terminal: wc -c printed %s",
                    cf_quote(p.out, p.out_len, q, sizeof q));
        }
    }
    /* and it is the bytes pasted, in order */
    if (!cf_failed(t)) {
        sbx_capture c;
        sbx_capture_init(&c, TOTAL + 16, 0);
        struct sbx_sink sink = sbx_capture_sink(&c);
        int rc = sbx_read(h, "paste.bin", &sink, NULL, &err);
        if (cf_expect_ok(t, rc, &err, "read paste.bin")) {
            size_t bad = c.head_len;
            for (size_t i = 0; i < c.head_len && bad == c.head_len; i++)
                if (c.head[i] != buf[i % CHUNK])
                    bad = i;
            if (c.head_len != TOTAL || bad != c.head_len)
                cf_fail(t, "the pasted 1 MiB arrived as %zu bytes, first difference at %zu",
                        c.head_len, bad);
        }
        sbx_capture_free(&c);
    }
    free(buf);
    sbx_proc_signal(h, p.id, SIGKILL, NULL, &err);
    cf_proc_free(&p);
}
