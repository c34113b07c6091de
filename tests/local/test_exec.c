/*
 * test_exec.c - commands of the `local` provider: exit status, output
 * streams, stdin streaming, environment, cwd confinement, timeouts and
 * cancellation killing the whole process group, spawn errors.
 */
#include "harness.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

TestSuite(local_exec, .init = harness_setup, .fini = harness_teardown);

/* pids written by a command into a workspace file, one per line. */
static int read_pids(const char *name, int *pids, int max)
{
    char path[SBX_REF_MAX + 64], buf[256];
    path_join(path, sizeof path, H.ws, name);
    if (slurp_small(path, buf, sizeof buf) < 0)
        return 0;
    int n = 0;
    for (char *p = buf; n < max && *p != '\0';) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p)
            break;
        pids[n++] = (int)v;
        p = end;
        while (*p == '\n')
            p++;
    }
    return n;
}

static int count_open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    cr_assert_not_null(d);
    int n = 0;
    while (readdir(d) != NULL)
        n++;
    closedir(d);
    return n;
}

Test(local_exec, exit_code_is_reported)
{
    struct run_result r;
    run_cmd(&r, (const char *const[]){"sh", "-c", "exit 7", NULL}, NULL, NULL,
            NULL, 0);
    cr_assert_eq(r.rc, SBX_OK, "%s", H.call.msg);
    cr_assert_eq(r.res.exit_code, 7);
    cr_assert_eq(r.res.term_signal, 0);
    cr_assert_eq(r.res.timed_out, 0);
    run_result_free(&r);

    run_cmd(&r, (const char *const[]){"true", NULL}, NULL, NULL, NULL, 0);
    cr_assert_eq(r.rc, SBX_OK);
    cr_assert_eq(r.res.exit_code, 0);
    run_result_free(&r);

    /* A huge timeout is simply no practical limit. */
    run_cmd(&r, (const char *const[]){"true", NULL}, NULL, NULL, NULL,
            INT64_MAX);
    cr_assert_eq(r.rc, SBX_OK, "%s", H.call.msg);
    cr_assert_eq(r.res.timed_out, 0);
    run_result_free(&r);
}

Test(local_exec, terminating_signal_is_reported)
{
    struct run_result r;
    run_cmd(&r, (const char *const[]){"sh", "-c", "kill -TERM $$", NULL}, NULL,
            NULL, NULL, 0);
    cr_assert_eq(r.rc, SBX_OK, "%s", H.call.msg);
    cr_assert_eq(r.res.exit_code, -1);
    cr_assert_eq(r.res.term_signal, SIGTERM);
    cr_assert_eq(r.res.timed_out, 0);
    run_result_free(&r);
}

Test(local_exec, stdout_and_stderr_are_kept_apart)
{
    struct run_result r;
    run_cmd(&r,
            (const char *const[]){"sh", "-c",
                                  "printf 'to out'; printf 'to err' >&2; "
                                  "printf ' again'",
                                  NULL},
            NULL, NULL, NULL, 0);
    cr_assert_eq(r.rc, SBX_OK, "%s", H.call.msg);
    cr_assert_str_eq(buf_sink_str(&r.out), "to out again");
    cr_assert_str_eq(buf_sink_str(&r.err), "to err");
    cr_assert_eq(r.res.out_bytes, 12);
    cr_assert_eq(r.res.err_bytes, 6);
    run_result_free(&r);
}

Test(local_exec, large_output_arrives_in_chunks)
{
    struct run_result r;
    run_cmd(&r, (const char *const[]){"head", "-c", "3000000", "/dev/zero",
                                      NULL},
            NULL, NULL, NULL, 0);
    cr_assert_eq(r.rc, SBX_OK, "%s", H.call.msg);
    cr_assert_eq(r.res.out_bytes, 3000000);
    cr_assert_eq(r.out.len, 3000000);
    cr_assert(r.out.calls > 1, "output must be streamed, not delivered once");
    run_result_free(&r);
}

