/*
 * test_pools_sessions.c - warm pools as a user runs them, through the
 * built `sbx` (reconcile, pools, create, exec, destroy, sessions) on the
 * pooltest fixture (local with SBX_CAP_POOL; exec fails in a workspace
 * holding BROKEN), on SQLite and (with SBX_TEST_PG_DSN) PostgreSQL:
 * refill, claim, fallback to a cold create, broken members never handed
 * out, shrinking and removal, racing claims, and SIGKILL at each step of a
 * refill, a check, a removal and a claim followed by a clean reconcile.
 */
#include "session_env.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <json-c/json.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RUN(s, r, ...)                                            \
    do {                                                          \
        const char *args_[] = {__VA_ARGS__, NULL};                \
        sess_run((s), args_, NULL, (r));                          \
    } while (0)

static const char *driver_of(const struct sess_env *s)
{
    return s->db.driver;
}

/* More keys of the pooltest provider's section (indented four spaces). */
static const char *pooltest_keys = "";

/* The whole configuration with `pools` (YAML under `pools:`, NULL: none). */
static void write_cfg(struct sess_env *s, const char *pools)
{
    char yaml[4096];
    char store[1024];
    if (!strcmp(driver_of(s), "sqlite"))
        snprintf(store, sizeof store, "store: { driver: sqlite, path: %s }\n", s->db.target);
    else
        snprintf(store, sizeof store, "store: { driver: postgres }\n");
    snprintf(yaml, sizeof yaml,
             "default_provider: pooltest\n%s"
             "providers:\n"
             "  pooltest:\n"
             "    root: @ROOT@\n"
             "%s"
             "  nopool:\n"
             "    root: @ROOT@\n"
             "%s%s",
             store, pooltest_keys, pools ? "pools:\n" : "", pools ? pools : "");
    cli_env_write_config(&s->cli, yaml);
}

static void pool_env(struct sess_env *s, const char *driver, const char *pools)
{
    sess_env_init(s, driver, NULL, false);
    size_t n = strlen(s->cli.plugin_path);
    snprintf(s->cli.plugin_path + n, sizeof s->cli.plugin_path - n, ":%s",
             SBX_TEST_SESSION_FIXTURE_DIR);
    write_cfg(s, pools);
}

#define POOL2 "  warm: { provider: pooltest, size: 2 }\n"

static void ok(struct sess_env *s, const char *const *args)
{
    struct cli_result r;
    sess_run(s, args, NULL, &r);
    cr_assert_eq(r.status, 0, "sbx %s: status %d: %s%s", args[0], r.status, r.out, r.err);
    cli_result_free(&r);
}

static void reconcile(struct sess_env *s)
{
    struct cli_result r;
    RUN(s, &r, "reconcile");
    cr_assert_eq(r.status, 0, "reconcile: %s%s", r.out, r.err);
    cr_assert(!strstr(r.out, "pools:") || strstr(r.out, "; 0 failures"), "%s", r.out);
    cli_result_free(&r);
}

/* `sbx pools --json`; the caller puts it. */
static json_object *pools_json(struct sess_env *s)
{
    struct cli_result r;
    RUN(s, &r, "pools", "--json");
    cr_assert_eq(r.status, 0, "sbx pools: %s", r.err);
    json_object *o = json_tokener_parse(r.out);
    cr_assert_not_null(o, "sbx pools --json: %s", r.out);
    cli_result_free(&r);
    return o;
}

/* Members in `state` (NULL: any); refs[] receives their references. */
static int members(struct sess_env *s, const char *state, char refs[][128], int max)
{
    json_object *o = pools_json(s), *list;
    cr_assert(json_object_object_get_ex(o, "members", &list));
    int n = 0;
    for (size_t i = 0; i < json_object_array_length(list); i++) {
        json_object *m = json_object_array_get_idx(list, i), *st, *ref;
        json_object_object_get_ex(m, "state", &st);
        if (state && strcmp(json_object_get_string(st), state))
            continue;
        if (refs && n < max) {
            json_object_object_get_ex(m, "external_id", &ref);
            snprintf(refs[n], 128, "%s", ref ? json_object_get_string(ref) : "");
        }
        n++;
    }
    json_object_put(o);
    return n;
}

/* The reference of session key's binding (from `sbx sessions --json`),
 * "" when it has none; returns the number of sessions. */
