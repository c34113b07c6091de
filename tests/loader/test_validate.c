/*
 * test_validate.c - sbxh_plugin_validate on descriptors built in memory, for
 * the refusals that need no file of their own: every core op, every
 * capability's ops, ops beyond the plugin's ops_size, the version string
 * and the descriptor's name.
 */
#include "registry/loader.h"
#include "loader_assert.h"

#include <stdio.h>

#define PATH "/opt/plugins/demo.so"

static int op_init(const struct sbx_host *h, sbx_call *c, void **s) { return 0; }
static void op_fini(void *s) {}
static int op_create(void *s, sbx_call *c, const struct sbx_create_args *a, char *r,
                     sbx_sandbox **o) { return 0; }
static int op_attach(void *s, sbx_call *c, const struct sbx_attach_args *a,
                     sbx_sandbox **o) { return 0; }
static int op_exec(sbx_sandbox *b, sbx_call *c, const struct sbx_exec_args *a,
                   struct sbx_exec_result *r) { return 0; }
static int op_read(sbx_sandbox *b, sbx_call *c, const char *p,
                   const struct sbx_sink *s) { return 0; }
static int op_write(sbx_sandbox *b, sbx_call *c, const char *p,
                    const struct sbx_source *s, unsigned m) { return 0; }
static const char *op_root(sbx_sandbox *b) { return "/"; }
static void op_release(sbx_sandbox *b) {}
static int op_destroy(void *s, sbx_call *c, const struct sbx_destroy_args *a) { return 0; }
static int op_mount_put(sbx_sandbox *b, sbx_call *c, const char *p,
                        const struct sbx_blob *x) { return 0; }
static int op_mount_remove(sbx_sandbox *b, sbx_call *c, const char *p) { return 0; }
static int op_export(sbx_sandbox *b, sbx_call *c, const struct sbx_sink *s) { return 0; }
static int op_skill(sbx_sandbox *b, sbx_call *c, const char *n,
                    const struct sbx_blob *x) { return 0; }
static int op_egress_set(sbx_sandbox *b, sbx_call *c,
                         const struct sbx_egress_policy *p) { return 0; }
static int op_egress_get(sbx_sandbox *b, sbx_call *c,
                         struct sbx_egress_report *r) { return 0; }
static int op_memory_load(sbx_sandbox *b, sbx_call *c, const char *s,
                          const struct sbx_source *t) { return 0; }
static int op_memory_diff(sbx_sandbox *b, sbx_call *c, const char *s, uint32_t f,
                          const struct sbx_memory_changes *o) { return 0; }
static int op_memory_accept(sbx_sandbox *b, sbx_call *c, const char *s) { return 0; }
static int op_group_add(sbx_sandbox *b, sbx_call *c,
                        const struct sbx_group_spec *g) { return 0; }
static int op_user_add(sbx_sandbox *b, sbx_call *c,
                       const struct sbx_user_spec *u) { return 0; }
static int op_proc_start(sbx_sandbox *b, sbx_call *c, const struct sbx_proc_spec *s,
                         char id[SBX_PROC_ID_MAX]) { return 0; }
static int op_proc_write(sbx_sandbox *b, sbx_call *c, const char *id, const void *d,
                         size_t n, uint32_t f) { return 0; }
static int op_proc_read(sbx_sandbox *b, sbx_call *c, const char *id,
                        const struct sbx_proc_read_args *a,
                        struct sbx_proc_read_result *r) { return 0; }
static int op_proc_signal(sbx_sandbox *b, sbx_call *c, const char *id, int s) { return 0; }
static int op_proc_list(sbx_sandbox *b, sbx_call *c,
                        const struct sbx_proc_list_sink *s) { return 0; }
static int op_proc_resize(sbx_sandbox *b, sbx_call *c, const char *id, uint16_t r,
                          uint16_t k) { return 0; }
static int op_file_list(sbx_sandbox *b, sbx_call *c, const char *p,
                        const struct sbx_file_list_sink *s) { return 0; }
