/*
 * test_lifecycle.c - create/attach/destroy of the docker provider against a
 * real daemon: idempotence, ownership, labels, restart of a stopped
 * container, not-found after destroy.
 */
#include "harness.h"
#include "../support/op_args.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct dh h;

static void setup(void)
{
    dh_require_daemon();
    dh_open(&h, NULL, NULL);
}

static void teardown(void)
{
    dh_close(&h);
}

TestSuite(docker_lifecycle, .init = setup, .fini = teardown, .timeout = 120);

Test(docker_lifecycle, create_is_idempotent_across_instances)
{
    char key[64], hash[65], ref1[SBX_REF_MAX], ref2[SBX_REF_MAX], ref3[SBX_REF_MAX];
    dh_new_key(key, hash);
    sbx_sandbox *a = dh_create(&h, key, ref1);
    sbx_sandbox *b = dh_create(&h, key, ref2);
    cr_expect_str_eq(ref1, ref2, "a second create returned another container");
    struct dh other;
    dh_open(&other, NULL, NULL);
    sbx_sandbox *c = dh_create(&other, key, ref3);
    cr_expect_str_eq(ref1, ref3, "another instance created another container");
    cr_expect_str_eq(h.ops->root(a), "/workspace");
    h.ops->release(c);
    dh_close(&other);
    h.ops->release(b);
    h.ops->release(a);
    dh_destroy(&h, key, ref1);
}

Test(docker_lifecycle, labels_name_and_limits)
{
    static const char *const extra[] = {"memory", "67108864", "pids_limit", "64",
                                        "cpus", "0.5", "labels.team", "blue",
                                        "user", "1000:1000", NULL};
    struct dh lim;
    dh_open(&lim, NULL, extra);
    char key[64], hash[65], ref[SBX_REF_MAX];
    dh_new_key(key, hash);
    sbx_sandbox *sb = dh_create(&lim, key, ref);
    char path[1024];
    snprintf(path, sizeof path, "/v1.41/containers/%s/json", ref);
    struct dh_buf body = {0};
    cr_assert_eq(dh_api(lim.host_uri, "GET", path, NULL, &body), 200);
    char want[160];
    snprintf(want, sizeof want, "\"sbx.owner\":\"%s\"", hash);
    cr_expect(strstr(body.data, want), "owner label missing: %s", body.data);
    cr_expect(strstr(body.data, "\"sbx.managed\":\"true\""));
    cr_expect(strstr(body.data, "\"sbx.spec\":\"spec-hash-1\""));
    cr_expect(strstr(body.data, "\"team\":\"blue\""));
    cr_expect(strstr(body.data, "\"NetworkMode\":\"none\""));
    cr_expect(strstr(body.data, "\"Memory\":67108864"));
    cr_expect(strstr(body.data, "\"PidsLimit\":64"));
    cr_expect(strstr(body.data, "\"NanoCpus\":500000000"));
    snprintf(want, sizeof want, "\"Name\":\"/sbx-%.32s\"", hash);
    cr_expect(strstr(body.data, want), "name not derived from the key hash");
    cr_expect(!strstr(body.data, key), "the raw session key leaked into the container");
    dh_buf_free(&body);
    /* no network but loopback; runs as the configured user, who owns the
     * workspace and the outputs directory */
    char *out = dh_sh(&lim, sb, "ls /sys/class/net | tr '\\n' ' '; id -u; "
                                "touch /workspace/owned && echo ok; "
                                "touch /mnt/session/outputs/owned && echo outputs");
    cr_expect_str_eq(out, "lo 1000\nok\noutputs\n");
    free(out);
    lim.ops->release(sb);
    dh_destroy(&lim, key, ref);
    dh_close(&lim);
}

