/*
 * test_cli_yield.c - libsbx's agent-style calls, sbx_proc_exec_yield and
 * sbx_proc_send_yield (host/api/proc_yield.c), against the scripted
 * processes of yield_fake.c: the per-stream cap is exact and the rest is
 * read later from the returned cursor, with nothing repeated or skipped;
 * an ended process returns at once with its status; a quiet one at the
 * yield; lost bytes are counted; input comes back; bad arguments are
 * refused.
 */
#include <criterion/criterion.h>

#include <sbx/sbx.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef YIELD_FAKE_DIR
#error "YIELD_FAKE_DIR must name the directory of yieldfake.so"
#endif

static sbx_ctx *sctx;
static sbx_handle *h;

static void setup(void)
{
    char dir[] = "/tmp/sbx-yield-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char config[64];
    snprintf(config, sizeof config, "%s/sbx.yaml", dir);
    FILE *f = fopen(config, "w");
    cr_assert_not_null(f);
    fputs("default_provider: yieldfake\n", f);
    fclose(f);
    struct sbx_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.config_path = config;
    o.plugin_path = YIELD_FAKE_DIR;
    o.provider = "yieldfake";
    o.ignore_environment = true;
    sbx_error err;
    cr_assert_eq(sbx_open(&o, &sctx, &err), SBX_OK, "%s", err.message);
    remove(config);
    remove(dir);
    sbx_provider *p;
    cr_assert_eq(sbx_provider_lookup(sctx, "yieldfake", &p, &err), SBX_OK, "%s", err.message);
    struct sbx_create_options co;
    memset(&co, 0, sizeof co);
    co.size = sizeof co;
    cr_assert_eq(sbx_create(p, "k", &co, NULL, &h, &err), SBX_OK, "%s", err.message);
}

static void teardown(void)
{
    sbx_release(h);
    sbx_close(sctx);
}

TestSuite(cli_yield, .init = setup, .fini = teardown, .timeout = 30);

/* A sink that keeps everything and checks the stream's pattern from `at`. */
struct pattern_sink {
    uint64_t at;   /* stream position of the next byte */
    uint64_t bytes;
    bool broken;   /* a byte out of order: repeated or skipped */
};

static int pattern_write(void *ctx, const void *buf, size_t len)
{
    struct pattern_sink *p = ctx;
    const char *b = buf;
    for (size_t i = 0; i < len; i++, p->at++)
        if (b[i] != (char)('a' + p->at % 26))
            p->broken = true;
    p->bytes += len;
    return 0;
}

static long long ms_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int exec_yield(const char *out, const char *err_bytes, const char *state,
                      const char *chunk, uint32_t yield_ms, uint64_t max,
                      uint64_t buffer, struct pattern_sink *so, struct pattern_sink *se,
                      struct sbx_proc_yield_result *r, sbx_error *e)
{
    const char *argv[] = {"fake", out, err_bytes, state, chunk, NULL};
    struct sbx_proc_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.size = sizeof spec;
    spec.argv = argv;
    spec.buffer_bytes = buffer;
    struct sbx_sink o = SBX_SINK_INIT(so, pattern_write), es = SBX_SINK_INIT(se, pattern_write);
    struct sbx_proc_yield_args a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.yield_ms = yield_ms;
    a.max_bytes = max;
    a.out = &o;
    a.err = &es;
    memset(r, 0, sizeof *r);
    r->size = sizeof *r;
    return sbx_proc_exec_yield(h, &spec, &a, r, NULL, e);
}

static int send_yield(const char *id, const char *data, uint32_t flags, uint32_t yield_ms,
                      uint64_t max, uint64_t oc, uint64_t ec, const struct sbx_sink *o,
                      const struct sbx_sink *es, struct sbx_proc_yield_result *r,
                      sbx_error *e)
{
    struct sbx_proc_yield_args a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.yield_ms = yield_ms;
    a.max_bytes = max;
    a.out_cursor = oc;
    a.err_cursor = ec;
    a.out = o;
    a.err = es;
    memset(r, 0, sizeof *r);
    r->size = sizeof *r;
    return sbx_proc_send_yield(h, id, data, data ? strlen(data) : 0, flags, &a, r, NULL, e);
}

