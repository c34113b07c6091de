/*
 * test_load.c - sbxh_plugin_load against real fixture plugins: one test per
 * refusal, each checking the status and that the message names the
 * provider, the file and the expected and actual values.
 */
#include "registry/loader.h"
#include "loader_assert.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define FIXTURES SBX_TEST_FIXTURE_DIR

/* A record with recognisable contents, to check failures leave it alone. */
static char sentinel_name[] = "sentinel";

static struct sbx_plugin sentinel(void)
{
    struct sbx_plugin p = {sentinel_name, sentinel_name, NULL, sentinel_name};
    return p;
}

/* Load `name` from the fixture directory, expecting a refusal with `want`;
 * checks the record is untouched and the message names provider and file. */
static void expect_refusal(const char *name, int want, sbx_error *err)
{
    struct sbx_plugin p = sentinel();
    sbx_error_clear(err);
    int rc = sbxh_plugin_load(FIXTURES, name, &p, err);
    assert_status(rc, err, want);
    cr_assert_eq(err->status, want);
    cr_assert_eq(p.name, sentinel_name, "record changed on failure");
    cr_assert_eq(p.path, sentinel_name, "record changed on failure");
    cr_assert_null(p.desc, "record changed on failure");

    char who[128], file[4096];
    snprintf(who, sizeof who, "provider \"%s\"", name);
    snprintf(file, sizeof file, "%s/%s.so", FIXTURES, name);
    assert_msg_has(err, who);
    assert_msg_has(err, file);
}

Test(load, good_plugin_loads)
{
    struct sbx_plugin p = {0};
    sbx_error err;
    sbx_error_clear(&err);
    int rc = sbxh_plugin_load(FIXTURES, "good", &p, &err);
    assert_status(rc, &err, SBX_OK);
    cr_assert_str_eq(p.name, "good");
    cr_assert_str_eq(p.path, FIXTURES "/good.so");
    cr_assert_not_null(p.dl);
    cr_assert_not_null(p.desc);
    cr_assert_str_eq(p.desc->name, "good");
    cr_assert_str_eq(p.desc->version, "1.0.0");
    cr_assert_eq(p.desc->abi_major, SBX_ABI_MAJOR);
    cr_assert_eq(p.desc->caps, SBX_CAP_PACKAGES);
    cr_assert_str_eq(sbxh_config_key_at(p.desc->config_keys, 0)->key, "greeting");
    sbxh_plugin_clear(&p);
    cr_assert_null(p.name);
    cr_assert_null(p.path);
}

Test(load, every_capability_with_its_ops_loads)
{
    struct sbx_plugin p = {0};
    sbx_error err;
    int rc = sbxh_plugin_load(FIXTURES, "allcaps", &p, &err);
    assert_status(rc, &err, SBX_OK);
    cr_assert_eq(p.desc->caps, SBX_CAP_ALL_1_0);
    sbxh_plugin_clear(&p);
}

Test(load, failing_init_is_not_run_by_the_loader)
{
    /* initfail's descriptor is valid; only its init fails. Loading must
     * succeed because the loader runs nothing but describe. */
    struct sbx_plugin p = {0};
    sbx_error err;
    int rc = sbxh_plugin_load(FIXTURES, "initfail", &p, &err);
    assert_status(rc, &err, SBX_OK);
    cr_assert_str_eq(p.desc->name, "initfail");
    sbxh_plugin_clear(&p);
}

Test(load, unknown_name_lists_installed_providers)
{
    struct sbx_plugin p = sentinel();
    sbx_error err;
    int rc = sbxh_plugin_load(FIXTURES, "nosuch", &p, &err);
    assert_status(rc, &err, SBX_E_NOT_FOUND);
    cr_assert_eq(p.name, sentinel_name);
    assert_msg_has(&err, "provider \"nosuch\"");
    assert_msg_has(&err, "nosuch.so");
    assert_msg_has(&err, "\"" FIXTURES "\"");
    assert_msg_has(&err, "installed providers: allcaps, capnoops, ctor, garbage, good, "
                         "initfail, linkshost, major, minor, mismatch, nosym, "
                         "nullcore, nulldesc, overlap, slowinit, smalldesc, smallops, "
                         "unknowncap");
}