static int op_file_stat(sbx_sandbox *b, sbx_call *c, const char *p,
                        struct sbx_file_info *o) { return 0; }
static int op_file_mkdir(sbx_sandbox *b, sbx_call *c, const char *p, unsigned m,
                         uint32_t f) { return 0; }
static int op_file_remove(sbx_sandbox *b, sbx_call *c, const char *p, uint32_t f)
{ return 0; }
static int op_file_rename(sbx_sandbox *b, sbx_call *c, const char *f, const char *t,
                          uint32_t g) { return 0; }
static int op_port_resolve(sbx_sandbox *b, sbx_call *c, uint16_t p,
                           struct sbx_port_endpoint *o) { return 0; }
static int op_pause(sbx_sandbox *b, sbx_call *c, uint32_t f) { return 0; }
static int op_resume(sbx_sandbox *b, sbx_call *c) { return 0; }
static int op_fork(sbx_sandbox *b, sbx_call *c, const struct sbx_create_args *a, char *r,
                   sbx_sandbox **o) { return 0; }
static void op_stray(void) {}

static const struct sbx_provider_ops full_ops = {
    op_init, op_fini, op_create, op_attach, op_exec, op_read, op_write, op_root,
    op_release, op_destroy, op_mount_put, op_mount_remove, op_export, op_skill,
    {NULL, NULL}, op_egress_set, op_egress_get, op_memory_load, op_memory_diff,
    op_memory_accept, op_group_add, op_user_add, NULL,
    /* ABI 1.2 */
    op_proc_start, op_proc_write, op_proc_read, op_proc_signal, op_proc_list,
    op_proc_resize, op_file_list, op_file_stat, op_file_mkdir, op_file_remove,
    op_file_rename, op_port_resolve, op_pause, op_resume, NULL, op_fork,
};

/* A valid descriptor named "demo" over `ops`. */
static struct sbx_provider_desc demo_desc(const struct sbx_provider_ops *ops,
                                          uint64_t caps)
{
    struct sbx_provider_desc d = {
        SBX_ABI_MAJOR, SBX_ABI_MINOR, (uint32_t)sizeof(struct sbx_provider_desc),
        (uint32_t)sizeof(struct sbx_provider_ops), "demo", "0.1.0",
        "a descriptor built in memory", SBX_ISOLATION_NONE, 0, caps, ops,
        NULL, {NULL, NULL, NULL, NULL}};
    return d;
}

/* Refusal for "demo" at PATH, naming provider and file. */
static void expect_abi(const struct sbx_provider_desc *d, sbx_error *err)
{
    sbx_error_clear(err);
    int rc = sbxh_plugin_validate(d, "demo", PATH, err);
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
    int rc = sbxh_plugin_validate(&d, "demo", PATH, &err);
    assert_status(rc, &err, SBX_OK);
}

Test(validate, minimal_1_0_sizes_pass)
{
    /* A 1.0 plugin built against exactly the minimum sizes, declaring only
     * PACKAGES (which needs no op), is accepted. */
    struct sbx_provider_ops ops = full_ops;
    ops.mount_put = NULL;
    ops.skill_install = NULL;
    struct sbx_provider_desc d = demo_desc(&ops, SBX_CAP_PACKAGES);
    d.desc_size = (uint32_t)SBX_DESC_SIZE_1_0;
    d.ops_size = (uint32_t)SBX_OPS_SIZE_1_0;
    sbx_error err;
    int rc = sbxh_plugin_validate(&d, "demo", PATH, &err);
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
        int rc = sbxh_plugin_validate(&d, "demo", PATH, &err);
        assert_status(rc, &err, SBX_OK);
    }
}