static int session_ref(struct sess_env *s, const char *key, char ref[128])
{
    struct cli_result r;
    RUN(s, &r, "sessions", "--json");
    cr_assert_eq(r.status, 0, "%s", r.err);
    json_object *list = json_tokener_parse(r.out);
    cr_assert_not_null(list);
    ref[0] = '\0';
    int n = (int)json_object_array_length(list);
    for (int i = 0; i < n; i++) {
        json_object *b = json_object_array_get_idx(list, (size_t)i), *k, *e;
        json_object_object_get_ex(b, "session", &k);
        json_object_object_get_ex(b, "external_id", &e);
        if (key && !strcmp(json_object_get_string(k), key))
            snprintf(ref, 128, "%s", json_object_get_string(e));
    }
    json_object_put(list);
    cli_result_free(&r);
    return n;
}

static bool in(char refs[][128], int n, const char *ref)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(refs[i], ref))
            return true;
    return false;
}

/* After a reconcile: nothing half-made is left; every workspace is a
 * session's or a ready member's. */
static void consistent(struct sess_env *s, int want_ready)
{
    cr_assert_eq(sess_count(s, "SELECT count(*) FROM intents"), 0, "an intent was left");
    cr_assert_eq(sess_count(s, "SELECT count(*) FROM pool_members WHERE state <> 'ready'"),
                 0, "a creating, checking or claimed member was left");
    int ready = members(s, "ready", NULL, 0);
    cr_assert_eq(ready, want_ready, "%d ready members, expected %d", ready, want_ready);
    char ref[128];
    int sessions = session_ref(s, NULL, ref);
    cr_assert_eq(sess_workspaces(s), ready + sessions,
                 "%d workspaces for %d ready members and %d sessions",
                 sess_workspaces(s), ready, sessions);
}

static void touch_broken(struct sess_env *s, const char *ref)
{
    char path[2 * PATH_MAX];
    snprintf(path, sizeof path, "%s/%s/BROKEN", s->cli.ws_root, ref);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s: %s", path, strerror(errno));
    fclose(f);
}

/* ------------------------------------------------------------------------ */

static void refill_claim_destroy(const char *driver)
{
    struct sess_env s;
    pool_env(&s, driver, POOL2);
    reconcile(&s);
    char refs[4][128];
    cr_assert_eq(members(&s, "ready", refs, 4), 2);
    /* members are no sessions */
    char ref[128];
    cr_assert_eq(session_ref(&s, NULL, ref), 0, "pool members listed as sessions");
    consistent(&s, 2);

    ok(&s, (const char *const[]){"create", "k1", NULL});
    cr_assert_eq(session_ref(&s, "k1", ref), 1);
    cr_assert(in(refs, 2, ref), "k1's sandbox %s is not a pool member's", ref);
    cr_assert_eq(members(&s, NULL, NULL, 0), 1, "the claimed member is still listed");
    struct cli_result r;
    RUN(&s, &r, "exec", "k1", "--", "sh", "-c", "echo hi > f; cat f");
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, "hi\n");
    cli_result_free(&r);
    RUN(&s, &r, "state", "k1");
    cr_assert_eq(r.status, 0, "%s", r.err);
    cli_result_free(&r);
    /* a claimed session is destroyed like any other */
    ok(&s, (const char *const[]){"destroy", "k1", NULL});
    cr_assert_eq(session_ref(&s, NULL, ref), 0);
    cr_assert_eq(sess_count(&s, "SELECT count(*) FROM session_sandboxes"), 0);
    cr_assert_eq(sess_workspaces(&s), 1, "the claimed sandbox was not destroyed");
    reconcile(&s);
    consistent(&s, 2);
    sess_env_fini(&s);
}

Test(pools_sessions, refill_claim_destroy_sqlite, .timeout = 60) { refill_claim_destroy("sqlite"); }
Test(pools_sessions, refill_claim_destroy_postgres, .timeout = 60) { refill_claim_destroy("postgres"); }

