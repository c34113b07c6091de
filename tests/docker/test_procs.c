/*
 * test_procs.c - processes that outlive the call on the docker provider
 * (SBX_CAP_PROCESSES, SBX_CAP_PTY), run by the container agent's
 * supervisor: output by cursor with loss counted exactly, stdin and its
 * end, a PTY (size, isatty, resize, ^C), a second host process taking
 * over after the first was killed mid-stream, concurrency, ids of other
 * sessions, a flooding writer (memory bounded on both sides), the
 * supervisor or the whole container killed under a waiting read (an
 * error, promptly), destroy.
 */
#include "harness.h"

#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

static struct dh h;
static char key[64], hash[65], ref[SBX_REF_MAX];
static sbx_sandbox *sb;

static void setup(void)
{
    dh_sandbox_setup(&h, key, hash, ref, &sb);
    if (getenv("SBX_TEST_DOCKER_AGENT") && !strcmp(getenv("SBX_TEST_DOCKER_AGENT"), "0"))
        cr_skip_test("the agent is disabled for this run (SBX_TEST_DOCKER_AGENT=0)");
}

static void teardown(void)
{
    dh_sandbox_teardown(&h, key, ref, sb);
}

TestSuite(docker_procs, .init = setup, .fini = teardown, .timeout = 120);

static void start_in(sbx_sandbox *s, const struct sbx_proc_spec *spec, char id[SBX_PROC_ID_MAX])
{
    struct sbx_call c;
    dh_call_init(&c);
    int rc = h.ops->proc_start(s, &c, spec, id);
    cr_assert_eq(rc, SBX_OK, "proc_start: %s: %s", sbx_strerror(rc), c.message);
    dh_call_free(&c);
}

static void start(const struct sbx_proc_spec *spec, char id[SBX_PROC_ID_MAX])
{
    start_in(sb, spec, id);
}

/* One read into out/err (either may be NULL); the status. */
static int read_once(sbx_sandbox *s, const char *id, struct sbx_proc_read_args *a,
                     struct dh_buf *out, struct dh_buf *err, struct sbx_proc_read_result *r,
                     char *msg, size_t cap)
{
    struct sbx_sink so = dh_buf_sink(out), se = dh_buf_sink(err);
    a->size = sizeof *a;
    a->out = out ? &so : NULL;
    a->err = err ? &se : NULL;
    struct sbx_call c;
    dh_call_init(&c);
    memset(r, 0, sizeof *r);
    r->size = sizeof *r;
    int rc = h.ops->proc_read(s, &c, id, a, r);
    if (msg)
        snprintf(msg, cap, "%.1000s", c.message);
    dh_call_free(&c);
    if (rc == SBX_OK) {
        a->out_cursor = r->out_cursor;
        a->err_cursor = r->err_cursor;
    }
    return rc;
}

/* Read to the end; *lost sums what was skipped. */
static struct sbx_proc_read_result read_all(const char *id, struct dh_buf *out,
                                            struct dh_buf *err, uint64_t *lost)
{
    struct sbx_proc_read_args a = {.wait_ms = 2000, .max_bytes = 1 << 20};
    struct sbx_proc_read_result r;
    if (lost)
        *lost = 0;
    for (int i = 0; i < 20000; i++) {
        char msg[1024];
        int rc = read_once(sb, id, &a, out, err, &r, msg, sizeof msg);
        cr_assert_eq(rc, SBX_OK, "proc_read: %s", msg);
        if (lost)
            *lost += r.out_lost + r.err_lost;
        if (r.eof)
            return r;
    }
    cr_assert_fail("no end of process %s", id);
    return r;
}

/* Read until out contains want (or fail after ~10 s). */
static void read_until(const char *id, struct sbx_proc_read_args *a, struct dh_buf *out,
                       const char *want)
{
    struct sbx_proc_read_result r;
    for (int i = 0; i < 100; i++) {
        if (out->data && memmem(out->data, out->len, want, strlen(want)))
            return;
        char msg[1024];
        a->wait_ms = 100;
        cr_assert_eq(read_once(sb, id, a, out, NULL, &r, msg, sizeof msg), SBX_OK, "%s", msg);
        cr_assert(!r.eof, "ended before \"%s\": %.*s", want, (int)out->len, out->data);
    }
    cr_assert_fail("no \"%s\" in %.*s", want, (int)out->len, out->data ? out->data : "");
}

