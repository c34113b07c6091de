/*
 * frozen_pins.c - the contract of one frozen minor as seen through one copy
 * of sbx/provider.h.
 *
 * Compiled in pairs (tests/abi/CMakeLists.txt), each time under another
 * function name (ABI_PINS_FN) and with ABI_PINS_MINOR saying which frozen
 * minor's table to build:
 *  - ABI_PINS_MINOR=0: the 1.0 list, against the frozen 1.0 copy and
 *    against the live header;
 *  - ABI_PINS_MINOR=1: the same 1.0 list followed by what 1.1 appended,
 *    against the frozen 1.1 copy and against the live header.
 * Each member contributes its offset, its size and a check of its exact type
 * against the type written here, so a retyped member (int -> unsigned, a
 * changed op signature) is caught even when its size stays. A table names
 * only what its minor had: members appended later are not that minor's
 * providers' business, and whole-struct sizes may only grow.
 */
#include <sbx/provider.h>

#include "abi_pins.h"

#ifndef ABI_PINS_FN
#error "define ABI_PINS_FN to the name of the table function"
#endif
#ifndef ABI_PINS_MINOR
#error "define ABI_PINS_MINOR to the frozen minor whose promises the table lists"
#endif
/* A table cannot list what the header it is compiled against lacks. */
#if ABI_PINS_MINOR < 0 || ABI_PINS_MINOR > 1 || ABI_PINS_MINOR > SBX_ABI_MINOR
#error "ABI_PINS_MINOR must be a frozen minor (0 or 1) the header has"
#endif

/* 1 when expr has exactly type `type` (after lvalue conversion). */
#define IS_TYPE(expr, type) _Generic((expr), type: 1, default: 0)

#define MEMBER_OF(T, m) (((struct T *)0)->m)

