/*
 * capabilities.c - the capability table (see capabilities.h) and the
 * public sbx_cap_name built from it.
 */
#include "registry/capabilities.h"

#include <sbx/sbx.h>

#define OP SBXH_OP_REF

/*
 * One row per capability. The order is the order validation checks a
 * descriptor in (the 1.0 capabilities, then 1.1's, then 1.2's), which
 * decides which missing op is named first. PACKAGES runs through exec and
 * needs no op.
 * The 1.1 ops follow ops.reserved[2]: a 1.1 table that ends before them is
 * refused, naming the size it needs.
 */
const struct sbxh_cap sbxh_caps[] = {
    {SBX_CAP_FILE_MOUNTS, "file_mounts", 0, 0, 2, {OP(mount_put), OP(mount_remove)}},
    {SBX_CAP_OUTPUT_EXPORT, "output_export", 0, 0, 1, {OP(export_outputs)}},
    {SBX_CAP_SKILLS, "skills", 0, 0, 1, {OP(skill_install)}},
    {SBX_CAP_PACKAGES, "packages", 0, 0, 0, {{NULL, 0}}},
    {SBX_CAP_EGRESS, "egress", 1, 0, 2, {OP(egress_set), OP(egress_get)}},
    {SBX_CAP_MEMORY, "memory", 1, 0, 3,
     {OP(memory_load), OP(memory_diff), OP(memory_accept)}},
    {SBX_CAP_USERS, "users", 1, 0, 2, {OP(group_add), OP(user_add)}},
    {SBX_CAP_PROCESSES, "processes", 2, 0, 5,
     {OP(proc_start), OP(proc_write), OP(proc_read), OP(proc_signal), OP(proc_list)}},
    /* A terminal is an option of proc_start: the PTY bit means nothing
     * without the processes it runs on. */
    {SBX_CAP_PTY, "pty", 2, SBX_CAP_PROCESSES, 1, {OP(proc_resize)}},
    {SBX_CAP_FILE_OPS, "file_ops", 2, 0, 5,
     {OP(file_list), OP(file_stat), OP(file_mkdir), OP(file_remove), OP(file_rename)}},
    {SBX_CAP_PORTS, "ports", 2, 0, 1, {OP(port_resolve)}},
    {SBX_CAP_PAUSE, "pause", 2, 0, 2, {OP(pause), OP(resume)}},
    {SBX_CAP_POOL, "pool", 2, 0, 0, {{NULL, 0}}},
    {SBX_CAP_FORK, "fork", 2, 0, 1, {OP(fork)}},
};

#undef OP

const size_t sbxh_ncaps = sizeof sbxh_caps / sizeof sbxh_caps[0];

const struct sbxh_cap *sbxh_cap_find(uint64_t bit)
{
    for (size_t i = 0; i < sbxh_ncaps; i++)
        if (sbxh_caps[i].bit == bit)
            return &sbxh_caps[i];
    return NULL;
}

uint64_t sbxh_caps_known(unsigned abi_minor)
{
    uint64_t known = 0;
    for (size_t i = 0; i < sbxh_ncaps; i++)
        if (sbxh_caps[i].abi_minor <= abi_minor)
            known |= sbxh_caps[i].bit;
    return known;
}

SBX_API const char *sbx_cap_name(uint64_t bit)
{
    const struct sbxh_cap *c = sbxh_cap_find(bit);
    return c ? c->name : NULL;
}
