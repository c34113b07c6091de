/*
 * test_e2b_env.c - the e2b and cube providers' service environment
 * variables (E2B_API_URL, E2B_DOMAIN, E2B_TEMPLATE_ID, E2B_IDLE_TIMEOUT;
 * CUBE_API_URL, CUBE_TEMPLATE_ID, CUBE_API_KEY, CUBE_SANDBOX_DOMAIN,
 * CUBE_PROXY_HOST/PORT, CUBE_IDLE_TIMEOUT) against the fake: each one
 * used when its key is not configured, the configuration winning over
 * it, bad values named, the source of each value as sbx check reports it
 * (a credential only as set), and the health op (healthy, refused key,
 * service down, 5xx).
 */
#include "fake_service.h"
#include "../support/provider_harness.h"

#include <sbx/sbx.h>

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KEY "e2b_env_key_0123"
#define CUBE_KEY "cube_env_key_0123"

static struct fake_service fake;
static char cfg[PH_PATH_MAX];
static sbx_ctx *ctx;
static sbx_provider *prov;

static const char *const vars[] = {
    "E2B_API_KEY", "E2B_API_URL", "E2B_DOMAIN", "E2B_TEMPLATE_ID", "E2B_IDLE_TIMEOUT",
    "CUBE_API_URL", "CUBE_TEMPLATE_ID", "CUBE_API_KEY", "CUBE_SANDBOX_DOMAIN",
    "CUBE_PROXY_HOST", "CUBE_PROXY_PORT", "CUBE_IDLE_TIMEOUT", NULL};

static void up(void)
{
    for (size_t i = 0; vars[i]; i++)
        unsetenv(vars[i]);
}

static void close_ctx(void)
{
    ph_close(&ctx, &prov);
    ph_remove_config(cfg);
}

static void down(void)
{
    close_ctx();
    fake_stop(&fake);
}

/* Open a context with `section` as providers.<name>; with ready, also
 * initialize the provider. */
static int open_ctx(const char *name, const char *section, int ready, sbx_error *err)
{
    close_ctx();
    ph_write_config(cfg, "/tmp/sbx-e2b-env-XXXXXX.yaml", "providers:\n  %s:\n%s", name, section);
    return ph_open(cfg, name, ready, &ctx, &prov, err);
}

/* Create a sandbox for key, run `true` in it, destroy it. */
static void create_run_destroy(const char *key)
{
    sbx_error err;
    sbx_handle *h = ph_create(prov, key);
    const char *argv[] = {"true", NULL};
    struct sbx_exec_result res;
    cr_assert_eq(ph_exec_argv(h, argv, &res, NULL, NULL, &err), SBX_OK, "exec: %s", err.message);
    cr_expect_eq(res.exit_code, 0);
    ph_destroy(prov, key, h);
}

/* Where key's value came from, as sbx check shows it. */
struct origin {
    const char *env, *value;
    int origin;
    bool secret;
};

static struct origin origin_of(const char *key)
{
    struct origin o = {0};
    o.origin = ph_origin(prov, key, &o.env, &o.value, &o.secret);
    return o;
}

TestSuite(e2b_env, .init = up, .fini = down, .timeout = 60);

/* ---- e2b ----------------------------------------------------------------- */

Test(e2b_env, the_variables_reach_the_service)
{
    cr_assert_eq(fake_start(&fake, "e2b", KEY), 0);
    setenv("E2B_API_KEY", KEY, 1);
    setenv("E2B_API_URL", fake.url, 1);
    setenv("E2B_TEMPLATE_ID", "tpl-from-env", 1);
    setenv("E2B_IDLE_TIMEOUT", "5m", 1);
    char sec[256];
    snprintf(sec, sizeof sec, "    envd_url: \"%s\"\n", fake.url);
    sbx_error err;
    cr_assert_eq(open_ctx("e2b", sec, 1, &err), SBX_OK, "%s", err.message);
    create_run_destroy("k-env");
    char *s = fake_stats(&fake);
    cr_expect(strstr(s, "\"templateID\": \"tpl-from-env\""), "%s", s);
    cr_expect(strstr(s, "\"timeout\": 300"), "E2B_IDLE_TIMEOUT=5m is not 300 s: %s", s);
    free(s);
    struct origin o = origin_of("api_url");
    cr_expect_eq(o.origin, SBX_ORIGIN_ENV);
    cr_expect_str_eq(o.env, "E2B_API_URL");
    cr_expect_str_eq(o.value, fake.url);
    o = origin_of("lifetime");
    cr_expect_eq(o.origin, SBX_ORIGIN_ENV);
    cr_expect_str_eq(o.value, "5m");
    o = origin_of("envd_url");
    cr_expect_eq(o.origin, SBX_ORIGIN_CONFIG);
    cr_expect_null(o.env);
    o = origin_of("api_key");
    cr_expect(o.secret);
    cr_expect_eq(o.origin, SBX_ORIGIN_ENV);
    cr_expect_null(o.value, "a credential's value was handed out");
    cr_expect_str_eq(o.env, "E2B_API_KEY");
}

