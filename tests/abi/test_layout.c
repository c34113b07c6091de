/*
 * test_layout.c - pins the binary layout of ABI 1.0, 1.1 and of what 1.2
 * (in development) appends, on x86_64.
 *
 * Providers built against one version of sbx/provider.h are loaded by hosts
 * built against another, so every member's offset and every struct's size
 * is part of the contract, as are the numbers of the status codes and the
 * capability bits. If this test fails, the header changed the ABI: restore
 * the layout, or append instead and bump SBX_ABI_MINOR (or MAJOR).
 */
#include <sbx/provider.h>

#include <criterion/criterion.h>

#include <string.h>

#define PIN_OFF(type, member, off)                                             \
    cr_expect_eq(offsetof(struct type, member), (size_t)(off),                 \
                 "offsetof(struct " #type ", " #member ") is %zu, pinned %zu",  \
                 offsetof(struct type, member), (size_t)(off))
#define PIN_SIZE(type, size)                                                   \
    cr_expect_eq(sizeof(struct type), (size_t)(size),                          \
                 "sizeof(struct " #type ") is %zu, pinned %zu",                 \
                 sizeof(struct type), (size_t)(size))

#if defined(__x86_64__) && defined(__LP64__)
#define LAYOUT_PINNED 1
#else
#define LAYOUT_PINNED 0
#endif

static void require_pinned_platform(void)
{
    if (!LAYOUT_PINNED)
        cr_skip_test("layout is pinned for x86_64 (LP64) only");
}

Test(layout, provider_desc)
{
    require_pinned_platform();
    /* the frozen prefix */
    PIN_OFF(sbx_provider_desc, abi_major, 0);
    PIN_OFF(sbx_provider_desc, abi_minor, 4);
    PIN_OFF(sbx_provider_desc, desc_size, 8);
    PIN_OFF(sbx_provider_desc, ops_size, 12);
    /* 1.0 */
    PIN_OFF(sbx_provider_desc, name, 16);
    PIN_OFF(sbx_provider_desc, version, 24);
    PIN_OFF(sbx_provider_desc, description, 32);
    PIN_OFF(sbx_provider_desc, isolation, 40);
    PIN_OFF(sbx_provider_desc, reserved0, 44);
    PIN_OFF(sbx_provider_desc, caps, 48);
    PIN_OFF(sbx_provider_desc, ops, 56);
    PIN_OFF(sbx_provider_desc, config_keys, 64);
    PIN_OFF(sbx_provider_desc, reserved, 72);
    cr_expect_eq(sizeof(((struct sbx_provider_desc *)0)->reserved), 32);
    PIN_SIZE(sbx_provider_desc, 104);
    cr_expect_eq(SBX_DESC_SIZE_1_0, 104);
}