static int op_write(sbx_sandbox *s, const char *id, const void *p, size_t n, uint32_t flags)
{
    struct sbx_call c;
    dh_call_init(&c);
    int rc = h.ops->proc_write(s, &c, id, p, n, flags);
    dh_call_free(&c);
    return rc;
}

static int op_signal(const char *id, int sig)
{
    struct sbx_call c;
    dh_call_init(&c);
    int rc = h.ops->proc_signal(sb, &c, id, sig);
    dh_call_free(&c);
    return rc;
}

Test(docker_procs, start_read_both_streams_and_the_end)
{
    const char *argv[] = {"sh", "-c", "echo out $V; echo err >&2; exit 4", NULL};
    const char *env[] = {"V=1", "PATH=/bin:/usr/bin", NULL};
    struct sbx_proc_spec spec = {.size = sizeof spec, .argv = argv, .env = env};
    char id[SBX_PROC_ID_MAX];
    start(&spec, id);
    struct dh_buf out = {0}, err = {0};
    struct sbx_proc_read_result r = read_all(id, &out, &err, NULL);
    cr_assert_eq(r.state, SBX_PROC_EXITED);
    cr_assert_eq(r.exit_code, 4);
    cr_assert_eq(out.len, 6);
    cr_assert_eq(memcmp(out.data, "out 1\n", 6), 0);
    cr_assert_eq(err.len, 4);
    /* stdin, then its end */
    const char *cat[] = {"sh", "-c", "wc -c; echo bye", NULL};
    spec.argv = cat;
    spec.env = NULL;
    start(&spec, id);
    cr_assert_eq(op_write(sb, id, "12345", 5, 0), SBX_OK);
    cr_assert_eq(op_write(sb, id, "678", 3, SBX_PROC_WRITE_CLOSE), SBX_OK);
    struct dh_buf o2 = {0};
    r = read_all(id, &o2, &err, NULL);
    cr_assert(memmem(o2.data, o2.len, "8\nbye\n", 6), "%.*s", (int)o2.len, o2.data);
    cr_assert_eq(op_write(sb, id, "x", 1, 0), SBX_E_INVALID);
    /* program and cwd errors as for exec; a symlink out of the workspace */
    const char *none[] = {"no-such-program-sbx", NULL};
    spec.argv = none;
    struct sbx_call c;
    dh_call_init(&c);
    cr_assert_eq(h.ops->proc_start(sb, &c, &spec, id), SBX_E_NO_COMMAND, "%s", c.message);
    free(dh_sh(&h, sb, "ln -s / escape && mkdir -p sub"));
    const char *t[] = {"true", NULL};
    spec.argv = t;
    spec.cwd = "escape";
    cr_assert_eq(h.ops->proc_start(sb, &c, &spec, id), SBX_E_INVALID, "%s", c.message);
    spec.cwd = "../";
    cr_assert_eq(h.ops->proc_start(sb, &c, &spec, id), SBX_E_INVALID, "%s", c.message);
    spec.cwd = "sub";
    cr_assert_eq(h.ops->proc_start(sb, &c, &spec, id), SBX_OK, "%s", c.message);
    dh_call_free(&c);
    dh_buf_free(&out);
    dh_buf_free(&o2);
    dh_buf_free(&err);
}

