/*
 * test_sessions_cli.c - the session commands as a user runs them: create,
 * exec, read, write, destroy, sessions; lost sandboxes; admission; spec
 * changes; bindings of providers that are not enabled. Each scenario runs
 * on SQLite and, when SBX_TEST_PG_DSN is set, on PostgreSQL.
 */
#include "session_env.h"

#include <criterion/criterion.h>
#include <json-c/json.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define RUN(s, r, input, ...)                                     \
    do {                                                          \
        const char *args_[] = {__VA_ARGS__, NULL};                \
        sess_run((s), args_, (input), (r));                       \
    } while (0)

static void round_trip(const char *driver)
{
    struct sess_env s;
    sess_env_init(&s, driver, NULL, false);
    struct cli_result r;

    RUN(&s, &r, NULL, "create", "agent-1");
    cr_assert_eq(r.status, 0, "create: %s", r.err);
    cr_assert_str_eq(r.out, "created\n");
    cli_result_free(&r);
    cr_assert_eq(sess_workspaces(&s), 1);

    RUN(&s, &r, NULL, "create", "agent-1");
    cr_assert_eq(r.status, 0, "create again: %s", r.err);
    cr_assert_str_eq(r.out, "exists\n");
    cli_result_free(&r);
    cr_assert_eq(sess_workspaces(&s), 1, "a second create made another sandbox");

    RUN(&s, &r, "hello from stdin\n", "write", "agent-1", "dir/notes.txt");
    cr_assert_eq(r.status, 0, "write: %s", r.err);
    cli_result_free(&r);

    RUN(&s, &r, NULL, "read", "agent-1", "dir/notes.txt");
    cr_assert_eq(r.status, 0, "read: %s", r.err);
    cr_assert_str_eq(r.out, "hello from stdin\n");
    cli_result_free(&r);

    /* Options after SESSION, a cwd and an environment variable. */
    RUN(&s, &r, NULL, "exec", "agent-1", "--cwd", "dir", "--env", "WHO=sbx", "--",
        "sh", "-c", "cat notes.txt; echo \"$WHO\"; echo out > made.txt");
    cr_assert_eq(r.status, 0, "exec: %s", r.err);
    cr_assert_str_eq(r.out, "hello from stdin\nsbx\n");
    cli_result_free(&r);

    RUN(&s, &r, NULL, "read", "agent-1", "dir/made.txt");
    cr_assert_eq(r.status, 0, "read: %s", r.err);
    cr_assert_str_eq(r.out, "out\n");
    cli_result_free(&r);

    /* Exit statuses follow `sbx run`. */
    RUN(&s, &r, NULL, "exec", "agent-1", "--", "sh", "-c", "exit 3");
    cr_assert_eq(r.status, 3);
    cli_result_free(&r);
    RUN(&s, &r, NULL, "exec", "agent-1", "--", "no-such-command-sbx");
    cr_assert_eq(r.status, 127, "status %d: %s", r.status, r.err);
    cli_result_free(&r);
    RUN(&s, &r, NULL, "exec", "agent-1", "--timeout", "200ms", "--", "sleep", "10");
    cr_assert_eq(r.status, 124, "status %d: %s", r.status, r.err);
    cli_result_free(&r);

    RUN(&s, &r, NULL, "sessions", "--json");
    cr_assert_eq(r.status, 0, "sessions: %s", r.err);
    json_object *list = json_tokener_parse(r.out);
    cr_assert_not_null(list, "not JSON: %s", r.out);
    cr_assert_eq(json_object_array_length(list), 1);
    json_object *b = json_object_array_get_idx(list, 0), *v;
    cr_assert(json_object_object_get_ex(b, "session", &v));
    cr_assert_str_eq(json_object_get_string(v), "agent-1");
    cr_assert(json_object_object_get_ex(b, "provider", &v));
    cr_assert_str_eq(json_object_get_string(v), "local");
    cr_assert(json_object_object_get_ex(b, "spec_hash", &v));
    cr_assert_eq(strlen(json_object_get_string(v)), 64);
    json_object_put(list);
    cli_result_free(&r);
    sess_check_consistent(&s);

    RUN(&s, &r, NULL, "destroy", "agent-1");
    cr_assert_eq(r.status, 0, "destroy: %s", r.err);
    cli_result_free(&r);
    cr_assert_eq(sess_workspaces(&s), 0, "destroy left the workspace");
    cr_assert_eq(sess_count(&s, "SELECT count(*) FROM bindings"), 0);
    cr_assert_eq(sess_count(&s, "SELECT count(*) FROM sessions"), 0);

    RUN(&s, &r, NULL, "destroy", "agent-1");
    cr_assert_eq(r.status, 125);
    cr_assert(strstr(r.err, "does not exist"), "%s", r.err);
    /* The raw key never appears in messages, only its hash prefix. */
    cr_assert_null(strstr(r.err, "agent-1"), "%s", r.err);
    cli_result_free(&r);
    sess_env_fini(&s);
}

