/*
 * test_memory_cli.c - `sbx memory` as an operator uses it, on both stores:
 * create, put from stdin, conflicts (exit 1, nothing written), reads at a
 * version, listings as JSON, log, rm, limits and bad names.
 */
#include "session_env.h"

#include <criterion/criterion.h>
#include <json-c/json.h>

#include <string.h>

#define MEM(s, r, input, ...)                                     \
    do {                                                          \
        const char *args_[] = {"memory", __VA_ARGS__, NULL};      \
        sess_run((s), args_, (input), (r));                       \
    } while (0)

static void expect(struct sess_env *s, struct cli_result *r, int status, const char *out,
                   const char *err_part)
{
    cr_assert_eq(r->status, status, "status %d, stderr: %s", r->status, r->err);
    if (out)
        cr_assert_str_eq(r->out, out);
    if (err_part)
        cr_assert(strstr(r->err, err_part), "expected '%s' in: %s", err_part, r->err);
    (void)s;
    cli_result_free(r);
}

static void operator_workflow(const char *driver)
{
    struct sess_env s;
    sess_env_init(&s, driver, NULL, false);
    struct cli_result r;
    MEM(&s, &r, NULL, "create", "team-notes", "--max-file-size", "64");
    expect(&s, &r, 0, "", NULL);
    MEM(&s, &r, NULL, "create", "team-notes");
    expect(&s, &r, 125, NULL, "exists");

    MEM(&s, &r, "first\n", "put", "team-notes", "plan.md");
    expect(&s, &r, 0, "version 1\n", NULL);
    /* Based on "absent" although it exists now: a conflict, nothing written. */
    MEM(&s, &r, "stale\n", "put", "team-notes", "plan.md", "--base", "0");
    expect(&s, &r, 1, "", "conflict: \"plan.md\" changed");
    MEM(&s, &r, "second\n", "put", "team-notes", "plan.md", "--base", "1");
    expect(&s, &r, 0, "version 2\n", NULL);
    MEM(&s, &r, "x\n", "put", "team-notes", "dir/other.md");
    expect(&s, &r, 0, "version 3\n", NULL);

    MEM(&s, &r, NULL, "cat", "team-notes", "plan.md");
    expect(&s, &r, 0, "second\n", NULL);
    MEM(&s, &r, NULL, "cat", "team-notes", "plan.md", "--at", "1");
    expect(&s, &r, 0, "first\n", NULL);
    MEM(&s, &r, NULL, "cat", "team-notes", "plan.md", "--at", "9");
    expect(&s, &r, 125, NULL, "no version 9");

    MEM(&s, &r, NULL, "ls", "team-notes", "--json");
    cr_assert_eq(r.status, 0, "%s", r.err);
    json_object *arr = json_tokener_parse(r.out);
    cr_assert_not_null(arr, "not JSON: %s", r.out);
    cr_assert_eq(json_object_array_length(arr), 2);
    json_object *first = json_object_array_get_idx(arr, 0), *v;
    cr_assert(json_object_object_get_ex(first, "path", &v));
    cr_assert_str_eq(json_object_get_string(v), "dir/other.md");
    cr_assert(json_object_object_get_ex(json_object_array_get_idx(arr, 1), "sha256", &v));
    /* sha256("second\n") */
    cr_assert_str_eq(json_object_get_string(v),
                     "480c2336b410f1ad5f8bf1b28944490255804b65350c527787e74ebdd511e3a4");
    json_object_put(arr);
    cli_result_free(&r);

    MEM(&s, &r, NULL, "rm", "team-notes", "plan.md");
    expect(&s, &r, 0, "version 4\n", NULL);
    MEM(&s, &r, NULL, "cat", "team-notes", "plan.md");
    expect(&s, &r, 125, NULL, "no file \"plan.md\"");
    MEM(&s, &r, NULL, "log", "team-notes", "plan.md", "--json");
    cr_assert_eq(r.status, 0, "%s", r.err);
    arr = json_tokener_parse(r.out);
    cr_assert_eq(json_object_array_length(arr), 3, "%s", r.out);
    cr_assert(json_object_object_get_ex(json_object_array_get_idx(arr, 0), "deleted", &v));
    cr_assert(json_object_get_boolean(v));
    json_object_put(arr);
    cli_result_free(&r);

    /* Limits and bad names. */
    MEM(&s, &r, "0123456789012345678901234567890123456789012345678901234567890123456789",
        "put", "team-notes", "big.md");
    expect(&s, &r, 125, NULL, "\"big.md\": the file is too large (limit 64)");
    MEM(&s, &r, "x", "put", "team-notes", "../escape");
    expect(&s, &r, 125, NULL, "memory path \"../escape\"");
    MEM(&s, &r, NULL, "create", "Bad_Name");
    expect(&s, &r, 125, NULL, "a name is 1 to 63 characters");
    MEM(&s, &r, NULL, "frobnicate");
    expect(&s, &r, 2, NULL, "unknown action");
    MEM(&s, &r, NULL, "put", "team-notes", "a", "--base", "1", "--force");
    expect(&s, &r, 2, NULL, "exclude each other");

    MEM(&s, &r, NULL, "list");
    cr_assert_eq(r.status, 0);
    cr_assert(strstr(r.out, "team-notes"), "%s", r.out);
    cli_result_free(&r);
    MEM(&s, &r, NULL, "delete", "team-notes");
    expect(&s, &r, 0, "", NULL);
    MEM(&s, &r, NULL, "ls", "team-notes");
    expect(&s, &r, 125, NULL, "does not exist");
    sess_env_fini(&s);
}

Test(memory_cli, operator_workflow_sqlite) { operator_workflow("sqlite"); }
Test(memory_cli, operator_workflow_postgres) { operator_workflow("postgres"); }
