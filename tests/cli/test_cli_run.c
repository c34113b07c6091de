/*
 * test_cli_run.c - `sbx run`: exit statuses, streams, environment, working
 * directory, stdin, live output and the out-of-the-box configuration.
 */
#include "cli_harness.h"

#include <criterion/criterion.h>

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

TestSuite(cli_run, .init = setup, .fini = teardown, .timeout = 60);

/* Run and assert the workspace root is empty again afterwards. */
static void run(const char *const *args, const char *input, struct cli_result *r)
{
    cli_run(&env, args, input, 30000, r);
    cr_assert_eq(cli_dir_entries(env.ws_root), 0,
                 "a workspace was left under %s (stderr: %s)", env.ws_root, r->err);
}

Test(cli_run, passes_the_exit_code_through)
{
    struct cli_result r;
    run((const char *[]){"run", "--", "sh", "-c", "exit 7", NULL}, NULL, &r);
    cr_assert_eq(r.status, 7, "status %d, stderr: %s", r.status, r.err);
    cr_assert_str_empty(r.err);
    cli_result_free(&r);

    run((const char *[]){"run", "--", "true", NULL}, NULL, &r);
    cr_assert_eq(r.status, 0, "status %d, stderr: %s", r.status, r.err);
    cli_result_free(&r);
}

Test(cli_run, keeps_stdout_and_stderr_apart)
{
    struct cli_result r;
    run((const char *[]){"run", "--", "sh", "-c", "echo out; echo err >&2", NULL}, NULL,
        &r);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    cr_assert_str_eq(r.out, "out\n");
    cr_assert_str_eq(r.err, "err\n");
    cli_result_free(&r);
}

Test(cli_run, reports_124_on_timeout)
{
    struct cli_result r;
    long long t0 = cli_now_ms();
    run((const char *[]){"run", "--timeout", "1", "--", "sleep", "30", NULL}, NULL, &r);
    long long took = cli_now_ms() - t0;
    cr_assert_eq(r.status, 124, "status %d, stderr: %s", r.status, r.err);
    cr_assert_lt(took, 10000, "the timeout took %lld ms to act", took);
    cli_result_free(&r);

    run((const char *[]){"run", "--timeout", "300ms", "--", "sleep", "30", NULL}, NULL,
        &r);
    cr_assert_eq(r.status, 124, "status %d, stderr: %s", r.status, r.err);
    cli_result_free(&r);
}

Test(cli_run, reports_127_when_the_command_is_not_found)
{
    struct cli_result r;
    run((const char *[]){"run", "--", "no-such-command-sbx-test", NULL}, NULL, &r);
    cr_assert_eq(r.status, 127, "status %d, stderr: %s", r.status, r.err);
    cr_assert(strstr(r.err, "sbx: ") == r.err, "stderr: %s", r.err);
    cr_assert_not_null(strstr(r.err, "no-such-command-sbx-test"), "stderr: %s", r.err);
    cli_result_free(&r);
}

Test(cli_run, reports_126_when_the_command_cannot_be_executed)
{
    struct cli_result r;
    run((const char *[]){"run", "--", "/etc/passwd", NULL}, NULL, &r);
    cr_assert_eq(r.status, 126, "status %d, stderr: %s", r.status, r.err);
    cr_assert(strstr(r.err, "sbx: ") == r.err, "stderr: %s", r.err);
    cli_result_free(&r);
}

Test(cli_run, reports_128_plus_the_signal_that_killed_the_command)
{
    struct cli_result r;
    run((const char *[]){"run", "--", "sh", "-c", "kill -TERM $$", NULL}, NULL, &r);
    cr_assert_eq(r.status, 128 + 15, "status %d, stderr: %s", r.status, r.err);
    cli_result_free(&r);
}

Test(cli_run, refuses_an_unknown_provider_listing_the_installed_ones)
{
    struct cli_result r;
    run((const char *[]){"run", "--provider", "nosuchprovider", "--", "true", NULL}, NULL,
        &r);
    cr_assert_eq(r.status, 125, "status %d, stderr: %s", r.status, r.err);
    cr_assert(strstr(r.err, "sbx: ") == r.err, "stderr: %s", r.err);
    cr_assert_not_null(strstr(r.err, "nosuchprovider"), "stderr: %s", r.err);
    cr_assert_not_null(strstr(r.err, "local"), "installed names not listed: %s", r.err);
    cli_result_free(&r);
}