Test(local_exec, stdin_is_streamed)
{
    const size_t len = 1024 * 1024;
    unsigned char *data = malloc(len);
    cr_assert_not_null(data);
    for (size_t i = 0; i < len; i++)
        data[i] = (unsigned char)((i * 2654435761u) >> 13); /* has NULs */
    struct mem_source m = {.data = data, .len = len, .chunk = 7001,
                           .call = &H.call};
    struct sbx_source src = mem_source(&m);

    struct run_result r;
    run_cmd(&r, (const char *const[]){"cat", NULL}, NULL, NULL, &src, 0);
    cr_assert_eq(r.rc, SBX_OK, "%s", H.call.msg);
    cr_assert_eq(r.res.exit_code, 0);
    cr_assert_eq(r.res.out_bytes, len);
    cr_assert_eq(r.out.len, len);
    cr_assert(memcmp(r.out.data, data, len) == 0, "stdin came back altered");
    run_result_free(&r);
    free(data);
}

/* A source over a pipe: read blocks until the test writes or closes it,
 * like a terminal with nobody typing. */
struct pipe_source {
    int rd, wr;
};

static long pipe_source_read(void *ctx, void *buf, size_t cap)
{
    struct pipe_source *p = ctx;
    for (;;) {
        ssize_t n = read(p->rd, buf, cap);
        if (n >= 0 || errno != EINTR)
            return (long)n;
    }
}

/* Output sink that answers "ready" by typing a line and closing the input. */
struct answering_sink {
    struct buf_sink seen;
    struct pipe_source *in;
};

static int answering_write(void *ctx, const void *data, size_t len)
{
    struct answering_sink *a = ctx;
    struct sbx_sink inner = buf_sink(&a->seen);
    inner.write(inner.ctx, data, len);
    if (a->in->wr >= 0 && strstr(buf_sink_str(&a->seen), "ready\n")) {
        cr_assert_eq(write(a->in->wr, "typed\n", 6), 6);
        close(a->in->wr);
        a->in->wr = -1;
    }
    return 0;
}

Test(local_exec, output_streams_while_the_stdin_source_blocks, .timeout = 20)
{
    int p[2];
    cr_assert_eq(pipe(p), 0);
    struct pipe_source ps = {.rd = p[0], .wr = p[1]};
    struct sbx_source src = {.size = sizeof(struct sbx_source), .ctx = &ps, .read = pipe_source_read};
    struct answering_sink as = {.in = &ps};
    struct sbx_sink out = {.size = sizeof(struct sbx_sink), .ctx = &as, .write = answering_write};
    struct sbx_exec_args a = {
        .size = sizeof a,
        .argv = (const char *const[]){"sh", "-c", "echo ready; cat", NULL},
        .in = &src, .out = &out, .timeout_ms = 10000,
    };
    struct sbx_exec_result res = {.size = sizeof res};
    harness_call_init(&H.call);
    int rc = H.ops->exec(H.sb, &H.call, &a, &res);
    cr_assert_eq(rc, SBX_OK, "%s", H.call.msg);
    cr_assert_eq(res.timed_out, 0, "stdout was held up by the idle source");
    cr_assert_str_eq(buf_sink_str(&as.seen), "ready\ntyped\n");
    cr_assert_eq(res.exit_code, 0);
    close(ps.rd);
    buf_sink_free(&as.seen);
}

Test(local_exec, missing_stdin_is_empty)
{
    struct run_result r;
    run_cmd(&r, (const char *const[]){"wc", "-c", NULL}, NULL, NULL, NULL,
            5000);
    cr_assert_eq(r.rc, SBX_OK, "%s", H.call.msg);
    cr_assert_eq(r.res.timed_out, 0);
    cr_assert_eq(atoi(buf_sink_str(&r.out)), 0);
    run_result_free(&r);
}

