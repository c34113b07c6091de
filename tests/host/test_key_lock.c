/*
 * test_key_lock.c - libsbx serializes create, attach and destroy of one
 * session key across threads of one process, and only of one key.
 *
 * The "overlap" fixture provider holds each call for a while and writes the
 * overlap it saw into the reference create returns.
 */
#include <criterion/criterion.h>
#include <sbx/sbx.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define FIXTURES SBX_TEST_BUILD_DIR "/fixture-plugins"

static sbx_ctx *ctx;
static sbx_provider *prov;

static void setup(void)
{
    struct sbx_options o = {0};
    o.size = sizeof o;
    o.config_path = "/dev/null";
    o.plugin_path = FIXTURES;
    o.provider = "overlap";
    o.ignore_environment = true;
    sbx_error err;
    cr_assert_eq(sbx_open(&o, &ctx, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(sbx_provider_lookup(ctx, "overlap", &prov, &err), SBX_OK, "%s",
                 err.message);
}

static void teardown(void)
{
    sbx_close(ctx);
}

struct job {
    const char *key;
    int op; /* 0 create, 1 attach, 2 destroy */
    int rc;
    char ref[SBX_REF_MAX];
    char msg[SBX_ERROR_MAX];
};

static void *run(void *arg)
{
    struct job *j = arg;
    sbx_error err;
    sbx_handle *h = NULL;
    if (j->op == 0) {
        j->rc = sbx_create(prov, j->key, NULL, NULL, &h, &err);
        if (j->rc == SBX_OK)
            snprintf(j->ref, sizeof j->ref, "%s", sbx_handle_ref(h));
    } else if (j->op == 1) {
        j->rc = sbx_attach(prov, j->key, "k1g1-ref", NULL, &h, &err);
    } else {
        j->rc = sbx_destroy(prov, j->key, "k1g1-ref", NULL, &err);
    }
    if (h)
        sbx_release(h);
    snprintf(j->msg, sizeof j->msg, "%s", j->rc == SBX_OK ? "" : err.message);
    return NULL;
}

static void run_all(struct job *jobs, size_t n)
{
    pthread_t t[8];
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, run, &jobs[i]), 0);
    for (size_t i = 0; i < n; i++)
        pthread_join(t[i], NULL);
}

TestSuite(key_lock, .init = setup, .fini = teardown);

Test(key_lock, one_key_is_serialized)
{
    struct job jobs[4] = {{.key = "same", .op = 0}, {.key = "same", .op = 0},
                          {.key = "same", .op = 1}, {.key = "same", .op = 2}};
    run_all(jobs, 4);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(jobs[i].rc, SBX_OK, "job %d: %s", i, jobs[i].msg);
    /* each create saw only itself for its key */
    cr_assert_eq(strncmp(jobs[0].ref, "k1g", 3), 0, "%s", jobs[0].ref);
    cr_assert_eq(strncmp(jobs[1].ref, "k1g", 3), 0, "%s", jobs[1].ref);
}

Test(key_lock, different_keys_run_concurrently)
{
    struct job jobs[2] = {{.key = "key-a", .op = 0}, {.key = "key-b", .op = 0}};
    run_all(jobs, 2);
    cr_assert_eq(jobs[0].rc, SBX_OK, "%s", jobs[0].msg);
    cr_assert_eq(jobs[1].rc, SBX_OK, "%s", jobs[1].msg);
    /* both held their call at the same time: neither waited for the other */
    int overlapped = strncmp(jobs[0].ref, "k1g2", 4) == 0 ||
                     strncmp(jobs[1].ref, "k1g2", 4) == 0;
    cr_assert(overlapped, "refs %s and %s show no overlap", jobs[0].ref, jobs[1].ref);
}