Test(docker_lifecycle, attach_after_release_keeps_workspace)
{
    char key[64], hash[65], ref[SBX_REF_MAX];
    dh_new_key(key, hash);
    sbx_sandbox *sb = dh_create(&h, key, ref);
    free(dh_sh(&h, sb, "echo persisted > /workspace/state"));
    h.ops->release(sb);

    struct dh again; /* a "restarted" process: a new instance */
    dh_open(&again, NULL, NULL);
    struct sbx_call c;
    dh_call_init(&c);
    sbx_sandbox *sb2 = NULL;
    int rc = again.ops->attach(again.state, &c, TEST_ATTACH_ARGS(key, ref), &sb2);
    cr_assert_eq(rc, SBX_OK, "attach: %s", c.message);
    char *out = dh_sh(&again, sb2, "cat state");
    cr_expect_str_eq(out, "persisted\n");
    free(out);
    again.ops->release(sb2);
    dh_call_free(&c);
    dh_close(&again);
    dh_destroy(&h, key, ref);
}

Test(docker_lifecycle, other_key_is_denied)
{
    char key[64], hash[65], other[64], ohash[65], ref[SBX_REF_MAX];
    dh_new_key(key, hash);
    dh_new_key(other, ohash);
    sbx_sandbox *sb = dh_create(&h, key, ref);
    h.ops->release(sb);
    struct sbx_call c;
    dh_call_init(&c);
    sbx_sandbox *x = NULL;
    cr_expect_eq(h.ops->attach(h.state, &c, TEST_ATTACH_ARGS(other, ref), &x), SBX_E_DENIED, "%s",
                 c.message);
    cr_expect_null(x);
    cr_expect(strstr(c.message, "another session"), "%s", c.message);
    cr_expect_eq(h.ops->destroy(h.state, &c, TEST_DESTROY_ARGS(other, ref)), SBX_E_DENIED, "%s",
                 c.message);
    dh_call_free(&c);
    /* still there for its owner */
    dh_call_init(&c);
    cr_expect_eq(h.ops->attach(h.state, &c, TEST_ATTACH_ARGS(key, ref), &x), SBX_OK, "%s", c.message);
    if (x)
        h.ops->release(x);
    dh_call_free(&c);
    dh_destroy(&h, key, ref);
}

Test(docker_lifecycle, destroy_is_idempotent_and_attach_is_not_found)
{
    char key[64], hash[65], ref[SBX_REF_MAX];
    dh_new_key(key, hash);
    sbx_sandbox *sb = dh_create(&h, key, ref);
    h.ops->release(sb);
    dh_destroy(&h, key, ref);
    dh_destroy(&h, key, ref);
    struct sbx_call c;
    dh_call_init(&c);
    sbx_sandbox *x = NULL;
    cr_expect_eq(h.ops->attach(h.state, &c, TEST_ATTACH_ARGS(key, ref), &x), SBX_E_NOT_FOUND, "%s",
                 c.message);
    cr_expect(strstr(c.message, "no longer exists"), "%s", c.message);
    /* a new create makes a new container, never the old reference */
    char ref2[SBX_REF_MAX];
    sb = dh_create(&h, key, ref2);
    cr_expect_str_neq(ref, ref2);
    h.ops->release(sb);
    dh_destroy(&h, key, ref2);
    dh_call_free(&c);
}

Test(docker_lifecycle, handle_of_destroyed_container_reports_not_found)
{
    char key[64], hash[65], ref[SBX_REF_MAX];
    dh_new_key(key, hash);
    sbx_sandbox *sb = dh_create(&h, key, ref);
    dh_destroy(&h, key, ref);
    const char *argv[] = {"true", NULL};
    struct sbx_exec_result res;
    struct sbx_call c;
    dh_call_init(&c);
    cr_expect_eq(dh_exec(&h, sb, argv, NULL, 10000, NULL, NULL, &res, &c),
                 SBX_E_NOT_FOUND, "%s", c.message);
    struct dh_buf b = {0};
    cr_expect_eq(dh_read(&h, sb, "x", &b, &c), SBX_E_NOT_FOUND, "%s", c.message);
    h.ops->release(sb);
    dh_call_free(&c);
}