Test(layout, provider_ops)
{
    require_pinned_platform();
    PIN_OFF(sbx_provider_ops, init, 0);
    PIN_OFF(sbx_provider_ops, fini, 8);
    PIN_OFF(sbx_provider_ops, create, 16);
    PIN_OFF(sbx_provider_ops, attach, 24);
    PIN_OFF(sbx_provider_ops, exec, 32);
    PIN_OFF(sbx_provider_ops, read_file, 40);
    PIN_OFF(sbx_provider_ops, write_file, 48);
    PIN_OFF(sbx_provider_ops, root, 56);
    PIN_OFF(sbx_provider_ops, release, 64);
    PIN_OFF(sbx_provider_ops, destroy, 72);
    PIN_OFF(sbx_provider_ops, mount_put, 80);
    PIN_OFF(sbx_provider_ops, mount_remove, 88);
    PIN_OFF(sbx_provider_ops, export_outputs, 96);
    PIN_OFF(sbx_provider_ops, skill_install, 104);
    PIN_OFF(sbx_provider_ops, reserved, 112);
    cr_expect_eq(sizeof(((struct sbx_provider_ops *)0)->reserved), 16);
    /* ABI 1.1 appends */
    PIN_OFF(sbx_provider_ops, egress_set, 128);
    PIN_OFF(sbx_provider_ops, egress_get, 136);
    PIN_OFF(sbx_provider_ops, memory_load, 144);
    PIN_OFF(sbx_provider_ops, memory_diff, 152);
    PIN_OFF(sbx_provider_ops, memory_accept, 160);
    PIN_OFF(sbx_provider_ops, group_add, 168);
    PIN_OFF(sbx_provider_ops, user_add, 176);
    PIN_OFF(sbx_provider_ops, memory_watch, 184);
    cr_expect_eq(SBX_OPS_SIZE_MEMORY_WATCH_1_1, 192);
    /* ABI 1.2 appends (in development) */
    PIN_OFF(sbx_provider_ops, proc_start, 192);
    PIN_OFF(sbx_provider_ops, proc_write, 200);
    PIN_OFF(sbx_provider_ops, proc_read, 208);
    PIN_OFF(sbx_provider_ops, proc_signal, 216);
    PIN_OFF(sbx_provider_ops, proc_list, 224);
    PIN_OFF(sbx_provider_ops, proc_resize, 232);
    PIN_OFF(sbx_provider_ops, file_list, 240);
    PIN_OFF(sbx_provider_ops, file_stat, 248);
    PIN_OFF(sbx_provider_ops, file_mkdir, 256);
    PIN_OFF(sbx_provider_ops, file_remove, 264);
    PIN_OFF(sbx_provider_ops, file_rename, 272);
    PIN_OFF(sbx_provider_ops, port_resolve, 280);
    PIN_OFF(sbx_provider_ops, pause, 288);
    PIN_OFF(sbx_provider_ops, resume, 296);
    PIN_OFF(sbx_provider_ops, health, 304);
    PIN_OFF(sbx_provider_ops, fork, 312);
    PIN_SIZE(sbx_provider_ops, 320);
    cr_expect_eq(SBX_OPS_SIZE_PROCESSES_1_2, 232);
    cr_expect_eq(SBX_OPS_SIZE_PTY_1_2, 240);
    cr_expect_eq(SBX_OPS_SIZE_FILE_OPS_1_2, 280);
    cr_expect_eq(SBX_OPS_SIZE_PORTS_1_2, 288);
    cr_expect_eq(SBX_OPS_SIZE_EGRESS_1_1, 144);
    cr_expect_eq(SBX_OPS_SIZE_MEMORY_1_1, 168);
    cr_expect_eq(SBX_OPS_SIZE_USERS_1_1, 184);
    cr_expect_eq(SBX_OPS_SIZE_1_0, 80);
}

Test(layout, host_table)
{
    require_pinned_platform();
    PIN_OFF(sbx_host, size, 0);
    PIN_OFF(sbx_host, abi_minor, 4);
    PIN_OFF(sbx_host, ctx, 8);
    PIN_OFF(sbx_host, log, 16);
    PIN_OFF(sbx_host, set_error, 24);
    PIN_OFF(sbx_host, config_get, 32);
    PIN_OFF(sbx_host, config_entry, 40);
    PIN_OFF(sbx_host, cancelled, 48);
    PIN_OFF(sbx_host, cancel_fd, 56);
    PIN_OFF(sbx_host, call_user, 64); /* ABI 1.1 */
    PIN_OFF(sbx_host, progress, 72); /* ABI 1.2 */
    PIN_SIZE(sbx_host, 80);
    cr_expect_eq(SBX_HOST_SIZE_USERS_1_1, 72);
    cr_expect_eq(SBX_HOST_SIZE_PROGRESS_1_2, 80);
}

