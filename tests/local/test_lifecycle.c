/*
 * test_lifecycle.c - descriptor, configuration and workspace lifecycle of the
 * `local` provider: create, attach, destroy, ownership.
 */
#include "harness.h"
#include "../support/op_args.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

TestSuite(local_lifecycle, .init = harness_setup, .fini = harness_teardown);

static int is_dir(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

Test(local_lifecycle, descriptor_is_valid_static_data)
{
    const struct sbx_provider_desc *d = harness_desc();
    cr_assert_eq(d->abi_major, SBX_ABI_MAJOR);
    cr_assert_eq(d->abi_minor, SBX_ABI_MINOR);
    cr_assert_eq(d->desc_size, sizeof(struct sbx_provider_desc));
    cr_assert_eq(d->ops_size, sizeof(struct sbx_provider_ops));
    cr_assert_str_eq(d->name, "local");
    cr_assert_str_eq(d->version, "0.2.0");
    /* processes with a PTY, file ops, ports and warm pools; nothing that
     * needs isolation (packages, egress, mounts, memory, users) */
    cr_assert_eq(d->caps & ~(SBX_CAP_PROCESSES | SBX_CAP_PTY | SBX_CAP_FILE_OPS |
                             SBX_CAP_PORTS | SBX_CAP_POOL),
                 0, "local declares caps it cannot honour: %#llx",
                 (unsigned long long)d->caps);
    const struct sbx_provider_ops *o = d->ops;
    cr_assert(o->init && o->fini && o->create && o->attach && o->exec &&
              o->read_file && o->write_file && o->root && o->release &&
              o->destroy);
    cr_assert(o->proc_start && o->proc_write && o->proc_read && o->proc_signal &&
              o->proc_list && o->proc_resize && o->file_list && o->file_stat &&
              o->file_mkdir && o->file_remove && o->file_rename && o->port_resolve);
    cr_assert_not_null(d->config_keys);
    cr_assert_str_eq(d->config_keys[0].key, "root");
    cr_assert_eq(d->config_keys[0].type, SBX_CFG_STRING);
    cr_assert_str_eq(d->config_keys[1].key, "process_buffer");
    cr_assert_eq(d->config_keys[1].type, SBX_CFG_SIZE);
    cr_assert_str_eq(d->config_keys[2].key, "supervisor_idle_ms");
    cr_assert_eq(d->config_keys[2].type, SBX_CFG_INT);
    cr_assert_str_eq(d->config_keys[3].key, "supervisor_timeout_ms");
    cr_assert_eq(d->config_keys[3].type, SBX_CFG_INT);
    cr_assert_str_eq(d->config_keys[4].key, "supervisor_path");
    cr_assert_eq(d->config_keys[4].type, SBX_CFG_STRING);
    cr_assert_null(d->config_keys[5].key);
}

Test(local_lifecycle, reference_is_the_workspace_name_under_the_root)
{
    char hash[SBX_KEY_HASH_LEN + 1], want[SBX_REF_MAX];
    harness_key_hash(H_KEY, hash);
    path_join(want, sizeof want, H.root, hash);
    /* no host path in the reference: it is serialized session state */
    cr_assert_str_eq(H.ref, hash);
    cr_assert_str_eq(H.ops->root(H.sb), want);
    cr_assert(is_dir(want));
    struct stat st;
    cr_assert_eq(stat(want, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0700);
}

Test(local_lifecycle, create_is_idempotent_across_instances)
{
    /* A second instance with the same configuration. */
    struct test_host th2;
    harness_host_init(&th2, H.root);
    void *state2 = NULL;
    cr_assert_eq(H.ops->init(&th2.host, &H.call, &state2), SBX_OK);

    static const char data[] = "written through the first handle";
    cr_assert_eq(put_file("keep.txt", data, sizeof data - 1, 0), SBX_OK,
                 "%s", H.call.msg);

    for (int round = 0; round < 2; round++) {
        struct create_args_buf cb;
        char ref2[SBX_REF_MAX];
        sbx_sandbox *sb2 = NULL;
        void *st = round == 0 ? H.state : state2;
        int rc = H.ops->create(st, &H.call, harness_create_args(&cb, H_KEY),
                               ref2, &sb2);
        cr_assert_eq(rc, SBX_OK, "create again: %s", H.call.msg);
        cr_assert_str_eq(ref2, H.ref);

        /* Same workspace: the file is still there. */
        struct buf_sink got = {0};
        struct sbx_sink sink = buf_sink(&got);
        cr_assert_eq(H.ops->read_file(sb2, &H.call, "keep.txt", &sink),
                     SBX_OK, "%s", H.call.msg);
        cr_assert_str_eq(buf_sink_str(&got), data);
        buf_sink_free(&got);
        H.ops->release(sb2);
    }
    H.ops->fini(state2);
}

Test(local_lifecycle, create_refuses_a_malformed_key_hash)
{
    /* The host computes the hash; local only checks that it can be a
     * directory name it will recognize again. */
    struct create_args_buf cb;
    const struct sbx_create_args *a = harness_create_args(&cb, "a-key");
    char ref[SBX_REF_MAX];
    sbx_sandbox *sb = NULL;
    cb.hash[0] = 'G'; /* not lowercase hex */
    cr_assert_eq(H.ops->create(H.state, &H.call, a, ref, &sb), SBX_E_INVALID);
}

Test(local_lifecycle, create_refuses_a_symlink_in_place_of_the_workspace)
{
    struct create_args_buf cb;
    const struct sbx_create_args *a = harness_create_args(&cb, "k2");
    char place[SBX_REF_MAX];
    path_join(place, sizeof place, H.root, cb.hash);
    cr_assert_eq(symlink(H.outside, place), 0);
    char ref[SBX_REF_MAX];
    sbx_sandbox *sb = NULL;
    cr_assert_eq(H.ops->create(H.state, &H.call, a, ref, &sb), SBX_E_EXISTS,
                 "%s", H.call.msg);
    cr_assert_null(sb);
    cr_assert(strstr(H.call.msg, cb.hash) != NULL, "%s", H.call.msg);
}

Test(local_lifecycle, attach_after_restart_finds_the_workspace)
{
    static const char data[] = "survives a restart";
    cr_assert_eq(put_file("state.txt", data, sizeof data - 1, 0), SBX_OK);
    H.ops->release(H.sb);
    H.sb = NULL;
    H.ops->fini(H.state);
    H.state = NULL;

    cr_assert_eq(H.ops->init(&H.th.host, &H.call, &H.state), SBX_OK);
    cr_assert_eq(H.ops->attach(H.state, &H.call, TEST_ATTACH_ARGS(H_KEY, H.ref), &H.sb), SBX_OK,
                 "%s", H.call.msg);
    cr_assert_str_eq(H.ops->root(H.sb), H.ws);
    /* the older absolute form of the reference still attaches */
    sbx_sandbox *old = NULL;
    cr_assert_eq(H.ops->attach(H.state, &H.call, TEST_ATTACH_ARGS(H_KEY, H.ws), &old), SBX_OK,
                 "%s", H.call.msg);
    H.ops->release(old);
    struct buf_sink got = {0};
    cr_assert_eq(get_file("state.txt", &got), SBX_OK);
    cr_assert_str_eq(buf_sink_str(&got), data);
    buf_sink_free(&got);
}

Test(local_lifecycle, attach_refuses_another_session_key)
{
    sbx_sandbox *sb = NULL;
    cr_assert_eq(H.ops->attach(H.state, &H.call, TEST_ATTACH_ARGS("someone-else", H.ref), &sb),
                 SBX_E_DENIED);
    cr_assert_null(sb);
    cr_assert(strstr(H.call.msg, H.ref) != NULL, "message: %s", H.call.msg);
    cr_assert(strstr(H.call.msg, "someone-else") == NULL,
              "the session key must not appear in messages");
}

Test(local_lifecycle, attach_refuses_a_reference_outside_the_root)
{
    char hash[SBX_KEY_HASH_LEN + 1], other[SBX_REF_MAX], dotted[SBX_REF_MAX];
    harness_key_hash(H_KEY, hash);
    /* Right name, wrong parent (a real directory, so only ownership can be
     * the reason for refusing). */
    path_join(other, sizeof other, H.outside, hash);
    cr_assert_eq(mkdir(other, 0700), 0);
    snprintf(dotted, sizeof dotted, "%s/../root/%s", H.root, hash);

    char nested[SBX_REF_MAX];
    snprintf(nested, sizeof nested, "x/%s", hash);
    const char *refs[] = {other, dotted, nested, "", "/", "../root"};
    for (size_t i = 0; i < sizeof refs / sizeof refs[0]; i++) {
        sbx_sandbox *sb = NULL;
        int rc = H.ops->attach(H.state, &H.call, TEST_ATTACH_ARGS(H_KEY, refs[i]), &sb);
        /* never a reference this workspace root wrote: invalid */
        cr_assert_eq(rc, SBX_E_INVALID, "ref '%s': %d %s", refs[i], rc,
                     H.call.msg);
        cr_assert_null(sb);
    }
}

Test(local_lifecycle, attach_after_destroy_is_not_found_and_recreates_nothing)
{
    H.ops->release(H.sb);
    H.sb = NULL;
    cr_assert_eq(H.ops->destroy(H.state, &H.call, TEST_DESTROY_ARGS(H_KEY, H.ref)), SBX_OK,
                 "%s", H.call.msg);
    cr_assert(!exists(H.ws));

    sbx_sandbox *sb = NULL;
    cr_assert_eq(H.ops->attach(H.state, &H.call, TEST_ATTACH_ARGS(H_KEY, H.ref), &sb),
                 SBX_E_NOT_FOUND, "%s", H.call.msg);
    cr_assert_null(sb);
    cr_assert(strstr(H.call.msg, H.ref) != NULL, "message: %s", H.call.msg);
    cr_assert(!exists(H.ref), "attach must not recreate a lost workspace");

    /* Also when the whole root is gone. */
    cr_assert_eq(rmdir(H.root), 0);
    cr_assert_eq(H.ops->attach(H.state, &H.call, TEST_ATTACH_ARGS(H_KEY, H.ref), &sb),
                 SBX_E_NOT_FOUND);
    cr_assert(!exists(H.root));
}

Test(local_lifecycle, destroy_twice_is_ok)
{
    H.ops->release(H.sb);
    H.sb = NULL;
    cr_assert_eq(H.ops->destroy(H.state, &H.call, TEST_DESTROY_ARGS(H_KEY, H.ref)), SBX_OK);
    cr_assert_eq(H.ops->destroy(H.state, &H.call, TEST_DESTROY_ARGS(H_KEY, H.ref)), SBX_OK,
                 "%s", H.call.msg);
    cr_assert(!exists(H.ws));
}

Test(local_lifecycle, destroy_refuses_another_session_key)
{
    cr_assert_eq(H.ops->destroy(H.state, &H.call, TEST_DESTROY_ARGS("someone-else", H.ref)),
                 SBX_E_DENIED);
    cr_assert(is_dir(H.ws), "the workspace must survive a refused destroy");
}

Test(local_lifecycle, destroy_removes_the_tree_without_following_symlinks)
{
    /* Something outside that a symlink inside the workspace points at. */
    char victim_dir[400], victim[450], link_dir[SBX_REF_MAX + 16],
        link_file[SBX_REF_MAX + 16];
    path_join(victim_dir, sizeof victim_dir, H.outside, "keep");
    cr_assert_eq(mkdir(victim_dir, 0755), 0);
    path_join(victim, sizeof victim, victim_dir, "precious");
    FILE *f = fopen(victim, "w");
    cr_assert_not_null(f);
    fputs("do not delete", f);
    fclose(f);

    static const char data[] = "x";
    cr_assert_eq(put_file("a/b/c/d.txt", data, 1, 0), SBX_OK);
    cr_assert_eq(put_file("a/e.txt", data, 1, 0), SBX_OK);
    path_join(link_dir, sizeof link_dir, H.ws, "a/b/to-outside");
    cr_assert_eq(symlink(victim_dir, link_dir), 0);
    path_join(link_file, sizeof link_file, H.ws, "file-link");
    cr_assert_eq(symlink(victim, link_file), 0);
    /* A directory the owner cannot write into. */
    char locked[SBX_REF_MAX + 16];
    path_join(locked, sizeof locked, H.ws, "a/b/c");
    cr_assert_eq(chmod(locked, 0500), 0);

    H.ops->release(H.sb);
    H.sb = NULL;
    cr_assert_eq(H.ops->destroy(H.state, &H.call, TEST_DESTROY_ARGS(H_KEY, H.ref)), SBX_OK,
                 "%s", H.call.msg);
    cr_assert(!exists(H.ws));
    cr_assert(is_dir(H.root), "the root stays");
    cr_assert(exists(victim), "destroy followed a symlink out");
}

Test(local_lifecycle, default_root_comes_from_xdg_state_home)
{
    char xdg[300], want[400];
    path_join(xdg, sizeof xdg, H.tmp, "xdg");
    cr_assert_eq(setenv("XDG_STATE_HOME", xdg, 1), 0);

    struct test_host th;
    harness_host_init(&th, NULL);
    void *state = NULL;
    cr_assert_eq(H.ops->init(&th.host, &H.call, &state), SBX_OK, "%s",
                 H.call.msg);
    struct create_args_buf cb;
    char ref[SBX_REF_MAX];
    sbx_sandbox *sb = NULL;
    cr_assert_eq(H.ops->create(state, &H.call, harness_create_args(&cb, "k"),
                               ref, &sb),
                 SBX_OK, "%s", H.call.msg);
    snprintf(want, sizeof want, "%s/sbx/local/%s", xdg, cb.hash);
    cr_assert_str_eq(ref, cb.hash);
    cr_assert_str_eq(H.ops->root(sb), want);
    cr_assert(is_dir(want));
    H.ops->release(sb);
    H.ops->fini(state);
}

Test(local_lifecycle, default_root_falls_back_to_home)
{
    char home[300], want[400];
    path_join(home, sizeof home, H.tmp, "home");
    cr_assert_eq(mkdir(home, 0700), 0);
    cr_assert_eq(unsetenv("XDG_STATE_HOME"), 0);
    cr_assert_eq(setenv("HOME", home, 1), 0);

    struct test_host th;
    harness_host_init(&th, NULL);
    void *state = NULL;
    cr_assert_eq(H.ops->init(&th.host, &H.call, &state), SBX_OK);
    struct create_args_buf cb;
    char ref[SBX_REF_MAX];
    sbx_sandbox *sb = NULL;
    cr_assert_eq(H.ops->create(state, &H.call, harness_create_args(&cb, "k"),
                               ref, &sb),
                 SBX_OK, "%s", H.call.msg);
    snprintf(want, sizeof want, "%s/.local/state/sbx/local/%s", home,
             cb.hash);
    cr_assert_str_eq(ref, cb.hash);
    cr_assert_str_eq(H.ops->root(sb), want);
    H.ops->release(sb);
    H.ops->fini(state);
}

Test(local_lifecycle, bad_roots_are_configuration_errors)
{
    const char *bad[] = {"relative/dir", "", "/", "/tmp/../etc"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct test_host th;
        harness_host_init(&th, bad[i]);
        void *state = NULL;
        harness_call_init(&H.call);
        cr_assert_eq(H.ops->init(&th.host, &H.call, &state), SBX_E_CONFIG,
                     "root '%s'", bad[i]);
        cr_assert_null(state);
        cr_assert(strstr(H.call.msg, "root") != NULL, "%s", H.call.msg);
    }
}

Test(local_lifecycle, root_path_is_normalized)
{
    char messy[400];
    snprintf(messy, sizeof messy, "%s//./root/", H.tmp);
    struct test_host th;
    harness_host_init(&th, messy);
    void *state = NULL;
    cr_assert_eq(H.ops->init(&th.host, &H.call, &state), SBX_OK);
    sbx_sandbox *sb = NULL;
    cr_assert_eq(H.ops->attach(state, &H.call, TEST_ATTACH_ARGS(H_KEY, H.ref), &sb), SBX_OK,
                 "%s", H.call.msg);
    H.ops->release(sb);
    H.ops->fini(state);
}