Test(e2b_env, the_configuration_wins_over_the_variables)
{
    cr_assert_eq(fake_start(&fake, "e2b", KEY), 0);
    setenv("E2B_API_KEY", KEY, 1);
    setenv("E2B_API_URL", "http://127.0.0.1:1", 1); /* nothing listens there */
    setenv("E2B_TEMPLATE_ID", "tpl-from-env", 1);
    setenv("E2B_IDLE_TIMEOUT", "77", 1);
    setenv("E2B_DOMAIN", "env.invalid", 1);
    char sec[512];
    snprintf(sec, sizeof sec,
             "    api_url: \"%s\"\n    envd_url: \"%s\"\n    template: tpl-from-config\n"
             "    lifetime: 120\n    domain: e2b.local\n    retries: 0\n",
             fake.url, fake.url);
    sbx_error err;
    cr_assert_eq(open_ctx("e2b", sec, 1, &err), SBX_OK, "%s", err.message);
    create_run_destroy("k-cfg");
    char *s = fake_stats(&fake);
    cr_expect(strstr(s, "\"templateID\": \"tpl-from-config\""), "%s", s);
    cr_expect_null(strstr(s, "tpl-from-env"), "%s", s);
    cr_expect(strstr(s, "\"timeout\": 120"), "%s", s);
    free(s);
    const char *keys[] = {"api_url", "template", "lifetime", "domain"};
    for (size_t i = 0; i < 4; i++) {
        struct origin o = origin_of(keys[i]);
        cr_expect_eq(o.origin, SBX_ORIGIN_CONFIG, "%s", keys[i]);
    }
}

Test(e2b_env, e2b_domain_makes_the_default_api_url)
{
    setenv("E2B_API_KEY", KEY, 1);
    setenv("E2B_DOMAIN", "e2b-env-test.invalid", 1);
    sbx_error err;
    cr_assert_eq(open_ctx("e2b", "    request_timeout_ms: 1500\n    connect_timeout_ms: 500\n", 1,
                          &err),
                 SBX_OK, "%s", err.message);
    cr_expect_eq(origin_of("domain").origin, SBX_ORIGIN_ENV);
    cr_expect_eq(origin_of("api_url").origin, SBX_ORIGIN_DEFAULT);
    struct sbx_health h;
    int rc = ph_health(prov, &h, &err);
    cr_expect_eq(rc, SBX_E_UNAVAILABLE, "%d %s", rc, err.message);
    cr_expect(strstr(err.message, "https://api.e2b-env-test.invalid"), "%s", err.message);
    cr_expect_null(strstr(err.message, KEY), "%s", err.message);
    /* the configuration's domain wins */
    cr_assert_eq(open_ctx("e2b",
                          "    domain: e2b-cfg-test.invalid\n    request_timeout_ms: 1500\n"
                          "    connect_timeout_ms: 500\n",
                          1, &err),
                 SBX_OK, "%s", err.message);
    rc = ph_health(prov, &h, &err);
    cr_expect(strstr(err.message, "https://api.e2b-cfg-test.invalid"), "%s", err.message);
}