Test(load, empty_search_path_lists_none)
{
    struct sbx_plugin p = sentinel();
    sbx_error err;
    int rc = sbxh_plugin_load("", "good", &p, &err);
    assert_status(rc, &err, SBX_E_NOT_FOUND);
    assert_msg_has(&err, "provider \"good\"");
    assert_msg_has(&err, "installed providers: none");
    rc = sbxh_plugin_load(NULL, "good", &p, &err);
    assert_status(rc, &err, SBX_E_NOT_FOUND);
    cr_assert_eq(p.name, sentinel_name);
}

Test(load, invalid_names_are_refused_before_any_lookup)
{
    char long_name[66]; /* 65 characters: one too many */
    memset(long_name, 'a', 65);
    long_name[65] = '\0';
    const char *bad[] = {"../fixture-plugins/good", "good/", "Good", "", "a b",
                         "good.so", long_name};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct sbx_plugin p = sentinel();
        sbx_error err;
        int rc = sbxh_plugin_load(FIXTURES, bad[i], &p, &err);
        assert_status(rc, &err, SBX_E_INVALID);
        assert_msg_has(&err, "invalid provider name");
        cr_assert_eq(p.name, sentinel_name);
    }
    struct sbx_plugin p = sentinel();
    sbx_error err;
    int rc = sbxh_plugin_load(FIXTURES, NULL, &p, &err);
    assert_status(rc, &err, SBX_E_INVALID);
    /* 64 characters is the longest valid name: not found, not invalid. */
    long_name[64] = '\0';
    rc = sbxh_plugin_load(FIXTURES, long_name, &p, &err);
    assert_status(rc, &err, SBX_E_NOT_FOUND);
}

Test(load, missing_file_behind_a_symlink)
{
    sbx_error err;
    expect_refusal("missing", SBX_E_NOT_FOUND, &err);
    assert_msg_has(&err, "file is missing");
}

Test(load, not_a_regular_file)
{
    sbx_error err;
    expect_refusal("dir", SBX_E_ABI, &err);
    assert_msg_has(&err, "not a regular file");
    assert_msg_has(&err, "expected a shared object, found a directory");
}

Test(load, dlopen_failure_includes_dlerror)
{
    sbx_error err;
    expect_refusal("garbage", SBX_E_ABI, &err);
    assert_msg_has(&err, "cannot load shared object");
    /* glibc's dlerror() text for a file that is not ELF */
    assert_msg_has(&err, "invalid ELF header");
}

Test(load, missing_entry_symbol)
{
    sbx_error err;
    expect_refusal("nosym", SBX_E_ABI, &err);
    assert_msg_has(&err, "entry point sbx_provider_describe() not found");
    /* dlerror() names the symbol too */
    assert_msg_has(&err, "undefined symbol: sbx_provider_describe");
}

Test(load, describe_returning_null)
{
    sbx_error err;
    expect_refusal("nulldesc", SBX_E_ABI, &err);
    assert_msg_has(&err, "sbx_provider_describe() returned NULL");
}

Test(load, abi_major_mismatch)
{
    sbx_error err;
    expect_refusal("major", SBX_E_ABI, &err);
    assert_msg_has(&err, "ABI major version mismatch: host expects 1, plugin has 2");
}

Test(load, newer_abi_minor)
{
    sbx_error err;
    expect_refusal("minor", SBX_E_ABI, &err);
    /* the fixture claims the minor after this header's */
    assert_msg_has(&err, "ABI minor version too new: host supports up to 1.2, "
                         "plugin requires 1.3");
}

