/*
 * test_agent.c - the docker provider with its in-container agent (the
 * default): wait statuses, process trees, concurrency, restarts, a dead
 * agent, the trust boundary, the version check, and containers made
 * without the agent (test_agent_channel.c has the attacks on the channel,
 * test_agent_strays.c those on a command's handler).
 */
#include "harness.h"

#include <criterion/criterion.h>

#include <json-c/json.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
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

TestSuite(docker_agent, .init = setup, .fini = teardown, .timeout = 180);

/* A container inspect field (State.Pid, ...) as an integer. */
static long long inspect_int(const char *a, const char *b)
{
    char path[640];
    snprintf(path, sizeof path, "/v1.41/containers/%s/json", ref);
    struct dh_buf body = {0};
    cr_assert_eq(dh_api(h.host_uri, "GET", path, NULL, &body), 200);
    json_object *j = json_tokener_parse(body.data), *x, *y;
    cr_assert(json_object_object_get_ex(j, a, &x) && json_object_object_get_ex(x, b, &y));
    long long v = json_object_get_int64(y);
    json_object_put(j);
    dh_buf_free(&body);
    return v;
}

Test(docker_agent, runs_as_init_and_reports_wait_statuses)
{
    char *pid1 = dh_sh(&h, sb, "cat /proc/1/cmdline | tr '\\0' ' '");
    cr_expect(strstr(pid1, "/.sbx/sbx-agent serve"), "PID 1 is %s", pid1);
    free(pid1);
    struct sbx_call c;
    dh_call_init(&c);
    struct sbx_exec_result res;
    const char *killed[] = {"sh", "-c", "kill -TERM $$", NULL};
    cr_assert_eq(dh_exec(&h, sb, killed, NULL, 0, NULL, NULL, &res, &c), SBX_OK, "%s",
                 c.message);
    cr_expect_eq(res.exit_code, -1);
    cr_expect_eq(res.term_signal, SIGTERM);
    const char *exited[] = {"sh", "-c", "exit 143", NULL};
    cr_assert_eq(dh_exec(&h, sb, exited, NULL, 0, NULL, NULL, &res, &c), SBX_OK);
    cr_expect_eq(res.exit_code, 143);
    cr_expect_eq(res.term_signal, 0);
    /* zombies of orphans are reaped by the agent */
    char *z = dh_sh(&h, sb, "sh -c 'sleep 0 & exec true'; sleep 0.2; "
                            "grep -l '^State:.*Z' /proc/[0-9]*/status 2>/dev/null | wc -l");
    cr_expect_str_eq(z, "0\n", "zombies left");
    free(z);
    dh_call_free(&c);
}

/* setsid, double fork, a cleared environment, output closed: nothing a
 * command started survives its timeout, its cancellation, or its end. */
