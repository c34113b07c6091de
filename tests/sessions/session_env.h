/*
 * session_env.h - a private world for one session test: a temporary HOME,
 * a local provider root, a configuration naming a scratch store (a SQLite
 * file, or a PostgreSQL database of its own reached through SBX_STORE_DSN),
 * and ways to look at the outcome from outside: the workspace directories,
 * `sbx sessions --json`, and the store's tables.
 */
#ifndef SBX_TESTS_SESSION_ENV_H
#define SBX_TESTS_SESSION_ENV_H

#include "cli_harness.h"
#include "scratch_db.h"

#include <criterion/criterion.h>

struct sess_env {
    struct cli_env cli;
    struct scratch_db db;
};

/* Set up for driver "sqlite" or "postgres" (skips the test when postgres
 * has no SBX_TEST_PG_DSN). extra_yaml is appended under `providers:` after
 * the local section (may be NULL); fixtures adds the fixture plugins. */
void sess_env_init(struct sess_env *s, const char *driver, const char *extra_yaml,
                   bool fixtures);

/* The same with another default provider (its section must come in
 * extra_yaml). */
void sess_env_init_with(struct sess_env *s, const char *driver,
                        const char *default_provider, const char *extra_yaml,
                        bool fixtures);
void sess_env_fini(struct sess_env *s);

/* Run `sbx args...` (NULL-terminated) to completion within 30 s. */
void sess_run(struct sess_env *s, const char *const *args, const char *input,
              struct cli_result *r);

/* A count from the store's tables, e.g. "SELECT count(*) FROM intents". */
long long sess_count(struct sess_env *s, const char *sql);

/* Number of workspace directories under the local root. */
int sess_workspaces(struct sess_env *s);

/*
 * The invariants after a reconcile: no intents left, every binding's
 * resource exists, and every workspace is some binding's. Returns the
 * number of bindings.
 */
int sess_check_consistent(struct sess_env *s);

/* Skip the calling test unless libsbx was built with its crash points
 * (SBX_TEST_HOOKS: scripts/test.sh builds so; shipped builds never are). */
static inline void sess_require_crash_hooks(void)
{
#ifndef SBX_TEST_HOOKS
    cr_skip_test("libsbx was built without SBX_TEST_HOOKS (no crash points)");
#endif
}

#endif
