/*
 * test_pools.c - warm pool members in the store (store/pools.h), compiled
 * once per driver like test_store.c: the member life cycle, the claim that
 * hands a member to a session's intent in one transaction, racing claims
 * of forked processes (each member to exactly one claimant), the undo of
 * a claim, and migration 6 applied to a database at version 5.
 */
#include "scratch_db.h"
#include "store/pools.h"
#include "store/store.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef STORE_TEST_DRIVER
#error "define STORE_TEST_DRIVER"
#endif

static struct scratch_db db;
static struct sbx_store *store;

static void teardown(void)
{
    sbxh_store_close(store);
    store = NULL;
    scratch_destroy(&db);
}

TestSuite(pools, .fini = teardown, .timeout = 120);

static void fresh_store(void)
{
    char why[512] = "";
    int rc = scratch_create(STORE_TEST_DRIVER, &db, why, sizeof why);
    if (rc == SCRATCH_SKIP)
        cr_skip_test("%s", why);
    cr_assert_eq(rc, SCRATCH_OK, "scratch database: %s", why);
    sbx_error err = {0};
    cr_assert_eq(sbxh_store_open(STORE_TEST_DRIVER, db.target, &store, &err), SBX_OK, "%s",
                 err.message);
}

static long long count(const char *sql)
{
    long long v = -1;
    char why[512] = "";
    cr_assert_eq(scratch_query_int(&db, sql, &v, why, sizeof why), 0, "%s", why);
    return v;
}

/* A ready member `key` of pool "py" with reference "ref-<key>". */
static void ready_member(const char *key)
{
    sbx_error err = {0};
    cr_assert_eq(sbxh_store_pool_insert(store, key, "py", "docker", "hash-1", "refiller",
                                        &err),
                 SBX_OK, "%s", err.message);
    char ref[128];
    snprintf(ref, sizeof ref, "ref-%s", key);
    cr_assert_eq(sbxh_store_pool_set(store, key, "refiller", ref, true, &err), SBX_OK,
                 "%s", err.message);
}

