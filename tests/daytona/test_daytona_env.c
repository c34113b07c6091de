/*
 * test_daytona_env.c - the daytona provider's service environment
 * variables (DAYTONA_API_KEY, DAYTONA_API_URL, DAYTONA_TARGET,
 * DAYTONA_SNAPSHOT, DAYTONA_IMAGE, DAYTONA_AUTO_PAUSE_MINUTES) against the
 * fake: each used when its key is not configured, the configuration
 * winning, bad values named, the source of each value (the key only as
 * set), and the health op (healthy, refused key, API down, 5xx).
 */
#include "fake_daytona.h"
#include "../support/provider_harness.h"

#include <sbx/sbx.h>

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KEY "dt_env_key_0123"

static struct fake_service fake;
static char cfg[PH_PATH_MAX];
static char api[128];
static sbx_ctx *ctx;
static sbx_provider *prov;

static const char *const vars[] = {"DAYTONA_API_KEY", "DAYTONA_API_URL", "DAYTONA_TARGET",
                                   "DAYTONA_SNAPSHOT", "DAYTONA_IMAGE",
                                   "DAYTONA_AUTO_PAUSE_MINUTES", NULL};

static void up(void)
{
    for (size_t i = 0; vars[i]; i++)
        unsetenv(vars[i]);
    cr_assert_eq(fake_daytona_start(&fake, KEY), 0, "cannot start the fake");
    snprintf(api, sizeof api, "%s/api", fake.url);
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
    ph_write_config(cfg, "/tmp/sbx-dt-env-XXXXXX.yaml", "providers:\n  daytona:\n    retries: 2\n%s",
                    section);
    return ph_open(cfg, "daytona", ready, &ctx, &prov, err);
}

static void create_destroy(const char *key)
{
    ph_destroy(prov, key, ph_create(prov, key));
}

static int origin_of(const char *key, const char **value, bool *secret)
{
    return ph_origin(prov, key, NULL, value, secret);
}

TestSuite(daytona_env, .init = up, .fini = down, .timeout = 60);

Test(daytona_env, the_variables_reach_the_api)
{
    setenv("DAYTONA_API_KEY", KEY, 1);
    setenv("DAYTONA_API_URL", api, 1);
    setenv("DAYTONA_TARGET", "eu-env", 1);
    setenv("DAYTONA_SNAPSHOT", "snap-env", 1);
    setenv("DAYTONA_AUTO_PAUSE_MINUTES", "9", 1);
    sbx_error err;
    cr_assert_eq(open_ctx("", 1, &err), SBX_OK, "%s", err.message);
    create_destroy("k-dt-env");
    char *s = fake_stats(&fake);
    cr_expect(strstr(s, "\"target\": \"eu-env\""), "%.3000s", s);
    cr_expect(strstr(s, "\"snapshot\": \"snap-env\""), "%.3000s", s);
    cr_expect(strstr(s, "\"autoStopInterval\": 9"), "%.3000s", s);
    free(s);
    const char *keys[] = {"api_url", "target", "snapshot", "auto_stop_minutes", "api_key"};
    const char *v;
    bool secret;
    for (size_t i = 0; i < 5; i++)
        cr_expect_eq(origin_of(keys[i], &v, &secret), SBX_ORIGIN_ENV, "%s", keys[i]);
    cr_expect(secret);
    cr_expect_null(v, "the key's value was handed out");
    cr_expect_eq(origin_of("image", &v, &secret), SBX_ORIGIN_DEFAULT);

    /* DAYTONA_IMAGE instead of a snapshot: built from it */
    unsetenv("DAYTONA_SNAPSHOT");
    setenv("DAYTONA_IMAGE", "debian:env-slim", 1);
    free(fake_http(&fake, "POST", "/_fake/reset", "", NULL, NULL));
    cr_assert_eq(open_ctx("", 1, &err), SBX_OK, "%s", err.message);
    create_destroy("k-dt-img");
    s = fake_stats(&fake);
    cr_expect(strstr(s, "FROM debian:env-slim"), "%.3000s", s);
    free(s);
}

Test(daytona_env, the_configuration_wins_over_the_variables)
{
    setenv("DAYTONA_API_KEY", KEY, 1);
    setenv("DAYTONA_API_URL", "http://127.0.0.1:1/api", 1);
    setenv("DAYTONA_TARGET", "eu-env", 1);
    setenv("DAYTONA_SNAPSHOT", "snap-env", 1);
    setenv("DAYTONA_AUTO_PAUSE_MINUTES", "9", 1);
    char sec[256];
    snprintf(sec, sizeof sec,
             "    api_url: \"%s\"\n    target: us-cfg\n    snapshot: snap-cfg\n"
             "    auto_stop_minutes: 3\n",
             api);
    sbx_error err;
    cr_assert_eq(open_ctx(sec, 1, &err), SBX_OK, "%s", err.message);
    create_destroy("k-dt-cfg");
    char *s = fake_stats(&fake);
    cr_expect(strstr(s, "\"target\": \"us-cfg\""), "%.3000s", s);
    cr_expect(strstr(s, "\"snapshot\": \"snap-cfg\""), "%.3000s", s);
    cr_expect(strstr(s, "\"autoStopInterval\": 3"), "%.3000s", s);
    cr_expect_null(strstr(s, "snap-env"), "%.3000s", s);
    cr_expect_null(strstr(s, "eu-env"), "%.3000s", s);
    free(s);
    /* a snapshot from the configuration and an image from the environment
     * are two choices: refused, naming both */
    setenv("DAYTONA_IMAGE", "debian:env-slim", 1);
    cr_expect_eq(open_ctx(sec, 1, &err), SBX_E_CONFIG);
    cr_expect(strstr(err.message, "providers.daytona.snapshot and DAYTONA_IMAGE"), "%s",
              err.message);
}

