/*
 * test_procs.c - processes of the `local` provider (SBX_CAP_PROCESSES,
 * SBX_CAP_PTY), held by the sandbox's supervisor outside this process:
 * PTY size, isatty, resize, ^C and EOF; a 1 MiB paste; output beyond the
 * replay buffer (lost exact, nothing repeated); reattach from a second
 * host process after the first was SIGKILLed mid-stream; 32 at once;
 * another sandbox's id; a flooding writer (memory bounded); the supervisor
 * killed under a running process; destroy killing everything; idle exit.
 */
#include "harness.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

TestSuite(local_procs, .init = harness_setup, .fini = harness_teardown, .timeout = 60);

/* ---- helpers ----------------------------------------------------------- */

static int start_in(sbx_sandbox *sb, uint32_t flags, const char *const *argv, uint16_t rows,
                    uint16_t cols, uint64_t buffer, char id[SBX_PROC_ID_MAX])
{
    struct sbx_proc_spec spec = {.size = sizeof spec, .flags = flags, .argv = argv,
                                 .rows = rows, .cols = cols, .buffer_bytes = buffer};
    harness_call_init(&H.call);
    return H.ops->proc_start(sb, &H.call, &spec, id);
}

static void start(uint32_t flags, const char *const *argv, uint16_t rows, uint16_t cols,
                  uint64_t buffer, char id[SBX_PROC_ID_MAX])
{
    cr_assert_eq(start_in(H.sb, flags, argv, rows, cols, buffer, id), SBX_OK,
                 "proc_start %s: %s", argv[0], H.call.msg);
}

struct stream {
    struct buf_sink out, err;
    uint64_t oc, ec;         /* cursors */
    uint64_t olost, elost;
    struct sbx_proc_read_result res;
};

/* One read of up to wait_ms. */
static int read_once(sbx_sandbox *sb, const char *id, struct stream *s, uint32_t wait_ms)
{
    struct sbx_sink o = buf_sink(&s->out), e = buf_sink(&s->err);
    struct sbx_proc_read_args a = {.size = sizeof a, .wait_ms = wait_ms, .out_cursor = s->oc,
                                   .err_cursor = s->ec, .out = &o, .err = &e};
    memset(&s->res, 0, sizeof s->res);
    s->res.size = sizeof s->res;
    size_t olen = s->out.len, elen = s->err.len;
    harness_call_init(&H.call);
    int rc = H.ops->proc_read(sb, &H.call, id, &a, &s->res);
    if (rc != SBX_OK)
        return rc;
    /* the cursor contract: new = old + lost + delivered */
    cr_assert_eq(s->res.out_cursor, s->oc + s->res.out_lost + (s->out.len - olen));
    cr_assert_eq(s->res.err_cursor, s->ec + s->res.err_lost + (s->err.len - elen));
    s->oc = s->res.out_cursor;
    s->ec = s->res.err_cursor;
    s->olost += s->res.out_lost;
    s->elost += s->res.err_lost;
    return SBX_OK;
}

/* Read until the output holds needle (or the end, with needle NULL). */
static void read_until(const char *id, struct stream *s, const char *needle, double secs)
{
    double end = now_seconds() + secs;
    for (;;) {
        if (needle && s->out.data && strstr(buf_sink_str(&s->out), needle))
            return;
        if (!needle && s->res.eof)
            return;
        cr_assert(!s->res.eof, "ended without \"%s\"; output: %s", needle ? needle : "",
                  buf_sink_str(&s->out));
        cr_assert_lt(now_seconds(), end, "no \"%s\" in %.1f s; output: %s",
                     needle ? needle : "(end)", secs, buf_sink_str(&s->out));
        cr_assert_eq(read_once(H.sb, id, s, 200), SBX_OK, "proc_read: %s", H.call.msg);
    }
}

static void stream_free(struct stream *s)
{
    buf_sink_free(&s->out);
    buf_sink_free(&s->err);
}

static int write_in(const char *id, const void *data, size_t len, uint32_t flags)
{
    harness_call_init(&H.call);
    return H.ops->proc_write(H.sb, &H.call, id, data, len, flags);
}

static char *state_file(const char *name)
{
    static char p[1024];
    char hash[SBX_KEY_HASH_LEN + 1];
    harness_key_hash(H_KEY, hash);
    snprintf(p, sizeof p, "%s/%s.state/%s", H.root, hash, name);
    return p;
}

static int supervisor_pid(void)
{
    char buf[32];
    if (slurp_small(state_file("supervisor.pid"), buf, sizeof buf) <= 0)
        return 0;
    return atoi(buf);
}

static long rss_kb(int pid)
{
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    if (slurp_small(path, buf, sizeof buf) < 0)
        return -1;
    const char *p = strstr(buf, "VmRSS:");
    return p ? atol(p + 6) : -1;
}

struct find_state {
    const char *id;
    int found;
    uint32_t state;
};

static int find_entry(void *ctx, const struct sbx_proc_info *info)
{
    struct find_state *f = ctx;
    if (strcmp(info->id, f->id) == 0) {
        f->found = 1;
        f->state = info->state;
    }
    return 0;
}

/* Wait (polling proc_list, reading nothing) until the process ended. */
static void wait_ended(const char *id)
{
    double end = now_seconds() + 10;
    for (;;) {
        struct find_state f = {id, 0, 0};
        struct sbx_proc_list_sink ls = {sizeof ls, &f, find_entry};
        harness_call_init(&H.call);
        cr_assert_eq(H.ops->proc_list(H.sb, &H.call, &ls), SBX_OK, "%s", H.call.msg);
        cr_assert(f.found, "%s is not listed", id);
        if (f.state == SBX_PROC_EXITED)
            return;
        cr_assert_lt(now_seconds(), end, "%s did not end", id);
        usleep(20 * 1000);
    }
}