Test(docker_agent, nothing_survives_timeout_cancel_or_exit)
{
    const char *escape =
        "setsid sh -c 'exec env -i /bin/sh -c \"sleep 3701 </dev/null >/dev/null 2>&1 &\"' & "
        "env -i sh -c 'sleep 3702 >/dev/null 2>&1 &'; sleep 3703";
    const char *argv[] = {"sh", "-c", escape, NULL};
    struct sbx_call c;
    dh_call_init(&c);
    struct sbx_exec_result res;
    double t0 = dh_now();
    int rc = dh_exec(&h, sb, argv, NULL, 700, NULL, NULL, &res, &c);
    double took = dh_now() - t0;
    cr_expect_eq(rc, SBX_OK, "%s", c.message);
    cr_expect_eq(res.timed_out, 1);
    cr_expect_eq(res.term_signal, SIGKILL);
    fprintf(stderr, "[measured] agent timeout 700 ms: returned after %.0f ms\n", took);
    cr_expect_lt(took, 700 + 1000.0, "returned %.0f ms after the start", took);
    char *left = dh_procs(&h, sb, "slee[p] 370");
    cr_expect_str_eq(left, "", "left after the timeout:\n%s", left);
    free(left);

    /* a command that exits leaving a detached grandchild behind */
    const char *bg[] = {"sh", "-c", "setsid sh -c 'sleep 3704 >/dev/null 2>&1 &'; echo done",
                        NULL};
    struct dh_buf out = {0};
    cr_assert_eq(dh_exec(&h, sb, bg, NULL, 0, &out, NULL, &res, &c), SBX_OK);
    cr_expect_eq(res.exit_code, 0);
    left = dh_procs(&h, sb, "slee[p] 3704");
    cr_expect_str_eq(left, "", "left after the exit:\n%s", left);
    free(left);
    dh_buf_free(&out);

    /* one that keeps the output open: it gets 250 ms after the leader's
     * exit, as on local, then it is killed and exec returns */
    const char *holder[] = {"sh", "-c", "sleep 3705 & echo started", NULL};
    struct dh_buf out2 = {0};
    double t1 = dh_now();
    cr_assert_eq(dh_exec(&h, sb, holder, NULL, 0, &out2, NULL, &res, &c), SBX_OK);
    double held = dh_now() - t1;
    cr_expect_eq(res.exit_code, 0);
    cr_expect(out2.data && !strncmp(out2.data, "started\n", 8));
    cr_expect_lt(held, 1500.0, "exec waited %.0f ms for a background holder", held);
    left = dh_procs(&h, sb, "slee[p] 3705");
    cr_expect_str_eq(left, "", "left after the exit:\n%s", left);
    free(left);
    dh_buf_free(&out2);
    dh_call_free(&c);
}

struct cancel_later {
    struct sbx_call *c;
    int ms;
};

static void *cancel_after(void *arg)
{
    struct cancel_later *cl = arg;
    usleep((useconds_t)cl->ms * 1000);
    dh_call_cancel(cl->c);
    return NULL;
}

Test(docker_agent, cancel_kills_the_tree_within_a_second)
{
    const char *argv[] = {"sh", "-c",
                          "setsid env -i sh -c 'sleep 3711 & sleep 3712' & "
                          "while :; do echo tick; sleep 0.01; done",
                          NULL};
    struct sbx_call c;
    dh_call_init(&c);
    struct cancel_later cl = {&c, 500};
    pthread_t th;
    pthread_create(&th, NULL, cancel_after, &cl);
    struct sbx_exec_result res;
    double t0 = dh_now();
    int rc = dh_exec(&h, sb, argv, NULL, 0, NULL, NULL, &res, &c);
    double took = dh_now() - t0;
    pthread_join(th, NULL);
    cr_expect_eq(rc, SBX_E_CANCELLED, "%s: %s", sbx_strerror(rc), c.message);
    fprintf(stderr, "[measured] agent cancel at 500 ms: returned after %.0f ms\n", took);
    cr_expect_lt(took, 500 + 1000.0);
    char *left = dh_procs(&h, sb, "slee[p] 371|ech[o] tick");
    cr_expect_str_eq(left, "", "left after the cancel:\n%s", left);
    free(left);
    dh_call_free(&c);
}

struct par {
    int i;
    int rc, exit_code;
    char out[64];
};

static void *one_exec(void *arg)
{
    struct par *p = arg;
    char n[16];
    snprintf(n, sizeof n, "%d", p->i);
    const char *argv[] = {"sh", "-c", "sleep 0.3; echo \"n=$0\"; echo e >&2", n, NULL};
    struct sbx_call c;
    dh_call_init(&c);
    struct dh_buf out = {0};
    struct sbx_exec_result res;
    p->rc = dh_exec(&h, sb, argv, NULL, 20000, &out, NULL, &res, &c);
    p->exit_code = res.exit_code;
    snprintf(p->out, sizeof p->out, "%.*s", (int)out.len, out.data ? out.data : "");
    dh_buf_free(&out);
    dh_call_free(&c);
    return NULL;
}