Test(docker_procs, a_pty_has_its_size_isatty_resize_and_ctrl_c)
{
    const char *argv[] = {"sh", "-c",
                          "test -t 0 && test -t 1 && test -t 2 && echo tty; stty size; "
                          "echo T=$TERM; trap 'stty size; echo winch' WINCH; "
                          "trap 'echo got-int; exit 5' INT; echo ready; "
                          "while :; do sleep 0.05; done",
                          NULL};
    struct sbx_proc_spec spec = {.size = sizeof spec, .flags = SBX_PROC_PTY, .argv = argv,
                                 .rows = 33, .cols = 111};
    char id[SBX_PROC_ID_MAX];
    start(&spec, id);
    struct dh_buf out = {0};
    struct sbx_proc_read_args a = {0};
    read_until(id, &a, &out, "ready");
    cr_assert(memmem(out.data, out.len, "tty\r\n33 111\r\nT=xterm-256color\r\n", 30), "%.*s",
              (int)out.len, out.data);
    struct sbx_call c;
    dh_call_init(&c);
    cr_assert_eq(h.ops->proc_resize(sb, &c, id, 44, 122), SBX_OK, "%s", c.message);
    read_until(id, &a, &out, "44 122\r\nwinch");
    /* ^C through the terminal's line discipline: SIGINT to the foreground group */
    cr_assert_eq(op_write(sb, id, "\003", 1, 0), SBX_OK);
    struct dh_buf err = {0};
    struct sbx_proc_read_result r = read_all(id, &out, &err, NULL);
    cr_assert(memmem(out.data, out.len, "got-int", 7), "%.*s", (int)out.len, out.data);
    cr_assert_eq(r.exit_code, 5);
    cr_assert_eq(err.len, 0);
    /* a process without a terminal cannot be resized */
    const char *sl[] = {"sleep", "5", NULL};
    struct sbx_proc_spec s2 = {.size = sizeof s2, .argv = sl};
    start(&s2, id);
    cr_assert_eq(h.ops->proc_resize(sb, &c, id, 10, 10), SBX_E_INVALID);
    /* proc_signal: SIGTERM to the group; the exit says so */
    cr_assert_eq(op_signal(id, SIGTERM), SBX_OK);
    r = read_all(id, &out, &err, NULL);
    cr_assert_eq(r.exit_code, -1);
    cr_assert_eq(r.term_signal, SIGTERM);
    cr_assert_eq(op_signal(id, SIGTERM), SBX_OK); /* ended: nothing sent */
    dh_call_free(&c);
    dh_buf_free(&out);
}

Test(docker_procs, a_one_mib_paste_arrives_whole)
{
    /* through a pipe */
    size_t n = 1 << 20;
    char *data = malloc(n);
    for (size_t i = 0; i < n; i++)
        data[i] = (i % 100 == 99) ? '\n' : (char)('a' + i % 26);
    const char *wc[] = {"wc", "-c", NULL};
    struct sbx_proc_spec spec = {.size = sizeof spec, .argv = wc};
    char id[SBX_PROC_ID_MAX];
    start(&spec, id);
    cr_assert_eq(op_write(sb, id, data, n, SBX_PROC_WRITE_CLOSE), SBX_OK);
    struct dh_buf out = {0}, err = {0};
    read_all(id, &out, &err, NULL);
    cr_assert(memmem(out.data, out.len, "1048576", 7), "%.*s", (int)out.len, out.data);
    /* through a terminal (lines of 100: the line discipline's limit is 4095) */
    const char *cat[] = {"sh", "-c", "stty -echo; echo ready; cat > /tmp/paste", NULL};
    spec.argv = cat;
    spec.flags = SBX_PROC_PTY;
    start(&spec, id);
    struct dh_buf o2 = {0};
    struct sbx_proc_read_args a = {0};
    read_until(id, &a, &o2, "ready");
    cr_assert_eq(op_write(sb, id, data, n, SBX_PROC_WRITE_CLOSE), SBX_OK);
    struct sbx_proc_read_result r = read_all(id, &o2, &err, NULL);
    cr_assert_eq(r.exit_code, 0);
    char *size = dh_sh(&h, sb, "wc -c < /tmp/paste");
    cr_assert_eq(strtoul(size, NULL, 10), n, "%s", size);
    free(size);
    free(data);
    dh_buf_free(&out);
    dh_buf_free(&o2);
}

struct find_state {
    const char *id;
    int exited;
};

static int find_entry(void *ctx, const struct sbx_proc_info *info)
{
    struct find_state *f = ctx;
    if (strcmp(info->id, f->id) == 0)
        f->exited = info->state == SBX_PROC_EXITED;
    return 0;
}

/* Has the process ended (by proc_list, which reads no output)? */
static int ended(const char *id)
{
    struct find_state f = {id, 0};
    struct sbx_proc_list_sink ls = {sizeof ls, &f, find_entry};
    struct sbx_call c;
    dh_call_init(&c);
    cr_assert_eq(h.ops->proc_list(sb, &c, &ls), SBX_OK, "%s", c.message);
    dh_call_free(&c);
    return f.exited;
}

