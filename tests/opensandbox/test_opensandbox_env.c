/*
 * test_opensandbox_env.c - the opensandbox provider's service environment
 * variables (OPEN_SANDBOX_DOMAIN, OPEN_SANDBOX_API_KEY, OPEN_SANDBOX_IMAGE,
 * OPEN_SANDBOX_USE_SERVER_PROXY) against the fake: each used when its key
 * is not configured, the configuration winning, bad values named, the
 * source of each value (the key only as set), and the health op (healthy,
 * refused key, server down, 5xx).
 */
#include "../e2b/fake_service.h"

#include <sbx/sbx.h>

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KEY "os_env_key_0123"

static struct fake_service fake;
static char cfg[128];
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
    if (ctx)
        sbx_close(ctx);
    ctx = NULL;
    prov = NULL;
    if (cfg[0])
        unlink(cfg);
    cfg[0] = '\0';
}

static void down(void)
{
    close_ctx();
    fake_stop(&fake);
}

static int open_ctx(const char *section, int ready, sbx_error *err)
{
    close_ctx();
    snprintf(cfg, sizeof cfg, "/tmp/sbx-os-env-XXXXXX.yaml");
    int fd = mkstemps(cfg, 5);
    cr_assert_geq(fd, 0);
    FILE *f = fdopen(fd, "w");
    fprintf(f, "providers:\n  opensandbox:\n    workspace: /home/user/workspace\n%s", section);
    fclose(f);
    struct sbx_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.config_path = cfg;
    o.plugin_path = SBX_TEST_PROVIDER_DIR;
    o.ignore_environment = true;
    sbx_error_clear(err);
    int rc = sbx_open(&o, &ctx, err);
    if (rc == SBX_OK)
        rc = sbx_provider_lookup(ctx, "opensandbox", &prov, err);
    if (rc == SBX_OK && ready)
        rc = sbx_provider_ready(prov, NULL, err);
    return rc;
}

static char *stats(void)
{
    long st;
    char *s = fake_http(&fake, "GET", "/_fake/stats", NULL, NULL, &st);
    cr_assert_not_null(s);
    return s;
}

static void create_run_destroy(const char *key)
{
    sbx_error err;
    sbx_handle *h = NULL;
    struct sbx_create_options co = {sizeof co, NULL, 0, NULL, NULL, NULL};
    cr_assert_eq(sbx_create(prov, key, &co, NULL, &h, &err), SBX_OK, "create: %s",
                 err.message);
    const char *argv[] = {"true", NULL};
    struct sbx_exec_args a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.argv = argv;
    a.timeout_ms = 20000;
    struct sbx_exec_result res;
    memset(&res, 0, sizeof res);
    res.size = sizeof res;
    cr_assert_eq(sbx_exec(h, &a, &res, NULL, &err), SBX_OK, "exec: %s", err.message);
    cr_expect_eq(sbx_destroy(prov, key, sbx_handle_ref(h), NULL, &err), SBX_OK, "%s",
                 err.message);
    sbx_release(h);
}

static int origin_of(const char *key, const char **value, bool *secret)
{
    const char *k, *env;
    int o;
    for (size_t i = 0; sbx_provider_config_origin(prov, i, &k, &env, &o, value, secret); i++)
        if (!strcmp(k, key))
            return o;
    cr_assert_fail("no key %s", key);
    return -1;
}

static int health(struct sbx_health *h, sbx_error *err)
{
    memset(h, 0, sizeof *h);
    h->size = sizeof *h;
    return sbx_provider_health(prov, NULL, h, err);
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
    char *s = stats();
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
    char *s = stats();
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
    cr_assert_eq(health(&h, &err), SBX_OK, "%s", err.message);
    cr_expect(h.checked);
    cr_expect(strstr(h.detail, "OpenSandbox server at http://127.0.0.1:"), "%s", h.detail);
    cr_expect(strstr(h.detail, "/sandboxes?pageSize=1"), "%s", h.detail);
    char *s = stats();
    cr_expect(strstr(s, "/v1/sandboxes?pageSize=1"), "%s", s);
    cr_expect_null(strstr(s, "\"method\": \"POST\""), "%s", s);
    free(s);

    /* 5xx: sent once, told apart */
    cr_assert_eq(fake_faults(&fake, "[{\"match\":\"/v1/sandboxes\",\"kind\":\"status\","
                                    "\"status\":502,\"times\":1}]"),
                 0);
    int rc = health(&h, &err);
    cr_expect_eq(rc, SBX_E_UNAVAILABLE, "%d %s", rc, err.message);
    cr_expect(strstr(err.message, "is failing (HTTP 502)"), "%s", err.message);

    /* a wrong key */
    setenv("OPEN_SANDBOX_API_KEY", "wrong_os_secret", 1);
    cr_assert_eq(open_ctx(sec, 0, &err), SBX_OK, "%s", err.message);
    rc = health(&h, &err);
    cr_expect_eq(rc, SBX_E_DENIED, "%d %s", rc, err.message);
    cr_expect(strstr(err.message, "the API key was refused (HTTP 401)"), "%s", err.message);
    cr_expect(strstr(err.message, "OPEN_SANDBOX_API_KEY"), "%s", err.message);
    cr_expect_null(strstr(err.message, "wrong_os_secret"), "%s", err.message);

    /* the server down */
    fake_stop(&fake);
    cr_assert_eq(open_ctx(sec, 0, &err), SBX_OK, "%s", err.message);
    rc = health(&h, &err);
    cr_expect_eq(rc, SBX_E_UNAVAILABLE, "%d %s", rc, err.message);
    cr_expect(strstr(err.message, "cannot reach the OpenSandbox server"), "%s", err.message);
}