Test(sessions_cli, round_trip_sqlite) { round_trip("sqlite"); }
Test(sessions_cli, round_trip_postgres) { round_trip("postgres"); }

Test(sessions_cli, exec_creates_the_sandbox_of_a_new_key)
{
    struct sess_env s;
    sess_env_init(&s, "sqlite", NULL, false);
    struct cli_result r;
    RUN(&s, &r, NULL, "exec", "fresh", "--", "sh", "-c", "echo one > f");
    cr_assert_eq(r.status, 0, "%s", r.err);
    cli_result_free(&r);
    RUN(&s, &r, NULL, "exec", "fresh", "--", "cat", "f");
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, "one\n");
    cli_result_free(&r);
    cr_assert_eq(sess_check_consistent(&s), 1);
    sess_env_fini(&s);
}

static void lost_resource(const char *driver)
{
    struct sess_env s;
    sess_env_init(&s, driver, NULL, false);
    struct cli_result r;
    RUN(&s, &r, NULL, "create", "lost");
    cr_assert_eq(r.status, 0, "%s", r.err);
    cli_result_free(&r);
    cr_assert_eq(sess_workspaces(&s), 1);

    /* The sandbox disappears behind the store's back. */
    char cmd[2 * PATH_MAX];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'/*", s.cli.ws_root);
    cr_assert_eq(system(cmd), 0);
    cr_assert_eq(sess_workspaces(&s), 0);

    RUN(&s, &r, NULL, "exec", "lost", "--", "true");
    cr_assert_eq(r.status, 125, "status %d", r.status);
    cr_assert(strstr(r.err, "lost"), "%s", r.err);
    cr_assert(strstr(r.err, "not be recreated"), "%s", r.err);
    cli_result_free(&r);
    cr_assert_eq(sess_workspaces(&s), 0, "a lost sandbox was replaced");
    cr_assert_eq(sess_count(&s, "SELECT count(*) FROM bindings"), 1);

    RUN(&s, &r, NULL, "write", "lost", "f");
    cr_assert_eq(r.status, 125);
    cli_result_free(&r);
    RUN(&s, &r, NULL, "read", "lost", "f");
    cr_assert_eq(r.status, 125);
    cr_assert(strstr(r.err, "lost"), "%s", r.err);
    cli_result_free(&r);
    cr_assert_eq(sess_workspaces(&s), 0, "a lost sandbox was replaced");

    /* The operator's way out: destroy, then start afresh. */
    RUN(&s, &r, NULL, "destroy", "lost");
    cr_assert_eq(r.status, 0, "%s", r.err);
    cli_result_free(&r);
    RUN(&s, &r, NULL, "exec", "lost", "--", "true");
    cr_assert_eq(r.status, 0, "%s", r.err);
    cli_result_free(&r);
    cr_assert_eq(sess_check_consistent(&s), 1);
    sess_env_fini(&s);
}

Test(sessions_cli, lost_sandbox_is_not_recreated_sqlite) { lost_resource("sqlite"); }
Test(sessions_cli, lost_sandbox_is_not_recreated_postgres) { lost_resource("postgres"); }

Test(sessions_cli, read_of_a_key_without_sandbox_creates_nothing)
{
    struct sess_env s;
    sess_env_init(&s, "sqlite", NULL, false);
    struct cli_result r;
    RUN(&s, &r, NULL, "read", "nobody", "f");
    cr_assert_eq(r.status, 125);
    cr_assert(strstr(r.err, "has no sandbox"), "%s", r.err);
    cli_result_free(&r);
    cr_assert_eq(sess_workspaces(&s), 0);
    cr_assert_eq(sess_count(&s, "SELECT count(*) FROM sessions"), 0);
    sess_env_fini(&s);
}