Test(docker_procs, output_far_larger_than_the_buffer_loses_exactly)
{
    const char *argv[] = {"seq", "1", "300000", NULL};
    struct sbx_proc_spec spec = {.size = sizeof spec, .argv = argv, .buffer_bytes = 65536};
    char id[SBX_PROC_ID_MAX];
    start(&spec, id);
    /* let it end before reading (proc_list reads nothing): most is dropped */
    for (int i = 0; i < 200 && !ended(id); i++)
        usleep(50 * 1000);
    struct dh_buf out = {0}, err = {0};
    uint64_t lost;
    struct sbx_proc_read_result r = read_all(id, &out, &err, &lost);
    size_t total = 0;
    char line[16];
    for (int i = 1; i <= 300000; i++)
        total += (size_t)snprintf(line, sizeof line, "%d\n", i);
    char *all = malloc(total + 1);
    size_t at = 0;
    for (int i = 1; i <= 300000; i++)
        at += (size_t)snprintf(all + at, total + 1 - at, "%d\n", i);
    cr_assert_eq(r.out_cursor, total);
    cr_assert_eq(lost + out.len, total, "lost %llu + read %zu != %zu",
                 (unsigned long long)lost, out.len, total);
    cr_assert_leq(out.len, 65536);
    cr_assert_eq(memcmp(all + total - out.len, out.data, out.len), 0,
                 "the bytes read are not the stream's last ones");
    /* a cursor inside the kept range reads on from there, nothing twice */
    struct sbx_proc_read_args a = {.out_cursor = total - 100, .max_bytes = 1 << 20};
    struct dh_buf tail = {0};
    read_once(sb, id, &a, &tail, NULL, &r, NULL, 0);
    cr_assert_eq(tail.len, 100);
    cr_assert_eq(r.out_lost, 0);
    cr_assert_eq(memcmp(tail.data, all + total - 100, 100), 0);
    cr_assert(r.eof);
    free(all);
    dh_buf_free(&out);
    dh_buf_free(&tail);
}

/* Numbered lines from line1 on: is p..p+n their prefix? */
static int is_line_prefix(const char *p, size_t n)
{
    char want[32];
    size_t at = 0;
    for (long i = 1; at < n; i++) {
        int l = snprintf(want, sizeof want, "line%ld\n", i);
        size_t k = n - at < (size_t)l ? n - at : (size_t)l;
        if (memcmp(p + at, want, k) != 0)
            return 0;
        at += k;
    }
    return 1;
}

Test(docker_procs, a_second_host_process_continues_after_the_first_was_killed)
{
    char outfile[] = "/tmp/sbx-procs-helper-XXXXXX";
    int fd = mkstemp(outfile);
    cr_assert_geq(fd, 0);
    close(fd);
    int pipefd[2];
    cr_assert_eq(pipe(pipefd), 0);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pipefd[1], 1);
        /* not a criterion worker: without boxfort's variables (its library
         * would attach to this worker's shared memory and abort) */
        extern char **environ;
        char **w = environ;
        for (char **e = environ; *e; e++)
            if (strncmp(*e, "BXFI", 4) != 0)
                *w++ = *e;
        *w = NULL;
        execl(PROCS_HELPER, PROCS_HELPER, key, ref, outfile, (char *)NULL);
        fprintf(stderr, "exec %s: %s\n", PROCS_HELPER, strerror(errno));
        _exit(127);
    }
    close(pipefd[1]);
    char id[SBX_PROC_ID_MAX] = "";
    size_t idn = 0;
    while (idn + 1 < sizeof id && !memchr(id, '\n', idn)) {
        ssize_t k = read(pipefd[0], id + idn, sizeof id - 1 - idn);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            int st = 0;
            waitpid(pid, &st, 0);
            cr_assert_fail("the helper printed no id (errno %d, status 0x%x)", k ? errno : 0,
                           st);
        }
        idn += (size_t)k;
    }
    id[strcspn(id, "\n")] = '\0';
    /* let it read for a while, then kill it in the middle of the stream */
    struct stat st;
    for (int i = 0; i < 300; i++) {
        usleep(10000);
        if (stat(outfile, &st) == 0 && st.st_size > 200000)
            break;
    }
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
    close(pipefd[0]);
    cr_assert(WIFSIGNALED(status), "the helper ended by itself (status %d)", status);
    /* what it received, as a file: its length is the cursor to go on from */
    struct dh_buf got = {0};
    FILE *g = fopen(outfile, "rb");
    char chunk[65536];
    size_t k;
    struct sbx_sink gs = dh_buf_sink(&got);
    while ((k = fread(chunk, 1, sizeof chunk, g)) > 0)
        gs.write(gs.ctx, chunk, k);
    fclose(g);
    unlink(outfile);
    cr_assert_gt(got.len, 0);
    cr_assert(is_line_prefix(got.data, got.len));
    /* this process (another provider instance, attached anew) continues */
    struct dh h2;
    dh_open(&h2, NULL, NULL);
    sbx_sandbox *sb2;
    char msg[1024];
    cr_assert_eq(dh_attach(&h2, key, ref, &sb2, msg, sizeof msg), SBX_OK, "%s", msg);
    struct sbx_proc_read_args a = {.out_cursor = got.len, .max_bytes = 65536, .wait_ms = 1000};
    struct sbx_proc_read_result r;
    size_t before = got.len;
    for (int i = 0; i < 5; i++) {
        int rc = read_once(sb2, id, &a, &got, NULL, &r, msg, sizeof msg);
        cr_assert_eq(rc, SBX_OK, "%s", msg);
        cr_assert_eq(r.out_lost, 0, "the buffer (1 MiB) should still hold it");
    }
    cr_assert_gt(got.len, before);
    cr_assert(is_line_prefix(got.data, got.len), "the stream was not continued exactly");
    /* the list shows it running */
    struct sbx_call c;
    dh_call_init(&c);
    cr_assert_eq(h.ops->proc_signal(sb2, &c, id, SIGKILL), SBX_OK, "%s", c.message);
    dh_call_free(&c);
    h2.ops->release(sb2);
    dh_close(&h2);
    dh_buf_free(&got);
}