Test(layout, streams)
{
    require_pinned_platform();
    PIN_OFF(sbx_sink, size, 0);
    PIN_OFF(sbx_sink, ctx, 8);
    PIN_OFF(sbx_sink, write, 16);
    PIN_SIZE(sbx_sink, 24);
    cr_expect_eq(SBX_SINK_SIZE_1_0, 24);
    PIN_OFF(sbx_source, size, 0);
    PIN_OFF(sbx_source, ctx, 8);
    PIN_OFF(sbx_source, read, 16);
    PIN_OFF(sbx_source, poll_fd, 24);
    PIN_OFF(sbx_source, length, 32);
    PIN_SIZE(sbx_source, 40);
    cr_expect_eq(SBX_SOURCE_SIZE_1_0, 40);
}

Test(layout, config_key)
{
    require_pinned_platform();
    PIN_OFF(sbx_config_key, size, 0);
    PIN_OFF(sbx_config_key, key, 8);
    PIN_OFF(sbx_config_key, type, 16);
    PIN_OFF(sbx_config_key, description, 24);
    PIN_OFF(sbx_config_key, env, 32);   /* ABI 1.2 */
    PIN_OFF(sbx_config_key, flags, 40); /* ABI 1.2 */
    PIN_SIZE(sbx_config_key, 48);
    cr_expect_eq(SBX_CONFIG_KEY_SIZE_1_0, 32);
    cr_expect_eq(SBX_CONFIG_KEY_SIZE_ENV_1_2, 44);
}

Test(layout, attach_and_destroy_args)
{
    require_pinned_platform();
    PIN_OFF(sbx_attach_args, size, 0);
    PIN_OFF(sbx_attach_args, session_key, 8);
    PIN_OFF(sbx_attach_args, key_hash, 16);
    PIN_OFF(sbx_attach_args, ref, 24);
    PIN_SIZE(sbx_attach_args, 32);
    PIN_OFF(sbx_destroy_args, size, 0);
    PIN_OFF(sbx_destroy_args, session_key, 8);
    PIN_OFF(sbx_destroy_args, key_hash, 16);
    PIN_OFF(sbx_destroy_args, ref, 24);
    PIN_SIZE(sbx_destroy_args, 32);
}

Test(layout, create_args)
{
    require_pinned_platform();
    PIN_OFF(sbx_create_args, size, 0);
    PIN_OFF(sbx_create_args, session_key, 8);
    PIN_OFF(sbx_create_args, key_hash, 16);
    PIN_OFF(sbx_create_args, spec_hash, 24);
    PIN_OFF(sbx_create_args, caps_required, 32);
    PIN_OFF(sbx_create_args, egress, 40); /* ABI 1.1 */
    PIN_OFF(sbx_create_args, memory, 48); /* ABI 1.1 */
    cr_expect_eq(SBX_CREATE_ARGS_SIZE_MEMORY_1_1, 56);
    PIN_OFF(sbx_create_args, ports, 56); /* ABI 1.2 */
    PIN_SIZE(sbx_create_args, 64);
    cr_expect_eq(SBX_CREATE_ARGS_SIZE_PORTS_1_2, 64);
}

Test(layout, exec_args)
{
    require_pinned_platform();
    PIN_OFF(sbx_exec_args, size, 0);
    PIN_OFF(sbx_exec_args, argv, 8);
    PIN_OFF(sbx_exec_args, env, 16);
    PIN_OFF(sbx_exec_args, cwd, 24);
    PIN_OFF(sbx_exec_args, in, 32);
    PIN_OFF(sbx_exec_args, timeout_ms, 40);
    PIN_OFF(sbx_exec_args, out, 48);
    PIN_OFF(sbx_exec_args, err, 56);
    PIN_SIZE(sbx_exec_args, 64);
}

Test(layout, exec_result)
{
    require_pinned_platform();
    PIN_OFF(sbx_exec_result, size, 0);
    PIN_OFF(sbx_exec_result, exit_code, 4);
    PIN_OFF(sbx_exec_result, term_signal, 8);
    PIN_OFF(sbx_exec_result, timed_out, 12);
    PIN_OFF(sbx_exec_result, out_bytes, 16);
    PIN_OFF(sbx_exec_result, err_bytes, 24);
    PIN_SIZE(sbx_exec_result, 32);
}

