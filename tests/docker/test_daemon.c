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
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/un.h>
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
    sbx_sandbox *sb;
    char msg[1024];
    cr_expect_eq(dh_create_status(&h, key, "", ref, &sb, msg, sizeof msg), SBX_E_UNAVAILABLE,
                 "%s", msg);
    cr_expect(strstr(msg, "sbx-test-no-daemon-here.sock"), "%s", msg);
    cr_expect(strstr(msg, "daemon running"), "%s", msg);
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
        struct sbx_create_args a = {sizeof a, key, hash, "", 0, NULL, NULL, NULL};
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

/* ---- a private daemon that freezes or dies in the middle of calls ---- */

static char fdir[64];
static char furi[128];

static int fault_ctl(const char *verb)
{
    return dh_system("%s/scripts/services/dockerd.sh %s %s >/dev/null 2>>%s.log",
                     SBX_TEST_SOURCE_DIR, verb, fdir, fdir);
}

static pid_t fault_daemon_pid(void)
{
    char path[128];
    snprintf(path, sizeof path, "%s/docker.pid", fdir);
    FILE *f = fopen(path, "r");
    int pid = 0;
    if (f) {
        if (fscanf(f, "%d", &pid) != 1)
            pid = 0;
        fclose(f);
    }
    return (pid_t)pid;
}

static void fault_start(void)
{
    dh_require_daemon();
    if (geteuid() != 0)
        cr_skip_test("starting a private dockerd needs root");
    snprintf(fdir, sizeof fdir, "/tmp/sbxdf-XXXXXX");
    cr_assert_not_null(mkdtemp(fdir));
    cr_assert_eq(fault_ctl("start"), 0, "could not start a private dockerd in %s", fdir);
    snprintf(furi, sizeof furi, "unix://%s/docker.sock", fdir);
}

static void fault_stop(void)
{
    pid_t pid = fault_daemon_pid();
    if (pid > 0)
        kill(pid, SIGCONT);
    fault_ctl("stop");
    dh_system("rm -rf %s %s.log", fdir, fdir);
}

struct timed_exec {
    struct dh *h;
    sbx_sandbox *sb;
    struct sbx_call *c;
    const char *script;
    int64_t timeout_ms;
    int rc;
    struct sbx_exec_result res;
    double returned;
};

