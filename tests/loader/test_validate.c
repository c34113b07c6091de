/*
 * test_validate.c - sbx_plugin_validate on descriptors built in memory, for
 * the refusals that need no file of their own: every core op, every
 * capability's ops, ops beyond the plugin's ops_size, the version string
 * and the descriptor's name.
 */
#include "loader.h"
#include "loader_assert.h"

#include <stdio.h>

#define PATH "/opt/plugins/demo.so"

static int op_init(const struct sbx_host *h, sbx_call *c, void **s) { return 0; }
static void op_fini(void *s) {}
static int op_create(void *s, sbx_call *c, const struct sbx_create_args *a, char *r,
                     sbx_sandbox **o) { return 0; }
static int op_attach(void *s, sbx_call *c, const char *k, const char *r,
                     sbx_sandbox **o) { return 0; }
static int op_exec(sbx_sandbox *b, sbx_call *c, const struct sbx_exec_args *a,
                   struct sbx_exec_result *r) { return 0; }
static int op_read(sbx_sandbox *b, sbx_call *c, const char *p,
                   const struct sbx_sink *s) { return 0; }
static int op_write(sbx_sandbox *b, sbx_call *c, const char *p,
                    const struct sbx_source *s, unsigned m) { return 0; }
static const char *op_root(sbx_sandbox *b) { return "/"; }
static void op_release(sbx_sandbox *b) {}
static int op_destroy(void *s, sbx_call *c, const char *k, const char *r) { return 0; }
static int op_mount_put(sbx_sandbox *b, sbx_call *c, const char *p,
                        const struct sbx_blob *x) { return 0; }
static int op_mount_remove(sbx_sandbox *b, sbx_call *c, const char *p) { return 0; }
static int op_export(sbx_sandbox *b, sbx_call *c, const struct sbx_sink *s) { return 0; }
static int op_skill(sbx_sandbox *b, sbx_call *c, const char *n,
                    const struct sbx_blob *x) { return 0; }
static int op_memory(sbx_sandbox *b, sbx_call *c, const char *s, int w,
                     const struct sbx_source *v) { return 0; }
static int op_egress(sbx_sandbox *b, sbx_call *c, const char *const *a) { return 0; }

static const struct sbx_provider_ops full_ops = {
    op_init, op_fini, op_create, op_attach, op_exec, op_read, op_write, op_root,
    op_release, op_destroy, op_mount_put, op_mount_remove, op_export, op_skill,
    op_memory, op_egress,
};

/* A valid descriptor named "demo" over `ops`. */
static struct sbx_provider_desc demo_desc(const struct sbx_provider_ops *ops,
                                          uint64_t caps)
{
    struct sbx_provider_desc d = {
        SBX_ABI_MAJOR, SBX_ABI_MINOR, (uint32_t)sizeof(struct sbx_provider_desc),
        (uint32_t)sizeof(struct sbx_provider_ops), "demo", "0.1.0", caps, ops,
        NULL, {NULL, NULL, NULL, NULL}};
    return d;
}

/* Refusal for "demo" at PATH, naming provider and file. */
static void expect_abi(const struct sbx_provider_desc *d, sbx_error *err)
{
    sbx_error_clear(err);
    int rc = sbx_plugin_validate(d, "demo", PATH, err);
    assert_status(rc, err, SBX_E_ABI);
    assert_msg_has(err, "provider \"demo\" (" PATH "): ");
}

/* Clear the op at `offset` of a copy of the full table. */
static struct sbx_provider_ops without(size_t offset)
{
    struct sbx_provider_ops ops = full_ops;
    memset((char *)&ops + offset, 0, sizeof(void (*)(void)));
    return ops;
}

Test(validate, full_descriptor_passes)
{
    struct sbx_provider_desc d = demo_desc(&full_ops, SBX_CAP_ALL_1_0);
    sbx_error err;
    int rc = sbx_plugin_validate(&d, "demo", PATH, &err);
    assert_status(rc, &err, SBX_OK);
}

Test(validate, minimal_1_0_sizes_pass)
{
    /* A 1.0 plugin built against exactly the minimum sizes, declaring only
     * PACKAGES (which needs no op), is accepted. */
    struct sbx_provider_ops ops = full_ops;
    ops.mount_put = NULL;
    ops.egress_apply = NULL;
    struct sbx_provider_desc d = demo_desc(&ops, SBX_CAP_PACKAGES);
    d.desc_size = (uint32_t)SBX_DESC_SIZE_1_0;
    d.ops_size = (uint32_t)SBX_OPS_SIZE_1_0;
    sbx_error err;
    int rc = sbx_plugin_validate(&d, "demo", PATH, &err);
    assert_status(rc, &err, SBX_OK);
}