Test(layout, blob)
{
    require_pinned_platform();
    PIN_OFF(sbx_blob, size, 0);
    PIN_OFF(sbx_blob, src, 8);
    PIN_OFF(sbx_blob, length, 16);
    PIN_OFF(sbx_blob, sha256, 24);
    PIN_OFF(sbx_blob, format, 32);
    PIN_SIZE(sbx_blob, 40);
}

Test(layout, memory_and_users)
{
    require_pinned_platform();
    PIN_OFF(sbx_memory_attachment, size, 0);
    PIN_OFF(sbx_memory_attachment, access, 4);
    PIN_OFF(sbx_memory_attachment, slug, 8);
    PIN_SIZE(sbx_memory_attachment, 16);
    PIN_OFF(sbx_memory_changes, size, 0);
    PIN_OFF(sbx_memory_changes, tar, 8);
    PIN_OFF(sbx_memory_changes, ctx, 16);
    PIN_OFF(sbx_memory_changes, removed, 24);
    PIN_SIZE(sbx_memory_changes, 32);
    PIN_OFF(sbx_group_spec, size, 0);
    PIN_OFF(sbx_group_spec, gid, 4);
    PIN_OFF(sbx_group_spec, name, 8);
    PIN_SIZE(sbx_group_spec, 16);
    PIN_OFF(sbx_user_spec, size, 0);
    PIN_OFF(sbx_user_spec, uid, 4);
    PIN_OFF(sbx_user_spec, name, 8);
    PIN_OFF(sbx_user_spec, group, 16);
    PIN_OFF(sbx_user_spec, groups, 24);
    PIN_SIZE(sbx_user_spec, 32);
    cr_expect_eq(SBX_MEMORY_READ_ONLY, 0);
    cr_expect_eq(SBX_MEMORY_READ_WRITE, 1);
    cr_expect_eq(SBX_MEMORY_DIFF_ALL, 1);
}

Test(layout, processes)
{
    require_pinned_platform();
    PIN_OFF(sbx_proc_spec, size, 0);
    PIN_OFF(sbx_proc_spec, flags, 4);
    PIN_OFF(sbx_proc_spec, argv, 8);
    PIN_OFF(sbx_proc_spec, env, 16);
    PIN_OFF(sbx_proc_spec, cwd, 24);
    PIN_OFF(sbx_proc_spec, timeout_ms, 32);
    PIN_OFF(sbx_proc_spec, rows, 40);
    PIN_OFF(sbx_proc_spec, cols, 42);
    PIN_OFF(sbx_proc_spec, reserved, 44);
    PIN_OFF(sbx_proc_spec, buffer_bytes, 48);
    PIN_SIZE(sbx_proc_spec, 56);
    PIN_OFF(sbx_proc_read_args, size, 0);
    PIN_OFF(sbx_proc_read_args, wait_ms, 4);
    PIN_OFF(sbx_proc_read_args, out_cursor, 8);
    PIN_OFF(sbx_proc_read_args, err_cursor, 16);
    PIN_OFF(sbx_proc_read_args, max_bytes, 24);
    PIN_OFF(sbx_proc_read_args, out, 32);
    PIN_OFF(sbx_proc_read_args, err, 40);
    PIN_SIZE(sbx_proc_read_args, 48);
    PIN_OFF(sbx_proc_read_result, size, 0);
    PIN_OFF(sbx_proc_read_result, state, 4);
    PIN_OFF(sbx_proc_read_result, out_cursor, 8);
    PIN_OFF(sbx_proc_read_result, err_cursor, 16);
    PIN_OFF(sbx_proc_read_result, out_lost, 24);
    PIN_OFF(sbx_proc_read_result, err_lost, 32);
    PIN_OFF(sbx_proc_read_result, exit_code, 40);
    PIN_OFF(sbx_proc_read_result, term_signal, 44);
    PIN_OFF(sbx_proc_read_result, timed_out, 48);
    PIN_OFF(sbx_proc_read_result, eof, 52);
    PIN_SIZE(sbx_proc_read_result, 56);
    PIN_OFF(sbx_proc_info, size, 0);
    PIN_OFF(sbx_proc_info, flags, 4);
    PIN_OFF(sbx_proc_info, id, 8);
    PIN_OFF(sbx_proc_info, command, 16);
    PIN_OFF(sbx_proc_info, state, 24);
    PIN_OFF(sbx_proc_info, exit_code, 28);
    PIN_OFF(sbx_proc_info, term_signal, 32);
    PIN_OFF(sbx_proc_info, started_ms, 40);
    PIN_SIZE(sbx_proc_info, 48);
    PIN_OFF(sbx_proc_list_sink, size, 0);
    PIN_OFF(sbx_proc_list_sink, ctx, 8);
    PIN_OFF(sbx_proc_list_sink, entry, 16);
    PIN_SIZE(sbx_proc_list_sink, 24);
    cr_expect_eq(SBX_PROC_ID_MAX, 128);
    cr_expect_eq(SBX_PROC_BUFFER_DEFAULT, UINT64_C(1) << 20);
    cr_expect_eq(SBX_PROC_PTY, 1);
    cr_expect_eq(SBX_PROC_WRITE_CLOSE, 1);
    cr_expect_eq(SBX_PROC_RUNNING, 0);
    cr_expect_eq(SBX_PROC_EXITED, 1);
}