Test(daytona_env, bad_values_name_the_variable)
{
    static const char *const cases[][2] = {
        {"DAYTONA_AUTO_PAUSE_MINUTES", "ten"}, {"DAYTONA_AUTO_PAUSE_MINUTES", "-1"},
        {"DAYTONA_API_URL", "app.daytona.io/api"}, {"DAYTONA_IMAGE", "debian slim"},
        {"DAYTONA_TARGET", "eu/west"},
    };
    sbx_error err;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        setenv("DAYTONA_API_KEY", KEY, 1);
        setenv(cases[i][0], cases[i][1], 1);
        int rc = open_ctx("", 1, &err);
        cr_expect_eq(rc, SBX_E_CONFIG, "%s=%s: %d %s", cases[i][0], cases[i][1], rc,
                     err.message);
        cr_expect(strstr(err.message, cases[i][0]), "%s=%s: %s", cases[i][0], cases[i][1],
                  err.message);
        unsetenv(cases[i][0]);
    }
    setenv("DAYTONA_SNAPSHOT", "a", 1);
    setenv("DAYTONA_IMAGE", "b", 1);
    cr_expect_eq(open_ctx("", 1, &err), SBX_E_CONFIG);
    cr_expect(strstr(err.message, "not both (DAYTONA_SNAPSHOT and DAYTONA_IMAGE)"), "%s",
              err.message);
    cr_expect_eq(open_ctx("    api_key: nope_secret\n", 0, &err), SBX_E_CONFIG);
    cr_expect(strstr(err.message, "DAYTONA_API_KEY"), "%s", err.message);
    cr_expect_null(strstr(err.message, "nope_secret"), "%s", err.message);
}

Test(daytona_env, health_checks_the_api)
{
    char sec[256];
    snprintf(sec, sizeof sec, "    api_url: \"%s\"\n", api);
    setenv("DAYTONA_API_KEY", KEY, 1);
    sbx_error err;
    cr_assert_eq(open_ctx(sec, 0, &err), SBX_OK, "%s", err.message);
    struct sbx_health h;
    cr_assert_eq(ph_health(prov, &h, &err), SBX_OK, "%s", err.message);
    cr_expect(h.checked);
    cr_expect(strstr(h.detail, "Daytona API at http://127.0.0.1:"), "%s", h.detail);
    cr_expect(strstr(h.detail, "/sandbox?limit=1"), "%s", h.detail);
    char *s = fake_stats(&fake);
    cr_expect(strstr(s, "/api/sandbox?limit=1"), "%.3000s", s);
    cr_expect_null(strstr(s, "\"method\": \"POST\""), "%.3000s", s);
    free(s);

    cr_assert_eq(fake_faults(&fake, "[{\"match\":\"/api/sandbox\",\"kind\":\"status\","
                                    "\"status\":500,\"times\":1}]"),
                 0);
    int rc = ph_health(prov, &h, &err);
    cr_expect_eq(rc, SBX_E_UNAVAILABLE, "%d %s", rc, err.message);
    cr_expect(strstr(err.message, "is failing (HTTP 500)"), "%s", err.message);

    setenv("DAYTONA_API_KEY", "wrong_dt_secret", 1);
    cr_assert_eq(open_ctx(sec, 0, &err), SBX_OK, "%s", err.message);
    rc = ph_health(prov, &h, &err);
    cr_expect_eq(rc, SBX_E_DENIED, "%d %s", rc, err.message);
    cr_expect(strstr(err.message, "the API key was refused (HTTP 401)"), "%s", err.message);
    cr_expect(strstr(err.message, "DAYTONA_API_KEY"), "%s", err.message);
    cr_expect_null(strstr(err.message, "wrong_dt_secret"), "%s", err.message);

    fake_stop(&fake);
    setenv("DAYTONA_API_KEY", KEY, 1);
    cr_assert_eq(open_ctx(sec, 0, &err), SBX_OK, "%s", err.message);
    rc = ph_health(prov, &h, &err);
    cr_expect_eq(rc, SBX_E_UNAVAILABLE, "%d %s", rc, err.message);
    cr_expect(strstr(err.message, "cannot reach the Daytona API"), "%s", err.message);
}