Test(docker_agent, thirty_two_concurrent_execs)
{
    enum { N = 32 };
    struct par p[N];
    pthread_t th[N];
    double t0 = dh_now();
    for (int i = 0; i < N; i++) {
        p[i] = (struct par){.i = i};
        pthread_create(&th[i], NULL, one_exec, &p[i]);
    }
    for (int i = 0; i < N; i++)
        pthread_join(th[i], NULL);
    double took = dh_now() - t0;
    for (int i = 0; i < N; i++) {
        char want[32];
        snprintf(want, sizeof want, "n=%d\n", i);
        cr_expect_eq(p[i].rc, SBX_OK, "exec %d", i);
        cr_expect_eq(p[i].exit_code, 0);
        cr_expect_str_eq(p[i].out, want);
    }
    fprintf(stderr, "[measured] 32 concurrent 0.3 s execs: %.0f ms\n", took);
    cr_expect_lt(took, 5000.0, "they did not run concurrently (%.0f ms)", took);
}

Test(docker_agent, container_restart_brings_the_agent_back)
{
    char path[640];
    snprintf(path, sizeof path, "/v1.41/containers/%s/restart?t=1", ref);
    cr_assert_eq(dh_api(h.host_uri, "POST", path, NULL, NULL), 204);
    h.ops->release(sb);
    sb = NULL;
    char msg[1024];
    cr_assert_eq(dh_attach(&h, key, ref, &sb, msg, sizeof msg), SBX_OK, "%s", msg);
    char *o = dh_sh(&h, sb, "echo back");
    cr_expect_str_eq(o, "back\n");
    free(o);
    /* stopped: attach starts it, and the agent answers */
    snprintf(path, sizeof path, "/v1.41/containers/%s/stop?t=1", ref);
    cr_assert_eq(dh_api(h.host_uri, "POST", path, NULL, NULL), 204);
    h.ops->release(sb);
    sb = NULL;
    cr_assert_eq(dh_attach(&h, key, ref, &sb, msg, sizeof msg), SBX_OK, "%s", msg);
    o = dh_sh(&h, sb, "echo again");
    cr_expect_str_eq(o, "again\n");
    free(o);
}

Test(docker_agent, a_killed_agent_fails_exec_clearly_and_attach_restarts)
{
    long long pid = inspect_int("State", "Pid");
    cr_assert_gt(pid, 0);
    cr_assert_eq(kill((pid_t)pid, SIGKILL), 0, "kill %lld: %s", pid, strerror(errno));
    for (int i = 0; i < 100 && inspect_int("State", "Running"); i++)
        usleep(20000);
    const char *argv[] = {"true", NULL};
    struct sbx_call c;
    dh_call_init(&c);
    struct sbx_exec_result res;
    int rc = dh_exec(&h, sb, argv, NULL, 0, NULL, NULL, &res, &c);
    cr_expect_eq(rc, SBX_E_UNAVAILABLE, "%s: %s", sbx_strerror(rc), c.message);
    cr_expect(strstr(c.message, "not running") && strstr(c.message, "attach"), "%s",
              c.message);
    dh_call_free(&c);
    h.ops->release(sb);
    sb = NULL;
    char msg[1024];
    cr_assert_eq(dh_attach(&h, key, ref, &sb, msg, sizeof msg), SBX_OK, "%s", msg);
    char *o = dh_sh(&h, sb, "echo alive");
    cr_expect_str_eq(o, "alive\n");
    free(o);
}

/* Inside the container, root is refused by the agent (peer in its PID
 * namespace) and a non-root user cannot even reach the socket. */
Test(docker_agent, processes_in_the_container_cannot_use_the_agent)
{
    const char *argv[] = {"/.sbx/sbx-agent", "ping", "/.sbx/run/agent.sock", NULL};
    struct sbx_call c;
    dh_call_init(&c);
    struct dh_buf out = {0};
    struct sbx_exec_result res;
    cr_assert_eq(dh_exec(&h, sb, argv, NULL, 0, &out, NULL, &res, &c), SBX_OK, "%s",
                 c.message);
    cr_expect_eq(res.exit_code, 1);
    cr_expect(out.data && strstr(out.data, "refused"), "root in the container: %.*s",
              (int)out.len, out.data ? out.data : "");
    dh_buf_free(&out);
    dh_call_free(&c);

    struct dh u;
    const char *extra[] = {"user", "65534:65534", NULL};
    dh_open(&u, NULL, extra);
    char k2[64], h2[65], r2[SBX_REF_MAX];
    dh_new_key(k2, h2);
    sbx_sandbox *s2 = dh_create(&u, k2, r2);
    char *who = dh_sh(&u, s2, "id -u; /.sbx/sbx-agent ping /.sbx/run/agent.sock || true; "
                              "ls /.sbx/run 2>&1 || true");
    cr_expect(strncmp(who, "65534\n", 6) == 0, "%s", who);
    cr_expect(strstr(who, "Permission denied"), "a non-root user reached the socket: %s", who);
    cr_expect(!strstr(who, "sbx-agent protocol"), "%s", who);
    free(who);
    u.ops->release(s2);
    dh_destroy(&u, k2, r2);
    dh_close(&u);
}