Test(layout, file_ops)
{
    require_pinned_platform();
    PIN_OFF(sbx_file_info, size, 0);
    PIN_OFF(sbx_file_info, type, 4);
    PIN_OFF(sbx_file_info, name, 8);
    PIN_OFF(sbx_file_info, bytes, 16);
    PIN_OFF(sbx_file_info, mode, 24);
    PIN_OFF(sbx_file_info, reserved, 28);
    PIN_OFF(sbx_file_info, mtime_ns, 32);
    PIN_SIZE(sbx_file_info, 40);
    PIN_OFF(sbx_file_list_sink, size, 0);
    PIN_OFF(sbx_file_list_sink, ctx, 8);
    PIN_OFF(sbx_file_list_sink, entry, 16);
    PIN_SIZE(sbx_file_list_sink, 24);
    cr_expect_eq(SBX_FILE_REGULAR, 1);
    cr_expect_eq(SBX_FILE_DIR, 2);
    cr_expect_eq(SBX_FILE_SYMLINK, 3);
    cr_expect_eq(SBX_FILE_OTHER, 4);
    cr_expect_eq(SBX_MKDIR_PARENTS, 1);
    cr_expect_eq(SBX_REMOVE_RECURSIVE, 1);
    cr_expect_eq(SBX_RENAME_NOREPLACE, 1);
}

Test(layout, port_endpoint)
{
    require_pinned_platform();
    PIN_OFF(sbx_port_endpoint, size, 0);
    PIN_OFF(sbx_port_endpoint, port, 4);
    PIN_OFF(sbx_port_endpoint, tls, 6);
    PIN_OFF(sbx_port_endpoint, host, 8);
    PIN_OFF(sbx_port_endpoint, url, 264);
    PIN_OFF(sbx_port_endpoint, header, 1288);
    PIN_SIZE(sbx_port_endpoint, 2312);
    cr_expect_eq(SBX_ENDPOINT_HOST_MAX, 256);
    cr_expect_eq(SBX_ENDPOINT_URL_MAX, 1024);
    cr_expect_eq(SBX_ENDPOINT_HEADER_MAX, 1024);
}

