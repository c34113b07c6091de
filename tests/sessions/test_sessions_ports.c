/*
 * test_sessions_ports.c - ports in session specs through the C API: the
 * spec hash includes them as a set (and leaves specs without ports as they
 * were), bad declarations are refused, the session manager passes them to
 * the provider's create (the portstest fixture records what it got),
 * session.ports of the configuration applies to a spec that declares none,
 * and a provider without SBX_CAP_PORTS refuses them at admission, naming
 * itself and the capability, with nothing provisioned.
 */
#include <sbx/session.h>

#include "scratch_db.h"

#include <criterion/criterion.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct env {
    char dir[PATH_MAX];
    char log[PATH_MAX + 16];
    struct scratch_db db;
    sbx_ctx *ctx;
    sbx_sessions *m;
};

/* top: more top-level YAML (or NULL). */
static void env_open(struct env *e, const char *top)
{
    memset(e, 0, sizeof *e);
    snprintf(e->dir, sizeof e->dir, "/tmp/sbx-session-ports-XXXXXX");
    cr_assert_not_null(mkdtemp(e->dir));
    snprintf(e->log, sizeof e->log, "%s/create.log", e->dir);
    char why[512] = "";
    cr_assert_eq(scratch_create("sqlite", &e->db, why, sizeof why), SCRATCH_OK, "%s", why);
    char cfg[PATH_MAX + 16];
    snprintf(cfg, sizeof cfg, "%s/sbx.yaml", e->dir);
    FILE *f = fopen(cfg, "w");
    cr_assert_not_null(f);
    fprintf(f,
            "default_provider: local\nproviders:\n  local:\n    root: %s/ws\n"
            "  portstest:\n    root: %s/pws\n    log: %s\n%s",
            e->dir, e->dir, e->log, top ? top : "");
    fclose(f);
    struct sbx_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.config_path = cfg;
    o.plugin_path = SBX_TEST_PROVIDER_DIR ":" SBX_TEST_SESSION_FIXTURE_DIR;
    o.ignore_environment = true;
    sbx_error err;
    cr_assert_eq(sbx_open(&o, &e->ctx, &err), SBX_OK, "%s", err.message);
    struct sbx_sessions_options so;
    memset(&so, 0, sizeof so);
    so.size = sizeof so;
    so.store_driver = e->db.driver;
    so.store_target = e->db.target;
    so.ignore_environment = true;
    cr_assert_eq(sbx_sessions_open(e->ctx, &so, &e->m, &err), SBX_OK, "%s", err.message);
}

static int rm_entry(const char *p, const struct stat *st, int fl, struct FTW *ftw)
{
    (void)st;
    (void)fl;
    (void)ftw;
    remove(p);
    return 0;
}