Test(e2b_env, bad_values_name_the_variable)
{
    setenv("E2B_API_KEY", KEY, 1);
    sbx_error err;
    static const char *const cases[][2] = {
        {"E2B_IDLE_TIMEOUT", "soon"}, {"E2B_IDLE_TIMEOUT", "-5"},
        {"E2B_IDLE_TIMEOUT", "10d"},  {"E2B_IDLE_TIMEOUT", "1"},
        {"E2B_API_URL", "ftp://x"},   {"E2B_API_URL", "http://a b"},
        {"E2B_DOMAIN", "https://e2b.app"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        setenv(cases[i][0], cases[i][1], 1);
        int rc = open_ctx("e2b", "    retries: 0\n", 1, &err);
        cr_expect_eq(rc, SBX_E_CONFIG, "%s=%s: %d %s", cases[i][0], cases[i][1], rc,
                     err.message);
        cr_expect(strstr(err.message, cases[i][0]), "%s=%s: %s", cases[i][0], cases[i][1],
                  err.message);
        unsetenv(cases[i][0]);
    }
    /* the same value in the configuration is named as the key */
    setenv("E2B_API_URL", "ftp://x", 1);
    cr_expect_eq(open_ctx("e2b", "    api_url: \"ftp://y\"\n", 1, &err), SBX_E_CONFIG);
    cr_expect(strstr(err.message, "providers.e2b.api_url"), "%s", err.message);
}

Test(e2b_env, a_key_in_the_configuration_is_refused)
{
    sbx_error err;
    cr_expect_eq(open_ctx("e2b", "    api_key: oops_secret\n", 0, &err), SBX_E_CONFIG);
    cr_expect(strstr(err.message, "providers.e2b.api_key"), "%s", err.message);
    cr_expect(strstr(err.message, "E2B_API_KEY"), "%s", err.message);
    cr_expect_null(strstr(err.message, "oops_secret"), "%s", err.message);
}

Test(e2b_env, an_unset_key_shows_as_default)
{
    sbx_error err;
    cr_assert_eq(open_ctx("e2b", "    retries: 0\n", 0, &err), SBX_OK, "%s", err.message);
    struct origin o = origin_of("api_key");
    cr_expect_eq(o.origin, SBX_ORIGIN_DEFAULT);
    cr_expect(o.secret);
    o = origin_of("template");
    cr_expect_eq(o.origin, SBX_ORIGIN_DEFAULT);
    cr_expect_str_eq(o.env, "E2B_TEMPLATE_ID");
    cr_expect_null(o.value);
    setenv("E2B_TEMPLATE_ID", "", 1); /* empty is unset */
    cr_expect_eq(origin_of("template").origin, SBX_ORIGIN_DEFAULT);
}

/* ---- e2b health ------------------------------------------------------------ */

static void e2b_open_fake(void)
{
    char sec[256];
    snprintf(sec, sizeof sec, "    api_url: \"%s\"\n    envd_url: \"%s\"\n    retries: 2\n",
             fake.url, fake.url);
    sbx_error err;
    cr_assert_eq(open_ctx("e2b", sec, 0, &err), SBX_OK, "%s", err.message);
}

Test(e2b_env, health_lists_one_sandbox_with_the_key)
{
    cr_assert_eq(fake_start(&fake, "e2b", KEY), 0);
    setenv("E2B_API_KEY", KEY, 1);
    e2b_open_fake();
    struct sbx_health h;
    sbx_error err;
    cr_assert_eq(ph_health(prov, &h, &err), SBX_OK, "%s", err.message);
    cr_expect(h.checked);
    cr_expect(strstr(h.detail, "E2B API at http://127.0.0.1:"), "%s", h.detail);
    cr_expect(strstr(h.detail, "/v2/sandboxes"), "%s", h.detail);
    cr_expect_null(strstr(h.detail, KEY), "%s", h.detail);
    char *s = fake_stats(&fake);
    cr_expect(strstr(s, "\"path\": \"/v2/sandboxes?limit=1\"") ||
                  strstr(s, "/v2/sandboxes"),
              "%s", s);
    cr_expect_null(strstr(s, "\"method\": \"POST\""), "health created something: %s", s);
    free(s);
}

Test(e2b_env, health_says_the_key_was_refused)
{
    cr_assert_eq(fake_start(&fake, "e2b", KEY), 0);
    setenv("E2B_API_KEY", "wrong_secret_value", 1);
    e2b_open_fake();
    struct sbx_health h;
    sbx_error err;
    int rc = ph_health(prov, &h, &err);
    cr_expect_eq(rc, SBX_E_DENIED, "%d %s", rc, err.message);
    cr_expect(strstr(err.message, "the API key was refused (HTTP 401)"), "%s", err.message);
    cr_expect(strstr(err.message, "E2B_API_KEY"), "%s", err.message);
    cr_expect_null(strstr(err.message, "wrong_secret_value"), "%s", err.message);
}

Test(e2b_env, health_says_the_service_is_down)
{
    setenv("E2B_API_KEY", KEY, 1);
    sbx_error err;
    cr_assert_eq(open_ctx("e2b", "    api_url: \"http://127.0.0.1:1\"\n    retries: 3\n", 0,
                          &err),
                 SBX_OK, "%s", err.message);
    struct sbx_health h;
    int rc = ph_health(prov, &h, &err);
    cr_expect_eq(rc, SBX_E_UNAVAILABLE, "%d %s", rc, err.message);
    cr_expect(strstr(err.message, "cannot reach the E2B API at http://127.0.0.1:1"), "%s",
              err.message);
    cr_expect_lt(h.check_us, 2000000, "retried a dead service: %llu us",
                 (unsigned long long)h.check_us);
}

Test(e2b_env, health_says_the_service_is_failing)
{
    cr_assert_eq(fake_start(&fake, "e2b", KEY), 0);
    setenv("E2B_API_KEY", KEY, 1);
    e2b_open_fake();
    cr_assert_eq(fake_faults(&fake, "[{\"match\":\"/v2/sandboxes\",\"kind\":\"status\","
                                    "\"status\":503,\"times\":1}]"),
                 0);
    struct sbx_health h;
    sbx_error err;
    int rc = ph_health(prov, &h, &err);
    cr_expect_eq(rc, SBX_E_UNAVAILABLE, "%d %s", rc, err.message);
    cr_expect(strstr(err.message, "is failing (HTTP 503)"), "%s", err.message);
    /* sent once: the next check (the fault used up) passes */
    cr_expect_eq(ph_health(prov, &h, &err), SBX_OK, "%s", err.message);
}

/* ---- cube ---------------------------------------------------------------- */

Test(e2b_env, cube_runs_on_the_variables_alone)
{
    cr_assert_eq(fake_start(&fake, "cube", CUBE_KEY), 0);
    char port[16];
    snprintf(port, sizeof port, "%d", fake.port);
    setenv("CUBE_API_URL", fake.url, 1);
    setenv("CUBE_TEMPLATE_ID", "cube-tpl-env", 1);
    setenv("CUBE_API_KEY", CUBE_KEY, 1);
    setenv("CUBE_SANDBOX_DOMAIN", "cube.local", 1);
    setenv("CUBE_PROXY_HOST", "127.0.0.1", 1);
    setenv("CUBE_PROXY_PORT", port, 1);
    setenv("CUBE_IDLE_TIMEOUT", "90", 1);
    sbx_error err;
    /* a section of its own keys only: everything else from the variables */
    cr_assert_eq(open_ctx("cube", "    retries: 2\n", 1, &err), SBX_OK, "%s", err.message);
    create_run_destroy("k-cube-env");
    char *s = fake_stats(&fake);
    cr_expect(strstr(s, "\"templateID\": \"cube-tpl-env\""), "%s", s);
    cr_expect(strstr(s, "\"timeout\": 90"), "%s", s);
    free(s);
    const char *keys[] = {"api_url", "template", "domain", "proxy_address", "proxy_port",
                          "lifetime", "api_key"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        cr_expect_eq(origin_of(keys[i]).origin, SBX_ORIGIN_ENV, "%s", keys[i]);
    cr_expect_str_eq(origin_of("domain").value, "cube.local");
    cr_expect_null(origin_of("api_key").value);
    struct sbx_health h;
    cr_expect_eq(ph_health(prov, &h, &err), SBX_OK, "%s", err.message);
    cr_expect(strstr(h.detail, "CubeAPI at http://127.0.0.1:"), "%s", h.detail);
}

Test(e2b_env, cube_configuration_wins_and_bad_values_are_named)
{
    cr_assert_eq(fake_start(&fake, "cube", NULL), 0);
    char sec[512];
    snprintf(sec, sizeof sec,
             "    api_url: \"%s\"\n    template: cube-tpl-cfg\n    proxy_address: 127.0.0.1\n"
             "    proxy_port: %d\n    lifetime: 45\n    domain: cube.local\n",
             fake.url, fake.port);
    setenv("CUBE_API_URL", "http://127.0.0.1:1", 1);
    setenv("CUBE_TEMPLATE_ID", "cube-tpl-env", 1);
    setenv("CUBE_PROXY_HOST", "192.0.2.1", 1);
    setenv("CUBE_PROXY_PORT", "1", 1);
    setenv("CUBE_IDLE_TIMEOUT", "99", 1);
    setenv("CUBE_SANDBOX_DOMAIN", "other.invalid", 1);
    sbx_error err;
    cr_assert_eq(open_ctx("cube", sec, 1, &err), SBX_OK, "%s", err.message);
    create_run_destroy("k-cube-cfg");
    char *s = fake_stats(&fake);
    cr_expect(strstr(s, "\"templateID\": \"cube-tpl-cfg\""), "%s", s);
    cr_expect(strstr(s, "\"timeout\": 45"), "%s", s);
    free(s);
    for (size_t i = 0; vars[i]; i++)
        unsetenv(vars[i]);
    static const char *const cases[][2] = {
        {"CUBE_PROXY_PORT", "http"}, {"CUBE_PROXY_PORT", "70000"},
        {"CUBE_IDLE_TIMEOUT", "x"},  {"CUBE_API_URL", "cube-api:3000"},
        {"CUBE_PROXY_HOST", "a/b"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        setenv("CUBE_API_URL", fake.url, 1);
        setenv("CUBE_TEMPLATE_ID", "t", 1);
        if (strcmp(cases[i][0], "CUBE_PROXY_HOST"))
            setenv("CUBE_PROXY_HOST", "127.0.0.1", 1);
        else
            unsetenv("CUBE_PROXY_PORT");
        setenv(cases[i][0], cases[i][1], 1);
        int rc = open_ctx("cube", "    retries: 0\n", 1, &err);
        cr_expect_eq(rc, SBX_E_CONFIG, "%s=%s: %d %s", cases[i][0], cases[i][1], rc,
                     err.message);
        cr_expect(strstr(err.message, cases[i][0]), "%s=%s: %s", cases[i][0], cases[i][1],
                  err.message);
        for (size_t j = 0; vars[j]; j++)
            unsetenv(vars[j]);
    }
}

Test(e2b_env, cube_health_refused_key_and_down)
{
    cr_assert_eq(fake_start(&fake, "cube", CUBE_KEY), 0);
    char sec[256];
    snprintf(sec, sizeof sec, "    api_url: \"%s\"\n    template: t\n", fake.url);
    setenv("CUBE_API_KEY", "wrong_cube_secret", 1);
    sbx_error err;
    cr_assert_eq(open_ctx("cube", sec, 0, &err), SBX_OK, "%s", err.message);
    struct sbx_health h;
    int rc = ph_health(prov, &h, &err);
    cr_expect_eq(rc, SBX_E_DENIED, "%d %s", rc, err.message);
    cr_expect(strstr(err.message, "the API key was refused"), "%s", err.message);
    cr_expect(strstr(err.message, "CUBE_API_KEY"), "%s", err.message);
    cr_expect_null(strstr(err.message, "wrong_cube_secret"), "%s", err.message);
    /* no key at all, against a CubeAPI that wants one */
    unsetenv("CUBE_API_KEY");
    cr_assert_eq(open_ctx("cube", sec, 0, &err), SBX_OK, "%s", err.message);
    rc = ph_health(prov, &h, &err);
    cr_expect_eq(rc, SBX_E_DENIED, "%d %s", rc, err.message);
    cr_expect(strstr(err.message, "no API key is set"), "%s", err.message);
    cr_assert_eq(fake_faults(&fake, "[{\"match\":\"/v2/sandboxes\",\"kind\":\"status\","
                                    "\"status\":500,\"times\":1}]"),
                 0);
    setenv("CUBE_API_KEY", CUBE_KEY, 1);
    cr_assert_eq(open_ctx("cube", sec, 0, &err), SBX_OK, "%s", err.message);
    rc = ph_health(prov, &h, &err);
    cr_expect_eq(rc, SBX_E_UNAVAILABLE, "%d %s", rc, err.message);
    cr_expect(strstr(err.message, "is failing (HTTP 500)"), "%s", err.message);
    fake_stop(&fake);
    cr_assert_eq(open_ctx("cube", sec, 0, &err), SBX_OK, "%s", err.message);
    rc = ph_health(prov, &h, &err);
    cr_expect_eq(rc, SBX_E_UNAVAILABLE, "%d %s", rc, err.message);
    cr_expect(strstr(err.message, "cannot reach the CubeAPI"), "%s", err.message);
}