Test(validate, null_descriptor)
{
    sbx_error err;
    expect_abi(NULL, &err);
    assert_msg_has(&err, "returned NULL: expected a provider descriptor");
}

Test(validate, null_ops_table)
{
    struct sbx_provider_desc d = demo_desc(NULL, 0);
    sbx_error err;
    expect_abi(&d, &err);
    assert_msg_has(&err, "ops table is NULL");
}

Test(validate, every_null_core_op_is_named)
{
    static const struct {
        const char *name;
        size_t offset;
    } core[] = {
        {"init", offsetof(struct sbx_provider_ops, init)},
        {"fini", offsetof(struct sbx_provider_ops, fini)},
        {"create", offsetof(struct sbx_provider_ops, create)},
        {"attach", offsetof(struct sbx_provider_ops, attach)},
        {"exec", offsetof(struct sbx_provider_ops, exec)},
        {"read_file", offsetof(struct sbx_provider_ops, read_file)},
        {"write_file", offsetof(struct sbx_provider_ops, write_file)},
        {"root", offsetof(struct sbx_provider_ops, root)},
        {"release", offsetof(struct sbx_provider_ops, release)},
        {"destroy", offsetof(struct sbx_provider_ops, destroy)},
    };
    for (size_t i = 0; i < sizeof core / sizeof core[0]; i++) {
        struct sbx_provider_ops ops = without(core[i].offset);
        struct sbx_provider_desc d = demo_desc(&ops, 0);
        sbx_error err;
        expect_abi(&d, &err);
        char want[128];
        snprintf(want, sizeof want,
                 "core op %s is missing: expected a function, plugin has NULL",
                 core[i].name);
        assert_msg_has(&err, want);
    }
}

Test(validate, every_capability_needs_its_ops)
{
    static const struct {
        uint64_t cap;
        const char *cap_name, *op;
        size_t offset;
    } rules[] = {
        {SBX_CAP_FILE_MOUNTS, "file_mounts", "mount_put",
         offsetof(struct sbx_provider_ops, mount_put)},
        {SBX_CAP_FILE_MOUNTS, "file_mounts", "mount_remove",
         offsetof(struct sbx_provider_ops, mount_remove)},
        {SBX_CAP_OUTPUT_EXPORT, "output_export", "export_outputs",
         offsetof(struct sbx_provider_ops, export_outputs)},
        {SBX_CAP_SKILLS, "skills", "skill_install",
         offsetof(struct sbx_provider_ops, skill_install)},
        {SBX_CAP_MEMORY, "memory", "memory_attach",
         offsetof(struct sbx_provider_ops, memory_attach)},
        {SBX_CAP_EGRESS, "egress", "egress_apply",
         offsetof(struct sbx_provider_ops, egress_apply)},
    };
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
        struct sbx_provider_ops ops = without(rules[i].offset);
        /* Declared alone: refused, naming capability and op. */
        struct sbx_provider_desc d = demo_desc(&ops, rules[i].cap);
        sbx_error err;
        expect_abi(&d, &err);
        char want[160];
        snprintf(want, sizeof want,
                 "capability %s declared but op %s is missing: expected a "
                 "function, plugin has NULL",
                 rules[i].cap_name, rules[i].op);
        assert_msg_has(&err, want);
        /* Not declared: the missing op does not matter. */
        d = demo_desc(&ops, SBX_CAP_ALL_1_0 & ~rules[i].cap);
        int rc = sbx_plugin_validate(&d, "demo", PATH, &err);
        assert_status(rc, &err, SBX_OK);
    }
}

Test(validate, ops_beyond_ops_size_count_as_absent)
{
    /* The table in memory has egress_apply set, but the plugin says its
     * table ends before it: the host must not read past ops_size. */
    struct sbx_provider_desc d = demo_desc(&full_ops, SBX_CAP_EGRESS);
    d.ops_size = (uint32_t)offsetof(struct sbx_provider_ops, egress_apply);
    sbx_error err;
    expect_abi(&d, &err);
    char want[160];
    snprintf(want, sizeof want,
             "capability egress declared but op egress_apply is absent: expected "
             "an ops table of at least %zu bytes, plugin has %u",
             sizeof(struct sbx_provider_ops), d.ops_size);
    assert_msg_has(&err, want);
}