Test(local_exec, command_ignoring_its_stdin_is_fine)
{
    /* `true` exits without reading: feeding it must end in EPIPE, handled
     * quietly (no SIGPIPE may kill this process). */
    const size_t len = 4 * 1024 * 1024;
    unsigned char *data = calloc(1, len);
    cr_assert_not_null(data);
    struct mem_source m = {.data = data, .len = len, .call = &H.call};
    struct sbx_source src = mem_source(&m);
    struct run_result r;
    run_cmd(&r, (const char *const[]){"true", NULL}, NULL, NULL, &src, 0);
    cr_assert_eq(r.rc, SBX_OK, "%s", H.call.msg);
    cr_assert_eq(r.res.exit_code, 0);
    run_result_free(&r);
    free(data);
}

Test(local_exec, failing_stdin_source_stops_the_command)
{
    static unsigned char data[200000];
    struct mem_source m = {.data = data, .len = sizeof data, .chunk = 1000,
                           .fail_at = 50000, .call = &H.call};
    struct sbx_source src = mem_source(&m);
    struct run_result r;
    run_cmd(&r, (const char *const[]){"cat", NULL}, NULL, NULL, &src, 10000);
    cr_assert_eq(r.rc, SBX_E_IO);
    cr_assert_str_eq(H.call.msg, "test source failed",
                     "the source's own message must be kept");
    run_result_free(&r);
}

Test(local_exec, environment_is_only_what_the_caller_passes)
{
    cr_assert_eq(setenv("SBX_TEST_MUST_NOT_LEAK", "1", 1), 0);
    struct run_result r;
    run_cmd(&r, (const char *const[]){"env", NULL},
            (const char *const[]){"FOO=bar", "EMPTY=", NULL}, NULL, NULL, 0);
    cr_assert_eq(r.rc, SBX_OK, "%s", H.call.msg);
    cr_assert_str_eq(buf_sink_str(&r.out), "FOO=bar\nEMPTY=\n");
    run_result_free(&r);

    run_cmd(&r, (const char *const[]){"env", NULL}, NULL, NULL, NULL, 0);
    cr_assert_eq(r.rc, SBX_OK, "%s", H.call.msg);
    cr_assert_str_eq(buf_sink_str(&r.out), "");
    run_result_free(&r);
}

Test(local_exec, path_is_searched_in_the_callers_environment)
{
    static const char script[] = "#!/bin/sh\necho from-workspace-bin\n";
    cr_assert_eq(put_file("bin/sbx-hello", script, sizeof script - 1, 0755),
                 SBX_OK, "%s", H.call.msg);
    char path_var[SBX_REF_MAX + 64];
    snprintf(path_var, sizeof path_var, "PATH=/nonexistent:%s/bin:/bin",
             H.ws);

    struct run_result r;
    run_cmd(&r, (const char *const[]){"sbx-hello", NULL},
            (const char *const[]){path_var, NULL}, NULL, NULL, 0);
    cr_assert_eq(r.rc, SBX_OK, "%s", H.call.msg);
    cr_assert_str_eq(buf_sink_str(&r.out), "from-workspace-bin\n");
    run_result_free(&r);

    /* Without PATH in the caller's env the default applies, not the
     * workspace bin and not this process's PATH. */
    run_cmd(&r, (const char *const[]){"sbx-hello", NULL}, NULL, NULL, NULL, 0);
    cr_assert_eq(r.rc, SBX_E_NO_COMMAND);
    run_result_free(&r);
}

Test(local_exec, cwd_defaults_to_the_workspace_and_may_be_a_subdir)
{
    cr_assert_eq(put_file("sub/dir/.keep", "", 0, 0), SBX_OK);
    struct run_result r;
    run_cmd(&r, (const char *const[]){"pwd", "-P", NULL}, NULL, NULL, NULL,
            0);
    cr_assert_eq(r.rc, SBX_OK, "%s", H.call.msg);
    char want[SBX_REF_MAX + 32];
    snprintf(want, sizeof want, "%s\n", H.ws);
    cr_assert_str_eq(buf_sink_str(&r.out), want);
    run_result_free(&r);

    run_cmd(&r, (const char *const[]){"pwd", "-P", NULL}, NULL, "sub/dir",
            NULL, 0);
    cr_assert_eq(r.rc, SBX_OK, "%s", H.call.msg);
    snprintf(want, sizeof want, "%s/sub/dir\n", H.ws);
    cr_assert_str_eq(buf_sink_str(&r.out), want);
    run_result_free(&r);
}

