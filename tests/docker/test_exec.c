/*
 * test_exec.c - commands in a docker sandbox: exit codes, separate streams
 * as they arrive, streamed stdin, environment, cwd, missing commands,
 * timeouts and cancellation killing the whole tree, concurrent execs.
 */
#include "harness.h"

#include <criterion/criterion.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static struct dh h;
static char key[64], hash[65], ref[SBX_REF_MAX];
static sbx_sandbox *sb;

static void setup(void)
{
    dh_sandbox_setup(&h, key, hash, ref, &sb);
}

static void teardown(void)
{
    dh_sandbox_teardown(&h, key, ref, sb);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

TestSuite(docker_exec, .init = setup, .fini = teardown, .timeout = 180);

Test(docker_exec, exit_codes_and_streams)
{
    const char *argv[] = {"sh", "-c", "echo out; echo err >&2; printf 'a\\0b'; exit 7",
                          NULL};
    struct dh_buf out = {0}, err = {0};
    struct sbx_exec_result res;
    struct sbx_call c;
    dh_call_init(&c);
    cr_assert_eq(dh_exec(&h, sb, argv, NULL, 20000, &out, &err, &res, &c), SBX_OK, "%s",
                 c.message);
    cr_expect_eq(res.exit_code, 7);
    cr_expect_eq(res.term_signal, 0);
    cr_expect_eq(res.timed_out, 0);
    cr_expect_eq(out.len, 7);
    cr_expect(out.len == 7 && memcmp(out.data, "out\na\0b", 7) == 0);
    cr_expect_str_eq(err.data, "err\n");
    cr_expect_eq(res.out_bytes, 7);
    cr_expect_eq(res.err_bytes, 4);
    dh_buf_free(&out);
    dh_buf_free(&err);
    dh_call_free(&c);
}

Test(docker_exec, argv_is_not_split_and_env_cwd_apply)
{
    free(dh_sh(&h, sb, "mkdir -p sub/dir"));
    const char *argv[] = {"sh", "-c", "printf '%s|' \"$0\" \"$1\" \"$FOO\"; pwd", "a b",
                          "$HOME", NULL};
    const char *env[] = {"FOO=x=y z", NULL};
    struct dh_buf out = {0};
    struct sbx_exec_args a = {0};
    struct sbx_sink so = dh_buf_sink(&out);
    a.size = sizeof a;
    a.argv = argv;
    a.env = env;
    a.cwd = "sub//dir/";
    a.out = &so;
    struct sbx_exec_result res = {sizeof res, 0, 0, 0, 0, 0};
    struct sbx_call c;
    dh_call_init(&c);
    cr_assert_eq(h.ops->exec(sb, &c, &a, &res), SBX_OK, "%s", c.message);
    cr_expect_str_eq(out.data, "a b|$HOME|x=y z|/workspace/sub/dir\n");
    dh_buf_free(&out);
    const char *bad[] = {"..", "a/../..", "/etc", NULL};
    for (int i = 0; bad[i]; i++) {
        a.cwd = bad[i];
        cr_expect_eq(h.ops->exec(sb, &c, &a, &res), SBX_E_INVALID, "cwd %s", bad[i]);
    }
    a.cwd = "no/such/dir";
    int rc = h.ops->exec(sb, &c, &a, &res);
    /* the ABI's rule: a missing cwd is an invalid argument, nothing runs */
    cr_expect(rc == SBX_E_INVALID, "missing cwd gave %d: %s", rc, c.message);
    /* a symlink leading out of the workspace is refused, as local does;
     * one that stays inside is followed */
    free(dh_sh(&h, sb, "ln -s /etc out && mkdir -p in/real && ln -s in/real inside"));
    a.cwd = "out";
    rc = h.ops->exec(sb, &c, &a, &res);
    cr_expect(rc == SBX_E_INVALID, "cwd through a symlink out gave %d: %s", rc, c.message);
    const char *pwd[] = {"pwd", NULL};
    struct dh_buf out2 = {0};
    struct sbx_sink so2 = dh_buf_sink(&out2);
    a.argv = pwd;
    a.out = &so2;
    a.cwd = "inside";
    cr_expect_eq(h.ops->exec(sb, &c, &a, &res), SBX_OK, "%s", c.message);
    cr_expect(out2.data && strstr(out2.data, "/workspace/in/real"), "%s",
              out2.data ? out2.data : "");
    dh_buf_free(&out2);
    a.cwd = "f.txt";
    free(dh_sh(&h, sb, "touch f.txt"));
    cr_expect_eq(h.ops->exec(sb, &c, &a, &res), SBX_E_INVALID, "cwd that is a file");
    dh_call_free(&c);
}

Test(docker_exec, missing_and_non_executable_commands)
{
    const char *argv[] = {"no-such-command-xyz", NULL};
    struct dh_buf out = {0};
    struct sbx_exec_result res;
    struct sbx_call c;
    dh_call_init(&c);
    int rc = dh_exec(&h, sb, argv, NULL, 20000, &out, NULL, &res, &c);
    cr_expect_eq(rc, SBX_E_NO_COMMAND, "%s: %s", sbx_strerror(rc), c.message);
    cr_expect(strstr(c.message, "no-such-command-xyz"), "%s", c.message);
    cr_expect_eq(out.len, 0, "the daemon's error leaked into stdout");
    free(dh_sh(&h, sb, "printf 'x' > noexec && chmod 644 noexec"));
    const char *argv2[] = {"/workspace/noexec", NULL};
    rc = dh_exec(&h, sb, argv2, NULL, 20000, NULL, NULL, &res, &c);
    cr_expect_eq(rc, SBX_E_NOT_EXEC, "%s: %s", sbx_strerror(rc), c.message);
    dh_buf_free(&out);
    dh_call_free(&c);
}

Test(docker_exec, stdin_is_streamed_both_ways)
{
    size_t n = 3 * 1024 * 1024 + 17;
    char *in = malloc(n + 1);
    for (size_t i = 0; i < n; i++)
        in[i] = (char)('a' + (i * 7) % 26);
    in[n] = '\0';
    const char *cat[] = {"cat", NULL};
    struct dh_buf out = {0};
    struct sbx_exec_result res;
    struct sbx_call c;
    dh_call_init(&c);
    cr_assert_eq(dh_exec(&h, sb, cat, in, 60000, &out, NULL, &res, &c), SBX_OK, "%s",
                 c.message);
    cr_expect_eq(res.exit_code, 0);
    cr_expect_eq(out.len, n, "got %zu of %zu bytes back", out.len, n);
    cr_expect(out.len == n && memcmp(out.data, in, n) == 0, "stdin came back altered");
    dh_buf_free(&out);
    /* a reader that stops early must not hang the exec */
    const char *head[] = {"head", "-c", "5", NULL};
    double t0 = now();
    cr_assert_eq(dh_exec(&h, sb, head, in, 30000, &out, NULL, &res, &c), SBX_OK, "%s",
                 c.message);
    cr_expect_str_eq(out.data, "ahovc");
    cr_expect_lt(now() - t0, 10.0);
    dh_buf_free(&out);
    /* no stdin: end of file at once */
    cr_assert_eq(dh_exec(&h, sb, cat, NULL, 10000, &out, NULL, &res, &c), SBX_OK);
    cr_expect_eq(res.timed_out, 0);
    cr_expect_eq(out.len, 0);
    free(in);
    dh_call_free(&c);
}

/* Records when the first stdout chunk arrived. */
struct first_chunk {
    double at;
    size_t bytes;
};

static int first_write(void *ctx, const void *p, size_t n)
{
    struct first_chunk *f = ctx;
    (void)p;
    if (!f->at)
        f->at = now();
    f->bytes += n;
    return 0;
}

Test(docker_exec, output_arrives_while_the_command_runs)
{
    const char *argv[] = {"sh", "-c", "echo early; sleep 2; echo late", NULL};
    struct first_chunk f = {0, 0};
    struct sbx_sink so = SBX_SINK_INIT(&f, first_write);
    struct sbx_exec_args a = {0};
    a.size = sizeof a;
    a.argv = argv;
    a.out = &so;
    struct sbx_exec_result res = {sizeof res, 0, 0, 0, 0, 0};
    struct sbx_call c;
    dh_call_init(&c);
    double t0 = now();
    cr_assert_eq(h.ops->exec(sb, &c, &a, &res), SBX_OK, "%s", c.message);
    double end = now();
    cr_expect_lt(f.at - t0, 1.5, "first output came after %.2f s", f.at - t0);
    cr_expect_gt(end - t0, 1.9);
    cr_expect_eq(f.bytes, 11);
    dh_call_free(&c);
}

Test(docker_exec, large_output_is_streamed)
{
    /* 64 MiB through a counting sink */
    const char *argv[] = {"sh", "-c", "head -c 67108864 /dev/zero", NULL};
    struct first_chunk f = {0, 0};
    struct sbx_sink so = SBX_SINK_INIT(&f, first_write);
    struct sbx_exec_args a = {0};
    a.size = sizeof a;
    a.argv = argv;
    a.out = &so;
    struct sbx_exec_result res = {sizeof res, 0, 0, 0, 0, 0};
    struct sbx_call c;
    dh_call_init(&c);
    cr_assert_eq(h.ops->exec(sb, &c, &a, &res), SBX_OK, "%s", c.message);
    cr_expect_eq(f.bytes, 67108864);
    cr_expect_eq(res.out_bytes, 67108864);
    dh_call_free(&c);
}

static const char tree[] = "sleep 30 & echo $! > child; echo $$ > pid; wait";
static const char survivors[] =
    "sleep 0.3; for f in pid child; do p=$(cat $f); "
    "if kill -0 $p 2>/dev/null && ! grep -q ') Z ' /proc/$p/stat; then echo $f=$p; fi; "
    "done";

Test(docker_exec, timeout_kills_the_whole_tree)
{
    const char *argv[] = {"sh", "-c", tree, NULL};
    struct sbx_exec_result res;
    struct sbx_call c;
    dh_call_init(&c);
    double t0 = now();
    cr_assert_eq(dh_exec(&h, sb, argv, NULL, 700, NULL, NULL, &res, &c), SBX_OK, "%s",
                 c.message);
    double took = now() - t0;
    cr_expect_eq(res.timed_out, 1);
    cr_expect_eq(res.exit_code, -1);
    cr_expect_eq(res.term_signal, 9);
    cr_expect_lt(took, 5.0, "returned after %.2f s", took);
    char *left = dh_sh(&h, sb, survivors);
    cr_expect_str_eq(left, "", "survivors: %s", left);
    free(left);
    dh_call_free(&c);
}

struct canceller {
    struct sbx_call *c;
    double fired;
};

static void *cancel_soon(void *arg)
{
    struct canceller *k = arg;
    struct timespec ts = {1, 0};
    nanosleep(&ts, NULL);
    k->fired = now();
    dh_call_cancel(k->c);
    return NULL;
}

Test(docker_exec, cancel_kills_the_whole_tree_promptly)
{
    const char *argv[] = {"sh", "-c", tree, NULL};
    struct sbx_exec_result res;
    struct sbx_call c;
    dh_call_init(&c);
    struct canceller k = {&c, 0};
    pthread_t th;
    pthread_create(&th, NULL, cancel_soon, &k);
    int rc = dh_exec(&h, sb, argv, NULL, 0, NULL, NULL, &res, &c);
    double back = now();
    pthread_join(th, NULL);
    cr_expect_eq(rc, SBX_E_CANCELLED, "%s: %s", sbx_strerror(rc), c.message);
    cr_expect_lt(back - k.fired, 1.0, "returned %.2f s after the cancel", back - k.fired);
    char *left = dh_sh(&h, sb, survivors);
    cr_expect_str_eq(left, "", "survivors: %s", left);
    free(left);
    dh_call_free(&c);
}

struct par {
    int i;
    int rc;
    char out[64];
};

static void *one_exec(void *arg)
{
    struct par *p = arg;
    char script[64];
    snprintf(script, sizeof script, "sleep 1; echo job%d", p->i);
    const char *argv[] = {"sh", "-c", script, NULL};
    struct dh_buf out = {0};
    struct sbx_exec_result res;
    struct sbx_call c;
    dh_call_init(&c);
    p->rc = dh_exec(&h, sb, argv, NULL, 30000, &out, NULL, &res, &c);
    snprintf(p->out, sizeof p->out, "%s", out.data ? out.data : "");
    dh_buf_free(&out);
    dh_call_free(&c);
    return NULL;
}

Test(docker_exec, concurrent_execs_on_one_sandbox)
{
    enum { N = 6 };
    pthread_t th[N];
    struct par p[N];
    double t0 = now();
    for (int i = 0; i < N; i++) {
        p[i].i = i;
        pthread_create(&th[i], NULL, one_exec, &p[i]);
    }
    for (int i = 0; i < N; i++)
        pthread_join(th[i], NULL);
    double took = now() - t0;
    for (int i = 0; i < N; i++) {
        char want[32];
        snprintf(want, sizeof want, "job%d\n", i);
        cr_expect_eq(p[i].rc, SBX_OK);
        cr_expect_str_eq(p[i].out, want);
    }
    cr_expect_lt(took, 4.0, "6 one-second execs took %.2f s: not concurrent", took);
}

static int refuse(void *ctx, const void *p, size_t n)
{
    (void)ctx;
    (void)p;
    (void)n;
    return SBX_E_IO;
}

Test(docker_exec, failing_sink_stops_and_kills_the_command)
{
    const char *argv[] = {"sh", "-c", "echo $$ > spid; while :; do echo x; sleep 0.05; done",
                          NULL};
    struct sbx_sink so = SBX_SINK_INIT(NULL, refuse);
    struct sbx_exec_args a = {0};
    a.size = sizeof a;
    a.argv = argv;
    a.out = &so;
    struct sbx_exec_result res = {sizeof res, 0, 0, 0, 0, 0};
    struct sbx_call c;
    dh_call_init(&c);
    double t0 = now();
    cr_expect_eq(h.ops->exec(sb, &c, &a, &res), SBX_E_IO, "%s", c.message);
    cr_expect_lt(now() - t0, 5.0);
    char *left = dh_sh(&h, sb, "sleep 0.3; p=$(cat spid); kill -0 $p 2>/dev/null && "
                                "! grep -q ') Z ' /proc/$p/stat && echo alive; true");
    cr_expect_str_eq(left, "");
    free(left);
    dh_call_free(&c);
}

/* Output that looks like the daemon's own start error is the command's
 * output all the same: every byte arrives and the exit status is the
 * command's. */
Test(docker_exec, output_resembling_a_start_error_is_delivered_whole)
{
    const char *argv[] = {"sh", "-c",
                          "printf 'OCI runtime exec failed: exec failed: not really\\n'; "
                          "head -c 102400 /dev/zero | tr '\\0' 'q'; echo; echo tail-marker",
                          NULL};
    struct dh_buf out = {0}, err = {0};
    struct sbx_exec_result res;
    struct sbx_call c;
    dh_call_init(&c);
    int rc = dh_exec(&h, sb, argv, NULL, 30000, &out, &err, &res, &c);
    cr_assert_eq(rc, SBX_OK, "%s: %s", sbx_strerror(rc), c.message);
    cr_expect_eq(res.exit_code, 0);
    size_t head = strlen("OCI runtime exec failed: exec failed: not really\n");
    size_t want = head + 102400 + 1 + strlen("tail-marker\n");
    cr_expect_eq(out.len, want, "got %zu of %zu bytes", out.len, want);
    cr_expect_eq(res.out_bytes, want);
    cr_expect(out.len == want &&
                  memcmp(out.data, "OCI runtime exec failed: exec failed: not really\n",
                         head) == 0 &&
                  strcmp(out.data + want - 12, "tail-marker\n") == 0,
              "the output was altered");
    /* the same with the text split over two writes, and on a command that
     * fails with the exit code a start failure would have */
    dh_buf_free(&out);
    const char *argv2[] = {"sh", "-c",
                           "printf 'OCI run'; sleep 0.2; printf 'time exec failed: x\\n'; "
                           "exit 126",
                           NULL};
    rc = dh_exec(&h, sb, argv2, NULL, 30000, &out, &err, &res, &c);
    cr_assert_eq(rc, SBX_OK, "%s: %s", sbx_strerror(rc), c.message);
    cr_expect_eq(res.exit_code, 126);
    cr_expect_str_eq(out.data ? out.data : "", "OCI runtime exec failed: x\n");
    dh_buf_free(&out);
    dh_buf_free(&err);
    dh_call_free(&c);
}

Test(docker_exec, start_failures_are_classified_from_the_container)
{
    struct sbx_exec_result res;
    struct sbx_call c;
    dh_call_init(&c);
    free(dh_sh(&h, sb, "mkdir -p bin adir && printf 'x' > bin/plain && chmod 644 bin/plain"));
    struct {
        const char *prog;
        const char *path; /* PATH for the command, or NULL */
        int want;
    } cases[] = {
        {"no-such-command-xyz", NULL, SBX_E_NO_COMMAND},
        {"/no/such/dir/prog", NULL, SBX_E_NO_COMMAND},
        {"/workspace/bin/plain", NULL, SBX_E_NOT_EXEC},
        {"./bin/plain", NULL, SBX_E_NOT_EXEC},
        {"/workspace/adir", NULL, SBX_E_NOT_EXEC},
        {"plain", "PATH=/workspace/bin:/bin", SBX_E_NOT_EXEC},
        {"plain", "PATH=/bin", SBX_E_NO_COMMAND},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *argv[] = {cases[i].prog, NULL};
        const char *env[] = {cases[i].path, NULL};
        struct dh_buf out = {0};
        struct sbx_sink so = dh_buf_sink(&out);
        struct sbx_exec_args a = {0};
        a.size = sizeof a;
        a.argv = argv;
        a.env = cases[i].path ? env : NULL;
        a.out = &so;
        memset(&res, 0, sizeof res);
        res.size = sizeof res;
        int rc = h.ops->exec(sb, &c, &a, &res);
        cr_expect_eq(rc, cases[i].want, "%s (%s): %s: %s", cases[i].prog,
                     cases[i].path ? cases[i].path : "default PATH", sbx_strerror(rc),
                     c.message);
        cr_expect_eq(out.len, 0, "%s: the daemon's error reached stdout: %.*s",
                     cases[i].prog, (int)out.len, out.data ? out.data : "");
        dh_buf_free(&out);
    }
    dh_call_free(&c);
}