static void empty_pool_falls_back(const char *driver)
{
    struct sess_env s;
    pool_env(&s, driver, "  warm: { provider: pooltest, size: 1 }\n");
    /* never filled: a cold create */
    ok(&s, (const char *const[]){"create", "k0", NULL});
    reconcile(&s);
    char refs[2][128], ref[128];
    cr_assert_eq(members(&s, "ready", refs, 2), 1);
    ok(&s, (const char *const[]){"create", "k1", NULL});
    session_ref(&s, "k1", ref);
    cr_assert_str_eq(ref, refs[0], "k1 did not get the ready member");
    /* emptied: the next one does not wait for a refill */
    long long t0 = cli_now_ms();
    ok(&s, (const char *const[]){"create", "k2", NULL});
    cr_assert_lt(cli_now_ms() - t0, 10000);
    session_ref(&s, "k2", ref);
    cr_assert(ref[0] && strcmp(ref, refs[0]), "k2: %s", ref);
    ok(&s, (const char *const[]){"exec", "k2", "--", "true", NULL});
    /* a session whose spec differs never takes a member */
    reconcile(&s);
    cr_assert_eq(members(&s, "ready", refs, 2), 1);
    ok(&s, (const char *const[]){"create", "--port", "8080", "k3", NULL});
    cr_assert_eq(members(&s, "ready", NULL, 0), 1, "a session of another spec claimed");
    ok(&s, (const char *const[]){"destroy", "k3", NULL}); /* and its port state */
    reconcile(&s);
    consistent(&s, 1);
    sess_env_fini(&s);
}

/* Pool members count against max_sandboxes: a refill stops at the limit,
 * a session that takes a ready member adds no sandbox (so it is admitted
 * at limit - 1 + members), a cold one past the limit is refused. */
static void max_sandboxes_counts_members(const char *driver)
{
    struct sess_env s;
    pooltest_keys = "    max_sandboxes: 3\n";
    pool_env(&s, driver, POOL2);
    pooltest_keys = "";
    reconcile(&s);
    cr_assert_eq(members(&s, "ready", NULL, 0), 2);
    ok(&s, (const char *const[]){"create", "k1", NULL});
    ok(&s, (const char *const[]){"create", "k2", NULL});
    struct cli_result r;
    RUN(&s, &r, "reconcile");
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_assert(strstr(r.out, "1 members created") && strstr(r.out, "1 pools held short"),
              "%s", r.out);
    cli_result_free(&r);
    cr_assert_eq(members(&s, "ready", NULL, 0), 1, "the refill went past max_sandboxes");
    /* 2 sessions + 1 member = the limit: taking the member is admitted */
    ok(&s, (const char *const[]){"create", "k3", NULL});
    cr_assert_eq(members(&s, "ready", NULL, 0), 0);
    RUN(&s, &r, "create", "k4");
    cr_assert_neq(r.status, 0, "a fourth sandbox was admitted");
    cr_assert(strstr(r.err, "max_sandboxes (3)") && strstr(r.err, "pooltest"), "%s", r.err);
    cli_result_free(&r);
    cr_assert_eq(sess_count(&s, "SELECT count(*) FROM intents"), 0, "the refusal left an intent");
    ok(&s, (const char *const[]){"destroy", "k1", NULL});
    reconcile(&s);
    cr_assert_eq(members(&s, "ready", NULL, 0), 1);
    sess_env_fini(&s);
}

/* Wait until process pid is stopped (state T in /proc/PID/stat). */
static void wait_stopped(pid_t pid)
{
    for (int i = 0; i < 3000; i++) {
        char path[64], buf[512];
        snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
        FILE *f = fopen(path, "r");
        cr_assert_not_null(f, "worker %d is gone", (int)pid);
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = 0;
        const char *paren = strrchr(buf, ')');
        if (paren && paren[1] == ' ' && paren[2] == 'T')
            return;
        usleep(10 * 1000);
    }
    cr_assert_fail("worker %d never stopped at its stop point", (int)pid);
}

/* The recheck before a cold create: a worker admitted at the limit on a
 * ready member (so it counted no sandbox of its own) finds the member
 * taken and the limit reached meanwhile by a worker whose configuration
 * has no max_sandboxes (a rollout of the limit in progress). It must be
 * refused, not go past the limit, and leave no intent and no sandbox. */
