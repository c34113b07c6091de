/*
 * test_sessions_crash.c - a worker killed with SIGKILL at each step of
 * provisioning and deletion (the SBX_TEST_CRASH_AT hook of the session
 * manager), then `sbx reconcile`: no orphaned workspace, no binding without
 * its workspace, no workspace without a binding, no intent left; and the
 * session works again afterwards. On SQLite and (with SBX_TEST_PG_DSN)
 * PostgreSQL.
 */
#include "session_env.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define RUN(s, r, ...)                                            \
    do {                                                          \
        const char *args_[] = {__VA_ARGS__, NULL};                \
        sess_run((s), args_, NULL, (r));                          \
    } while (0)

static const char *const provisioning_steps[] = {
    "before-intent", "after-admission", "after-intent", "after-create", "before-publish"};
#define NPROV (sizeof provisioning_steps / sizeof provisioning_steps[0])

/* Kill a worker at `step` of `sbx exec KEY -- true`. */
static void crash_exec(struct sess_env *s, const char *key, const char *step)
{
    sess_require_crash_hooks();
    struct cli_result r;
    cli_env_setenv(&s->cli, "SBX_TEST_CRASH_AT", step);
    RUN(s, &r, "exec", key, "--", "true");
    cli_env_setenv(&s->cli, "SBX_TEST_CRASH_AT", "");
    cr_assert_eq(r.status, CLI_KILLED_BY + SIGKILL,
                 "worker was not killed at %s: status %d: %s", step, r.status, r.err);
    cli_result_free(&r);
}

static void reconcile(struct sess_env *s)
{
    struct cli_result r;
    RUN(s, &r, "reconcile");
    cr_assert_eq(r.status, 0, "reconcile: %s%s", r.out, r.err);
    cr_assert(strstr(r.out, "0 failures"), "%s", r.out);
    cli_result_free(&r);
}

static void provisioning_crashes(const char *driver)
{
    struct sess_env s;
    sess_env_init(&s, driver, NULL, false);
    for (size_t i = 0; i < NPROV; i++) {
        char key[64];
        snprintf(key, sizeof key, "crash-%s", provisioning_steps[i]);
        crash_exec(&s, key, provisioning_steps[i]);
        if (strcmp(provisioning_steps[i], "before-intent") != 0)
            cr_assert_eq(sess_count(&s, "SELECT count(*) FROM intents"), 1,
                         "%s: no intent recorded the crashed provisioning",
                         provisioning_steps[i]);
        reconcile(&s);
        cr_assert_eq(sess_check_consistent(&s), 0,
                     "%s: a half-provisioned sandbox was published",
                     provisioning_steps[i]);

        /* The key is usable again. */
        struct cli_result r;
        RUN(&s, &r, "exec", key, "--", "true");
        cr_assert_eq(r.status, 0, "%s: %s", provisioning_steps[i], r.err);
        cli_result_free(&r);
        cr_assert_eq(sess_check_consistent(&s), 1);
        RUN(&s, &r, "destroy", key);
        cr_assert_eq(r.status, 0, "%s", r.err);
        cli_result_free(&r);
        cr_assert_eq(sess_check_consistent(&s), 0);
    }
    sess_env_fini(&s);
}

Test(sessions_crash, provisioning_sqlite, .timeout = 120) { provisioning_crashes("sqlite"); }
Test(sessions_crash, provisioning_postgres, .timeout = 120) { provisioning_crashes("postgres"); }

/* Without a reconcile pass, the next worker takes over the dead one's
 * intent itself. */
static void next_worker_takes_over(const char *driver)
{
    struct sess_env s;
    sess_env_init(&s, driver, NULL, false);
    crash_exec(&s, "k", "after-create");
    cr_assert_eq(sess_workspaces(&s), 1);
    struct cli_result r;
    RUN(&s, &r, "exec", "k", "--", "sh", "-c", "echo fine");
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, "fine\n");
    cli_result_free(&r);
    cr_assert_eq(sess_check_consistent(&s), 1);
    sess_env_fini(&s);
}

Test(sessions_crash, takeover_sqlite, .timeout = 60) { next_worker_takes_over("sqlite"); }
Test(sessions_crash, takeover_postgres, .timeout = 60) { next_worker_takes_over("postgres"); }

