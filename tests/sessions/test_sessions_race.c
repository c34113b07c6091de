/*
 * test_sessions_race.c - eight `sbx` processes racing on one session key end
 * with exactly one sandbox, and every one of them ran its command in it.
 * On SQLite and (with SBX_TEST_PG_DSN) PostgreSQL.
 */
#include "session_env.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WORKERS 8

/* Read fd (non-blocking) to EOF, at most len-1 bytes, within 30 s. */
static void read_all(int fd, char *buf, size_t len)
{
    size_t n = 0;
    long long deadline = cli_now_ms() + 30000;
    while (n < len - 1 && cli_now_ms() < deadline) {
        ssize_t k = read(fd, buf + n, len - 1 - n);
        if (k > 0) {
            n += (size_t)k;
            continue;
        }
        if (k == 0 || (errno != EAGAIN && errno != EINTR))
            break;
        struct pollfd pfd = {fd, POLLIN, 0};
        poll(&pfd, 1, 100);
    }
    buf[n] = '\0';
}

/* Start WORKERS copies of `sbx args...` at once and wait for all; each must
 * succeed. out[i] receives worker i's first line of output. */
static void race(struct sess_env *s, const char *const *args, char out[WORKERS][256])
{
    struct cli_proc p[WORKERS];
    for (int i = 0; i < WORKERS; i++)
        cli_spawn(&s->cli, args, CLI_STDIN_NULL, &p[i]);
    for (int i = 0; i < WORKERS; i++) {
        char err[1024];
        read_all(p[i].out_fd, out[i], 256);
        read_all(p[i].err_fd, err, sizeof err);
        char *nl = strchr(out[i], '\n');
        if (nl)
            *nl = '\0';
        int status = cli_wait(&p[i], 30000);
        cr_assert_eq(status, 0, "worker %d: status %d: %s", i, status, err);
    }
}

static void racing_exec(const char *driver)
{
    struct sess_env s;
    sess_env_init(&s, driver, NULL, false);
    const char *args[] = {"exec", "shared-key", "--", "sh", "-c",
                          "echo $$ >> shared-file; echo ran", NULL};
    char out[WORKERS][256];
    race(&s, args, out);
    for (int i = 0; i < WORKERS; i++)
        cr_assert_str_eq(out[i], "ran", "worker %d printed '%s'", i, out[i]);

    cr_assert_eq(sess_workspaces(&s), 1, "%d workspaces for one key",
                 sess_workspaces(&s));
    cr_assert_eq(sess_check_consistent(&s), 1);

    /* All eight commands wrote into the one workspace, each from its own
     * shell. */
    struct cli_result r;
    const char *read_args[] = {"read", "shared-key", "shared-file", NULL};
    sess_run(&s, read_args, NULL, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    int lines = 0;
    long pids[WORKERS * 2];
    for (char *line = strtok(r.out, "\n"); line; line = strtok(NULL, "\n")) {
        cr_assert_lt(lines, WORKERS, "more lines than workers");
        pids[lines] = strtol(line, NULL, 10);
        for (int j = 0; j < lines; j++)
            cr_assert_neq(pids[j], pids[lines], "one shell wrote twice");
        lines++;
    }
    cr_assert_eq(lines, WORKERS, "%d of %d commands ran in the workspace", lines,
                 WORKERS);
    cli_result_free(&r);
    sess_env_fini(&s);
}

Test(sessions_race, eight_execs_one_sandbox_sqlite, .timeout = 120) { racing_exec("sqlite"); }
Test(sessions_race, eight_execs_one_sandbox_postgres, .timeout = 120) { racing_exec("postgres"); }

/* Exactly one of the racing creators provisions; the others find it. */
static void racing_create(const char *driver)
{
    struct sess_env s;
    sess_env_init(&s, driver, NULL, false);
    const char *args[] = {"create", "contended", NULL};
    char out[WORKERS][256];
    race(&s, args, out);
    int created = 0, exists = 0;
    for (int i = 0; i < WORKERS; i++) {
        if (!strcmp(out[i], "created"))
            created++;
        else if (!strcmp(out[i], "exists"))
            exists++;
    }
    cr_assert_eq(created, 1, "%d workers provisioned", created);
    cr_assert_eq(exists, WORKERS - 1);
    cr_assert_eq(sess_check_consistent(&s), 1);
    sess_env_fini(&s);
}

Test(sessions_race, one_creator_sqlite, .timeout = 120) { racing_create("sqlite"); }
Test(sessions_race, one_creator_postgres, .timeout = 120) { racing_create("postgres"); }