static void max_sandboxes_rechecked_after_a_lost_member(const char *driver)
{
    sess_require_crash_hooks();
    struct sess_env s;
    pooltest_keys = "    max_sandboxes: 2\n";
    pool_env(&s, driver, "  warm: { provider: pooltest, size: 1 }\n");
    reconcile(&s);
    cr_assert_eq(members(&s, "ready", NULL, 0), 1);
    ok(&s, (const char *const[]){"create", "k1", NULL});
    reconcile(&s);
    /* k1 + 1 member = the limit: k2 is admitted to take the member */
    cli_env_setenv(&s.cli, "SBX_TEST_STOP_AT", "after-admission");
    struct cli_proc a;
    cli_spawn(&s.cli, (const char *const[]){"create", "k2", NULL}, CLI_STDIN_NULL, &a);
    cli_env_setenv(&s.cli, "SBX_TEST_STOP_AT", "");
    wait_stopped(a.pid);
    /* meanwhile, a worker without the limit takes the member */
    pooltest_keys = "";
    write_cfg(&s, "  warm: { provider: pooltest, size: 1 }\n");
    ok(&s, (const char *const[]){"create", "k3", NULL});
    cr_assert_eq(members(&s, NULL, NULL, 0), 0, "k3 did not take the member");
    kill(a.pid, SIGCONT);
    char err[4096];
    cli_read_err(&a, err, sizeof err, 30000);
    int status = cli_wait(&a, 30000);
    cr_assert_neq(status, 0, "k2 was created past max_sandboxes 2: %s", err);
    cr_assert(strstr(err, "max_sandboxes (2)") && strstr(err, "pooltest"), "%s", err);
    cr_assert_eq(sess_count(&s, "SELECT count(*) FROM intents"), 0, "the refusal left an intent");
    cr_assert_eq(sess_count(&s, "SELECT count(*) FROM bindings"), 2);
    cr_assert_eq(sess_workspaces(&s), 2, "a sandbox was made for the refused session");
    sess_env_fini(&s);
}

Test(pools_sessions, max_sandboxes_rechecked_after_a_lost_member_sqlite, .timeout = 90)
{
    max_sandboxes_rechecked_after_a_lost_member("sqlite");
}
Test(pools_sessions, max_sandboxes_rechecked_after_a_lost_member_postgres, .timeout = 90)
{
    max_sandboxes_rechecked_after_a_lost_member("postgres");
}

Test(pools_sessions, max_sandboxes_counts_members_sqlite, .timeout = 60)
{
    max_sandboxes_counts_members("sqlite");
}
Test(pools_sessions, max_sandboxes_counts_members_postgres, .timeout = 60)
{
    max_sandboxes_counts_members("postgres");
}

Test(pools_sessions, empty_pool_falls_back_sqlite, .timeout = 60) { empty_pool_falls_back("sqlite"); }
Test(pools_sessions, empty_pool_falls_back_postgres, .timeout = 60) { empty_pool_falls_back("postgres"); }

static void broken_never_handed_out(const char *driver)
{
    struct sess_env s;
    pool_env(&s, driver, POOL2);
    reconcile(&s);
    char refs[4][128], ref[128];
    cr_assert_eq(members(&s, "ready", refs, 4), 2);
    touch_broken(&s, refs[0]);
    touch_broken(&s, refs[1]);
    ok(&s, (const char *const[]){"create", "k1", NULL});
    session_ref(&s, "k1", ref);
    cr_assert(!in(refs, 2, ref), "k1 was handed the broken member %s", ref);
    ok(&s, (const char *const[]){"exec", "k1", "--", "true", NULL});
    cr_assert_eq(members(&s, NULL, NULL, 0), 0, "broken members were kept");
    cr_assert_eq(sess_workspaces(&s), 1, "broken members were not destroyed");
    /* reconcile's check replaces a member that broke while waiting */
    reconcile(&s);
    cr_assert_eq(members(&s, "ready", refs, 4), 2);
    touch_broken(&s, refs[1]);
    struct cli_result r;
    RUN(&s, &r, "reconcile");
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_assert(strstr(r.out, "1 replaced"), "%s", r.out);
    cli_result_free(&r);
    char now[4][128];
    cr_assert_eq(members(&s, "ready", now, 4), 2);
    cr_assert(!in(now, 2, refs[1]), "the broken member is still ready");
    consistent(&s, 2);
    sess_env_fini(&s);
}

/* SBX_POOL_CHECK_FRESH_MS: a member checked within the window is only
 * attached at claim (the documented trade-off: a member that broke in a
 * way attach cannot see since its check is handed out); one checked
 * longer ago is checked again and never handed out broken. */
