/*
 * capabilities.h - the host's one table of capability bits (internal).
 *
 * One row per SBX_CAP_* bit of sbx/provider.h: its name (sbx_cap_name,
 * `sbx providers`, admission errors), the ABI minor that introduced it
 * (which bits a descriptor of a given minor may declare), the other bits
 * it depends on and the ops the loader requires when a provider declares
 * it. Everything that needs to
 * know about capabilities derives from this table; a new capability is one
 * row here (docs/ABI.md, "Adding a capability").
 *
 * Lowest file of host/registry: includes nothing of the host but the
 * public header.
 */
#ifndef SBX_HOST_REGISTRY_CAPABILITIES_H
#define SBX_HOST_REGISTRY_CAPABILITIES_H

#include <sbx/provider.h>

#include <stddef.h>
#include <stdint.h>

/* A member of struct sbx_provider_ops, addressed by offset so that the
 * loader can check presence against the plugin's ops_size. */
struct sbxh_op_ref {
    const char *name;
    size_t offset;
};

#define SBXH_OP_REF(member) {#member, offsetof(struct sbx_provider_ops, member)}

/* Most ops one capability requires. */
#define SBXH_CAP_OPS_MAX 5

struct sbxh_cap {
    uint64_t bit;          /* one SBX_CAP_* bit */
    const char *name;      /* lowercase, as users write it */
    unsigned abi_minor;    /* the ABI 1.x minor that introduced the bit */
    uint64_t needs;        /* other bits a provider declaring it must declare
                              too (SBX_CAP_PTY needs SBX_CAP_PROCESSES) */
    size_t nops;           /* ops a provider declaring it must set */
    struct sbxh_op_ref ops[SBXH_CAP_OPS_MAX];
};

/* The rows, in the order the loader checks them; sbxh_ncaps of them. */
extern const struct sbxh_cap sbxh_caps[];
extern const size_t sbxh_ncaps;

/* The row of one bit, or NULL when this host does not know it. */
const struct sbxh_cap *sbxh_cap_find(uint64_t bit);

/* The bits a descriptor of ABI 1.<abi_minor> may declare: every row
 * introduced in that minor or before (SBX_CAP_ALL_1_<minor>). */
uint64_t sbxh_caps_known(unsigned abi_minor);

#endif