/* ---- PTY --------------------------------------------------------------- */

Test(local_procs, pty_size_isatty_resize_and_ctrl_c)
{
    static const char *const argv[] = {
        "/bin/sh", "-c",
        "trap 'echo winch; stty size' WINCH; stty size; [ -t 0 ] && [ -t 1 ] && [ -t 2 ] "
        "&& echo isatty; echo TERM=$TERM; echo ready; while :; do sleep 0.05; done",
        NULL};
    char id[SBX_PROC_ID_MAX];
    start(SBX_PROC_PTY, argv, 30, 90, 0, id);
    struct stream s = {0};
    read_until(id, &s, "ready", 10);
    const char *o = buf_sink_str(&s.out);
    cr_assert(strstr(o, "30 90"), "stty size: %s", o);
    cr_assert(strstr(o, "isatty"), "not a terminal: %s", o);
    cr_assert(strstr(o, "TERM=xterm-256color"), "%s", o);
    cr_assert_eq(s.ec, 0, "a PTY is one stream");

    harness_call_init(&H.call);
    cr_assert_eq(H.ops->proc_resize(H.sb, &H.call, id, 41, 123), SBX_OK, "%s", H.call.msg);
    read_until(id, &s, "41 123", 10);

    /* ^C through the line discipline: SIGINT to the foreground group */
    cr_assert_eq(write_in(id, "\x03", 1, 0), SBX_OK, "%s", H.call.msg);
    read_until(id, &s, NULL, 10);
    cr_assert_eq(s.res.state, SBX_PROC_EXITED);
    cr_assert_eq(s.res.term_signal, SIGINT, "exit %d signal %d", s.res.exit_code,
                 s.res.term_signal);
    cr_assert_eq(s.res.exit_code, -1);
    stream_free(&s);
}

Test(local_procs, pty_eof_ends_cat_and_echo_is_on)
{
    static const char *const argv[] = {"cat", NULL};
    char id[SBX_PROC_ID_MAX];
    start(SBX_PROC_PTY, argv, 0, 0, 0, id);
    cr_assert_eq(write_in(id, "hello\n", 6, SBX_PROC_WRITE_CLOSE), SBX_OK, "%s", H.call.msg);
    struct stream s = {0};
    read_until(id, &s, NULL, 10);
    cr_assert_eq(s.res.exit_code, 0, "cat: exit %d signal %d; %s", s.res.exit_code,
                 s.res.term_signal, buf_sink_str(&s.out));
    /* the echo, then cat's copy: the terminal's line discipline applies */
    cr_assert(strstr(buf_sink_str(&s.out), "hello\r\nhello\r\n"), "%s", buf_sink_str(&s.out));
    cr_assert_eq(write_in(id, "x", 1, 0), SBX_E_INVALID, "writing after the end");
    harness_call_init(&H.call);
    cr_assert_eq(H.ops->proc_signal(H.sb, &H.call, id, SIGTERM), SBX_OK,
                 "signalling an ended process: %s", H.call.msg);
    stream_free(&s);

    /* pipes: no PTY to resize; a bad signal; a write after the close */
    static const char *const sl[] = {"sleep", "5", NULL};
    start(0, sl, 0, 0, 0, id);
    harness_call_init(&H.call);
    cr_assert_eq(H.ops->proc_resize(H.sb, &H.call, id, 10, 10), SBX_E_INVALID, "%s",
                 H.call.msg);
    cr_assert_eq(H.ops->proc_signal(H.sb, &H.call, id, 99), SBX_E_INVALID, "%s", H.call.msg);
    cr_assert_eq(write_in(id, "", 0, SBX_PROC_WRITE_CLOSE), SBX_OK, "%s", H.call.msg);
    cr_assert_eq(write_in(id, "x", 1, 0), SBX_E_INVALID, "writing after the close");
    harness_call_init(&H.call);
    cr_assert_eq(H.ops->proc_signal(H.sb, &H.call, id, SIGKILL), SBX_OK, "%s", H.call.msg);
    memset(&s, 0, sizeof s);
    read_until(id, &s, NULL, 10);
    cr_assert_eq(s.res.term_signal, SIGKILL);
    stream_free(&s);
}

static void sha256_hex(const void *data, size_t len, char out[65])
{
    unsigned char md[32];
    unsigned int n = 0;
    EVP_Digest(data, len, md, &n, EVP_sha256(), NULL);
    for (unsigned i = 0; i < 32; i++)
        sprintf(out + 2 * i, "%02x", md[i]);
}

Test(local_procs, a_1_mib_paste_arrives_whole_on_a_pty_and_a_pipe)
{
    const size_t len = 1 << 20;
    char *data = malloc(len);
    cr_assert_not_null(data);
    for (size_t i = 0; i < len; i++)
        data[i] = (i % 64 == 63) ? '\n' : (char)('a' + (i * 7) % 26);
    char want[65];
    sha256_hex(data, len, want);

    /* PTY: raw mode, no echo (the paste is data, not lines to edit) */
    static const char *const pty_argv[] = {
        "/bin/sh", "-c", "stty raw -echo; echo ready; head -c 1048576 | sha256sum", NULL};
    char id[SBX_PROC_ID_MAX];
    start(SBX_PROC_PTY, pty_argv, 0, 0, 0, id);
    struct stream s = {0};
    read_until(id, &s, "ready", 10);
    cr_assert_eq(write_in(id, data, len, 0), SBX_OK, "%s", H.call.msg);
    read_until(id, &s, NULL, 20);
    cr_assert(strstr(buf_sink_str(&s.out), want), "PTY: want %s, got %s", want,
              buf_sink_str(&s.out));
    stream_free(&s);

    /* pipes: stdin closed after the bytes */
    static const char *const argv[] = {"sha256sum", NULL};
    start(0, argv, 0, 0, 0, id);
    cr_assert_eq(write_in(id, data, len, SBX_PROC_WRITE_CLOSE), SBX_OK, "%s", H.call.msg);
    memset(&s, 0, sizeof s);
    read_until(id, &s, NULL, 20);
    cr_assert(strstr(buf_sink_str(&s.out), want), "pipe: want %s, got %s", want,
              buf_sink_str(&s.out));
    cr_assert_eq(s.res.exit_code, 0);
    free(data);
    stream_free(&s);
}

