/*
 * test_sessions_api.c - the session manager's C API where the CLI does not
 * reach: listing page by page past one page, what acquire reports,
 * argument checks, spec hashes and package parsing, threads of one manager,
 * and (through the internal header) intents planted in the store.
 */
#include <sbx/manifest.h>
#include <sbx/session.h>

#include "scratch_db.h"
#include "base/process_id.h"
#include "sessions/internal.h"

#include <criterion/criterion.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct api_env {
    char dir[PATH_MAX];
    struct scratch_db db;
    sbx_ctx *ctx;
    sbx_sessions *m;
};

static void api_open(struct api_env *a)
{
    memset(a, 0, sizeof *a);
    snprintf(a->dir, sizeof a->dir, "/tmp/sbx-session-api-XXXXXX");
    cr_assert_not_null(mkdtemp(a->dir));
    char why[512] = "";
    cr_assert_eq(scratch_create("sqlite", &a->db, why, sizeof why), SCRATCH_OK, "%s",
                 why);
    char cfg[PATH_MAX + 16];
    snprintf(cfg, sizeof cfg, "%s/sbx.yaml", a->dir);
    FILE *f = fopen(cfg, "w");
    cr_assert_not_null(f);
    fprintf(f, "default_provider: local\nproviders:\n  local:\n    root: %s/ws\n",
            a->dir);
    fclose(f);
    struct sbx_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.config_path = cfg;
    o.plugin_path = SBX_TEST_PROVIDER_DIR;
    o.ignore_environment = true;
    sbx_error err;
    cr_assert_eq(sbx_open(&o, &a->ctx, &err), SBX_OK, "%s", err.message);
    struct sbx_sessions_options so;
    memset(&so, 0, sizeof so);
    so.size = sizeof so;
    so.store_driver = a->db.driver;
    so.store_target = a->db.target;
    so.ignore_environment = true;
    cr_assert_eq(sbx_sessions_open(a->ctx, &so, &a->m, &err), SBX_OK, "%s",
                 err.message);
    cr_assert_str_eq(sbx_sessions_store_driver(a->m), "sqlite");
}

static int rm_entry(const char *p, const struct stat *st, int fl, struct FTW *ftw)
{
    (void)st;
    (void)fl;
    (void)ftw;
    remove(p);
    return 0;
}

