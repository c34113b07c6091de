/*
 * test_agent_channel.c - root inside a container attacks the agent's
 * channel: /.sbx/run (the host's agent/ directory, bound read-write) is
 * the container's to change. The provider must never follow what it finds
 * there, must authenticate the agent it reaches as this container's init,
 * and must not hang on what root leaves there.
 *
 * Every refusal must come at once (the request timeout here is 6 s; a
 * refusal is expected within 2 s) and nothing may run: the commands sent
 * to a wrong or fake agent would leave a marker in a host-visible
 * directory, which the tests look for on the host.
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
#include <sys/stat.h>
#include <unistd.h>

static struct dh h;
static char key[64], hash[65], ref[SBX_REF_MAX];
static sbx_sandbox *sb;
/* a second session, for the cross-session case */
static char key2[64], hash2[65], ref2[SBX_REF_MAX];
static sbx_sandbox *sb2;

static void setup(void)
{
    dh_require_daemon();
    if (getenv("SBX_TEST_DOCKER_AGENT") && !strcmp(getenv("SBX_TEST_DOCKER_AGENT"), "0"))
        cr_skip_test("the agent is disabled for this run (SBX_TEST_DOCKER_AGENT=0)");
    const char *extra[] = {"request_timeout", "6", NULL};
    dh_open(&h, NULL, extra);
    dh_new_key(key, hash);
    sb = dh_create(&h, key, ref);
}

static void teardown(void)
{
    if (sb2) {
        h.ops->release(sb2);
        dh_destroy(&h, key2, ref2);
        sb2 = NULL;
    }
    dh_sandbox_teardown(&h, key, ref, sb);
}

TestSuite(agent_channel, .init = setup, .fini = teardown, .timeout = 120);

/* The host path of a file in a session's agent directory (/.sbx/run). */
static void run_path(char *buf, size_t cap, const char *session_hash, const char *name)
{
    snprintf(buf, cap, "%s/sbx-%.32s/agent/%s", h.resource_dir, session_hash, name);
}

static int host_exists(const char *session_hash, const char *name)
{
    char p[512];
    run_path(p, sizeof p, session_hash, name);
    struct stat s;
    return lstat(p, &s) == 0;
}

/* Wait up to ms for a file to appear in a session's agent directory. */
static int wait_host_file(const char *session_hash, const char *name, int ms)
{
    for (int i = 0; i < ms / 20; i++) {
        if (host_exists(session_hash, name))
            return 1;
        usleep(20000);
    }
    return host_exists(session_hash, name);
}

/* One exec or file op run on a thread, so that a hang is seen as one. */
struct op {
    struct dh *h;
    sbx_sandbox *sb;
    const char *script; /* sh -c script; NULL: read_file of path */
    const char *path;
    int64_t timeout_ms;
    struct sbx_call c;
    struct sbx_exec_result res;
    struct dh_buf out;
    int rc;
    volatile int done;
    double took;
};

static void *op_run(void *arg)
{
    struct op *o = arg;
    double t0 = dh_now();
    if (o->script) {
        const char *argv[] = {"sh", "-c", o->script, NULL};
        o->rc = dh_exec(o->h, o->sb, argv, NULL, o->timeout_ms, &o->out, NULL, &o->res,
                        &o->c);
    } else {
        o->rc = dh_read(o->h, o->sb, o->path, &o->out, &o->c);
    }
    o->took = dh_now() - t0;
    o->done = 1;
    return NULL;
}

/* Run o and wait at most limit_ms for it; fails the test when it hangs. */
static void op_bounded(struct op *o, int limit_ms)
{
    dh_call_init(&o->c);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, op_run, o), 0);
    for (int i = 0; i < limit_ms / 10 && !o->done; i++)
        usleep(10000);
    cr_assert(o->done, "%s did not return within %d ms (it hangs on what root in the "
                       "container left in /.sbx/run)",
              o->script ? o->script : o->path, limit_ms);
    pthread_join(th, NULL);
}

static void op_free(struct op *o)
{
    dh_call_free(&o->c);
    dh_buf_free(&o->out);
}

/* attach restarts a container whose agent's socket was replaced: the
 * agent makes its socket again, and the session is served. */