Test(docker_lifecycle, stopped_container_is_started_by_attach)
{
    char key[64], hash[65], ref[SBX_REF_MAX];
    dh_new_key(key, hash);
    sbx_sandbox *sb = dh_create(&h, key, ref);
    free(dh_sh(&h, sb, "echo kept > f"));
    h.ops->release(sb);
    char path[1024];
    snprintf(path, sizeof path, "/v1.41/containers/%s/stop?t=0", ref);
    cr_assert_eq(dh_api(h.host_uri, "POST", path, NULL, NULL), 204);
    struct sbx_call c;
    dh_call_init(&c);
    cr_assert_eq(h.ops->attach(h.state, &c, TEST_ATTACH_ARGS(key, ref), &sb), SBX_OK, "%s", c.message);
    char *out = dh_sh(&h, sb, "cat f");
    cr_expect_str_eq(out, "kept\n");
    free(out);
    h.ops->release(sb);
    /* and create (idempotent) starts it too */
    cr_assert_eq(dh_api(h.host_uri, "POST", path, NULL, NULL), 204);
    char ref2[SBX_REF_MAX];
    sb = dh_create(&h, key, ref2);
    cr_expect_str_eq(ref, ref2);
    out = dh_sh(&h, sb, "cat f");
    cr_expect_str_eq(out, "kept\n");
    free(out);
    h.ops->release(sb);
    dh_call_free(&c);
    dh_destroy(&h, key, ref);
}

Test(docker_lifecycle, foreign_container_with_our_name_is_refused)
{
    char key[64], hash[65], ref[SBX_REF_MAX];
    dh_new_key(key, hash);
    /* someone else's container squatting on the session's name */
    char path[1024], body[1024];
    snprintf(path, sizeof path, "/v1.41/containers/create?name=sbx-%.32s", hash);
    snprintf(body, sizeof body,
             "{\"Image\":\"%s\",\"Cmd\":[\"sleep\",\"60\"],\"Labels\":"
             "{\"sbx.managed\":\"true\",\"sbx.owner\":\"%064d\"},"
             "\"HostConfig\":{\"NetworkMode\":\"none\"}}",
             h.image, 0);
    struct dh_buf resp = {0};
    cr_assert_eq(dh_api(h.host_uri, "POST", path, body, &resp), 201, "%s", resp.data);
    dh_buf_free(&resp);

    struct sbx_create_args a = {sizeof a, key, hash, "", 0, NULL, NULL, NULL};
    struct sbx_call c;
    dh_call_init(&c);
    sbx_sandbox *sb = NULL;
    cr_expect_eq(h.ops->create(h.state, &c, &a, ref, &sb), SBX_E_EXISTS, "%s",
                 c.message);
    cr_expect_null(sb);
    cr_expect(strstr(c.message, "does not belong"), "%s", c.message);
    dh_call_free(&c);
    /* the failed create left no resource directory behind */
    char res[512];
    snprintf(res, sizeof res, "%s/sbx-%.32s", h.resource_dir, hash);
    cr_expect_neq(access(res, F_OK), 0, "%s was left behind", res);
    snprintf(path, sizeof path, "/v1.41/containers/sbx-%.32s?force=true", hash);
    cr_expect_eq(dh_api(h.host_uri, "DELETE", path, NULL, NULL), 204);
}

Test(docker_lifecycle, unmanaged_container_cannot_be_attached)
{
    char key[64], hash[65];
    dh_new_key(key, hash);
    char body[1024];
    snprintf(body, sizeof body,
             "{\"Image\":\"%s\",\"Cmd\":[\"sleep\",\"60\"],"
             "\"HostConfig\":{\"NetworkMode\":\"none\"}}",
             h.image);
    struct dh_buf resp = {0};
    cr_assert_eq(dh_api(h.host_uri, "POST", "/v1.41/containers/create", body, &resp),
                 201);
    /* {"Id":"<64 hex>",...} */
    char *id = strstr(resp.data, "\"Id\":\"");
    cr_assert_not_null(id);
    char ref[65];
    snprintf(ref, sizeof ref, "%.64s", id + 6);
    dh_buf_free(&resp);
    struct sbx_call c;
    dh_call_init(&c);
    sbx_sandbox *sb = NULL;
    cr_expect_eq(h.ops->attach(h.state, &c, TEST_ATTACH_ARGS(key, ref), &sb), SBX_E_DENIED, "%s",
                 c.message);
    cr_expect_eq(h.ops->destroy(h.state, &c, TEST_DESTROY_ARGS(key, ref)), SBX_E_DENIED, "%s", c.message);
    cr_expect_eq(h.ops->attach(h.state, &c, TEST_ATTACH_ARGS(key, "not-a-ref"), &sb), SBX_E_INVALID);
    dh_call_free(&c);
    char path[1024];
    snprintf(path, sizeof path, "/v1.41/containers/%s?force=true", ref);
    cr_expect_eq(dh_api(h.host_uri, "DELETE", path, NULL, NULL), 204);
}

