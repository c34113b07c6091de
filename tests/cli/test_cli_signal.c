/*
 * test_cli_signal.c - `sbx run` interrupted by SIGINT (Ctrl-C) or SIGTERM:
 * it exits promptly with 128+signal, the command's process tree is gone and
 * the workspace has been destroyed.
 */
#include "cli_harness.h"

#include <criterion/criterion.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static struct cli_env env;

static void setup(void)
{
    cli_env_init(&env);
    cli_env_local_config(&env);
}

static void teardown(void)
{
    cli_env_fini(&env);
}

TestSuite(cli_signal, .init = setup, .fini = teardown, .timeout = 60);

/* Start a command that prints its workspace, its own pid and the pid of a
 * background child, then sleeps; interrupt sbx with `sig`. */
static void interrupt_with(int sig)
{
    struct cli_proc p;
    cli_spawn(&env,
              (const char *[]){"run", "--", "sh", "-c",
                               "pwd; sleep 30 & echo $!; echo $$; exec sleep 30", NULL},
              CLI_STDIN_NULL, &p);
    char ws[PATH_MAX], child[32], leader[32];
    cr_assert(cli_read_line(&p, ws, sizeof ws, 10000), "no workspace line");
    cr_assert(cli_read_line(&p, child, sizeof child, 10000), "no child pid");
    cr_assert(cli_read_line(&p, leader, sizeof leader, 10000), "no leader pid");
    pid_t child_pid = (pid_t)atoi(child), leader_pid = (pid_t)atoi(leader);
    cr_assert_gt(child_pid, 1);
    cr_assert_gt(leader_pid, 1);
    struct stat st;
    cr_assert_eq(stat(ws, &st), 0, "workspace %s does not exist", ws);
    cr_assert(!cli_pid_gone(leader_pid), "the command is not running");

    long long t0 = cli_now_ms();
    cr_assert_eq(kill(p.pid, sig), 0);
    int status = cli_wait(&p, 10000);
    long long took = cli_now_ms() - t0;
    cr_assert_eq(status, 128 + sig, "status %d", status);
    cr_assert_lt(took, 3000, "sbx took %lld ms to stop", took);

    /* The whole tree is gone, not just the leader. */
    long long deadline = cli_now_ms() + 2000;
    while ((!cli_pid_gone(leader_pid) || !cli_pid_gone(child_pid)) &&
           cli_now_ms() < deadline)
        usleep(10000);
    cr_assert(cli_pid_gone(leader_pid), "the command (pid %d) survived", (int)leader_pid);
    cr_assert(cli_pid_gone(child_pid), "its child (pid %d) survived", (int)child_pid);
    cr_assert_neq(stat(ws, &st), 0, "workspace %s was not removed", ws);
    cr_assert_eq(cli_dir_entries(env.ws_root), 0);
}

Test(cli_signal, sigint_cancels_destroys_and_exits_130)
{
    interrupt_with(SIGINT);
}

Test(cli_signal, sigterm_cancels_destroys_and_exits_143)
{
    interrupt_with(SIGTERM);
}

/* sbx is blocked feeding a stdin on which nothing arrives (the pipe stays
 * open and empty). The source read may hold up the output, so the test
 * does not wait for any. */
Test(cli_signal, sigint_while_waiting_for_stdin)
{
    struct cli_proc p;
    cli_spawn(&env, (const char *[]){"run", "--", "cat", NULL}, CLI_STDIN_PIPE, &p);
    usleep(500000); /* let sbx start and block on its stdin */
    long long t0 = cli_now_ms();
    cr_assert_eq(kill(p.pid, SIGINT), 0);
    int status = cli_wait(&p, 10000);
    cr_assert_eq(status, 130, "status %d", status);
    cr_assert_lt(cli_now_ms() - t0, 3000, "sbx took too long to stop");
    cr_assert_eq(cli_dir_entries(env.ws_root), 0, "the workspace was left behind");
}

/* sbx is blocked writing to a stdout nobody reads. */
Test(cli_signal, sigint_while_stdout_is_full)
{
    struct cli_proc p;
    cli_spawn(&env, (const char *[]){"run", "--", "sh", "-c", "echo ready; yes", NULL},
              CLI_STDIN_NULL, &p);
    char line[32];
    cr_assert(cli_read_line(&p, line, sizeof line, 10000), "the command did not start");
    usleep(300000); /* the pipe fills up: sbx blocks in its sink */
    long long t0 = cli_now_ms();
    cr_assert_eq(kill(p.pid, SIGINT), 0);
    int status = cli_wait(&p, 10000);
    cr_assert_eq(status, 130, "status %d", status);
    cr_assert_lt(cli_now_ms() - t0, 3000, "sbx took too long to stop");
    cr_assert_eq(cli_dir_entries(env.ws_root), 0, "the workspace was left behind");
}

/* Names starting with ".sbx-" anywhere below `dir` (temporaries). */
static int temporaries_below(const char *dir)
{
    char cmd[PATH_MAX + 64];
    snprintf(cmd, sizeof cmd, "test -z \"$(find '%s' -name '.sbx-*')\"", dir);
    return system(cmd) == 0 ? 0 : 1;
}

/* `sbx write` from a pipe, interrupted mid-transfer: it exits 128+signal,
 * the file keeps its old content and no temporary is left. */
static void interrupt_write_with(int sig)
{
    struct cli_result r;
    cli_run(&env, (const char *[]){"write", "w-sess", "d/f.txt", NULL}, "old\n", 30000,
            &r);
    cr_assert_eq(r.status, 0, "first write: %d: %s", r.status, r.err);
    cli_result_free(&r);
    struct cli_proc p;
    cli_spawn(&env, (const char *[]){"write", "w-sess", "d/f.txt", NULL},
              CLI_STDIN_PIPE, &p);
    static char chunk[65536];
    memset(chunk, 'n', sizeof chunk);
    for (int i = 0; i < 16; i++)
        cr_assert_eq(write(p.in_fd, chunk, sizeof chunk), (ssize_t)sizeof chunk);
    usleep(200000);
    long long t0 = cli_now_ms();
    cr_assert_eq(kill(p.pid, sig), 0);
    int status = cli_wait(&p, 10000);
    close(p.in_fd);
    cr_expect_eq(status, 128 + sig, "status %d", status);
    cr_expect_lt(cli_now_ms() - t0, 3000, "sbx took too long to stop");
    cr_expect_eq(temporaries_below(env.ws_root), 0, "a temporary file was left");
    cli_run(&env, (const char *[]){"read", "w-sess", "d/f.txt", NULL}, NULL, 30000, &r);
    cr_expect_str_eq(r.out, "old\n");
    cli_result_free(&r);
    cli_run(&env, (const char *[]){"destroy", "w-sess", NULL}, NULL, 30000, &r);
    cli_result_free(&r);
}

Test(cli_signal, sigint_mid_write_exits_130_and_leaves_nothing)
{
    interrupt_write_with(SIGINT);
}

Test(cli_signal, sigterm_mid_write_exits_143_and_leaves_nothing)
{
    interrupt_write_with(SIGTERM);
}