static void check_fresh_window(const char *driver)
{
    struct sess_env s;
    pool_env(&s, driver, POOL2);
    cli_env_setenv(&s.cli, "SBX_POOL_CHECK_FRESH_MS", "600000");
    reconcile(&s);
    char refs[4][128], ref[128];
    cr_assert_eq(members(&s, "ready", refs, 4), 2);
    touch_broken(&s, refs[0]);
    touch_broken(&s, refs[1]);
    ok(&s, (const char *const[]){"create", "k1", NULL});
    session_ref(&s, "k1", ref);
    cr_assert(in(refs, 2, ref), "k1 (window 10 min) was not given a fresh member");
    cli_env_setenv(&s.cli, "SBX_POOL_CHECK_FRESH_MS", "1");
    usleep(20 * 1000);
    ok(&s, (const char *const[]){"create", "k2", NULL});
    session_ref(&s, "k2", ref);
    cr_assert(!in(refs, 2, ref), "k2 (window 1 ms) was handed the broken member %s", ref);
    sess_env_fini(&s);
}
Test(pools_sessions, check_fresh_window_sqlite, .timeout = 60) { check_fresh_window("sqlite"); }

Test(pools_sessions, broken_never_handed_out_sqlite, .timeout = 60) { broken_never_handed_out("sqlite"); }
Test(pools_sessions, broken_never_handed_out_postgres, .timeout = 60) { broken_never_handed_out("postgres"); }

static void shrink_and_remove(const char *driver)
{
    struct sess_env s;
    pool_env(&s, driver, "  warm: { provider: pooltest, size: 3 }\n");
    reconcile(&s);
    consistent(&s, 3);
    write_cfg(&s, "  warm: { provider: pooltest, size: 1 }\n");
    reconcile(&s);
    consistent(&s, 1);
    /* another spec: the old members go, new ones come */
    char before[2][128], after[2][128];
    members(&s, "ready", before, 2);
    write_cfg(&s, "  warm: { provider: pooltest, size: 1, caps: [file_ops] }\n");
    reconcile(&s);
    consistent(&s, 1);
    members(&s, "ready", after, 2);
    cr_assert_str_neq(before[0], after[0], "a member of the old spec was kept");
    write_cfg(&s, NULL);
    struct cli_result r;
    RUN(&s, &r, "pools");
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "not configured"), "%s", r.out);
    cli_result_free(&r);
    reconcile(&s);
    consistent(&s, 0);
    sess_env_fini(&s);
}

Test(pools_sessions, shrink_and_remove_sqlite, .timeout = 60) { shrink_and_remove("sqlite"); }
Test(pools_sessions, shrink_and_remove_postgres, .timeout = 60) { shrink_and_remove("postgres"); }

Test(pools_sessions, a_provider_without_the_pool_capability_is_a_config_error)
{
    struct sess_env s;
    pool_env(&s, "sqlite", "  warm: { provider: nopool, size: 1 }\n");
    struct cli_result r;
    RUN(&s, &r, "pools");
    cr_assert_neq(r.status, 0);
    cr_assert(strstr(r.err, "pools.warm") && strstr(r.err, "nopool") &&
                  strstr(r.err, "pool capability"),
              "%s", r.err);
    cli_result_free(&r);
    write_cfg(&s, "  warm: { provider: pooltest, size: 1, caps: [wings] }\n");
    RUN(&s, &r, "pools");
    cr_assert_neq(r.status, 0);
    cr_assert(strstr(r.err, "wings"), "%s", r.err);
    cli_result_free(&r);
    write_cfg(&s, "  warm: { provider: pooltest, size: lots }\n");
    RUN(&s, &r, "pools");
    cr_assert_neq(r.status, 0);
    cr_assert(strstr(r.err, "pools.warm.size"), "%s", r.err);
    cli_result_free(&r);
    sess_env_fini(&s);
}

/* ------------------------------------------------------------------------ */
/* Racing claims                                                              */
/* ------------------------------------------------------------------------ */

#define WORKERS 6

