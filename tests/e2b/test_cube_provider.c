/*
 * test_cube_provider.c - the cube provider's differences against the fake
 * in CubeSandbox mode: required keys, no key needed, a key sent when
 * given, CubeProxy's 500 for a vanished sandbox mapped to not-found.
 */
#include "fake_service.h"
#include "../support/provider_harness.h"

#include <sbx/sbx.h>

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct fake_service fake;
static char cfg[PH_PATH_MAX];
static sbx_ctx *ctx;
static sbx_provider *prov;

static void down(void)
{
    ph_close(&ctx, &prov);
    fake_stop(&fake);
    ph_remove_config(cfg);
}

static int open_ctx(const char *section, sbx_error *err)
{
    ph_write_config(cfg, "/tmp/sbx-cube-test-XXXXXX.yaml", "providers:\n  cube:\n%s", section);
    return ph_open(cfg, "cube", true, &ctx, &prov, err);
}

TestSuite(cube_provider, .fini = down, .timeout = 60);

Test(cube_provider, template_and_api_url_are_required)
{
    sbx_error err;
    cr_expect_eq(open_ctx("    api_url: http://127.0.0.1:1\n", &err), SBX_E_CONFIG);
    cr_expect(strstr(err.message, "template"), "%s", err.message);
    ph_close(&ctx, &prov);
    ph_remove_config(cfg);
    cr_expect_eq(open_ctx("    template: t\n", &err), SBX_E_CONFIG);
    cr_expect(strstr(err.message, "api_url"), "%s", err.message);
}

Test(cube_provider, key_is_optional_and_sent_when_set)
{
    cr_assert_eq(fake_start(&fake, "cube", "cube_secret"), 0);
    char sec[512];
    snprintf(sec, sizeof sec,
             "    api_url: \"%s\"\n    template: tpl\n    domain: cube.local\n"
             "    proxy_address: 127.0.0.1\n    proxy_port: %d\n",
             fake.url, fake.port);
    unsetenv("CUBE_API_KEY");
    sbx_error err;
    cr_assert_eq(open_ctx(sec, &err), SBX_OK, "%s", err.message);
    sbx_handle *h = NULL;
    struct sbx_create_options co = {sizeof co, NULL, 0, NULL, NULL, NULL};
    /* without a key a CubeAPI with auth refuses: a config error naming the variable */
    int rc = sbx_create(prov, "k", &co, NULL, &h, &err);
    cr_expect_eq(rc, SBX_E_CONFIG, "%d %s", rc, err.message);
    cr_expect(strstr(err.message, "CUBE_API_KEY"), "%s", err.message);
    ph_close(&ctx, &prov);
    ph_remove_config(cfg);
    setenv("CUBE_API_KEY", "cube_secret", 1);
    cr_assert_eq(open_ctx(sec, &err), SBX_OK, "%s", err.message);
    rc = sbx_create(prov, "k", &co, NULL, &h, &err);
    cr_expect_eq(rc, SBX_OK, "%s", err.message);
    unsetenv("CUBE_API_KEY");
    if (h) {
        cr_expect_eq(sbx_destroy(prov, "k", sbx_handle_ref(h), NULL, &err), SBX_OK);
        sbx_release(h);
    }
}

Test(cube_provider, proxy_500_for_a_vanished_sandbox_is_not_found)
{
    cr_assert_eq(fake_start(&fake, "cube", NULL), 0);
    char sec[512];
    snprintf(sec, sizeof sec,
             "    api_url: \"%s\"\n    template: tpl\n    domain: cube.local\n"
             "    proxy_address: 127.0.0.1\n    proxy_port: %d\n",
             fake.url, fake.port);
    sbx_error err;
    cr_assert_eq(open_ctx(sec, &err), SBX_OK, "%s", err.message);
    sbx_handle *h = NULL;
    struct sbx_create_options co = {sizeof co, NULL, 0, NULL, NULL, NULL};
    cr_assert_eq(sbx_create(prov, "k2", &co, NULL, &h, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(fake_faults(&fake, "[{\"match\":\"/process.Process/Start\",\"kind\":\"vanish\"}]"),
                 0);
    const char *argv[] = {"true", NULL};
    struct sbx_exec_args a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.argv = argv;
    struct sbx_exec_result res;
    memset(&res, 0, sizeof res);
    res.size = sizeof res;
    int rc = sbx_exec(h, &a, &res, NULL, &err);
    cr_expect_eq(rc, SBX_E_NOT_FOUND, "%d %s", rc, err.message);
    cr_expect_eq(sbx_destroy(prov, "k2", sbx_handle_ref(h), NULL, &err), SBX_OK);
    sbx_release(h);
}

/* CubeProxy answers 500 for a paused sandbox too: confirmed paused by
 * CubeAPI, it is resumed through connect and the command runs. */
Test(cube_provider, proxy_500_for_a_paused_sandbox_resumes_it)
{
    cr_assert_eq(fake_start(&fake, "cube", NULL), 0);
    char sec[512];
    snprintf(sec, sizeof sec,
             "    api_url: \"%s\"\n    template: tpl\n    domain: cube.local\n"
             "    proxy_address: 127.0.0.1\n    proxy_port: %d\n",
             fake.url, fake.port);
    sbx_error err;
    cr_assert_eq(open_ctx(sec, &err), SBX_OK, "%s", err.message);
    sbx_handle *h = NULL;
    struct sbx_create_options co = {sizeof co, NULL, 0, NULL, NULL, NULL};
    cr_assert_eq(sbx_create(prov, "k3", &co, NULL, &h, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(fake_faults(&fake, "[{\"match\":\"/process.Process/Start\",\"kind\":\"pause\"}]"),
                 0);
    const char *argv[] = {"sh", "-c", "exit 4", NULL};
    struct sbx_exec_args a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.argv = argv;
    struct sbx_exec_result res;
    memset(&res, 0, sizeof res);
    res.size = sizeof res;
    int rc = sbx_exec(h, &a, &res, NULL, &err);
    cr_expect_eq(rc, SBX_OK, "%d %s", rc, err.message);
    cr_expect_eq(res.exit_code, 4);
    cr_expect_eq(sbx_destroy(prov, "k3", sbx_handle_ref(h), NULL, &err), SBX_OK);
    sbx_release(h);
}