Test(abi_numbers, versions_and_limits)
{
    cr_expect_eq(SBX_ABI_MAJOR, 1);
    cr_expect_eq(SBX_ABI_MINOR, 2);
    cr_expect_str_eq(SBX_PROVIDER_ENTRY, "sbx_provider_describe");
    cr_expect_eq(SBX_REF_MAX, 512);
    cr_expect_eq(SBX_KEY_HASH_LEN, 64);
}

Test(abi_numbers, status_codes)
{
    cr_expect_eq(SBX_OK, 0);
    cr_expect_eq(SBX_E_NOT_FOUND, 1);
    cr_expect_eq(SBX_E_DENIED, 2);
    cr_expect_eq(SBX_E_UNSUPPORTED, 3);
    cr_expect_eq(SBX_E_INVALID, 4);
    cr_expect_eq(SBX_E_TIMEOUT, 5);
    cr_expect_eq(SBX_E_CANCELLED, 6);
    cr_expect_eq(SBX_E_UNAVAILABLE, 7);
    cr_expect_eq(SBX_E_PROTOCOL, 8);
    cr_expect_eq(SBX_E_IO, 9);
    cr_expect_eq(SBX_E_NOMEM, 10);
    cr_expect_eq(SBX_E_EXISTS, 11);
    cr_expect_eq(SBX_E_CONFIG, 12);
    cr_expect_eq(SBX_E_ABI, 13);
    cr_expect_eq(SBX_E_NOT_EXEC, 14);
    cr_expect_eq(SBX_E_NO_COMMAND, 15);
    cr_expect_eq(SBX_E_INTERNAL, 16);
    cr_expect_eq(SBX_STATUS_COUNT, 17);
}

Test(abi_numbers, transient_codes)
{
    /* Exactly these two may be retried unchanged. */
    for (int s = 0; s < SBX_STATUS_COUNT; s++) {
        int want = s == SBX_E_UNAVAILABLE || s == SBX_E_TIMEOUT;
        cr_expect_eq(!!sbx_status_is_transient((sbx_status)s), want,
                     "sbx_status_is_transient(%d) = %d", s,
                     sbx_status_is_transient((sbx_status)s));
    }
}

Test(abi_numbers, capability_bits)
{
    cr_expect_eq(SBX_CAP_FILE_MOUNTS, UINT64_C(0x01));
    cr_expect_eq(SBX_CAP_OUTPUT_EXPORT, UINT64_C(0x02));
    cr_expect_eq(SBX_CAP_SKILLS, UINT64_C(0x04));
    cr_expect_eq(SBX_CAP_MEMORY, UINT64_C(0x08));
    cr_expect_eq(SBX_CAP_EGRESS, UINT64_C(0x10));
    cr_expect_eq(SBX_CAP_PACKAGES, UINT64_C(0x20));
    /* MEMORY and EGRESS keep their bits but get their ops in 1.1. */
    cr_expect_eq(SBX_CAP_ALL_1_0, SBX_CAP_FILE_MOUNTS | SBX_CAP_OUTPUT_EXPORT |
                                      SBX_CAP_SKILLS | SBX_CAP_PACKAGES);
    cr_expect_eq(SBX_CAP_ALL_1_0, UINT64_C(0x27));
    cr_expect_eq(SBX_CAP_USERS, UINT64_C(0x40));
    cr_expect_eq(SBX_CAP_ALL_1_1, UINT64_C(0x7f));
    /* ABI 1.2 (in development) */
    cr_expect_eq(SBX_CAP_PROCESSES, UINT64_C(0x80));
    cr_expect_eq(SBX_CAP_PTY, UINT64_C(0x100));
    cr_expect_eq(SBX_CAP_FILE_OPS, UINT64_C(0x200));
    cr_expect_eq(SBX_CAP_PORTS, UINT64_C(0x400));
    cr_expect_eq(SBX_CAP_PAUSE, UINT64_C(0x800));
    cr_expect_eq(SBX_CAP_POOL, UINT64_C(0x1000));
    cr_expect_eq(SBX_CAP_ALL_1_2, SBX_CAP_ALL_1_1 | SBX_CAP_PROCESSES | SBX_CAP_PTY |
                                      SBX_CAP_FILE_OPS | SBX_CAP_PORTS | SBX_CAP_PAUSE |
                                      SBX_CAP_POOL | SBX_CAP_FORK);
    cr_expect_eq(SBX_CAP_FORK, UINT64_C(0x2000));
    cr_expect_eq(SBX_CAP_ALL_1_2, UINT64_C(0x3fff));
}

