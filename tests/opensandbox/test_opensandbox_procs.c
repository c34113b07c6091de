/*
 * test_opensandbox_procs.c - SBX_CAP_PROCESSES, SBX_CAP_FILE_OPS and
 * SBX_CAP_PORTS of the opensandbox provider through libsbx against the
 * fake (fake_opensandbox.py): every op; output beyond the replay buffer
 * (lost exact, nothing repeated); reattach from a second process after
 * the first was SIGKILLed mid-stream; 32 concurrent processes; a foreign
 * id refused; a flooding process (host memory and the sandbox's buffer
 * bounded); execd restarted, 5xx, cut and stalled answers under a running
 * process; symlinks never followed out of the workspace; a wide
 * directory listed in bounded memory; a server in the sandbox reached
 * through the resolved endpoint, directly and through the server proxy;
 * a waiting read cancelled.
 */
#include "../e2b/fake_service.h"
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
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define KEY "os_test_key_0123"

/* ASan keeps freed memory in quarantine: RSS says nothing there. */
#if defined(__SANITIZE_ADDRESS__)
#define RSS_CHECKED 0
#else
#define RSS_CHECKED 1
#endif
#define PROC_DIR "/home/user/.sbx-procs"

static struct fake_service fake;
static char cfgpath[PH_PATH_MAX];
static sbx_ctx *ctx;
static sbx_provider *prov;

static void up(void)
{
    unsetenv("FAKE_OS_SSE_DATA");
    cr_assert_eq(fake_start_script(&fake, "tests/opensandbox/fake_opensandbox.py", NULL, KEY), 0,
                 "cannot start the fake");
    setenv("OPEN_SANDBOX_API_KEY", KEY, 1);
    unsetenv("OPEN_SANDBOX_DOMAIN");
}

static void close_ctx(void)
{
    ph_close(&ctx, NULL);
    ph_remove_config(cfgpath);
}

/* With SBX_OS_REQUEST_LOG=DIR, every test leaves the requests the fake
 * saw in DIR/<pid>.json, for the contract check (sdk/run_contract_test.sh). */
static void save_requests(void)
{
    const char *dir = getenv("SBX_OS_REQUEST_LOG");
    if (!dir || !*dir || !fake.pid)
        return;
    long st = 0;
    char *s = fake_http(&fake, "GET", "/_fake/stats", NULL, NULL, &st);
    char path[512];
    snprintf(path, sizeof path, "%s/%ld.json", dir, (long)getpid());
    FILE *f = s && st == 200 ? fopen(path, "w") : NULL;
    if (f) {
        fputs(s, f);
        fclose(f);
    }
    free(s);
}

static void down(void)
{
    save_requests();
    close_ctx();
    fake_stop(&fake);
}

static int open_ctx(const char *extra, sbx_error *err)
{
    ph_write_config(cfgpath, "/tmp/sbx-os-procs-XXXXXX",
                    "providers:\n  opensandbox:\n    api_url: \"%s\"\n"
                    "    workspace: /home/user/workspace\n    proc_dir: " PROC_DIR "\n%s%s",
                    fake.url, extra && strstr(extra, "retries:") ? "" : "    retries: 2\n",
                    extra ? extra : "");
    return ph_open(cfgpath, "opensandbox", true, &ctx, &prov, err);
}

static void open_or_die(const char *extra)
{
    sbx_error err;
    cr_assert_eq(open_ctx(extra, &err), SBX_OK, "%s", err.message);
}

static void destroy(sbx_handle *h, const char *key)
{
    ph_destroy(prov, key, h);
}

static int sh(sbx_handle *h, const char *script, char *out, size_t cap)
{
    const char *argv[] = {"sh", "-c", script, NULL};
    sbx_capture c;
    sbx_capture_init(&c, 1 << 16, 0);
    struct sbx_sink so = sbx_capture_sink(&c);
    struct sbx_exec_args a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.argv = argv;
    a.out = &so;
    a.timeout_ms = 30000;
    struct sbx_exec_result res;
    memset(&res, 0, sizeof res);
    res.size = sizeof res;
    sbx_error err;
    int rc = sbx_exec(h, &a, &res, NULL, &err);
    cr_assert_eq(rc, SBX_OK, "exec %s: %s", script, err.message);
    if (out) {
        char *t = sbx_capture_text(&c);
        snprintf(out, cap, "%s", t ? t : "");
        free(t);
    }
    sbx_capture_free(&c);
    return res.exit_code;
}

/* ---- processes ---------------------------------------------------------- */

static int start_env(sbx_handle *h, const char *script, uint64_t buffer, int64_t timeout_ms,
                     char id[SBX_PROC_ID_MAX], sbx_error *err)
{
    const char *argv[] = {"sh", "-c", script, NULL};
    struct sbx_proc_spec s;
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    s.argv = argv;
    s.buffer_bytes = buffer;
    s.timeout_ms = timeout_ms;
    return sbx_proc_start(h, &s, id, NULL, err);
}

static void start(sbx_handle *h, const char *script, uint64_t buffer, char id[SBX_PROC_ID_MAX])
{
    sbx_error err;
    cr_assert_eq(start_env(h, script, buffer, 0, id, &err), SBX_OK, "proc_start: %s",
                 err.message);
}

/* A growable byte buffer as a sink. */
struct buf {
    char *p;
    size_t n, cap;
};

static int buf_write(void *arg, const void *data, size_t len)
{
    struct buf *b = arg;
    if (b->n + len + 1 > b->cap) {
        b->cap = (b->n + len + 1) * 2;
        b->p = realloc(b->p, b->cap);
        cr_assert_not_null(b->p);
    }
    memcpy(b->p + b->n, data, len);
    b->n += len;
    b->p[b->n] = '\0';
    return 0;
}

struct reader {
    uint64_t out, err, lost_out, lost_err;
    struct buf o, e;
    struct sbx_proc_read_result last;
};