/* The capability refusal comes from the descriptor alone: initfail's init
 * would fail, and the error must not be that failure. */
Test(sessions_cli, admission_refuses_before_init)
{
    struct sess_env s;
    sess_env_init(&s, "sqlite", "  initfail: {}\n", true);
    struct cli_result r;
    RUN(&s, &r, NULL, "create", "needs-egress", "--provider", "initfail", "--require",
        "egress");
    cr_assert_eq(r.status, 125);
    cr_assert(strstr(r.err, "initfail"), "%s", r.err);
    cr_assert(strstr(r.err, "lacks capability egress"), "%s", r.err);
    cr_assert_null(strstr(r.err, "init failed"), "%s", r.err);
    cli_result_free(&r);

    RUN(&s, &r, NULL, "create", "needs-pkgs", "--provider", "initfail", "--package",
        "pip:requests");
    cr_assert_eq(r.status, 125);
    cr_assert(strstr(r.err, "lacks capability packages"), "%s", r.err);
    cr_assert_null(strstr(r.err, "init failed"), "%s", r.err);
    cli_result_free(&r);
    cr_assert_eq(sess_count(&s, "SELECT count(*) FROM sessions"), 0,
                 "admission wrote to the store");
    cr_assert_eq(sess_count(&s, "SELECT count(*) FROM intents"), 0);

    /* Without a capability demand the same provider gets as far as init,
     * which fails: proof the fixture really is broken. */
    RUN(&s, &r, NULL, "create", "plain", "--provider", "initfail");
    cr_assert_eq(r.status, 125);
    cr_assert(strstr(r.err, "init failed"), "%s", r.err);
    cli_result_free(&r);
    sess_env_fini(&s);
}

Test(sessions_cli, local_refuses_memory_at_admission)
{
    struct sess_env s;
    sess_env_init(&s, "sqlite", NULL, false);
    struct cli_result r;
    RUN(&s, &r, NULL, "memory", "create", "notes");
    cr_assert_eq(r.status, 0, "%s", r.err);
    cli_result_free(&r);
    RUN(&s, &r, NULL, "create", "mem", "--memory", "notes:rw");
    cr_assert_eq(r.status, 125);
    cr_assert(strstr(r.err, "provider \"local\" lacks capability memory"), "%s", r.err);
    cli_result_free(&r);
    cr_assert_eq(sess_workspaces(&s), 0, "something was provisioned");
    cr_assert_eq(sess_count(&s, "SELECT count(*) FROM sessions"), 0);
    cr_assert_eq(sess_count(&s, "SELECT count(*) FROM session_memory"), 0);
    /* and a malformed attachment is a usage error naming it */
    RUN(&s, &r, NULL, "create", "mem", "--memory", "notes:rx");
    cr_assert_eq(r.status, 125);
    cr_assert(strstr(r.err, "expected SLUG, SLUG:ro or SLUG:rw"), "%s", r.err);
    cli_result_free(&r);
    sess_env_fini(&s);
}

Test(sessions_cli, local_refuses_packages_at_admission)
{
    struct sess_env s;
    sess_env_init(&s, "sqlite", NULL, false);
    struct cli_result r;
    RUN(&s, &r, NULL, "create", "pk", "--package", "pip:requests==2.31.0",
        "--package", "apt:curl");
    cr_assert_eq(r.status, 125);
    cr_assert(strstr(r.err, "provider \"local\" lacks capability packages"), "%s",
              r.err);
    cli_result_free(&r);
    cr_assert_eq(sess_workspaces(&s), 0, "something was provisioned");
    cr_assert_eq(sess_count(&s, "SELECT count(*) FROM sessions"), 0);

    RUN(&s, &r, NULL, "create", "pk", "--package", "brew:wget");
    cr_assert_eq(r.status, 125);
    cr_assert(strstr(r.err, "unknown manager 'brew'"), "%s", r.err);
    cli_result_free(&r);
    RUN(&s, &r, NULL, "create", "pk", "--package", "pip:--index-url=http://x");
    cr_assert_eq(r.status, 125);
    cr_assert(strstr(r.err, "must not start with '-'"), "%s", r.err);
    cli_result_free(&r);
    sess_env_fini(&s);
}

