/*
 * test_egress.c - limited-network sessions on the opensandbox provider
 * against the fake: the allowlist at every step of provisioning (read from
 * the fake's record of the sidecar policy in force at each command), drift
 * repaired on attach, a non-deny default refused, and admission refusing a
 * limited network on a provider without SBX_CAP_EGRESS.
 */
#include "../e2b/fake_service.h"

#include <sbx/sbx.h>
#include <sbx/session.h>

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct fake_service f;
static sbx_ctx *ctx;
static sbx_sessions *m;
static char dir[128];

static void up(void)
{
    cr_assert_eq(fake_start_script(&f, "tests/opensandbox/fake_opensandbox.py", NULL, "k"), 0);
    setenv("OPEN_SANDBOX_API_KEY", "k", 1);
    snprintf(dir, sizeof dir, "%s/cfg.yaml", f.dir);
    FILE *c = fopen(dir, "w");
    cr_assert(c);
    fprintf(c, "providers:\n  opensandbox:\n    api_url: \"%s\"\n"
               "    workspace: /home/user/workspace\n  local: {}\n", f.url);
    fclose(c);
    struct sbx_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.config_path = dir;
    o.plugin_path = SBX_TEST_PROVIDER_DIR;
    o.ignore_environment = true;
    sbx_error err;
    cr_assert_eq(sbx_open(&o, &ctx, &err), SBX_OK, "%s", err.message);
    char db[160];
    snprintf(db, sizeof db, "%s/s.db", f.dir);
    struct sbx_sessions_options so;
    memset(&so, 0, sizeof so);
    so.size = sizeof so;
    so.store_driver = "sqlite";
    so.store_target = db;
    so.ignore_environment = true;
    cr_assert_eq(sbx_sessions_open(ctx, &so, &m, &err), SBX_OK, "%s", err.message);
}

static void down(void)
{
    sbx_sessions_close(m);
    sbx_close(ctx);
    fake_stop(&f);
}

/* The fake's record of the sandbox's sidecar policy (malloc'd JSON). */
static char *egress_of(const char *ref)
{
    char path[256];
    snprintf(path, sizeof path, "/_fake/egress/%s", strchr(ref, ':') + 1);
    long st;
    return fake_http(&f, "GET", path, NULL, NULL, &st);
}

static const char *const allow[] = {"example.com", "*.internal.test"};

struct got {
    int n;
    char all[512];
};

static int collect(void *ud, const char *target)
{
    struct got *g = ud;
    g->n++;
    size_t l = strlen(g->all);
    snprintf(g->all + l, sizeof g->all - l, "[%s]", target);
    return 0;
}

static struct sbx_session_spec limited(const char *provider)
{
    static const char *const setup[] = {"setup.example.org"};
    static struct sbx_package pkgs[1];
    struct sbx_session_spec s;
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    s.provider = provider;
    s.limited_network = true;
    s.allow = allow;
    s.nallow = 2;
    s.setup_allow = setup;
    s.nsetup_allow = 1;
    (void)pkgs;
    return s;
}

Test(egress, setup_then_final_before_publish, .init = up, .fini = down, .timeout = 60)
{
    struct sbx_session_spec s = limited("opensandbox");
    sbx_handle *h = NULL;
    sbx_error err;
    cr_assert_eq(sbx_session_acquire(m, "eg-1", &s, NULL, &h, NULL, &err), SBX_OK, "%s",
                 err.message);
    char *rec = egress_of(sbx_handle_ref(h));
    cr_assert(rec);
    /* created deny-by-default with the setup allowlist ... */
    const char *create = strstr(rec, "\"event\": \"create\"");
    cr_assert(create, "%s", rec);
    cr_expect(strstr(rec, "setup.example.org"), "setup host never allowed: %s", rec);
    /* ... and the final allowlist in force now: no setup host left. */
    const char *now = strstr(rec, "\"policy\"");
    cr_assert(now);
    char *hist = strstr(rec, "\"history\"");
    cr_assert(hist);
    *hist = '\0';
    cr_expect(strstr(now, "\"defaultAction\": \"deny\""), "%s", now);
    cr_expect(strstr(now, "example.com") && strstr(now, "*.internal.test"), "%s", now);
    cr_expect(!strstr(now, "setup.example.org"), "setup host still allowed: %s", now);
    free(rec);
    sbx_release(h);
    cr_expect_eq(sbx_session_delete(m, "eg-1", NULL, &err), SBX_OK, "%s", err.message);
}