Test(local_exec, cwd_escaping_the_workspace_is_refused)
{
    char link[SBX_REF_MAX + 16];
    path_join(link, sizeof link, H.ws, "out");
    cr_assert_eq(symlink(H.outside, link), 0);
    cr_assert_eq(put_file("file", "x", 1, 0), SBX_OK);
    const char *bad[] = {"..", "../..", "sub/../..", "/tmp", "out",
                         "missing", "file"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct run_result r;
        run_cmd(&r, (const char *const[]){"touch", "created-here", NULL},
                NULL, bad[i], NULL, 0);
        cr_assert_eq(r.rc, SBX_E_INVALID, "cwd '%s': %d %s", bad[i], r.rc,
                     H.call.msg);
        cr_assert(strstr(H.call.msg, bad[i]) != NULL, "%s", H.call.msg);
        run_result_free(&r);
    }
    char probe[400];
    path_join(probe, sizeof probe, H.outside, "created-here");
    cr_assert(access(probe, F_OK) != 0, "a command ran outside");
}

Test(local_exec, timeout_kills_the_whole_process_group)
{
    struct run_result r;
    run_cmd(&r,
            (const char *const[]){"sh", "-c",
                                  "echo $$ > pids; sleep 30 & "
                                  "echo $! >> pids; sleep 30",
                                  NULL},
            NULL, NULL, NULL, 300);
    cr_assert_eq(r.rc, SBX_OK, "%s", H.call.msg);
    cr_assert_eq(r.res.timed_out, 1);
    cr_assert_eq(r.res.exit_code, -1);
    cr_assert_eq(r.res.term_signal, SIGKILL);
    cr_assert(r.seconds >= 0.25 && r.seconds < 2.0, "took %.3f s", r.seconds);

    int pids[4];
    cr_assert_eq(read_pids("pids", pids, 4), 2, "the command wrote no pids");
    for (int i = 0; i < 2; i++)
        cr_assert(process_gone(pids[i]), "pid %d survived the timeout",
                  pids[i]);
    run_result_free(&r);
}

Test(local_exec, leader_exit_does_not_wait_for_background_children)
{
    /* The background child keeps stdout open; exec must still return
     * promptly after the leader exits, and leave nothing running. */
    struct run_result r;
    run_cmd(&r,
            (const char *const[]){"sh", "-c",
                                  "sleep 30 & echo $! > pids; echo done",
                                  NULL},
            NULL, NULL, NULL, 0);
    cr_assert_eq(r.rc, SBX_OK, "%s", H.call.msg);
    cr_assert_eq(r.res.exit_code, 0);
    cr_assert_eq(r.res.timed_out, 0);
    cr_assert_str_eq(buf_sink_str(&r.out), "done\n");
    cr_assert(r.seconds < 2.0, "took %.3f s", r.seconds);
    int pid;
    cr_assert_eq(read_pids("pids", &pid, 1), 1);
    cr_assert(process_gone(pid), "background pid %d left running", pid);
    run_result_free(&r);
}

Test(local_exec, detached_background_children_do_not_outlive_exec)
{
    /* Output redirected away: the pipes reach EOF as soon as the leader
     * exits, and the child must still be killed. */
    struct run_result r;
    run_cmd(&r,
            (const char *const[]){"sh", "-c",
                                  "sleep 30 >/dev/null 2>&1 </dev/null & "
                                  "echo $! > pids",
                                  NULL},
            NULL, NULL, NULL, 0);
    cr_assert_eq(r.rc, SBX_OK, "%s", H.call.msg);
    cr_assert_eq(r.res.exit_code, 0);
    int pid;
    cr_assert_eq(read_pids("pids", &pid, 1), 1);
    cr_assert(process_gone(pid), "background pid %d left running", pid);
    run_result_free(&r);
}

static void *cancel_later(void *arg)
{
    sbx_call *call = arg;
    usleep(200 * 1000);
    /* Only the fd: the provider must wake up from it. */
    cr_assert_eq(write(call->cancel_wr, "x", 1), 1);
    return NULL;
}

