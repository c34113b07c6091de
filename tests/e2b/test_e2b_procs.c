/*
 * test_e2b_procs.c - processes (with and without a PTY), file operations
 * and exposed ports of the e2b provider (or, built with SBX_TEST_CUBE, of
 * the cube provider) through libsbx against the fake (fake_e2b.py): every
 * op, reattach from a second process after the first was SIGKILLed, output
 * larger than the replay buffer (lost counted exactly), 32 processes at
 * once, another sandbox's id refused, a flooding process with host memory
 * bounded, envd failing under a running process, symlinks planted in the
 * workspace never followed out of it.
 */
#include "fake_service.h"
#include "../support/provider_harness.h"
#include "../support/quiet_port.h"

#include <sbx/sbx.h>

#include <criterion/criterion.h>

#include <curl/curl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef SBX_TEST_CUBE
#define PROV "cube"
#define MODE "cube"
#define KEY NULL
#else
#define PROV "e2b"
#define MODE "e2b"
#define KEY "e2b_test_key_0123"
#endif

static struct fake_service fake;
static char cfgpath[PH_PATH_MAX];
static sbx_ctx *ctx;
static sbx_provider *prov;

static void write_config(const char *extra)
{
#ifdef SBX_TEST_CUBE
    ph_write_config(cfgpath, "/tmp/sbx-e2bp-test-XXXXXX",
                    "providers:\n  cube:\n    api_url: \"%s\"\n    template: tpl\n"
                    "    proxy_address: 127.0.0.1\n    proxy_port: %d\n    retries: 1\n%s",
                    fake.url, fake.port, extra ? extra : "");
#else
    ph_write_config(cfgpath, "/tmp/sbx-e2bp-test-XXXXXX",
                    "providers:\n  e2b:\n    api_url: \"%s\"\n    envd_url: \"%s\"\n"
                    "    domain: e2b.local\n    retries: 1\n%s",
                    fake.url, fake.url, extra ? extra : "");
#endif
}

static int open_ctx(sbx_ctx **c, sbx_provider **p, sbx_error *err)
{
    return ph_open(cfgpath, PROV, true, c, p, err);
}

static void up_with(const char *extra)
{
    cr_assert_eq(fake_start(&fake, MODE, KEY), 0, "cannot start the fake");
    const char *key = KEY;
    if (key)
        setenv("E2B_API_KEY", key, 1);
    write_config(extra);
    sbx_error err;
    cr_assert_eq(open_ctx(&ctx, &prov, &err), SBX_OK, "%s", err.message);
}

static void up(void)
{
    up_with(NULL);
}

static void down(void)
{
    ph_close(&ctx, &prov);
    fake_stop(&fake);
    ph_remove_config(cfgpath);
}

/* A growing buffer sink. */
struct buf {
    char *p;
    size_t len;
};

static int buf_write(void *ctx_, const void *b, size_t n)
{
    struct buf *x = ctx_;
    char *np = realloc(x->p, x->len + n + 1);
    if (!np)
        return SBX_E_NOMEM;
    memcpy(np + x->len, b, n);
    x->p = np;
    x->len += n;
    x->p[x->len] = '\0';
    return 0;
}

static int start(sbx_handle *h, const char *script, uint32_t flags, uint64_t buffer,
                 char id[SBX_PROC_ID_MAX], sbx_error *err)
{
    const char *argv[] = {"sh", "-c", script, NULL};
    struct sbx_proc_spec s;
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    s.flags = flags;
    s.argv = argv;
    s.rows = 30;
    s.cols = 100;
    s.buffer_bytes = buffer;
    return sbx_proc_start(h, &s, id, NULL, err);
}

/* Read from the cursors in res until the end (or timeout_ms). */
static int read_until_eof(sbx_handle *h, const char *id, struct buf *out, struct buf *errb,
                          struct sbx_proc_read_result *res, int timeout_ms, uint64_t *lost,
                          sbx_error *err)
{
    struct sbx_sink so = SBX_SINK_INIT(out, buf_write), se = SBX_SINK_INIT(errb, buf_write);
    time_t end = time(NULL) + timeout_ms / 1000 + 1;
    for (;;) {
        struct sbx_proc_read_args a;
        memset(&a, 0, sizeof a);
        a.size = sizeof a;
        a.wait_ms = 500;
        a.out_cursor = res->out_cursor;
        a.err_cursor = res->err_cursor;
        a.out = out ? &so : NULL;
        a.err = errb ? &se : NULL;
        uint64_t oc = res->out_cursor, ec = res->err_cursor;
        res->size = sizeof *res;
        int rc = sbx_proc_read(h, id, &a, res, NULL, err);
        if (rc != SBX_OK)
            return rc;
        cr_assert_geq(res->out_cursor, oc);
        cr_assert_geq(res->err_cursor, ec);
        if (lost)
            *lost += res->out_lost + res->err_lost;
        if (res->eof)
            return SBX_OK;
        if (time(NULL) > end)
            return SBX_E_TIMEOUT;
    }
}

/* Read stdout until it contains want. */
static void read_until(sbx_handle *h, const char *id, struct buf *out,
                       struct sbx_proc_read_result *res, const char *want)
{
    struct sbx_sink so = SBX_SINK_INIT(out, buf_write);
    time_t end = time(NULL) + 15;
    while (!out->p || !strstr(out->p, want)) {
        struct sbx_proc_read_args a;
        memset(&a, 0, sizeof a);
        a.size = sizeof a;
        a.wait_ms = 500;
        a.out_cursor = res->out_cursor;
        a.err_cursor = res->err_cursor;
        a.out = &so;
        res->size = sizeof *res;
        sbx_error err;
        cr_assert_eq(sbx_proc_read(h, id, &a, res, NULL, &err), SBX_OK, "%s", err.message);
        cr_assert(time(NULL) < end, "no \"%s\" in %s", want, out->p ? out->p : "(nothing)");
        cr_assert(!res->eof || strstr(out->p ? out->p : "", want), "ended without \"%s\": %s",
                  want, out->p ? out->p : "");
    }
}

TestSuite(procs, .init = up, .fini = down, .timeout = 120);