static void intent_for(struct sbx_store *s, const char *key, const char *owner)
{
    struct sbx_claim_request req = {.session_key = key, .provider = "docker",
                                     .owner = owner, .spec_hash = "full-hash"};
    struct sbx_claim c = {0};
    sbx_error err = {0};
    cr_assert_eq(sbxh_store_claim(s, &req, &c, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(c.outcome, SBX_CLAIM_WON);
    sbxh_claim_clear(&c);
}

Test(pools, a_member_goes_creating_ready_claimed_and_becomes_the_sessions_binding)
{
    fresh_store();
    sbx_error err = {0};
    cr_assert_eq(sbxh_store_pool_insert(store, "m1", "py", "docker", "hash-1", "refiller",
                                        &err),
                 SBX_OK, "%s", err.message);
    cr_assert_eq(sbxh_store_pool_insert(store, "m1", "py", "docker", "hash-1", "other",
                                        &err),
                 SBX_E_EXISTS);
    /* a creating member is never claimed */
    intent_for(store, "s1", "w1");
    struct sbx_pool_member pm;
    bool found = true;
    cr_assert_eq(sbxh_store_pool_claim(store, "py", "s1", "w1", &pm, &found, &err), SBX_OK,
                 "%s", err.message);
    cr_assert_not(found);
    /* only its owner sets it up */
    cr_assert_eq(sbxh_store_pool_set(store, "m1", "intruder", "ref-x", true, &err),
                 SBX_E_DENIED);
    cr_assert_eq(sbxh_store_pool_set(store, "m1", "refiller", "ref-m1", true, &err), SBX_OK,
                 "%s", err.message);

    struct sbx_pool_member *v;
    size_t n;
    cr_assert_eq(sbxh_store_pool_list(store, &v, &n, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(n, 1);
    cr_assert_str_eq(v[0].state, "ready");
    cr_assert_str_eq(v[0].external_id, "ref-m1");
    sbxh_pool_members_free(v, n);

    /* another pool's claimant finds nothing; the intent must be the caller's */
    cr_assert_eq(sbxh_store_pool_claim(store, "other", "s1", "w1", &pm, &found, &err),
                 SBX_OK);
    cr_assert_not(found);
    cr_assert_eq(sbxh_store_pool_claim(store, "py", "s1", "not-w1", &pm, &found, &err),
                 SBX_E_DENIED);
    cr_assert_not(found);
    cr_assert_eq(count("SELECT count(*) FROM pool_members WHERE state = 'ready'"), 1,
                 "a refused claim changed the member");

    cr_assert_eq(sbxh_store_pool_claim(store, "py", "s1", "w1", &pm, &found, &err), SBX_OK,
                 "%s", err.message);
    cr_assert(found);
    cr_assert_str_eq(pm.member_key, "m1");
    cr_assert_str_eq(pm.external_id, "ref-m1");
    sbxh_pool_member_clear(&pm);
    cr_assert_eq(count("SELECT count(*) FROM pool_members WHERE state = 'claimed' AND "
                       "claimed_by = 's1'"),
                 1);
    struct sbx_intent in = {0};
    cr_assert_eq(sbxh_store_get_intent(store, "s1", &in, &err), SBX_OK);
    cr_assert_str_eq(in.external_id, "ref-m1");
    cr_assert_str_eq(in.step, "pool");
    sbxh_intent_clear(&in);
    char skey[SBX_STORE_KEY_MAX + 1];
    cr_assert_eq(sbxh_store_sandbox_key(store, "s1", skey, &found, &err), SBX_OK);
    cr_assert(found);
    cr_assert_str_eq(skey, "m1");
    /* publishing makes it the binding, spec hash the session's */
    struct sbx_binding b = {0};
    cr_assert_eq(sbxh_store_publish(store, "s1", "w1", &b, &err), SBX_OK, "%s", err.message);
    cr_assert_str_eq(b.external_id, "ref-m1");
    cr_assert_str_eq(b.spec_hash, "full-hash");
    sbxh_binding_clear(&b);
    /* claimed once: never again */
    intent_for(store, "s2", "w2");
    cr_assert_eq(sbxh_store_pool_claim(store, "py", "s2", "w2", &pm, &found, &err), SBX_OK);
    cr_assert_not(found);
    cr_assert_eq(sbxh_store_drop_sandbox_key(store, "s1", &err), SBX_OK);
    cr_assert_eq(sbxh_store_sandbox_key(store, "s1", skey, &found, &err), SBX_OK);
    cr_assert_not(found);
}

Test(pools, unclaim_gives_a_broken_member_back_as_checking_and_clears_the_intent)
{
    fresh_store();
    ready_member("m1");
    intent_for(store, "s1", "w1");
    struct sbx_pool_member pm;
    bool found = false;
    sbx_error err = {0};
    cr_assert_eq(sbxh_store_pool_claim(store, "py", "s1", "w1", &pm, &found, &err), SBX_OK);
    cr_assert(found);
    sbxh_pool_member_clear(&pm);
    cr_assert_eq(sbxh_store_pool_unclaim(store, "s1", "other", "m1", &err), SBX_E_DENIED);
    cr_assert_eq(sbxh_store_pool_unclaim(store, "s1", "w1", "m1", &err), SBX_OK, "%s",
                 err.message);
    cr_assert_eq(count("SELECT count(*) FROM pool_members WHERE state = 'checking' AND "
                       "owner = 'w1' AND claimed_by IS NULL"),
                 1);
    cr_assert_eq(count("SELECT count(*) FROM session_sandboxes"), 0);
    struct sbx_intent in = {0};
    cr_assert_eq(sbxh_store_get_intent(store, "s1", &in, &err), SBX_OK);
    cr_assert_null(in.external_id);
    sbxh_intent_clear(&in);
    /* a checking member is not claimable */
    cr_assert_eq(sbxh_store_pool_claim(store, "py", "s1", "w1", &pm, &found, &err), SBX_OK);
    cr_assert_not(found);
    /* take is conditional: one of two takers */
    bool a = false, b = false;
    cr_assert_eq(sbxh_store_pool_take(store, "m1", "checking", "w1", "checking", "rec-a", &a,
                                      &err),
                 SBX_OK);
    cr_assert_eq(sbxh_store_pool_take(store, "m1", "checking", "w1", "checking", "rec-b", &b,
                                      &err),
                 SBX_OK);
    cr_assert(a && !b, "take: a=%d b=%d", a, b);
    cr_assert_eq(sbxh_store_pool_delete(store, "m1", &err), SBX_OK);
    cr_assert_eq(count("SELECT count(*) FROM pool_members"), 0);
}

#define RACERS 8
#define MEMBERS 3

/* RACERS forked processes, each with its own store and session key, claim
 * from a pool of MEMBERS ready members at once. */
static void race_round(int round)
{
    char keys[MEMBERS][32];
    for (int k = 0; k < MEMBERS; k++) {
        snprintf(keys[k], sizeof keys[k], "r%d-m%d", round, k);
        ready_member(keys[k]);
    }
    int go[2], res[2];
    cr_assert_eq(pipe(go), 0);
    cr_assert_eq(pipe(res), 0);
    pid_t pids[RACERS];
    for (int i = 0; i < RACERS; i++) {
        pids[i] = fork();
        cr_assert_neq(pids[i], -1);
        if (pids[i] == 0) {
            close(go[1]);
            close(res[0]);
            char session[32], owner[32], line[1024];
            snprintf(session, sizeof session, "r%d-s%d", round, i);
            snprintf(owner, sizeof owner, "racer-%d", i);
            sbx_error err = {0};
            struct sbx_store *s = NULL;
            int rc = sbxh_store_open(STORE_TEST_DRIVER, db.target, &s, &err);
            if (rc == SBX_OK) {
                struct sbx_claim_request req = {.session_key = session,
                                                .provider = "docker", .owner = owner};
                struct sbx_claim c = {0};
                rc = sbxh_store_claim(s, &req, &c, &err);
                sbxh_claim_clear(&c);
            }
            char c;
            while (read(go[0], &c, 1) > 0) /* EOF: start */
                ;
            struct sbx_pool_member pm = {0};
            bool found = false;
            if (rc == SBX_OK)
                rc = sbxh_store_pool_claim(s, "py", session, owner, &pm, &found, &err);
            if (rc == SBX_OK)
                snprintf(line, sizeof line, "%d %s\n", i, found ? pm.member_key : "-");
            else
                snprintf(line, sizeof line, "%d !%d %.900s\n", i, rc, err.message);
            sbxh_pool_member_clear(&pm);
            sbxh_store_close(s);
            ssize_t w = write(res[1], line, strlen(line));
            _exit(w > 0 ? 0 : 1);
        }
    }
    close(go[0]);
    close(res[1]);
    usleep(200000); /* every racer has opened its store and holds its intent */
    close(go[1]);
    FILE *f = fdopen(res[0], "r");
    cr_assert_not_null(f);
    int won[MEMBERS] = {0}, none = 0, reports = 0;
    char line[1100];
    while (fgets(line, sizeof line, f)) {
        int idx = -1;
        char what[1000] = "";
        cr_assert_eq(sscanf(line, "%d %999[^\n]", &idx, what), 2, "bad report %s", line);
        cr_assert_neq(what[0], '!', "racer %d failed: %s", idx, what);
        reports++;
        if (!strcmp(what, "-")) {
            none++;
            continue;
        }
        bool known = false;
        for (int k = 0; k < MEMBERS; k++)
            if (!strcmp(what, keys[k])) {
                won[k]++;
                known = true;
            }
        cr_assert(known, "racer %d claimed an unknown member %s", idx, what);
    }
    fclose(f);
    for (int i = 0; i < RACERS; i++) {
        int status = 0;
        cr_assert_eq(waitpid(pids[i], &status, 0), pids[i]);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "racer %d died", i);
    }
    cr_assert_eq(reports, RACERS);
    for (int k = 0; k < MEMBERS; k++)
        cr_assert_eq(won[k], 1, "round %d: member %s claimed %d times", round, keys[k],
                     won[k]);
    cr_assert_eq(none, RACERS - MEMBERS);
}

Test(pools, racing_processes_claim_each_member_exactly_once)
{
    fresh_store();
    for (int round = 0; round < 3; round++)
        race_round(round);
    /* every claimed member's claimant holds its reference and its key */
    cr_assert_eq(count("SELECT count(*) FROM pool_members WHERE state = 'claimed'"),
                 3 * MEMBERS);
    cr_assert_eq(count("SELECT count(*) FROM pool_members p JOIN intents i ON "
                       "i.session_key = p.claimed_by AND i.external_id = p.external_id "
                       "JOIN session_sandboxes k ON k.session_key = p.claimed_by AND "
                       "k.sandbox_key = p.member_key"),
                 3 * MEMBERS);
    cr_assert_eq(count("SELECT count(*) FROM intents WHERE external_id IS NULL"),
                 3 * (RACERS - MEMBERS));
}

Test(pools, migrations_6_and_7_apply_to_a_version_5_database_and_keep_its_rows)
{
    fresh_store();
    intent_for(store, "kept", "w1");
    sbxh_store_close(store);
    store = NULL;
    char why[512] = "";
    /* back to version 5, as a database written by the previous release */
    cr_assert_eq(scratch_exec(&db,
                              "DROP TABLE pool_members; DROP TABLE session_sandboxes; "
                              "DROP TABLE session_activity; "
                              "DELETE FROM schema_version WHERE version IN (6, 7)",
                              why, sizeof why),
                 0, "%s", why);
    sbx_error err = {0};
    cr_assert_eq(sbxh_store_open(STORE_TEST_DRIVER, db.target, &store, &err), SBX_OK, "%s",
                 err.message);
    int version = 0;
    cr_assert_eq(sbxh_store_schema_version(store, &version, &err), SBX_OK);
    cr_assert_eq(version, SBX_STORE_SCHEMA_VERSION);
    cr_assert_eq(count("SELECT count(*) FROM intents WHERE session_key = 'kept'"), 1);
    cr_assert_eq(count("SELECT count(*) FROM session_activity"), 0);
    ready_member("m1");
    cr_assert_eq(count("SELECT count(*) FROM pool_members"), 1);
}