/* ---- replay buffers ---------------------------------------------------- */

Test(local_procs, output_beyond_the_buffer_is_lost_exactly_and_never_repeated)
{
    /* seq 1 200000 is 1288895 bytes; the buffer keeps 64 KiB of it */
    static const char *const argv[] = {"sh", "-c", "seq 1 200000; echo err >&2", NULL};
    const uint64_t buffer = 64 << 10;
    char id[SBX_PROC_ID_MAX];
    start(0, argv, 0, 0, buffer, id);
    /* let it end without reading a byte */
    wait_ended(id);

    char *seq = malloc(1300000);
    size_t total = 0;
    for (int i = 1; i <= 200000; i++)
        total += (size_t)sprintf(seq + total, "%d\n", i);
    cr_assert_eq(total, 1288895);

    struct stream s = {0};
    read_until(id, &s, NULL, 10);
    cr_assert_eq(s.oc, total, "the cursor ends at the stream's length");
    cr_assert_eq(s.olost + s.out.len, total);
    cr_assert_eq(s.olost, total - buffer, "lost %llu of %zu",
                 (unsigned long long)s.olost, total);
    cr_assert(memcmp(s.out.data, seq + s.olost, s.out.len) == 0,
              "the bytes kept are exactly the stream's last ones");
    cr_assert_str_eq(buf_sink_str(&s.err), "err\n");

    /* read again from where it ended: nothing, never a byte twice */
    size_t had = s.out.len;
    cr_assert_eq(read_once(H.sb, id, &s, 0), SBX_OK, "%s", H.call.msg);
    cr_assert_eq(s.out.len, had);
    cr_assert(s.res.eof);
    /* and from 0 once more: the same tail, the same count lost */
    struct stream again = {0};
    cr_assert_eq(read_once(H.sb, id, &again, 0), SBX_OK);
    cr_assert_eq(again.res.out_lost, total - buffer);
    free(seq);
    stream_free(&s);
    stream_free(&again);
}

/* ---- reattach from another host process -------------------------------- */

static int run_prog(const char *const *args, char *out, size_t cap)
{
    int p[2];
    cr_assert_eq(pipe(p), 0);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(p[1], 1);
        close(p[0]);
        execv(SBX_TEST_BUILD_DIR "/tests/local/local_proc_prog", (char *const *)args);
        _exit(127);
    }
    close(p[1]);
    size_t n = 0;
    ssize_t r;
    while (n + 1 < cap && (r = read(p[0], out + n, cap - 1 - n)) > 0)
        n += (size_t)r;
    out[n] = '\0';
    close(p[0]);
    int ws;
    waitpid(pid, &ws, 0);
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128;
}

Test(local_procs, a_second_host_process_continues_after_the_first_was_sigkilled)
{
    char root[400];
    snprintf(root, sizeof root, "%s/r2", H.tmp);
    /* 20000 numbered lines, paced: about 2 s */
    const char *startargs[] = {"local_proc_prog", root, "reattach-key", "start", "awk",
                               "BEGIN{for(i=1;i<=20000;i++){print \"line-\" i; "
                               "if(i%200==0){fflush(); system(\"sleep 0.02\")}}}",
                               NULL};
    char out[1024];
    cr_assert_eq(run_prog(startargs, out, sizeof out), 0, "start: %s", out);
    char ref[SBX_REF_MAX], id[SBX_PROC_ID_MAX];
    cr_assert_eq(sscanf(out, "%511s %127s", ref, id), 2, "%s", out);

    char cursor[512], data[512];
    snprintf(cursor, sizeof cursor, "%s/cursor", H.tmp);
    snprintf(data, sizeof data, "%s/data", H.tmp);
    const char *follow[] = {"local_proc_prog", root, "reattach-key", ref, "follow", id,
                            cursor, data, NULL};
    /* the first follower: killed with SIGKILL once it has read some */
    pid_t first = fork();
    if (first == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        execv(SBX_TEST_BUILD_DIR "/tests/local/local_proc_prog", (char *const *)follow);
        _exit(127);
    }
    double end = now_seconds() + 10;
    char cur[64] = "";
    while (atoll(cur) < 30000) {
        cr_assert_lt(now_seconds(), end, "the first follower read nothing");
        usleep(5000);
        slurp_small(cursor, cur, sizeof cur);
    }
    kill(first, SIGKILL);
    waitpid(first, NULL, 0);
    slurp_small(cursor, cur, sizeof cur);
    long long at_kill = atoll(cur);
    cr_assert_lt(at_kill, 150000, "the process had ended already (%lld): not mid-stream",
                 at_kill);

    /* the second continues from the cursor the first left */
    cr_assert_eq(run_prog(follow, out, sizeof out), 0, "follow: %s", out);
    cr_assert_str_eq(out, "exit 0 lost 0\n");
    struct stat st;
    cr_assert_eq(stat(data, &st), 0);
    size_t total = 0;
    char *want = malloc(300000);
    for (int i = 1; i <= 20000; i++)
        total += (size_t)sprintf(want + total, "line-%d\n", i);
    cr_assert_eq((size_t)st.st_size, total, "%lld bytes, want %zu", (long long)st.st_size,
                 total);
    FILE *f = fopen(data, "r");
    char *got = malloc(total);
    cr_assert_eq(fread(got, 1, total, f), total);
    fclose(f);
    cr_assert(memcmp(got, want, total) == 0, "nothing lost, nothing repeated");
    free(got);
    free(want);

    /* the sandbox of the other root, destroyed by it too */
    struct test_host th;
    harness_host_init(&th, root);
    void *st2 = NULL;
    harness_call_init(&H.call);
    cr_assert_eq(H.ops->init(&th.host, &H.call, &st2), SBX_OK);
    char hash[SBX_KEY_HASH_LEN + 1];
    harness_key_hash("reattach-key", hash);
    struct sbx_destroy_args da = {sizeof da, "reattach-key", hash, ref};
    cr_assert_eq(H.ops->destroy(st2, &H.call, &da), SBX_OK, "%s", H.call.msg);
    H.ops->fini(st2);
}