Test(procs, start_read_exit_code_and_both_streams)
{
    sbx_handle *h = ph_create(prov, "p1");
    sbx_error err;
    char id[SBX_PROC_ID_MAX];
    cr_assert_eq(start(h, "echo out; echo err >&2; sleep 0.3; echo more; exit 3", 0, 0, id,
                       &err), SBX_OK, "%s", err.message);
    struct buf o = {0}, e = {0};
    struct sbx_proc_read_result r;
    memset(&r, 0, sizeof r);
    cr_assert_eq(read_until_eof(h, id, &o, &e, &r, 10000, NULL, &err), SBX_OK, "%s",
                 err.message);
    cr_expect_str_eq(o.p, "out\nmore\n");
    cr_expect_str_eq(e.p, "err\n");
    cr_expect_eq(r.state, SBX_PROC_EXITED);
    cr_expect_eq(r.exit_code, 3);
    cr_expect_eq(r.term_signal, 0);
    cr_expect_eq(r.out_cursor, 9);
    cr_expect_eq(r.err_cursor, 4);
    /* Read again at the end: nothing more, still the end. */
    struct buf o2 = {0};
    cr_assert_eq(read_until_eof(h, id, &o2, NULL, &r, 2000, NULL, &err), SBX_OK, "%s",
                 err.message);
    cr_expect_eq(o2.len, 0);
    /* From 0 again: the same bytes (the buffer keeps them). */
    struct sbx_proc_read_result r0;
    memset(&r0, 0, sizeof r0);
    struct buf o3 = {0};
    cr_assert_eq(read_until_eof(h, id, &o3, NULL, &r0, 2000, NULL, &err), SBX_OK, "%s",
                 err.message);
    cr_expect_str_eq(o3.p, "out\nmore\n");
    free(o.p);
    free(e.p);
    free(o3.p);
    sbx_release(h);
}

Test(procs, missing_program_and_bad_cwd)
{
    sbx_handle *h = ph_create(prov, "p2");
    sbx_error err;
    char id[SBX_PROC_ID_MAX];
    const char *argv[] = {"no-such-program-sbx", NULL};
    struct sbx_proc_spec s;
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    s.argv = argv;
    cr_expect_eq(sbx_proc_start(h, &s, id, NULL, &err), SBX_E_NO_COMMAND, "%s", err.message);
    const char *argv2[] = {"true", NULL};
    s.argv = argv2;
    s.cwd = "../..";
    cr_expect_eq(sbx_proc_start(h, &s, id, NULL, &err), SBX_E_INVALID, "%s", err.message);
    sbx_release(h);
}

Test(procs, stdin_written_then_closed)
{
    sbx_handle *h = ph_create(prov, "p3");
    sbx_error err;
    char id[SBX_PROC_ID_MAX];
    cr_assert_eq(start(h, "cat; echo done", 0, 0, id, &err), SBX_OK, "%s", err.message);
    struct buf o = {0};
    struct sbx_proc_read_result r;
    memset(&r, 0, sizeof r);
    cr_assert_eq(sbx_proc_write(h, id, "hello\n", 6, 0, NULL, &err), SBX_OK, "%s", err.message);
    read_until(h, id, &o, &r, "hello\n");
    /* 1 MiB of paste, then EOF. */
    size_t big = 1 << 20;
    char *data = malloc(big);
    for (size_t i = 0; i < big; i++)
        data[i] = (char)('a' + i % 26);
    cr_assert_eq(sbx_proc_write(h, id, data, big, SBX_PROC_WRITE_CLOSE, NULL, &err), SBX_OK,
                 "%s", err.message);
    cr_assert_eq(read_until_eof(h, id, &o, NULL, &r, 20000, NULL, &err), SBX_OK, "%s",
                 err.message);
    cr_assert_eq(o.len, 6 + big + 5);
    cr_expect(memcmp(o.p + 6, data, big) == 0);
    cr_expect_str_eq(o.p + 6 + big, "done\n");
    cr_expect_eq(r.exit_code, 0);
    /* After the end: a write is refused. */
    cr_expect_eq(sbx_proc_write(h, id, "x", 1, 0, NULL, &err), SBX_E_INVALID, "%s",
                 err.message);
    free(data);
    free(o.p);
    sbx_release(h);
}

