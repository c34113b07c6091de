/*
 * test_capabilities.c - the capability table (host/registry/capabilities.c)
 * is the one source of the names (sbx_cap_name), of the bits each ABI
 * minor may declare, and of the ops validation requires. Every check here
 * iterates the table, so a row added for a new capability is covered
 * without touching this file; a header bit without a row fails
 * table_covers_the_header_bits.
 */
#include "registry/capabilities.h"
#include "registry/loader.h"
#include "loader_assert.h"

#include <sbx/sbx.h>

#include <stdio.h>

#define PATH "/opt/plugins/demo.so"

/* Every ABI minor's SBX_CAP_ALL_1_<minor>, indexed by minor: a new minor
 * adds its mask here. */
static const uint64_t all_by_minor[] = {SBX_CAP_ALL_1_0, SBX_CAP_ALL_1_1,
                                        SBX_CAP_ALL_1_2};

static void stub(void) {}

/* An ops table with every slot set but the reserved ones. */
static struct sbx_provider_ops every_op(void)
{
    struct sbx_provider_ops ops;
    void (*fn)(void) = stub;
    for (size_t off = 0; off + sizeof fn <= sizeof ops; off += sizeof fn)
        memcpy((char *)&ops + off, &fn, sizeof fn);
    memset(ops.reserved, 0, sizeof ops.reserved);
    return ops;
}

static struct sbx_provider_desc desc_with(const struct sbx_provider_ops *ops,
                                          unsigned minor, uint64_t caps)
{
    struct sbx_provider_desc d = {
        SBX_ABI_MAJOR, minor, (uint32_t)sizeof(struct sbx_provider_desc),
        (uint32_t)sizeof(struct sbx_provider_ops), "demo", "0.1.0",
        "a descriptor built in memory", SBX_ISOLATION_NONE, 0, caps, ops,
        NULL, {NULL, NULL, NULL, NULL}};
    return d;
}

Test(capabilities, rows_are_distinct_named_bits)
{
    cr_assert_gt(sbxh_ncaps, 0);
    uint64_t seen = 0;
    for (size_t i = 0; i < sbxh_ncaps; i++) {
        const struct sbxh_cap *c = &sbxh_caps[i];
        cr_assert(c->bit && !(c->bit & (c->bit - 1)), "row %zu: not one bit", i);
        cr_assert_not(seen & c->bit, "bit 0x%llx has two rows",
                      (unsigned long long)c->bit);
        seen |= c->bit;
        cr_assert(c->name && *c->name, "row %zu has no name", i);
        for (const char *p = c->name; *p; p++)
            cr_assert((*p >= 'a' && *p <= 'z') || *p == '_', "name %s", c->name);
        for (size_t j = 0; j < i; j++)
            cr_assert_str_neq(sbxh_caps[j].name, c->name);
        /* The public name and the lookup are the table's. */
        cr_assert_str_eq(sbx_cap_name(c->bit), c->name);
        cr_assert_eq(sbxh_cap_find(c->bit), c);
        cr_assert_leq(c->nops, SBXH_CAP_OPS_MAX);
        cr_assert_leq(c->abi_minor, SBX_ABI_MINOR);
        /* What a bit needs is other rows, known to its minor. */
        cr_assert_not(c->needs & c->bit, "%s needs itself", c->name);
        cr_assert_eq(c->needs & ~sbxh_caps_known(c->abi_minor), 0,
                     "%s needs bits 0x%llx its minor does not know", c->name,
                     (unsigned long long)c->needs);
    }
    for (int b = 0; b < 64; b++)
        if (!(seen & (UINT64_C(1) << b)))
            cr_assert_null(sbx_cap_name(UINT64_C(1) << b), "bit %d", b);
}

Test(capabilities, table_covers_the_header_bits)
{
    cr_assert_eq(sizeof all_by_minor / sizeof all_by_minor[0],
                 (size_t)SBX_ABI_MINOR + 1,
                 "all_by_minor lacks the SBX_CAP_ALL_1_<minor> of a new minor");
    for (unsigned m = 0; m <= SBX_ABI_MINOR; m++)
        cr_assert_eq(sbxh_caps_known(m), all_by_minor[m],
                     "ABI 1.%u: the table knows 0x%llx, SBX_CAP_ALL_1_%u is 0x%llx", m,
                     (unsigned long long)sbxh_caps_known(m), m,
                     (unsigned long long)all_by_minor[m]);
}

/* The 1.0 ops table ends with reserved[2]; 1.1 appends after it. */
#define OPS_END_1_0 offsetof(struct sbx_provider_ops, reserved)