static int read_once(sbx_handle *h, const char *id, struct reader *r, uint32_t wait_ms,
                     uint64_t max, sbx_error *err)
{
    struct sbx_sink so = SBX_SINK_INIT(&r->o, buf_write);
    struct sbx_sink se = SBX_SINK_INIT(&r->e, buf_write);
    struct sbx_proc_read_args a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.wait_ms = wait_ms;
    a.out_cursor = r->out;
    a.err_cursor = r->err;
    a.max_bytes = max;
    a.out = &so;
    a.err = &se;
    memset(&r->last, 0, sizeof r->last);
    r->last.size = sizeof r->last;
    int rc = sbx_proc_read(h, id, &a, &r->last, NULL, err);
    if (rc == SBX_OK) {
        r->out = r->last.out_cursor;
        r->err = r->last.err_cursor;
        r->lost_out += r->last.out_lost;
        r->lost_err += r->last.err_lost;
    }
    return rc;
}

/* Read until eof (at most secs seconds). */
static void read_all(sbx_handle *h, const char *id, struct reader *r, uint64_t max, int secs)
{
    time_t until = time(NULL) + secs;
    for (;;) {
        sbx_error err;
        cr_assert_eq(read_once(h, id, r, 500, max, &err), SBX_OK, "proc_read: %s", err.message);
        if (r->last.eof)
            return;
        cr_assert(time(NULL) < until, "no eof within %d s (out %llu bytes)", secs,
                  (unsigned long long)r->out);
    }
}

static void reader_free(struct reader *r)
{
    free(r->o.p);
    free(r->e.p);
}

struct seen {
    char ids[40][SBX_PROC_ID_MAX];
    char cmds[40][128];
    int states[40], codes[40], sigs[40];
    int n;
};

static int on_proc(void *arg, const struct sbx_proc_info *i)
{
    struct seen *s = arg;
    if (s->n < 40) {
        snprintf(s->ids[s->n], SBX_PROC_ID_MAX, "%s", i->id);
        snprintf(s->cmds[s->n], 128, "%s", i->command ? i->command : "");
        s->states[s->n] = (int)i->state;
        s->codes[s->n] = i->exit_code;
        s->sigs[s->n] = i->term_signal;
    }
    s->n++;
    return 0;
}

TestSuite(opensandbox_procs, .init = up, .fini = down, .timeout = 120);

Test(opensandbox_procs, output_apart_exit_code_and_eof)
{
    open_or_die(NULL);
    sbx_handle *h = ph_create(prov, "procs-basic");
    char id[SBX_PROC_ID_MAX];
    start(h, "echo out; echo err >&2; printf 'no newline'; exit 3", 0, id);
    struct reader r = {0};
    read_all(h, id, &r, 0, 20);
    cr_expect_str_eq(r.o.p ? r.o.p : "", "out\nno newline");
    cr_expect_str_eq(r.e.p ? r.e.p : "", "err\n");
    cr_expect_eq(r.last.state, SBX_PROC_EXITED);
    cr_expect_eq(r.last.exit_code, 3);
    cr_expect_eq(r.last.term_signal, 0);
    cr_expect_eq(r.lost_out + r.lost_err, 0);
    /* read again at the end: nothing, still eof */
    sbx_error err;
    cr_assert_eq(read_once(h, id, &r, 0, 0, &err), SBX_OK, "%s", err.message);
    cr_expect(r.last.eof);
    cr_expect_eq(r.out, strlen("out\nno newline"));
    reader_free(&r);
    destroy(h, "procs-basic");
}

Test(opensandbox_procs, binary_output_is_byte_exact)
{
    open_or_die(NULL);
    sbx_handle *h = ph_create(prov, "procs-binary");
    char id[SBX_PROC_ID_MAX];
    start(h, "printf '\\000\\377\\200abc\\376'", 0, id);
    struct reader r = {0};
    read_all(h, id, &r, 0, 20);
    cr_assert_eq(r.o.n, 7);
    cr_expect_eq(memcmp(r.o.p, "\0\377\200abc\376", 7), 0);
    reader_free(&r);
    destroy(h, "procs-binary");
}