static void reattach_restores_the_channel(void)
{
    h.ops->release(sb);
    sb = NULL;
    char msg[1024];
    cr_assert_eq(dh_attach(&h, key, ref, &sb, msg, sizeof msg), SBX_OK, "%s", msg);
    char *o = dh_sh(&h, sb, "hostname");
    cr_expect(strncmp(o, ref, 12) == 0, "served by %s, not by %.12s", o, ref);
    free(o);
}

/* Root in session A replaces A's agent.sock with a relative symlink to
 * session B's socket: A's exec and reads must not reach B's container. */
Test(agent_channel, a_symlink_to_another_sessions_socket_is_refused)
{
    dh_new_key(key2, hash2);
    sb2 = dh_create(&h, key2, ref2);
    struct sbx_call c;
    dh_call_init(&c);
    cr_assert_eq(dh_write(&h, sb2, "secret.txt", "B's secret\n", 11, 0, &c), SBX_OK, "%s",
                 c.message);
    dh_call_free(&c);
    char script[512];
    snprintf(script, sizeof script,
             "rm /.sbx/run/agent.sock && ln -s ../../sbx-%.32s/agent/agent.sock "
             "/.sbx/run/agent.sock && readlink /.sbx/run/agent.sock",
             hash2);
    free(dh_sh(&h, sb, script));

    struct op x = {.h = &h, .sb = sb, .timeout_ms = 5000,
                   .script = "touch /.sbx/run/crossed; hostname"};
    op_bounded(&x, 4000);
    fprintf(stderr, "[refused] %s\n", x.c.message);
    cr_expect_neq(x.rc, SBX_OK, "A's exec ran (output %s)", x.out.data ? x.out.data : "");
    cr_expect(x.rc == SBX_E_DENIED || x.rc == SBX_E_PROTOCOL, "%s: %s", sbx_strerror(x.rc),
              x.c.message);
    cr_expect(strstr(x.c.message, "symlink"), "the error does not say why: %s",
              x.c.message);
    cr_expect_lt(x.took, 2000.0, "refused after %.0f ms", x.took);
    op_free(&x);
    cr_expect(!host_exists(hash2, "crossed"), "session A's command ran in session B");

    struct op r = {.h = &h, .sb = sb, .path = "secret.txt"};
    op_bounded(&r, 4000);
    cr_expect_neq(r.rc, SBX_OK, "A's read returned B's file: %s",
                  r.out.data ? r.out.data : "");
    cr_expect(!r.out.data || !strstr(r.out.data, "secret"), "B's file reached A's caller");
    op_free(&r);

    /* B is untouched and still served */
    char *o = dh_sh(&h, sb2, "cat secret.txt; test -e /.sbx/run/crossed && echo crossed; "
                             "true");
    cr_expect_str_eq(o, "B's secret\n");
    free(o);
    reattach_restores_the_channel();
}

/* A command in the background of this one: root serving its own agent at
 * /.sbx/run/agent.sock (the real sbx-agent binary, run a second time: it
 * would serve the host faithfully), optionally SIGSTOPped so that it
 * accepts nothing and answers nothing. */
struct bg {
    struct op o;
    pthread_t th;
    sbx_sandbox *sb; /* a handle of its own: the test may release its one */
};

static void start_fake(struct bg *b, int stopped)
{
    static const char *serving =
        "rm -f /.sbx/run/agent.sock; "
        "/.sbx/sbx-agent serve --socket /.sbx/run/agent.sock --root /workspace & "
        "while ! [ -S /.sbx/run/agent.sock ]; do sleep 0.02; done; "
        "touch /.sbx/run/fake-up; wait";
    static const char *stalled =
        "rm -f /.sbx/run/agent.sock; "
        "/.sbx/sbx-agent serve --socket /.sbx/run/agent.sock --root /workspace & "
        "while ! [ -S /.sbx/run/agent.sock ]; do sleep 0.02; done; "
        "kill -STOP $! && touch /.sbx/run/fake-up; wait";
    char msg[1024];
    cr_assert_eq(dh_attach(&h, key, ref, &b->sb, msg, sizeof msg), SBX_OK, "%s", msg);
    b->o = (struct op){.h = &h, .sb = b->sb, .timeout_ms = 60000,
                       .script = stopped ? stalled : serving};
    dh_call_init(&b->o.c);
    cr_assert_eq(pthread_create(&b->th, NULL, op_run, &b->o), 0);
    cr_assert(wait_host_file(hash, "fake-up", 5000), "the fake agent did not start");
}