struct conc {
    int n;
    int rc;
    char out[64];
};

static void *conc_run(void *arg)
{
    struct conc *k = arg;
    char script[128];
    snprintf(script, sizeof script, "echo begin %d; sleep 0.3; echo end %d", k->n, k->n);
    const char *argv[] = {"sh", "-c", script, NULL};
    struct sbx_proc_spec spec = {.size = sizeof spec, .argv = argv,
                                 .flags = k->n % 2 ? SBX_PROC_PTY : 0};
    char id[SBX_PROC_ID_MAX];
    struct sbx_call c;
    dh_call_init(&c);
    k->rc = h.ops->proc_start(sb, &c, &spec, id);
    dh_call_free(&c);
    if (k->rc != SBX_OK)
        return NULL;
    struct sbx_proc_read_args a = {.wait_ms = 2000};
    struct dh_buf out = {0};
    struct sbx_proc_read_result r;
    for (int i = 0; i < 100; i++) {
        k->rc = read_once(sb, id, &a, &out, NULL, &r, NULL, 0);
        if (k->rc != SBX_OK || r.eof)
            break;
    }
    snprintf(k->out, sizeof k->out, "%.*s", (int)out.len, out.data ? out.data : "");
    dh_buf_free(&out);
    return NULL;
}

static int count(void *ctx, const struct sbx_proc_info *info)
{
    (*(int *)ctx)++;
    cr_assert(info->command && strstr(info->command, "sh -c"));
    return 0;
}

Test(docker_procs, thirty_two_at_once_and_the_list)
{
    struct conc k[32];
    pthread_t th[32];
    double t0 = dh_now();
    for (int i = 0; i < 32; i++) {
        k[i] = (struct conc){.n = i};
        cr_assert_eq(pthread_create(&th[i], NULL, conc_run, &k[i]), 0);
    }
    for (int i = 0; i < 32; i++)
        pthread_join(th[i], NULL);
    double took = dh_now() - t0;
    for (int i = 0; i < 32; i++) {
        char want[64];
        cr_assert_eq(k[i].rc, SBX_OK, "process %d", i);
        snprintf(want, sizeof want, "end %d", i);
        cr_assert(strstr(k[i].out, want), "process %d: %s", i, k[i].out);
    }
    fprintf(stderr, "[measured] 32 concurrent 0.3 s processes: %.0f ms\n", took);
    cr_expect_lt(took, 5000.0);
    int n = 0;
    struct sbx_proc_list_sink ls = {sizeof ls, &n, count};
    struct sbx_call c;
    dh_call_init(&c);
    cr_assert_eq(h.ops->proc_list(sb, &c, &ls), SBX_OK, "%s", c.message);
    cr_assert_eq(n, 32);
    dh_call_free(&c);
}