Test(cli_yield, an_ended_process_returns_at_once_with_its_status)
{
    struct pattern_sink so = {0}, se = {0};
    struct sbx_proc_yield_result r;
    sbx_error e;
    long long t0 = ms_now();
    cr_assert_eq(exec_yield("100", "7", "exit:3", "0", 10000, 0, 0, &so, &se, &r, &e),
                 SBX_OK, "%s", e.message);
    cr_assert_lt(ms_now() - t0, 2000, "waited for the yield although it had ended");
    cr_assert_str_eq(r.id, "fp-1");
    cr_assert_eq(r.state, SBX_PROC_EXITED);
    cr_assert_eq(r.exit_code, 3);
    cr_assert(r.eof);
    cr_assert(!r.truncated);
    cr_assert_eq(r.out_bytes, 100);
    cr_assert_eq(r.err_bytes, 7);
    cr_assert_eq(r.out_cursor, 100);
    cr_assert_eq(r.err_cursor, 7);
    cr_assert_eq(so.bytes, 100);
    cr_assert_eq(se.bytes, 7);
    cr_assert(!so.broken && !se.broken);
}

/* 300 000 bytes in reads of at most 7 000, a cap of 100 000: exactly
 * 100 000 per call, three calls, then the end; every byte once. */
Test(cli_yield, the_cap_is_exact_and_the_rest_is_read_from_the_cursor)
{
    struct pattern_sink so = {0}, se = {0};
    struct sbx_proc_yield_result r;
    sbx_error e;
    cr_assert_eq(exec_yield("300000", "0", "exit:0", "7000", 10000, 100000, 0, &so, &se,
                            &r, &e),
                 SBX_OK, "%s", e.message);
    cr_assert_eq(r.out_bytes, 100000);
    cr_assert_eq(so.bytes, 100000);
    cr_assert_eq(r.out_cursor, 100000);
    cr_assert(r.truncated);
    cr_assert(!r.eof);
    cr_assert_eq(r.state, SBX_PROC_EXITED, "the state is known even when truncated");
    char id[SBX_PROC_ID_MAX];
    snprintf(id, sizeof id, "%s", r.id);
    struct sbx_sink o = SBX_SINK_INIT(&so, pattern_write), es = SBX_SINK_INIT(&se, pattern_write);
    uint64_t cursor = r.out_cursor;
    for (int call = 0; call < 2; call++) {
        cr_assert_eq(send_yield(id, NULL, 0, 10000, 100000, cursor, 0, &o, &es, &r, &e),
                     SBX_OK, "%s", e.message);
        cr_assert_eq(r.out_bytes, 100000, "call %d", call);
        cursor = r.out_cursor;
    }
    cr_assert_eq(cursor, 300000);
    /* the last call reached the cap exactly at the end */
    cr_assert_eq(send_yield(id, NULL, 0, 10000, 100000, cursor, 0, &o, &es, &r, &e),
                 SBX_OK, "%s", e.message);
    cr_assert(r.eof);
    cr_assert_eq(r.out_bytes, 0);
    cr_assert_eq(so.bytes, 300000);
    cr_assert(!so.broken, "a byte was repeated or skipped");
}

Test(cli_yield, a_quiet_process_returns_at_the_yield_with_its_id)
{
    struct pattern_sink so = {0}, se = {0};
    struct sbx_proc_yield_result r;
    sbx_error e;
    long long t0 = ms_now();
    cr_assert_eq(exec_yield("10", "0", "run", "0", 300, 0, 0, &so, &se, &r, &e), SBX_OK,
                 "%s", e.message);
    long long took = ms_now() - t0;
    cr_assert_geq(took, 290, "returned after %lld ms", took);
    cr_assert_lt(took, 2000, "returned after %lld ms", took);
    cr_assert_eq(r.state, SBX_PROC_RUNNING);
    cr_assert(!r.eof && !r.truncated);
    cr_assert_eq(r.out_bytes, 10);
    cr_assert_str_eq(r.id, "fp-1");
    /* yield 0: what is there now, at once */
    t0 = ms_now();
    struct sbx_sink o = SBX_SINK_INIT(&so, pattern_write);
    cr_assert_eq(send_yield("fp-1", NULL, 0, 0, 0, r.out_cursor, 0, &o, NULL, &r, &e),
                 SBX_OK, "%s", e.message);
    cr_assert_lt(ms_now() - t0, 200);
}

