/*
 * test_agent_strays.c - a root command attacks its own handler in the
 * agent (the per-command subreaper, its $PPID): SIGKILL or SIGSTOP. What
 * the command started must still not outlive it, the call must return
 * promptly with an error that says what happened, and later commands (and
 * other commands running meanwhile) must be unaffected.
 */
#include "harness.h"

#include <criterion/criterion.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

TestSuite(agent_strays, .init = setup, .fini = teardown, .timeout = 120);

struct op {
    const char *script;
    int64_t timeout_ms;
    struct sbx_call c;
    struct sbx_exec_result res;
    int rc;
    volatile int done;
    double took;
};

static void *op_run(void *arg)
{
    struct op *o = arg;
    const char *argv[] = {"sh", "-c", o->script, NULL};
    double t0 = dh_now();
    o->rc = dh_exec(&h, sb, argv, NULL, o->timeout_ms, NULL, NULL, &o->res, &o->c);
    o->took = dh_now() - t0;
    o->done = 1;
    return NULL;
}

/* Run o on a thread; fail the test if it has not returned after limit_ms. */
static void op_bounded(struct op *o, int limit_ms)
{
    dh_call_init(&o->c);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, op_run, o), 0);
    for (int i = 0; i < limit_ms / 10 && !o->done; i++)
        usleep(10000);
    cr_assert(o->done, "sh -c '%s' did not return within %d ms", o->script, limit_ms);
    pthread_join(th, NULL);
}

/* The processes matching ere, waiting up to 2 s for them to be gone (the
 * agent's init kills strays once it has seen the handler end, which may
 * come a moment after the host saw the connection close). */
static char *left_after(const char *ere)
{
    char *left = NULL;
    for (int i = 0; i < 20; i++) {
        free(left);
        left = dh_procs(&h, sb, ere);
        if (!*left)
            break;
        usleep(100000);
    }
    return left;
}

static void later_commands_work(void)
{
    char *o = dh_sh(&h, sb, "echo still here");
    cr_expect_str_eq(o, "still here\n");
    free(o);
}

Test(agent_strays, a_command_that_kills_its_handler_leaves_nothing_behind)
{
    struct op o = {.script = "setsid sleep 3801 & sleep 3802 & kill -9 $PPID; sleep 3803"};
    op_bounded(&o, 10000);
    fprintf(stderr, "[measured] command that SIGKILLs its handler: returned after %.0f ms\n",
            o.took);
    cr_expect_eq(o.rc, SBX_E_UNAVAILABLE, "%s: %s", sbx_strerror(o.rc), o.c.message);
    cr_expect(strstr(o.c.message, "handler"), "the error does not say what happened: %s",
              o.c.message);
    cr_expect_lt(o.took, 3000.0);
    dh_call_free(&o.c);
    char *left = left_after("slee[p] 380[123]");
    cr_expect_str_eq(left, "", "left after the handler was killed:\n%s", left);
    free(left);
    later_commands_work();
}

Test(agent_strays, a_command_that_stops_its_handler_leaves_nothing_behind)
{
    /* no timeout: before, the call waited for a report that never came */
    struct op o = {.script = "sleep 3811 & kill -STOP $PPID; sleep 3812"};
    op_bounded(&o, 10000);
    fprintf(stderr, "[measured] command that SIGSTOPs its handler: returned after %.0f ms\n",
            o.took);
    cr_expect_eq(o.rc, SBX_E_UNAVAILABLE, "%s: %s", sbx_strerror(o.rc), o.c.message);
    cr_expect(strstr(o.c.message, "handler"), "%s", o.c.message);
    cr_expect_lt(o.took, 3000.0);
    dh_call_free(&o.c);
    char *left = left_after("slee[p] 381[12]");
    cr_expect_str_eq(left, "", "left after the handler was stopped:\n%s", left);
    free(left);
    later_commands_work();
}

Test(agent_strays, a_stopped_handler_does_not_outlast_the_timeout)
{
    struct op o = {.script = "sleep 3821 & kill -STOP $PPID; sleep 3822", .timeout_ms = 1000};
    op_bounded(&o, 10000);
    cr_expect_neq(o.rc, SBX_OK, "%s", o.c.message);
    cr_expect_lt(o.took, 1500.0, "a 1 s command returned after %.0f ms", o.took);
    dh_call_free(&o.c);
    char *left = left_after("slee[p] 382[12]");
    cr_expect_str_eq(left, "", "left after the timeout:\n%s", left);
    free(left);
    later_commands_work();
}

/* The strays of one command are killed; another command that runs
 * meanwhile (its handler alive) keeps running. */
Test(agent_strays, other_commands_keep_running)
{
    struct op bystander = {.script = "sleep 3831 & sleep 3832; wait", .timeout_ms = 20000};
    dh_call_init(&bystander.c);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, op_run, &bystander), 0);
    char *running = NULL;
    for (int i = 0; i < 50; i++) { /* wait until it runs */
        free(running);
        running = dh_procs(&h, sb, "slee[p] 383[12]");
        if (strstr(running, "3831") && strstr(running, "3832"))
            break;
        usleep(50000);
    }
    free(running);
    struct op o = {.script = "sleep 3833 & kill -9 $PPID"};
    op_bounded(&o, 10000);
    dh_call_free(&o.c);
    char *left = left_after("slee[p] 3833");
    cr_expect_str_eq(left, "", "%s", left);
    free(left);
    running = dh_procs(&h, sb, "slee[p] 383[12]");
    cr_expect(strstr(running, "3831") && strstr(running, "3832"),
              "the other command's processes were killed too: [%s]", running);
    free(running);
    cr_expect(!bystander.done, "the other command ended: %s", bystander.c.message);
    dh_call_cancel(&bystander.c);
    pthread_join(th, NULL);
    cr_expect_eq(bystander.rc, SBX_E_CANCELLED, "%s", bystander.c.message);
    dh_call_free(&bystander.c);
    later_commands_work();
}
