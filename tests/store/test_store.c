/*
 * test_store.c - the session store suite. Compiled once per driver
 * (STORE_TEST_DRIVER is "sqlite" or "postgres"); every test runs against a
 * private database made by scratch_db.c. The postgres build skips the
 * tests that need a server when SBX_TEST_PG_DSN is unset.
 */
#include "scratch_db.h"
#include "store/store.h"

#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
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

TestSuite(store, .fini = teardown, .timeout = 120);

/* ------------------------------------------------------------------------ */
/* Helpers                                                                    */
/* ------------------------------------------------------------------------ */

/* Make a private, empty database (skips without a PostgreSQL server). */
static void fresh_db(void)
{
    char why[512] = "";
    int rc = scratch_create(STORE_TEST_DRIVER, &db, why, sizeof why);
    if (rc == SCRATCH_SKIP)
        cr_skip_test("%s", why);
    cr_assert_eq(rc, SCRATCH_OK, "cannot make a scratch database: %s", why);
}

static struct sbx_store *open_store(void)
{
    sbx_error err = {0};
    struct sbx_store *s = NULL;
    int rc = sbxh_store_open(STORE_TEST_DRIVER, db.target, &s, &err);
    cr_assert_eq(rc, SBX_OK, "open failed (%d): %s", rc, err.message);
    cr_assert_str_eq(sbxh_store_driver(s), STORE_TEST_DRIVER);
    return s;
}

/* Private database plus the shared store handle on it. */
static void fresh_store(void)
{
    fresh_db();
    store = open_store();
}

static void claim_as(const char *key, const char *owner, struct sbx_claim *c,
                     int expect_outcome)
{
    struct sbx_claim_request req = {.session_key = key, .provider = "local",
                                     .owner = owner, .spec_hash = "spec-1"};
    sbx_error err = {0};
    int rc = sbxh_store_claim(store, &req, c, &err);
    cr_assert_eq(rc, SBX_OK, "claim: %s", err.message);
    cr_assert_eq(c->outcome, expect_outcome, "claim outcome %d, expected %d",
                 c->outcome, expect_outcome);
}