static void racing_claims(const char *driver)
{
    struct sess_env s;
    pool_env(&s, driver, "  warm: { provider: pooltest, size: 3 }\n");
    reconcile(&s);
    char refs[4][128];
    cr_assert_eq(members(&s, "ready", refs, 4), 3);
    struct cli_proc p[WORKERS];
    char keys[WORKERS][16];
    for (int i = 0; i < WORKERS; i++) {
        snprintf(keys[i], sizeof keys[i], "racer-%d", i);
        const char *args[] = {"create", keys[i], NULL};
        cli_spawn(&s.cli, args, CLI_STDIN_NULL, &p[i]);
    }
    for (int i = 0; i < WORKERS; i++)
        cr_assert_eq(cli_wait(&p[i], 30000), 0, "worker %d failed", i);
    char got[WORKERS][128];
    int pooled = 0;
    for (int i = 0; i < WORKERS; i++) {
        cr_assert_eq(session_ref(&s, keys[i], got[i]), WORKERS);
        cr_assert(got[i][0], "%s has no sandbox", keys[i]);
        for (int k = 0; k < i; k++)
            cr_assert_str_neq(got[i], got[k], "%s and %s share a sandbox", keys[i], keys[k]);
        pooled += in(refs, 3, got[i]);
    }
    cr_assert_eq(pooled, 3, "%d sessions got a member of a pool of 3", pooled);
    cr_assert_eq(members(&s, NULL, NULL, 0), 0);
    reconcile(&s);
    consistent(&s, 3);
    sess_env_fini(&s);
}

Test(pools_sessions, racing_claims_sqlite, .timeout = 60) { racing_claims("sqlite"); }
Test(pools_sessions, racing_claims_postgres, .timeout = 60) { racing_claims("postgres"); }

/* ------------------------------------------------------------------------ */
/* SIGKILL at every step                                                      */
/* ------------------------------------------------------------------------ */

static void killed(struct sess_env *s, const char *step, const char *const *args)
{
    struct cli_result r;
    cli_env_setenv(&s->cli, "SBX_TEST_CRASH_AT", step);
    sess_run(s, args, NULL, &r);
    cli_env_setenv(&s->cli, "SBX_TEST_CRASH_AT", "");
    cr_assert_eq(r.status, CLI_KILLED_BY + SIGKILL, "not killed at %s: status %d: %s%s",
                 step, r.status, r.out, r.err);
    cli_result_free(&r);
}

static void crashes(const char *driver)
{
    sess_require_crash_hooks();
    struct sess_env s;
    pool_env(&s, driver, POOL2);
    const char *const rec[] = {"reconcile", NULL};
    /* a refill killed after its row, after create, after ready */
    static const char *const refill[] = {"pool-after-insert", "pool-after-create",
                                         "pool-after-ready"};
    for (size_t i = 0; i < 3; i++) {
        killed(&s, refill[i], rec);
        reconcile(&s);
        consistent(&s, 2);
        /* empty it again for the next step */
        write_cfg(&s, NULL);
        reconcile(&s);
        consistent(&s, 0);
        write_cfg(&s, POOL2);
    }
    /* a health check killed half-way */
    reconcile(&s);
    killed(&s, "pool-during-check", rec);
    reconcile(&s);
    consistent(&s, 2);
    /* a removal killed while destroying */
    write_cfg(&s, "  warm: { provider: pooltest, size: 1 }\n");
    killed(&s, "pool-during-destroy", rec);
    reconcile(&s);
    consistent(&s, 1);
    write_cfg(&s, POOL2);
    reconcile(&s);
    /* a claim killed before the session was published: the member's
     * sandbox goes with the session's intent */
    const char *const create[] = {"create", "k1", NULL};
    killed(&s, "pool-after-claim", create);
    reconcile(&s);
    consistent(&s, 2);
    char ref[128];
    cr_assert_eq(session_ref(&s, NULL, ref), 0);
    /* killed after publishing: the session is whole, its row is dropped */
    killed(&s, "pool-after-publish", create);
    ok(&s, (const char *const[]){"exec", "k1", "--", "true", NULL});
    reconcile(&s);
    consistent(&s, 2);
    ok(&s, (const char *const[]){"destroy", "k1", NULL});
    reconcile(&s);
    consistent(&s, 2);
    sess_env_fini(&s);
}

Test(pools_sessions, crashes_sqlite, .timeout = 120) { crashes("sqlite"); }
Test(pools_sessions, crashes_postgres, .timeout = 120) { crashes("postgres"); }