Test(capabilities, ops_lie_inside_their_minor)
{
    for (size_t i = 0; i < sbxh_ncaps; i++) {
        const struct sbxh_cap *c = &sbxh_caps[i];
        for (size_t j = 0; j < c->nops; j++) {
            size_t end = c->ops[j].offset + sizeof(void (*)(void));
            cr_assert_leq(end, sizeof(struct sbx_provider_ops), "%s", c->ops[j].name);
            if (c->abi_minor == 0)
                cr_assert_leq(end, OPS_END_1_0, "%s: op %s is not in 1.0",
                              c->name, c->ops[j].name);
            else
                cr_assert_gt(end, OPS_END_1_0, "%s: op %s is a 1.0 op", c->name,
                             c->ops[j].name);
        }
    }
}

Test(capabilities, validation_requires_each_rows_ops)
{
    const struct sbx_provider_ops full = every_op();
    for (size_t i = 0; i < sbxh_ncaps; i++) {
        const struct sbxh_cap *c = &sbxh_caps[i];
        sbx_error err;
        /* Declared with all its ops (and the bits it needs), at the minor
         * that brings it: loads. */
        uint64_t caps = c->bit | c->needs;
        struct sbx_provider_desc d = desc_with(&full, c->abi_minor, caps);
        int rc = sbxh_plugin_validate(&d, "demo", PATH, &err);
        assert_status(rc, &err, SBX_OK);

        for (size_t j = 0; j < c->nops; j++) {
            char want[256];
            /* One op NULL: refused, naming the capability and the op. */
            struct sbx_provider_ops ops = full;
            memset((char *)&ops + c->ops[j].offset, 0, sizeof(void (*)(void)));
            d = desc_with(&ops, c->abi_minor, caps);
            rc = sbxh_plugin_validate(&d, "demo", PATH, &err);
            assert_status(rc, &err, SBX_E_ABI);
            snprintf(want, sizeof want,
                     "capability %s declared but op %s is missing: expected a "
                     "function, plugin has NULL",
                     c->name, c->ops[j].name);
            assert_msg_has(&err, want);
            /* The table ends before the op: absent, naming the size. */
            d = desc_with(&full, c->abi_minor, caps);
            d.ops_size = (uint32_t)c->ops[j].offset;
            if (d.ops_size >= SBX_OPS_SIZE_1_0) {
                rc = sbxh_plugin_validate(&d, "demo", PATH, &err);
                assert_status(rc, &err, SBX_E_ABI);
                snprintf(want, sizeof want,
                         "capability %s declared but op %s is absent: expected an "
                         "ops table of at least %zu bytes",
                         c->name, c->ops[j].name,
                         c->ops[j].offset + sizeof(void (*)(void)));
                assert_msg_has(&err, want);
            }
        }

        /* Without a bit it needs: refused, naming both. */
        for (int b = 0; b < 64; b++) {
            uint64_t need = UINT64_C(1) << b;
            if (!(c->needs & need))
                continue;
            char want[256];
            d = desc_with(&full, c->abi_minor, caps & ~need);
            rc = sbxh_plugin_validate(&d, "demo", PATH, &err);
            assert_status(rc, &err, SBX_E_ABI);
            snprintf(want, sizeof want, "capability %s declared without %s, which it needs",
                     c->name, sbx_cap_name(need));
            assert_msg_has(&err, want);
        }

        /* A descriptor of an older minor may not declare it. */
        if (c->abi_minor > 0) {
            d = desc_with(&full, c->abi_minor - 1, caps);
            rc = sbxh_plugin_validate(&d, "demo", PATH, &err);
            assert_status(rc, &err, SBX_E_ABI);
            assert_msg_has(&err, "unknown capability bits");
        }
    }
}

/* A bit with no row is refused by every minor. */
Test(capabilities, bits_without_a_row_are_unknown)
{
    const struct sbx_provider_ops full = every_op();
    uint64_t known = sbxh_caps_known(SBX_ABI_MINOR);
    for (int b = 0; b < 64; b++) {
        uint64_t bit = UINT64_C(1) << b;
        if (known & bit)
            continue;
        struct sbx_provider_desc d = desc_with(&full, SBX_ABI_MINOR, bit);
        sbx_error err;
        int rc = sbxh_plugin_validate(&d, "demo", PATH, &err);
        assert_status(rc, &err, SBX_E_ABI);
        assert_msg_has(&err, "unknown capability bits");
    }
}
