/* session_env.c - the private world of one session test. */
#include "session_env.h"

#include <criterion/criterion.h>
#include <json-c/json.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

void sess_env_init(struct sess_env *s, const char *driver, const char *extra_yaml,
                   bool fixtures)
{
    sess_env_init_with(s, driver, "local", extra_yaml, fixtures);
}

void sess_env_init_with(struct sess_env *s, const char *driver,
                        const char *default_provider, const char *extra_yaml,
                        bool fixtures)
{
    memset(s, 0, sizeof *s);
    char why[512] = "";
    int rc = scratch_create(driver, &s->db, why, sizeof why);
    if (rc == SCRATCH_SKIP)
        cr_skip_test("%s", why);
    cr_assert_eq(rc, SCRATCH_OK, "scratch %s store: %s", driver, why);
    cli_env_init(&s->cli);
    if (fixtures)
        cli_env_add_fixtures(&s->cli);
    char yaml[4096];
    int n;
    if (!strcmp(driver, "sqlite")) {
        n = snprintf(yaml, sizeof yaml,
                     "default_provider: %s\n"
                     "store: { driver: sqlite, path: %s }\n"
                     "providers:\n"
                     "  local:\n"
                     "    root: @ROOT@\n%s",
                     default_provider, s->db.target, extra_yaml ? extra_yaml : "");
    } else {
        /* The DSN travels the way an operator's would: SBX_STORE_DSN. */
        cli_env_setenv(&s->cli, "SBX_STORE_DSN", s->db.target);
        n = snprintf(yaml, sizeof yaml,
                     "default_provider: %s\n"
                     "store: { driver: postgres }\n"
                     "providers:\n"
                     "  local:\n"
                     "    root: @ROOT@\n%s",
                     default_provider, extra_yaml ? extra_yaml : "");
    }
    cr_assert(n > 0 && (size_t)n < sizeof yaml);
    cli_env_write_config(&s->cli, yaml);
}

void sess_env_fini(struct sess_env *s)
{
    cli_env_fini(&s->cli);
    scratch_destroy(&s->db);
}

void sess_run(struct sess_env *s, const char *const *args, const char *input,
              struct cli_result *r)
{
    cli_run(&s->cli, args, input, 30000, r);
}

long long sess_count(struct sess_env *s, const char *sql)
{
    long long v = -1;
    char why[512] = "";
    cr_assert_eq(scratch_query_int(&s->db, sql, &v, why, sizeof why), 0, "%s", why);
    return v;
}

int sess_workspaces(struct sess_env *s)
{
    return cli_dir_entries(s->cli.ws_root);
}

int sess_check_consistent(struct sess_env *s)
{
    cr_assert_eq(sess_count(s, "SELECT count(*) FROM intents"), 0,
                 "an intent was left behind");
    struct cli_result r;
    const char *args[] = {"sessions", "--json", NULL};
    sess_run(s, args, NULL, &r);
    cr_assert_eq(r.status, 0, "sbx sessions: %s", r.err);
    json_object *list = json_tokener_parse(r.out);
    cr_assert_not_null(list, "sbx sessions --json printed no JSON: %s", r.out);
    int n = (int)json_object_array_length(list);
    for (int i = 0; i < n; i++) {
        json_object *b = json_object_array_get_idx(list, (size_t)i), *ref;
        cr_assert(json_object_object_get_ex(b, "external_id", &ref));
        struct stat st;
        /* a local reference is the workspace's name below the root */
        char path[2 * PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", s->cli.ws_root, json_object_get_string(ref));
        cr_assert_eq(stat(path, &st), 0, "binding without a resource: %s",
                     json_object_get_string(ref));
        cr_assert(S_ISDIR(st.st_mode));
    }
    json_object_put(list);
    cli_result_free(&r);
    /* Every workspace is a binding's: as many directories as bindings, and
     * each binding's directory exists (checked above). */
    cr_assert_eq(sess_workspaces(s), n, "%d workspaces for %d bindings",
                 sess_workspaces(s), n);
    return n;
}