Test(sessions_cli, changed_spec_is_reported_not_applied)
{
    struct sess_env s;
    sess_env_init(&s, "sqlite", "  initfail: {}\n", true);
    struct cli_result r;
    RUN(&s, &r, NULL, "create", "sp");
    cr_assert_eq(r.status, 0, "%s", r.err);
    cli_result_free(&r);
    long long before = sess_count(&s, "SELECT count(*) FROM bindings");
    RUN(&s, &r, NULL, "create", "sp", "--require", "egress");
    cr_assert_eq(r.status, 125);
    cr_assert(strstr(r.err, "another spec"), "%s", r.err);
    cr_assert(strstr(r.err, "not applied"), "%s", r.err);
    cli_result_free(&r);
    cr_assert_eq(sess_count(&s, "SELECT count(*) FROM bindings"), before);
    cr_assert_eq(sess_check_consistent(&s), 1);
    /* exec uses what was provisioned, without complaint. */
    RUN(&s, &r, NULL, "exec", "sp", "--", "true");
    cr_assert_eq(r.status, 0, "%s", r.err);
    cli_result_free(&r);
    sess_env_fini(&s);
}

Test(sessions_cli, binding_of_a_provider_not_enabled)
{
    struct sess_env s;
    sess_env_init(&s, "sqlite", NULL, true);
    struct cli_result r;
    RUN(&s, &r, NULL, "create", "moved");
    cr_assert_eq(r.status, 0, "%s", r.err);
    cli_result_free(&r);

    /* The operator switches the configuration to another provider only. */
    char yaml[1024];
    snprintf(yaml, sizeof yaml,
             "default_provider: good\n"
             "store: { driver: sqlite, path: %s }\n"
             "providers:\n"
             "  good: {}\n", s.db.target);
    cli_env_write_config(&s.cli, yaml);
    RUN(&s, &r, NULL, "exec", "moved", "--", "true");
    cr_assert_eq(r.status, 125);
    cr_assert(strstr(r.err, "provider \"local\""), "%s", r.err);
    cr_assert(strstr(r.err, "not enabled"), "%s", r.err);
    cli_result_free(&r);
    RUN(&s, &r, NULL, "destroy", "moved");
    cr_assert_eq(r.status, 125);
    cr_assert(strstr(r.err, "provider \"local\""), "%s", r.err);
    cli_result_free(&r);
    cr_assert_eq(sess_workspaces(&s), 1, "the sandbox was touched");
    sess_env_fini(&s);
}

Test(sessions_cli, usage_errors)
{
    struct sess_env s;
    sess_env_init(&s, "sqlite", NULL, false);
    struct cli_result r;
    RUN(&s, &r, NULL, "exec", "k");
    cr_assert_eq(r.status, 125);
    cr_assert(strstr(r.err, "missing command"), "%s", r.err);
    cli_result_free(&r);
    RUN(&s, &r, NULL, "exec", "", "--", "true");
    cr_assert_eq(r.status, 125);
    cr_assert(strstr(r.err, "session key is empty"), "%s", r.err);
    cli_result_free(&r);
    RUN(&s, &r, NULL, "read", "k");
    cr_assert_eq(r.status, 125);
    cr_assert(strstr(r.err, "missing PATH"), "%s", r.err);
    cli_result_free(&r);
    RUN(&s, &r, NULL, "create", "k", "--require", "teleport");
    cr_assert_eq(r.status, 125);
    cr_assert(strstr(r.err, "unknown capability 'teleport'"), "%s", r.err);
    cli_result_free(&r);
    RUN(&s, &r, NULL, "reconcile", "--interval", "5");
    cr_assert_eq(r.status, 125);
    cr_assert(strstr(r.err, "--interval needs --watch"), "%s", r.err);
    cli_result_free(&r);
    cr_assert_eq(sess_workspaces(&s), 0);
    sess_env_fini(&s);
}

