/*
 * test_daytona_procs.c - the daytona provider's ABI 1.2 operations through
 * libsbx against the fake (fake_daytona.py): processes (output and exit,
 * stdin and its close, signals, timeouts, output past the replay buffer
 * with the lost count exact, 32 at once, a flooding writer with host
 * memory bounded, reattach from a second process after the first was
 * SIGKILLed, another session's ids refused, the toolbox failing under a
 * running process), PTYs (size, tty, resize seen by the program, ^C,
 * EOF), file operations (list streamed, stat, mkdir, remove, rename,
 * symlinks never followed out) and ports (preview link and token,
 * undeclared ports refused, the link reaching a server in the sandbox).
 */
#include "fake_daytona.h"
#include "../support/provider_harness.h"
#include "../support/quiet_port.h"

#include <sbx/sbx.h>

#include <criterion/criterion.h>

#include <curl/curl.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define KEY "dt_test_key_0123"

/* Under AddressSanitizer freed memory stays in its quarantine, so RSS says
 * nothing about what the code keeps: the RSS bounds hold elsewhere. */
#if defined(__SANITIZE_ADDRESS__)
#define RSS_CHECKED 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RSS_CHECKED 0
#endif
#endif
#ifndef RSS_CHECKED
#define RSS_CHECKED 1
#endif

static struct fake_service fake;
static char cfgpath[PH_PATH_MAX];
static sbx_ctx *ctx;
static sbx_provider *prov;

static void up(void)
{
    cr_assert_eq(fake_daytona_start(&fake, KEY), 0, "cannot start the fake");
    setenv("DAYTONA_API_KEY", KEY, 1);
}

static void close_ctx(void)
{
    ph_close(&ctx, &prov);
}

static void down(void)
{
    close_ctx();
    ph_remove_config(cfgpath);
    fake_stop(&fake);
}

static int open_ctx(const char *extra, sbx_error *err)
{
    ph_write_config(cfgpath, "/tmp/sbx-dtp-test-XXXXXX",
                    "providers:\n  daytona:\n    api_url: \"%s/api\"\n    retries: 2\n%s",
                    fake.url, extra ? extra : "");
    return ph_open(cfgpath, "daytona", true, &ctx, &prov, err);
}

static sbx_handle *setup(const char *key)
{
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    return ph_create(prov, key);
}

/* ---- process helpers ----------------------------------------------------- */

static int start(sbx_handle *h, uint32_t flags, const char *script, uint64_t buffer,
                 int64_t timeout_ms, char id[SBX_PROC_ID_MAX], sbx_error *err)
{
    const char *argv[] = {"sh", "-c", script, NULL};
    struct sbx_proc_spec s;
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    s.flags = flags;
    s.argv = argv;
    s.buffer_bytes = buffer;
    s.timeout_ms = timeout_ms;
    s.rows = 30;
    s.cols = 100;
    return sbx_proc_start(h, &s, id, NULL, err);
}

struct buf {
    char *p;
    size_t len, cap;
};

static int buf_write(void *bctx, const void *data, size_t len)
{
    struct buf *b = bctx;
    if (b->len + len + 1 > b->cap) {
        b->cap = (b->len + len + 1) * 2;
        b->p = realloc(b->p, b->cap);
        cr_assert_not_null(b->p);
    }
    memcpy(b->p + b->len, data, len);
    b->len += len;
    b->p[b->len] = '\0';
    return 0;
}

struct drained {
    struct buf out, err;
    struct sbx_proc_read_result res;
    uint64_t lost;
    int reads;
};

/* Read until eof (or until `until` appears in stdout, when given), within
 * limit_ms. */
static int drain(sbx_handle *h, const char *id, struct drained *d, const char *until,
                 int limit_ms, sbx_error *err)
{
    struct sbx_sink so = SBX_SINK_INIT(&d->out, buf_write);
    struct sbx_sink se = SBX_SINK_INIT(&d->err, buf_write);
    uint64_t oc = d->res.out_cursor, ec = d->res.err_cursor;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;; d->reads++) {
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if ((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 > limit_ms)
            break;
        struct sbx_proc_read_args a = {sizeof a, 500, oc, ec, 0, &so, &se};
        memset(&d->res, 0, sizeof d->res);
        d->res.size = sizeof d->res;
        int rc = sbx_proc_read(h, id, &a, &d->res, NULL, err);
        if (rc != SBX_OK)
            return rc;
        d->lost += d->res.out_lost + d->res.err_lost;
        oc = d->res.out_cursor;
        ec = d->res.err_cursor;
        if (d->res.eof || (until && d->out.p && strstr(d->out.p, until)))
            return SBX_OK;
    }
    return SBX_E_TIMEOUT;
}

static void drained_free(struct drained *d)
{
    free(d->out.p);
    free(d->err.p);
}

TestSuite(daytona_procs, .init = up, .fini = down, .timeout = 120);

