/*
 * test_write_death.c - a writer that dies in the middle of write_file
 * (SIGKILL: no cleanup of its own can run) leaves the old file intact and
 * no temporary file behind, whether the source announced its length or
 * not. The writer is a child process driving its own provider instance.
 */
#include "harness.h"

#include <criterion/criterion.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

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

TestSuite(docker_write_death, .init = setup, .fini = teardown, .timeout = 180);

/* Delivers `stall_at` bytes as fast as it is read, then tells the parent
 * (through report_fd) and blocks for good: the bytes before have been sent
 * by then (the provider reads the next chunk only after sending one). */
struct stalling {
    size_t pos, stall_at;
    int64_t announce; /* -1: unknown length */
    int report_fd;
};

static long stalling_read(void *ctx, void *buf, size_t cap)
{
    struct stalling *s = ctx;
    if (s->pos >= s->stall_at) {
        ssize_t w = write(s->report_fd, "x", 1);
        (void)w;
        for (;;)
            pause();
    }
    size_t n = s->stall_at - s->pos < cap ? s->stall_at - s->pos : cap;
    if (n > 65536)
        n = 65536;
    memset(buf, 'n', n);
    s->pos += n;
    return (long)n;
}

static int64_t stalling_length(void *ctx)
{
    struct stalling *s = ctx;
    return s->announce - (int64_t)s->pos;
}

/* The child: its own instance, attach, write; never returns normally. */
static void writer_child(const char *path, int64_t announce, size_t stall_at, int fd)
{
    struct dh hc;
    if (dh_try_open(&hc, NULL, NULL, NULL, 0) != SBX_OK)
        _exit(10);
    sbx_sandbox *s2 = NULL;
    if (dh_attach(&hc, key, ref, &s2, NULL, 0) != SBX_OK)
        _exit(11);
    struct stalling st = {0, stall_at, announce, fd};
    struct sbx_source src = {.size = sizeof src, .ctx = &st, .read = stalling_read,
                             .length = announce >= 0 ? stalling_length : NULL};
    struct sbx_call c;
    dh_call_init(&c);
    int rc = hc.ops->write_file(s2, &c, path, &src, 0);
    fprintf(stderr, "writer child: write_file returned %d: %s\n", rc, c.message);
    _exit(12);
}

/* Wait up to 5 s for the directory to hold exactly `want` (ls -A | cat
 * file), the container's script having had its moment to clean up. */
static void expect_settles_to(const char *script, const char *want)
{
    char *got = NULL;
    for (int i = 0; i < 50; i++) {
        free(got);
        got = dh_sh(&h, sb, script);
        if (strcmp(got, want) == 0)
            break;
        usleep(100000);
    }
    cr_expect_str_eq(got, want, "the old file was lost or a temporary was left");
    free(got);
}

static void kill_writer_mid_transfer(int64_t announce, size_t stall_at)
{
    struct sbx_call c;
    dh_call_init(&c);
    cr_assert_eq(dh_write(&h, sb, "d/victim.txt", "old\n", 4, 0, &c), SBX_OK, "%s",
                 c.message);
    int p[2];
    cr_assert_eq(pipe(p), 0);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        close(p[0]);
        writer_child("d/victim.txt", announce, stall_at, p[1]);
    }
    close(p[1]);
    struct pollfd pfd = {p[0], POLLIN, 0};
    int ready = poll(&pfd, 1, 60000);
    char x;
    int reported = ready == 1 && read(p[0], &x, 1) == 1;
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    close(p[0]);
    cr_assert(reported, "the writer never reached %zu bytes (child status %d)",
              stall_at, status);
    cr_expect(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
              "the writer ended by itself (status %d)", status);
    expect_settles_to("cat d/victim.txt; ls -A d", "old\nvictim.txt\n");
    dh_call_free(&c);
}

Test(docker_write_death, sigkill_mid_transfer_of_unknown_length)
{
    kill_writer_mid_transfer(-1, 3 * 1024 * 1024);
}

Test(docker_write_death, sigkill_mid_transfer_of_known_length)
{
    kill_writer_mid_transfer(64 * 1024 * 1024, 3 * 1024 * 1024);
}

Test(docker_write_death, sigkill_mid_transfer_of_a_small_file)
{
    /* announced 600 KiB, 300 KiB sent when the writer dies */
    kill_writer_mid_transfer(600 * 1024, 300 * 1024);
}

Test(docker_write_death, sigkill_mid_transfer_into_a_new_directory)
{
    struct sbx_call c;
    dh_call_init(&c);
    int p[2];
    cr_assert_eq(pipe(p), 0);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        close(p[0]);
        writer_child("new/sub/f.bin", -1, 2 * 1024 * 1024, p[1]);
    }
    close(p[1]);
    struct pollfd pfd = {p[0], POLLIN, 0};
    int ready = poll(&pfd, 1, 60000);
    char x;
    int reported = ready == 1 && read(p[0], &x, 1) == 1;
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    close(p[0]);
    cr_assert(reported, "the writer never got going");
    /* the directories may stay (they were whole); no file, no temporary */
    expect_settles_to("ls -A new/sub", "");
    dh_call_free(&c);
}
