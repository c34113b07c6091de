/*
 * test_cli_env_health.c - a remote provider as the CLI shows it, against
 * the fake E2B service: `sbx check` reports where each value came from
 * (config, env VAR, default) and never prints the API key, and `sbx
 * health --json` tells a healthy service from a refused key, a service
 * that is down and one answering 5xx.
 */
#include "cli_harness.h"

#include "../e2b/fake_service.h"

#include <criterion/criterion.h>
#include <json-c/json.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY "e2b_cli_secret_0123"

static struct cli_env env;
static struct fake_service fake;

static void setup(void)
{
    cli_env_init(&env);
    cr_assert_eq(fake_start(&fake, "e2b", KEY), 0, "cannot start the fake");
}

static void teardown(void)
{
    fake_stop(&fake);
    cli_env_fini(&env);
}

TestSuite(cli_env_health, .init = setup, .fini = teardown, .timeout = 60);

Test(cli_env_health, check_names_each_source_and_hides_the_key)
{
    char yaml[512];
    snprintf(yaml, sizeof yaml,
             "default_provider: e2b\nproviders:\n  e2b:\n    envd_url: \"%s\"\n"
             "    template: tpl-cfg\n",
             fake.url);
    cli_env_write_config(&env, yaml);
    cli_env_setenv(&env, "E2B_API_KEY", KEY);
    cli_env_setenv(&env, "E2B_API_URL", fake.url);
    cli_env_setenv(&env, "E2B_TEMPLATE_ID", "tpl-env");
    struct cli_result r;
    cli_run(&env, (const char *[]){"check", "--init", NULL}, NULL, 30000, &r);
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    char want[256];
    snprintf(want, sizeof want, "api_url            %s  [env E2B_API_URL]", fake.url);
    cr_expect(strstr(r.out, want), "%s", r.out);
    cr_expect(strstr(r.out, "template           tpl-cfg  [config]"), "%s", r.out);
    cr_expect(strstr(r.out, "domain             (default)  [default; E2B_DOMAIN not set]"),
              "%s", r.out);
    cr_expect(strstr(r.out, "api_key            set  [env E2B_API_KEY]"), "%s", r.out);
    cr_expect_null(strstr(r.out, KEY), "the key was printed: %s", r.out);
    cr_expect_null(strstr(r.err, KEY), "the key was printed: %s", r.err);
    cli_result_free(&r);
    /* a URL's user info is a credential too */
    cli_env_setenv(&env, "E2B_API_URL", "https://user:url_secret@e2b.invalid/api");
    cli_run(&env, (const char *[]){"check", NULL}, NULL, 30000, &r);
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_expect(strstr(r.out, "https://***@e2b.invalid/api  [env E2B_API_URL]"), "%s", r.out);
    cr_expect_null(strstr(r.out, "url_secret"), "%s", r.out);
    cli_result_free(&r);
    /* without the key: unset, and plain check (no init) still passes */
    cli_env_setenv(&env, "E2B_API_KEY", "");
    cli_run(&env, (const char *[]){"check", NULL}, NULL, 30000, &r);
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_expect(strstr(r.out, "api_key            unset  [default; E2B_API_KEY not set]"), "%s",
              r.out);
    cli_result_free(&r);
}

/* Run `sbx health e2b --json`; the one object of its array (owned by *arr). */
static json_object *health_json(int want_status, json_object **arr)
{
    struct cli_result r;
    cli_run(&env, (const char *[]){"health", "e2b", "--json", NULL}, NULL, 30000, &r);
    cr_assert_eq(r.status, want_status, "%s%s", r.out, r.err);
    cr_expect_null(strstr(r.out, KEY), "%s", r.out);
    *arr = json_tokener_parse(r.out);
    cr_assert(*arr && json_object_is_type(*arr, json_type_array) &&
                  json_object_array_length(*arr) == 1,
              "%s", r.out);
    cli_result_free(&r);
    return json_object_array_get_idx(*arr, 0);
}

static const char *str_of(json_object *o, const char *k)
{
    json_object *v;
    return json_object_object_get_ex(o, k, &v) ? json_object_get_string(v) : NULL;
}

static void e2b_config(const char *api_url)
{
    char yaml[512];
    snprintf(yaml, sizeof yaml,
             "default_provider: e2b\nproviders:\n  e2b:\n    api_url: \"%s\"\n"
             "    envd_url: \"%s\"\n    retries: 3\n",
             api_url, fake.url);
    cli_env_write_config(&env, yaml);
}

Test(cli_env_health, health_json_healthy_refused_down_and_failing)
{
    e2b_config(fake.url);
    cli_env_setenv(&env, "E2B_API_KEY", KEY);
    json_object *a, *o, *v;
    o = health_json(0, &a);
    cr_expect(json_object_object_get_ex(o, "ok", &v) && json_object_get_boolean(v));
    cr_expect(json_object_object_get_ex(o, "checked", &v) && json_object_get_boolean(v));
    cr_expect(str_of(o, "detail") && strstr(str_of(o, "detail"), "E2B API at http://127.0.0.1:"),
              "%s", str_of(o, "detail"));
    json_object_put(a);

    /* 5xx */
    cr_assert_eq(fake_faults(&fake, "[{\"match\":\"/v2/sandboxes\",\"kind\":\"status\","
                                    "\"status\":503,\"times\":1}]"),
                 0);
    o = health_json(1, &a);
    cr_expect(str_of(o, "error") && strstr(str_of(o, "error"), "is failing (HTTP 503)"), "%s",
              str_of(o, "error"));
    json_object_put(a);

    /* a refused key */
    cli_env_setenv(&env, "E2B_API_KEY", "wrong_cli_value");
    o = health_json(1, &a);
    cr_expect(str_of(o, "error") &&
                  strstr(str_of(o, "error"), "the API key was refused (HTTP 401)"),
              "%s", str_of(o, "error"));
    cr_expect_null(strstr(str_of(o, "error"), "wrong_cli_value"));
    json_object_put(a);

    /* the service down */
    cli_env_setenv(&env, "E2B_API_KEY", KEY);
    e2b_config("http://127.0.0.1:1");
    o = health_json(1, &a);
    cr_expect(str_of(o, "error") &&
                  strstr(str_of(o, "error"), "cannot reach the E2B API at http://127.0.0.1:1"),
              "%s", str_of(o, "error"));
    json_object_put(a);
}
