/*
 * test_cli_write.c - `sbx write SESSION PATH < pipe` with the docker
 * provider, killed in the middle of the transfer by SIGKILL, SIGINT or
 * SIGTERM: the file keeps its old content and no temporary file is left;
 * SIGINT and SIGTERM make sbx exit 130 and 143 after cleaning up; through
 * the Engine API, directories with non-ASCII names are made.
 */
#include "../cli/cli_harness.h"

#include <criterion/criterion.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct cli_env e;

static void setup(void)
{
    if (!getenv("SBX_TEST_DOCKER_HOST") || !*getenv("SBX_TEST_DOCKER_HOST"))
        cr_skip_test("SBX_TEST_DOCKER_HOST is not set");
    cli_env_init(&e);
    cli_env_docker_config(&e, NULL);
}

static void teardown(void)
{
    struct cli_result r;
    cli_run(&e, (const char *[]){"destroy", "cli-write", NULL}, NULL, 60000, &r);
    cli_result_free(&r);
    cli_env_fini(&e);
}

TestSuite(docker_cli_write, .init = setup, .fini = teardown, .timeout = 240);

static void run_ok(const char *const *args, const char *input, struct cli_result *r)
{
    cli_run(&e, args, input, 120000, r);
    cr_assert_eq(r->status, 0, "sbx %s: exit %d: %s", args[0], r->status, r->err);
}

/* Push `n` bytes into the child's stdin (blocking on a full pipe, bounded
 * by a deadline so a stuck sbx fails the test instead of hanging it). */
static void feed(struct cli_proc *p, size_t n)
{
    static char chunk[65536];
    memset(chunk, 'w', sizeof chunk);
    long long deadline = cli_now_ms() + 60000;
    size_t done = 0;
    while (done < n) {
        struct pollfd pfd = {p->in_fd, POLLOUT, 0};
        long long left = deadline - cli_now_ms();
        cr_assert_gt(left, 0, "sbx stopped reading its stdin after %zu bytes", done);
        if (poll(&pfd, 1, (int)left) <= 0)
            continue;
        size_t k = n - done < sizeof chunk ? n - done : sizeof chunk;
        ssize_t w = write(p->in_fd, chunk, k);
        cr_assert(w > 0 || errno == EINTR, "writing to sbx: %s", strerror(errno));
        if (w > 0)
            done += (size_t)w;
    }
}

static void interrupt_write(int sig)
{
    struct cli_result r;
    run_ok((const char *[]){"write", "cli-write", "d/victim.txt", NULL}, "old\n", &r);
    cli_result_free(&r);
    struct cli_proc p;
    cli_spawn(&e, (const char *[]){"write", "cli-write", "d/victim.txt", NULL},
              CLI_STDIN_PIPE, &p);
    feed(&p, 4 * 1024 * 1024);
    usleep(200000); /* sbx has sent what it read */
    long long t0 = cli_now_ms();
    cr_assert_eq(kill(p.pid, sig), 0);
    int status = cli_wait(&p, 10000);
    long long took = cli_now_ms() - t0;
    close(p.in_fd);
    if (sig == SIGKILL)
        cr_expect_eq(status, CLI_KILLED_BY + SIGKILL, "status %d", status);
    else
        cr_expect_eq(status, 128 + sig, "status %d (expected %d)", status, 128 + sig);
    fprintf(stderr, "[measured] sbx write, signal %d: exit %d after %lld ms\n", sig,
            status, took);
    cr_expect_lt(took, 3000, "sbx took %lld ms to stop", took);

    /* give the container's script its moment, then look */
    const char *look[] = {"exec", "cli-write", "--", "sh", "-c",
                          "cat d/victim.txt; ls -A d", NULL};
    char *seen = NULL;
    for (int i = 0; i < 50; i++) {
        cli_run(&e, look, NULL, 60000, &r);
        free(seen);
        seen = strdup(r.out ? r.out : "");
        cli_result_free(&r);
        if (strcmp(seen, "old\nvictim.txt\n") == 0)
            break;
        usleep(100000);
    }
    cr_expect_str_eq(seen, "old\nvictim.txt\n",
                     "after signal %d the old file was lost or a temporary was left",
                     sig);
    free(seen);
}

Test(docker_cli_write, sigkill_mid_transfer)
{
    interrupt_write(SIGKILL);
}

Test(docker_cli_write, sigint_mid_transfer_exits_130)
{
    interrupt_write(SIGINT);
}

Test(docker_cli_write, sigterm_mid_transfer_exits_143)
{
    interrupt_write(SIGTERM);
}

Test(docker_cli_write, a_pipe_writes_whole)
{
    struct cli_result r;
    struct cli_proc p;
    cli_spawn(&e, (const char *[]){"write", "cli-write", "whole.bin", NULL},
              CLI_STDIN_PIPE, &p);
    feed(&p, 3 * 1024 * 1024 + 5);
    close(p.in_fd);
    int status = cli_wait(&p, 60000);
    cr_assert_eq(status, 0, "status %d", status);
    const char *look[] = {"exec", "cli-write", "--", "sh", "-c",
                          "wc -c < whole.bin; ls -A | grep -c '^\\.sbx-'", NULL};
    cli_run(&e, look, NULL, 60000, &r);
    cr_expect_str_eq(r.out, "3145733\n0\n");
    cli_result_free(&r);
}

/* Through the Engine API (agent: false) the missing directories of a
 * write go in as a tar: non-ASCII names (libarchive's pax writer crashed
 * on them in the C locale) make their directories. */
Test(docker_cli_write, non_ascii_directories_through_the_engine_api)
{
    const char *img = getenv("SBX_TEST_DOCKER_IMAGE");
    char yaml[4096];
    snprintf(yaml, sizeof yaml,
             "default_provider: docker\nproviders:\n  docker:\n    host: \"%s\"\n"
             "    image: \"%s\"\n    resource_dir: \"@ROOT@\"\n    agent: false\n",
             getenv("SBX_TEST_DOCKER_HOST"), img && *img ? img : "sbx-test:busybox");
    cli_env_write_config(&e, yaml);
    struct cli_result r;
    run_ok((const char *[]){"write", "cli-write", "caf\xc3\xa9/\xe6\x97\xa5\xe6\x9c\xac/f", NULL},
           "hi\n", &r);
    cli_result_free(&r);
    run_ok((const char *[]){"read", "cli-write", "caf\xc3\xa9/\xe6\x97\xa5\xe6\x9c\xac/f", NULL},
           NULL, &r);
    cr_expect_str_eq(r.out, "hi\n");
    cli_result_free(&r);
}