Test(daytona_procs, output_apart_and_exit_code)
{
    sbx_handle *h = setup("procs-basic");
    sbx_error err;
    char id[SBX_PROC_ID_MAX];
    cr_assert_eq(start(h, 0, "echo out; echo err >&2; exit 3", 0, 0, id, &err), SBX_OK, "%s",
                 err.message);
    struct drained d = {0};
    cr_assert_eq(drain(h, id, &d, NULL, 20000, &err), SBX_OK, "%s", err.message);
    cr_expect_str_eq(d.out.p, "out\n");
    cr_expect_str_eq(d.err.p, "err\n");
    cr_expect_eq(d.res.state, SBX_PROC_EXITED);
    cr_expect_eq(d.res.exit_code, 3);
    cr_expect_eq(d.res.out_cursor, 4);
    cr_expect_eq(d.lost, 0);
    /* read again from 0: the same bytes, eof at once */
    struct drained d2 = {0};
    cr_assert_eq(drain(h, id, &d2, NULL, 5000, &err), SBX_OK, "%s", err.message);
    cr_expect_str_eq(d2.out.p, "out\n");
    cr_expect_eq(d2.reads, 0);
    drained_free(&d);
    drained_free(&d2);
    /* a missing program: 127, as exec */
    const char *argv[] = {"no-such-program-xyz", NULL};
    struct sbx_proc_spec s = {.size = sizeof s, .argv = argv};
    cr_assert_eq(sbx_proc_start(h, &s, id, NULL, &err), SBX_OK, "%s", err.message);
    struct drained d3 = {0};
    cr_assert_eq(drain(h, id, &d3, NULL, 20000, &err), SBX_OK, "%s", err.message);
    cr_expect_eq(d3.res.exit_code, 127);
    drained_free(&d3);
    sbx_release(h);
}