/* A container whose agent speaks another protocol version (here a
 * stand-in speaking 99 that runs as its init, so that it passes the peer
 * check): attach refuses it, naming both versions. The session's agent is
 * a copy the test swaps while the container is stopped: the daemon binds
 * the file found at agent_path again when the container starts. */
Test(docker_agent, another_protocol_version_is_refused_on_attach)
{
    char dir[] = "/tmp/sbx-agent-swap-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char agent[600];
    snprintf(agent, sizeof agent, "%s/sbx-agent", dir);
    cr_assert_eq(dh_system("cp '%s/sbx-agent' '%s'", SBX_TEST_PROVIDER_DIR, agent), 0);
    struct dh v;
    const char *extra[] = {"agent_path", agent, NULL};
    dh_open(&v, NULL, extra);
    char k2[64], h2[65], r2[SBX_REF_MAX];
    dh_new_key(k2, h2);
    sbx_sandbox *s2 = dh_create(&v, k2, r2);
    free(dh_sh(&v, s2, "true"));
    v.ops->release(s2);
    s2 = NULL;
    char path[640];
    snprintf(path, sizeof path, "/v1.41/containers/%s/stop?t=1", r2);
    cr_assert_eq(dh_api(v.host_uri, "POST", path, NULL, NULL), 204);
    cr_assert_eq(dh_system("cp '%s' '%s.new' && mv -f '%s.new' '%s'", SBX_TEST_FAKE_AGENT,
                           agent, agent, agent),
                 0);
    char msg[1024];
    int rc = dh_attach(&v, k2, r2, &s2, msg, sizeof msg);
    cr_expect_eq(rc, SBX_E_PROTOCOL, "%s: %s", sbx_strerror(rc), msg);
    cr_expect(strstr(msg, "protocol version 99") && strstr(msg, "this provider 1"), "%s",
              msg);
    cr_expect_null(s2);
    dh_destroy(&v, k2, r2);
    dh_close(&v);
    dh_system("rm -rf '%s'", dir);
}

/* A container made without the agent keeps working through the Engine API
 * when a provider with the agent attaches to it. */
Test(docker_agent, containers_without_the_agent_keep_the_engine_api)
{
    struct dh old;
    const char *extra[] = {"agent", "false", NULL};
    dh_open(&old, NULL, extra);
    char k2[64], h2[65], r2[SBX_REF_MAX];
    dh_new_key(k2, h2);
    sbx_sandbox *s2 = dh_create(&old, k2, r2);
    char *pid1 = dh_sh(&old, s2, "cat /proc/1/cmdline | tr '\\0' ' '");
    cr_expect(!strstr(pid1, "sbx-agent"), "%s", pid1);
    free(pid1);
    old.ops->release(s2);
    s2 = NULL;
    char msg[1024];
    cr_assert_eq(dh_attach(&h, k2, r2, &s2, msg, sizeof msg), SBX_OK, "%s", msg);
    struct sbx_call c;
    dh_call_init(&c);
    cr_assert_eq(dh_write(&h, s2, "a/b.txt", "x\n", 2, 0, &c), SBX_OK, "%s", c.message);
    char *o = dh_sh(&h, s2, "cat a/b.txt; exit 0");
    cr_expect_str_eq(o, "x\n");
    free(o);
    dh_call_free(&c);
    h.ops->release(s2);
    dh_destroy(&h, k2, r2);
    dh_close(&old);
}
