/*
 * test_daemon.c - a daemon that is missing, refuses us, or stops in the
 * middle of a session. Uses a second, private dockerd (started here with
 * scripts/services/dockerd.sh), never the shared one.
 */
#include "harness.h"
#include "../support/op_args.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

TestSuite(docker_daemon, .timeout = 300);

Test(docker_daemon, no_daemon_is_a_clear_transient_error)
{
    dh_require_daemon();
    struct dh h;
    dh_open(&h, "unix:///tmp/sbx-test-no-daemon-here.sock", NULL);
    char key[64], hash[65], ref[SBX_REF_MAX];
    dh_new_key(key, hash);
    struct sbx_create_args a = {sizeof a, key, hash, "", 0};
    struct sbx_call c;
    dh_call_init(&c);
    sbx_sandbox *sb = NULL;
    cr_expect_eq(h.ops->create(h.state, &c, &a, ref, &sb), SBX_E_UNAVAILABLE, "%s",
                 c.message);
    cr_expect(strstr(c.message, "sbx-test-no-daemon-here.sock"), "%s", c.message);
    cr_expect(strstr(c.message, "daemon running"), "%s", c.message);
    dh_call_free(&c);
    dh_close(&h);
}

Test(docker_daemon, socket_permission_denied_is_denied)
{
    dh_require_daemon();
    if (geteuid() != 0)
        cr_skip_test("needs root to drop to an unprivileged user");
    const char *uri = getenv("SBX_TEST_DOCKER_HOST");
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0)
            _exit(10);
        struct dh h;
        if (dh_try_open(&h, uri, NULL, NULL, 0) != SBX_OK)
            _exit(11);
        char key[64], hash[65], ref[SBX_REF_MAX];
        dh_new_key(key, hash);
        struct sbx_create_args a = {sizeof a, key, hash, "", 0};
        struct sbx_call c;
        dh_call_init(&c);
        sbx_sandbox *sb = NULL;
        int rc = h.ops->create(h.state, &c, &a, ref, &sb);
        fprintf(stderr, "unprivileged create: %d %s\n", rc, c.message);
        if (rc != SBX_E_DENIED)
            _exit(12);
        if (!strstr(c.message, "permission denied"))
            _exit(13);
        _exit(0);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "the unprivileged child reported %d (12: wrong status, 13: unclear "
              "message)",
              WEXITSTATUS(status));
}

static char dir[64];

static int daemon_ctl(const char *verb)
{
    return dh_system("%s/scripts/services/dockerd.sh %s %s >/dev/null 2>>%s.log",
                     SBX_TEST_SOURCE_DIR, verb, dir, dir);
}

Test(docker_daemon, daemon_stopped_mid_session_then_back)
{
    dh_require_daemon();
    if (geteuid() != 0)
        cr_skip_test("starting a private dockerd needs root");
    snprintf(dir, sizeof dir, "/tmp/sbxd2-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    cr_assert_eq(daemon_ctl("start"), 0, "could not start a private dockerd in %s", dir);
    char uri[128];
    snprintf(uri, sizeof uri, "unix://%s/docker.sock", dir);

    struct dh h;
    dh_open(&h, uri, NULL);
    char key[64], hash[65], ref[SBX_REF_MAX];
    dh_new_key(key, hash);
    sbx_sandbox *sb = dh_create(&h, key, ref);
    struct sbx_call c;
    dh_call_init(&c);
    cr_assert_eq(dh_write(&h, sb, "kept.txt", "survives\n", 9, 0, &c), SBX_OK, "%s",
                 c.message);

    cr_assert_eq(daemon_ctl("stop"), 0);
    const char *argv[] = {"echo", "hi", NULL};
    struct sbx_exec_result res;
    int rc = dh_exec(&h, sb, argv, NULL, 10000, NULL, NULL, &res, &c);
    cr_expect_eq(rc, SBX_E_UNAVAILABLE, "exec with the daemon down: %s: %s",
                 sbx_strerror(rc), c.message);
    cr_expect(strstr(c.message, dir), "message does not name the daemon: %s", c.message);
    struct dh_buf out = {0};
    rc = dh_read(&h, sb, "kept.txt", &out, &c);
    cr_expect_eq(rc, SBX_E_UNAVAILABLE, "read with the daemon down: %s", c.message);
    cr_expect_eq(out.len, 0);
    sbx_sandbox *x = NULL;
    rc = h.ops->attach(h.state, &c, TEST_ATTACH_ARGS(key, ref), &x);
    cr_expect_eq(rc, SBX_E_UNAVAILABLE, "attach with the daemon down: %s", c.message);
    h.ops->release(sb);

    cr_assert_eq(daemon_ctl("start"), 0);
    /* the same instance, and a "restarted" one, attach again */
    rc = h.ops->attach(h.state, &c, TEST_ATTACH_ARGS(key, ref), &sb);
    cr_assert_eq(rc, SBX_OK, "attach after the daemon came back: %s", c.message);
    cr_assert_eq(dh_read(&h, sb, "kept.txt", &out, &c), SBX_OK, "%s", c.message);
    cr_expect_str_eq(out.data, "survives\n");
    dh_buf_free(&out);
    char *o = dh_sh(&h, sb, "echo back");
    cr_expect_str_eq(o, "back\n");
    free(o);
    h.ops->release(sb);
    struct dh h2;
    dh_open(&h2, uri, NULL);
    rc = h2.ops->attach(h2.state, &c, TEST_ATTACH_ARGS(key, ref), &sb);
    cr_expect_eq(rc, SBX_OK, "%s", c.message);
    if (rc == SBX_OK)
        h2.ops->release(sb);
    dh_close(&h2);

    dh_destroy(&h, key, ref);
    dh_close(&h);
    dh_call_free(&c);
    daemon_ctl("stop");
    dh_system("rm -rf %s %s.log", dir, dir);
}