Test(local_exec, cancel_fd_stops_the_command_within_a_second)
{
    struct buf_sink out = {0}, err = {0};
    struct sbx_sink so = buf_sink(&out), se = buf_sink(&err);
    struct sbx_exec_args a = {
        .size = sizeof a,
        .argv = (const char *const[]){"sh", "-c",
                                      "echo $$ > pids; sleep 30 & "
                                      "echo $! >> pids; sleep 30",
                                      NULL},
        .out = &so, .err = &se,
    };
    struct sbx_exec_result res = {.size = sizeof res};
    harness_call_init(&H.call);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, cancel_later, &H.call), 0);
    double t0 = now_seconds();
    int rc = H.ops->exec(H.sb, &H.call, &a, &res);
    double took = now_seconds() - t0;
    pthread_join(t, NULL);

    cr_assert_eq(rc, SBX_E_CANCELLED, "%d %s", rc, H.call.msg);
    cr_assert_eq(H.call.status, SBX_E_CANCELLED);
    cr_assert(took < 1.2, "cancellation took %.3f s", took);
    int pids[4];
    cr_assert_eq(read_pids("pids", pids, 4), 2);
    for (int i = 0; i < 2; i++)
        cr_assert(process_gone(pids[i]), "pid %d survived cancellation",
                  pids[i]);
    buf_sink_free(&out);
    buf_sink_free(&err);
}

Test(local_exec, a_failing_sink_stops_the_command)
{
    struct buf_sink out = {.limit = 100000, .fail_status = SBX_E_IO};
    struct sbx_sink so = buf_sink(&out);
    struct sbx_exec_args a = {
        .size = sizeof a,
        .argv = (const char *const[]){"yes", NULL},
        .out = &so,
    };
    struct sbx_exec_result res = {.size = sizeof res};
    harness_call_init(&H.call);
    double t0 = now_seconds();
    int rc = H.ops->exec(H.sb, &H.call, &a, &res);
    cr_assert_eq(rc, SBX_E_IO);
    cr_assert(now_seconds() - t0 < 2.0);
    size_t len = out.len;
    cr_assert(len > 100000 && len < 100000 + 64 * 1024 + 1,
              "sink called after it failed (%zu bytes)", len);
    buf_sink_free(&out);
}

Test(local_exec, unknown_command_is_no_command)
{
    const char *names[] = {"sbx-no-such-command", "./no-such-file",
                           "/nonexistent/dir/cmd"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        struct run_result r;
        run_cmd(&r, (const char *const[]){names[i], NULL}, NULL, NULL, NULL,
                0);
        cr_assert_eq(r.rc, SBX_E_NO_COMMAND, "%s: %d %s", names[i], r.rc,
                     H.call.msg);
        cr_assert(strstr(H.call.msg, names[i]) != NULL, "%s", H.call.msg);
        run_result_free(&r);
    }
}

Test(local_exec, non_executable_file_is_not_exec)
{
    static const char script[] = "#!/bin/sh\necho should not run\n";
    cr_assert_eq(put_file("script.sh", script, sizeof script - 1, 0644),
                 SBX_OK);
    cr_assert_eq(put_file("bin/tool", script, sizeof script - 1, 0644),
                 SBX_OK);
    cr_assert_eq(put_file("garbage", "\x01\x02\x03\x04", 4, 0755), SBX_OK);

    struct run_result r;
    run_cmd(&r, (const char *const[]){"./script.sh", NULL}, NULL, NULL, NULL,
            0);
    cr_assert_eq(r.rc, SBX_E_NOT_EXEC, "%d %s", r.rc, H.call.msg);
    cr_assert(strstr(H.call.msg, "script.sh") != NULL, "%s", H.call.msg);
    cr_assert_eq(r.out.len, 0);
    run_result_free(&r);

    /* Found through PATH but not executable. */
    char path_var[SBX_REF_MAX + 16];
    snprintf(path_var, sizeof path_var, "PATH=%s/bin", H.ws);
    run_cmd(&r, (const char *const[]){"tool", NULL},
            (const char *const[]){path_var, NULL}, NULL, NULL, 0);
    cr_assert_eq(r.rc, SBX_E_NOT_EXEC, "%d %s", r.rc, H.call.msg);
    run_result_free(&r);

    /* Executable bit but no valid format; and a directory. */
    const char *others[] = {"./garbage", "./bin"};
    for (size_t i = 0; i < 2; i++) {
        run_cmd(&r, (const char *const[]){others[i], NULL}, NULL, NULL, NULL,
                0);
        cr_assert_eq(r.rc, SBX_E_NOT_EXEC, "%s: %d %s", others[i], r.rc,
                     H.call.msg);
        run_result_free(&r);
    }
}