Test(docker_procs, another_sessions_id_is_not_found)
{
    char key2[64], hash2[65], ref2[SBX_REF_MAX];
    dh_new_key(key2, hash2);
    sbx_sandbox *other = dh_create(&h, key2, ref2);
    const char *argv[] = {"sleep", "30", NULL};
    struct sbx_proc_spec spec = {.size = sizeof spec, .argv = argv};
    char theirs[SBX_PROC_ID_MAX];
    start_in(other, &spec, theirs);
    struct sbx_proc_read_args a = {0};
    struct sbx_proc_read_result r;
    char msg[1024];
    cr_assert_eq(read_once(sb, theirs, &a, NULL, NULL, &r, msg, sizeof msg), SBX_E_NOT_FOUND,
                 "%s", msg);
    cr_assert_eq(op_write(sb, theirs, "x", 1, 0), SBX_E_NOT_FOUND);
    cr_assert_eq(op_signal(theirs, 9), SBX_E_NOT_FOUND);
    cr_assert_eq(read_once(sb, "p0000000000000000", &a, NULL, NULL, &r, msg, sizeof msg),
                 SBX_E_NOT_FOUND);
    /* its own sandbox knows it */
    cr_assert_eq(read_once(other, theirs, &a, NULL, NULL, &r, msg, sizeof msg), SBX_OK, "%s",
                 msg);
    h.ops->release(other);
    dh_destroy(&h, key2, ref2);
}

static long rss_kib_self(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld", &v) == 1)
            break;
    if (f)
        fclose(f);
    return v;
}

Test(docker_procs, a_flooding_writer_keeps_memory_bounded)
{
    const char *argv[] = {"sh", "-c", "cat /dev/zero", NULL};
    struct sbx_proc_spec spec = {.size = sizeof spec, .argv = argv};
    char id[SBX_PROC_ID_MAX];
    start(&spec, id);
    /* a reader that keeps up for a while, then none at all */
    long host0 = rss_kib_self();
    struct sbx_proc_read_args a = {.max_bytes = 1 << 20};
    struct sbx_proc_read_result r;
    double t0 = dh_now();
    uint64_t lost = 0, got = 0;
    while (dh_now() - t0 < 1500) {
        cr_assert_eq(read_once(sb, id, &a, NULL, NULL, &r, NULL, 0), SBX_OK);
        lost += r.out_lost;
        got = r.out_cursor - lost;
    }
    usleep(1500 * 1000);
    cr_assert_eq(read_once(sb, id, &a, NULL, NULL, &r, NULL, 0), SBX_OK);
    long host1 = rss_kib_self();
    /* the agent's processes (the init, its supervisor): resident memory */
    char *rss = dh_sh(&h, sb, "for p in $(pidof sbx-agent); do grep VmRSS /proc/$p/status; "
                              "done | awk '{ if ($2 > m) m = $2 } END { print m }'");
    long agent = strtol(rss, NULL, 10);
    fprintf(stderr, "[measured] flood: %llu bytes through, %llu dropped; host RSS %ld -> %ld "
                    "KiB, largest agent RSS %ld KiB\n",
            (unsigned long long)r.out_cursor, (unsigned long long)(r.out_cursor - got),
            host0, host1, agent);
    cr_assert_gt(r.out_cursor, 50u << 20, "the flood did not flow");
    cr_assert_gt(r.out_lost, 0, "nothing was dropped while nobody read");
    cr_assert_lt(agent, 16 * 1024, "the agent grew to %ld KiB", agent);
    cr_assert_lt(host1 - host0, 32 * 1024, "the host grew by %ld KiB", host1 - host0);
    free(rss);
    cr_assert_eq(op_signal(id, SIGKILL), SBX_OK);
}

struct waiter {
    sbx_sandbox *s;
    const char *id;
    int rc;
    char msg[1024];
    volatile int done;
    double took;
};

static void *wait_run(void *arg)
{
    struct waiter *w = arg;
    struct sbx_proc_read_args a = {.wait_ms = 60000};
    struct sbx_proc_read_result r;
    double t0 = dh_now();
    /* read until the wait fails (the first answers may carry output) */
    do
        w->rc = read_once(w->s, w->id, &a, NULL, NULL, &r, w->msg, sizeof w->msg);
    while (w->rc == SBX_OK && !r.eof && dh_now() - t0 < 30000);
    w->took = dh_now() - t0;
    w->done = 1;
    return NULL;
}

