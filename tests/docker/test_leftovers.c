/*
 * test_leftovers.c - what a failed or hostile sandbox must not leave
 * behind: a container that was created but could not start (a user the
 * image lacks, a uid out of range), and trees too deep for one descriptor
 * per level in the provider's resource directory.
 */
#include "../support/op_args.h"
#include "harness.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>
#include <unistd.h>

TestSuite(docker_leftovers, .timeout = 180);

/* Create under a fresh key with `user` configured; it must fail and leave
 * neither the container nor its resource directory. */
static void failed_create_leaves_nothing(const char *user)
{
    dh_require_daemon();
    struct dh h;
    const char *extra[] = {"user", user, NULL};
    dh_open(&h, NULL, extra);
    char key[64], hash[SBX_KEY_HASH_LEN + 1], ref[SBX_REF_MAX];
    dh_new_key(key, hash);
    sbx_sandbox *sb;
    int rc = dh_create_status(&h, key, "", ref, &sb, NULL, 0);
    cr_expect_neq(rc, SBX_OK, "user %s: create succeeded", user);
    cr_expect_null(sb);
    char path[256];
    snprintf(path, sizeof path, "/v1.41/containers/sbx-%.32s/json", hash);
    cr_expect_eq(dh_api(h.host_uri, "GET", path, NULL, NULL), 404,
                 "user %s: the container that could not start is still there", user);
    char res[512];
    snprintf(res, sizeof res, "%s/sbx-%.32s", h.resource_dir, hash);
    cr_expect_neq(access(res, F_OK), 0, "user %s: %s was left behind", user, res);
    dh_close(&h);
}

Test(docker_leftovers, a_user_the_image_lacks)
{
    failed_create_leaves_nothing("nosuchuser-sbx");
}

Test(docker_leftovers, a_uid_out_of_range)
{
    failed_create_leaves_nothing("4294967296");
}

Test(docker_leftovers, destroy_removes_a_tree_thousands_of_levels_deep)
{
    /* The outputs directory is a bind mount of the provider's resource
     * directory: a command nests it 1500 levels deep, which once made
     * destroy fail with EMFILE and left the session fenced forever. */
    dh_require_daemon();
    struct dh h;
    dh_open(&h, NULL, NULL);
    char key[64], hash[SBX_KEY_HASH_LEN + 1], ref[SBX_REF_MAX];
    dh_new_key(key, hash);
    sbx_sandbox *sb = dh_create(&h, key, ref);
    free(dh_sh(&h, sb,
               "cd /mnt/session/outputs && i=0; while [ $i -lt 1500 ]; do mkdir d && "
               "cd d || exit 1; i=$((i+1)); done; echo leaf > f"));
    h.ops->release(sb);
    char res[512];
    snprintf(res, sizeof res, "%s/sbx-%.32s", h.resource_dir, hash);
    cr_assert_eq(access(res, F_OK), 0);
    /* destroy under a descriptor limit far below the depth */
    cr_assert_eq(dh_system("prlimit --pid %d --nofile=64:64", (int)getpid()), 0);
    struct sbx_call c;
    dh_call_init(&c);
    cr_expect_eq(h.ops->destroy(h.state, &c, TEST_DESTROY_ARGS(key, ref)), SBX_OK, "%s",
                 c.message);
    dh_call_free(&c);
    cr_expect_neq(access(res, F_OK), 0, "%s is still there", res);
    dh_close(&h);
}