Test(abi_numbers, enums_in_the_descriptor_and_host_table)
{
    cr_expect_eq(SBX_CFG_STRING, 1);
    cr_expect_eq(SBX_CFG_INT, 2);
    cr_expect_eq(SBX_CFG_BOOL, 3);
    cr_expect_eq(SBX_CFG_SIZE, 4);
    cr_expect_eq(SBX_CFG_MAP, 5);
    cr_expect_eq(SBX_CFG_LIST, 6);
    cr_expect_eq(SBX_CFG_NUMBER, 7);
    cr_expect_eq(SBX_CFG_F_SECRET, 1u); /* ABI 1.2 */
    cr_expect_eq(SBX_LOG_ERROR, 0);
    cr_expect_eq(SBX_LOG_WARN, 1);
    cr_expect_eq(SBX_LOG_INFO, 2);
    cr_expect_eq(SBX_LOG_DEBUG, 3);
    cr_expect_eq(SBX_ISOLATION_NONE, 0);
    cr_expect_eq(SBX_ISOLATION_CONTAINER, 1);
    cr_expect_eq(SBX_ISOLATION_VM, 2);
}

Test(abi_numbers, every_status_has_its_own_message)
{
    const char *unknown = sbx_strerror((sbx_status)SBX_STATUS_COUNT);
    cr_expect_str_eq(unknown, "unknown status");
    cr_expect_str_eq(sbx_strerror((sbx_status)-1), "unknown status");
    for (int s = 0; s < SBX_STATUS_COUNT; s++) {
        const char *m = sbx_strerror((sbx_status)s);
        cr_assert_not_null(m, "status %d", s);
        cr_expect_neq(m[0], '\0', "status %d has an empty message", s);
        cr_expect_str_neq(m, unknown, "status %d has no message", s);
        for (int t = 0; t < s; t++)
            cr_expect_str_neq(m, sbx_strerror((sbx_status)t),
                              "statuses %d and %d share the message \"%s\"", t, s, m);
    }
}

/* The macro must fill the version and sizes a host checks. */
static const struct sbx_provider_ops macro_ops;
SBX_PROVIDER_DEFINE("macro", "9.9.9", "the macro under test", SBX_ISOLATION_VM,
                    SBX_CAP_PACKAGES, &macro_ops, NULL)

Test(abi_numbers, define_macro_fills_versions_and_sizes)
{
    const struct sbx_provider_desc *d = sbx_provider_describe();
    cr_assert_not_null(d);
    cr_expect_eq(d, sbx_provider_describe(), "describe must return static data");
    cr_expect_eq(d->abi_major, SBX_ABI_MAJOR);
    cr_expect_eq(d->abi_minor, SBX_ABI_MINOR);
    cr_expect_eq(d->desc_size, sizeof(struct sbx_provider_desc));
    cr_expect_eq(d->ops_size, sizeof(struct sbx_provider_ops));
    cr_expect_str_eq(d->name, "macro");
    cr_expect_str_eq(d->version, "9.9.9");
    cr_expect_str_eq(d->description, "the macro under test");
    cr_expect_eq(d->isolation, SBX_ISOLATION_VM);
    cr_expect_eq(d->reserved0, 0);
    cr_expect_eq(d->caps, SBX_CAP_PACKAGES);
    cr_expect_eq(d->ops, &macro_ops);
    cr_expect_null(d->config_keys);
    for (int i = 0; i < 4; i++)
        cr_expect_null(d->reserved[i]);
}