/* ---- many, foreign ids --------------------------------------------------- */

static int count_entry(void *ctx, const struct sbx_proc_info *info)
{
    int *n = ctx;
    cr_assert_not_null(info->id);
    (*n)++;
    return 0;
}

Test(local_procs, thirty_two_processes_at_once)
{
    char ids[32][SBX_PROC_ID_MAX];
    for (int i = 0; i < 32; i++) {
        char script[128];
        snprintf(script, sizeof script, "echo start-%d; sleep 0.5; echo end-%d", i, i);
        const char *argv[] = {"/bin/sh", "-c", script, NULL};
        start(0, argv, 0, 0, 0, ids[i]);
    }
    int n = 0;
    struct sbx_proc_list_sink ls = {sizeof ls, &n, count_entry};
    harness_call_init(&H.call);
    cr_assert_eq(H.ops->proc_list(H.sb, &H.call, &ls), SBX_OK, "%s", H.call.msg);
    cr_assert_eq(n, 32);
    for (int i = 0; i < 32; i++) {
        struct stream s = {0};
        read_until(ids[i], &s, NULL, 10);
        char want[64];
        snprintf(want, sizeof want, "start-%d\nend-%d\n", i, i);
        cr_assert_str_eq(buf_sink_str(&s.out), want);
        stream_free(&s);
    }
}

Test(local_procs, another_sandboxs_id_and_unknown_ids_are_not_found)
{
    struct create_args_buf ocb, cb;
    char oref[SBX_REF_MAX], ref[SBX_REF_MAX];
    sbx_sandbox *other = NULL;
    harness_call_init(&H.call);
    cr_assert_eq(H.ops->create(H.state, &H.call, harness_create_args(&ocb, "other"), oref,
                               &other),
                 SBX_OK);
    static const char *const argv[] = {"sleep", "5", NULL};
    char theirs[SBX_PROC_ID_MAX], mine[SBX_PROC_ID_MAX];
    cr_assert_eq(start_in(other, 0, argv, 0, 0, 0, theirs), SBX_OK, "%s", H.call.msg);
    start(0, argv, 0, 0, 0, mine);

    struct stream s = {0};
    cr_assert_eq(read_once(H.sb, theirs, &s, 0), SBX_E_NOT_FOUND, "%s", H.call.msg);
    harness_call_init(&H.call);
    cr_assert_eq(H.ops->proc_signal(H.sb, &H.call, theirs, SIGKILL), SBX_E_NOT_FOUND);
    cr_assert_eq(write_in(theirs, "x", 1, 0), SBX_E_NOT_FOUND);
    cr_assert_eq(read_once(H.sb, "p0123456789abcdef", &s, 0), SBX_E_NOT_FOUND);
    /* and the other way round */
    cr_assert_eq(read_once(other, mine, &s, 0), SBX_E_NOT_FOUND);
    cr_assert_eq(read_once(other, theirs, &s, 0), SBX_OK, "%s", H.call.msg);

    /* a sandbox that never started a process has none, and no supervisor */
    sbx_sandbox *third = NULL;
    cr_assert_eq(H.ops->create(H.state, &H.call, harness_create_args(&cb, "third"), ref, &third),
                 SBX_OK);
    int n = 0;
    struct sbx_proc_list_sink ls = {sizeof ls, &n, count_entry};
    cr_assert_eq(H.ops->proc_list(third, &H.call, &ls), SBX_OK, "%s", H.call.msg);
    cr_assert_eq(n, 0);
    cr_assert_eq(read_once(third, mine, &s, 0), SBX_E_NOT_FOUND);
    H.ops->release(third);

    struct sbx_destroy_args da = {sizeof da, "other", ocb.hash, oref};
    cr_assert_eq(H.ops->destroy(H.state, &H.call, &da), SBX_OK, "%s", H.call.msg);
    H.ops->release(other);
    stream_free(&s);
}

Test(local_procs, a_bad_cwd_or_program_fails_the_start)
{
    static const char *const argv[] = {"true", NULL};
    struct sbx_proc_spec spec = {.size = sizeof spec, .argv = argv, .cwd = "../.."};
    char id[SBX_PROC_ID_MAX];
    harness_call_init(&H.call);
    cr_assert_eq(H.ops->proc_start(H.sb, &H.call, &spec, id), SBX_E_INVALID, "%s", H.call.msg);
    spec.cwd = "missing";
    cr_assert_eq(H.ops->proc_start(H.sb, &H.call, &spec, id), SBX_E_INVALID, "%s", H.call.msg);
    static const char *const nope[] = {"no-such-program-here", NULL};
    spec.cwd = NULL;
    spec.argv = nope;
    cr_assert_eq(H.ops->proc_start(H.sb, &H.call, &spec, id), SBX_E_NO_COMMAND, "%s",
                 H.call.msg);
}

/* ---- hostile processes and a dead supervisor --------------------------- */