static void stop_fake(struct bg *b)
{
    dh_call_cancel(&b->o.c);
    pthread_join(b->th, NULL);
    op_free(&b->o);
    h.ops->release(b->sb);
}

Test(agent_channel, a_second_agent_in_the_container_is_refused_before_any_request)
{
    struct bg b;
    start_fake(&b, 0);
    struct op x = {.h = &h, .sb = sb, .timeout_ms = 5000,
                   .script = "touch /.sbx/run/served-by-fake; echo served"};
    op_bounded(&x, 8000);
    fprintf(stderr, "[refused] %s\n", x.c.message);
    cr_expect_neq(x.rc, SBX_OK, "the fake agent served the host: %s",
                  x.out.data ? x.out.data : "");
    cr_expect(x.rc == SBX_E_DENIED || x.rc == SBX_E_PROTOCOL, "%s: %s", sbx_strerror(x.rc),
              x.c.message);
    cr_expect(strstr(x.c.message, "init"), "the error does not say why: %s", x.c.message);
    cr_expect_lt(x.took, 2000.0, "refused after %.0f ms", x.took);
    op_free(&x);
    cr_expect(!host_exists(hash, "served-by-fake"), "a request reached the fake agent");
    struct op r = {.h = &h, .sb = sb, .path = "anything.txt"};
    op_bounded(&r, 8000);
    cr_expect(r.rc == SBX_E_DENIED || r.rc == SBX_E_PROTOCOL, "%s: %s", sbx_strerror(r.rc),
              r.c.message);
    op_free(&r);
    stop_fake(&b);
    reattach_restores_the_channel();
}

Test(agent_channel, a_stopped_fake_listener_does_not_stall_exec)
{
    struct bg b;
    start_fake(&b, 1);
    struct op x = {.h = &h, .sb = sb, .timeout_ms = 0, .script = "echo served"};
    op_bounded(&x, 15000);
    cr_expect(x.rc == SBX_E_DENIED || x.rc == SBX_E_PROTOCOL, "%s: %s", sbx_strerror(x.rc),
              x.c.message);
    fprintf(stderr, "[measured] exec against a stopped fake agent: refused after %.0f ms\n",
            x.took);
    cr_expect_lt(x.took, 2000.0, "exec waited %.0f ms for a listener that never answers",
                 x.took);
    op_free(&x);
    /* attach too: the stopped fake is refused at once, and the container
     * restarted (the fake's command is cut off with it) */
    reattach_restores_the_channel();
    stop_fake(&b);
}

/* A FIFO where the host reads why the agent did not start. */
Test(agent_channel, a_fifo_at_agent_sock_err_does_not_hang_exec)
{
    free(dh_sh(&h, sb, "rm /.sbx/run/agent.sock && mkfifo /.sbx/run/agent.sock.err"));
    struct op x = {.h = &h, .sb = sb, .timeout_ms = 0, .script = "echo served"};
    op_bounded(&x, 10000);
    fprintf(stderr, "[refused] %s\n", x.c.message);
    cr_expect_eq(x.rc, SBX_E_UNAVAILABLE, "%s: %s", sbx_strerror(x.rc), x.c.message);
    cr_expect_lt(x.took, 3000.0, "exec took %.0f ms", x.took);
    op_free(&x);
    reattach_restores_the_channel();
}

/* The agent (PID 1) and a command's handler are not dumpable: root in the
 * container without CAP_SYS_PTRACE cannot read their memory (environ is
 * read through it) or take their descriptors (the listening socket, the
 * host's connections). */
Test(agent_channel, the_agent_and_its_handlers_are_not_dumpable)
{
    char *o = dh_sh(&h, sb,
                    "for p in 1 $PPID; do "
                    "  grep -q . /proc/$p/environ 2>/dev/null && echo \"$p environ open\"; "
                    "  ls -l /proc/$p/fd/ 2>/dev/null | grep -q socket && echo \"$p fds open\"; "
                    "done; true");
    cr_expect_str_eq(o, "", "root in the container reached the agent's internals:\n%s", o);
    free(o);
}