Test(docker_procs, the_supervisor_killed_under_a_waiting_read_is_an_error)
{
    const char *argv[] = {"sleep", "1000", NULL};
    struct sbx_proc_spec spec = {.size = sizeof spec, .argv = argv};
    char id[SBX_PROC_ID_MAX];
    start(&spec, id);
    struct waiter w = {.s = sb, .id = id};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, wait_run, &w), 0);
    usleep(300 * 1000);
    /* root in the container kills the supervisor: the child of the init
     * that is the parent of the sleep */
    free(dh_sh(&h, sb, "kill -9 $(awk '{print $4}' /proc/$(pidof sleep)/stat)"));
    for (int i = 0; i < 300 && !w.done; i++)
        usleep(10000);
    cr_assert(w.done, "the read still waits after the supervisor was killed");
    pthread_join(th, NULL);
    cr_assert_eq(w.rc, SBX_E_UNAVAILABLE, "%s: %s", sbx_strerror(w.rc), w.msg);
    cr_assert(strstr(w.msg, "supervisor"), "%s", w.msg);
    /* its processes went with it; the id is unknown to the next supervisor */
    char *left = NULL;
    for (int i = 0; i < 20; i++) {
        free(left);
        left = dh_procs(&h, sb, "slee[p] 1000");
        if (!*left)
            break;
        usleep(100000);
    }
    cr_assert_str_empty(left, "left running: %s", left);
    free(left);
    struct sbx_proc_read_args a = {0};
    struct sbx_proc_read_result r;
    cr_assert_eq(read_once(sb, id, &a, NULL, NULL, &r, NULL, 0), SBX_E_NOT_FOUND);
    /* and processes work again */
    const char *e[] = {"echo", "again", NULL};
    spec.argv = e;
    start(&spec, id);
    struct dh_buf out = {0}, err = {0};
    read_all(id, &out, &err, NULL);
    cr_assert_eq(out.len, 6);
    dh_buf_free(&out);
}

Test(docker_procs, the_sweep_for_an_exec_s_strays_spares_them)
{
    const char *argv[] = {"sleep", "1001", NULL};
    struct sbx_proc_spec spec = {.size = sizeof spec, .argv = argv};
    char id[SBX_PROC_ID_MAX];
    start(&spec, id);
    /* a root command kills its handler: the init then kills every process
     * outside a live handler's subtree - not the supervisor's */
    const char *ex[] = {"sh", "-c", "sleep 1002 & kill -9 $PPID; sleep 1", NULL};
    struct sbx_exec_result res;
    struct sbx_call c;
    dh_call_init(&c);
    int rc = dh_exec(&h, sb, ex, NULL, 5000, NULL, NULL, &res, &c);
    cr_assert_eq(rc, SBX_E_UNAVAILABLE, "%s", c.message);
    dh_call_free(&c);
    char *left = NULL;
    for (int i = 0; i < 20; i++) {
        free(left);
        left = dh_procs(&h, sb, "slee[p] 1002");
        if (!*left)
            break;
        usleep(100000);
    }
    cr_assert_str_empty(left, "the exec's stray survived: %s", left);
    free(left);
    left = dh_procs(&h, sb, "slee[p] 1001");
    cr_assert_str_not_empty(left, "the supervised process was swept");
    free(left);
    struct sbx_proc_read_args a = {0};
    struct sbx_proc_read_result r;
    cr_assert_eq(read_once(sb, id, &a, NULL, NULL, &r, NULL, 0), SBX_OK);
    cr_assert_eq(r.state, SBX_PROC_RUNNING);
}