Test(local_procs, a_flooding_process_keeps_memory_bounded)
{
    static const char *const argv[] = {"cat", "/dev/zero", NULL};
    char id[SBX_PROC_ID_MAX];
    long mine0 = rss_kb(getpid());
    start(0, argv, 0, 0, 0, id);
    int sup = supervisor_pid();
    cr_assert_gt(sup, 0);
    struct stream s = {0};
    double end = now_seconds() + 2;
    while (now_seconds() < end) {
        /* read slowly, a small part each time (into no sink) */
        struct sbx_proc_read_args a = {.size = sizeof a, .wait_ms = 100, .out_cursor = s.oc,
                                       .max_bytes = 4096};
        s.res = (struct sbx_proc_read_result){.size = sizeof s.res};
        harness_call_init(&H.call);
        cr_assert_eq(H.ops->proc_read(H.sb, &H.call, id, &a, &s.res), SBX_OK, "%s", H.call.msg);
        s.olost += s.res.out_lost;
        s.oc = s.res.out_cursor;
        usleep(50 * 1000);
    }
    long sup_rss = rss_kb(sup), mine1 = rss_kb(getpid());
    cr_log_info("flood: %llu bytes lost in 2 s; supervisor RSS %ld KiB; this process grew "
                "by %ld KiB",
                (unsigned long long)s.olost, sup_rss, mine1 - mine0);
    cr_assert_gt(s.olost, 100u << 20, "a writer this fast loses bytes: %llu",
                 (unsigned long long)s.olost);
    cr_assert_lt(sup_rss, 24 * 1024, "the supervisor holds %ld KiB", sup_rss);
    cr_assert_lt(mine1 - mine0, 8 * 1024, "this process grew by %ld KiB", mine1 - mine0);
    harness_call_init(&H.call);
    cr_assert_eq(H.ops->proc_signal(H.sb, &H.call, id, SIGKILL), SBX_OK, "%s", H.call.msg);
    struct stream t = {.oc = s.oc};
    read_until(id, &t, NULL, 10);
    cr_assert_eq(t.res.term_signal, SIGKILL);
    stream_free(&t);
}

struct bg_read {
    const char *id;
    uint64_t cursor;
    int rc;
    double secs;
    char msg[2048];
};

static void *read_in_background(void *arg)
{
    struct bg_read *b = arg;
    sbx_call call = {0};
    harness_call_init(&call);
    struct sbx_proc_read_args a = {.size = sizeof a, .wait_ms = 20000, .out_cursor = b->cursor};
    struct sbx_proc_read_result res = {.size = sizeof res};
    double t0 = now_seconds();
    b->rc = H.ops->proc_read(H.sb, &call, b->id, &a, &res);
    b->secs = now_seconds() - t0;
    snprintf(b->msg, sizeof b->msg, "%s", call.msg);
    harness_call_close(&call);
    return NULL;
}

Test(local_procs, the_supervisor_killed_under_a_running_process)
{
    static const char *const argv[] = {"/bin/sh", "-c", "echo $$; exec sleep 100", NULL};
    char id[SBX_PROC_ID_MAX];
    start(0, argv, 0, 0, 0, id);
    struct stream s = {0};
    read_until(id, &s, "\n", 10);
    int child = atoi(buf_sink_str(&s.out));
    int sup = supervisor_pid();
    cr_assert_gt(sup, 0);

    /* a read waiting for output that will not come (the first byte is
     * read again: the wait is for more) */
    struct bg_read b = {.id = id, .cursor = s.oc};
    pthread_t t;
    pthread_create(&t, NULL, read_in_background, &b);
    usleep(200 * 1000);
    cr_assert_eq(kill(sup, SIGKILL), 0);
    pthread_join(t, NULL);
    /* the waiting read fails at once: no hang, a clear error */
    cr_assert_neq(b.rc, SBX_OK);
    cr_assert_lt(b.secs, 5.0, "the read took %.1f s", b.secs);
    cr_assert(strstr(b.msg, "supervisor"), "%s", b.msg);
    /* its process went with it (the guard kills what it held) */
    cr_assert(process_gone(child), "process %d survived its supervisor", child);
    /* later calls: clear errors, and a new start works */
    cr_assert_neq(read_once(H.sb, id, &s, 0), SBX_OK);
    static const char *const echo[] = {"echo", "again", NULL};
    start(0, echo, 0, 0, 0, id);
    struct stream t2 = {0};
    read_until(id, &t2, NULL, 10);
    cr_assert_str_eq(buf_sink_str(&t2.out), "again\n");
    cr_assert_neq(supervisor_pid(), sup, "a new supervisor");
    stream_free(&s);
    stream_free(&t2);
}