Test(cli_run, sets_only_the_given_environment)
{
    struct cli_result r;
    run((const char *[]){"run", "--env", "FOO=bar baz", "-e", "EMPTY=", "--", "sh", "-c",
                         "echo \"$FOO|${EMPTY-unset}\"; env", NULL},
        NULL, &r);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    cr_assert(strncmp(r.out, "bar baz|\n", 9) == 0, "stdout: %s", r.out);
    /* Nothing of sbx's own environment reaches the command. */
    cr_assert_null(strstr(r.out, "SBX_PLUGIN_PATH="), "stdout: %s", r.out);
    cr_assert_null(strstr(r.out, "SBX_CONFIG="), "stdout: %s", r.out);
    cr_assert_null(strstr(r.out, "XDG_STATE_HOME="), "stdout: %s", r.out);
    cr_assert_null(strstr(r.out, env.home), "stdout: %s", r.out);
    cli_result_free(&r);
}

Test(cli_run, runs_in_the_workspace_and_honours_cwd)
{
    struct cli_result r;
    run((const char *[]){"run", "--", "sh", "-c", "pwd; mkdir sub", NULL}, NULL, &r);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    cr_assert(strncmp(r.out, env.ws_root, strlen(env.ws_root)) == 0,
              "workspace %s is not under %s", r.out, env.ws_root);
    cli_result_free(&r);

    /* A fresh workspace has no "sub": the provider names the problem. */
    run((const char *[]){"run", "--cwd", "sub", "--", "pwd", NULL}, NULL, &r);
    cr_assert_eq(r.status, 125, "status %d, stdout %s", r.status, r.out);
    cr_assert_not_null(strstr(r.err, "sub"), "stderr: %s", r.err);
    cli_result_free(&r);

    /* Escapes are refused. */
    run((const char *[]){"run", "--cwd", "..", "--", "pwd", NULL}, NULL, &r);
    cr_assert_eq(r.status, 125, "status %d, stdout %s", r.status, r.out);
    cr_assert_str_empty(r.out);
    cli_result_free(&r);
    run((const char *[]){"run", "-C", "/etc", "--", "pwd", NULL}, NULL, &r);
    cr_assert_eq(r.status, 125, "status %d, stdout %s", r.status, r.out);
    cr_assert_str_empty(r.out);
    cli_result_free(&r);

    /* "." is the root itself. */
    run((const char *[]){"run", "--cwd", ".", "--", "pwd", NULL}, NULL, &r);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    cr_assert(strncmp(r.out, env.ws_root, strlen(env.ws_root)) == 0, "pwd: %s", r.out);
    cli_result_free(&r);
}

Test(cli_run, streams_stdin_through)
{
    struct cli_result r;
    run((const char *[]){"run", "--", "cat", NULL}, "hello\nworld\n", &r);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    cr_assert_str_eq(r.out, "hello\nworld\n");
    cli_result_free(&r);

    /* A large input is streamed, not truncated. */
    size_t big = 1 << 20;
    char *input = malloc(big + 1);
    cr_assert_not_null(input);
    for (size_t i = 0; i < big; i++)
        input[i] = (char)('a' + i % 26);
    input[big] = '\0';
    run((const char *[]){"run", "--", "wc", "-c", NULL}, input, &r);
    free(input);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    cr_assert_eq(atol(r.out), (long)big, "wc -c said %s", r.out);
    cli_result_free(&r);

    /* --no-stdin gives an empty stdin even when one is there. */
    run((const char *[]){"run", "--no-stdin", "--", "cat", NULL}, "ignored\n", &r);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    cr_assert_str_empty(r.out);
    cli_result_free(&r);

    /* /dev/null as stdin. */
    run((const char *[]){"run", "--", "cat", NULL}, NULL, &r);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    cr_assert_str_empty(r.out);
    cli_result_free(&r);
}

