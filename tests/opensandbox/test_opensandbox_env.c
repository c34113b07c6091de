/*
 * test_opensandbox_env.c - the opensandbox provider's service environment
 * variables (OPEN_SANDBOX_DOMAIN, OPEN_SANDBOX_API_KEY, OPEN_SANDBOX_IMAGE,
 * OPEN_SANDBOX_USE_SERVER_PROXY) against the fake: each used when its key
 * is not configured, the configuration winning, bad values named, the
 * source of each value (the key only as set), and the health op (healthy,
 * refused key, server down, 5xx).
 */
#include "../e2b/fake_service.h"
#include "../support/provider_harness.h"

#include <sbx/sbx.h>

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KEY "os_env_key_0123"

static struct fake_service fake;
static char cfg[PH_PATH_MAX];
static sbx_ctx *ctx;
static sbx_provider *prov;

static const char *const vars[] = {"OPEN_SANDBOX_DOMAIN", "OPEN_SANDBOX_API_KEY",
                                   "OPEN_SANDBOX_IMAGE", "OPEN_SANDBOX_USE_SERVER_PROXY", NULL};

static void up(void)
{
    for (size_t i = 0; vars[i]; i++)
        unsetenv(vars[i]);
    cr_assert_eq(fake_start_script(&fake, "tests/opensandbox/fake_opensandbox.py", NULL, KEY), 0,
                 "cannot start the fake");
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

static int open_ctx(const char *section, int ready, sbx_error *err)
{
    close_ctx();
    ph_write_config(cfg, "/tmp/sbx-os-env-XXXXXX.yaml",
                    "providers:\n  opensandbox:\n    workspace: /home/user/workspace\n%s", section);
    return ph_open(cfg, "opensandbox", ready, &ctx, &prov, err);
}

static void create_run_destroy(const char *key)
{
    sbx_error err;
    sbx_handle *h = ph_create(prov, key);
    const char *argv[] = {"true", NULL};
    struct sbx_exec_result res;
    cr_assert_eq(ph_exec_argv(h, argv, &res, NULL, NULL, &err), SBX_OK, "exec: %s", err.message);
    ph_destroy(prov, key, h);
}

static int origin_of(const char *key, const char **value, bool *secret)
{
    return ph_origin(prov, key, NULL, value, secret);
}

TestSuite(opensandbox_env, .init = up, .fini = down, .timeout = 60);

Test(opensandbox_env, the_variables_reach_the_server)
{
    /* host:port, as the SDKs write OPEN_SANDBOX_DOMAIN */
    setenv("OPEN_SANDBOX_DOMAIN", fake.url + strlen("http://"), 1);
    setenv("OPEN_SANDBOX_API_KEY", KEY, 1);
    setenv("OPEN_SANDBOX_IMAGE", "python:3.12-env", 1);
    setenv("OPEN_SANDBOX_USE_SERVER_PROXY", "TRUE", 1);
    sbx_error err;
    cr_assert_eq(open_ctx("", 1, &err), SBX_OK, "%s", err.message);
    create_run_destroy("k-os-env");
    char *s = fake_stats(&fake);
    cr_expect(strstr(s, "\"uri\": \"python:3.12-env\""), "%s", s);
    cr_expect(strstr(s, "use_server_proxy=true"), "the endpoint was not asked for the proxy: %s",
              s);
    free(s);
    const char *v;
    bool secret;
    cr_expect_eq(origin_of("api_url", &v, &secret), SBX_ORIGIN_ENV);
    cr_expect_eq(origin_of("image", &v, &secret), SBX_ORIGIN_ENV);
    cr_expect_str_eq(v, "python:3.12-env");
    cr_expect_eq(origin_of("use_server_proxy", &v, &secret), SBX_ORIGIN_ENV);
    cr_expect_eq(origin_of("api_key", &v, &secret), SBX_ORIGIN_ENV);
    cr_expect(secret);
    cr_expect_null(v);
}

Test(opensandbox_env, the_configuration_wins_over_the_variables)
{
    setenv("OPEN_SANDBOX_DOMAIN", "127.0.0.1:1", 1);
    setenv("OPEN_SANDBOX_API_KEY", KEY, 1);
    setenv("OPEN_SANDBOX_IMAGE", "python:3.12-env", 1);
    setenv("OPEN_SANDBOX_USE_SERVER_PROXY", "true", 1);
    char sec[512];
    snprintf(sec, sizeof sec,
             "    api_url: \"%s\"\n    image: \"alpine:cfg\"\n    use_server_proxy: false\n",
             fake.url);
    sbx_error err;
    cr_assert_eq(open_ctx(sec, 1, &err), SBX_OK, "%s", err.message);
    create_run_destroy("k-os-cfg");
    char *s = fake_stats(&fake);
    cr_expect(strstr(s, "\"uri\": \"alpine:cfg\""), "%s", s);
    cr_expect_null(strstr(s, "python:3.12-env"), "%s", s);
    cr_expect_null(strstr(s, "use_server_proxy=true"), "%s", s);
    free(s);
    const char *v;
    bool secret;
    cr_expect_eq(origin_of("api_url", &v, &secret), SBX_ORIGIN_CONFIG);
    cr_expect_eq(origin_of("image", &v, &secret), SBX_ORIGIN_CONFIG);
    cr_expect_eq(origin_of("use_server_proxy", &v, &secret), SBX_ORIGIN_CONFIG);
}

Test(opensandbox_env, bad_values_name_the_variable)
{
    static const char *const cases[][2] = {
        {"OPEN_SANDBOX_USE_SERVER_PROXY", "maybe"},
        {"OPEN_SANDBOX_IMAGE", "ubuntu latest"},
        {"OPEN_SANDBOX_DOMAIN", "ftp://host:1"},
        {"OPEN_SANDBOX_DOMAIN", "http://"},
    };
    sbx_error err;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        setenv("OPEN_SANDBOX_DOMAIN", fake.url, 1);
        setenv(cases[i][0], cases[i][1], 1);
        int rc = open_ctx("", 1, &err);
        cr_expect_eq(rc, SBX_E_CONFIG, "%s=%s: %d %s", cases[i][0], cases[i][1], rc,
                     err.message);
        cr_expect(strstr(err.message, cases[i][0]), "%s=%s: %s", cases[i][0], cases[i][1],
                  err.message);
        for (size_t j = 0; vars[j]; j++)
            unsetenv(vars[j]);
    }
    cr_expect_eq(open_ctx("    api_key: nope_secret\n", 0, &err), SBX_E_CONFIG);
    cr_expect(strstr(err.message, "OPEN_SANDBOX_API_KEY"), "%s", err.message);
    cr_expect_null(strstr(err.message, "nope_secret"), "%s", err.message);
}