Test(docker_procs, the_container_killed_under_a_waiting_read_is_an_error)
{
    const char *argv[] = {"sleep", "1000", NULL};
    struct sbx_proc_spec spec = {.size = sizeof spec, .argv = argv};
    char id[SBX_PROC_ID_MAX];
    start(&spec, id);
    struct waiter w = {.s = sb, .id = id};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, wait_run, &w), 0);
    usleep(300 * 1000);
    char path[640];
    snprintf(path, sizeof path, "/v1.41/containers/%s/kill", ref);
    cr_assert_eq(dh_api(h.host_uri, "POST", path, NULL, NULL), 204);
    for (int i = 0; i < 500 && !w.done; i++)
        usleep(10000);
    cr_assert(w.done, "the read still waits after the container was killed");
    pthread_join(th, NULL);
    cr_assert_eq(w.rc, SBX_E_UNAVAILABLE, "%s: %s", sbx_strerror(w.rc), w.msg);
    fprintf(stderr, "[measured] container killed: the waiting read failed after %.0f ms\n",
            w.took);
    /* a new request says the container is not running */
    struct sbx_proc_read_args a = {0};
    struct sbx_proc_read_result r;
    char msg[1024];
    int rc = read_once(sb, id, &a, NULL, NULL, &r, msg, sizeof msg);
    cr_assert_eq(rc, SBX_E_UNAVAILABLE, "%s", msg);
}

Test(docker_procs, destroy_kills_them_and_a_waiting_read_returns)
{
    const char *argv[] = {"sleep", "1000", NULL};
    struct sbx_proc_spec spec = {.size = sizeof spec, .argv = argv};
    char id[SBX_PROC_ID_MAX];
    start(&spec, id);
    struct waiter w = {.s = sb, .id = id};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, wait_run, &w), 0);
    usleep(200 * 1000);
    double t0 = dh_now();
    dh_destroy(&h, key, ref);
    for (int i = 0; i < 500 && !w.done; i++)
        usleep(10000);
    cr_assert(w.done, "the read still waits after destroy");
    pthread_join(th, NULL);
    cr_assert_neq(w.rc, SBX_OK);
    fprintf(stderr, "[measured] destroy: the waiting read returned %.0f ms after it began\n",
            dh_now() - t0);
    char path[640];
    snprintf(path, sizeof path, "/v1.41/containers/%s/json", ref);
    cr_assert_eq(dh_api(h.host_uri, "GET", path, NULL, NULL), 404);
    /* teardown destroys again: a resource that is gone is SBX_OK */
}

/* Median of n keystroke round trips: a 1-byte write and the read of its
 * echo, through the provider; and through a raw PTY on this host. */
static double median(double *v, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return v[n / 2];
}

Test(docker_procs, keystroke_latency)
{
    enum { N = 300 };
    static double t[N];
    const char *argv[] = {"sh", "-c", "stty raw -echo; echo ready; cat", NULL};
    struct sbx_proc_spec spec = {.size = sizeof spec, .flags = SBX_PROC_PTY, .argv = argv};
    char id[SBX_PROC_ID_MAX];
    start(&spec, id);
    struct dh_buf out = {0};
    struct sbx_proc_read_args a = {0};
    read_until(id, &a, &out, "ready");
    static double tw[N];
    for (int i = 0; i < N; i++) {
        double t0 = dh_now();
        cr_assert_eq(op_write(sb, id, "k", 1, 0), SBX_OK);
        tw[i] = dh_now() - t0;
        size_t want = out.len + 1;
        struct sbx_proc_read_result r;
        a.wait_ms = 2000;
        while (out.len < want)
            cr_assert_eq(read_once(sb, id, &a, &out, NULL, &r, NULL, 0), SBX_OK);
        t[i] = dh_now() - t0;
    }
    double sbx = median(t, N), wr = median(tw, N);
    /* the same through a raw PTY on this host */
    int m, s;
    cr_assert_eq(openpty(&m, &s, NULL, NULL, NULL), 0);
    pid_t pid = fork();
    if (pid == 0) {
        setsid();
        dup2(s, 0);
        dup2(s, 1);
        close(m);
        struct termios tio;
        tcgetattr(0, &tio);
        cfmakeraw(&tio);
        tcsetattr(0, TCSANOW, &tio);
        execlp("cat", "cat", (char *)NULL);
        _exit(127);
    }
    close(s);
    usleep(100000);
    char c;
    for (int i = 0; i < N; i++) {
        double t0 = dh_now();
        cr_assert_eq(write(m, "k", 1), 1);
        cr_assert_eq(read(m, &c, 1), 1);
        t[i] = dh_now() - t0;
    }
    double raw = median(t, N);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    close(m);
    fprintf(stderr, "[measured] keystroke round trip (median of %d): docker %.3f ms (the write "
                    "%.3f ms), raw PTY %.3f ms (%.1fx)\n",
            N, sbx, wr, raw, sbx / raw);
    dh_buf_free(&out);
}