Test(docker_lifecycle, bad_config_is_refused_with_the_key)
{
    static const char *const bad_host[] = {"host", "ssh://example", NULL};
    static const char *const bad_label[] = {"labels.sbx.owner", "x", NULL};
    static const char *const bad_mem[] = {"memory", "1024", NULL};
    struct dh x;
    char msg[2048];
    cr_expect_eq(dh_try_open(&x, NULL, bad_host, msg, sizeof msg), SBX_E_CONFIG);
    cr_expect(strstr(msg, "providers.docker.host"), "%s", msg);
    cr_expect_eq(dh_try_open(&x, NULL, bad_label, msg, sizeof msg), SBX_E_CONFIG);
    cr_expect(strstr(msg, "reserved"), "%s", msg);
    cr_expect_eq(dh_try_open(&x, NULL, bad_mem, msg, sizeof msg), SBX_E_CONFIG);
    cr_expect(strstr(msg, "providers.docker.memory"), "%s", msg);
}

Test(docker_lifecycle, missing_image_is_explained)
{
    static const char *const extra[] = {"image", "sbx-test/does-not-exist:never", NULL};
    struct dh x;
    dh_open(&x, NULL, extra);
    char key[64], hash[65], ref[SBX_REF_MAX];
    dh_new_key(key, hash);
    sbx_sandbox *sb;
    char msg[1024];
    int rc = dh_create_status(&x, key, "", ref, &sb, msg, sizeof msg);
    cr_expect(rc == SBX_E_NOT_FOUND || rc == SBX_E_UNAVAILABLE, "%s: %s",
              sbx_strerror(rc), msg);
    cr_expect(strstr(msg, "sbx-test/does-not-exist:never"), "%s", msg);
    cr_expect(strstr(msg, "pulling it failed"), "%s", msg);
    dh_close(&x);
}

Test(docker_lifecycle, read_only_rootfs_keeps_workspace_and_outputs_writable)
{
    static const char *const extra[] = {"read_only_rootfs", "true", NULL};
    struct dh ro;
    dh_open(&ro, NULL, extra);
    char key[64], hash[65], ref[SBX_REF_MAX];
    dh_new_key(key, hash);
    sbx_sandbox *sb = dh_create(&ro, key, ref);
    char *out = dh_sh(&ro, sb, "touch /rootfs-file 2>/dev/null && echo root-writable; "
                               "touch /workspace/w && echo ws; "
                               "touch /mnt/session/outputs/o && echo outputs; "
                               "test -d /workspace/skills && echo skills");
    cr_expect_str_eq(out, "ws\noutputs\nskills\n");
    free(out);
    ro.ops->release(sb);
    /* attach from another instance accepts the mounts as created */
    struct dh again;
    dh_open(&again, NULL, extra);
    struct sbx_call c;
    dh_call_init(&c);
    sbx_sandbox *sb2 = NULL;
    cr_expect_eq(again.ops->attach(again.state, &c, TEST_ATTACH_ARGS(key, ref), &sb2), SBX_OK, "%s",
                 c.message);
    if (sb2)
        again.ops->release(sb2);
    dh_call_free(&c);
    dh_close(&again);
    dh_destroy(&ro, key, ref);
    dh_close(&ro);
}

Test(docker_lifecycle, named_user_can_write_outputs)
{
    static const char *const extra[] = {"user", "nobody", NULL};
    struct dh named;
    dh_open(&named, NULL, extra);
    char key[64], hash[65], ref[SBX_REF_MAX];
    dh_new_key(key, hash);
    sbx_sandbox *sb = dh_create(&named, key, ref);
    char *out = dh_sh(&named, sb, "id -un; echo x > /mnt/session/outputs/f && "
                                  "stat -c %U /mnt/session/outputs/f");
    cr_expect_str_eq(out, "nobody\nnobody\n");
    free(out);
    named.ops->release(sb);
    dh_destroy(&named, key, ref);
    dh_close(&named);
}