Test(opensandbox_env, health_checks_the_server)
{
    char sec[256];
    snprintf(sec, sizeof sec, "    api_url: \"%s\"\n    retries: 3\n", fake.url);
    setenv("OPEN_SANDBOX_API_KEY", KEY, 1);
    sbx_error err;
    cr_assert_eq(open_ctx(sec, 0, &err), SBX_OK, "%s", err.message);
    struct sbx_health h;
    cr_assert_eq(ph_health(prov, &h, &err), SBX_OK, "%s", err.message);
    cr_expect(h.checked);
    cr_expect(strstr(h.detail, "OpenSandbox server at http://127.0.0.1:"), "%s", h.detail);
    cr_expect(strstr(h.detail, "/sandboxes?pageSize=1"), "%s", h.detail);
    char *s = fake_stats(&fake);
    cr_expect(strstr(s, "/v1/sandboxes?pageSize=1"), "%s", s);
    cr_expect_null(strstr(s, "\"method\": \"POST\""), "%s", s);
    free(s);

    /* 5xx: sent once, told apart */
    cr_assert_eq(fake_faults(&fake, "[{\"match\":\"/v1/sandboxes\",\"kind\":\"status\","
                                    "\"status\":502,\"times\":1}]"),
                 0);
    int rc = ph_health(prov, &h, &err);
    cr_expect_eq(rc, SBX_E_UNAVAILABLE, "%d %s", rc, err.message);
    cr_expect(strstr(err.message, "is failing (HTTP 502)"), "%s", err.message);

    /* a wrong key */
    setenv("OPEN_SANDBOX_API_KEY", "wrong_os_secret", 1);
    cr_assert_eq(open_ctx(sec, 0, &err), SBX_OK, "%s", err.message);
    rc = ph_health(prov, &h, &err);
    cr_expect_eq(rc, SBX_E_DENIED, "%d %s", rc, err.message);
    cr_expect(strstr(err.message, "the API key was refused (HTTP 401)"), "%s", err.message);
    cr_expect(strstr(err.message, "OPEN_SANDBOX_API_KEY"), "%s", err.message);
    cr_expect_null(strstr(err.message, "wrong_os_secret"), "%s", err.message);

    /* the server down */
    fake_stop(&fake);
    cr_assert_eq(open_ctx(sec, 0, &err), SBX_OK, "%s", err.message);
    rc = ph_health(prov, &h, &err);
    cr_expect_eq(rc, SBX_E_UNAVAILABLE, "%d %s", rc, err.message);
    cr_expect(strstr(err.message, "cannot reach the OpenSandbox server"), "%s", err.message);
}
