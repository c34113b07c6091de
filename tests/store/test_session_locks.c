/*
 * test_session_locks.c - the store's session locks (store.h,
 * sbxh_store_lock_*), compiled once per driver: two lock objects of one
 * process conflict like two processes (the memory lock's holders are
 * threads of one worker as often as workers of many machines), exclusive
 * to shared lets no one in, the kinds are independent, a closed lock
 * leaves nothing held (PostgreSQL: its connection is reused), and on
 * PostgreSQL a lock whose connection the server ended is free for others
 * and its holder learns it at its next call.
 */
#include "scratch_db.h"
#include "store/store.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>
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

TestSuite(session_locks, .fini = teardown, .timeout = 60);

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

static struct sbx_store_lock *lock_of(const char *key, int kind)
{
    struct sbx_store_lock *l = NULL;
    sbx_error err = {0};
    cr_assert_eq(sbxh_store_lock_open(store, key, kind, &l, &err), SBX_OK, "%s", err.message);
    return l;
}

static bool try(struct sbx_store_lock *l, int mode)
{
    bool got = false;
    sbx_error err = {0};
    cr_assert_eq(sbxh_store_lock_try(l, mode, &got, &err), SBX_OK, "%s", err.message);
    return got;
}

Test(session_locks, two_holders_in_one_process_conflict)
{
    fresh_store();
    struct sbx_store_lock *a = lock_of("k", SBX_STORE_LOCK_MEMORY);
    struct sbx_store_lock *b = lock_of("k", SBX_STORE_LOCK_MEMORY);
    cr_assert(try(a, SBX_STORE_EXCLUSIVE));
    cr_assert_not(try(b, SBX_STORE_SHARED), "a shared lock beside an exclusive one");
    cr_assert_not(try(b, SBX_STORE_EXCLUSIVE));
    /* exclusive to shared: b may share now, still not take it exclusive */
    cr_assert(try(a, SBX_STORE_SHARED));
    cr_assert(try(b, SBX_STORE_SHARED));
    struct sbx_store_lock *c = lock_of("k", SBX_STORE_LOCK_MEMORY);
    cr_assert_not(try(c, SBX_STORE_EXCLUSIVE), "exclusive beside two shared holders");
    cr_assert(try(a, SBX_STORE_UNLOCKED));
    cr_assert_not(try(c, SBX_STORE_EXCLUSIVE), "exclusive beside b's shared hold");
    sbxh_store_lock_close(b); /* releases b's shared hold */
    cr_assert(try(c, SBX_STORE_EXCLUSIVE));
    /* another session and another kind are never in the way */
    struct sbx_store_lock *other = lock_of("k2", SBX_STORE_LOCK_MEMORY);
    struct sbx_store_lock *use = lock_of("k", SBX_STORE_LOCK_USE);
    cr_assert(try(other, SBX_STORE_EXCLUSIVE));
    cr_assert(try(use, SBX_STORE_EXCLUSIVE));
    sbxh_store_lock_close(c);
    sbxh_store_lock_close(other);
    sbxh_store_lock_close(use);
    sbxh_store_lock_close(a);
}

Test(session_locks, a_closed_lock_holds_nothing_and_its_connection_is_reused_clean)
{
    fresh_store();
    for (int i = 0; i < 20; i++) {
        struct sbx_store_lock *a = lock_of("k", SBX_STORE_LOCK_MEMORY);
        cr_assert(try(a, i % 2 ? SBX_STORE_SHARED : SBX_STORE_EXCLUSIVE), "round %d", i);
        sbxh_store_lock_close(a); /* still held: close releases it */
    }
    struct sbx_store_lock *b = lock_of("k", SBX_STORE_LOCK_MEMORY);
    struct sbx_store_lock *c = lock_of("k", SBX_STORE_LOCK_MEMORY);
    cr_assert(try(b, SBX_STORE_EXCLUSIVE), "a closed lock left something held");
    cr_assert_not(try(c, SBX_STORE_SHARED));
    sbxh_store_lock_close(b);
    cr_assert(try(c, SBX_STORE_EXCLUSIVE));
    sbxh_store_lock_close(c);
#ifdef STORE_TEST_PG
    /* reuse keeps the lock connections few: at most the idle ones */
    long long n = -1;
    char why[512] = "";
    cr_assert_eq(scratch_query_int(&db,
                                   "SELECT count(*) FROM pg_stat_activity WHERE "
                                   "application_name = 'sbx-lock'",
                                   &n, why, sizeof why),
                 0, "%s", why);
    cr_assert_leq(n, 8, "%lld lock connections", n);
#endif
}

#ifdef STORE_TEST_PG
Test(session_locks, a_lock_whose_connection_ends_is_free_and_its_holder_learns_it)
{
    fresh_store();
    struct sbx_store_lock *a = lock_of("k", SBX_STORE_LOCK_MEMORY);
    cr_assert(try(a, SBX_STORE_EXCLUSIVE));
    /* the store's shared connection is not where the lock lives */
    char why[512] = "";
    cr_assert_eq(scratch_exec(&db,
                              "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                              "WHERE application_name = 'sbx' AND datname = "
                              "current_database() AND pid <> pg_backend_pid()",
                              why, sizeof why),
                 0, "%s", why);
    struct sbx_store_lock *b = lock_of("k", SBX_STORE_LOCK_MEMORY);
    cr_assert_not(try(b, SBX_STORE_SHARED), "a reconnect of the store dropped the lock");
    /* what a dead worker's connection looks like to the server */
    cr_assert_eq(scratch_exec(&db,
                              "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                              "WHERE application_name = 'sbx-lock' AND datname = "
                              "current_database() AND pid IN (SELECT pid FROM pg_locks "
                              "WHERE locktype = 'advisory' AND mode = 'ExclusiveLock' "
                              "AND granted)",
                              why, sizeof why),
                 0, "%s", why);
    /* the backend ends (and its locks go) shortly after the call */
    bool freed = false;
    for (int i = 0; i < 100 && !(freed = try(b, SBX_STORE_EXCLUSIVE)); i++)
        usleep(50 * 1000);
    cr_assert(freed, "the ended connection's lock is still held");
    bool got = true;
    sbx_error err = {0};
    cr_assert_neq(sbxh_store_lock_try(a, SBX_STORE_SHARED, &got, &err), SBX_OK,
                  "the holder of a lost lock was not told");
    cr_assert_not(got);
    sbxh_store_lock_close(a);
    sbxh_store_lock_close(b);
}
#endif