Test(sessions_cli, keys_that_are_not_utf8_still_give_valid_json)
{
    struct sess_env s;
    sess_env_init(&s, "sqlite", NULL, false);
    struct cli_result r;
    /* a Latin-1 byte, a lone continuation byte and an escape character */
    RUN(&s, &r, NULL, "create", "caf\xe9-\x80-\x1b[2J");
    cr_assert_eq(r.status, 0, "create: %s", r.err);
    cli_result_free(&r);
    RUN(&s, &r, NULL, "sessions", "--json");
    cr_assert_eq(r.status, 0, "sessions: %s", r.err);
    json_tokener *tok = json_tokener_new();
    json_object *list = json_tokener_parse_ex(tok, r.out, (int)strlen(r.out));
    cr_assert_not_null(list, "not JSON: %s", r.out);
    /* json-c validates UTF-8 only when asked */
    json_tokener_set_flags(tok, JSON_TOKENER_VALIDATE_UTF8);
    json_tokener_reset(tok);
    json_object *strict = json_tokener_parse_ex(tok, r.out, (int)strlen(r.out));
    cr_assert_not_null(strict, "invalid UTF-8 in the output: %s", r.out);
    json_object *b = json_object_array_get_idx(list, 0), *v;
    cr_assert(json_object_object_get_ex(b, "session_hex", &v), "%s", r.out);
    cr_assert_str_eq(json_object_get_string(v), "636166e92d802d1b5b324a");
    cr_assert(json_object_object_get_ex(b, "session", &v));
    cr_assert_str_eq(json_object_get_string(v), "caf\xef\xbf\xbd-\xef\xbf\xbd-\x1b[2J");
    cr_assert_null(strchr(r.out, '\x1b'), "a raw escape reached the output");
    json_object_put(list);
    json_object_put(strict);
    json_tokener_free(tok);
    cli_result_free(&r);
    sess_env_fini(&s);
}

Test(sessions_cli, write_refuses_mode_bits_it_cannot_honour)
{
    struct sess_env s;
    sess_env_init(&s, "sqlite", NULL, false);
    struct cli_result r;
    const char *bad[] = {"0", "000", "4755", "1777", "888"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        RUN(&s, &r, "data", "write", "-m", bad[i], "k", "f.txt");
        cr_assert_eq(r.status, 125, "-m %s: status %d", bad[i], r.status);
        cr_assert(strstr(r.err, "invalid --mode"), "%s", r.err);
        cli_result_free(&r);
    }
    cr_assert_eq(sess_workspaces(&s), 0, "nothing may be created");
    RUN(&s, &r, "data", "write", "-m", "0600", "k", "f.txt");
    cr_assert_eq(r.status, 0, "%s", r.err);
    cli_result_free(&r);
    sess_env_fini(&s);
}

/* With no store configured: a SQLite file under $XDG_STATE_HOME/sbx/, its
 * directory created. */
Test(sessions_cli, default_store_location)
{
    struct cli_env e;
    cli_env_init(&e);
    cli_env_local_config(&e);
    struct cli_result r;
    const char *args[] = {"create", "k", NULL};
    cli_run(&e, args, NULL, 30000, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cli_result_free(&r);
    char db[2 * PATH_MAX];
    snprintf(db, sizeof db, "%s/sbx/sbx.db", e.state);
    struct stat st;
    cr_assert_eq(stat(db, &st), 0, "no store at %s", db);
    const char *list[] = {"sessions", NULL};
    cli_run(&e, list, NULL, 30000, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "\nk "), "%s", r.out);
    cli_result_free(&r);
    cli_env_fini(&e);
}

/* A store that cannot be opened is a clear error naming it, and nothing is
 * provisioned. */
Test(sessions_cli, unusable_store)
{
    struct cli_env e;
    cli_env_init(&e);
    cli_env_write_config(&e, "default_provider: local\n"
                             "store: { driver: sqlite, path: /nonexistent-dir/sbx.db }\n"
                             "providers:\n  local:\n    root: @ROOT@\n");
    struct cli_result r;
    const char *args[] = {"exec", "k", "--", "true", NULL};
    cli_run(&e, args, NULL, 30000, &r);
    cr_assert_eq(r.status, 125);
    cr_assert(strstr(r.err, "/nonexistent-dir/sbx.db"), "%s", r.err);
    cli_result_free(&r);
    cr_assert_eq(cli_dir_entries(e.ws_root), 0);

    cli_env_write_config(&e, "default_provider: local\n"
                             "store: { driver: postgres, dsn: \"host=127.0.0.1 "
                             "port=1 password=hunter2 connect_timeout=2\" }\n"
                             "providers:\n  local:\n    root: @ROOT@\n");
    cli_run(&e, args, NULL, 30000, &r);
    cr_assert_eq(r.status, 125);
    cr_assert(strstr(r.err, "postgres"), "%s", r.err);
    cr_assert_null(strstr(r.err, "hunter2"), "password in a message: %s", r.err);
    cli_result_free(&r);
    cr_assert_eq(cli_dir_entries(e.ws_root), 0);
    cli_env_fini(&e);
}