Test(opensandbox_procs, stdin_paste_then_eof)
{
    open_or_die(NULL);
    sbx_handle *h = ph_create(prov, "procs-stdin");
    char id[SBX_PROC_ID_MAX];
    start(h, "cat; echo done >&2", 0, id);
    size_t n = 1 << 20; /* a 1 MiB paste, every byte value */
    unsigned char *data = malloc(n);
    for (size_t i = 0; i < n; i++)
        data[i] = (unsigned char)(i * 7 + i / 256);
    sbx_error err;
    cr_assert_eq(sbx_proc_write(h, id, data, n / 2, 0, NULL, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(sbx_proc_write(h, id, data + n / 2, n - n / 2, SBX_PROC_WRITE_CLOSE, NULL, &err),
                 SBX_OK, "%s", err.message);
    struct reader r = {0};
    read_all(h, id, &r, 1 << 20, 30);
    cr_assert_eq(r.o.n, n, "got %zu bytes", r.o.n);
    cr_expect_eq(memcmp(r.o.p, data, n), 0);
    cr_expect_str_eq(r.e.p, "done\n");
    cr_expect_eq(r.last.exit_code, 0);
    /* writing after the end */
    cr_expect_eq(sbx_proc_write(h, id, "x", 1, 0, NULL, &err), SBX_E_INVALID);
    free(data);
    reader_free(&r);
    destroy(h, "procs-stdin");
}

Test(opensandbox_procs, signal_list_and_timeout)
{
    open_or_die(NULL);
    sbx_handle *h = ph_create(prov, "procs-signal");
    char a[SBX_PROC_ID_MAX], b[SBX_PROC_ID_MAX], c[SBX_PROC_ID_MAX];
    start(h, "sleep 30", 0, a);
    start(h, "echo second", 0, b);
    sbx_error err;
    cr_assert_eq(start_env(h, "sleep 30", 0, 600, c, &err), SBX_OK, "%s", err.message);
    cr_expect_eq(sbx_proc_signal(h, a, 99, NULL, &err), SBX_E_INVALID);
    cr_assert_eq(sbx_proc_signal(h, a, 15, NULL, &err), SBX_OK, "%s", err.message);
    struct reader r = {0};
    read_all(h, a, &r, 0, 20);
    cr_expect_eq(r.last.exit_code, -1);
    cr_expect_eq(r.last.term_signal, 15);
    cr_expect_eq(r.last.timed_out, 0);
    /* an ended process: nothing sent, OK */
    cr_expect_eq(sbx_proc_signal(h, a, 15, NULL, &err), SBX_OK, "%s", err.message);
    struct reader t = {0};
    read_all(h, c, &t, 0, 20);
    cr_expect_eq(t.last.term_signal, 9);
    cr_expect(t.last.timed_out, "the timeout was not reported");
    struct reader q = {0};
    read_all(h, b, &q, 0, 20);
    /* proc_list: all three, in start order, with their commands */
    struct seen seen;
    memset(&seen, 0, sizeof seen);
    struct sbx_proc_list_sink ls = {sizeof ls, &seen, on_proc};
    cr_assert_eq(sbx_proc_list(h, &ls, NULL, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(seen.n, 3);
    cr_expect_str_eq(seen.ids[0], a);
    cr_expect_str_eq(seen.ids[1], b);
    cr_expect_str_eq(seen.ids[2], c);
    cr_expect_str_eq(seen.cmds[1], "sh -c echo second");
    cr_expect_eq(seen.states[1], SBX_PROC_EXITED);
    cr_expect_eq(seen.codes[1], 0);
    cr_expect_eq(seen.sigs[0], 15);
    reader_free(&r);
    reader_free(&t);
    reader_free(&q);
    destroy(h, "procs-signal");
}

/* seq 1 N as the shell writes it: the expected stream. */
static struct buf seq_text(int n)
{
    struct buf b = {0};
    char line[32];
    for (int i = 1; i <= n; i++) {
        int l = snprintf(line, sizeof line, "%d\n", i);
        buf_write(&b, line, (size_t)l);
    }
    return b;
}

/* Read to the end checking every delivered byte against want at its
 * stream position (old cursor + lost): exact loss, nothing repeated. */
static void read_checked(sbx_handle *h, const char *id, const struct buf *want, struct reader *r,
                         uint64_t max)
{
    time_t until = time(NULL) + 30;
    for (;;) {
        uint64_t from = r->out;
        size_t had = r->o.n;
        sbx_error err;
        cr_assert_eq(read_once(h, id, r, 500, max, &err), SBX_OK, "%s", err.message);
        uint64_t at = from + r->last.out_lost;
        size_t got = r->o.n - had;
        cr_assert_eq(r->out, at + got, "cursor %llu != %llu + %zu", (unsigned long long)r->out,
                     (unsigned long long)at, got);
        cr_assert(at + got <= want->n);
        cr_assert_eq(memcmp(r->o.p + had, want->p + at, got), 0,
                     "bytes at %llu are not the stream's", (unsigned long long)at);
        if (r->last.eof)
            return;
        cr_assert(time(NULL) < until, "no eof");
    }
}

Test(opensandbox_procs, output_beyond_the_buffer_loses_an_exact_count)
{
    open_or_die(NULL);
    sbx_handle *h = ph_create(prov, "procs-overflow");
    char id[SBX_PROC_ID_MAX];
    /* 8 KiB asked: chunks of 4 KiB (the least), 16..20 KiB kept */
    start(h, "seq 1 40000", 8192, id);
    struct buf want = seq_text(40000);
    /* let it finish first: then the replay buffer holds only the tail */
    sh(h, "for i in $(seq 100); do ls " PROC_DIR "/*/o.done >/dev/null 2>&1 && break; "
          "sleep 0.05; done",
       NULL, 0);
    struct reader r = {0};
    read_checked(h, id, &want, &r, 3000);
    /* the buffer is the last 8192 bytes exactly (the chunks hold 16..20 KiB) */
    cr_expect_eq(r.lost_out, want.n - 8192, "lost %llu of %zu bytes",
                 (unsigned long long)r.lost_out, want.n);
    cr_expect_eq(r.lost_out + r.o.n, want.n, "lost %llu + read %zu != %zu",
                 (unsigned long long)r.lost_out, r.o.n, want.n);
    cr_expect_eq(r.out, want.n);
    cr_expect_eq(r.o.n, 8192, "kept %zu bytes", r.o.n);
    /* the chunks in the sandbox stay within the bound */
    char out[256];
    sh(h, "cat " PROC_DIR "/*/o.[0-9]* | wc -c", out, sizeof out);
    cr_expect(atoi(out) <= 20480, "the sandbox keeps %s bytes", out);
    /* a reader far behind a running writer: loss in the middle is exact */
    char id2[SBX_PROC_ID_MAX];
    start(h, "seq 1 40000; seq 1 40000 | while read l; do echo $l; done | head -c 1", 8192, id2);
    struct buf want2 = seq_text(40000);
    buf_write(&want2, "1", 1);
    struct reader r2 = {0};
    read_checked(h, id2, &want2, &r2, 1000);
    cr_expect_eq(r2.lost_out + r2.o.n, want2.n);
    free(want2.p);
    reader_free(&r2);
    free(want.p);
    reader_free(&r);
    destroy(h, "procs-overflow");
}

Test(opensandbox_procs, small_reads_never_repeat_or_skip)
{
    open_or_die(NULL);
    sbx_handle *h = ph_create(prov, "procs-small");
    char id[SBX_PROC_ID_MAX];
    start(h, "seq 1 3000; seq 1 500 >&2", 1 << 20, id);
    struct reader r = {0};
    read_all(h, id, &r, 777, 30); /* reads across chunk boundaries */
    struct buf want = seq_text(3000), werr = seq_text(500);
    cr_expect_eq(r.lost_out + r.lost_err, 0);
    cr_assert_eq(r.o.n, want.n);
    cr_expect_eq(memcmp(r.o.p, want.p, want.n), 0);
    cr_assert_eq(r.e.n, werr.n);
    cr_expect_eq(memcmp(r.e.p, werr.p, werr.n), 0);
    free(want.p);
    free(werr.p);
    reader_free(&r);
    destroy(h, "procs-small");
}

Test(opensandbox_procs, a_foreign_or_malformed_id_is_not_found)
{
    open_or_die(NULL);
    sbx_handle *a = ph_create(prov, "procs-foreign-a");
    sbx_handle *b = ph_create(prov, "procs-foreign-b");
    char id[SBX_PROC_ID_MAX];
    start(a, "sleep 5", 0, id);
    struct reader r = {0};
    sbx_error err;
    cr_expect_eq(read_once(b, id, &r, 0, 0, &err), SBX_E_NOT_FOUND, "%s", err.message);
    cr_expect_eq(sbx_proc_signal(b, id, 9, NULL, &err), SBX_E_NOT_FOUND);
    cr_expect_eq(sbx_proc_write(b, id, "x", 1, 0, NULL, &err), SBX_E_NOT_FOUND);
    cr_expect_eq(read_once(a, "nonsense", &r, 0, 0, &err), SBX_E_NOT_FOUND);
    /* the right directory with another command id */
    char forged[SBX_PROC_ID_MAX];
    snprintf(forged, sizeof forged, "%.*s0000", (int)(strrchr(id, '.') - id + 1), id);
    cr_expect_eq(read_once(a, forged, &r, 0, 0, &err), SBX_E_NOT_FOUND, "%s", err.message);
    cr_expect_eq(sbx_proc_signal(a, id, 9, NULL, &err), SBX_OK, "%s", err.message);
    reader_free(&r);
    destroy(a, "procs-foreign-a");
    destroy(b, "procs-foreign-b");
}

Test(opensandbox_procs, thirty_two_at_once)
{
    open_or_die(NULL);
    sbx_handle *h = ph_create(prov, "procs-32");
    char ids[32][SBX_PROC_ID_MAX];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < 32; i++) {
        char script[64];
        snprintf(script, sizeof script, "sleep 1; echo proc-%d", i);
        start(h, script, 0, ids[i]);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    cr_log_info("32 proc_start: %.0f ms", (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
    for (int i = 0; i < 32; i++) {
        struct reader r = {0};
        read_all(h, ids[i], &r, 0, 30);
        char want[32];
        snprintf(want, sizeof want, "proc-%d\n", i);
        cr_expect_str_eq(r.o.p ? r.o.p : "", want);
        reader_free(&r);
    }
    struct seen seen;
    memset(&seen, 0, sizeof seen);
    struct sbx_proc_list_sink ls = {sizeof ls, &seen, on_proc};
    sbx_error err;
    cr_assert_eq(sbx_proc_list(h, &ls, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect_eq(seen.n, 32);
    for (int i = 0; i < 32 && i < seen.n; i++)
        cr_expect_str_eq(seen.ids[i], ids[i]);
    destroy(h, "procs-32");
}

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, res = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &res) != 2)
            res = 0;
        fclose(f);
    }
    return res * (sysconf(_SC_PAGESIZE) / 1024);
}

Test(opensandbox_procs, a_flood_stays_bounded)
{
    open_or_die(NULL);
    sbx_handle *h = ph_create(prov, "procs-flood");
    char id[SBX_PROC_ID_MAX];
    start(h, "yes 0123456789abcdef0123456789abcdef", 1 << 16, id);
    struct reader r = {0};
    sbx_error err;
    cr_assert_eq(read_once(h, id, &r, 2000, 0, &err), SBX_OK, "%s", err.message);
    free(r.o.p);
    r.o = (struct buf){0};
    long before = rss_kb();
    sleep(1);
    uint64_t seen = 0;
    for (int i = 0; i < 20; i++) {
        cr_assert_eq(read_once(h, id, &r, 1000, 1 << 16, &err), SBX_OK, "%s", err.message);
        seen += r.o.n;
        r.o.n = 0;
    }
    long grew = rss_kb() - before;
    cr_expect(r.lost_out > 0, "a flood lost nothing (read %llu)", (unsigned long long)seen);
    cr_expect(!RSS_CHECKED || grew < 8 * 1024, "host RSS grew by %ld KiB", grew);
    char out[256];
    sh(h, "cat " PROC_DIR "/*/o.[0-9]* | wc -c", out, sizeof out);
    /* 64 KiB asked: 16 KiB chunks, at most 5 of them */
    cr_expect(atol(out) <= 5 * 16384, "the sandbox keeps %s bytes", out);
    cr_assert_eq(sbx_proc_signal(h, id, 9, NULL, &err), SBX_OK, "%s", err.message);
    r.o.n = 0;
    read_all(h, id, &r, 1 << 20, 20);
    cr_expect_eq(r.last.term_signal, 9);
    reader_free(&r);
    destroy(h, "procs-flood");
}

/* The sandbox id of a handle ("opensandbox:<id>"). */
static const char *sid(sbx_handle *h)
{
    return strchr(sbx_handle_ref(h), ':') + 1;
}

Test(opensandbox_procs, execd_restarted_is_a_clear_error)
{
    open_or_die(NULL);
    sbx_handle *h = ph_create(prov, "procs-restart");
    char id[SBX_PROC_ID_MAX];
    start(h, "sleep 20", 0, id);
    char path[128];
    snprintf(path, sizeof path, "/_fake/execd-restart/%s", sid(h));
    long st = 0;
    free(fake_http(&fake, "POST", path, "{}", NULL, &st));
    cr_assert_eq(st, 200);
    struct reader r = {0};
    sbx_error err;
    time_t t0 = time(NULL);
    cr_expect_eq(read_once(h, id, &r, 5000, 0, &err), SBX_E_PROTOCOL);
    cr_expect(strstr(err.message, "restarted"), "%s", err.message);
    cr_expect(time(NULL) - t0 < 3, "it waited");
    cr_expect_eq(sbx_proc_signal(h, id, 9, NULL, &err), SBX_E_PROTOCOL);
    reader_free(&r);
    destroy(h, "procs-restart");
}

static int count_entry(void *arg, const struct sbx_file_info *i)
{
    (void)arg;
    (void)i;
    return 0;
}

Test(opensandbox_procs, faults_under_a_running_process)
{
    open_or_die("    request_timeout_ms: 1500\n    retries: 1\n");
    sbx_handle *h = ph_create(prov, "procs-faults");
    char id[SBX_PROC_ID_MAX];
    start(h, "seq 1 20000; sleep 20", 0, id);
    struct reader r = {0};
    sbx_error err;
    /* execd failing: a clear error, at once */
    cr_assert_eq(fake_faults(&fake, "[{\"match\": \"/command/status\", \"kind\": \"status\", "
                                    "\"status\": 503, \"times\": 5}]"),
                 0);
    cr_expect_eq(read_once(h, id, &r, 3000, 0, &err), SBX_E_UNAVAILABLE, "%s", err.message);
    cr_expect(strstr(err.message, "503"), "%s", err.message);
    long st;
    free(fake_http(&fake, "POST", "/_fake/reset", "{}", NULL, &st));
    /* a download cut in the middle: what arrived counts, nothing repeats */
    cr_assert_eq(fake_faults(&fake, "[{\"match\": \"/files/download\", \"kind\": \"cut\", "
                                    "\"times\": 1}]"),
                 0);
    struct buf want = seq_text(20000);
    while (r.out < want.n) {
        int rc = read_once(h, id, &r, 2000, 1 << 16, &err);
        cr_assert(rc == SBX_OK || rc == SBX_E_PROTOCOL, "%d %s", rc, err.message);
    }
    cr_expect_eq(r.o.n, want.n);
    cr_expect_eq(memcmp(r.o.p, want.p, want.n), 0, "a cut download repeated or lost bytes");
    /* a listing cut in the middle: a clear error, for files too */
    cr_assert_eq(fake_faults(&fake, "[{\"match\": \"/directories/list\", \"kind\": \"cut\", "
                                    "\"times\": 2}]"),
                 0);
    cr_expect_eq(read_once(h, id, &r, 0, 0, &err), SBX_E_PROTOCOL, "%s", err.message);
    cr_expect(strstr(err.message, "directories/list"), "%s", err.message);
    struct sbx_file_list_sink nothing = {sizeof nothing, NULL, count_entry};
    cr_expect_eq(sbx_file_list(h, "", &nothing, NULL, &err), SBX_E_PROTOCOL, "%s", err.message);
    /* a stalled execd: a timeout, no hang */
    cr_assert_eq(fake_faults(&fake, "[{\"match\": \"/directories/list\", \"kind\": \"slow\", "
                                    "\"delay_ms\": 4000, \"times\": 3}]"),
                 0);
    time_t t0 = time(NULL);
    int rc = read_once(h, id, &r, 0, 0, &err);
    cr_expect(rc == SBX_E_TIMEOUT || rc == SBX_E_UNAVAILABLE, "%d %s", rc, err.message);
    cr_expect(time(NULL) - t0 < 10, "it hung");
    free(fake_http(&fake, "POST", "/_fake/reset", "{}", NULL, &st));
    free(want.p);
    reader_free(&r);
    destroy(h, "procs-faults");
}

/* The child of reattach: its own libsbx, start, read some, report over fd. */
static void child_reader(int fd)
{
    sbx_error err;
    cfgpath[0] = '\0';
    ctx = NULL;
    if (open_ctx(NULL, &err) != SBX_OK)
        _exit(2);
    sbx_handle *h = NULL;
    struct sbx_create_options co = {sizeof co, NULL, 0, NULL, NULL, NULL};
    if (sbx_create(prov, "procs-reattach", &co, NULL, &h, &err) != SBX_OK)
        _exit(3);
    char id[SBX_PROC_ID_MAX];
    if (start_env(h, "i=0; while [ $i -lt 3000 ]; do echo line-$i; i=$((i+1)); done; sleep 1",
                  0, 0, id, &err) != SBX_OK)
        _exit(4);
    if (write(fd, id, SBX_PROC_ID_MAX) != SBX_PROC_ID_MAX)
        _exit(5);
    struct reader r = {0};
    for (;;) { /* until killed: every byte read goes to the parent */
        r.o.n = 0;
        if (read_once(h, id, &r, 500, 997, &err) != SBX_OK)
            _exit(6);
        if (r.o.n && write(fd, r.o.p, r.o.n) != (ssize_t)r.o.n)
            _exit(7);
        if (r.last.eof)
            pause();
    }
}

Test(opensandbox_procs, reattach_after_the_reader_was_killed)
{
    int p[2];
    cr_assert_eq(pipe(p), 0);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        child_reader(p[1]);
    }
    close(p[1]);
    char id[SBX_PROC_ID_MAX];
    cr_assert_eq(read(p[0], id, sizeof id), (ssize_t)sizeof id, "the child did not start");
    struct buf got = {0};
    char chunk[4096];
    while (got.n < 5000) { /* mid-stream */
        ssize_t n = read(p[0], chunk, sizeof chunk);
        cr_assert(n > 0, "the child stopped");
        buf_write(&got, chunk, (size_t)n);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    ssize_t n;
    while ((n = read(p[0], chunk, sizeof chunk)) > 0)
        buf_write(&got, chunk, (size_t)n);
    close(p[0]);
    /* a new process attaches and continues from the cursor it had */
    open_or_die(NULL);
    sbx_handle *h = ph_create(prov, "procs-reattach");
    struct reader r = {0};
    r.out = got.n;
    read_all(h, id, &r, 0, 30);
    buf_write(&got, r.o.p ? r.o.p : "", r.o.n);
    struct buf want = {0};
    for (int i = 0; i < 3000; i++) {
        char line[32];
        int l = snprintf(line, sizeof line, "line-%d\n", i);
        buf_write(&want, line, (size_t)l);
    }
    cr_expect_eq(r.lost_out, 0);
    cr_assert_eq(got.n, want.n, "%zu bytes in all, want %zu", got.n, want.n);
    cr_expect_eq(memcmp(got.p, want.p, want.n), 0, "repeated or missing output");
    free(got.p);
    free(want.p);
    reader_free(&r);
    destroy(h, "procs-reattach");
}

Test(opensandbox_procs, destroy_ends_the_processes)
{
    open_or_die(NULL);
    sbx_handle *h = ph_create(prov, "procs-destroy");
    char id[SBX_PROC_ID_MAX];
    start(h, "sleep 300", 0, id);
    char name[32], cmd[256], out[64];
    snprintf(name, sizeof name, "%.21s", id);
    snprintf(cmd, sizeof cmd,
             "for i in $(seq 50); do [ -s " PROC_DIR "/%s/pid ] && break; sleep 0.05; done; "
             "cat " PROC_DIR "/%s/pid", name, name);
    sh(h, cmd, out, sizeof out);
    pid_t pid = (pid_t)atoi(out);
    cr_assert(pid > 1 && kill(pid, 0) == 0, "no process %s", out);
    destroy(h, "procs-destroy");
    /* the fake runs it as a host process: nothing of it is left (the
     * output readers and the stdin keeper end on their own within a
     * second: end of file, tail --pid) */
    /* "[1]23..." matches the name but not this pgrep's own command line */
    snprintf(cmd, sizeof cmd, "pgrep -f '[%c]%s' >/dev/null", name[0], name + 1);
    int left = 1;
    for (int i = 0; i < 30 && left; i++) {
        left = kill(pid, 0) == 0 || system(cmd) == 0;
        if (left)
            usleep(100000);
    }
    cr_expect_eq(left, 0, "a process survived destroy");
}

/* ---- file operations ---------------------------------------------------- */

struct names {
    char all[8192];
    int n;
    uint32_t types[64];
    char first[64][64];
};

static int on_name(void *arg, const struct sbx_file_info *i)
{
    struct names *s = arg;
    if (s->n < 64) {
        snprintf(s->first[s->n], 64, "%s", i->name);
        s->types[s->n] = i->type;
    }
    if (strlen(s->all) + strlen(i->name) + 2 < sizeof s->all) {
        strcat(s->all, i->name);
        strcat(s->all, ",");
    }
    s->n++;
    return 0;
}

static int has(const struct names *s, const char *name, uint32_t type)
{
    for (int i = 0; i < s->n && i < 64; i++)
        if (!strcmp(s->first[i], name))
            return s->types[i] == type;
    return 0;
}

Test(opensandbox_procs, file_ops)
{
    open_or_die(NULL);
    sbx_handle *h = ph_create(prov, "files-ops");
    sbx_error err;
    cr_assert_eq(sbx_file_mkdir(h, "a/b/c", 0, 0, NULL, &err), SBX_E_NOT_FOUND);
    cr_assert_eq(sbx_file_mkdir(h, "a/b/c", 0700, SBX_MKDIR_PARENTS, NULL, &err), SBX_OK, "%s",
                 err.message);
    cr_expect_eq(sbx_file_mkdir(h, "a/b/c", 0, SBX_MKDIR_PARENTS, NULL, &err), SBX_OK);
    cr_expect_eq(sbx_file_mkdir(h, "a/b/c", 0, 0, NULL, &err), SBX_E_EXISTS);
    cr_expect_eq(sbx_file_mkdir(h, "a/x", 04755, 0, NULL, &err), SBX_E_INVALID);
    struct sbx_file_info fi;
    memset(&fi, 0, sizeof fi);
    fi.size = sizeof fi;
    cr_assert_eq(sbx_file_stat(h, "a/b/c", &fi, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect_eq(fi.type, SBX_FILE_DIR);
    cr_expect_eq(fi.mode, 0700, "mode %o", fi.mode);
    cr_expect(fi.mtime_ns > 1600000000LL * 1000000000LL);
    sh(h, "cd /home/user/workspace && printf hello > a/f && ln -s f a/l && mkfifo a/p", NULL, 0);
    cr_assert_eq(sbx_file_stat(h, "a/f", &fi, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect_eq(fi.type, SBX_FILE_REGULAR);
    cr_expect_eq(fi.bytes, 5);
    cr_expect_null(fi.name);
    cr_assert_eq(sbx_file_stat(h, "a/l", &fi, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect_eq(fi.type, SBX_FILE_SYMLINK);
    cr_expect_eq(sbx_file_stat(h, "a/missing", &fi, NULL, &err), SBX_E_NOT_FOUND);
    struct names s;
    memset(&s, 0, sizeof s);
    struct sbx_file_list_sink ls = {sizeof ls, &s, on_name};
    cr_assert_eq(sbx_file_list(h, "a", &ls, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect_eq(s.n, 4, "%s", s.all);
    cr_expect(has(&s, "b", SBX_FILE_DIR) && has(&s, "f", SBX_FILE_REGULAR) &&
                  has(&s, "l", SBX_FILE_SYMLINK) && has(&s, "p", SBX_FILE_OTHER),
              "%s", s.all);
    cr_expect_eq(sbx_file_list(h, "a/f", &ls, NULL, &err), SBX_E_INVALID);
    cr_expect_eq(sbx_file_list(h, "a/l", &ls, NULL, &err), SBX_E_INVALID);
    cr_expect_eq(sbx_file_list(h, "nope", &ls, NULL, &err), SBX_E_NOT_FOUND);
    memset(&s, 0, sizeof s);
    cr_expect_eq(sbx_file_list(h, "", &ls, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect(has(&s, "a", SBX_FILE_DIR), "%s", s.all);
    /* rename: replace, or not */
    sh(h, "cd /home/user/workspace && printf other > a/g", NULL, 0);
    cr_expect_eq(sbx_file_rename(h, "a/g", "a/f", SBX_RENAME_NOREPLACE, NULL, &err),
                 SBX_E_EXISTS);
    cr_assert_eq(sbx_file_rename(h, "a/g", "a/f", 0, NULL, &err), SBX_OK, "%s", err.message);
    char out[64];
    sh(h, "cat /home/user/workspace/a/f; test -e /home/user/workspace/a/g || echo -gone", out,
       sizeof out);
    cr_expect_str_eq(out, "other-gone\n");
    cr_assert_eq(sbx_file_rename(h, "a/f", "a/b/moved", 0, NULL, &err), SBX_OK, "%s",
                 err.message);
    cr_expect_eq(sbx_file_rename(h, "a/nothing", "a/x", 0, NULL, &err), SBX_E_NOT_FOUND);
    /* remove */
    cr_expect_eq(sbx_file_remove(h, "a/b", 0, NULL, &err), SBX_E_EXISTS);
    cr_expect_eq(sbx_file_remove(h, "", SBX_REMOVE_RECURSIVE, NULL, &err), SBX_E_INVALID);
    cr_expect_eq(sbx_file_remove(h, "a/missing", 0, NULL, &err), SBX_E_NOT_FOUND);
    cr_assert_eq(sbx_file_remove(h, "a/l", 0, NULL, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(sbx_file_remove(h, "a/p", 0, NULL, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(sbx_file_remove(h, "a/b", SBX_REMOVE_RECURSIVE, NULL, &err), SBX_OK, "%s",
                 err.message);
    memset(&s, 0, sizeof s);
    cr_assert_eq(sbx_file_list(h, "a", &ls, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect_eq(s.n, 0, "left: %s", s.all);
    cr_assert_eq(sbx_file_remove(h, "a", 0, NULL, &err), SBX_OK, "%s", err.message);
    destroy(h, "files-ops");
}

Test(opensandbox_procs, symlinks_never_lead_out)
{
    open_or_die(NULL);
    sbx_handle *h = ph_create(prov, "files-links");
    sbx_error err;
    sh(h, "mkdir -p /home/user/outside/d && echo secret > /home/user/outside/s && "
          "cd /home/user/workspace && ln -s /home/user/outside out && ln -s ../outside/s s",
       NULL, 0);
    struct names s;
    memset(&s, 0, sizeof s);
    struct sbx_file_list_sink ls = {sizeof ls, &s, on_name};
    cr_expect_eq(sbx_file_list(h, "out", &ls, NULL, &err), SBX_E_INVALID);
    cr_expect_eq(sbx_file_list(h, "out/d", &ls, NULL, &err), SBX_E_INVALID);
    cr_expect_eq(s.n, 0, "listed %s", s.all);
    struct sbx_file_info fi;
    memset(&fi, 0, sizeof fi);
    fi.size = sizeof fi;
    cr_expect_eq(sbx_file_stat(h, "out/s", &fi, NULL, &err), SBX_E_INVALID);
    cr_assert_eq(sbx_file_stat(h, "s", &fi, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect_eq(fi.type, SBX_FILE_SYMLINK);
    cr_expect_eq(sbx_file_mkdir(h, "out/new", 0, SBX_MKDIR_PARENTS, NULL, &err), SBX_E_INVALID);
    cr_expect_eq(sbx_file_remove(h, "out/s", 0, NULL, &err), SBX_E_INVALID);
    cr_expect_eq(sbx_file_remove(h, "out/d", SBX_REMOVE_RECURSIVE, NULL, &err), SBX_E_INVALID);
    cr_expect_eq(sbx_file_rename(h, "out/s", "stolen", 0, NULL, &err), SBX_E_INVALID);
    cr_expect_eq(sbx_file_rename(h, "s", "out/s2", 0, NULL, &err), SBX_E_INVALID);
    cr_expect_eq(sbx_file_stat(h, "../outside", &fi, NULL, &err), SBX_E_INVALID);
    cr_expect_eq(sbx_file_list(h, "/home", &ls, NULL, &err), SBX_E_INVALID);
    /* removing a link removes the link only */
    cr_assert_eq(sbx_file_remove(h, "out", SBX_REMOVE_RECURSIVE, NULL, &err), SBX_OK, "%s",
                 err.message);
    cr_assert_eq(sbx_file_remove(h, "s", 0, NULL, &err), SBX_OK, "%s", err.message);
    char out[64];
    sh(h, "cat /home/user/outside/s; test -d /home/user/outside/d && echo d-kept", out,
       sizeof out);
    cr_expect_str_eq(out, "secret\nd-kept\n");
    destroy(h, "files-links");
}

Test(opensandbox_procs, a_wide_directory_in_bounded_memory)
{
    open_or_die(NULL);
    sbx_handle *h = ph_create(prov, "files-wide");
    sh(h, "mkdir -p /home/user/workspace/w && cd /home/user/workspace/w && "
          "seq -f 'entry-with-a-longish-name-%06g' 1 30000 | xargs touch",
       NULL, 0);
    struct names s;
    memset(&s, 0, sizeof s);
    struct sbx_file_list_sink ls = {sizeof ls, &s, on_name};
    sbx_error err;
    long before = rss_kb();
    cr_assert_eq(sbx_file_list(h, "w", &ls, NULL, &err), SBX_OK, "%s", err.message);
    long grew = rss_kb() - before;
    cr_expect_eq(s.n, 30000);
    /* the answer is ~7 MiB of JSON; one entry is held at a time */
    cr_expect(!RSS_CHECKED || grew < 2 * 1024, "RSS grew by %ld KiB", grew);
    destroy(h, "files-wide");
}

/* ---- ports -------------------------------------------------------------- */

static size_t to_buf(char *p, size_t sz, size_t n, void *arg)
{
    buf_write(arg, p, sz * n);
    return sz * n;
}

static long http_get(const struct sbx_port_endpoint *ep, const char *path, struct buf *body)
{
    CURL *c = curl_easy_init();
    char url[1200];
    snprintf(url, sizeof url, "%s%s", ep->url, path);
    struct curl_slist *hl = ep->header[0] ? curl_slist_append(NULL, ep->header) : NULL;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, to_buf);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
    long code = 0;
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(hl);
    curl_easy_cleanup(c);
    return code;
}

static void serve_and_reach(const char *extra, const char *key, int proxied)
{
    open_or_die(extra);
    int qp = quiet_port();
    cr_assert(qp > 0, "no free loopback port below the ephemeral range");
    uint16_t port = (uint16_t)qp;
    uint16_t ports[] = {port, 0};
    sbx_handle *h = ph_create_ports(prov, key, ports);
    sh(h, "echo served-from-the-sandbox > /home/user/workspace/hello.txt", NULL, 0);
    char script[160];
    snprintf(script, sizeof script,
             "cd /home/user/workspace && exec python3 -m http.server %u --bind 127.0.0.1",
             (unsigned)port);
    char id[SBX_PROC_ID_MAX];
    start(h, script, 0, id);
    struct sbx_port_endpoint ep;
    memset(&ep, 0, sizeof ep);
    ep.size = sizeof ep;
    sbx_error err;
    cr_assert_eq(sbx_port_resolve(h, port, &ep, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect_str_eq(ep.host, "127.0.0.1");
    cr_expect_eq(ep.port, fake.port);
    cr_expect_eq(ep.tls, 0);
    char want[128];
    snprintf(want, sizeof want, "/%s/%u", proxied ? "proxy" : "port", (unsigned)port);
    cr_expect(strstr(ep.url, want), "%s", ep.url);
    cr_expect_eq(ep.header[0] == '\0', proxied, "header \"%s\"", ep.header);
    struct buf body = {0};
    long code = 0;
    /* the server is starting: python3's http.server took over 5 s under
     * a load of 15 */
    for (time_t until = time(NULL) + 30; code != 200 && time(NULL) < until;) {
        body.n = 0;
        code = http_get(&ep, "/hello.txt", &body);
        if (code != 200)
            usleep(100000);
    }
    cr_expect_eq(code, 200);
    cr_expect(body.p && strstr(body.p, "served-from-the-sandbox"), "%s", body.p ? body.p : "");
    free(body.p);
    cr_expect_eq(sbx_port_resolve(h, (unsigned)port + 1, &ep, NULL, &err), SBX_E_NOT_FOUND);
    /* a second process knows the declared ports (metadata) */
    sbx_handle *again = NULL;
    cr_assert_eq(sbx_attach(prov, key, sbx_handle_ref(h), NULL, &again, &err), SBX_OK, "%s",
                 err.message);
    cr_expect_eq(sbx_port_resolve(again, port, &ep, NULL, &err), SBX_OK, "%s", err.message);
    sbx_release(again);
    cr_expect_eq(sbx_proc_signal(h, id, 15, NULL, &err), SBX_OK, "%s", err.message);
    destroy(h, key);
}

Test(opensandbox_procs, a_declared_port_is_reachable)
{
    serve_and_reach(NULL, "ports-direct", 0);
}

Test(opensandbox_procs, a_declared_port_through_the_server_proxy)
{
    serve_and_reach("    use_server_proxy: true\n", "ports-proxy", 1);
}

Test(opensandbox_procs, reserved_ports_cannot_be_declared)
{
    open_or_die(NULL);
    uint16_t ports[] = {8080, 44772, 0};
    struct sbx_create_options co;
    memset(&co, 0, sizeof co);
    co.size = sizeof co;
    co.ports = ports;
    sbx_error err;
    sbx_handle *h = NULL;
    cr_expect_eq(sbx_create(prov, "ports-reserved", &co, NULL, &h, &err), SBX_E_INVALID);
    cr_expect(strstr(err.message, "44772"), "%s", err.message);
}

static void *fire_soon(void *arg)
{
    usleep(300000);
    sbx_cancel_fire(arg);
    return NULL;
}

Test(opensandbox_procs, a_waiting_read_is_cancelled)
{
    open_or_die(NULL);
    sbx_handle *h = ph_create(prov, "procs-cancel");
    char id[SBX_PROC_ID_MAX];
    start(h, "sleep 20", 0, id);
    sbx_cancel *c = NULL;
    cr_assert_eq(sbx_cancel_new(&c), SBX_OK);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, fire_soon, c), 0);
    struct sbx_proc_read_args a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.wait_ms = 10000;
    struct sbx_proc_read_result res;
    memset(&res, 0, sizeof res);
    res.size = sizeof res;
    sbx_error err;
    time_t t0 = time(NULL);
    cr_expect_eq(sbx_proc_read(h, id, &a, &res, c, &err), SBX_E_CANCELLED, "%s", err.message);
    cr_expect(time(NULL) - t0 < 3, "the cancelled read went on waiting");
    pthread_join(t, NULL);
    sbx_cancel_free(c);
    cr_expect_eq(sbx_proc_signal(h, id, 9, NULL, &err), SBX_OK, "%s", err.message);
    destroy(h, "procs-cancel");
}