Test(local_procs, destroy_kills_every_process_and_the_supervisor)
{
    /* a plain one, a background job, one that left the session, on a PTY */
    static const char *const a1[] = {"/bin/sh", "-c",
                                     "sleep 100 & echo $!; setsid sleep 100 & echo $!; "
                                     "echo $$; wait",
                                     NULL};
    static const char *const a2[] = {"/bin/sh", "-c", "echo $$; exec sleep 100", NULL};
    char id1[SBX_PROC_ID_MAX], id2[SBX_PROC_ID_MAX];
    start(0, a1, 0, 0, 0, id1);
    start(SBX_PROC_PTY, a2, 0, 0, 0, id2);
    struct stream s1 = {0}, s2 = {0};
    double end = now_seconds() + 10;
    int lines = 0;
    while (lines < 3) {
        cr_assert_lt(now_seconds(), end);
        cr_assert_eq(read_once(H.sb, id1, &s1, 200), SBX_OK);
        lines = 0;
        for (const char *p = buf_sink_str(&s1.out); *p; p++)
            lines += *p == '\n';
    }
    read_until(id2, &s2, "\n", 10);
    int pids[5], n = 0;
    for (char *p = (char *)buf_sink_str(&s1.out); n < 3; n++) {
        pids[n] = (int)strtol(p, &p, 10);
        cr_assert_gt(pids[n], 1);
    }
    pids[n++] = atoi(buf_sink_str(&s2.out));
    pids[n++] = supervisor_pid();
    cr_assert_gt(pids[4], 1);
    for (int i = 0; i < n; i++)
        cr_assert_eq(kill(pids[i], 0), 0, "pid %d is not running before destroy", pids[i]);

    char hash[SBX_KEY_HASH_LEN + 1];
    harness_key_hash(H_KEY, hash);
    struct sbx_destroy_args da = {sizeof da, H_KEY, hash, H.ref};
    harness_call_init(&H.call);
    cr_assert_eq(H.ops->destroy(H.state, &H.call, &da), SBX_OK, "%s", H.call.msg);
    /* gone when destroy returns: no waiting here */
    for (int i = 0; i < n; i++) {
        char path[64], st[512];
        snprintf(path, sizeof path, "/proc/%d/stat", pids[i]);
        long len = slurp_small(path, st, sizeof st);
        const char *paren = len > 0 ? strrchr(st, ')') : NULL;
        cr_assert(len < 0 || (paren && (paren[2] == 'Z' || paren[2] == 'X')),
                  "pid %d survived destroy: %s", pids[i], st);
    }
    char p[1024];
    snprintf(p, sizeof p, "%s/%s.state", H.root, hash);
    struct stat sst;
    cr_assert_neq(lstat(p, &sst), 0, "the state directory is gone");
    stream_free(&s1);
    stream_free(&s2);
}

Test(local_procs, an_idle_supervisor_exits_and_a_later_start_restarts_it)
{
    /* a second instance of the provider with a short idle time */
    struct test_host th;
    harness_host_init(&th, H.root);
    th.supervisor_idle_ms = "300";
    void *st = NULL;
    harness_call_init(&H.call);
    cr_assert_eq(H.ops->init(&th.host, &H.call, &st), SBX_OK, "%s", H.call.msg);
    struct create_args_buf cb;
    char ref[SBX_REF_MAX];
    sbx_sandbox *sb = NULL;
    cr_assert_eq(H.ops->create(st, &H.call, harness_create_args(&cb, H_KEY), ref, &sb), SBX_OK);
    /* a start that fails keeps no process: the supervisor is idle at once */
    static const char *const nope[] = {"no-such-program-here", NULL};
    char id[SBX_PROC_ID_MAX];
    cr_assert_eq(start_in(sb, 0, nope, 0, 0, 0, id), SBX_E_NO_COMMAND, "%s", H.call.msg);
    int sup = supervisor_pid();
    cr_assert_gt(sup, 0);
    /* a handle keeps its channels open, and an open channel is not idle:
     * let go of it */
    H.ops->release(sb);
    cr_assert_eq(H.ops->create(st, &H.call, harness_create_args(&cb, H_KEY), ref, &sb), SBX_OK);
    cr_assert(process_gone(sup) || (usleep(1000 * 1000), process_gone(sup)),
              "the idle supervisor %d did not exit", sup);
    struct stat sst;
    cr_assert_neq(lstat(state_file("supervisor.sock"), &sst), 0, "its socket is removed");
    static const char *const echo[] = {"echo", "back", NULL};
    cr_assert_eq(start_in(sb, 0, echo, 0, 0, 0, id), SBX_OK, "%s", H.call.msg);
    cr_assert_neq(supervisor_pid(), sup);
    H.ops->release(sb);
    H.ops->fini(st);
}

Test(local_procs, a_missing_supervisor_program_is_a_clear_configuration_error)
{
    struct test_host th;
    harness_host_init(&th, H.root);
    th.supervisor_path = "/nonexistent/sbx-local-supervisor";
    void *st = NULL;
    harness_call_init(&H.call);
    cr_assert_eq(H.ops->init(&th.host, &H.call, &st), SBX_OK, "%s", H.call.msg);
    struct create_args_buf cb;
    char ref[SBX_REF_MAX];
    sbx_sandbox *sb = NULL;
    cr_assert_eq(H.ops->create(st, &H.call, harness_create_args(&cb, "nosup"), ref, &sb),
                 SBX_OK);
    static const char *const echo[] = {"echo", NULL};
    char id[SBX_PROC_ID_MAX];
    cr_assert_eq(start_in(sb, 0, echo, 0, 0, 0, id), SBX_E_CONFIG, "%s", H.call.msg);
    cr_assert(strstr(H.call.msg, "/nonexistent/sbx-local-supervisor"), "%s", H.call.msg);
    H.ops->release(sb);
    H.ops->fini(st);
}

Test(local_procs, process_buffer_is_configured_and_checked)
{
    struct test_host th;
    harness_host_init(&th, H.root);
    th.process_buffer = "8192";
    void *st = NULL;
    harness_call_init(&H.call);
    cr_assert_eq(H.ops->init(&th.host, &H.call, &st), SBX_OK, "%s", H.call.msg);
    struct create_args_buf cb;
    char ref[SBX_REF_MAX];
    sbx_sandbox *sb = NULL;
    cr_assert_eq(H.ops->create(st, &H.call, harness_create_args(&cb, "small"), ref, &sb),
                 SBX_OK);
    static const char *const argv[] = {"head", "-c", "100000", "/dev/zero", NULL};
    char id[SBX_PROC_ID_MAX];
    cr_assert_eq(start_in(sb, 0, argv, 0, 0, 0, id), SBX_OK, "%s", H.call.msg);
    struct stream s = {0};
    double end = now_seconds() + 10;
    do {
        usleep(100 * 1000);
        cr_assert_lt(now_seconds(), end);
        cr_assert_eq(read_once(sb, id, &s, 0), SBX_OK, "%s", H.call.msg);
    } while (!s.res.eof);
    cr_assert_eq(s.oc, 100000);
    cr_assert_eq(s.olost, 100000 - 8192, "lost %llu", (unsigned long long)s.olost);
    struct sbx_destroy_args da = {sizeof da, "small", cb.hash, ref};
    cr_assert_eq(H.ops->destroy(st, &H.call, &da), SBX_OK, "%s", H.call.msg);
    H.ops->release(sb);
    H.ops->fini(st);
    stream_free(&s);

    const char *bad[] = {"1", "100g", "12x", "", NULL};
    for (int i = 0; bad[i]; i++) {
        th.process_buffer = bad[i];
        st = NULL;
        cr_assert_eq(H.ops->init(&th.host, &H.call, &st), SBX_E_CONFIG, "%s", bad[i]);
        cr_assert(strstr(H.call.msg, "process_buffer"), "%s", H.call.msg);
    }
    th.process_buffer = NULL;
    th.supervisor_idle_ms = "-5";
    cr_assert_eq(H.ops->init(&th.host, &H.call, &st), SBX_E_CONFIG);
    th.supervisor_idle_ms = NULL;
    th.supervisor_path = "relative/sup";
    cr_assert_eq(H.ops->init(&th.host, &H.call, &st), SBX_E_CONFIG);
}