Test(load, descriptor_too_small)
{
    sbx_error err;
    expect_refusal("smalldesc", SBX_E_ABI, &err);
    char want[128];
    snprintf(want, sizeof want,
             "descriptor size too small: host expects at least %zu bytes (ABI 1.0), "
             "plugin has 16",
             (size_t)SBX_DESC_SIZE_1_0);
    assert_msg_has(&err, want);
}

Test(load, ops_table_too_small)
{
    sbx_error err;
    expect_refusal("smallops", SBX_E_ABI, &err);
    char want[128];
    snprintf(want, sizeof want,
             "ops table size too small: host expects at least %zu bytes (ABI 1.0), "
             "plugin has %zu",
             (size_t)SBX_OPS_SIZE_1_0, offsetof(struct sbx_provider_ops, exec));
    assert_msg_has(&err, want);
}

Test(load, name_mismatch)
{
    sbx_error err;
    expect_refusal("mismatch", SBX_E_ABI, &err);
    assert_msg_has(&err, "name mismatch: expected \"mismatch\" (the file name), "
                         "plugin has \"other\"");
}

Test(load, unknown_capability_bit)
{
    sbx_error err;
    expect_refusal("unknowncap", SBX_E_ABI, &err);
    assert_msg_has(&err, "unknown capability bits 0x10000000000: host knows 0x3fff "
                         "(ABI 1.2), plugin declares 0x10000000020");
}

Test(load, capability_without_its_ops)
{
    sbx_error err;
    expect_refusal("capnoops", SBX_E_ABI, &err);
    assert_msg_has(&err, "capability file_mounts declared but op mount_remove is "
                         "missing: expected a function, plugin has NULL");
}

Test(load, null_core_op)
{
    sbx_error err;
    expect_refusal("nullcore", SBX_E_ABI, &err);
    assert_msg_has(&err, "core op exec is missing: expected a function, plugin has "
                         "NULL");
}

Test(load, refused_plugin_can_be_retried_and_good_one_loads_twice)
{
    /* Refusals leave no state behind: the same refusal repeats, and loading
     * a valid plugin twice gives the same descriptor (it stays mapped). */
    sbx_error err;
    expect_refusal("major", SBX_E_ABI, &err);
    expect_refusal("major", SBX_E_ABI, &err);
    struct sbx_plugin a = {0}, b = {0};
    cr_assert_eq(sbxh_plugin_load(FIXTURES, "good", &a, &err), SBX_OK);
    cr_assert_eq(sbxh_plugin_load(FIXTURES, "good", &b, &err), SBX_OK);
    cr_assert_eq(a.desc, b.desc);
    sbxh_plugin_clear(&a);
    sbxh_plugin_clear(&b);
}

Test(load, provider_linking_the_host_library_is_refused)
{
    sbx_error err;
    expect_refusal("linkshost", SBX_E_ABI, &err);
    assert_msg_has(&err, "links against the host library (needs libsbx.so.");
    assert_msg_has(&err, "expected a provider that links nothing from the host");
}

Test(load, provider_with_a_constructor_is_refused_before_it_runs)
{
#if defined(SBX_PLUGIN_CONSTRUCTOR_CHECK) && !SBX_PLUGIN_CONSTRUCTOR_CHECK
    cr_skip_test("a sanitizer build gives every object file a constructor: the check is off");
#endif
    char marker[] = "/tmp/sbx-ctor-marker-XXXXXX";
    int fd = mkstemp(marker);
    cr_assert_geq(fd, 0);
    close(fd);
    unlink(marker);
    setenv("SBX_TEST_CTOR_MARKER", marker, 1);
    sbx_error err;
    expect_refusal("ctor", SBX_E_ABI, &err);
    unsetenv("SBX_TEST_CTOR_MARKER");
    assert_msg_has(&err, "has ELF constructors, which would run when it is loaded");
    assert_msg_has(&err, "do that work in init");
    cr_assert_eq(access(marker, F_OK), -1, "the constructor ran: %s exists", marker);
    unlink(marker);
}