Test(egress, drift_repaired_on_attach, .init = up, .fini = down, .timeout = 60)
{
    struct sbx_session_spec s = limited("opensandbox");
    sbx_handle *h = NULL;
    sbx_error err;
    cr_assert_eq(sbx_session_acquire(m, "eg-2", &s, NULL, &h, NULL, &err), SBX_OK, "%s",
                 err.message);
    char ref[SBX_REF_MAX];
    snprintf(ref, sizeof ref, "%s", sbx_handle_ref(h));
    sbx_release(h);
    /* From inside: a stale rule added, a wanted one removed. */
    char path[256];
    snprintf(path, sizeof path, "/_fake/egress/%s", strchr(ref, ':') + 1);
    long st;
    char *r = fake_http(&f, "POST", path,
                        "{\"defaultAction\":\"deny\",\"egress\":[{\"action\":\"allow\","
                        "\"target\":\"evil.example\"},{\"action\":\"allow\",\"target\":"
                        "\"example.com\"}]}",
                        NULL, &st);
    free(r);
    cr_assert_eq(sbx_session_attach(m, "eg-2", NULL, &h, &err), SBX_OK, "%s", err.message);
    char *rec = egress_of(ref);
    char *hist = strstr(rec, "\"history\"");
    *hist = '\0';
    cr_expect(!strstr(rec, "evil.example"), "stale rule kept: %s", rec);
    cr_expect(strstr(rec, "*.internal.test"), "missing rule not added: %s", rec);
    free(rec);
    /* What the library reads back agrees. */
    struct got g = {0, ""};
    struct sbx_egress_report rep;
    memset(&rep, 0, sizeof rep);
    rep.size = sizeof rep;
    rep.default_action = 99;
    rep.ctx = &g;
    rep.allow = collect;
    cr_assert_eq(sbx_egress_get(h, &rep, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect_eq(rep.default_action, SBX_EGRESS_DENY);
    cr_expect_eq(g.n, 2, "%s", g.all);
    cr_expect(strstr(g.all, "[example.com]") && strstr(g.all, "[*.internal.test]"), "%s", g.all);
    sbx_release(h);
    cr_expect_eq(sbx_session_delete(m, "eg-2", NULL, &err), SBX_OK, "%s", err.message);
}

Test(egress, allow_default_refused, .init = up, .fini = down, .timeout = 60)
{
    struct sbx_session_spec s = limited("opensandbox");
    sbx_handle *h = NULL;
    sbx_error err;
    cr_assert_eq(sbx_session_acquire(m, "eg-3", &s, NULL, &h, NULL, &err), SBX_OK, "%s",
                 err.message);
    char ref[SBX_REF_MAX];
    snprintf(ref, sizeof ref, "%s", sbx_handle_ref(h));
    sbx_release(h);
    char path[256];
    snprintf(path, sizeof path, "/_fake/egress/%s", strchr(ref, ':') + 1);
    long st;
    free(fake_http(&f, "POST", path, "{\"defaultAction\":\"allow\",\"egress\":[]}", NULL, &st));
    cr_expect_eq(sbx_session_attach(m, "eg-3", NULL, &h, &err), SBX_E_DENIED, "%s", err.message);
    cr_expect(strstr(err.message, "no longer deny"), "%s", err.message);
    cr_expect_eq(sbx_session_delete(m, "eg-3", NULL, &err), SBX_OK, "%s", err.message);
}

Test(egress, admission_refuses_without_capability, .init = up, .fini = down, .timeout = 60)
{
    struct sbx_session_spec s = limited("local");
    sbx_handle *h = NULL;
    sbx_error err;
    cr_expect_eq(sbx_session_acquire(m, "eg-4", &s, NULL, &h, NULL, &err), SBX_E_UNSUPPORTED);
    cr_expect(strstr(err.message, "\"local\"") && strstr(err.message, "egress"), "%s",
              err.message);
    long st;
    char *stats = fake_http(&f, "GET", "/_fake/stats", NULL, NULL, &st);
    cr_expect(stats && strstr(stats, "\"sandboxes\": 0"), "%s", stats);
    free(stats);
    sbx_handle *h2 = NULL;
    cr_expect_eq(sbx_session_attach(m, "eg-4", NULL, &h2, &err), SBX_E_NOT_FOUND,
                 "a binding was written: %s", err.message);
}

Test(egress, set_on_an_open_sidecar_is_refused_and_records_nothing, .init = up, .fini = down,
     .timeout = 60)
{
    struct sbx_session_spec s = limited("opensandbox");
    sbx_handle *h = NULL;
    sbx_error err;
    cr_assert_eq(sbx_session_acquire(m, "eg-5", &s, NULL, &h, NULL, &err), SBX_OK, "%s",
                 err.message);
    char ref[SBX_REF_MAX], path[256];
    snprintf(ref, sizeof ref, "%s", sbx_handle_ref(h));
    snprintf(path, sizeof path, "/_fake/egress/%s", strchr(ref, ':') + 1);
    long st;
    free(fake_http(&f, "POST", path, "{\"defaultAction\":\"allow\",\"egress\":[]}", NULL, &st));
    static const char *const other[] = {"other.example", NULL};
    struct sbx_egress_policy pol = {sizeof pol, SBX_EGRESS_DENY, other};
    cr_expect_eq(sbx_egress_set(h, &pol, NULL, &err), SBX_E_DENIED, "%s", err.message);
    /* the recorded intent is still the spec's allowlist */
    snprintf(path, sizeof path, "/v1/sandboxes/%s", strchr(ref, ':') + 1);
    char *doc = fake_http(&f, "GET", path, NULL, "OPEN-SANDBOX-API-KEY: k", &st);
    cr_expect(doc && strstr(doc, "\"example.com\"") && !strstr(doc, "other.example"), "%s", doc);
    free(doc);
    sbx_release(h);
    cr_expect_eq(sbx_session_delete(m, "eg-5", NULL, &err), SBX_OK, "%s", err.message);
}

Test(egress, the_allowlist_is_part_of_the_spec_hash)
{
    sbx_error err;
    char none[SBX_KEY_HASH_LEN + 1], old[SBX_KEY_HASH_LEN + 1];
    char a[SBX_KEY_HASH_LEN + 1], b[SBX_KEY_HASH_LEN + 1], c[SBX_KEY_HASH_LEN + 1];
    struct sbx_session_spec s;
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    cr_assert_eq(sbx_session_spec_hash(&s, none, &err), SBX_OK, "%s", err.message);
    /* a spec without a limited network hashes as before the allowlist existed */
    cr_assert_eq(sbx_key_hash("sbx-spec 1\ncaps 0\n", old), SBX_OK);
    cr_expect_str_eq(none, old);
    static const char *const ab[] = {"a.example", "b.example"};
    static const char *const ba[] = {"b.example", "a.example"};
    s.limited_network = true;
    cr_assert_eq(sbx_session_spec_hash(&s, a, &err), SBX_OK);
    cr_expect_str_neq(a, none, "limiting the network changes the hash");
    s.allow = ab;
    s.nallow = 2;
    cr_assert_eq(sbx_session_spec_hash(&s, b, &err), SBX_OK);
    cr_expect_str_neq(b, a);
    s.allow = ba;
    cr_assert_eq(sbx_session_spec_hash(&s, c, &err), SBX_OK);
    cr_expect_str_eq(b, c, "the allowlist's order changed the hash");
    s.setup_allow = ab;
    s.nsetup_allow = 1;
    cr_assert_eq(sbx_session_spec_hash(&s, c, &err), SBX_OK);
    cr_expect_str_neq(b, c, "setup_allow is not in the hash");
}