Test(daytona_procs, stdin_written_and_closed)
{
    sbx_handle *h = setup("procs-stdin");
    sbx_error err;
    char id[SBX_PROC_ID_MAX];
    cr_assert_eq(start(h, 0, "cat; echo done", 0, 0, id, &err), SBX_OK, "%s", err.message);
    /* 1 MiB of binary stdin, in two writes, then the close */
    size_t n = 1 << 20;
    unsigned char *data = malloc(n);
    for (size_t i = 0; i < n; i++)
        data[i] = (unsigned char)(i * 31 + (i >> 11));
    cr_assert_eq(sbx_proc_write(h, id, data, n / 2, 0, NULL, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(sbx_proc_write(h, id, data + n / 2, n - n / 2, SBX_PROC_WRITE_CLOSE, NULL, &err),
                 SBX_OK, "%s", err.message);
    cr_expect_eq(sbx_proc_write(h, id, "x", 1, 0, NULL, &err), SBX_E_INVALID,
                 "a write after the close");
    struct drained d = {0};
    cr_assert_eq(drain(h, id, &d, NULL, 60000, &err), SBX_OK, "%s", err.message);
    cr_expect_eq(d.out.len, n + 5);
    cr_expect(d.out.len == n + 5 && memcmp(d.out.p, data, n) == 0, "stdin came back changed");
    cr_expect_eq(d.res.exit_code, 0);
    cr_expect_eq(sbx_proc_write(h, id, "x", 1, 0, NULL, &err), SBX_E_INVALID,
                 "a write after the end");
    free(data);
    drained_free(&d);
    sbx_release(h);
}

Test(daytona_procs, output_past_the_buffer_lost_exactly)
{
    sbx_handle *h = setup("procs-lost");
    sbx_error err;
    char id[SBX_PROC_ID_MAX];
    /* 1 MiB through a 64 KiB replay buffer; byte i is "0123456789abcdef\n"[i % 17] */
    const size_t total = 1 << 20;
    cr_assert_eq(start(h, 0, "yes 0123456789abcdef | head -c 1048576", 65536, 0, id, &err), SBX_OK,
                 "%s", err.message);
    /* wait for the end without reading */
    struct sbx_proc_read_result r;
    for (int i = 0; i < 100; i++) {
        struct sbx_proc_read_args a = {sizeof a, 200, total, 0, 1, NULL, NULL};
        memset(&r, 0, sizeof r);
        r.size = sizeof r;
        cr_assert_eq(sbx_proc_read(h, id, &a, &r, NULL, &err), SBX_OK, "%s", err.message);
        if (r.eof)
            break;
    }
    cr_assert(r.eof, "the writer did not end");
    struct drained d = {0};
    cr_assert_eq(drain(h, id, &d, NULL, 30000, &err), SBX_OK, "%s", err.message);
    cr_expect_eq(d.res.out_cursor, total);
    cr_expect_eq(d.lost + d.out.len, total, "lost %llu + got %zu != %zu",
                 (unsigned long long)d.lost, d.out.len, total);
    cr_expect_eq(d.out.len, 65536, "kept %zu bytes, not the last 64 KiB", d.out.len);
    static const char pat[] = "0123456789abcdef\n";
    size_t bad = 0;
    for (size_t i = 0; i < d.out.len; i++)
        bad += d.out.p[i] != pat[(d.lost + i) % 17];
    cr_expect_eq(bad, 0, "%zu bytes are not where the cursor says", bad);
    drained_free(&d);
    sbx_release(h);
}

Test(daytona_procs, signal_timeout_and_list)
{
    sbx_handle *h = setup("procs-signal");
    sbx_error err;
    char a[SBX_PROC_ID_MAX], b[SBX_PROC_ID_MAX];
    cr_assert_eq(start(h, 0, "sleep 30", 0, 0, a, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(start(h, 0, "sleep 30", 0, 400, b, &err), SBX_OK, "%s", err.message);
    cr_expect_eq(sbx_proc_signal(h, a, 999, NULL, &err), SBX_E_INVALID);
    cr_assert_eq(sbx_proc_signal(h, a, 15, NULL, &err), SBX_OK, "%s", err.message);
    struct drained d = {0}, e = {0};
    cr_assert_eq(drain(h, a, &d, NULL, 20000, &err), SBX_OK, "%s", err.message);
    cr_expect_eq(d.res.term_signal, 15);
    cr_expect_eq(d.res.exit_code, -1);
    cr_assert_eq(drain(h, b, &e, NULL, 20000, &err), SBX_OK, "%s", err.message);
    cr_expect(e.res.timed_out, "timeout not reported");
    cr_expect_eq(e.res.term_signal, 9);
    /* an ended process: signalling it is fine */
    cr_expect_eq(sbx_proc_signal(h, a, 9, NULL, &err), SBX_OK, "%s", err.message);
    drained_free(&d);
    drained_free(&e);
    sbx_release(h);
}

struct ids {
    char id[40][SBX_PROC_ID_MAX];
    char cmd[40][64];
    int n, state[40];
};

static int list_entry(void *lctx, const struct sbx_proc_info *info)
{
    struct ids *v = lctx;
    if (v->n < 40) {
        snprintf(v->id[v->n], SBX_PROC_ID_MAX, "%s", info->id);
        snprintf(v->cmd[v->n], 64, "%s", info->command);
        v->state[v->n] = (int)info->state;
        v->n++;
    }
    return 0;
}

Test(daytona_procs, thirty_two_at_once_and_listed_in_order)
{
    sbx_handle *h = setup("procs-32");
    sbx_error err;
    static char ids[32][SBX_PROC_ID_MAX];
    for (int i = 0; i < 32; i++) {
        char s[64];
        snprintf(s, sizeof s, "echo p%d; sleep 1", i);
        cr_assert_eq(start(h, 0, s, 0, 0, ids[i], &err), SBX_OK, "%d: %s", i, err.message);
    }
    struct ids v = {0};
    struct sbx_proc_list_sink ls = {sizeof ls, &v, list_entry};
    cr_assert_eq(sbx_proc_list(h, &ls, NULL, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(v.n, 32);
    for (int i = 0; i < 32; i++)
        cr_expect_str_eq(v.id[i], ids[i], "list order at %d", i);
    cr_expect(strstr(v.cmd[0], "echo p0"), "command %s", v.cmd[0]);
    for (int i = 0; i < 32; i++) {
        struct drained d = {0};
        cr_assert_eq(drain(h, ids[i], &d, NULL, 30000, &err), SBX_OK, "%s", err.message);
        char want[16];
        snprintf(want, sizeof want, "p%d\n", i);
        cr_expect_str_eq(d.out.p, want);
        drained_free(&d);
    }
    sbx_release(h);
}

Test(daytona_procs, ids_of_another_session_or_made_up_are_not_found)
{
    sbx_handle *h = setup("procs-mine");
    sbx_handle *o = ph_create(prov, "procs-other");
    sbx_error err;
    char id[SBX_PROC_ID_MAX];
    cr_assert_eq(start(o, 0, "sleep 5", 0, 0, id, &err), SBX_OK, "%s", err.message);
    struct sbx_proc_read_args a = {sizeof a, 0, 0, 0, 0, NULL, NULL};
    struct sbx_proc_read_result r = {.size = sizeof r};
    cr_expect_eq(sbx_proc_read(h, id, &a, &r, NULL, &err), SBX_E_NOT_FOUND, "%s", err.message);
    cr_expect_eq(sbx_proc_signal(h, id, 9, NULL, &err), SBX_E_NOT_FOUND);
    cr_expect_eq(sbx_proc_write(h, id, "x", 1, 0, NULL, &err), SBX_E_NOT_FOUND);
    /* this session's prefix, a session that does not exist */
    char forged[SBX_PROC_ID_MAX];
    char mine[SBX_PROC_ID_MAX];
    cr_assert_eq(start(h, 0, "true", 0, 0, mine, &err), SBX_OK, "%s", err.message);
    snprintf(forged, sizeof forged, "%s", mine);
    memcpy(forged + 13, "000000000000", 12);
    cr_expect_eq(sbx_proc_read(h, forged, &a, &r, NULL, &err), SBX_E_NOT_FOUND, "%s",
                 err.message);
    cr_expect_eq(sbx_proc_read(h, "not-an-id", &a, &r, NULL, &err), SBX_E_NOT_FOUND);
    /* the other session still lists only its own */
    struct ids v = {0};
    struct sbx_proc_list_sink ls = {sizeof ls, &v, list_entry};
    cr_assert_eq(sbx_proc_list(o, &ls, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect_eq(v.n, 1);
    sbx_proc_signal(o, id, 9, NULL, &err);
    sbx_release(o);
    sbx_release(h);
}

Test(daytona_procs, flood_keeps_host_memory_bounded)
{
    sbx_handle *h = setup("procs-flood");
    sbx_error err;
    char id[SBX_PROC_ID_MAX];
    cr_assert_eq(start(h, 0, "exec yes flooding-the-replay-buffer", 0, 0, id, &err), SBX_OK,
                 "%s", err.message);
    usleep(500 * 1000);
    uint64_t oc = 0, got = 0, lost = 0;
    long rss0 = 0, rss1 = 0;
    for (int i = 0; i < 30; i++) {
        struct buf b = {0};
        struct sbx_sink so = SBX_SINK_INIT(&b, buf_write);
        struct sbx_proc_read_args a = {sizeof a, 100, oc, 0, 0, &so, NULL};
        struct sbx_proc_read_result r = {.size = sizeof r};
        cr_assert_eq(sbx_proc_read(h, id, &a, &r, NULL, &err), SBX_OK, "%s", err.message);
        cr_expect_leq(b.len, 64 * 1024, "a read returned %zu bytes", b.len);
        got += b.len;
        lost += r.out_lost;
        cr_expect_eq(r.out_cursor, oc + r.out_lost + b.len);
        oc = r.out_cursor;
        free(b.p);
        FILE *f = fopen("/proc/self/statm", "r");
        long pages = 0, res = 0;
        if (f && fscanf(f, "%ld %ld", &pages, &res) == 2) {
            if (i == 5)
                rss0 = res;
            rss1 = res;
        }
        if (f)
            fclose(f);
    }
    cr_expect_gt(lost, 0, "a flood faster than the reads lost nothing?");
    cr_expect(!RSS_CHECKED || (rss1 - rss0) * 4096 < (8L << 20), "host RSS grew by %ld KiB",
                 (rss1 - rss0) * 4);
    cr_assert_eq(sbx_proc_signal(h, id, 9, NULL, &err), SBX_OK, "%s", err.message);
    sbx_release(h);
}

/* A second sbx process reattaches to a process the first started, after
 * the first was killed with SIGKILL mid-stream, and continues from the
 * cursor it had. */
Test(daytona_procs, reattach_after_sigkill)
{
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    sbx_handle *h = ph_create(prov, "procs-reattach");
    char ref[SBX_REF_MAX];
    snprintf(ref, sizeof ref, "%s", sbx_handle_ref(h));
    sbx_release(h);
    close_ctx();
    int pfd[2];
    cr_assert_eq(pipe(pfd), 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(pfd[0]);
        sbx_handle *c = NULL;
        if (open_ctx(NULL, &err) != SBX_OK ||
            sbx_attach(prov, "procs-reattach", ref, NULL, &c, &err) != SBX_OK)
            _exit(2);
        char id[SBX_PROC_ID_MAX];
        if (start(c, 0, "i=0; while [ $i -lt 40 ]; do echo line$i; i=$((i+1)); sleep 0.05; done",
                  0, 0, id, &err) != SBX_OK)
            _exit(3);
        /* read a little, report id and cursor, then wait to be killed */
        struct buf b = {0};
        struct sbx_sink so = SBX_SINK_INIT(&b, buf_write);
        struct sbx_proc_read_args a = {sizeof a, 2000, 0, 0, 0, &so, NULL};
        struct sbx_proc_read_result r = {.size = sizeof r};
        if (sbx_proc_read(c, id, &a, &r, NULL, &err) != SBX_OK)
            _exit(4);
        char msg[256];
        int n = snprintf(msg, sizeof msg, "%s %llu\n", id, (unsigned long long)r.out_cursor);
        if (write(pfd[1], msg, (size_t)n) != n)
            _exit(5);
        for (;;)
            pause();
    }
    close(pfd[1]);
    char msg[256] = {0};
    ssize_t got = read(pfd[0], msg, sizeof msg - 1);
    close(pfd[0]);
    kill(pid, SIGKILL);
    int st;
    waitpid(pid, &st, 0);
    cr_assert_gt(got, 0, "the first process reported nothing (status %d)", st);
    char id[SBX_PROC_ID_MAX];
    unsigned long long cur = 0;
    cr_assert_eq(sscanf(msg, "%127s %llu", id, &cur), 2);
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    sbx_handle *h2 = NULL;
    cr_assert_eq(sbx_attach(prov, "procs-reattach", ref, NULL, &h2, &err), SBX_OK, "%s",
                 err.message);
    struct ids v = {0};
    struct sbx_proc_list_sink ls = {sizeof ls, &v, list_entry};
    cr_assert_eq(sbx_proc_list(h2, &ls, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect_eq(v.n, 1);
    cr_expect_str_eq(v.id[0], id);
    struct drained d = {0};
    d.res.out_cursor = cur;
    cr_assert_eq(drain(h2, id, &d, NULL, 30000, &err), SBX_OK, "%s", err.message);
    /* the rest, from the cursor on: no line repeated, none missing */
    struct drained all = {0};
    cr_assert_eq(drain(h2, id, &all, NULL, 5000, &err), SBX_OK, "%s", err.message);
    cr_expect_eq(cur + d.out.len, all.out.len);
    cr_expect(all.out.len >= cur && !strcmp(all.out.p + cur, d.out.p), "the continuation differs");
    cr_expect(strstr(all.out.p, "line39\n"), "output incomplete");
    drained_free(&d);
    drained_free(&all);
    sbx_release(h2);
}

Test(daytona_procs, toolbox_failures_under_a_running_process)
{
    sbx_handle *h = setup("procs-faults");
    sbx_error err;
    char id[SBX_PROC_ID_MAX];
    cr_assert_eq(start(h, 0, "sleep 20", 0, 0, id, &err), SBX_OK, "%s", err.message);
    /* the toolbox answers 502 to the read's session */
    fake_faults(&fake, "[{\"match\":\"/toolbox/process/session\",\"kind\":\"status\","
                            "\"status\":502,\"times\":20}]");
    struct sbx_proc_read_args a = {sizeof a, 200, 0, 0, 0, NULL, NULL};
    struct sbx_proc_read_result r = {.size = sizeof r};
    int rc = sbx_proc_read(h, id, &a, &r, NULL, &err);
    cr_expect_neq(rc, SBX_OK);
    cr_expect(strstr(err.message, "proc_read") || strstr(err.message, "502") ||
                  strstr(err.message, "session"),
              "%s", err.message);
    free(fake_http(&fake, "POST", "/_fake/reset", "", NULL, NULL));
    /* a JSON answer cut in the middle: a clear error, no hang */
    fake_faults(&fake, "[{\"match\":\"/toolbox/process/session\",\"kind\":\"truncate\","
                       "\"method\":\"POST\",\"times\":1}]");
    rc = sbx_proc_read(h, id, &a, &r, NULL, &err);
    cr_expect_neq(rc, SBX_OK, "a truncated answer was taken");
    cr_expect(err.message[0], "no message");
    cr_log_info("truncated answer: %s", err.message);
    free(fake_http(&fake, "POST", "/_fake/reset", "", NULL, NULL));
    /* and the process is still there to read */
    cr_expect_eq(sbx_proc_read(h, id, &a, &r, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect_eq(r.state, SBX_PROC_RUNNING);
    /* a toolbox that stops answering: the request timeout ends the read */
    fake_faults(&fake, "[{\"match\":\"/toolbox/process/session\",\"kind\":\"slow\","
                            "\"delay_ms\":4000,\"times\":1}]");
    close_ctx();
    cr_assert_eq(open_ctx("    request_timeout_ms: 1000\n", &err), SBX_OK, "%s",
                 err.message);
    sbx_handle *h2 = ph_create(prov, "procs-faults");
    rc = sbx_proc_read(h2, id, &a, &r, NULL, &err);
    cr_expect_neq(rc, SBX_OK, "a frozen toolbox answered?");
    free(fake_http(&fake, "POST", "/_fake/reset", "", NULL, NULL));
    /* the sandbox gone under the process: NOT_FOUND, named */
    fake_faults(&fake, "[{\"match\":\"/toolbox/process\",\"kind\":\"vanish\",\"times\":1}]");
    rc = sbx_proc_read(h2, id, &a, &r, NULL, &err);
    cr_expect_eq(rc, SBX_E_NOT_FOUND, "%d %s", rc, err.message);
    cr_expect(strstr(err.message, "no longer exists"), "%s", err.message);
    sbx_release(h2);
    sbx_release(h);
}

/* ---- PTY ------------------------------------------------------------------ */

Test(daytona_procs, pty_size_tty_input_resize_ctrl_c_and_eof)
{
    sbx_handle *h = setup("procs-pty");
    sbx_error err;
    char id[SBX_PROC_ID_MAX];
    cr_assert_eq(start(h, SBX_PROC_PTY,
                       "stty size; tty; [ -t 0 ] && echo isatty; echo TERM=$TERM; "
                       "trap 'stty size' WINCH; read x; echo got:$x; "
                       "while :; do sleep 0.05; done",
                       0, 0, id, &err),
                 SBX_OK, "%s", err.message);
    struct drained d = {0};
    cr_assert_eq(drain(h, id, &d, "TERM=", 20000, &err), SBX_OK, "%s", err.message);
    cr_expect(strstr(d.out.p, "30 100"), "size: %s", d.out.p);
    cr_expect(strstr(d.out.p, "/dev/pts/"), "tty: %s", d.out.p);
    cr_expect(strstr(d.out.p, "isatty"), "%s", d.out.p);
    cr_expect(strstr(d.out.p, "TERM=xterm-256color"), "%s", d.out.p);
    cr_assert_eq(sbx_proc_write(h, id, "hello\n", 6, 0, NULL, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(drain(h, id, &d, "got:hello", 20000, &err), SBX_OK, "%s", err.message);
    cr_expect(strstr(d.out.p, "hello\r\n"), "no echo: %s", d.out.p);
    cr_assert_eq(sbx_proc_resize(h, id, 40, 120, NULL, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(drain(h, id, &d, "40 120", 20000, &err), SBX_OK, "resize not seen: %s",
                 d.out.p);
    /* ^C reaches the foreground group through the line discipline */
    cr_assert_eq(sbx_proc_write(h, id, "\x03", 1, 0, NULL, &err), SBX_OK, "%s", err.message);
    int drc = drain(h, id, &d, NULL, 20000, &err);
    cr_assert_eq(drc, SBX_OK, "%d %s: %s", drc, err.message, d.out.p);
    cr_expect_eq(d.res.term_signal, 2, "exit %d signal %d", d.res.exit_code, d.res.term_signal);
    cr_expect_eq(d.res.err_cursor, 0, "a PTY has one stream");
    drained_free(&d);
    /* a resize of a process without a terminal */
    char plain[SBX_PROC_ID_MAX];
    cr_assert_eq(start(h, 0, "true", 0, 0, plain, &err), SBX_OK, "%s", err.message);
    cr_expect_eq(sbx_proc_resize(h, plain, 10, 10, NULL, &err), SBX_E_INVALID);
    /* EOF: the close is the terminal's ^D */
    cr_assert_eq(start(h, SBX_PROC_PTY, "cat; echo cat-ended", 0, 0, id, &err), SBX_OK, "%s",
                 err.message);
    cr_assert_eq(sbx_proc_write(h, id, "abc\n", 4, SBX_PROC_WRITE_CLOSE, NULL, &err), SBX_OK,
                 "%s", err.message);
    struct drained e = {0};
    cr_assert_eq(drain(h, id, &e, NULL, 20000, &err), SBX_OK, "%s", err.message);
    cr_expect(strstr(e.out.p, "cat-ended"), "%s", e.out.p);
    cr_expect_eq(e.res.exit_code, 0);
    drained_free(&e);
    sbx_release(h);
}

/* ---- file operations ------------------------------------------------------ */

static int run(sbx_handle *h, const char *script)
{
    const char *argv[] = {"sh", "-c", script, NULL};
    struct sbx_exec_args a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.argv = argv;
    a.timeout_ms = 20000;
    struct sbx_exec_result res = {.size = sizeof res};
    sbx_error err;
    cr_assert_eq(sbx_exec(h, &a, &res, NULL, &err), SBX_OK, "%s", err.message);
    return res.exit_code;
}

struct names {
    int n, dirs, links, files;
    char first[5][64];
    uint32_t mode_of_f;
    uint64_t size_of_f;
};

static int name_entry(void *nctx, const struct sbx_file_info *fi)
{
    struct names *v = nctx;
    if (v->n < 5)
        snprintf(v->first[v->n], 64, "%s", fi->name);
    v->n++;
    v->dirs += fi->type == SBX_FILE_DIR;
    v->links += fi->type == SBX_FILE_SYMLINK;
    v->files += fi->type == SBX_FILE_REGULAR;
    if (!strcmp(fi->name, "f")) {
        v->mode_of_f = fi->mode;
        v->size_of_f = fi->bytes;
    }
    return 0;
}

Test(daytona_procs, file_ops_and_symlinks_never_followed_out)
{
    sbx_handle *h = setup("files-ops");
    sbx_error err;
    cr_assert_eq(run(h, "mkdir -p d/sub && printf 12345 > d/f && chmod 640 d/f && "
                        "ln -s /etc d/out && ln -s f d/in && ln -s /etc esc"),
                 0);
    struct names v = {0};
    struct sbx_file_list_sink ls = {sizeof ls, &v, name_entry};
    cr_assert_eq(sbx_file_list(h, "d", &ls, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect_eq(v.n, 4);
    cr_expect_eq(v.dirs, 1);
    cr_expect_eq(v.links, 2, "symlinks listed as themselves");
    cr_expect_eq(v.files, 1);
    cr_expect_eq(v.mode_of_f, 0640);
    cr_expect_eq(v.size_of_f, 5);
    /* through a symlink out of the workspace: refused */
    struct names w = {0};
    struct sbx_file_list_sink lw = {sizeof lw, &w, name_entry};
    cr_expect_eq(sbx_file_list(h, "esc", &lw, NULL, &err), SBX_E_INVALID, "%s", err.message);
    cr_expect_eq(sbx_file_list(h, "esc/ssl", &lw, NULL, &err), SBX_E_INVALID, "%s", err.message);
    cr_expect_eq(sbx_file_list(h, "d/out/", &lw, NULL, &err), SBX_E_INVALID, "%s", err.message);
    cr_expect_eq(sbx_file_stat(h, "d/out/.", &(struct sbx_file_info){.size = sizeof(struct sbx_file_info)},
                               NULL, &err),
                 SBX_E_INVALID, "a trailing /. follows the symlink: %s", err.message);
    cr_expect_eq(w.n, 0, "something of /etc was listed");
    cr_expect_eq(sbx_file_list(h, "../", &lw, NULL, &err), SBX_E_INVALID);
    cr_expect_eq(sbx_file_list(h, "/etc", &lw, NULL, &err), SBX_E_INVALID);
    cr_expect_eq(sbx_file_list(h, "nope", &lw, NULL, &err), SBX_E_NOT_FOUND);
    cr_expect_eq(sbx_file_list(h, "d/f", &lw, NULL, &err), SBX_E_INVALID);
    /* stat: the link itself */
    struct sbx_file_info fi = {.size = sizeof fi};
    cr_assert_eq(sbx_file_stat(h, "d/out", &fi, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect_eq(fi.type, SBX_FILE_SYMLINK);
    cr_assert_eq(sbx_file_stat(h, "d/f", &fi, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect_eq(fi.type, SBX_FILE_REGULAR);
    cr_expect_eq(fi.bytes, 5);
    cr_expect_gt(fi.mtime_ns, (int64_t)1600000000 * 1000000000LL);
    cr_expect_eq(sbx_file_stat(h, "esc/passwd", &fi, NULL, &err), SBX_E_INVALID);
    cr_expect_eq(sbx_file_stat(h, "d/none", &fi, NULL, &err), SBX_E_NOT_FOUND);
    /* mkdir */
    cr_expect_eq(sbx_file_mkdir(h, "m/n/o", 0700, 0, NULL, &err), SBX_E_NOT_FOUND);
    cr_assert_eq(sbx_file_mkdir(h, "m/n/o", 0700, SBX_MKDIR_PARENTS, NULL, &err), SBX_OK, "%s",
                 err.message);
    cr_assert_eq(sbx_file_stat(h, "m/n/o", &fi, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect_eq(fi.mode, 0700);
    cr_assert_eq(sbx_file_stat(h, "m", &fi, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect_eq(fi.mode, 0755, "parents are 0755: %o", fi.mode);
    cr_expect_eq(sbx_file_mkdir(h, "m", 0, 0, NULL, &err), SBX_E_EXISTS);
    cr_expect_eq(sbx_file_mkdir(h, "m", 0, SBX_MKDIR_PARENTS, NULL, &err), SBX_OK);
    cr_expect_eq(sbx_file_mkdir(h, "d/f", 0, SBX_MKDIR_PARENTS, NULL, &err), SBX_E_EXISTS);
    cr_expect_eq(sbx_file_mkdir(h, "esc/x", 0, 0, NULL, &err), SBX_E_INVALID);
    cr_expect_eq(sbx_file_mkdir(h, "q", 01777, 0, NULL, &err), SBX_E_INVALID);
    /* rename */
    cr_assert_eq(sbx_file_rename(h, "d/f", "d/g", 0, NULL, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(run(h, "printf new > d/h"), 0);
    cr_expect_eq(sbx_file_rename(h, "d/g", "d/h", SBX_RENAME_NOREPLACE, NULL, &err),
                 SBX_E_EXISTS);
    cr_assert_eq(sbx_file_rename(h, "d/g", "d/h", 0, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect_eq(run(h, "[ \"$(cat d/h)\" = 12345 ] && [ ! -e d/g ]"), 0, "replaced");
    cr_expect_eq(sbx_file_rename(h, "d/none", "d/x", 0, NULL, &err), SBX_E_NOT_FOUND);
    cr_expect_eq(sbx_file_rename(h, "d/h", "esc/h", 0, NULL, &err), SBX_E_INVALID);
    /* a symlink is renamed as itself */
    cr_assert_eq(sbx_file_rename(h, "d/out", "d/out2", 0, NULL, &err), SBX_OK, "%s",
                 err.message);
    cr_expect_eq(run(h, "[ -L d/out2 ] && [ -e /etc/passwd ]"), 0);
    /* remove */
    cr_expect_eq(sbx_file_remove(h, "d", 0, NULL, &err), SBX_E_EXISTS);
    cr_expect_eq(sbx_file_remove(h, "", SBX_REMOVE_RECURSIVE, NULL, &err), SBX_E_INVALID);
    cr_expect_eq(sbx_file_remove(h, "esc/passwd", 0, NULL, &err), SBX_E_INVALID);
    cr_assert_eq(sbx_file_remove(h, "esc", 0, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect_eq(run(h, "[ ! -e esc ] && [ ! -L esc ] && [ -e /etc/passwd ]"), 0);
    cr_assert_eq(sbx_file_remove(h, "m/n/o", 0, NULL, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(sbx_file_remove(h, "d", SBX_REMOVE_RECURSIVE, NULL, &err), SBX_OK, "%s",
                 err.message);
    cr_expect_eq(run(h, "[ ! -e d ] && [ -e /etc/passwd ]"), 0, "the tree (and only it) went");
    cr_expect_eq(sbx_file_remove(h, "d", 0, NULL, &err), SBX_E_NOT_FOUND);
    sbx_release(h);
}

Test(daytona_procs, wide_directory_listed_streamed)
{
    sbx_handle *h = setup("files-wide");
    sbx_error err;
    cr_assert_eq(run(h, "mkdir w && cd w && i=0; while [ $i -lt 3000 ]; do "
                        ": > entry-with-a-longer-name-$i; i=$((i+1)); done"),
                 0);
    long rss0 = 0, rss1 = 0, pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    cr_assert(f && fscanf(f, "%ld %ld", &pages, &rss0) == 2);
    fclose(f);
    struct names v = {0};
    struct sbx_file_list_sink ls = {sizeof ls, &v, name_entry};
    cr_assert_eq(sbx_file_list(h, "w", &ls, NULL, &err), SBX_OK, "%s", err.message);
    f = fopen("/proc/self/statm", "r");
    cr_assert(f && fscanf(f, "%ld %ld", &pages, &rss1) == 2);
    fclose(f);
    cr_expect_eq(v.n, 3000);
    cr_expect_eq(v.files, 3000);
    cr_expect(!RSS_CHECKED || (rss1 - rss0) * 4096 < (4L << 20), "RSS grew %ld KiB",
              (rss1 - rss0) * 4);
    sbx_release(h);
}

/* ---- ports ---------------------------------------------------------------- */

static size_t body_keep(char *p, size_t sz, size_t n, void *ud)
{
    struct buf *b = ud;
    buf_write(b, p, sz * n);
    return sz * n;
}

Test(daytona_procs, ports_preview_link_and_token)
{
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    int port = quiet_port();
    cr_assert(port > 0, "no free loopback port below the ephemeral range");
    uint16_t ports[] = {(uint16_t)port, 0};
    sbx_handle *h = ph_create_ports(prov, "ports-one", ports);
    struct sbx_port_endpoint ep = {.size = sizeof ep};
    cr_expect_eq(sbx_port_resolve(h, 3001, &ep, NULL, &err), SBX_E_NOT_FOUND);
    cr_assert_eq(sbx_port_resolve(h, (unsigned)port, &ep, NULL, &err), SBX_OK, "%s",
                 err.message);
    cr_expect(!strncmp(ep.url, "http://127.0.0.1:", 17), "%s", ep.url);
    cr_expect_str_eq(ep.host, "127.0.0.1");
    cr_expect_eq(ep.tls, 0);
    cr_expect(!strncmp(ep.header, "x-daytona-preview-token: ", 25), "%s", ep.header);
    /* the declaration survives attach in a new context */
    char ref[SBX_REF_MAX];
    snprintf(ref, sizeof ref, "%s", sbx_handle_ref(h));
    sbx_release(h);
    close_ctx();
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(sbx_attach(prov, "ports-one", ref, NULL, &h, &err), SBX_OK, "%s", err.message);
    struct sbx_port_endpoint ep2 = {.size = sizeof ep2};
    cr_assert_eq(sbx_port_resolve(h, (unsigned)port, &ep2, NULL, &err), SBX_OK, "%s",
                 err.message);
    cr_expect_str_eq(ep2.url, ep.url);
    /* a server in the sandbox, reached through the link with the header */
    char script[128], id[SBX_PROC_ID_MAX];
    snprintf(script, sizeof script, "mkdir -p srv && echo served > srv/i.txt && cd srv && "
                                    "exec python3 -m http.server %d --bind 127.0.0.1",
             port);
    cr_assert_eq(start(h, 0, script, 0, 0, id, &err), SBX_OK, "%s", err.message);
    char url[1200];
    snprintf(url, sizeof url, "%s/i.txt", ep.url);
    long code = 0;
    struct buf b = {0};
    /* the server is starting (up to 30 s: python3 under load) */
    for (time_t until = time(NULL) + 30; code != 200 && time(NULL) < until;) {
        usleep(100 * 1000);
        CURL *c = curl_easy_init();
        struct curl_slist *hd = curl_slist_append(NULL, ep.header);
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, hd);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, body_keep);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
        b.len = 0;
        if (curl_easy_perform(c) == CURLE_OK)
            curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
        curl_slist_free_all(hd);
        curl_easy_cleanup(c);
    }
    cr_expect_eq(code, 200);
    cr_expect(b.p && strstr(b.p, "served"), "%s", b.p ? b.p : "");
    /* without the token the proxy refuses */
    CURL *c = curl_easy_init();
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, body_keep);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    cr_assert_eq(curl_easy_perform(c), CURLE_OK);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(c);
    cr_expect_eq(code, 401);
    free(b.p);
    sbx_proc_signal(h, id, 9, NULL, &err);
    /* the token never lands in an error */
    fake_faults(&fake, "[{\"match\":\"/api/sandbox\",\"kind\":\"status\",\"status\":500,"
                            "\"times\":10}]");
    cr_expect_neq(sbx_port_resolve(h, (unsigned)port, &ep2, NULL, &err), SBX_OK);
    cr_expect_null(strstr(err.message, ep.header + 25), "%s", err.message);
    sbx_release(h);
}