Test(local_exec, no_descriptor_leaks_into_the_command_or_the_host)
{
    int before = count_open_fds();
    struct run_result r;
    run_cmd(&r, (const char *const[]){"sh", "-c", "ls /proc/$$/fd", NULL},
            NULL, NULL, NULL, 0);
    cr_assert_eq(r.rc, SBX_OK, "%s", H.call.msg);
    cr_assert_str_eq(buf_sink_str(&r.out), "0\n1\n2\n");
    run_result_free(&r);
    cr_assert_eq(count_open_fds(), before);
}

Test(local_exec, signal_dispositions_are_reset_for_the_command)
{
    /* A host that ignores SIGPIPE must not pass that on: with the default
     * disposition `yes` dies quietly of SIGPIPE instead of complaining. */
    signal(SIGPIPE, SIG_IGN);
    struct run_result r;
    run_cmd(&r, (const char *const[]){"sh", "-c", "yes | head -c 1", NULL},
            NULL, NULL, NULL, 5000);
    cr_assert_eq(r.rc, SBX_OK, "%s", H.call.msg);
    cr_assert_str_eq(buf_sink_str(&r.out), "y");
    cr_assert_str_eq(buf_sink_str(&r.err), "", "SIGPIPE was inherited as "
                                               "ignored");
    run_result_free(&r);
}

struct worker {
    int index;
    int failures;
};

static void *exec_worker(void *arg)
{
    struct worker *w = arg;
    for (int i = 0; i < 10; i++) {
        char word[32], want[40];
        snprintf(word, sizeof word, "w%d-%d", w->index, i);
        snprintf(want, sizeof want, "%s\n", word);
        struct buf_sink out = {0};
        struct sbx_sink so = buf_sink(&out);
        struct sbx_exec_args a = {
            .size = sizeof a,
            .argv = (const char *const[]){"echo", word, NULL},
            .out = &so,
        };
        struct sbx_exec_result res = {.size = sizeof res};
        sbx_call call = {0};
        call.cancel_rd = -1;
        int rc = H.ops->exec(H.sb, &call, &a, &res);
        if (rc != SBX_OK || res.exit_code != 0 ||
            strcmp(buf_sink_str(&out), want) != 0)
            w->failures++;
        buf_sink_free(&out);
    }
    return NULL;
}

Test(local_exec, concurrent_execs_on_one_sandbox)
{
    pthread_t t[4];
    struct worker w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (struct worker){.index = i};
        cr_assert_eq(pthread_create(&t[i], NULL, exec_worker, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        cr_assert_eq(w[i].failures, 0, "worker %d failed", i);
    }
}

Test(local_exec, bad_arguments_are_invalid)
{
    struct run_result r;
    run_cmd(&r, (const char *const[]){NULL}, NULL, NULL, NULL, 0);
    cr_assert_eq(r.rc, SBX_E_INVALID);
    run_result_free(&r);
    run_cmd(&r, (const char *const[]){"", NULL}, NULL, NULL, NULL, 0);
    cr_assert_eq(r.rc, SBX_E_INVALID);
    run_result_free(&r);
    run_cmd(&r, (const char *const[]){"true", NULL}, NULL, NULL, NULL, -5);
    cr_assert_eq(r.rc, SBX_E_INVALID);
    run_result_free(&r);
}