/* Claim, record an external id and publish: a complete provisioning. */
static void bind_key(const char *key, const char *provider, const char *external_id)
{
    struct sbx_claim_request req = {.session_key = key, .provider = provider,
                                     .owner = "binder", .spec_hash = "spec-1"};
    struct sbx_claim c;
    sbx_error err = {0};
    cr_assert_eq(sbxh_store_claim(store, &req, &c, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(c.outcome, SBX_CLAIM_WON);
    sbxh_claim_clear(&c);
    cr_assert_eq(sbxh_store_update_intent(store, key, "binder", "created", external_id,
                                          &err),
                 SBX_OK, "%s", err.message);
    cr_assert_eq(sbxh_store_publish(store, key, "binder", NULL, &err), SBX_OK, "%s",
                 err.message);
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------------------ */
/* Migrations                                                                 */
/* ------------------------------------------------------------------------ */

Test(store, migrations_are_applied_once_and_survive_reopen)
{
    fresh_store();
    sbx_error err = {0};
    int version = -1;
    cr_assert_eq(sbxh_store_schema_version(store, &version, &err), SBX_OK, "%s",
                 err.message);
    cr_assert_eq(version, SBX_STORE_SCHEMA_VERSION);
    bind_key("persist", "local", "ws-1");
    sbxh_store_close(store);

    /* Reopen twice, the second while the first is still open. */
    store = open_store();
    struct sbx_store *again = open_store();
    cr_assert_eq(sbxh_store_schema_version(again, &version, &err), SBX_OK);
    cr_assert_eq(version, SBX_STORE_SCHEMA_VERSION);
    sbxh_store_close(again);

    struct sbx_binding b;
    cr_assert_eq(sbxh_store_get_binding(store, "persist", &b, &err), SBX_OK, "%s",
                 err.message);
    cr_assert_str_eq(b.external_id, "ws-1");
    sbxh_binding_clear(&b);

    long long rows = 0;
    char why[512];
    cr_assert_eq(scratch_query_int(&db, "SELECT count(*) FROM schema_version", &rows, why,
                                   sizeof why),
                 0, "%s", why);
    size_t n = 0;
    const struct sbx_store_migration *m = sbxh_store_migrations(&n);
    cr_assert_eq(rows, (long long)n, "schema_version has %lld rows", rows);
    /* versions ascend and end at the build's */
    for (size_t i = 1; i < n; i++)
        cr_assert_gt(m[i].version, m[i - 1].version);
    cr_assert_eq(m[n - 1].version, SBX_STORE_SCHEMA_VERSION);
}

Test(store, a_newer_schema_is_refused)
{
    fresh_store();
    sbxh_store_close(store);
    store = NULL;
    char why[512];
    cr_assert_eq(scratch_exec(&db,
                              "INSERT INTO schema_version (version, name, applied_at) "
                              "VALUES (999, 'from the future', 0)",
                              why, sizeof why),
                 0, "%s", why);
    sbx_error err = {0};
    struct sbx_store *s = NULL;
    int rc = sbxh_store_open(STORE_TEST_DRIVER, db.target, &s, &err);
    cr_assert_eq(rc, SBX_E_CONFIG, "open gave %d: %s", rc, err.message);
    cr_assert_null(s);
    cr_assert(strstr(err.message, "999") && strstr(err.message, "newer"), "%s",
              err.message);
}

/* ------------------------------------------------------------------------ */
/* Bindings and intents                                                       */
/* ------------------------------------------------------------------------ */

/* The manifest digest and run_as of a session (session_manifests): set,
 * read back, replaced, a NULL run_as read as "", dropped. */
Test(store, manifest_digest_and_run_as_round_trip)
{
    fresh_store();
    sbx_error err = {0};
    char digest[65], run_as[SBX_USER_NAME_MAX + 1];
    bool found = true;
    cr_assert_eq(sbxh_store_get_manifest(store, "m1", digest, run_as, &found, &err), SBX_OK,
                 "%s", err.message);
    cr_assert_not(found);
    cr_assert_str_eq(run_as, "");
    cr_assert_eq(sbxh_store_set_manifest(store, "m1", "d1", "agent", &err), SBX_OK, "%s",
                 err.message);
    cr_assert_eq(sbxh_store_get_manifest(store, "m1", digest, run_as, &found, &err), SBX_OK);
    cr_assert(found);
    cr_assert_str_eq(digest, "d1");
    cr_assert_str_eq(run_as, "agent");
    /* replaced whole: a manifest without run_as leaves none behind */
    cr_assert_eq(sbxh_store_set_manifest(store, "m1", "d2", NULL, &err), SBX_OK, "%s",
                 err.message);
    cr_assert_eq(sbxh_store_get_manifest(store, "m1", digest, run_as, &found, &err), SBX_OK);
    cr_assert_str_eq(digest, "d2");
    cr_assert_str_eq(run_as, "");
    /* run_as may be left out of the read */
    cr_assert_eq(sbxh_store_get_manifest(store, "m1", digest, NULL, &found, &err), SBX_OK);
    cr_assert_eq(sbxh_store_drop_manifest(store, "m1", &err), SBX_OK);
    cr_assert_eq(sbxh_store_get_manifest(store, "m1", digest, run_as, &found, &err), SBX_OK);
    cr_assert_not(found);
}

Test(store, binding_lifecycle)
{
    fresh_store();
    sbx_error err = {0};
    struct sbx_binding b;
    struct sbx_intent in;
    struct sbx_claim c;

    cr_assert_eq(sbxh_store_get_binding(store, "s1", &b, &err), SBX_E_NOT_FOUND);
    claim_as("s1", "worker-a", &c, SBX_CLAIM_WON);
    cr_assert_str_eq(c.intent.owner, "worker-a");
    cr_assert_str_eq(c.intent.provider, "local");
    cr_assert_str_eq(c.intent.spec_hash, "spec-1");
    cr_assert_str_eq(c.intent.step, "claimed");
    cr_assert_null(c.intent.external_id);
    cr_assert_gt(c.intent.created_at, 1600000000000LL, "times are ms since the epoch");
    sbxh_claim_clear(&c);

    /* An intent is not a binding: nothing is exposed before publish. */
    cr_assert_eq(sbxh_store_get_binding(store, "s1", &b, &err), SBX_E_NOT_FOUND);
    cr_assert_eq(sbxh_store_update_intent(store, "s1", "worker-a", "created", "ws-42", &err),
                 SBX_OK, "%s", err.message);
    cr_assert_eq(sbxh_store_update_intent(store, "s1", "worker-a", "packages", NULL, &err),
                 SBX_OK, "%s", err.message);
    cr_assert_eq(sbxh_store_get_intent(store, "s1", &in, &err), SBX_OK, "%s", err.message);
    cr_assert_str_eq(in.external_id, "ws-42", "a NULL external id keeps the recorded one");
    cr_assert_str_eq(in.step, "packages");
    sbxh_intent_clear(&in);

    cr_assert_eq(sbxh_store_publish(store, "s1", "worker-a", &b, &err), SBX_OK, "%s",
                 err.message);
    cr_assert_str_eq(b.session_key, "s1");
    cr_assert_str_eq(b.provider, "local");
    cr_assert_str_eq(b.external_id, "ws-42");
    cr_assert_str_eq(b.spec_hash, "spec-1");
    cr_assert_not(b.deleting);
    sbxh_binding_clear(&b);

    cr_assert_eq(sbxh_store_get_intent(store, "s1", &in, &err), SBX_E_NOT_FOUND,
                 "publish removes the intent");
    cr_assert_eq(sbxh_store_get_binding(store, "s1", &b, &err), SBX_OK, "%s", err.message);
    cr_assert_str_eq(b.external_id, "ws-42");
    sbxh_binding_clear(&b);

    /* A later claimant finds the binding and takes no intent. */
    claim_as("s1", "worker-b", &c, SBX_CLAIM_BOUND);
    cr_assert_str_eq(c.binding.external_id, "ws-42");
    cr_assert_null(c.intent.owner);
    sbxh_claim_clear(&c);
    cr_assert_eq(sbxh_store_get_intent(store, "s1", &in, &err), SBX_E_NOT_FOUND);

    /* Publishing twice fails cleanly. */
    claim_as("s2", "worker-a", &c, SBX_CLAIM_WON);
    sbxh_claim_clear(&c);
    cr_assert_eq(sbxh_store_publish(store, "s2", "worker-a", NULL, &err), SBX_E_INVALID,
                 "publish without an external id: %s", err.message);
    cr_assert(strstr(err.message, "external id"), "%s", err.message);
    cr_assert_eq(sbxh_store_get_intent(store, "s2", &in, &err), SBX_OK,
                 "a failed publish keeps the intent");
    sbxh_intent_clear(&in);
}

Test(store, external_ids_are_unique_per_provider)
{
    fresh_store();
    sbx_error err = {0};
    struct sbx_claim c;
    struct sbx_intent in;
    struct sbx_binding b;
    bind_key("first", "docker", "c-1");

    struct sbx_claim_request req = {.session_key = "second", .provider = "docker",
                                    .owner = "w"};
    cr_assert_eq(sbxh_store_claim(store, &req, &c, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(c.outcome, SBX_CLAIM_WON);
    cr_assert_null(c.intent.spec_hash);
    sbxh_claim_clear(&c);
    cr_assert_eq(sbxh_store_update_intent(store, "second", "w", "created", "c-1", &err),
                 SBX_OK);
    int rc = sbxh_store_publish(store, "second", "w", &b, &err);
    cr_assert_eq(rc, SBX_E_EXISTS, "publish gave %d: %s", rc, err.message);
    cr_assert(strstr(err.message, "c-1") && strstr(err.message, "already bound"), "%s",
              err.message);
    cr_assert_null(b.session_key);
    cr_assert_eq(sbxh_store_get_binding(store, "second", &b, &err), SBX_E_NOT_FOUND);
    cr_assert_eq(sbxh_store_get_intent(store, "second", &in, &err), SBX_OK,
                 "the intent stays for cleanup");
    sbxh_intent_clear(&in);

    /* The same external id under another provider is a different resource. */
    bind_key("third", "local", "c-1");
    cr_assert_eq(sbxh_store_get_binding(store, "third", &b, &err), SBX_OK, "%s",
                 err.message);
    cr_assert_str_eq(b.provider, "local");
    sbxh_binding_clear(&b);
}

Test(store, only_the_owner_may_touch_an_intent)
{
    fresh_store();
    sbx_error err = {0};
    struct sbx_claim c;
    claim_as("k", "worker-a", &c, SBX_CLAIM_WON);
    sbxh_claim_clear(&c);

    /* Same owner again: still WON (re-entrant). Another owner: HELD, and it
     * learns who holds the intent. */
    claim_as("k", "worker-a", &c, SBX_CLAIM_WON);
    sbxh_claim_clear(&c);
    cr_assert_eq(sbxh_store_update_intent(store, "k", "worker-a", "created", "ws-1", &err),
                 SBX_OK);
    claim_as("k", "worker-b", &c, SBX_CLAIM_HELD);
    cr_assert_str_eq(c.intent.owner, "worker-a");
    cr_assert_str_eq(c.intent.external_id, "ws-1");
    cr_assert_geq(c.intent.age_ms, 0);
    cr_assert_lt(c.intent.age_ms, 60000);
    sbxh_claim_clear(&c);

    cr_assert_eq(sbxh_store_update_intent(store, "k", "worker-b", "x", "ws-2", &err),
                 SBX_E_DENIED);
    cr_assert(strstr(err.message, "worker-a"), "%s", err.message);
    cr_assert_null(strstr(err.message, ": k "), "raw keys stay out of messages");
    cr_assert_eq(sbxh_store_release_intent(store, "k", "worker-b", &err), SBX_E_DENIED);
    cr_assert_eq(sbxh_store_publish(store, "k", "worker-b", NULL, &err), SBX_E_DENIED);
    cr_assert_eq(sbxh_store_update_intent(store, "nope", "worker-a", "x", NULL, &err),
                 SBX_E_NOT_FOUND);
    cr_assert_eq(sbxh_store_release_intent(store, "k", "worker-a", &err), SBX_OK, "%s",
                 err.message);
    claim_as("k", "worker-b", &c, SBX_CLAIM_WON);
    sbxh_claim_clear(&c);
}

Test(store, a_stale_intent_can_be_taken_over)
{
    fresh_store();
    sbx_error err = {0};
    struct sbx_claim c;
    struct sbx_intent in;
    claim_as("k", "crashed", &c, SBX_CLAIM_WON);
    sbxh_claim_clear(&c);
    cr_assert_eq(sbxh_store_update_intent(store, "k", "crashed", "created", "ws-9", &err),
                 SBX_OK);

    int rc = sbxh_store_takeover_intent(store, "k", "reconciler", 60000, &in, &err);
    cr_assert_eq(rc, SBX_E_EXISTS, "a fresh lease is respected (%d)", rc);
    cr_assert(strstr(err.message, "crashed"), "%s", err.message);
    cr_assert_null(in.owner);
    cr_assert_eq(sbxh_store_takeover_intent(store, "k", "crashed", 60000, &in, &err), SBX_OK,
                 "the owner may always take its own intent: %s", err.message);
    sbxh_intent_clear(&in);

    usleep(400 * 1000);
    cr_assert_eq(sbxh_store_takeover_intent(store, "k", "reconciler", 250, &in, &err), SBX_OK,
                 "%s", err.message);
    cr_assert_str_eq(in.owner, "reconciler");
    cr_assert_str_eq(in.external_id, "ws-9", "the taker learns what was left behind");
    cr_assert_str_eq(in.step, "created");
    cr_assert_lt(in.age_ms, 250);
    sbxh_intent_clear(&in);

    /* The previous owner has lost it. */
    cr_assert_eq(sbxh_store_update_intent(store, "k", "crashed", "x", NULL, &err),
                 SBX_E_DENIED);
    cr_assert_eq(sbxh_store_publish(store, "k", "crashed", NULL, &err), SBX_E_DENIED);
    cr_assert_eq(sbxh_store_publish(store, "k", "reconciler", NULL, &err), SBX_OK, "%s",
                 err.message);
    cr_assert_eq(sbxh_store_takeover_intent(store, "k", "reconciler", 0, &in, &err),
                 SBX_E_NOT_FOUND);
}

/* ------------------------------------------------------------------------ */
/* Fencing and deletion                                                       */
/* ------------------------------------------------------------------------ */

Test(store, fencing_refuses_admissions_until_removed)
{
    fresh_store();
    sbx_error err = {0};
    struct sbx_claim c;
    struct sbx_binding b;
    struct sbx_intent in;
    struct sbx_key_page page;
    bind_key("victim", "local", "ws-v");
    claim_as("inflight", "worker-a", &c, SBX_CLAIM_WON);
    sbxh_claim_clear(&c);
    cr_assert_eq(sbxh_store_update_intent(store, "inflight", "worker-a", "created", "ws-i",
                                          &err),
                 SBX_OK);

    cr_assert_eq(sbxh_store_fence(store, "victim", &err), SBX_OK, "%s", err.message);
    cr_assert_eq(sbxh_store_fence(store, "victim", &err), SBX_OK, "fencing is idempotent");
    cr_assert_eq(sbxh_store_get_binding(store, "victim", &b, &err), SBX_OK);
    cr_assert(b.deleting, "a fenced binding reads back as deleting");
    sbxh_binding_clear(&b);

    struct sbx_claim_request req = {.session_key = "victim", .provider = "local",
                                    .owner = "worker-b"};
    cr_assert_eq(sbxh_store_claim(store, &req, &c, &err), SBX_E_DENIED);
    cr_assert(strstr(err.message, "being deleted"), "%s", err.message);
    cr_assert_null(strstr(err.message, "victim"), "raw key in: %s", err.message);

    /* A worker mid-provisioning cannot publish into a fenced session. */
    cr_assert_eq(sbxh_store_fence(store, "inflight", &err), SBX_OK);
    cr_assert_eq(sbxh_store_publish(store, "inflight", "worker-a", NULL, &err),
                 SBX_E_DENIED);
    cr_assert_eq(sbxh_store_get_binding(store, "inflight", &b, &err), SBX_E_NOT_FOUND);

    cr_assert_eq(sbxh_store_list_deleting(store, NULL, 1, &page, &err), SBX_OK);
    cr_assert_eq(page.count, 1);
    cr_assert_str_eq(page.keys[0], "inflight");
    cr_assert(page.more);
    sbxh_key_page_free(&page);
    cr_assert_eq(sbxh_store_list_deleting(store, "inflight", 1, &page, &err), SBX_OK);
    cr_assert_eq(page.count, 1);
    cr_assert_str_eq(page.keys[0], "victim");
    cr_assert_not(page.more);
    sbxh_key_page_free(&page);

    /* The intent's resource must be dealt with before the row goes. */
    cr_assert_eq(sbxh_store_remove_session(store, "inflight", &err), SBX_E_UNAVAILABLE);
    cr_assert(strstr(err.message, "worker-a"), "%s", err.message);
    cr_assert_eq(sbxh_store_takeover_intent(store, "inflight", "reaper", 0, &in, &err),
                 SBX_OK, "takeover works on fenced sessions: %s", err.message);
    cr_assert_str_eq(in.external_id, "ws-i");
    sbxh_intent_clear(&in);
    cr_assert_eq(sbxh_store_release_intent(store, "inflight", "reaper", &err), SBX_OK);
    cr_assert_eq(sbxh_store_remove_session(store, "inflight", &err), SBX_OK, "%s",
                 err.message);
    cr_assert_eq(sbxh_store_remove_session(store, "victim", &err), SBX_OK, "%s",
                 err.message);

    cr_assert_eq(sbxh_store_get_binding(store, "victim", &b, &err), SBX_E_NOT_FOUND);
    cr_assert_eq(sbxh_store_list_deleting(store, NULL, 10, &page, &err), SBX_OK);
    cr_assert_eq(page.count, 0);
    sbxh_key_page_free(&page);
    cr_assert_eq(sbxh_store_remove_session(store, "victim", &err), SBX_E_NOT_FOUND);
    cr_assert_eq(sbxh_store_fence(store, "never-existed", &err), SBX_E_NOT_FOUND);

    /* After removal the key starts a new life. */
    claim_as("victim", "worker-b", &c, SBX_CLAIM_WON);
    sbxh_claim_clear(&c);
    cr_assert_eq(sbxh_store_remove_session(store, "victim", &err), SBX_E_DENIED,
                 "an unfenced session is not removed");
}

/* ------------------------------------------------------------------------ */
/* Listing                                                                    */
/* ------------------------------------------------------------------------ */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

Test(store, bindings_list_in_byte_order_in_pages)
{
    fresh_store();
    /* Mixed case, digits, punctuation and UTF-8: byte order must be the same
     * on both drivers. */
    const char *keys[] = {"b", "a", "B", "Z", "k-10", "k-9", "k 1", "~tilde",
                          "\xc3\xa9t\xc3\xa9", "0", "zz", "Alpha", "alpha", "a/b",
                          "session-017", "session-002", "session-100", "_x", "-y",
                          "\xe2\x98\x83", "m", "n", "o", "p", "q"};
    const size_t n = sizeof keys / sizeof keys[0];
    for (size_t i = 0; i < n; i++) {
        char ext[32];
        snprintf(ext, sizeof ext, "ws-%zu", i);
        bind_key(keys[i], i % 2 ? "docker" : "local", ext);
    }
    /* An intent without binding is not listed as a binding. */
    struct sbx_claim c;
    claim_as("a-pending", "w", &c, SBX_CLAIM_WON);
    sbxh_claim_clear(&c);

    const char *sorted[sizeof keys / sizeof keys[0]];
    memcpy(sorted, keys, sizeof keys);
    qsort(sorted, n, sizeof sorted[0], cmp_str);

    sbx_error err = {0};
    size_t seen = 0, pages = 0;
    char *cursor = NULL;
    for (;;) {
        struct sbx_binding_page page;
        cr_assert_eq(sbxh_store_list_bindings(store, cursor, 7, &page, &err), SBX_OK, "%s",
                     err.message);
        pages++;
        for (size_t i = 0; i < page.count; i++, seen++) {
            cr_assert_lt(seen, n);
            cr_assert_str_eq(page.items[i].session_key, sorted[seen], "position %zu",
                             seen);
            size_t orig = 0;
            while (strcmp(keys[orig], sorted[seen]) != 0)
                orig++;
            char ext[32];
            snprintf(ext, sizeof ext, "ws-%zu", orig);
            cr_assert_str_eq(page.items[i].external_id, ext);
            cr_assert_str_eq(page.items[i].provider, orig % 2 ? "docker" : "local");
        }
        bool more = page.more;
        cr_assert_eq(page.count, more ? 7u : n % 7, "page %zu has %zu items", pages,
                     page.count);
        free(cursor);
        cursor = page.count ? strdup(page.items[page.count - 1].session_key) : NULL;
        sbxh_binding_page_free(&page);
        if (!more)
            break;
    }
    free(cursor);
    cr_assert_eq(seen, n);
    cr_assert_eq(pages, (n + 6) / 7);

    /* Exact fits: a page holding everything has no `more`. */
    struct sbx_binding_page page;
    cr_assert_eq(sbxh_store_list_bindings(store, NULL, n, &page, &err), SBX_OK);
    cr_assert_eq(page.count, n);
    cr_assert_not(page.more);
    sbxh_binding_page_free(&page);
    cr_assert_eq(sbxh_store_list_bindings(store, NULL, n - 1, &page, &err), SBX_OK);
    cr_assert(page.more);
    sbxh_binding_page_free(&page);
    cr_assert_eq(sbxh_store_list_bindings(store, sorted[n - 1], 5, &page, &err), SBX_OK);
    cr_assert_eq(page.count, 0);
    cr_assert_not(page.more);
    sbxh_binding_page_free(&page);
}

Test(store, intents_list_for_the_reconciler)
{
    fresh_store();
    sbx_error err = {0};
    struct sbx_claim c;
    const char *keys[] = {"e", "c", "a", "d", "b"};
    for (size_t i = 0; i < 5; i++) {
        claim_as(keys[i], "worker", &c, SBX_CLAIM_WON);
        sbxh_claim_clear(&c);
    }
    cr_assert_eq(sbxh_store_update_intent(store, "c", "worker", "created", "ws-c", &err),
                 SBX_OK);
    bind_key("bound", "local", "ws-b");

    struct sbx_intent_page page;
    cr_assert_eq(sbxh_store_list_intents(store, NULL, 2, &page, &err), SBX_OK, "%s",
                 err.message);
    cr_assert_eq(page.count, 2);
    cr_assert(page.more);
    cr_assert_str_eq(page.items[0].session_key, "a");
    cr_assert_str_eq(page.items[1].session_key, "b");
    sbxh_intent_page_free(&page);
    cr_assert_eq(sbxh_store_list_intents(store, "b", 2, &page, &err), SBX_OK);
    cr_assert_str_eq(page.items[0].session_key, "c");
    cr_assert_str_eq(page.items[0].external_id, "ws-c");
    cr_assert_str_eq(page.items[0].step, "created");
    cr_assert_str_eq(page.items[0].owner, "worker");
    cr_assert_geq(page.items[0].age_ms, 0);
    cr_assert_str_eq(page.items[1].session_key, "d");
    cr_assert(page.more);
    sbxh_intent_page_free(&page);
    cr_assert_eq(sbxh_store_list_intents(store, "d", 2, &page, &err), SBX_OK);
    cr_assert_eq(page.count, 1, "published intents are gone");
    cr_assert_str_eq(page.items[0].session_key, "e");
    cr_assert_not(page.more);
    sbxh_intent_page_free(&page);
}

/* ------------------------------------------------------------------------ */
/* Concurrency                                                                */
/* ------------------------------------------------------------------------ */

#define RACERS 8

/* Fork RACERS processes that wait at a common start line, then each open
 * the store (possibly creating its schema) and claim `key`. Each reports
 * "index outcome holder" through a pipe; fills outcome[] (an
 * sbx_claim_outcome per racer) and holder[] (the intent owner it saw, or the
 * bound external id). */
static void race(const char *key, int outcome[RACERS], char holder[RACERS][64])
{
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
            char c;
            while (read(go[0], &c, 1) > 0) /* EOF is the start signal */
                ;
            char line[1024];
            char owner[32];
            snprintf(owner, sizeof owner, "racer-%d", i);
            sbx_error err = {0};
            struct sbx_store *s = NULL;
            int rc = sbxh_store_open(STORE_TEST_DRIVER, db.target, &s, &err);
            struct sbx_claim cl = {0};
            if (rc == SBX_OK) {
                struct sbx_claim_request req = {.session_key = key, .provider = "local",
                                                .owner = owner};
                rc = sbxh_store_claim(s, &req, &cl, &err);
            }
            if (rc == SBX_OK)
                snprintf(line, sizeof line, "%d %d %s\n", i, cl.outcome,
                         cl.outcome == SBX_CLAIM_BOUND ? cl.binding.external_id
                                                       : cl.intent.owner);
            else
                snprintf(line, sizeof line, "%d -%d %.900s\n", i, rc, err.message);
            sbxh_claim_clear(&cl);
            sbxh_store_close(s);
            ssize_t w = write(res[1], line, strlen(line)); /* < PIPE_BUF: atomic */
            _exit(w > 0 ? 0 : 1);
        }
    }
    close(go[0]);
    close(res[1]);
    close(go[1]); /* start */

    FILE *f = fdopen(res[0], "r");
    cr_assert_not_null(f);
    for (int i = 0; i < RACERS; i++)
        outcome[i] = 0;
    char line[1100];
    while (fgets(line, sizeof line, f)) {
        int idx = -1, out = 0, used = 0;
        cr_assert_eq(sscanf(line, "%d %d %n", &idx, &out, &used), 2, "bad report %s", line);
        cr_assert(idx >= 0 && idx < RACERS);
        cr_assert_gt(out, 0, "racer %d failed: %s", idx, line + used);
        outcome[idx] = out;
        snprintf(holder[idx], 64, "%.*s", (int)strcspn(line + used, "\n"), line + used);
    }
    fclose(f);
    for (int i = 0; i < RACERS; i++) {
        int status = 0;
        cr_assert_eq(waitpid(pids[i], &status, 0), pids[i]);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "racer %d died", i);
        cr_assert_neq(outcome[i], 0, "racer %d did not report", i);
    }
}

Test(store, exactly_one_of_eight_racing_processes_wins_the_claim)
{
    /* The racers open an empty database: migrations race too. */
    fresh_db();
    int outcome[RACERS];
    char holder[RACERS][64];
    race("contested", outcome, holder);

    int winner = -1, held = 0;
    for (int i = 0; i < RACERS; i++) {
        if (outcome[i] == SBX_CLAIM_WON) {
            cr_assert_eq(winner, -1, "two winners: racer %d and %d", winner, i);
            winner = i;
        } else {
            cr_assert_eq(outcome[i], SBX_CLAIM_HELD, "racer %d: outcome %d", i, outcome[i]);
            held++;
        }
    }
    cr_assert_neq(winner, -1, "nobody won");
    cr_assert_eq(held, RACERS - 1);
    char wname[32];
    snprintf(wname, sizeof wname, "racer-%d", winner);
    for (int i = 0; i < RACERS; i++)
        cr_assert_str_eq(holder[i], wname, "racer %d saw holder %s", i, holder[i]);

    store = open_store();
    sbx_error err = {0};
    struct sbx_intent in;
    cr_assert_eq(sbxh_store_get_intent(store, "contested", &in, &err), SBX_OK, "%s",
                 err.message);
    cr_assert_str_eq(in.owner, wname);
    sbxh_intent_clear(&in);

    /* Once published, every racer finds the binding. */
    cr_assert_eq(sbxh_store_update_intent(store, "contested", wname, "created", "ws-win",
                                          &err),
                 SBX_OK);
    cr_assert_eq(sbxh_store_publish(store, "contested", wname, NULL, &err), SBX_OK, "%s",
                 err.message);
    race("contested", outcome, holder);
    for (int i = 0; i < RACERS; i++) {
        cr_assert_eq(outcome[i], SBX_CLAIM_BOUND, "racer %d: outcome %d", i, outcome[i]);
        cr_assert_str_eq(holder[i], "ws-win");
    }
}

Test(store, a_lock_held_too_long_is_unavailable_not_a_hang)
{
    fresh_store();
    sbxh_store_close(store);
    struct sbx_store_options opts = {.size = sizeof opts, .lock_timeout_ms = 300};
    sbx_error err = {0};
    cr_assert_eq(sbxh_store_open_with(STORE_TEST_DRIVER, db.target, &opts, &store, &err),
                 SBX_OK, "%s", err.message);
    bind_key("readable", "local", "ws-r");

    char why[512];
    void *lock = scratch_lock(&db, why, sizeof why);
    cr_assert_not_null(lock, "%s", why);
    struct sbx_claim_request req = {.session_key = "blocked", .provider = "local",
                                    .owner = "w"};
    struct sbx_claim c;
    int64_t t0 = mono_ms();
    int rc = sbxh_store_claim(store, &req, &c, &err);
    int64_t waited = mono_ms() - t0;
    /* Reads go on while a writer holds the lock. */
    struct sbx_binding b;
    sbx_error rerr = {0};
    int read_rc = sbxh_store_get_binding(store, "readable", &b, &rerr);
    sbxh_binding_clear(&b);
    scratch_unlock(lock);

    cr_assert_eq(rc, SBX_E_UNAVAILABLE, "claim under lock gave %d: %s", rc, err.message);
    cr_assert(strstr(err.message, "lock"), "%s", err.message);
    cr_assert_geq(waited, 250, "waited only %lld ms", (long long)waited);
    cr_assert_lt(waited, 5000, "waited %lld ms", (long long)waited);
    cr_assert_eq(read_rc, SBX_OK, "read under a write lock: %s", rerr.message);

    cr_assert_eq(sbxh_store_claim(store, &req, &c, &err), SBX_OK, "after unlock: %s",
                 err.message);
    cr_assert_eq(c.outcome, SBX_CLAIM_WON);
    sbxh_claim_clear(&c);
}

/* ------------------------------------------------------------------------ */
/* Bad input                                                                  */
/* ------------------------------------------------------------------------ */

Test(store, bad_arguments_are_named)
{
    fresh_store();
    sbx_error err = {0};
    struct sbx_claim c;
    struct sbx_claim_request req = {.session_key = "", .provider = "local", .owner = "w"};
    cr_assert_eq(sbxh_store_claim(store, &req, &c, &err), SBX_E_INVALID);
    cr_assert(strstr(err.message, "session key"), "%s", err.message);
    req.session_key = "k";
    req.provider = NULL;
    cr_assert_eq(sbxh_store_claim(store, &req, &c, &err), SBX_E_INVALID);
    cr_assert(strstr(err.message, "provider"), "%s", err.message);
    req.provider = "local";
    char long_owner[SBX_STORE_NAME_MAX + 2];
    memset(long_owner, 'o', sizeof long_owner - 1);
    long_owner[sizeof long_owner - 1] = '\0';
    req.owner = long_owner;
    cr_assert_eq(sbxh_store_claim(store, &req, &c, &err), SBX_E_INVALID);
    cr_assert(strstr(err.message, "owner is longer"), "%s", err.message);

    struct sbx_binding_page page;
    cr_assert_eq(sbxh_store_list_bindings(store, NULL, 0, &page, &err), SBX_E_INVALID);
    cr_assert(strstr(err.message, "page size"), "%s", err.message);
    cr_assert_eq(sbxh_store_list_bindings(store, NULL, SBX_STORE_PAGE_MAX + 1, &page, &err),
                 SBX_E_INVALID);
    cr_assert_eq(sbxh_store_update_intent(store, "k", "w", "", NULL, &err), SBX_E_INVALID);
    cr_assert(strstr(err.message, "step"), "%s", err.message);
    struct sbx_intent in;
    cr_assert_eq(sbxh_store_takeover_intent(store, "k", "w", -1, &in, &err), SBX_E_INVALID);

    struct sbx_store *s = NULL;
    cr_assert_eq(sbxh_store_open("mysql", db.target, &s, &err), SBX_E_CONFIG);
    cr_assert(strstr(err.message, "mysql") && strstr(err.message, "sqlite or postgres"),
              "%s", err.message);
    cr_assert_eq(sbxh_store_open(STORE_TEST_DRIVER, "", &s, &err), SBX_E_INVALID);
    cr_assert_null(s);

    char a[128], b[128];
    sbxh_store_owner_token(a, sizeof a);
    sbxh_store_owner_token(b, sizeof b);
    cr_assert_str_neq(a, b, "owner tokens are unique");
}

#ifdef STORE_TEST_PG

/* A TCP port on 127.0.0.1 that nothing listens on. */
static int closed_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(fd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t len = sizeof a;
    cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

Test(store, pg_unreachable_server_is_unavailable_and_hides_the_password)
{
    int port = closed_port();
    char dsns[2][256];
    snprintf(dsns[0], sizeof dsns[0],
             "host=127.0.0.1 port=%d user=sbx password=secret dbname=sbx "
             "connect_timeout=3",
             port);
    snprintf(dsns[1], sizeof dsns[1], "postgresql://sbx:secret@127.0.0.1:%d/sbx", port);
    for (int i = 0; i < 2; i++) {
        sbx_error err = {0};
        struct sbx_store *s = NULL;
        int rc = sbxh_store_open("postgres", dsns[i], &s, &err);
        cr_assert_eq(rc, SBX_E_UNAVAILABLE, "%s gave %d: %s", i ? "URI" : "DSN", rc,
                     err.message);
        cr_assert_null(s);
        cr_assert(strstr(err.message, "127.0.0.1") && strstr(err.message, "connect"),
                  "the message names the server: %s", err.message);
        cr_assert_null(strstr(err.message, "secret"), "password leaked: %s", err.message);
    }
}

Test(store, pg_malformed_dsn_is_a_config_error_without_the_password)
{
    const char *bad[] = {
        "host=127.0.0.1 password=secret port",
        "host=127.0.0.1 password='secret",
        "postgresql://sbx:secret@[::1/sbx",
        "postgresql://sbx:secret@127.0.0.1/sbx?password=secret&=x",
        "host=127.0.0.1 secret",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sbx_error err = {0};
        struct sbx_store *s = NULL;
        int rc = sbxh_store_open("postgres", bad[i], &s, &err);
        cr_assert_eq(rc, SBX_E_CONFIG, "case %zu gave %d: %s", i, rc, err.message);
        cr_assert(strstr(err.message, "invalid connection string"), "%s", err.message);
        cr_assert_null(strstr(err.message, "secret"), "case %zu leaked: %s", i,
                       err.message);
    }
    /* A mistyped option is named, its value is not. */
    sbx_error err = {0};
    struct sbx_store *s = NULL;
    cr_assert_eq(sbxh_store_open("postgres", "host=127.0.0.1 passwrd=secret", &s, &err),
                 SBX_E_CONFIG);
    cr_assert(strstr(err.message, "\"passwrd\""), "%s", err.message);
    cr_assert_null(strstr(err.message, "secret"), "%s", err.message);
}

Test(store, pg_lost_connection_is_unavailable_then_recovers)
{
    fresh_store();
    bind_key("k", "local", "ws-1");
    char why[512];
    /* What a server restart or a failover does to an open connection. */
    cr_assert_eq(scratch_exec(&db,
                              "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                              "WHERE datname = current_database() "
                              "AND pid <> pg_backend_pid()",
                              why, sizeof why),
                 0, "%s", why);
    sbx_error err = {0};
    struct sbx_binding b;
    int rc = sbxh_store_get_binding(store, "k", &b, &err);
    cr_assert_eq(rc, SBX_E_UNAVAILABLE, "gave %d: %s", rc, err.message);
    cr_assert(strstr(err.message, "connection") || strstr(err.message, "terminat"), "%s",
              err.message);
    rc = sbxh_store_get_binding(store, "k", &b, &err);
    cr_assert_eq(rc, SBX_OK, "the next call reconnects: %s", err.message);
    cr_assert_str_eq(b.external_id, "ws-1");
    sbxh_binding_clear(&b);
}

Test(store, pg_password_in_dsn_never_reaches_messages)
{
    fresh_db();
    /* The test server trusts local connections, so the password is sent
     * nowhere; it must still not appear in any label or message. */
    char *dsn = NULL;
    cr_assert_geq(asprintf(&dsn, "%s password=hunter2-secret", db.target), 0);
    sbx_error err = {0};
    cr_assert_eq(sbxh_store_open("postgres", dsn, &store, &err), SBX_OK, "%s", err.message);
    free(dsn);
    struct sbx_binding b;
    cr_assert_eq(sbxh_store_get_binding(store, "absent", &b, &err), SBX_E_NOT_FOUND);
    cr_assert(strstr(err.message, "postgres store host=") && strstr(err.message, "dbname="),
              "messages name the store: %s", err.message);
    cr_assert_null(strstr(err.message, "hunter2"), "%s", err.message);
}

#else /* sqlite */

Test(store, sqlite_missing_directory_is_named)
{
    sbx_error err = {0};
    struct sbx_store *s = NULL;
    int rc = sbxh_store_open("sqlite", "/nonexistent-sbx-dir/sub/sbx.db", &s, &err);
    cr_assert_eq(rc, SBX_E_IO, "gave %d: %s", rc, err.message);
    cr_assert_null(s);
    cr_assert(strstr(err.message, "/nonexistent-sbx-dir/sub"), "%s", err.message);
}

Test(store, sqlite_file_that_is_not_a_database_is_refused)
{
    fresh_db();
    FILE *f = fopen(db.target, "w");
    cr_assert_not_null(f);
    for (int i = 0; i < 200; i++)
        fputs("this is not an sqlite database\n", f);
    fclose(f);
    sbx_error err = {0};
    struct sbx_store *s = NULL;
    int rc = sbxh_store_open("sqlite", db.target, &s, &err);
    cr_assert_eq(rc, SBX_E_IO, "gave %d: %s", rc, err.message);
    cr_assert(strstr(err.message, "not a database"), "%s", err.message);
}

#endif