Test(cli_yield, bytes_dropped_by_the_replay_buffer_are_counted)
{
    /* the sink sees the bytes from 4000 on: the oldest of a 1000-byte buffer */
    struct pattern_sink so = {.at = 4000}, se = {0};
    struct sbx_proc_yield_result r;
    sbx_error e;
    cr_assert_eq(exec_yield("5000", "0", "exit:0", "0", 1000, 0, 1000, &so, &se, &r, &e),
                 SBX_OK, "%s", e.message);
    cr_assert_eq(r.out_lost, 4000);
    cr_assert_eq(r.out_bytes, 1000);
    cr_assert_eq(r.out_cursor, 5000);
    cr_assert(!so.broken);
    cr_assert(r.eof);
}

Test(cli_yield, input_comes_back_from_the_cursor)
{
    struct pattern_sink so = {0}, se = {0};
    struct sbx_proc_yield_result r;
    sbx_error e;
    cr_assert_eq(exec_yield("26", "0", "run", "0", 0, 0, 0, &so, &se, &r, &e), SBX_OK, "%s",
                 e.message);
    struct pattern_sink echo = {.at = 26};
    struct sbx_sink es = SBX_SINK_INIT(&echo, pattern_write);
    /* "abc" written at stream position 26 reads back as the pattern there */
    char id[SBX_PROC_ID_MAX];
    snprintf(id, sizeof id, "%s", r.id);
    cr_assert_eq(send_yield(id, "abc", 0, 2000, 0, 26, 0, &es, NULL, &r, &e), SBX_OK, "%s",
                 e.message);
    cr_assert_eq(r.out_bytes, 3);
    cr_assert_eq(r.out_cursor, 29);
    cr_assert(!echo.broken);
    cr_assert_eq(r.state, SBX_PROC_RUNNING);
}

Test(cli_yield, bad_arguments_and_unknown_ids_are_refused)
{
    struct sbx_proc_yield_result r;
    memset(&r, 0, sizeof r);
    r.size = sizeof r;
    sbx_error e;
    const char *argv[] = {"fake", "1", "0", "run", "0", NULL};
    struct sbx_proc_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.size = sizeof spec;
    spec.argv = argv;
    cr_assert_eq(sbx_proc_exec_yield(h, &spec, NULL, &r, NULL, &e), SBX_E_INVALID);
    cr_assert_not_null(strstr(e.message, "sbx_proc_yield_args"), "%s", e.message);
    struct sbx_proc_yield_args a;
    memset(&a, 0, sizeof a);
    cr_assert_eq(sbx_proc_exec_yield(h, &spec, &a, &r, NULL, &e), SBX_E_INVALID,
                 "size not set");
    a.size = sizeof a;
    cr_assert_eq(sbx_proc_send_yield(h, "nosuch", NULL, 0, 0, &a, &r, NULL, &e),
                 SBX_E_NOT_FOUND, "%s", e.message);
    cr_assert_eq(sbx_proc_send_yield(h, "bad id!", NULL, 0, 0, &a, &r, NULL, &e),
                 SBX_E_INVALID, "%s", e.message);
    /* a start that fails leaves no id */
    const char *missing[] = {"missing", NULL};
    spec.argv = missing;
    snprintf(r.id, sizeof r.id, "stale");
    cr_assert_eq(sbx_proc_exec_yield(h, &spec, &a, &r, NULL, &e), SBX_E_NO_COMMAND, "%s",
                 e.message);
    cr_assert_str_empty(r.id);
}