Test(validate, ops_beyond_ops_size_count_as_absent)
{
    /* The table in memory has skill_install set, but the plugin says its
     * table ends before it: the host must not read past ops_size. */
    struct sbx_provider_desc d = demo_desc(&full_ops, SBX_CAP_SKILLS);
    d.ops_size = (uint32_t)offsetof(struct sbx_provider_ops, skill_install);
    sbx_error err;
    expect_abi(&d, &err);
    char want[160];
    snprintf(want, sizeof want,
             "capability skills declared but op skill_install is absent: expected "
             "an ops table of at least %zu bytes, plugin has %u",
             offsetof(struct sbx_provider_ops, skill_install) + sizeof(void (*)(void)),
             d.ops_size);
    assert_msg_has(&err, want);
}

Test(validate, packages_needs_no_op)
{
    struct sbx_provider_ops ops = full_ops;
    struct sbx_provider_desc d = demo_desc(&ops, SBX_CAP_PACKAGES);
    d.ops_size = (uint32_t)SBX_OPS_SIZE_1_0;
    sbx_error err;
    int rc = sbxh_plugin_validate(&d, "demo", PATH, &err);
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
    int rc = sbxh_plugin_validate(&d, "../demo", PATH, &err);
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
    int rc = sbxh_plugin_validate(&d, "demo", PATH, &err);
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

Test(validate, memory_and_egress_bits_wait_for_1_1)
{
    /* The bits keep their numbers, but 1.0 has no ops for them: a 1.0
     * descriptor may claim neither. */
    uint64_t bits[] = {SBX_CAP_MEMORY, SBX_CAP_EGRESS, SBX_CAP_USERS};
    for (size_t i = 0; i < 3; i++) {
        struct sbx_provider_desc d = demo_desc(&full_ops, bits[i]);
        d.abi_minor = 0;
        sbx_error err;
        expect_abi(&d, &err);
        char want[96];
        snprintf(want, sizeof want, "unknown capability bits 0x%llx: host knows 0x27",
                 (unsigned long long)bits[i]);
        assert_msg_has(&err, want);
    }
}

Test(validate, memory_and_users_in_1_1_need_their_ops)
{
    struct {
        uint64_t bit;
        size_t last;      /* offset of the bit's last op */
        const char *first, *last_name;
    } cases[] = {
        {SBX_CAP_MEMORY, offsetof(struct sbx_provider_ops, memory_accept), "memory_load",
         "memory_accept"},
        {SBX_CAP_USERS, offsetof(struct sbx_provider_ops, user_add), "group_add",
         "user_add"},
    };
    for (size_t i = 0; i < 2; i++) {
        struct sbx_provider_desc d = demo_desc(&full_ops, cases[i].bit);
        sbx_error err;
        cr_expect_eq(sbxh_plugin_validate(&d, "demo", "/x/demo.so", &err), SBX_OK, "%s",
                     err.message);
        /* An egress-era 1.1 table ends before the bit's ops. */
        d.ops_size = (uint32_t)SBX_OPS_SIZE_EGRESS_1_1;
        expect_abi(&d, &err);
        char want[128];
        snprintf(want, sizeof want, "capability %s declared but op %s is absent",
                 sbx_cap_name(cases[i].bit), cases[i].first);
        assert_msg_has(&err, want);
        /* One that stops one op short names that op. */
        d.ops_size = (uint32_t)cases[i].last;
        expect_abi(&d, &err);
        snprintf(want, sizeof want, "op %s is absent: expected an ops table of at least %zu",
                 cases[i].last_name, cases[i].last + sizeof(void (*)(void)));
        assert_msg_has(&err, want);
    }
    cr_expect_eq(SBX_OPS_SIZE_MEMORY_1_1,
                 offsetof(struct sbx_provider_ops, memory_accept) + sizeof(void *));
    cr_expect_eq(SBX_OPS_SIZE_USERS_1_1 + sizeof(void *), SBX_OPS_SIZE_MEMORY_WATCH_1_1);
}

/* Written out by hand rather than read from host/registry/capabilities.c,
 * so that a wrong row there is caught: each 1.2 capability and every op it
 * needs, in the order the loader checks them. */
static const struct {
    uint64_t bit;
    const char *cap, *op;
    size_t offset;
} ops_1_2[] = {
    {SBX_CAP_PROCESSES, "processes", "proc_start",
     offsetof(struct sbx_provider_ops, proc_start)},
    {SBX_CAP_PROCESSES, "processes", "proc_write",
     offsetof(struct sbx_provider_ops, proc_write)},
    {SBX_CAP_PROCESSES, "processes", "proc_read",
     offsetof(struct sbx_provider_ops, proc_read)},
    {SBX_CAP_PROCESSES, "processes", "proc_signal",
     offsetof(struct sbx_provider_ops, proc_signal)},
    {SBX_CAP_PROCESSES, "processes", "proc_list",
     offsetof(struct sbx_provider_ops, proc_list)},
    {SBX_CAP_PTY, "pty", "proc_resize", offsetof(struct sbx_provider_ops, proc_resize)},
    {SBX_CAP_FILE_OPS, "file_ops", "file_list", offsetof(struct sbx_provider_ops, file_list)},
    {SBX_CAP_FILE_OPS, "file_ops", "file_stat", offsetof(struct sbx_provider_ops, file_stat)},
    {SBX_CAP_FILE_OPS, "file_ops", "file_mkdir",
     offsetof(struct sbx_provider_ops, file_mkdir)},
    {SBX_CAP_FILE_OPS, "file_ops", "file_remove",
     offsetof(struct sbx_provider_ops, file_remove)},
    {SBX_CAP_FILE_OPS, "file_ops", "file_rename",
     offsetof(struct sbx_provider_ops, file_rename)},
    {SBX_CAP_PORTS, "ports", "port_resolve", offsetof(struct sbx_provider_ops, port_resolve)},
    {SBX_CAP_PAUSE, "pause", "pause", offsetof(struct sbx_provider_ops, pause)},
    {SBX_CAP_PAUSE, "pause", "resume", offsetof(struct sbx_provider_ops, resume)},
    {SBX_CAP_FORK, "fork", "fork", offsetof(struct sbx_provider_ops, fork)},
};

/* The bits a declaration of `bit` comes with: a PTY needs processes. */
static uint64_t with_needs(uint64_t bit)
{
    return bit == SBX_CAP_PTY ? SBX_CAP_PTY | SBX_CAP_PROCESSES : bit;
}

Test(validate, processes_pty_file_ops_and_ports_in_1_2_need_their_ops)
{
    for (size_t i = 0; i < sizeof ops_1_2 / sizeof ops_1_2[0]; i++) {
        sbx_error err;
        char want[192];
        uint64_t caps = with_needs(ops_1_2[i].bit);
        cr_expect_str_eq(sbx_cap_name(ops_1_2[i].bit), ops_1_2[i].cap);
        /* With every op: accepted. */
        struct sbx_provider_desc d = demo_desc(&full_ops, caps);
        cr_expect_eq(sbxh_plugin_validate(&d, "demo", PATH, &err), SBX_OK, "%s: %s",
                     ops_1_2[i].cap, err.message);
        /* The op NULL: refused, naming capability and op. */
        struct sbx_provider_ops ops = without(ops_1_2[i].offset);
        d = demo_desc(&ops, caps);
        expect_abi(&d, &err);
        snprintf(want, sizeof want,
                 "capability %s declared but op %s is missing: expected a function, "
                 "plugin has NULL",
                 ops_1_2[i].cap, ops_1_2[i].op);
        assert_msg_has(&err, want);
        /* Not declared (nor what needs it): the NULL op does not matter. */
        uint64_t others = SBX_CAP_ALL_1_2 & ~ops_1_2[i].bit;
        if (ops_1_2[i].bit == SBX_CAP_PROCESSES)
            others &= ~SBX_CAP_PTY;
        d = demo_desc(&ops, others);
        cr_expect_eq(sbxh_plugin_validate(&d, "demo", PATH, &err), SBX_OK, "%s",
                     err.message);
        /* A table that ends just before the op (a 1.1 table, or one built
         * against an earlier 1.2 draft): absent, naming the size. */
        d = demo_desc(&full_ops, caps);
        d.ops_size = (uint32_t)ops_1_2[i].offset;
        expect_abi(&d, &err);
        snprintf(want, sizeof want,
                 "capability %s declared but op %s is absent: expected an ops table "
                 "of at least %zu bytes, plugin has %u",
                 ops_1_2[i].cap, ops_1_2[i].op, ops_1_2[i].offset + sizeof(void *),
                 d.ops_size);
        assert_msg_has(&err, want);
    }
    /* A whole 1.1 table declaring a 1.2 capability. */
    struct sbx_provider_desc d = demo_desc(&full_ops, SBX_CAP_FILE_OPS);
    d.ops_size = (uint32_t)SBX_OPS_SIZE_MEMORY_WATCH_1_1;
    sbx_error err;
    expect_abi(&d, &err);
    assert_msg_has(&err, "capability file_ops declared but op file_list is absent");
    cr_expect_eq(SBX_OPS_SIZE_PROCESSES_1_2,
                 offsetof(struct sbx_provider_ops, proc_list) + sizeof(void *));
    cr_expect_eq(SBX_OPS_SIZE_PTY_1_2,
                 offsetof(struct sbx_provider_ops, proc_resize) + sizeof(void *));
    cr_expect_eq(SBX_OPS_SIZE_FILE_OPS_1_2,
                 offsetof(struct sbx_provider_ops, file_rename) + sizeof(void *));
    cr_expect_eq(SBX_OPS_SIZE_PORTS_1_2,
                 offsetof(struct sbx_provider_ops, port_resolve) + sizeof(void *));
    cr_expect_eq(SBX_OPS_SIZE_PAUSE_1_2,
                 offsetof(struct sbx_provider_ops, resume) + sizeof(void *));
    cr_expect_eq(SBX_OPS_SIZE_HEALTH_1_2,
                 offsetof(struct sbx_provider_ops, health) + sizeof(void *));
    cr_expect_eq(SBX_OPS_SIZE_FORK_1_2, sizeof(struct sbx_provider_ops));
}

Test(validate, bits_of_1_2_wait_for_1_2)
{
    /* A descriptor claiming 1.1 (or 1.0) may declare none of them, even
     * with every op in place. */
    uint64_t bits[] = {SBX_CAP_PROCESSES, SBX_CAP_PTY,   SBX_CAP_FILE_OPS,
                       SBX_CAP_PORTS,     SBX_CAP_PAUSE, SBX_CAP_POOL,
                       SBX_CAP_FORK};
    for (unsigned minor = 0; minor < 2; minor++)
        for (size_t i = 0; i < sizeof bits / sizeof bits[0]; i++) {
            struct sbx_provider_desc d = demo_desc(&full_ops, with_needs(bits[i]));
            d.abi_minor = minor;
            sbx_error err;
            expect_abi(&d, &err);
            char want[128];
            snprintf(want, sizeof want,
                     "unknown capability bits 0x%llx: host knows 0x%s (ABI 1.%u)",
                     (unsigned long long)with_needs(bits[i]),
                     minor ? "7f" : "27", minor);
            assert_msg_has(&err, want);
        }
    /* At 1.2 all of them together are fine. */
    struct sbx_provider_desc d = demo_desc(&full_ops, SBX_CAP_ALL_1_2 & ~SBX_CAP_ALL_1_1);
    sbx_error err;
    cr_expect_eq(sbxh_plugin_validate(&d, "demo", PATH, &err), SBX_OK, "%s", err.message);
}

Test(validate, pty_needs_processes)
{
    /* Every op is there, but a terminal is an option of proc_start: the
     * bit alone promises something the provider cannot be asked for. */
    struct sbx_provider_desc d = demo_desc(&full_ops, SBX_CAP_PTY | SBX_CAP_FILE_OPS);
    sbx_error err;
    expect_abi(&d, &err);
    assert_msg_has(&err, "capability pty declared without processes, which it needs: "
                         "expected bits 0x180 set, plugin declares 0x300");
    d.caps |= SBX_CAP_PROCESSES;
    cr_expect_eq(sbxh_plugin_validate(&d, "demo", PATH, &err), SBX_OK, "%s", err.message);
    /* Processes without a terminal are fine. */
    d.caps = SBX_CAP_PROCESSES;
    cr_expect_eq(sbxh_plugin_validate(&d, "demo", PATH, &err), SBX_OK, "%s", err.message);
}

Test(validate, egress_in_1_1_needs_its_ops)
{
    struct sbx_provider_desc d = demo_desc(&full_ops, SBX_CAP_EGRESS);
    sbx_error err;
    cr_expect_eq(sbxh_plugin_validate(&d, "demo", "/x/demo.so", &err), SBX_OK, "%s", err.message);
    /* A table that ends at reserved[2] (a 1.0 table) has no egress ops. */
    d.ops_size = (uint32_t)(offsetof(struct sbx_provider_ops, reserved) +
                            sizeof full_ops.reserved);
    expect_abi(&d, &err);
    assert_msg_has(&err, "capability egress declared but op egress_set is absent");
}

Test(validate, reserved_members_must_be_zero)
{
    static int marker;
    sbx_error err;
    struct sbx_provider_desc d = demo_desc(&full_ops, 0);
    d.reserved0 = 5;
    expect_abi(&d, &err);
    assert_msg_has(&err, "reserved member reserved0 is not zero: expected 0, plugin "
                         "has 0x5");
    for (int i = 0; i < 4; i++) {
        d = demo_desc(&full_ops, 0);
        d.reserved[i] = &marker;
        expect_abi(&d, &err);
        char want[64];
        snprintf(want, sizeof want, "reserved member reserved[%d] is not zero", i);
        assert_msg_has(&err, want);
    }
    /* The two reserved op slots (the withdrawn memory and egress drafts). */
    for (int i = 0; i < 2; i++) {
        struct sbx_provider_ops ops = full_ops;
        ops.reserved[i] = op_stray;
        d = demo_desc(&ops, 0);
        expect_abi(&d, &err);
        char want[64];
        snprintf(want, sizeof want, "reserved op slot reserved[%d] is set", i);
        assert_msg_has(&err, want);
        /* beyond the plugin's ops_size, the slot is not the plugin's */
        d.ops_size = (uint32_t)offsetof(struct sbx_provider_ops, reserved);
        int rc = sbxh_plugin_validate(&d, "demo", PATH, &err);
        assert_status(rc, &err, SBX_OK);
    }
}

Test(validate, description_and_isolation)
{
    sbx_error err;
    const char *bad[] = {NULL, "", "two\nlines"};
    for (size_t i = 0; i < 3; i++) {
        struct sbx_provider_desc d = demo_desc(&full_ops, 0);
        d.description = bad[i];
        expect_abi(&d, &err);
        assert_msg_has(&err, "invalid provider description: expected one printable "
                             "line of 1 to 200 characters");
    }
    struct sbx_provider_desc d = demo_desc(&full_ops, 0);
    d.isolation = 3;
    expect_abi(&d, &err);
    assert_msg_has(&err, "unknown isolation 3: host knows 0 (none), 1 (container) "
                         "and 2 (vm)");
    d.isolation = SBX_ISOLATION_VM;
    assert_status(sbxh_plugin_validate(&d, "demo", PATH, &err), &err, SBX_OK);
}

/* A key entry that a newer header made larger: the host must step by size. */
struct big_key {
    struct sbx_config_key k;
    const char *added_later;
};

Test(validate, config_keys_are_stepped_by_their_size)
{
    static const struct big_key keys[] = {
        {{sizeof(struct big_key), "root", SBX_CFG_STRING, "a dir", NULL, 0}, "x"},
        {{sizeof(struct big_key), "limit", SBX_CFG_SIZE, "a size", NULL, 0}, "y"},
        {{sizeof(struct big_key), NULL, 0, NULL, NULL, 0}, NULL},
    };
    struct sbx_provider_desc d = demo_desc(&full_ops, 0);
    d.config_keys = &keys[0].k;
    sbx_error err;
    assert_status(sbxh_plugin_validate(&d, "demo", PATH, &err), &err, SBX_OK);
    cr_assert_str_eq(sbxh_config_key_at(d.config_keys, 0)->key, "root");
    cr_assert_str_eq(sbxh_config_key_at(d.config_keys, 1)->key, "limit");
    cr_assert_null(sbxh_config_key_at(d.config_keys, 2));
}

Test(validate, malformed_config_keys_are_refused)
{
    sbx_error err;
    struct sbx_provider_desc d = demo_desc(&full_ops, 0);

    static const struct sbx_config_key unsized[] = {
        {0, "root", SBX_CFG_STRING, "a dir", NULL, 0}, SBX_CONFIG_KEYS_END};
    d.config_keys = unsized;
    expect_abi(&d, &err);
    assert_msg_has(&err, "config key entry size invalid: expected a multiple of 8 of "
                         "at least 32 bytes");

    static const struct big_key mixed[] = {
        {{sizeof(struct big_key), "root", SBX_CFG_STRING, "a dir", NULL, 0}, "x"},
        {{sizeof(struct sbx_config_key), "limit", SBX_CFG_SIZE, "a size", NULL, 0}, "y"},
        {{sizeof(struct big_key), NULL, 0, NULL, NULL, 0}, NULL},
    };
    d.config_keys = &mixed[0].k;
    expect_abi(&d, &err);
    assert_msg_has(&err, "config key 1 has size 48, the first has 56");

    static const struct sbx_config_key dotted[] = {
        SBX_CONFIG_KEY("labels.team", SBX_CFG_STRING, "x"), SBX_CONFIG_KEYS_END};
    d.config_keys = dotted;
    expect_abi(&d, &err);
    assert_msg_has(&err, "config key 0 has an invalid name");

    static const struct sbx_config_key typed[] = {
        SBX_CONFIG_KEY("x", 99, "?"), SBX_CONFIG_KEYS_END};
    d.config_keys = typed;
    expect_abi(&d, &err);
    assert_msg_has(&err, "config key \"x\" has unknown type 99");

    /* No terminator within the bound: refused, not walked off the end. */
    static struct sbx_config_key endless[257];
    for (size_t i = 0; i < 257; i++)
        endless[i] = (struct sbx_config_key)SBX_CONFIG_KEY("k", SBX_CFG_STRING, "d");
    d.config_keys = endless;
    expect_abi(&d, &err);
    assert_msg_has(&err, "config key array has no terminator within 256 entries");
}

Test(name_valid, accepts_and_rejects)
{
    cr_assert(sbxh_plugin_name_valid("docker"));
    cr_assert(sbxh_plugin_name_valid("my_backend-2"));
    cr_assert(sbxh_plugin_name_valid("0"));
    cr_assert_not(sbxh_plugin_name_valid(NULL));
    cr_assert_not(sbxh_plugin_name_valid(""));
    cr_assert_not(sbxh_plugin_name_valid("Docker"));
    cr_assert_not(sbxh_plugin_name_valid("a.b"));
    cr_assert_not(sbxh_plugin_name_valid("a/b"));
    cr_assert_not(sbxh_plugin_name_valid(".."));
    char name[66];
    memset(name, 'a', 64);
    name[64] = '\0';
    cr_assert(sbxh_plugin_name_valid(name));
    name[64] = 'a';
    name[65] = '\0';
    cr_assert_not(sbxh_plugin_name_valid(name));
}