Test(cli_run, streams_output_live)
{
    struct cli_proc p;
    cli_spawn(&env, (const char *[]){"run", "--", "sh", "-c", "echo a; sleep 2; echo b", NULL},
              CLI_STDIN_NULL, &p);
    char line[64];
    cr_assert(cli_read_line(&p, line, sizeof line, 10000), "no first line");
    long long first = cli_now_ms();
    cr_assert_str_eq(line, "a");
    cr_assert(cli_read_line(&p, line, sizeof line, 10000), "no second line");
    long long second = cli_now_ms();
    cr_assert_str_eq(line, "b");
    int status = cli_wait(&p, 10000);
    cr_assert_eq(status, 0);
    /* The first line arrived while the command was still sleeping. */
    cr_assert_geq(second - first, 1500, "first line came only %lld ms before the second",
                  second - first);
}

Test(cli_run, stops_the_command_when_stdout_goes_away)
{
    struct cli_proc p;
    cli_spawn(&env, (const char *[]){"run", "--", "sh", "-c", "while :; do echo y; done",
                                     NULL},
              CLI_STDIN_NULL, &p);
    char line[16];
    cr_assert(cli_read_line(&p, line, sizeof line, 10000));
    close(p.out_fd);
    p.out_fd = -1;
    int status = cli_wait(&p, 10000);
    cr_assert_eq(status, 128 + 13, "status %d", status);
    cr_assert_eq(cli_dir_entries(env.ws_root), 0, "the workspace was left behind");
}

Test(cli_run, works_without_any_configuration)
{
    struct stat st;
    if (stat(SBX_TEST_SYSCONF_DIR "/sbx.yaml", &st) == 0)
        cr_skip_test("a system configuration exists at %s", SBX_TEST_SYSCONF_DIR);
    struct cli_env bare;
    cli_env_init(&bare); /* no SBX_CONFIG at all */
    struct cli_result r;
    cli_run(&bare, (const char *[]){"run", "--", "sh", "-c", "pwd; echo hi > f", NULL},
            NULL, 30000, &r);
    cr_assert_eq(r.status, 0, "status %d, stderr: %s", r.status, r.err);
    char prefix[PATH_MAX + 8];
    snprintf(prefix, sizeof prefix, "%s/sbx/", bare.state);
    cr_assert(strncmp(r.out, prefix, strlen(prefix)) == 0,
              "workspace %s is not under %s", r.out, prefix);
    /* ... and it is gone afterwards. */
    char *nl = strchr(r.out, '\n');
    if (nl)
        *nl = '\0';
    cr_assert_neq(stat(r.out, &st), 0, "%s still exists", r.out);
    cli_result_free(&r);
    cli_env_fini(&bare);
}

/* Output keeps streaming while the command waits for more input: a
 * stdin pipe that stays open and quiet must not hold up stdout. */
Test(cli_run, streams_output_while_stdin_is_idle)
{
    struct cli_proc p;
    cli_spawn(&env, (const char *[]){"run", "--", "sh", "-c", "echo ready; cat", NULL},
              CLI_STDIN_PIPE, &p);
    char line[64];
    bool got = cli_read_line(&p, line, sizeof line, 5000);
    /* Then end the input: cat finishes and so does sbx. */
    close(p.in_fd);
    p.in_fd = -1;
    int status = cli_wait(&p, 10000);
    cr_assert(got, "no output while stdin was open and idle");
    cr_assert_str_eq(line, "ready");
    cr_assert_eq(status, 0, "status %d", status);
}

/* A caller's stdin that stays open and quiet must not keep sbx waiting once
 * the command has exited (the provider polls the source's fd). */
Test(cli_run, returns_when_the_command_exits_though_stdin_stays_open)
{
    struct cli_proc p;
    cli_spawn(&env, (const char *[]){"run", "--", "sh", "-c", "exit 4", NULL},
              CLI_STDIN_PIPE, &p);
    int status = cli_wait(&p, 3000);
    cr_assert_eq(status, 4, "status %d (-1: still waiting for stdin)", status);
    if (p.in_fd >= 0) {
        close(p.in_fd);
        p.in_fd = -1;
    }
}

/* Same with a timeout: the timeout ends it, not the end of stdin. */
Test(cli_run, timeout_with_stdin_open_and_quiet)
{
    struct cli_proc p;
    cli_spawn(&env, (const char *[]){"run", "--timeout", "0.3", "--", "sleep", "30", NULL},
              CLI_STDIN_PIPE, &p);
    int status = cli_wait(&p, 3000);
    cr_assert_eq(status, 124, "status %d", status);
    if (p.in_fd >= 0) {
        close(p.in_fd);
        p.in_fd = -1;
    }
}