Test(validate, packages_needs_no_op)
{
    struct sbx_provider_ops ops = full_ops;
    struct sbx_provider_desc d = demo_desc(&ops, SBX_CAP_PACKAGES);
    d.ops_size = (uint32_t)SBX_OPS_SIZE_1_0;
    sbx_error err;
    int rc = sbx_plugin_validate(&d, "demo", PATH, &err);
    assert_status(rc, &err, SBX_OK);
}

Test(validate, version_must_be_a_short_printable_string)
{
    static const struct {
        const char *version, *shown;
    } bad[] = {
        {NULL, "plugin has NULL"},
        {"", "plugin has \"\""},
        {"1.0\n", "plugin has \"1.0\\x0a\""},
        {"0123456789012345678901234567890123456789012345678901234567890123456789",
         "plugin has \"0123456789"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct sbx_provider_desc d = demo_desc(&full_ops, 0);
        d.version = bad[i].version;
        sbx_error err;
        expect_abi(&d, &err);
        assert_msg_has(&err, "invalid provider version: expected a non-empty "
                             "printable string of at most 64 characters");
        assert_msg_has(&err, bad[i].shown);
    }
}

Test(validate, descriptor_name_must_be_valid)
{
    struct sbx_provider_desc d = demo_desc(&full_ops, 0);
    sbx_error err;
    d.name = NULL;
    expect_abi(&d, &err);
    assert_msg_has(&err, "invalid provider name in descriptor: expected \"demo\"");
    assert_msg_has(&err, "plugin has NULL");

    /* Hostile bytes are escaped, not echoed. */
    d.name = "De\"mo\x1b[2J";
    expect_abi(&d, &err);
    assert_msg_has(&err, "plugin has \"De\\x22mo\\x1b[2J\"");
    cr_assert_null(strchr(err.message, '\x1b'));
}

Test(validate, name_mismatch_names_both)
{
    struct sbx_provider_desc d = demo_desc(&full_ops, 0);
    d.name = "demo2";
    sbx_error err;
    expect_abi(&d, &err);
    assert_msg_has(&err, "name mismatch: expected \"demo\" (the file name), plugin "
                         "has \"demo2\"");
}

Test(validate, invalid_loaded_name_is_an_invalid_argument)
{
    struct sbx_provider_desc d = demo_desc(&full_ops, 0);
    sbx_error err;
    int rc = sbx_plugin_validate(&d, "../demo", PATH, &err);
    assert_status(rc, &err, SBX_E_INVALID);
    assert_msg_has(&err, "invalid provider name \"../demo\"");
}

Test(validate, larger_sizes_from_the_same_minor_are_accepted)
{
    /* A plugin may have been built with padding or members this host does
     * not read; only the minimum matters. */
    struct sbx_provider_desc d = demo_desc(&full_ops, 0);
    d.desc_size += 64;
    d.ops_size += 64;
    sbx_error err;
    int rc = sbx_plugin_validate(&d, "demo", PATH, &err);
    assert_status(rc, &err, SBX_OK);
}

Test(validate, prefix_checks_come_before_reading_other_members)
{
    /* With a wrong major, nothing past the frozen prefix is trusted: the
     * name below would be a mismatch, but the major is what is reported. */
    struct sbx_provider_desc d = demo_desc(NULL, UINT64_C(1) << 60);
    d.abi_major = 7;
    d.abi_minor = 3;
    d.name = "zzz";
    sbx_error err;
    expect_abi(&d, &err);
    assert_msg_has(&err, "ABI major version mismatch: host expects 1, plugin has 7 "
                         "(plugin ABI 7.3)");
}

Test(name_valid, accepts_and_rejects)
{
    cr_assert(sbx_plugin_name_valid("docker"));
    cr_assert(sbx_plugin_name_valid("my_backend-2"));
    cr_assert(sbx_plugin_name_valid("0"));
    cr_assert_not(sbx_plugin_name_valid(NULL));
    cr_assert_not(sbx_plugin_name_valid(""));
    cr_assert_not(sbx_plugin_name_valid("Docker"));
    cr_assert_not(sbx_plugin_name_valid("a.b"));
    cr_assert_not(sbx_plugin_name_valid("a/b"));
    cr_assert_not(sbx_plugin_name_valid(".."));
    char name[66];
    memset(name, 'a', 64);
    name[64] = '\0';
    cr_assert(sbx_plugin_name_valid(name));
    name[64] = 'a';
    name[65] = '\0';
    cr_assert_not(sbx_plugin_name_valid(name));
}