/* Offset, size and exact type of one member. */
#define MEMBER(T, m, type)                                                     \
    {"offsetof(" #T ", " #m ")", ABI_PIN_EQ, offsetof(struct T, m), NULL},     \
    {"sizeof(" #T "." #m ")", ABI_PIN_EQ, sizeof(MEMBER_OF(T, m)), NULL},      \
    {"type of " #T "." #m " is " #type, ABI_PIN_ONE,                           \
     IS_TYPE(MEMBER_OF(T, m), type), NULL}

/* A constant that never changes, and one that may only grow. */
#define SAME(expr) {#expr, ABI_PIN_EQ, (uint64_t)(expr), NULL}
#define GROWS(expr) {#expr, ABI_PIN_GE, (uint64_t)(expr), NULL}

/* Function pointer types of the ops, spelled out as a provider writes them. */
typedef int (*init_fn)(const struct sbx_host *, sbx_call *, void **);
typedef void (*fini_fn)(void *);
typedef int (*create_fn)(void *, sbx_call *, const struct sbx_create_args *, char *,
                         sbx_sandbox **);
typedef int (*attach_fn)(void *, sbx_call *, const struct sbx_attach_args *,
                         sbx_sandbox **);
typedef int (*exec_fn)(sbx_sandbox *, sbx_call *, const struct sbx_exec_args *,
                       struct sbx_exec_result *);
typedef int (*read_fn)(sbx_sandbox *, sbx_call *, const char *,
                       const struct sbx_sink *);
typedef int (*write_fn)(sbx_sandbox *, sbx_call *, const char *,
                        const struct sbx_source *, unsigned);
typedef const char *(*root_fn)(sbx_sandbox *);
typedef void (*release_fn)(sbx_sandbox *);
typedef int (*destroy_fn)(void *, sbx_call *, const struct sbx_destroy_args *);
typedef int (*blob_fn)(sbx_sandbox *, sbx_call *, const char *,
                       const struct sbx_blob *);
typedef int (*remove_fn)(sbx_sandbox *, sbx_call *, const char *);
typedef int (*export_fn)(sbx_sandbox *, sbx_call *, const struct sbx_sink *);
typedef void (*slot_fn)(void);

/* The host table's services. */
typedef void (*log_fn)(const struct sbx_host *, int, const char *, ...);
typedef int (*set_error_fn)(const struct sbx_host *, sbx_call *, int, const char *,
                            ...);
typedef const char *(*config_get_fn)(const struct sbx_host *, const char *);
typedef int (*config_entry_fn)(const struct sbx_host *, const char *, size_t,
                               const char **, const char **);
typedef int (*cancel_query_fn)(const struct sbx_host *, const sbx_call *);

/* Streams. */
typedef int (*sink_write_fn)(void *, const void *, size_t);
typedef long (*source_read_fn)(void *, void *, size_t);
typedef int (*source_poll_fn)(void *);
typedef int64_t (*source_length_fn)(void *);

#if ABI_PINS_MINOR >= 1
/* ABI 1.1: the appended ops, the host table's call_user and the callbacks
 * of the 1.1 structs. */
typedef int (*egress_set_fn)(sbx_sandbox *, sbx_call *,
                             const struct sbx_egress_policy *);
typedef int (*egress_get_fn)(sbx_sandbox *, sbx_call *, struct sbx_egress_report *);
typedef int (*memory_load_fn)(sbx_sandbox *, sbx_call *, const char *,
                              const struct sbx_source *);
typedef int (*memory_diff_fn)(sbx_sandbox *, sbx_call *, const char *, uint32_t,
                              const struct sbx_memory_changes *);
typedef int (*slug_fn)(sbx_sandbox *, sbx_call *, const char *);
typedef int (*group_add_fn)(sbx_sandbox *, sbx_call *, const struct sbx_group_spec *);
typedef int (*user_add_fn)(sbx_sandbox *, sbx_call *, const struct sbx_user_spec *);
typedef const char *(*call_user_fn)(const struct sbx_host *, const sbx_call *);
typedef int (*report_allow_fn)(void *, const char *);
typedef int (*removed_fn)(void *, const char *);
#endif

static const struct abi_pin pins[] = {
    /* versions and limits */
    SAME(SBX_ABI_MAJOR),
    GROWS(SBX_ABI_MINOR),
    {"SBX_PROVIDER_ENTRY", ABI_PIN_EQ, 0, SBX_PROVIDER_ENTRY},
    SAME(SBX_REF_MAX),
    SAME(SBX_KEY_HASH_LEN),
    SAME(SBX_DESC_SIZE_1_0),
    SAME(SBX_OPS_SIZE_1_0),
    SAME(SBX_CONFIG_KEY_SIZE_1_0),
    SAME(SBX_SINK_SIZE_1_0),
    SAME(SBX_SOURCE_SIZE_1_0),
    {"type of sbx_provider_describe_fn", ABI_PIN_ONE,
     IS_TYPE((sbx_provider_describe_fn)0, const struct sbx_provider_desc *(*)(void)),
     NULL},

    /* status codes: numbers are never reused */
    SAME(sizeof(sbx_status)),
    SAME(SBX_OK), SAME(SBX_E_NOT_FOUND), SAME(SBX_E_DENIED),
    SAME(SBX_E_UNSUPPORTED), SAME(SBX_E_INVALID), SAME(SBX_E_TIMEOUT),
    SAME(SBX_E_CANCELLED), SAME(SBX_E_UNAVAILABLE), SAME(SBX_E_PROTOCOL),
    SAME(SBX_E_IO), SAME(SBX_E_NOMEM), SAME(SBX_E_EXISTS), SAME(SBX_E_CONFIG),
    SAME(SBX_E_ABI), SAME(SBX_E_NOT_EXEC), SAME(SBX_E_NO_COMMAND),
    SAME(SBX_E_INTERNAL),
    GROWS(SBX_STATUS_COUNT),

    /* capability bits: assigned once */
    SAME(SBX_CAP_FILE_MOUNTS), SAME(SBX_CAP_OUTPUT_EXPORT), SAME(SBX_CAP_SKILLS),
    SAME(SBX_CAP_MEMORY), SAME(SBX_CAP_EGRESS), SAME(SBX_CAP_PACKAGES),
    SAME(SBX_CAP_ALL_1_0),

    /* enums carried in the descriptor and the host table */
    SAME(SBX_ISOLATION_NONE), SAME(SBX_ISOLATION_CONTAINER), SAME(SBX_ISOLATION_VM),
    SAME(SBX_CFG_STRING), SAME(SBX_CFG_INT), SAME(SBX_CFG_BOOL), SAME(SBX_CFG_SIZE),
    SAME(SBX_CFG_MAP), SAME(SBX_CFG_LIST), SAME(SBX_CFG_NUMBER),
    SAME(SBX_LOG_ERROR), SAME(SBX_LOG_WARN), SAME(SBX_LOG_INFO), SAME(SBX_LOG_DEBUG),

    /* the descriptor */
    MEMBER(sbx_provider_desc, abi_major, uint32_t),
    MEMBER(sbx_provider_desc, abi_minor, uint32_t),
    MEMBER(sbx_provider_desc, desc_size, uint32_t),
    MEMBER(sbx_provider_desc, ops_size, uint32_t),
    MEMBER(sbx_provider_desc, name, const char *),
    MEMBER(sbx_provider_desc, version, const char *),
    MEMBER(sbx_provider_desc, description, const char *),
    MEMBER(sbx_provider_desc, isolation, uint32_t),
    MEMBER(sbx_provider_desc, reserved0, uint32_t),
    MEMBER(sbx_provider_desc, caps, uint64_t),
    MEMBER(sbx_provider_desc, ops, const struct sbx_provider_ops *),
    MEMBER(sbx_provider_desc, config_keys, const struct sbx_config_key *),
    MEMBER(sbx_provider_desc, reserved, void **),
    GROWS(sizeof(struct sbx_provider_desc)),

    /* the ops table */
    MEMBER(sbx_provider_ops, init, init_fn),
    MEMBER(sbx_provider_ops, fini, fini_fn),
    MEMBER(sbx_provider_ops, create, create_fn),
    MEMBER(sbx_provider_ops, attach, attach_fn),
    MEMBER(sbx_provider_ops, exec, exec_fn),
    MEMBER(sbx_provider_ops, read_file, read_fn),
    MEMBER(sbx_provider_ops, write_file, write_fn),
    MEMBER(sbx_provider_ops, root, root_fn),
    MEMBER(sbx_provider_ops, release, release_fn),
    MEMBER(sbx_provider_ops, destroy, destroy_fn),
    MEMBER(sbx_provider_ops, mount_put, blob_fn),
    MEMBER(sbx_provider_ops, mount_remove, remove_fn),
    MEMBER(sbx_provider_ops, export_outputs, export_fn),
    MEMBER(sbx_provider_ops, skill_install, blob_fn),
    MEMBER(sbx_provider_ops, reserved, slot_fn *),
    GROWS(sizeof(struct sbx_provider_ops)),

    /* the host table */
    MEMBER(sbx_host, size, uint32_t),
    MEMBER(sbx_host, abi_minor, uint32_t),
    MEMBER(sbx_host, ctx, void *),
    MEMBER(sbx_host, log, log_fn),
    MEMBER(sbx_host, set_error, set_error_fn),
    MEMBER(sbx_host, config_get, config_get_fn),
    MEMBER(sbx_host, config_entry, config_entry_fn),
    MEMBER(sbx_host, cancelled, cancel_query_fn),
    MEMBER(sbx_host, cancel_fd, cancel_query_fn),
    GROWS(sizeof(struct sbx_host)),

    /* streams */
    MEMBER(sbx_sink, size, uint32_t),
    MEMBER(sbx_sink, ctx, void *),
    MEMBER(sbx_sink, write, sink_write_fn),
    GROWS(sizeof(struct sbx_sink)),
    MEMBER(sbx_source, size, uint32_t),
    MEMBER(sbx_source, ctx, void *),
    MEMBER(sbx_source, read, source_read_fn),
    MEMBER(sbx_source, poll_fd, source_poll_fn),
    MEMBER(sbx_source, length, source_length_fn),
    GROWS(sizeof(struct sbx_source)),

    /* configuration keys */
    MEMBER(sbx_config_key, size, uint32_t),
    MEMBER(sbx_config_key, key, const char *),
    MEMBER(sbx_config_key, type, int),
    MEMBER(sbx_config_key, description, const char *),
    GROWS(sizeof(struct sbx_config_key)),

    /* argument and result structs */
    MEMBER(sbx_create_args, size, uint32_t),
    MEMBER(sbx_create_args, session_key, const char *),
    MEMBER(sbx_create_args, key_hash, const char *),
    MEMBER(sbx_create_args, spec_hash, const char *),
    MEMBER(sbx_create_args, caps_required, uint64_t),
    GROWS(sizeof(struct sbx_create_args)),
    MEMBER(sbx_attach_args, size, uint32_t),
    MEMBER(sbx_attach_args, session_key, const char *),
    MEMBER(sbx_attach_args, key_hash, const char *),
    MEMBER(sbx_attach_args, ref, const char *),
    GROWS(sizeof(struct sbx_attach_args)),
    MEMBER(sbx_destroy_args, size, uint32_t),
    MEMBER(sbx_destroy_args, session_key, const char *),
    MEMBER(sbx_destroy_args, key_hash, const char *),
    MEMBER(sbx_destroy_args, ref, const char *),
    GROWS(sizeof(struct sbx_destroy_args)),
    MEMBER(sbx_exec_args, size, uint32_t),
    MEMBER(sbx_exec_args, argv, const char *const *),
    MEMBER(sbx_exec_args, env, const char *const *),
    MEMBER(sbx_exec_args, cwd, const char *),
    MEMBER(sbx_exec_args, in, const struct sbx_source *),
    MEMBER(sbx_exec_args, timeout_ms, int64_t),
    MEMBER(sbx_exec_args, out, const struct sbx_sink *),
    MEMBER(sbx_exec_args, err, const struct sbx_sink *),
    GROWS(sizeof(struct sbx_exec_args)),
    MEMBER(sbx_exec_result, size, uint32_t),
    MEMBER(sbx_exec_result, exit_code, int),
    MEMBER(sbx_exec_result, term_signal, int),
    MEMBER(sbx_exec_result, timed_out, int),
    MEMBER(sbx_exec_result, out_bytes, uint64_t),
    MEMBER(sbx_exec_result, err_bytes, uint64_t),
    GROWS(sizeof(struct sbx_exec_result)),
    MEMBER(sbx_blob, size, uint32_t),
    MEMBER(sbx_blob, src, const struct sbx_source *),
    MEMBER(sbx_blob, length, uint64_t),
    MEMBER(sbx_blob, sha256, const char *),
    MEMBER(sbx_blob, format, const char *),
    GROWS(sizeof(struct sbx_blob)),

#if ABI_PINS_MINOR >= 1
    /* ---- ABI 1.1 appends ---------------------------------------------- */

    /* capability bits and the set a 1.1 host accepts */
    SAME(SBX_CAP_USERS),
    SAME(SBX_CAP_ALL_1_1),
    {"type of SBX_CAP_USERS is uint64_t", ABI_PIN_ONE,
     IS_TYPE(SBX_CAP_USERS, uint64_t), NULL},
    {"type of SBX_CAP_ALL_1_1 is uint64_t", ABI_PIN_ONE,
     IS_TYPE(SBX_CAP_ALL_1_1, uint64_t), NULL},

    /* enums and flags of the 1.1 structs */
    SAME(SBX_EGRESS_DENY), SAME(SBX_EGRESS_ALLOW),
    SAME(SBX_MEMORY_READ_ONLY), SAME(SBX_MEMORY_READ_WRITE),
    SAME(SBX_MEMORY_DIFF_ALL),
    {"type of SBX_MEMORY_DIFF_ALL is unsigned", ABI_PIN_ONE,
     IS_TYPE(SBX_MEMORY_DIFF_ALL, unsigned), NULL},

    /* the sizes a 1.1 host and provider check presence against */
    SAME(SBX_OPS_SIZE_EGRESS_1_1),
    SAME(SBX_CREATE_ARGS_SIZE_EGRESS_1_1),
    SAME(SBX_OPS_SIZE_MEMORY_1_1),
    SAME(SBX_CREATE_ARGS_SIZE_MEMORY_1_1),
    SAME(SBX_OPS_SIZE_USERS_1_1),
    SAME(SBX_OPS_SIZE_MEMORY_WATCH_1_1),
    SAME(SBX_HOST_SIZE_USERS_1_1),

    /* the ops appended after reserved[2] */
    MEMBER(sbx_provider_ops, egress_set, egress_set_fn),
    MEMBER(sbx_provider_ops, egress_get, egress_get_fn),
    MEMBER(sbx_provider_ops, memory_load, memory_load_fn),
    MEMBER(sbx_provider_ops, memory_diff, memory_diff_fn),
    MEMBER(sbx_provider_ops, memory_accept, slug_fn),
    MEMBER(sbx_provider_ops, group_add, group_add_fn),
    MEMBER(sbx_provider_ops, user_add, user_add_fn),
    MEMBER(sbx_provider_ops, memory_watch, slug_fn),

    /* the host table and the create args */
    MEMBER(sbx_host, call_user, call_user_fn),
    MEMBER(sbx_create_args, egress, const struct sbx_egress_policy *),
    MEMBER(sbx_create_args, memory, const struct sbx_memory_attachment *const *),

    /* egress */
    MEMBER(sbx_egress_policy, size, uint32_t),
    MEMBER(sbx_egress_policy, default_action, uint32_t),
    MEMBER(sbx_egress_policy, allow, const char *const *),
    GROWS(sizeof(struct sbx_egress_policy)),
    MEMBER(sbx_egress_report, size, uint32_t),
    MEMBER(sbx_egress_report, default_action, uint32_t),
    MEMBER(sbx_egress_report, ctx, void *),
    MEMBER(sbx_egress_report, allow, report_allow_fn),
    GROWS(sizeof(struct sbx_egress_report)),

    /* memory stores */
    MEMBER(sbx_memory_attachment, size, uint32_t),
    MEMBER(sbx_memory_attachment, access, uint32_t),
    MEMBER(sbx_memory_attachment, slug, const char *),
    GROWS(sizeof(struct sbx_memory_attachment)),
    MEMBER(sbx_memory_changes, size, uint32_t),
    MEMBER(sbx_memory_changes, tar, const struct sbx_sink *),
    MEMBER(sbx_memory_changes, ctx, void *),
    MEMBER(sbx_memory_changes, removed, removed_fn),
    GROWS(sizeof(struct sbx_memory_changes)),

    /* users */
    MEMBER(sbx_group_spec, size, uint32_t),
    MEMBER(sbx_group_spec, gid, uint32_t),
    MEMBER(sbx_group_spec, name, const char *),
    GROWS(sizeof(struct sbx_group_spec)),
    MEMBER(sbx_user_spec, size, uint32_t),
    MEMBER(sbx_user_spec, uid, uint32_t),
    MEMBER(sbx_user_spec, name, const char *),
    MEMBER(sbx_user_spec, group, const char *),
    MEMBER(sbx_user_spec, groups, const char *const *),
    GROWS(sizeof(struct sbx_user_spec)),
#endif
};

const struct abi_pin *ABI_PINS_FN(size_t *n)
{
    *n = sizeof pins / sizeof pins[0];
    return pins;
}