static void api_close(struct api_env *a)
{
    sbx_sessions_close(a->m);
    sbx_close(a->ctx);
    scratch_destroy(&a->db);
    nftw(a->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

struct collect {
    size_t n;
    char last[64];
    bool ordered;
};

static int on_info(void *ud, const struct sbx_session_info *i)
{
    struct collect *c = ud;
    if (c->n && strcmp(c->last, i->session_key) >= 0)
        c->ordered = false;
    snprintf(c->last, sizeof c->last, "%s", i->session_key);
    c->n++;
    return 0;
}

Test(sessions_api, list_pages_through_every_binding, .timeout = 120)
{
    struct api_env a;
    api_open(&a);
    sbx_error err;
    const size_t total = 205;
    for (size_t i = 0; i < total; i++) {
        char key[32];
        snprintf(key, sizeof key, "key-%04zu", i);
        sbx_handle *h;
        struct sbx_acquire_info info;
        info.size = sizeof info;
        cr_assert_eq(sbx_session_acquire(a.m, key, NULL, NULL, &h, &info, &err),
                     SBX_OK, "%s", err.message);
        cr_assert(info.created);
        cr_assert_str_eq(info.provider, "local");
        sbx_release(h);
    }
    struct collect c = {0, "", true};
    bool more = true;
    size_t pages = 0;
    while (more) {
        cr_assert_eq(sbx_session_list(a.m, c.n ? c.last : NULL, 100, on_info, &c,
                                      &more, &err),
                     SBX_OK, "%s", err.message);
        pages++;
    }
    cr_assert_eq(c.n, total);
    cr_assert(c.ordered, "not in key order");
    cr_assert_eq(pages, 3);
    cr_assert_eq(sbx_session_list(a.m, NULL, 1001, on_info, &c, &more, &err),
                 SBX_E_INVALID, "a page over the limit was accepted");
    api_close(&a);
}

Test(sessions_api, acquire_reports_what_it_did)
{
    struct api_env a;
    api_open(&a);
    sbx_error err;
    sbx_handle *h;
    struct sbx_acquire_info info;
    info.size = sizeof info;
    struct sbx_session_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.size = sizeof spec;
    cr_assert_eq(sbx_session_acquire(a.m, "k", &spec, NULL, &h, &info, &err), SBX_OK,
                 "%s", err.message);
    cr_assert(info.created);
    cr_assert_not(info.spec_changed);
    char want[SBX_KEY_HASH_LEN + 1];
    cr_assert_eq(sbx_session_spec_hash(&spec, want, &err), SBX_OK);
    cr_assert_str_eq(info.recorded_spec_hash, want);
    sbx_release(h);

    /* Same spec: attached, not created. */
    cr_assert_eq(sbx_session_acquire(a.m, "k", &spec, NULL, &h, &info, &err), SBX_OK);
    cr_assert_not(info.created);
    cr_assert_not(info.spec_changed);
    sbx_release(h);
    /* Another spec: reported, not applied; NULL: no check. */
    spec.caps = SBX_CAP_OUTPUT_EXPORT;
    cr_assert_eq(sbx_session_acquire(a.m, "k", &spec, NULL, &h, &info, &err), SBX_OK);
    cr_assert(info.spec_changed);
    cr_assert_str_eq(info.recorded_spec_hash, want);
    sbx_release(h);
    cr_assert_eq(sbx_session_acquire(a.m, "k", NULL, NULL, &h, &info, &err), SBX_OK);
    cr_assert_not(info.spec_changed);
    sbx_release(h);

    cr_assert_eq(sbx_session_attach(a.m, "other", NULL, &h, &err), SBX_E_NOT_FOUND);
    cr_assert(strstr(err.message, "has no sandbox"), "%s", err.message);
    cr_assert_eq(sbx_session_delete(a.m, "other", NULL, &err), SBX_E_NOT_FOUND);
    cr_assert_eq(sbx_session_acquire(a.m, "", NULL, NULL, &h, NULL, &err),
                 SBX_E_INVALID);
    cr_assert_eq(sbx_session_delete(a.m, "k", NULL, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(sbx_session_attach(a.m, "k", NULL, &h, &err), SBX_E_NOT_FOUND);

    struct sbx_reconcile_report rep;
    cr_assert_eq(sbx_sessions_reconcile(a.m, 0, NULL, &rep, &err), SBX_OK);
    cr_assert_eq(rep.intents_seen, 0);
    cr_assert_eq(rep.failures, 0);
    api_close(&a);
}

/* local has no SBX_CAP_USERS: a manifest with users is refused at
 * admission with nothing provisioned, and a handle cannot act as a user. */
Test(sessions_api, users_need_the_capability)
{
    struct api_env a;
    api_open(&a);
    sbx_error err;
    sbx_manifest *mf;
    static const char text[] = "version: 1\ngroups: [{name: dev}]\n"
                               "users: [{name: agent, groups: [dev]}]\nrun_as: agent\n";
    cr_assert_eq(sbx_manifest_parse(a.ctx, text, sizeof text - 1, "m.yaml", NULL, &mf, &err),
                 SBX_OK, "%s", err.message);
    cr_assert_str_eq(sbx_manifest_run_as(mf), "agent");
    struct sbx_session_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.size = sizeof spec;
    spec.manifest = mf;
    sbx_handle *h = NULL;
    cr_assert_eq(sbx_session_acquire(a.m, "u", &spec, NULL, &h, NULL, &err),
                 SBX_E_UNSUPPORTED);
    cr_assert(strstr(err.message, "provider \"local\" lacks capability users"), "%s",
              err.message);
    cr_assert_null(h);
    struct sbx_session_state st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    cr_assert_eq(sbx_session_state(a.m, "u", &st, &err), SBX_E_NOT_FOUND);
    char ws[PATH_MAX + 8];
    snprintf(ws, sizeof ws, "%s/ws", a.dir);
    struct stat sb;
    cr_assert(stat(ws, &sb) != 0 || sb.st_nlink == 2, "something was provisioned");

    /* a handle of a session without users: set_user and the ops refused */
    spec.manifest = NULL;
    cr_assert_eq(sbx_session_acquire(a.m, "plain", &spec, NULL, &h, NULL, &err), SBX_OK,
                 "%s", err.message);
    cr_assert_eq(sbx_handle_set_user(h, "agent", &err), SBX_E_UNSUPPORTED);
    cr_assert(strstr(err.message, "lacks capability users"), "%s", err.message);
    cr_assert_null(sbx_handle_user(h));
    cr_assert_eq(sbx_handle_set_user(h, NULL, &err), SBX_OK, "back to the default");
    struct sbx_group_spec g = {sizeof g, 0, "dev"};
    cr_assert_eq(sbx_group_add(h, &g, NULL, &err), SBX_E_UNSUPPORTED);
    struct sbx_user_spec u = {sizeof u, 0, "agent", NULL, NULL};
    cr_assert_eq(sbx_user_add(h, &u, NULL, &err), SBX_E_UNSUPPORTED);
    /* and the manifest itself refuses to apply there, before writing */
    cr_assert_eq(sbx_manifest_apply(h, mf, NULL, &err), SBX_E_UNSUPPORTED);
    cr_assert(strstr(err.message, "capability \"users\""), "%s", err.message);
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    cr_assert_eq(sbx_session_state(a.m, "plain", &st, &err), SBX_OK, "%s", err.message);
    cr_assert_str_eq(st.run_as, "");
    sbx_release(h);
    sbx_manifest_free(mf);
    api_close(&a);
}

Test(sessions_api, spec_hash_and_packages)
{
    sbx_error err;
    struct sbx_package pkgs[2];
    cr_assert_eq(sbx_package_parse("pip:requests==2.31.0", &pkgs[0], &err), SBX_OK);
    cr_assert_eq(pkgs[0].manager, SBX_PKG_PIP);
    cr_assert_str_eq(pkgs[0].name, "requests==2.31.0");
    cr_assert_eq(sbx_package_parse("go:golang.org/x/tools/cmd/goimports@v0.20.0",
                                   &pkgs[1], &err), SBX_OK);
    cr_assert_eq(pkgs[1].manager, SBX_PKG_GO);
    cr_assert_eq(sbx_package_parse("requests", &pkgs[0], &err), SBX_E_INVALID);
    cr_assert(strstr(err.message, "MANAGER:NAME"), "%s", err.message);
    cr_assert_eq(sbx_package_parse("apt:", &pkgs[0], &err), SBX_E_INVALID);
    cr_assert_eq(sbx_package_parse("apt:a b", &pkgs[0], &err), SBX_E_INVALID);
    cr_assert_eq(sbx_package_parse("npm:-g", &pkgs[0], &err), SBX_E_INVALID);
    cr_assert_str_eq(sbx_package_manager_name(SBX_PKG_CARGO), "cargo");
    cr_assert_null(sbx_package_manager_name(99));

    struct sbx_session_spec a, b;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    b = a;
    char ha[SBX_KEY_HASH_LEN + 1], hb[SBX_KEY_HASH_LEN + 1], hn[SBX_KEY_HASH_LEN + 1];
    struct sbx_package x[2] = {{SBX_PKG_PIP, "a"}, {SBX_PKG_APT, "b"}};
    struct sbx_package y[2] = {{SBX_PKG_APT, "b"}, {SBX_PKG_PIP, "a"}};
    a.packages = x;
    a.npackages = 2;
    b.packages = y;
    b.npackages = 2;
    cr_assert_eq(sbx_session_spec_hash(&a, ha, &err), SBX_OK);
    cr_assert_eq(sbx_session_spec_hash(&b, hb, &err), SBX_OK);
    cr_assert_str_neq(ha, hb, "installation order is part of the spec");
    cr_assert_eq(sbx_session_spec_hash(NULL, hn, &err), SBX_OK);
    b.npackages = 0;
    b.provider = "docker"; /* not part of the hash */
    cr_assert_eq(sbx_session_spec_hash(&b, hb, &err), SBX_OK);
    cr_assert_str_eq(hn, hb);
    struct sbx_package bad = {SBX_PKG_PIP, "--index-url=http://evil"};
    a.packages = &bad;
    a.npackages = 1;
    cr_assert_eq(sbx_session_spec_hash(&a, ha, &err), SBX_E_INVALID);
}

/* Threads of one manager share its owner token; they still end with one
 * sandbox, created once. */
struct racer {
    sbx_sessions *m;
    int rc;
    bool created;
    char message[SBX_ERROR_MAX];
};

static void *race_thread(void *ud)
{
    struct racer *r = ud;
    sbx_handle *h = NULL;
    struct sbx_acquire_info info;
    info.size = sizeof info;
    sbx_error err;
    r->rc = sbx_session_acquire(r->m, "threaded", NULL, NULL, &h, &info, &err);
    r->created = r->rc == SBX_OK && info.created;
    snprintf(r->message, sizeof r->message, "%s", err.message);
    sbx_release(h);
    return NULL;
}

Test(sessions_api, threads_of_one_manager)
{
    struct api_env a;
    api_open(&a);
    pthread_t t[8];
    struct racer r[8];
    for (int i = 0; i < 8; i++) {
        r[i] = (struct racer){a.m, -1, false, ""};
        cr_assert_eq(pthread_create(&t[i], NULL, race_thread, &r[i]), 0);
    }
    int created = 0;
    for (int i = 0; i < 8; i++) {
        pthread_join(t[i], NULL);
        cr_assert_eq(r[i].rc, SBX_OK, "thread %d: %s", i, r[i].message);
        created += r[i].created;
    }
    cr_assert_eq(created, 1, "%d threads provisioned", created);
    struct collect c = {0, "", true};
    sbx_error err;
    cr_assert_eq(sbx_session_list(a.m, NULL, 10, on_info, &c, NULL, &err), SBX_OK);
    cr_assert_eq(c.n, 1);
    api_close(&a);
}

/* A manager's own leftover (an earlier call of this very manager failed
 * after create) is cleaned by its own reconcile pass, as a long-running
 * `reconcile --watch` must; another owner's live intent is left alone. */
Test(sessions_api, reconcile_cleans_its_own_leftovers)
{
    struct api_env a;
    api_open(&a);
    sbx_error err;
    sbx_provider *p;
    cr_assert_eq(sbx_provider_lookup(a.ctx, "local", &p, &err), SBX_OK);
    struct sbx_create_options co;
    memset(&co, 0, sizeof co);
    co.size = sizeof co;
    sbx_handle *h;
    cr_assert_eq(sbx_create(p, "left", &co, NULL, &h, &err), SBX_OK, "%s", err.message);
    char ref[SBX_REF_MAX];
    snprintf(ref, sizeof ref, "%s", sbx_handle_ref(h));
    sbx_release(h);

    struct sbx_claim claim = {0};
    struct sbx_claim_request req = {
        .session_key = "left", .provider = "local", .owner = a.m->owner, .step = "claimed"};
    cr_assert_eq(sbxh_store_claim(a.m->store, &req, &claim, &err), SBX_OK);
    cr_assert_eq(claim.outcome, SBX_CLAIM_WON);
    sbxh_claim_clear(&claim);
    cr_assert_eq(sbxh_store_update_intent(a.m->store, "left", a.m->owner, "created",
                                          ref, &err), SBX_OK);
    /* A live worker of this machine (this process's parent) holds another. */
    char other[256];
    snprintf(other, sizeof other, "%s:%ld:%llu:feedfacefeedface", a.m->realm,
             (long)getppid(), sbxh_process_start_time(getppid()));
    struct sbx_claim_request req2 = {
        .session_key = "busy", .provider = "local", .owner = other, .step = "claimed"};
    cr_assert_eq(sbxh_store_claim(a.m->store, &req2, &claim, &err), SBX_OK);
    sbxh_claim_clear(&claim);
    /* The same pid with another start time: that worker died and its pid
     * was reused, so its intent is taken over. */
    char reused[256];
    snprintf(reused, sizeof reused, "%s:%ld:%llu:feedfacefeedface", a.m->realm,
             (long)getppid(), sbxh_process_start_time(getppid()) + 1);
    struct sbx_claim_request req3 = {
        .session_key = "reused", .provider = "local", .owner = reused, .step = "claimed"};
    cr_assert_eq(sbxh_store_claim(a.m->store, &req3, &claim, &err), SBX_OK);
    sbxh_claim_clear(&claim);
    /* A worker of another machine (or pid namespace) with a pid that is
     * dead here: not judged from here, only its lease tells. */
    struct sbx_claim_request req4 = {
        .session_key = "foreign",
        .provider = "local",
        .owner = "0123-other-boot-4026531836:999999:1:feedface",
        .step = "claimed",
    };
    cr_assert_eq(sbxh_store_claim(a.m->store, &req4, &claim, &err), SBX_OK);
    sbxh_claim_clear(&claim);

    struct sbx_reconcile_report rep;
    cr_assert_eq(sbx_sessions_reconcile(a.m, 0, NULL, &rep, &err), SBX_OK, "%s",
                 err.message);
    cr_assert_eq(rep.intents_seen, 4, "seen %zu cleaned %zu skipped %zu failures %zu: %s",
                 rep.intents_seen, rep.intents_cleaned, rep.intents_skipped, rep.failures,
                 err.message);
    cr_assert_eq(rep.intents_cleaned, 2, "seen %zu cleaned %zu skipped %zu failures %zu: %s",
                 rep.intents_seen, rep.intents_cleaned, rep.intents_skipped, rep.failures,
                 err.message);
    cr_assert_eq(rep.intents_skipped, 2);
    struct stat st;
    cr_assert_neq(stat(ref, &st), 0, "the leftover workspace survived");
    struct sbx_intent in = {0};
    cr_assert_eq(sbxh_store_get_intent(a.m->store, "left", &in, &err), SBX_E_NOT_FOUND);
    cr_assert_eq(sbxh_store_get_intent(a.m->store, "busy", &in, &err), SBX_OK);
    sbxh_intent_clear(&in);
    cr_assert_eq(sbxh_store_get_intent(a.m->store, "reused", &in, &err), SBX_E_NOT_FOUND);
    cr_assert_eq(sbxh_store_get_intent(a.m->store, "foreign", &in, &err), SBX_OK);
    sbxh_intent_clear(&in);
    api_close(&a);
}