static void deletion_crashes(const char *driver)
{
    static const char *const steps[] = {"during-destroy", "after-destroy"};
    struct sess_env s;
    sess_env_init(&s, driver, NULL, false);
    for (size_t i = 0; i < 2; i++) {
        struct cli_result r;
        RUN(&s, &r, "create", "doomed");
        cr_assert_eq(r.status, 0, "%s", r.err);
        cli_result_free(&r);
        /* A bystander that must survive the reconcile. */
        RUN(&s, &r, "create", "bystander");
        cr_assert_eq(r.status, 0, "%s", r.err);
        cli_result_free(&r);

        sess_require_crash_hooks();
        cli_env_setenv(&s.cli, "SBX_TEST_CRASH_AT", steps[i]);
        RUN(&s, &r, "destroy", "doomed");
        cli_env_setenv(&s.cli, "SBX_TEST_CRASH_AT", "");
        cr_assert_eq(r.status, CLI_KILLED_BY + SIGKILL, "%s: status %d: %s", steps[i],
                     r.status, r.err);
        cli_result_free(&r);

        /* Fenced: no new admissions until the deletion is finished. */
        RUN(&s, &r, "exec", "doomed", "--", "true");
        cr_assert_eq(r.status, 125);
        cr_assert(strstr(r.err, "being deleted"), "%s: %s", steps[i], r.err);
        cli_result_free(&r);

        reconcile(&s);
        cr_assert_eq(sess_check_consistent(&s), 1, "%s", steps[i]);
        cr_assert_eq(sess_count(&s, "SELECT count(*) FROM sessions"), 1);
        RUN(&s, &r, "exec", "bystander", "--", "true");
        cr_assert_eq(r.status, 0, "%s", r.err);
        cli_result_free(&r);
        RUN(&s, &r, "destroy", "bystander");
        cr_assert_eq(r.status, 0, "%s", r.err);
        cli_result_free(&r);
        cr_assert_eq(sess_check_consistent(&s), 0);
    }
    sess_env_fini(&s);
}

Test(sessions_crash, deletion_sqlite, .timeout = 120) { deletion_crashes("sqlite"); }
Test(sessions_crash, deletion_postgres, .timeout = 120) { deletion_crashes("postgres"); }

/* The service form: `reconcile --watch` cleans up on its next pass and
 * exits 0 on SIGTERM. */
Test(sessions_crash, reconcile_watch_as_a_service, .timeout = 60)
{
    struct sess_env s;
    sess_env_init(&s, "sqlite", NULL, false);
    crash_exec(&s, "w", "before-publish");
    cr_assert_eq(sess_workspaces(&s), 1);
    cr_assert_eq(sess_count(&s, "SELECT count(*) FROM intents"), 1);

    const char *args[] = {"reconcile", "--watch", "--interval", "100ms", NULL};
    struct cli_proc p;
    cli_spawn(&s.cli, args, CLI_STDIN_NULL, &p);
    long long deadline = cli_now_ms() + 20000;
    while (sess_count(&s, "SELECT count(*) FROM intents") != 0 &&
           cli_now_ms() < deadline)
        usleep(20000);
    char line[256];
    cr_assert(cli_read_line(&p, line, sizeof line, 5000), "no summary line");
    cr_assert(strstr(line, "reconcile:"), "%s", line);
    /* Still running between passes. */
    cr_assert_not(cli_pid_gone(p.pid), "reconcile --watch exited by itself");
    kill(p.pid, SIGTERM);
    cr_assert_eq(cli_wait(&p, 10000), 0, "reconcile --watch did not stop cleanly");
    cr_assert_eq(sess_check_consistent(&s), 0);
    sess_env_fini(&s);
}

/* An intent whose provider is no longer enabled is not dropped blindly: the
 * pass fails naming the provider, and succeeds once it is enabled again. */
Test(sessions_crash, reconcile_needs_the_intent_provider, .timeout = 60)
{
    struct sess_env s;
    sess_env_init(&s, "sqlite", NULL, true);
    crash_exec(&s, "p", "after-create");
    char yaml[1024];
    snprintf(yaml, sizeof yaml,
             "default_provider: good\n"
             "store: { driver: sqlite, path: %s }\n"
             "providers:\n"
             "  good: {}\n", s.db.target);
    cli_env_write_config(&s.cli, yaml);
    struct cli_result r;
    RUN(&s, &r, "reconcile");
    cr_assert_eq(r.status, 125, "status %d: %s%s", r.status, r.out, r.err);
    cr_assert(strstr(r.out, "1 failures"), "%s", r.out);
    cr_assert(strstr(r.err, "provider \"local\""), "%s", r.err);
    cli_result_free(&r);
    cr_assert_eq(sess_count(&s, "SELECT count(*) FROM intents"), 1);
    cr_assert_eq(sess_workspaces(&s), 1);

    snprintf(yaml, sizeof yaml,
             "default_provider: local\n"
             "store: { driver: sqlite, path: %s }\n"
             "providers:\n"
             "  local:\n"
             "    root: @ROOT@\n", s.db.target);
    cli_env_write_config(&s.cli, yaml);
    reconcile(&s);
    cr_assert_eq(sess_check_consistent(&s), 0);
    sess_env_fini(&s);
}