/* ---- a server on a declared port ---------------------------------------- */

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

/* A port free on loopback right now. */
static uint16_t free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    socklen_t len = sizeof sa;
    getsockname(fd, (struct sockaddr *)&sa, &len);
    close(fd);
    return ntohs(sa.sin_port);
}

Test(local_procs, a_server_on_a_declared_port_is_reached_through_port_resolve)
{
    if (access("/usr/bin/python3", X_OK) != 0)
        cr_skip_test("no /usr/bin/python3 for the test server");
    uint16_t port = free_port();
    uint16_t ports[] = {port, 0};
    struct create_args_buf cb;
    const struct sbx_create_args *ca = harness_create_args(&cb, "served");
    cb.args.ports = ports;
    char ref[SBX_REF_MAX];
    sbx_sandbox *sb = NULL;
    harness_call_init(&H.call);
    cr_assert_eq(H.ops->create(H.state, &H.call, ca, ref, &sb), SBX_OK, "%s", H.call.msg);
    static const char body[] = "served from the workspace\n";
    struct mem_source m = {.data = (const unsigned char *)body, .len = sizeof body - 1,
                           .call = &H.call};
    struct sbx_source src = mem_source(&m);
    cr_assert_eq(H.ops->write_file(sb, &H.call, "index.txt", &src, 0), SBX_OK);
    /* the server binds loopback: local cannot make it (docs) */
    char portarg[16];
    snprintf(portarg, sizeof portarg, "%u", port);
    const char *argv[] = {"/usr/bin/python3", "-m", "http.server", "--bind", "127.0.0.1",
                          portarg, NULL};
    char id[SBX_PROC_ID_MAX];
    cr_assert_eq(start_in(sb, 0, argv, 0, 0, 0, id), SBX_OK, "%s", H.call.msg);

    struct sbx_port_endpoint ep = {.size = sizeof ep};
    cr_assert_eq(H.ops->port_resolve(sb, &H.call, port, &ep), SBX_OK, "%s", H.call.msg);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(ep.port)};
    cr_assert_eq(inet_pton(AF_INET, ep.host, &sa.sin_addr), 1, "%s", ep.host);
    double end = now_seconds() + 10;
    int fd;
    for (;;) {
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0)
            break;
        close(fd);
        cr_assert_lt(now_seconds(), end, "nothing listens on %s", ep.url);
        usleep(50 * 1000);
    }
    static const char req[] = "GET /index.txt HTTP/1.0\r\n\r\n";
    cr_assert_eq(write(fd, req, sizeof req - 1), (ssize_t)sizeof req - 1);
    char reply[4096];
    size_t n = 0;
    ssize_t r;
    while (n + 1 < sizeof reply && (r = read(fd, reply + n, sizeof reply - 1 - n)) > 0)
        n += (size_t)r;
    reply[n] = '\0';
    close(fd);
    cr_assert(strstr(reply, "200"), "%s", reply);
    cr_assert(strstr(reply, body), "%s", reply);

    struct sbx_destroy_args da = {sizeof da, "served", cb.hash, ref};
    cr_assert_eq(H.ops->destroy(H.state, &H.call, &da), SBX_OK, "%s", H.call.msg);
    H.ops->release(sb);
    /* destroy took the server with it */
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert_neq(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0, "the server survived");
    close(fd);
}

Test(local_procs, a_timeout_kills_the_process_tree)
{
    static const char *const argv[] = {"/bin/sh", "-c", "sleep 30 & echo $!; sleep 30", NULL};
    struct sbx_proc_spec spec = {.size = sizeof spec, .argv = argv, .timeout_ms = 300};
    char id[SBX_PROC_ID_MAX];
    harness_call_init(&H.call);
    cr_assert_eq(H.ops->proc_start(H.sb, &H.call, &spec, id), SBX_OK, "%s", H.call.msg);
    struct stream s = {0};
    double t0 = now_seconds();
    read_until(id, &s, NULL, 10);
    cr_assert_lt(now_seconds() - t0, 3.0);
    cr_assert(s.res.timed_out, "timed_out is set");
    cr_assert_eq(s.res.term_signal, SIGKILL);
    int bg = atoi(buf_sink_str(&s.out));
    cr_assert_gt(bg, 1);
    cr_assert(process_gone(bg), "the background job %d survived the timeout", bg);
    stream_free(&s);
}

#include <sys/un.h>