static void env_close(struct env *e)
{
    sbx_sessions_close(e->m);
    sbx_close(e->ctx);
    scratch_destroy(&e->db);
    nftw(e->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* The fixture's log ("" before any create); static buffer. */
static const char *create_log(const struct env *e)
{
    static char buf[4096];
    buf[0] = '\0';
    FILE *f = fopen(e->log, "r");
    if (f) {
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = '\0';
        fclose(f);
    }
    return buf;
}

static struct sbx_session_spec spec_with(const char *provider, const uint16_t *ports,
                                         size_t n)
{
    struct sbx_session_spec s;
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    s.provider = provider;
    s.ports = ports;
    s.nports = n;
    return s;
}

static void hash_of(const struct sbx_session_spec *s, char out[SBX_KEY_HASH_LEN + 1])
{
    sbx_error err;
    cr_assert_eq(sbx_session_spec_hash(s, out, &err), SBX_OK, "%s", err.message);
}

Test(sessions_ports, the_spec_hash_includes_ports_as_a_set)
{
    char none[65], old[65], a[65], b[65], c[65];
    struct sbx_session_spec s = spec_with(NULL, NULL, 0);
    hash_of(&s, none);
    /* a spec built before ports existed (its size ends before them) */
    struct sbx_session_spec o = s;
    o.size = offsetof(struct sbx_session_spec, ports);
    hash_of(&o, old);
    cr_expect_str_eq(none, old, "a spec without ports keeps its hash");
    const uint16_t p1[] = {8080, 3000}, p2[] = {3000, 8080}, p3[] = {8080};
    s = spec_with(NULL, p1, 2);
    hash_of(&s, a);
    s = spec_with(NULL, p2, 2);
    hash_of(&s, b);
    s = spec_with(NULL, p3, 1);
    hash_of(&s, c);
    cr_expect_str_eq(a, b, "order does not matter");
    cr_expect_str_neq(a, c);
    cr_expect_str_neq(a, none);
    cr_expect_str_neq(c, none);
}

Test(sessions_ports, bad_declarations_are_invalid)
{
    char h[65];
    sbx_error err;
    const uint16_t dup[] = {8080, 9000, 8080}, zero[] = {80, 0};
    struct sbx_session_spec s = spec_with(NULL, dup, 3);
    cr_expect_eq(sbx_session_spec_hash(&s, h, &err), SBX_E_INVALID);
    cr_expect(strstr(err.message, "port 8080 is declared twice"), "%s", err.message);
    s = spec_with(NULL, zero, 2);
    cr_expect_eq(sbx_session_spec_hash(&s, h, &err), SBX_E_INVALID);
    cr_expect(strstr(err.message, "port 0"), "%s", err.message);
    uint16_t many[SBX_SESSION_PORTS_MAX + 1];
    for (int i = 0; i <= SBX_SESSION_PORTS_MAX; i++)
        many[i] = (uint16_t)(1000 + i);
    s = spec_with(NULL, many, SBX_SESSION_PORTS_MAX + 1);
    cr_expect_eq(sbx_session_spec_hash(&s, h, &err), SBX_E_INVALID);
    cr_expect(strstr(err.message, "at most 64"), "%s", err.message);
    s = spec_with(NULL, many, SBX_SESSION_PORTS_MAX);
    cr_expect_eq(sbx_session_spec_hash(&s, h, &err), SBX_OK, "64 is fine: %s", err.message);
    s = spec_with(NULL, NULL, 2);
    cr_expect_eq(sbx_session_spec_hash(&s, h, &err), SBX_E_INVALID);
    /* acquire refuses them before anything is made */
    struct env e;
    env_open(&e, NULL);
    sbx_handle *hd;
    s = spec_with("portstest", dup, 3);
    cr_expect_eq(sbx_session_acquire(e.m, "k", &s, NULL, &hd, NULL, &err), SBX_E_INVALID);
    cr_expect_str_eq(create_log(&e), "");
    env_close(&e);
}

Test(sessions_ports, acquire_passes_the_ports_to_create)
{
    struct env e;
    env_open(&e, NULL);
    sbx_error err;
    sbx_handle *h;
    struct sbx_acquire_info info = {.size = sizeof info};
    const uint16_t p[] = {8080, 3000};
    struct sbx_session_spec s = spec_with("portstest", p, 2);
    cr_assert_eq(sbx_session_acquire(e.m, "web", &s, NULL, &h, &info, &err), SBX_OK, "%s",
                 err.message);
    cr_expect(info.created);
    cr_expect_str_eq(create_log(&e), "create 8080,3000\n");
    char want[65];
    hash_of(&s, want);
    cr_expect_str_eq(info.recorded_spec_hash, want);
    struct sbx_port_endpoint ep = {.size = sizeof ep};
    cr_expect_eq(sbx_port_resolve(h, 8080, &ep, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect_eq(ep.port, 18080);
    sbx_release(h);
    /* the same ports in another order: the same spec */
    const uint16_t q[] = {3000, 8080};
    s = spec_with("portstest", q, 2);
    cr_assert_eq(sbx_session_acquire(e.m, "web", &s, NULL, &h, &info, &err), SBX_OK);
    cr_expect_not(info.created);
    cr_expect_not(info.spec_changed);
    sbx_release(h);
    /* other ports: reported as a changed spec, never applied */
    const uint16_t r[] = {8080};
    s = spec_with("portstest", r, 1);
    cr_assert_eq(sbx_session_acquire(e.m, "web", &s, NULL, &h, &info, &err), SBX_OK);
    cr_expect(info.spec_changed);
    cr_expect_str_eq(info.recorded_spec_hash, want);
    sbx_release(h);
    cr_expect_str_eq(create_log(&e), "create 8080,3000\n", "no second create");
    /* no ports: create gets none */
    s = spec_with("portstest", NULL, 0);
    cr_assert_eq(sbx_session_acquire(e.m, "plain", &s, NULL, &h, &info, &err), SBX_OK);
    sbx_release(h);
    cr_expect_str_eq(create_log(&e), "create 8080,3000\ncreate -\n");
    env_close(&e);
}

Test(sessions_ports, config_session_ports_apply_to_a_spec_without_ports)
{
    struct env e;
    env_open(&e, "session:\n  ports: [9000, 9001]\n");
    sbx_error err;
    sbx_handle *h;
    struct sbx_acquire_info info = {.size = sizeof info};
    struct sbx_session_spec s = spec_with("portstest", NULL, 0);
    cr_assert_eq(sbx_session_acquire(e.m, "a", &s, NULL, &h, &info, &err), SBX_OK, "%s",
                 err.message);
    sbx_release(h);
    cr_expect_str_eq(create_log(&e), "create 9000,9001\n");
    /* recorded as the spec with those ports */
    const uint16_t cp[] = {9001, 9000};
    struct sbx_session_spec with = spec_with("portstest", cp, 2);
    char want[65];
    hash_of(&with, want);
    cr_expect_str_eq(info.recorded_spec_hash, want);
    /* a spec's own ports replace them */
    const uint16_t own[] = {7000};
    s = spec_with("portstest", own, 1);
    cr_assert_eq(sbx_session_acquire(e.m, "b", &s, NULL, &h, &info, &err), SBX_OK, "%s",
                 err.message);
    sbx_release(h);
    cr_expect_str_eq(create_log(&e), "create 9000,9001\ncreate 7000\n");
    /* with the default provider (local, without the capability), a spec
     * that declares none is refused for the configured ones */
    cr_expect_eq(sbx_session_acquire(e.m, "c", NULL, NULL, &h, &info, &err),
                 SBX_E_UNSUPPORTED);
    cr_expect(strstr(err.message, sbx_cap_name(SBX_CAP_PORTS)), "%s", err.message);
    env_close(&e);
}

Test(sessions_ports, a_provider_without_the_capability_refuses_at_admission)
{
    struct env e;
    env_open(&e, NULL);
    sbx_provider *p;
    sbx_error err;
    cr_assert_eq(sbx_provider_lookup(e.ctx, "local", &p, &err), SBX_OK);
    if (sbx_provider_info_caps(sbx_provider_get_info(p)) & SBX_CAP_PORTS) {
        env_close(&e);
        cr_skip_test("local declares SBX_CAP_PORTS: nothing to refuse");
    }
    sbx_handle *h = NULL;
    const uint16_t ports[] = {8080};
    struct sbx_session_spec s = spec_with("local", ports, 1);
    cr_expect_eq(sbx_session_acquire(e.m, "refused", &s, NULL, &h, NULL, &err),
                 SBX_E_UNSUPPORTED);
    cr_expect(strstr(err.message, "local") && strstr(err.message, sbx_cap_name(SBX_CAP_PORTS)),
              "%s", err.message);
    cr_expect_null(h);
    /* nothing was provisioned: no workspace, no binding */
    char ws[PATH_MAX + 8];
    snprintf(ws, sizeof ws, "%s/ws", e.dir);
    struct stat st;
    cr_expect(stat(ws, &st) != 0 || st.st_nlink == 2, "a workspace was made");
    cr_expect_eq(sbx_session_attach(e.m, "refused", NULL, &h, &err), SBX_E_NOT_FOUND);
    env_close(&e);
}
