/*
 * test_provider_info.c - the consumer's view of a provider
 * (sbx_provider_get_info and the sbx_provider_info_* accessors of
 * sbx/sbx.h): what an enabled provider's descriptor declares, and what a
 * listing entry says when its descriptor could not be loaded. Uses the
 * public header only.
 */
#include <criterion/criterion.h>
#include <sbx/provider.h> /* SBX_ABI_MINOR */
#include <sbx/sbx.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FIXTURES SBX_TEST_BUILD_DIR "/fixture-plugins"
#define SEARCH FIXTURES ":" SBX_TEST_PROVIDER_DIR

static char cfg_path[] = "/tmp/sbx-provider-info-XXXXXX";

/* A context over an empty configuration with the fixture "good" selected. */
static sbx_ctx *open_good(void)
{
    int fd = mkstemp(cfg_path);
    cr_assert(fd >= 0);
    close(fd);
    struct sbx_options o = {0};
    o.size = sizeof o;
    o.config_path = cfg_path;
    o.plugin_path = SEARCH;
    o.provider = "good";
    o.ignore_environment = true;
    sbx_ctx *ctx = NULL;
    sbx_error err;
    int rc = sbx_open(&o, &ctx, &err);
    unlink(cfg_path);
    cr_assert_eq(rc, SBX_OK, "%s", err.message);
    return ctx;
}

Test(provider_info, enabled_provider_reads_its_descriptor)
{
    sbx_ctx *ctx = open_good();
    sbx_provider *p;
    sbx_error err;
    cr_assert_eq(sbx_provider_lookup(ctx, "good", &p, &err), SBX_OK, "%s", err.message);
    const sbx_provider_info *info = sbx_provider_get_info(p);
    cr_assert_not_null(info);
    cr_assert_str_eq(sbx_provider_info_name(info), "good");
    cr_assert_str_eq(sbx_provider_info_path(info), sbx_provider_path(p));
    cr_assert_str_eq(sbx_provider_info_path(info), FIXTURES "/good.so");
    const char *msg = "unset";
    cr_assert_eq(sbx_provider_info_status(info, &msg), SBX_OK);
    cr_assert_null(msg);
    cr_assert_eq(sbx_provider_info_status(info, NULL), SBX_OK);
    cr_assert(sbx_provider_info_enabled(info));
    cr_assert_str_eq(sbx_provider_info_version(info), "1.0.0");
    cr_assert_str_eq(sbx_provider_info_description(info),
                     "a fixture that passes the handshake");
    cr_assert_eq(sbx_provider_info_isolation(info), SBX_ISOLATION_NONE);
    cr_assert_eq(sbx_provider_info_caps(info), SBX_CAP_PACKAGES);
    unsigned major = 99, minor = 99;
    cr_assert(sbx_provider_info_abi(info, &major, &minor));
    cr_assert_eq(major, 1u);
    cr_assert_leq(minor, SBX_ABI_MINOR);
    cr_assert(sbx_provider_info_abi(info, NULL, NULL));

    const char *key, *description;
    int type;
    cr_assert(sbx_provider_info_config_key(info, 0, &key, &type, &description));
    cr_assert_str_eq(key, "greeting");
    cr_assert_eq(type, SBX_CFG_STRING);
    cr_assert_str_eq(description, "a string the fixture accepts");
    cr_assert(sbx_provider_info_config_key(info, 1, &key, &type, NULL));
    cr_assert_str_eq(key, "limit");
    cr_assert_eq(type, SBX_CFG_SIZE);
    cr_assert_not(sbx_provider_info_config_key(info, 2, &key, &type, &description));
    /* The same record every time: owned by the context. */
    cr_assert_eq(sbx_provider_get_info(p), info);
    sbx_close(ctx);
}

struct seen {
    bool good, major;
};

static void visit(void *ud, const sbx_provider_info *info)
{
    struct seen *s = ud;
    const char *name = sbx_provider_info_name(info), *msg = NULL;
    cr_assert_not_null(name);
    int status = sbx_provider_info_status(info, &msg);
    if (!strcmp(name, "good")) {
        s->good = true;
        cr_assert_eq(status, SBX_OK);
        cr_assert_null(msg);
        cr_assert(sbx_provider_info_enabled(info));
        cr_assert_eq(sbx_provider_info_caps(info), SBX_CAP_PACKAGES);
    } else if (!strcmp(name, "major")) {
        /* Refused by the handshake: nothing of its descriptor is shown. */
        s->major = true;
        cr_assert_eq(status, SBX_E_ABI);
        cr_assert(msg && strstr(msg, "host expects 1, plugin has 2"), "%s", msg);
        cr_assert_not(sbx_provider_info_enabled(info));
        cr_assert_null(sbx_provider_info_path(info));
        cr_assert_null(sbx_provider_info_version(info));
        cr_assert_null(sbx_provider_info_description(info));
        cr_assert_eq(sbx_provider_info_isolation(info), -1);
        cr_assert_eq(sbx_provider_info_caps(info), 0);
        unsigned major = 7;
        cr_assert_not(sbx_provider_info_abi(info, &major, NULL));
        cr_assert_eq(major, 7);
        cr_assert_not(sbx_provider_info_config_key(info, 0, NULL, NULL, NULL));
    }
}

Test(provider_info, listing_entries_use_the_same_accessors)
{
    sbx_ctx *ctx = open_good();
    struct seen s = {false, false};
    sbx_error err;
    cr_assert_eq(sbx_list_installed(ctx, visit, &s, &err), SBX_OK, "%s", err.message);
    cr_assert(s.good && s.major);
    sbx_close(ctx);
}