Test(local_procs, a_symlink_planted_as_the_supervisors_socket_is_not_followed)
{
    /* a listener elsewhere, and the state directory's socket and pid file
     * pointing at it and at this process */
    char fake[100];
    cr_assert_lt(snprintf(fake, sizeof fake, "%s/fake.sock", H.tmp), (int)sizeof fake);
    int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, fake, strlen(fake) + 1);
    cr_assert_eq(bind(lfd, (struct sockaddr *)&sa, sizeof sa), 0, "%s", strerror(errno));
    cr_assert_eq(listen(lfd, 8), 0);
    char hash[SBX_KEY_HASH_LEN + 1], dir[1024];
    harness_key_hash(H_KEY, hash);
    snprintf(dir, sizeof dir, "%s/%s.state", H.root, hash);
    cr_assert_eq(mkdir(dir, 0700), 0);
    cr_assert_eq(symlink(fake, state_file("supervisor.sock")), 0);
    FILE *f = fopen(state_file("supervisor.pid"), "w");
    fprintf(f, "%d\n", (int)getpid());
    fclose(f);

    static const char *const echo[] = {"echo", "real", NULL};
    char id[SBX_PROC_ID_MAX];
    start(0, echo, 0, 0, 0, id);
    struct stream s = {0};
    read_until(id, &s, NULL, 10);
    cr_assert_str_eq(buf_sink_str(&s.out), "real\n");
    cr_assert_lt(accept(lfd, NULL, NULL), 0, "the planted listener was connected to");
    struct stat st;
    cr_assert_eq(lstat(state_file("supervisor.sock"), &st), 0);
    cr_assert(S_ISSOCK(st.st_mode), "the link was replaced by the supervisor's socket");
    cr_assert_neq(supervisor_pid(), (int)getpid());
    close(lfd);
    stream_free(&s);
}

Test(local_procs, a_listener_that_is_not_the_pid_files_supervisor_is_refused)
{
    char hash[SBX_KEY_HASH_LEN + 1], dir[1024];
    harness_key_hash(H_KEY, hash);
    snprintf(dir, sizeof dir, "%s/%s.state", H.root, hash);
    cr_assert_eq(mkdir(dir, 0700), 0);
    /* this process listens where the supervisor would; the pid file names
     * another process */
    int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    snprintf(sa.sun_path, sizeof sa.sun_path, "/proc/self/fd/%d/supervisor.sock", dfd);
    cr_assert_eq(bind(lfd, (struct sockaddr *)&sa, sizeof sa), 0, "%s", strerror(errno));
    close(dfd);
    cr_assert_eq(listen(lfd, 8), 0);
    FILE *f = fopen(state_file("supervisor.pid"), "w");
    fprintf(f, "%d\n", (int)getppid());
    fclose(f);

    static const char *const echo[] = {"echo", NULL};
    char id[SBX_PROC_ID_MAX];
    cr_assert_eq(start_in(H.sb, 0, echo, 0, 0, 0, id), SBX_E_UNAVAILABLE, "%s", H.call.msg);
    cr_assert(strstr(H.call.msg, "not the supervisor of the pid file"), "%s", H.call.msg);
    /* it connected, checked the listener, and sent it nothing */
    int c = accept(lfd, NULL, NULL);
    cr_assert_geq(c, 0);
    char b;
    cr_assert_eq(read(c, &b, 1), 0, "the impostor was sent a byte");
    close(c);
    close(lfd);
}

Test(local_procs, a_frozen_supervisor_times_out_and_destroy_still_kills_everything)
{
    struct test_host th;
    harness_host_init(&th, H.root);
    th.supervisor_timeout_ms = "500";
    void *st = NULL;
    harness_call_init(&H.call);
    cr_assert_eq(H.ops->init(&th.host, &H.call, &st), SBX_OK, "%s", H.call.msg);
    struct create_args_buf cb;
    char ref[SBX_REF_MAX];
    sbx_sandbox *sb = NULL;
    cr_assert_eq(H.ops->create(st, &H.call, harness_create_args(&cb, H_KEY), ref, &sb), SBX_OK);
    static const char *const argv[] = {"/bin/sh", "-c", "echo $$; exec sleep 30", NULL};
    char id[SBX_PROC_ID_MAX];
    cr_assert_eq(start_in(sb, 0, argv, 0, 0, 0, id), SBX_OK, "%s", H.call.msg);
    struct stream s = {0};
    double end = now_seconds() + 10;
    while (!strchr(buf_sink_str(&s.out), '\n')) {
        cr_assert_lt(now_seconds(), end);
        cr_assert_eq(read_once(sb, id, &s, 200), SBX_OK, "%s", H.call.msg);
    }
    int child = atoi(buf_sink_str(&s.out));
    int sup = supervisor_pid();
    cr_assert_eq(kill(sup, SIGSTOP), 0);

    double t0 = now_seconds();
    int rc = read_once(sb, id, &s, 0);
    double took = now_seconds() - t0;
    cr_assert_eq(rc, SBX_E_TIMEOUT, "%d %s", rc, H.call.msg);
    cr_assert_lt(took, 3.0, "a frozen supervisor held the read %.1f s", took);
    cr_assert(strstr(H.call.msg, "supervisor"), "%s", H.call.msg);

    t0 = now_seconds();
    struct sbx_destroy_args da = {sizeof da, H_KEY, cb.hash, ref};
    harness_call_init(&H.call);
    cr_assert_eq(H.ops->destroy(st, &H.call, &da), SBX_OK, "%s", H.call.msg);
    cr_assert_lt(now_seconds() - t0, 4.0);
    char path[64], stat_line[512];
    snprintf(path, sizeof path, "/proc/%d/stat", child);
    long len = slurp_small(path, stat_line, sizeof stat_line);
    const char *paren = len > 0 ? strrchr(stat_line, ')') : NULL;
    cr_assert(len < 0 || (paren && (paren[2] == 'Z' || paren[2] == 'X')),
              "the process survived the destroy of its frozen supervisor: %s", stat_line);
    cr_assert(process_gone(sup));
    H.ops->release(sb);
    H.ops->fini(st);
    stream_free(&s);
}