Test(procs, signal_and_timeout)
{
    sbx_handle *h = ph_create(prov, "p4");
    sbx_error err;
    char id[SBX_PROC_ID_MAX];
    cr_assert_eq(start(h, "sleep 30", 0, 0, id, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(sbx_proc_signal(h, id, 15, NULL, &err), SBX_OK, "%s", err.message);
    struct sbx_proc_read_result r;
    memset(&r, 0, sizeof r);
    cr_assert_eq(read_until_eof(h, id, NULL, NULL, &r, 10000, NULL, &err), SBX_OK, "%s",
                 err.message);
    cr_expect_eq(r.exit_code, -1);
    cr_expect_eq(r.term_signal, 15);
    /* An ended process: SBX_OK, nothing sent. */
    cr_expect_eq(sbx_proc_signal(h, id, 9, NULL, &err), SBX_OK, "%s", err.message);

    const char *argv[] = {"sleep", "30", NULL};
    struct sbx_proc_spec s;
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    s.argv = argv;
    s.timeout_ms = 700;
    cr_assert_eq(sbx_proc_start(h, &s, id, NULL, &err), SBX_OK, "%s", err.message);
    memset(&r, 0, sizeof r);
    cr_assert_eq(read_until_eof(h, id, NULL, NULL, &r, 10000, NULL, &err), SBX_OK, "%s",
                 err.message);
    cr_expect(r.timed_out);
    cr_expect_eq(r.term_signal, 9);
    sbx_release(h);
}

struct listed {
    char ids[64][SBX_PROC_ID_MAX];
    int state[64];
    int code[64];
    int64_t started[64];
    char cmd[64][64];
    int n;
};

static int on_proc(void *c, const struct sbx_proc_info *info)
{
    struct listed *l = c;
    if (l->n < 64) {
        snprintf(l->ids[l->n], SBX_PROC_ID_MAX, "%s", info->id);
        snprintf(l->cmd[l->n], 64, "%s", info->command);
        l->state[l->n] = (int)info->state;
        l->code[l->n] = info->exit_code;
        l->started[l->n] = info->started_ms;
        l->n++;
    }
    return 0;
}

Test(procs, list_in_start_order_with_states)
{
    sbx_handle *h = ph_create(prov, "p5");
    sbx_error err;
    char a[SBX_PROC_ID_MAX], b[SBX_PROC_ID_MAX];
    cr_assert_eq(start(h, "exit 4", 0, 0, a, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(start(h, "sleep 30", 0, 0, b, &err), SBX_OK, "%s", err.message);
    struct sbx_proc_read_result r;
    memset(&r, 0, sizeof r);
    cr_assert_eq(read_until_eof(h, a, NULL, NULL, &r, 10000, NULL, &err), SBX_OK, "%s",
                 err.message);
    struct listed *l = calloc(1, sizeof *l);
    struct sbx_proc_list_sink ls = {sizeof ls, l, on_proc};
    cr_assert_eq(sbx_proc_list(h, &ls, NULL, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(l->n, 2);
    cr_expect_str_eq(l->ids[0], a);
    cr_expect_str_eq(l->ids[1], b);
    cr_expect_eq(l->state[0], SBX_PROC_EXITED);
    cr_expect_eq(l->code[0], 4);
    cr_expect_eq(l->state[1], SBX_PROC_RUNNING);
    cr_expect_str_eq(l->cmd[1], "sh -c sleep 30");
    cr_expect_gt(l->started[0], 1700000000000LL);
    free(l);
    sbx_release(h);
}

/* The PTY: isatty, size, TERM, echo, a resize the program sees, Ctrl-C to
 * the foreground group, Ctrl-D as EOF. */
Test(procs, pty_size_tty_resize_ctrl_c_and_eof)
{
    sbx_handle *h = ph_create(prov, "p6");
    sbx_error err;
    char id[SBX_PROC_ID_MAX];
    cr_assert_eq(start(h,
                       "test -t 0 && test -t 1 && echo TTY; echo TERM=$TERM; stty size; "
                       "trap 'stty size' WINCH; x=; while [ -z \"$x\" ]; do read x; done; echo got:$x; "
                       "trap 'echo INT; exit 7' INT; echo armed; while :; do sleep 0.1; done",
                       SBX_PROC_PTY, 0, id, &err),
                 SBX_OK, "%s", err.message);
    struct buf o = {0};
    struct sbx_proc_read_result r;
    memset(&r, 0, sizeof r);
    read_until(h, id, &o, &r, "30 100");
    cr_expect(strstr(o.p, "TTY"), "%s", o.p);
    cr_expect(strstr(o.p, "TERM=xterm-256color"), "%s", o.p);
    cr_assert_eq(sbx_proc_resize(h, id, 40, 120, NULL, &err), SBX_OK, "%s", err.message);
    read_until(h, id, &o, &r, "40 120");
    cr_assert_eq(sbx_proc_write(h, id, "hello\r", 6, 0, NULL, &err), SBX_OK, "%s", err.message);
    read_until(h, id, &o, &r, "got:hello");
    cr_expect(strstr(o.p, "hello\r\n"), "no echo: %s", o.p); /* the terminal's echo */
    read_until(h, id, &o, &r, "armed");
    cr_assert_eq(sbx_proc_write(h, id, "\003", 1, 0, NULL, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(read_until_eof(h, id, &o, NULL, &r, 10000, NULL, &err), SBX_OK, "%s",
                 err.message);
    cr_expect(strstr(o.p, "INT"), "%s", o.p);
    cr_expect_eq(r.exit_code, 7);
    cr_expect_eq(r.err_cursor, 0); /* one stream */
    free(o.p);

    /* ^D in canonical mode: EOF for cat. */
    cr_assert_eq(start(h, "cat; echo after-eof", SBX_PROC_PTY, 0, id, &err), SBX_OK, "%s",
                 err.message);
    struct buf o2 = {0};
    memset(&r, 0, sizeof r);
    cr_assert_eq(sbx_proc_write(h, id, "line\r", 5, SBX_PROC_WRITE_CLOSE, NULL, &err), SBX_OK,
                 "%s", err.message);
    /* What the terminal showed tells a lost ^D (no after-eof) from a slow
     * end. */
    int eof_rc = read_until_eof(h, id, &o2, NULL, &r, 10000, NULL, &err);
    cr_assert_eq(eof_rc, SBX_OK, "%s; output so far: %s", err.message, o2.p ? o2.p : "");
    cr_expect(strstr(o2.p, "after-eof"), "%s", o2.p);
    /* No PTY: resize refused. */
    cr_assert_eq(start(h, "sleep 5", 0, 0, id, &err), SBX_OK, "%s", err.message);
    cr_expect_eq(sbx_proc_resize(h, id, 10, 10, NULL, &err), SBX_E_INVALID, "%s", err.message);
    sbx_proc_signal(h, id, 9, NULL, &err);
    free(o2.p);
    sbx_release(h);
}

/* seq 1 N's output, for checking what a reader got. */
static char *seq_text(int n, size_t *len)
{
    size_t cap = (size_t)n * 8 + 16, l = 0;
    char *s = malloc(cap);
    for (int i = 1; i <= n; i++)
        l += (size_t)snprintf(s + l, cap - l, "%d\n", i);
    *len = l;
    return s;
}

Test(procs, output_larger_than_the_buffer_lost_exactly_nothing_repeated)
{
    sbx_handle *h = ph_create(prov, "p7");
    sbx_error err;
    char id[SBX_PROC_ID_MAX];
    /* 4 KiB of buffer (1 KiB chunks, 5 kept) for ~108 KiB of output. */
    cr_assert_eq(start(h, "seq 1 20000", 0, 4096, id, &err), SBX_OK, "%s", err.message);
    size_t total;
    char *want = seq_text(20000, &total);
    /* Wait for the end without reading, then read everything kept. */
    struct sbx_proc_read_args a;
    struct sbx_proc_read_result r;
    for (int i = 0; i < 100; i++) {
        memset(&a, 0, sizeof a);
        a.size = sizeof a;
        a.wait_ms = 0;
        a.out_cursor = a.err_cursor = UINT64_MAX / 2; /* beyond: nothing delivered */
        memset(&r, 0, sizeof r);
        r.size = sizeof r;
        int rc = sbx_proc_read(h, id, &a, &r, NULL, &err);
        cr_assert_eq(rc, SBX_OK, "%s", err.message);
        if (r.state == SBX_PROC_EXITED)
            break;
        usleep(100000);
    }
    memset(&r, 0, sizeof r);
    struct buf o = {0};
    uint64_t lost = 0;
    cr_assert_eq(read_until_eof(h, id, &o, NULL, &r, 10000, &lost, &err), SBX_OK, "%s",
                 err.message);
    cr_expect_eq(r.out_cursor, total);
    cr_expect_eq(lost + o.len, total, "lost %llu + got %zu != %zu", (unsigned long long)lost,
                 o.len, total);
    cr_expect_eq(o.len, 4096, "kept %zu bytes of a 4096-byte buffer", o.len);
    cr_expect(memcmp(o.p, want + lost, o.len) == 0, "the bytes kept are not the stream's tail");
    free(o.p);
    free(want);
    sbx_release(h);
}

Test(procs, thirty_two_at_once)
{
    sbx_handle *h = ph_create(prov, "p8");
    sbx_error err;
    char ids[32][SBX_PROC_ID_MAX];
    for (int i = 0; i < 32; i++) {
        char s[64];
        snprintf(s, sizeof s, "echo proc-%d; sleep 1; echo end-%d", i, i);
        cr_assert_eq(start(h, s, 0, 0, ids[i], &err), SBX_OK, "%d: %s", i, err.message);
        for (int j = 0; j < i; j++)
            cr_assert_str_neq(ids[i], ids[j]);
    }
    for (int i = 0; i < 32; i++) {
        struct buf o = {0};
        struct sbx_proc_read_result r;
        memset(&r, 0, sizeof r);
        cr_assert_eq(read_until_eof(h, ids[i], &o, NULL, &r, 20000, NULL, &err), SBX_OK,
                     "%d: %s", i, err.message);
        char want[64];
        snprintf(want, sizeof want, "proc-%d\nend-%d\n", i, i);
        cr_expect_str_eq(o.p, want);
        free(o.p);
    }
    struct listed *l = calloc(1, sizeof *l);
    struct sbx_proc_list_sink ls = {sizeof ls, l, on_proc};
    cr_assert_eq(sbx_proc_list(h, &ls, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect_eq(l->n, 32);
    free(l);
    sbx_release(h);
}

Test(procs, another_sandboxs_id_is_not_found)
{
    sbx_handle *a = ph_create(prov, "p9a");
    sbx_handle *b = ph_create(prov, "p9b");
    sbx_error err;
    char id[SBX_PROC_ID_MAX];
    cr_assert_eq(start(a, "sleep 5", 0, 0, id, &err), SBX_OK, "%s", err.message);
    struct sbx_proc_read_args ra;
    memset(&ra, 0, sizeof ra);
    ra.size = sizeof ra;
    struct sbx_proc_read_result r;
    memset(&r, 0, sizeof r);
    r.size = sizeof r;
    cr_expect_eq(sbx_proc_read(b, id, &ra, &r, NULL, &err), SBX_E_NOT_FOUND, "%s", err.message);
    cr_expect_eq(sbx_proc_signal(b, id, 9, NULL, &err), SBX_E_NOT_FOUND, "%s", err.message);
    cr_expect_eq(sbx_proc_write(b, id, "x", 1, 0, NULL, &err), SBX_E_NOT_FOUND, "%s",
                 err.message);
    /* Well-formed for this sandbox but never made; malformed. */
    char forged[SBX_PROC_ID_MAX];
    snprintf(forged, sizeof forged, "%.8s-0000000000000-00000000-16n17", id);
    cr_expect_eq(sbx_proc_read(a, forged, &ra, &r, NULL, &err), SBX_E_NOT_FOUND, "%s",
                 err.message);
    cr_expect_eq(sbx_proc_read(a, "..", &ra, &r, NULL, &err), SBX_E_NOT_FOUND, "%s",
                 err.message);
    cr_expect_eq(sbx_proc_read(a, "../../etc/passwd", &ra, &r, NULL, &err), SBX_E_INVALID,
                 "%s", err.message);
    struct listed *l = calloc(1, sizeof *l);
    struct sbx_proc_list_sink ls = {sizeof ls, l, on_proc};
    cr_assert_eq(sbx_proc_list(b, &ls, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect_eq(l->n, 0);
    free(l);
    sbx_proc_signal(a, id, 9, NULL, &err);
    sbx_release(a);
    sbx_release(b);
}

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6))
            kb = atol(line + 6);
    if (f)
        fclose(f);
    return kb;
}

static int discard(void *c, const void *b, size_t n)
{
    (void)b;
    *(uint64_t *)c += n;
    return 0;
}

Test(procs, flooding_process_keeps_host_memory_bounded)
{
    sbx_handle *h = ph_create(prov, "p10");
    sbx_error err;
    char id[SBX_PROC_ID_MAX];
    cr_assert_eq(start(h, "yes flood-flood-flood-flood", 0, 256 << 10, id, &err), SBX_OK, "%s",
                 err.message);
    long before = rss_kb();
    uint64_t got = 0, lost = 0;
    struct sbx_sink s = SBX_SINK_INIT(&got, discard);
    struct sbx_proc_read_result r;
    memset(&r, 0, sizeof r);
    time_t end = time(NULL) + 3;
    while (time(NULL) < end) {
        struct sbx_proc_read_args a;
        memset(&a, 0, sizeof a);
        a.size = sizeof a;
        a.wait_ms = 200;
        a.out_cursor = r.out_cursor;
        a.max_bytes = 1 << 20;
        a.out = &s;
        r.size = sizeof r;
        cr_assert_eq(sbx_proc_read(h, id, &a, &r, NULL, &err), SBX_OK, "%s", err.message);
        lost += r.out_lost;
        usleep(300000); /* a slow reader */
    }
    long after = rss_kb();
    cr_expect_gt(got, 0);
    cr_expect_gt(lost, 0, "a slow reader of a flood lost nothing");
    cr_expect_eq(r.out_cursor, got + lost);
    cr_expect_lt(after - before, 8 * 1024, "host RSS grew by %ld KiB", after - before);
    /* The sandbox keeps the bound too: at most keep + 1 chunks. */
    const char *argv[] = {"sh", "-c", "ls /tmp/.sbx-proc/*/ | grep -c '^out\\.[0-9]'", NULL};
    sbx_capture cap;
    sbx_capture_init(&cap, 256, 0);
    struct sbx_sink cs = sbx_capture_sink(&cap);
    struct sbx_exec_args ea;
    memset(&ea, 0, sizeof ea);
    ea.size = sizeof ea;
    ea.argv = argv;
    ea.out = &cs;
    struct sbx_exec_result er;
    memset(&er, 0, sizeof er);
    er.size = sizeof er;
    cr_assert_eq(sbx_exec(h, &ea, &er, NULL, &err), SBX_OK, "%s", err.message);
    char *t = sbx_capture_text(&cap);
    cr_expect_leq(atoi(t), 6, "chunks kept: %s", t);
    free(t);
    sbx_capture_free(&cap);
    cr_assert_eq(sbx_proc_signal(h, id, 9, NULL, &err), SBX_OK, "%s", err.message);
    sbx_release(h);
}

/* A first process starts a command and reads part of it, then is killed
 * with SIGKILL; a second one attaches and continues from the cursor. */
Test(procs, reattach_from_a_second_process_after_sigkill)
{
    sbx_handle *h = ph_create(prov, "p11");
    char ref[256];
    snprintf(ref, sizeof ref, "%s", sbx_handle_ref(h));
    sbx_release(h);
    sbx_close(ctx);
    ctx = NULL;
    int pfd[2];
    cr_assert_eq(pipe(pfd), 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(pfd[0]);
        sbx_ctx *c2;
        sbx_provider *p2;
        sbx_handle *h2;
        sbx_error e2;
        if (open_ctx(&c2, &p2, &e2) != SBX_OK || sbx_attach(p2, "p11", ref, NULL, &h2, &e2))
            _exit(2);
        char id[SBX_PROC_ID_MAX];
        if (start(h2, "i=0; while [ $i -lt 40 ]; do i=$((i+1)); echo line$i; sleep 0.05; done",
                  0, 0, id, &e2) != SBX_OK)
            _exit(3);
        struct buf o = {0};
        struct sbx_sink so = SBX_SINK_INIT(&o, buf_write);
        struct sbx_proc_read_result r;
        memset(&r, 0, sizeof r);
        while (!o.p || !strstr(o.p, "line5\n")) {
            struct sbx_proc_read_args a;
            memset(&a, 0, sizeof a);
            a.size = sizeof a;
            a.wait_ms = 500;
            a.out_cursor = r.out_cursor;
            a.out = &so;
            r.size = sizeof r;
            if (sbx_proc_read(h2, id, &a, &r, NULL, &e2) != SBX_OK)
                _exit(4);
        }
        char msg[512];
        int n = snprintf(msg, sizeof msg, "%s %llu\n", id, (unsigned long long)r.out_cursor);
        if (write(pfd[1], msg, (size_t)n) != n || write(pfd[1], o.p, o.len) != (ssize_t)o.len)
            _exit(5);
        close(pfd[1]);
        pause(); /* killed here, mid-stream */
        _exit(0);
    }
    close(pfd[1]);
    char got[4096];
    size_t gl = 0;
    ssize_t n;
    while (gl < sizeof got - 1 && (n = read(pfd[0], got + gl, sizeof got - 1 - gl)) > 0)
        gl += (size_t)n;
    got[gl] = '\0';
    close(pfd[0]);
    kill(pid, SIGKILL);
    int st;
    waitpid(pid, &st, 0);
    cr_assert(WIFSIGNALED(st), "the first process failed early: %d", WEXITSTATUS(st));
    char id[SBX_PROC_ID_MAX];
    unsigned long long cursor;
    cr_assert_eq(sscanf(got, "%127s %llu", id, &cursor), 2, "%s", got);
    const char *first = strchr(got, '\n') + 1;
    cr_assert_eq(strlen(first), cursor);

    sbx_error err;
    cr_assert_eq(open_ctx(&ctx, &prov, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(sbx_attach(prov, "p11", ref, NULL, &h, &err), SBX_OK, "%s", err.message);
    struct buf rest = {0};
    struct sbx_proc_read_result r;
    memset(&r, 0, sizeof r);
    r.out_cursor = cursor;
    cr_assert_eq(read_until_eof(h, id, &rest, NULL, &r, 20000, NULL, &err), SBX_OK, "%s",
                 err.message);
    size_t wl = 0;
    char want[1024];
    for (int i = 1; i <= 40; i++)
        wl += (size_t)snprintf(want + wl, sizeof want - wl, "line%d\n", i);
    cr_assert_eq(strlen(first) + rest.len, wl);
    cr_expect(memcmp(want, first, strlen(first)) == 0);
    cr_expect(memcmp(want + strlen(first), rest.p, rest.len) == 0, "%s", rest.p);
    free(rest.p);
    sbx_release(h);
}

Test(procs, destroy_kills_every_process)
{
    sbx_handle *h = ph_create(prov, "p12");
    sbx_error err;
    char id[SBX_PROC_ID_MAX];
    cr_assert_eq(start(h, "exec sleep 300", 0, 0, id, &err), SBX_OK, "%s", err.message);
    char ref[256];
    snprintf(ref, sizeof ref, "%s", sbx_handle_ref(h));
    sbx_release(h);
    cr_assert_eq(sbx_destroy(prov, "p12", ref, NULL, &err), SBX_OK, "%s", err.message);
    /* No process of the sandbox is left on the fake's machine. */
    char cmd[256];
    snprintf(cmd, sizeof cmd, "sleep 0.3; grep -l 'E2B_SANDBOX_ID=%s' /proc/[0-9]*/environ "
                              "2>/dev/null | wc -l", strchr(ref, ':') + 1);
    FILE *p = popen(cmd, "r");
    int left = -1;
    cr_assert(fscanf(p, "%d", &left) == 1);
    pclose(p);
    cr_expect_eq(left, 0, "%d processes of the sandbox survived destroy", left);
}

TestSuite(procs_faults, .init = up, .fini = down, .timeout = 120);

Test(procs_faults, envd_failing_under_a_running_process_is_a_clear_error)
{
    sbx_handle *h = ph_create(prov, "f1");
    sbx_error err;
    char id[SBX_PROC_ID_MAX];
    cr_assert_eq(start(h, "sleep 30", 0, 0, id, &err), SBX_OK, "%s", err.message);
    struct sbx_proc_read_args a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.wait_ms = 200;
    struct sbx_proc_read_result r;
    memset(&r, 0, sizeof r);
    r.size = sizeof r;
    /* 5xx from envd's file service. */
    cr_assert_eq(fake_faults(&fake, "[{\"match\": \"/files\", \"kind\": \"status\", "
                                    "\"status\": 503, \"times\": 20}]"), 0);
    int rc = sbx_proc_read(h, id, &a, &r, NULL, &err);
    cr_expect_eq(rc, SBX_E_UNAVAILABLE, "%d %s", rc, err.message);
    cr_expect(strstr(err.message, "proc_read"), "%s", err.message);
    free(fake_http(&fake, "POST", "/_fake/reset", "{}", NULL, NULL));
    cr_assert_eq(sbx_proc_read(h, id, &a, &r, NULL, &err), SBX_OK, "%s", err.message);
    /* The sandbox vanished. */
    cr_assert_eq(fake_faults(&fake, "[{\"match\": \"/files\", \"kind\": \"vanish\"}]"), 0);
    rc = sbx_proc_read(h, id, &a, &r, NULL, &err);
    cr_expect_eq(rc, SBX_E_NOT_FOUND, "%d %s", rc, err.message);
    sbx_release(h);
}

Test(procs_faults, envd_killed_mid_wait_ends_without_a_hang)
{
    sbx_handle *h = ph_create(prov, "f2");
    sbx_error err;
    char id[SBX_PROC_ID_MAX];
    cr_assert_eq(start(h, "sleep 30", 0, 0, id, &err), SBX_OK, "%s", err.message);
    pid_t fpid = fake.pid;
    pid_t k = fork();
    if (k == 0) {
        usleep(500000);
        kill(fpid, SIGKILL);
        _exit(0);
    }
    struct sbx_proc_read_args a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.wait_ms = 10000;
    struct sbx_proc_read_result r;
    memset(&r, 0, sizeof r);
    r.size = sizeof r;
    time_t t0 = time(NULL);
    int rc = sbx_proc_read(h, id, &a, &r, NULL, &err);
    waitpid(k, NULL, 0);
    cr_expect_neq(rc, SBX_OK);
    cr_expect(sbx_status_is_transient(rc) || rc == SBX_E_NOT_FOUND, "%d %s", rc, err.message);
    cr_expect_leq(time(NULL) - t0, 8, "the read hung");
    sbx_release(h);
}

/* Chunk answers cut half-way (and a broken proxy's HTML 500): errors, and
 * what the caller got before them is never repeated afterwards. */
Test(procs_faults, cut_chunk_answers_deliver_nothing_twice)
{
    sbx_handle *h = ph_create(prov, "f3");
    sbx_error err;
    char id[SBX_PROC_ID_MAX];
    cr_assert_eq(start(h, "seq 1 30000; seq 1 5000 >&2", 0, 0, id, &err), SBX_OK, "%s",
                 err.message);
    struct sbx_proc_read_result r;
    memset(&r, 0, sizeof r);
    cr_assert_eq(read_until_eof(h, id, NULL, NULL, &r, 10000, NULL, &err), SBX_OK, "%s",
                 err.message); /* ended: every byte is recorded */
    memset(&r, 0, sizeof r);
    cr_assert_eq(fake_faults(&fake, "[{\"match\": \"/files\", \"kind\": \"cut\", "
                                    "\"times\": 6}]"), 0);
    struct buf o = {0}, e = {0};
    struct sbx_sink so = SBX_SINK_INIT(&o, buf_write), se = SBX_SINK_INIT(&e, buf_write);
    int failures = 0, rounds = 0;
    while (!r.eof && rounds++ < 200) {
        struct sbx_proc_read_args a;
        memset(&a, 0, sizeof a);
        a.size = sizeof a;
        a.out_cursor = r.out_cursor;
        a.err_cursor = r.err_cursor;
        a.max_bytes = 20000;
        a.out = &so;
        a.err = &se;
        struct sbx_proc_read_result n;
        memset(&n, 0, sizeof n);
        n.size = sizeof n;
        int rc = sbx_proc_read(h, id, &a, &n, NULL, &err);
        if (rc != SBX_OK) {
            cr_expect(rc == SBX_E_PROTOCOL || sbx_status_is_transient(rc), "%d %s", rc,
                      err.message);
            failures++;
            continue; /* the caller retries from the same cursors */
        }
        cr_expect_eq(n.out_lost + n.err_lost, 0);
        r = n;
    }
    cr_expect_gt(failures, 0, "no read met the cut answers");
    size_t ol, el;
    char *wo = seq_text(30000, &ol), *we = seq_text(5000, &el);
    cr_assert_eq(o.len, ol, "stdout: %zu bytes, want %zu", o.len, ol);
    cr_assert_eq(e.len, el, "stderr: %zu bytes, want %zu", e.len, el);
    cr_expect(memcmp(o.p, wo, ol) == 0, "stdout repeated or lost bytes");
    cr_expect(memcmp(e.p, we, el) == 0, "stderr repeated or lost bytes");
    /* A broken proxy in between: a clear error. */
    cr_assert_eq(fake_faults(&fake, "[{\"match\": \"/files\", \"kind\": \"status\", "
                                    "\"status\": 500, \"times\": 20, \"body\": "
                                    "\"<html>bad gateway</html>\"}]"), 0);
    struct sbx_proc_read_args a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    memset(&r, 0, sizeof r);
    r.size = sizeof r;
    int rc = sbx_proc_read(h, id, &a, &r, NULL, &err);
    cr_expect_eq(rc, SBX_E_UNAVAILABLE, "%d %s", rc, err.message);
    free(wo);
    free(we);
    free(o.p);
    free(e.p);
    sbx_release(h);
}

/* ---- file operations ------------------------------------------------ */

static int sh(sbx_handle *h, const char *script)
{
    const char *argv[] = {"sh", "-c", script, NULL};
    struct sbx_exec_args a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.argv = argv;
    a.timeout_ms = 60000;
    struct sbx_exec_result r;
    memset(&r, 0, sizeof r);
    r.size = sizeof r;
    sbx_error err;
    cr_assert_eq(sbx_exec(h, &a, &r, NULL, &err), SBX_OK, "%s", err.message);
    return r.exit_code;
}

struct names {
    int n, dirs, links, files;
    char seen[16][64];
    uint32_t mode[16];
    uint64_t bytes[16];
    int64_t mtime[16];
};

static int on_entry(void *c, const struct sbx_file_info *fi)
{
    struct names *n = c;
    if (n->n < 16) {
        snprintf(n->seen[n->n], 64, "%s", fi->name);
        n->mode[n->n] = fi->mode;
        n->bytes[n->n] = fi->bytes;
        n->mtime[n->n] = fi->mtime_ns;
    }
    n->n++;
    n->dirs += fi->type == SBX_FILE_DIR;
    n->links += fi->type == SBX_FILE_SYMLINK;
    n->files += fi->type == SBX_FILE_REGULAR;
    return 0;
}

static int find_name(const struct names *n, const char *name)
{
    for (int i = 0; i < n->n && i < 16; i++)
        if (!strcmp(n->seen[i], name))
            return i;
    return -1;
}

TestSuite(fileops, .init = up, .fini = down, .timeout = 120);

Test(fileops, list_stat_mkdir_remove_rename)
{
    sbx_handle *h = ph_create(prov, "fo1");
    sbx_error err;
    cr_assert_eq(sh(h, "mkdir -p d/sub && printf 12345 > d/f && chmod 640 d/f && "
                       "ln -s f d/l && touch -d @1700000000.5 d/f"), 0);
    struct names n = {0};
    struct sbx_file_list_sink ls = {sizeof ls, &n, on_entry};
    cr_assert_eq(sbx_file_list(h, "d", &ls, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect_eq(n.n, 3);
    cr_expect_eq(n.dirs, 1);
    cr_expect_eq(n.links, 1);
    cr_expect_eq(n.files, 1);
    int fi = find_name(&n, "f");
    cr_assert_geq(fi, 0);
    cr_expect_eq(n.mode[fi], 0640);
    cr_expect_eq(n.bytes[fi], 5);
    cr_expect_eq(n.mtime[fi], 1700000000500000000LL);
    /* stat: the file, a directory, the symlink as itself, the root. */
    struct sbx_file_info st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    cr_assert_eq(sbx_file_stat(h, "d/f", &st, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect_eq(st.type, SBX_FILE_REGULAR);
    cr_expect_eq(st.bytes, 5);
    cr_expect_eq(st.mode, 0640);
    cr_expect_eq(st.mtime_ns / 1000000, 1700000000500LL);
    cr_assert_eq(sbx_file_stat(h, "d/l", &st, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect_eq(st.type, SBX_FILE_SYMLINK);
    cr_assert_eq(sbx_file_stat(h, "", &st, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect_eq(st.type, SBX_FILE_DIR);
    cr_expect_eq(sbx_file_stat(h, "d/none", &st, NULL, &err), SBX_E_NOT_FOUND, "%s",
                 err.message);
    /* list of a file or a missing path. */
    cr_expect_eq(sbx_file_list(h, "d/f", &ls, NULL, &err), SBX_E_INVALID, "%s", err.message);
    cr_expect_eq(sbx_file_list(h, "nothing", &ls, NULL, &err), SBX_E_NOT_FOUND, "%s",
                 err.message);
    /* mkdir: mode, parents, existing. */
    cr_assert_eq(sbx_file_mkdir(h, "m", 0700, 0, NULL, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(sbx_file_stat(h, "m", &st, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect_eq(st.mode, 0700);
    cr_expect_eq(sbx_file_mkdir(h, "m", 0, 0, NULL, &err), SBX_E_EXISTS, "%s", err.message);
    cr_expect_eq(sbx_file_mkdir(h, "m", 0, SBX_MKDIR_PARENTS, NULL, &err), SBX_OK, "%s",
                 err.message);
    cr_expect_eq(sbx_file_mkdir(h, "d/f", 0, SBX_MKDIR_PARENTS, NULL, &err), SBX_E_EXISTS,
                 "%s", err.message);
    cr_expect_eq(sbx_file_mkdir(h, "x/y/z", 0, 0, NULL, &err), SBX_E_NOT_FOUND, "%s",
                 err.message);
    cr_assert_eq(sbx_file_mkdir(h, "x/y/z", 0, SBX_MKDIR_PARENTS, NULL, &err), SBX_OK, "%s",
                 err.message);
    cr_assert_eq(sbx_file_stat(h, "x/y", &st, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect_eq(st.mode, 0755);
    cr_expect_eq(sbx_file_mkdir(h, "q", 01777, 0, NULL, &err), SBX_E_INVALID, "%s",
                 err.message);
    /* rename: replace, noreplace, missing. */
    cr_assert_eq(sh(h, "echo a > ra && echo b > rb"), 0);
    cr_expect_eq(sbx_file_rename(h, "ra", "rb", SBX_RENAME_NOREPLACE, NULL, &err),
                 SBX_E_EXISTS, "%s", err.message);
    cr_assert_eq(sbx_file_rename(h, "ra", "rb", 0, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect_eq(sh(h, "[ ! -e ra ] && [ \"$(cat rb)\" = a ]"), 0);
    cr_expect_eq(sbx_file_rename(h, "ra", "rc", 0, NULL, &err), SBX_E_NOT_FOUND, "%s",
                 err.message);
    cr_assert_eq(sbx_file_rename(h, "x", "d/x2", 0, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect_eq(sh(h, "[ -d d/x2/y/z ]"), 0);
    /* remove: non-empty needs recursive; root refused; missing. */
    cr_expect_eq(sbx_file_remove(h, "d", 0, NULL, &err), SBX_E_EXISTS, "%s", err.message);
    cr_assert_eq(sbx_file_remove(h, "d/l", 0, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect_eq(sh(h, "[ -f d/f ] && [ ! -L d/l ]"), 0);
    cr_assert_eq(sbx_file_remove(h, "d", SBX_REMOVE_RECURSIVE, NULL, &err), SBX_OK, "%s",
                 err.message);
    cr_expect_eq(sh(h, "[ ! -e d ]"), 0);
    cr_expect_eq(sbx_file_remove(h, "d", 0, NULL, &err), SBX_E_NOT_FOUND, "%s", err.message);
    cr_expect_eq(sbx_file_remove(h, "", SBX_REMOVE_RECURSIVE, NULL, &err), SBX_E_INVALID, "%s",
                 err.message);
    cr_expect_eq(sbx_file_remove(h, "../..", SBX_REMOVE_RECURSIVE, NULL, &err), SBX_E_INVALID,
                 "%s", err.message);
    sbx_release(h);
}

Test(fileops, symlinks_out_of_the_workspace_are_never_followed)
{
    sbx_handle *h = ph_create(prov, "fo2");
    sbx_error err;
    /* Outside the workspace but inside the sandbox: a tree to protect. */
    cr_assert_eq(sh(h, "mkdir -p /tmp/outside/keep && echo secret > /tmp/outside/keep/s && "
                       "ln -s /tmp/outside out && ln -s ../.. up && mkdir in && "
                       "ln -s /tmp/outside/keep in/deep"), 0);
    struct names n = {0};
    struct sbx_file_list_sink ls = {sizeof ls, &n, on_entry};
    cr_expect_eq(sbx_file_list(h, "out", &ls, NULL, &err), SBX_E_INVALID, "%s", err.message);
    cr_expect_eq(sbx_file_list(h, "out/keep", &ls, NULL, &err), SBX_E_INVALID, "%s",
                 err.message);
    cr_expect_eq(sbx_file_list(h, "up", &ls, NULL, &err), SBX_E_INVALID, "%s", err.message);
    cr_expect_eq(sbx_file_list(h, "in/deep", &ls, NULL, &err), SBX_E_INVALID, "%s",
                 err.message);
    cr_expect_eq(n.n, 0);
    struct sbx_file_info st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    cr_assert_eq(sbx_file_stat(h, "out", &st, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect_eq(st.type, SBX_FILE_SYMLINK);
    cr_expect_eq(sbx_file_stat(h, "out/keep/s", &st, NULL, &err), SBX_E_INVALID, "%s",
                 err.message);
    cr_expect_eq(sbx_file_mkdir(h, "out/new", 0, 0, NULL, &err), SBX_E_INVALID, "%s",
                 err.message);
    cr_expect_eq(sbx_file_mkdir(h, "out/a/b", 0, SBX_MKDIR_PARENTS, NULL, &err), SBX_E_INVALID,
                 "%s", err.message);
    cr_expect_eq(sbx_file_remove(h, "out/keep", SBX_REMOVE_RECURSIVE, NULL, &err),
                 SBX_E_INVALID, "%s", err.message);
    cr_expect_eq(sbx_file_remove(h, "in/deep/s", 0, NULL, &err), SBX_E_INVALID, "%s",
                 err.message);
    cr_expect_eq(sbx_file_rename(h, "out/keep/s", "stolen", 0, NULL, &err), SBX_E_INVALID,
                 "%s", err.message);
    cr_expect_eq(sbx_file_rename(h, "in", "out/in", 0, NULL, &err), SBX_E_INVALID, "%s",
                 err.message);
    /* Removing the link removes the link, not what it points to. */
    cr_assert_eq(sbx_file_remove(h, "out", SBX_REMOVE_RECURSIVE, NULL, &err), SBX_OK, "%s",
                 err.message);
    cr_assert_eq(sbx_file_remove(h, "in", SBX_REMOVE_RECURSIVE, NULL, &err), SBX_OK, "%s",
                 err.message);
    cr_expect_eq(sh(h, "[ \"$(cat /tmp/outside/keep/s)\" = secret ]"), 0,
                 "the tree outside was touched");
    sbx_release(h);
}

static int count_only(void *c, const struct sbx_file_info *fi)
{
    (void)fi;
    (*(long *)c)++;
    return 0;
}

Test(fileops, wide_directory_listed_in_bounded_memory)
{
    sbx_handle *h = ph_create(prov, "fo3");
    sbx_error err;
    cr_assert_eq(sh(h, "mkdir wide && cd wide && seq -f 'entry-with-a-long-name-%06g' 1 20000 "
                       "| xargs touch"), 0);
    long before = rss_kb(), count = 0;
    struct sbx_file_list_sink ls = {sizeof ls, &count, count_only};
    cr_assert_eq(sbx_file_list(h, "wide", &ls, NULL, &err), SBX_OK, "%s", err.message);
    long after = rss_kb();
    cr_expect_eq(count, 20000);
    cr_expect_lt(after - before, 4 * 1024, "RSS grew by %ld KiB", after - before);
    sbx_release(h);
}

/* ---- ports ---------------------------------------------------------- */

static size_t collect(char *d, size_t sz, size_t n, void *c)
{
    struct buf *b = c;
    buf_write(b, d, sz * n);
    return sz * n;
}

TestSuite(ports, .init = up, .fini = down, .timeout = 120);

Test(ports, declared_port_resolves_to_the_service_url_and_is_reachable)
{
    /* A port free on this machine for the sandbox's server. */
    int port = quiet_port();
    cr_assert(port > 0, "no free loopback port below the ephemeral range");
    uint16_t ports[] = {(uint16_t)port, 0};
    sbx_handle *h = ph_create_ports(prov, "pt1", ports);
    sbx_error err;
    struct sbx_port_endpoint ep;
    memset(&ep, 0, sizeof ep);
    ep.size = sizeof ep;
    cr_assert_eq(sbx_port_resolve(h, (unsigned)port, &ep, NULL, &err), SBX_OK, "%s",
                 err.message);
    const char *sid = strchr(sbx_handle_ref(h), ':') + 1;
    char host[300];
    snprintf(host, sizeof host, "%d-%s.e2b.local", port, sid);
    /* Through the one configured address (CubeProxy's proxy_address, e2b's
     * envd_url), the sandbox's port named in Host. */
    cr_expect_str_eq(ep.host, "127.0.0.1");
    cr_expect_eq(ep.port, fake.port);
    cr_expect_eq(ep.tls, 0);
    cr_expect_str_eq(ep.url, fake.url);
    char hh[320];
    snprintf(hh, sizeof hh, "Host: %s", host);
    cr_expect_str_eq(ep.header, hh);
    cr_expect_eq(sbx_port_resolve(h, 1234, &ep, NULL, &err), SBX_E_NOT_FOUND, "%s",
                 err.message);
    /* Serve something on the port inside the sandbox and reach it. */
    char id[SBX_PROC_ID_MAX], script[256];
    snprintf(script, sizeof script,
             "echo hello-from-the-sandbox > index.txt; exec python3 -m http.server %d "
             "--bind 127.0.0.1",
             port);
    cr_assert_eq(start(h, script, 0, 0, id, &err), SBX_OK, "%s", err.message);
    memset(&ep, 0, sizeof ep);
    ep.size = sizeof ep;
    cr_assert_eq(sbx_port_resolve(h, (unsigned)port, &ep, NULL, &err), SBX_OK, "%s",
                 err.message);
    struct buf body = {0};
    long code = 0;
    /* the server is starting (up to 30 s: python3 under load) */
    for (time_t until = time(NULL) + 30; code != 200 && time(NULL) < until;) {
        CURL *c = curl_easy_init();
        char target[1200];
        struct curl_slist *hs = NULL;
        snprintf(target, sizeof target, "%s/index.txt", ep.url);
        hs = curl_slist_append(hs, ep.header);
        curl_easy_setopt(c, CURLOPT_URL, target);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, hs);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
        free(body.p);
        body.p = NULL;
        body.len = 0;
        if (curl_easy_perform(c) == CURLE_OK)
            curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
        curl_easy_cleanup(c);
        curl_slist_free_all(hs);
        if (code != 200)
            usleep(100000);
    }
    cr_expect_eq(code, 200);
    cr_expect(body.p && strstr(body.p, "hello-from-the-sandbox"), "%s", body.p);
    free(body.p);
    sbx_proc_signal(h, id, 9, NULL, &err);
    /* A later attach knows the ports. */
    char ref[256];
    snprintf(ref, sizeof ref, "%s", sbx_handle_ref(h));
    sbx_release(h);
    cr_assert_eq(sbx_attach(prov, "pt1", ref, NULL, &h, &err), SBX_OK, "%s", err.message);
    cr_expect_eq(sbx_port_resolve(h, (unsigned)port, &ep, NULL, &err), SBX_OK, "%s",
                 err.message);
    cr_expect_eq(sbx_port_resolve(h, (unsigned)port + 1, &ep, NULL, &err), SBX_E_NOT_FOUND);
    sbx_release(h);
}