static void *timed_exec_run(void *arg)
{
    struct timed_exec *t = arg;
    const char *argv[] = {"sh", "-c", t->script, NULL};
    struct dh_buf out = {0};
    t->rc = dh_exec(t->h, t->sb, argv, NULL, t->timeout_ms, &out, NULL, &t->res, t->c);
    t->returned = dh_now();
    dh_buf_free(&out);
    return NULL;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static const char frozen_script[] =
    "sleep 3611 & echo $$ > pid; while :; do echo tick; sleep 0.01; done";

/* SIGSTOP the daemon while a command runs: cancellation and the timeout
 * still return within 1 s (dh_slack: times SBX_CONFORMANCE_TIME_SCALE, which
 * test.sh sets when the passes share the CPU), with the command's processes killed (the kill
 * cannot go through the daemon); plain calls fail within their request
 * deadline, naming the call. */
Test(docker_daemon, frozen_daemon_cannot_hold_up_cancel_timeout_or_calls)
{
    fault_start();
    /* the Engine API path: with the agent, exec and files do not go
     * through the daemon at all (test_agent.c) */
    static const char *const extra[] = {"request_timeout", "2", "agent", "false", NULL};
    struct dh h;
    dh_open(&h, furi, extra);
    char key[64], hash[65], ref[SBX_REF_MAX];
    dh_new_key(key, hash);
    sbx_sandbox *sb = dh_create(&h, key, ref);
    pid_t dpid = fault_daemon_pid();
    cr_assert_gt(dpid, 0);

    /* cancellation */
    struct sbx_call c;
    dh_call_init(&c);
    struct timed_exec t = {&h, sb, &c, frozen_script, 0, -1, {0}, 0};
    pthread_t th;
    pthread_create(&th, NULL, timed_exec_run, &t);
    sleep_ms(1500);
    cr_assert_eq(kill(dpid, SIGSTOP), 0);
    sleep_ms(300);
    double fired = dh_now();
    dh_call_cancel(&c);
    pthread_join(th, NULL);
    cr_expect_eq(t.rc, SBX_E_CANCELLED, "%s: %s", sbx_strerror(t.rc), c.message);
    fprintf(stderr, "[measured] frozen daemon cancel: returned %.0f ms after it\n",
            t.returned - fired);
    cr_expect_lt(t.returned - fired, dh_slack(1000.0), "returned %.0f ms after the cancel",
                 t.returned - fired);
    kill(dpid, SIGCONT);
    char *left = dh_procs(&h, sb, "slee[p] 3611|ech[o] tick");
    cr_expect_str_eq(left, "", "left after the cancel:\n%s", left);
    free(left);
    dh_call_free(&c);

    /* the timeout */
    dh_call_init(&c);
    struct timed_exec t2 = {&h, sb, &c, frozen_script, 2500, -1, {0}, 0};
    double start = dh_now();
    pthread_create(&th, NULL, timed_exec_run, &t2);
    sleep_ms(1200);
    cr_assert_eq(kill(dpid, SIGSTOP), 0);
    pthread_join(th, NULL);
    cr_expect_eq(t2.rc, SBX_OK, "%s: %s", sbx_strerror(t2.rc), c.message);
    cr_expect_eq(t2.res.timed_out, 1);
    fprintf(stderr, "[measured] frozen daemon timeout 2500 ms: returned after %.0f ms\n",
            t2.returned - start);
    cr_expect_lt(t2.returned - start, 2500.0 + dh_slack(1000.0),
                 "returned %.0f ms after the start (timeout 2500 ms)",
                 t2.returned - start);
    kill(dpid, SIGCONT);
    left = dh_procs(&h, sb, "slee[p] 3611|ech[o] tick");
    cr_expect_str_eq(left, "", "left after the timeout:\n%s", left);
    free(left);
    dh_call_free(&c);

    /* plain calls against the frozen daemon have deadlines */
    dh_call_init(&c);
    cr_assert_eq(kill(dpid, SIGSTOP), 0);
    start = dh_now();
    const char *echo[] = {"echo", "hi", NULL};
    struct sbx_exec_result res;
    int rc = dh_exec(&h, sb, echo, NULL, 0, NULL, NULL, &res, &c);
    double took = dh_now() - start;
    cr_expect(rc == SBX_E_UNAVAILABLE || rc == SBX_E_TIMEOUT, "exec: %s: %s",
              sbx_strerror(rc), c.message);
    cr_expect(strstr(c.message, "/exec"), "the message does not name the call: %s",
              c.message);
    fprintf(stderr, "[measured] frozen daemon exec: %.0f ms: %s\n", took, c.message);
    cr_expect_lt(took, 2000.0 + dh_slack(1000.0), "exec took %.0f ms (request_timeout 2 s)",
                 took);
    struct dh_buf out = {0};
    start = dh_now();
    rc = dh_read(&h, sb, "pid", &out, &c);
    took = dh_now() - start;
    cr_expect(rc == SBX_E_UNAVAILABLE || rc == SBX_E_TIMEOUT, "read: %s: %s",
              sbx_strerror(rc), c.message);
    cr_expect(strstr(c.message, "/archive"), "the message does not name the call: %s",
              c.message);
    fprintf(stderr, "[measured] frozen daemon read: %.0f ms: %s\n", took, c.message);
    cr_expect_lt(took, 2000.0 + dh_slack(1000.0), "read took %.0f ms (request_timeout 2 s)",
                 took);
    dh_buf_free(&out);
    kill(dpid, SIGCONT);
    dh_call_free(&c);

    h.ops->release(sb);
    dh_destroy(&h, key, ref);
    dh_close(&h);
    fault_stop();
}

/* A source that delivers 3 MiB, then trickles until stopped. */
struct trickle {
    size_t pos;
    volatile int *stop;
    volatile size_t *sent;
};

static long trickle_read(void *ctx, void *buf, size_t cap)
{
    struct trickle *t = ctx;
    if (*t->stop)
        return -1;
    if (t->pos >= 3 * 1024 * 1024)
        sleep_ms(20);
    size_t n = cap < 65536 ? cap : 65536;
    memset(buf, 't', n);
    t->pos += n;
    *t->sent = t->pos;
    return (long)n;
}

struct bg_write {
    struct dh *h;
    sbx_sandbox *sb;
    struct trickle tr;
    int rc;
    char msg[2048];
};

static void *bg_write_run(void *arg)
{
    struct bg_write *w = arg;
    struct sbx_source src = {.size = sizeof src, .ctx = &w->tr, .read = trickle_read};
    struct sbx_call c;
    dh_call_init(&c);
    w->rc = w->h->ops->write_file(w->sb, &c, "d/victim.txt", &src, 0);
    snprintf(w->msg, sizeof w->msg, "%s", c.message);
    dh_call_free(&c);
    return NULL;
}

/* dockerd is SIGKILLed while a file streams in: once it is back, the old
 * file is intact and no temporary file is left. */
Test(docker_daemon, daemon_killed_mid_write_keeps_the_old_file)
{
    fault_start();
    struct dh h;
    /* the Engine API path: the agent's writes do not pass the daemon */
    static const char *const extra[] = {"agent", "false", NULL};
    dh_open(&h, furi, extra);
    char key[64], hash[65], ref[SBX_REF_MAX];
    dh_new_key(key, hash);
    sbx_sandbox *sb = dh_create(&h, key, ref);
    struct sbx_call c;
    dh_call_init(&c);
    cr_assert_eq(dh_write(&h, sb, "d/victim.txt", "old\n", 4, 0, &c), SBX_OK, "%s",
                 c.message);
    volatile int stop = 0;
    volatile size_t sent = 0;
    struct bg_write w = {&h, sb, {0, &stop, &sent}, -1, ""};
    pthread_t th;
    pthread_create(&th, NULL, bg_write_run, &w);
    for (int i = 0; i < 600 && sent < 3 * 1024 * 1024; i++)
        sleep_ms(50);
    cr_assert_geq(sent, 3 * 1024 * 1024, "the write did not get going");
    pid_t dpid = fault_daemon_pid();
    cr_assert_gt(dpid, 0);
    cr_assert_eq(kill(dpid, SIGKILL), 0);
    pthread_join(th, NULL);
    stop = 1;
    cr_expect_neq(w.rc, SBX_OK, "the write succeeded without a daemon");
    sleep_ms(1000); /* the container's script cleans up by itself */
    h.ops->release(sb);
    cr_assert_eq(fault_ctl("start"), 0, "could not restart the private dockerd");
    int rc = h.ops->attach(h.state, &c, TEST_ATTACH_ARGS(key, ref), &sb);
    cr_assert_eq(rc, SBX_OK, "attach after the restart: %s", c.message);
    char *seen = dh_sh(&h, sb, "cat d/victim.txt; ls -A d");
    cr_expect_str_eq(seen, "old\nvictim.txt\n",
                     "the old file was lost or a temporary file was left");
    free(seen);
    h.ops->release(sb);
    dh_destroy(&h, key, ref);
    dh_close(&h);
    dh_call_free(&c);
    fault_stop();
}

/* A one-route daemon on a unix socket: every request gets `answer` (a
 * whole HTTP response), until the test closes the socket. */
struct ping_daemon {
    int fd;
    const char *answer;
    pthread_t th;
    char path[108];
};

static void *ping_serve(void *arg)
{
    struct ping_daemon *d = arg;
    for (;;) {
        int c = accept(d->fd, NULL, NULL);
        if (c < 0)
            return NULL;
        char req[4096];
        ssize_t n = read(c, req, sizeof req); /* one small request per connection */
        if (n > 0 && write(c, d->answer, strlen(d->answer)) < 0)
            n = -1;
        close(c);
    }
}

static void ping_daemon_start(struct ping_daemon *d, const char *answer)
{
    d->answer = answer;
    snprintf(d->path, sizeof d->path, "/tmp/sbx-test-ping-%d.sock", (int)getpid());
    unlink(d->path);
    d->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", d->path);
    cr_assert(d->fd >= 0 && bind(d->fd, (struct sockaddr *)&a, sizeof a) == 0 &&
              listen(d->fd, 8) == 0);
    pthread_create(&d->th, NULL, ping_serve, d);
}

static void ping_daemon_stop(struct ping_daemon *d)
{
    shutdown(d->fd, SHUT_RDWR);
    close(d->fd);
    pthread_join(d->th, NULL);
    unlink(d->path);
}

/* create against a daemon whose /_ping answers `answer`: the status and
 * message of the failure. */
static int create_against(const char *answer, char *msg, size_t cap)
{
    struct ping_daemon d;
    ping_daemon_start(&d, answer);
    char host[128];
    snprintf(host, sizeof host, "unix://%s", d.path);
    struct dh h;
    dh_open(&h, host, NULL);
    char key[64], hash[65], ref[SBX_REF_MAX];
    dh_new_key(key, hash);
    sbx_sandbox *sb;
    int rc = dh_create_status(&h, key, "", ref, &sb, msg, cap);
    dh_close(&h);
    ping_daemon_stop(&d);
    return rc;
}

/* The API version comes from /_ping's Api-Version header (as the docker
 * CLI negotiates; /version costs the daemon 6 ms): a daemon below 1.40 is
 * refused naming its version, one without the header is a protocol error. */
Test(docker_daemon, the_api_version_is_read_from_ping)
{
    char msg[1024];
    int rc = create_against("HTTP/1.1 200 OK\r\nApi-Version: 1.39\r\nContent-Length: 2\r\n"
                            "Connection: close\r\n\r\nOK",
                            msg, sizeof msg);
    cr_expect_eq(rc, SBX_E_UNSUPPORTED, "%d: %s", rc, msg);
    cr_expect(strstr(msg, "1.39") && strstr(msg, "1.40 to 1.41"), "%s", msg);
    rc = create_against("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nOK",
                        msg, sizeof msg);
    cr_expect_eq(rc, SBX_E_PROTOCOL, "%d: %s", rc, msg);
    cr_expect(strstr(msg, "Api-Version"), "%s", msg);
}
