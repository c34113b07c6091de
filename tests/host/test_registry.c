/*
 * Host context: which providers are enabled, which is the default, lazy
 * init and admission decided from the descriptor alone.
 */
#include <criterion/criterion.h>
#include <sbx/sbx.h>

#include "registry/provider.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FIXTURES SBX_TEST_BUILD_DIR "/fixture-plugins"
#define SEARCH FIXTURES ":" SBX_TEST_PROVIDER_DIR

static char cfg_path[] = "/tmp/sbx-registry-XXXXXX";

static const char *write_config(const char *yaml)
{
    strcpy(cfg_path, "/tmp/sbx-registry-XXXXXX");
    int fd = mkstemp(cfg_path);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, yaml, strlen(yaml)), (ssize_t)strlen(yaml));
    close(fd);
    return cfg_path;
}

static void cleanup(void)
{
    unlink(cfg_path);
}

static int open_with(const char *yaml, const char *provider, sbx_ctx **ctx,
                     sbx_error *err)
{
    struct sbx_options o = {0};
    o.size = sizeof o;
    o.config_path = write_config(yaml);
    o.plugin_path = SEARCH;
    o.provider = provider;
    o.ignore_environment = true;
    return sbx_open(&o, ctx, err);
}

Test(registry, empty_config_enables_local_as_default, .fini = cleanup)
{
    sbx_ctx *ctx;
    sbx_error err;
    cr_assert_eq(open_with("", NULL, &ctx, &err), SBX_OK, "%s", err.message);
    cr_assert_str_eq(sbx_default_provider(ctx), "local");
    cr_assert_eq(sbx_provider_count(ctx), 1);
    sbx_close(ctx);
}

Test(registry, init_runs_lazily_and_failure_names_provider, .fini = cleanup)
{
    sbx_ctx *ctx;
    sbx_error err;
    cr_assert_eq(open_with("providers:\n  initfail: {}\n", NULL, &ctx, &err),
                 SBX_OK, "%s", err.message);
    sbx_provider *p;
    cr_assert_eq(sbx_provider_lookup(ctx, NULL, &p, &err), SBX_OK);
    cr_assert_not(p->initialized, "open must not run init");
    int rc = sbx_provider_ready(p, NULL, &err);
    cr_assert_neq(rc, SBX_OK);
    cr_assert_eq(err.status, rc);
    cr_assert(strstr(err.message, "\"initfail\""), "%s", err.message);
    cr_assert(strstr(err.message, "init failed"), "%s", err.message);
    cr_assert_not(p->initialized);
    sbx_close(ctx);
}

Test(registry, admission_refuses_from_descriptor_without_init, .fini = cleanup)
{
    sbx_ctx *ctx;
    sbx_error err;
    cr_assert_eq(open_with("providers:\n  initfail: {}\n", NULL, &ctx, &err),
                 SBX_OK, "%s", err.message);
    sbx_provider *p;
    cr_assert_eq(sbx_provider_lookup(ctx, "initfail", &p, &err), SBX_OK);
    cr_assert_eq(sbx_provider_info_caps(sbx_provider_get_info(p)) & SBX_CAP_PACKAGES, 0);
    struct sbx_create_options co = {sizeof co, NULL, SBX_CAP_PACKAGES, NULL, NULL, NULL};
    sbx_handle *h = NULL;
    cr_assert_eq(sbx_create(p, "k", &co, NULL, &h, &err), SBX_E_UNSUPPORTED);
    cr_assert(strstr(err.message, "packages"), "%s", err.message);
    cr_assert(strstr(err.message, "initfail"), "%s", err.message);
    cr_assert_not(p->initialized, "admission must not run init");
    cr_assert_null(h);
    sbx_close(ctx);
}

Test(registry, selected_provider_is_enabled_without_section, .fini = cleanup)
{
    sbx_ctx *ctx;
    sbx_error err;
    cr_assert_eq(open_with("providers:\n  local: {}\n", "good", &ctx, &err),
                 SBX_OK, "%s", err.message);
    cr_assert_str_eq(sbx_default_provider(ctx), "good");
    cr_assert_eq(sbx_provider_count(ctx), 2);
    sbx_close(ctx);
}

Test(registry, unknown_selected_provider_lists_installed, .fini = cleanup)
{
    sbx_ctx *ctx = NULL;
    sbx_error err;
    int rc = open_with("", "nosuchprovider", &ctx, &err);
    cr_assert_eq(rc, SBX_E_NOT_FOUND, "%s", err.message);
    cr_assert(strstr(err.message, "nosuchprovider"), "%s", err.message);
    cr_assert(strstr(err.message, "local"), "installed names listed: %s",
              err.message);
}

Test(registry, default_provider_must_be_enabled, .fini = cleanup)
{
    sbx_ctx *ctx = NULL;
    sbx_error err;
    int rc = open_with("providers:\n  local: {}\ndefault_provider: good\n", NULL,
                       &ctx, &err);
    cr_assert_eq(rc, SBX_E_CONFIG, "%s", err.message);
    cr_assert(strstr(err.message, ":3:"), "line named: %s", err.message);
    cr_assert(strstr(err.message, "default_provider"), "%s", err.message);
}

Test(registry, several_providers_need_a_default, .fini = cleanup)
{
    sbx_ctx *ctx = NULL;
    sbx_error err;
    int rc = open_with("providers:\n  good: {}\n  initfail: {}\n", NULL, &ctx, &err);
    cr_assert_eq(rc, SBX_E_CONFIG, "%s", err.message);
    cr_assert(strstr(err.message, "default_provider"), "%s", err.message);
}

Test(registry, lookup_of_disabled_provider_lists_enabled, .fini = cleanup)
{
    sbx_ctx *ctx;
    sbx_error err;
    cr_assert_eq(open_with("", NULL, &ctx, &err), SBX_OK, "%s", err.message);
    sbx_provider *p;
    cr_assert_eq(sbx_provider_lookup(ctx, "good", &p, &err), SBX_E_NOT_FOUND);
    cr_assert(strstr(err.message, "\"good\" is not enabled (enabled: local)"),
              "%s", err.message);
    sbx_close(ctx);
}

Test(registry, unknown_key_in_provider_section_names_file_line_key,
     .fini = cleanup)
{
    sbx_ctx *ctx = NULL;
    sbx_error err;
    int rc = open_with("providers:\n  local:\n    rooot: /tmp\n", NULL, &ctx, &err);
    cr_assert_eq(rc, SBX_E_CONFIG, "%s", err.message);
    cr_assert(strstr(err.message, cfg_path), "%s", err.message);
    cr_assert(strstr(err.message, ":3:"), "%s", err.message);
    cr_assert(strstr(err.message, "rooot"), "%s", err.message);
}
