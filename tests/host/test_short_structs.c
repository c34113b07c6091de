/*
 * test_short_structs.c - a caller built against older, shorter structs:
 * libsbx reads and writes each size-prefixed struct only up to the size the
 * caller set. Each struct sits at the start of a buffer whose remaining
 * bytes are garbage (0xAA): read, they would be wild pointers and flags;
 * written, they would be overwritten.
 */
#include <criterion/criterion.h>
#include <sbx/sbx.h>
#include <sbx/session.h>

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GARBAGE 0xAA

static char root[] = "/tmp/sbx-short-structs-XXXXXX";
static char cfg[4096];

static void setup(void)
{
    strcpy(root, "/tmp/sbx-short-structs-XXXXXX");
    cr_assert_not_null(mkdtemp(root));
    snprintf(cfg, sizeof cfg, "%s/sbx.yaml", root);
    FILE *f = fopen(cfg, "w");
    fprintf(f, "providers:\n  local:\n    root: %s/ws\nstore: {driver: sqlite, path: %s/db}\n",
            root, root);
    fclose(f);
}

static void teardown(void)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    cr_expect_eq(system(cmd), 0);
}

TestSuite(short_structs, .init = setup, .fini = teardown);

/* A buffer of garbage with the first `size` bytes of *full copied in and
 * the size member set to `size`. */
static void *shortened(const void *full, size_t full_size, size_t size)
{
    unsigned char *b = malloc(full_size + 64);
    memset(b, GARBAGE, full_size + 64);
    memcpy(b, full, size);
    uint32_t s = (uint32_t)size;
    memcpy(b, &s, sizeof s);
    return b;
}

static sbx_ctx *open_short(void)
{
    /* the oldest sbx_options: up to plugin_path */
    struct sbx_options o;
    memset(&o, 0, sizeof o);
    o.config_path = cfg;
    o.plugin_path = SBX_TEST_PROVIDER_DIR;
    void *b = shortened(&o, sizeof o,
                        offsetof(struct sbx_options, plugin_path) + sizeof o.plugin_path);
    sbx_ctx *ctx = NULL;
    sbx_error err;
    cr_assert_eq(sbx_open(b, &ctx, &err), SBX_OK, "%s", err.message);
    free(b);
    return ctx;
}

Test(short_structs, open_create_and_exec)
{
    sbx_ctx *ctx = open_short();
    sbx_provider *p;
    sbx_error err;
    cr_assert_eq(sbx_provider_lookup(ctx, "local", &p, &err), SBX_OK, "%s", err.message);

    /* sbx_create_options with nothing but its size: the garbage where
     * caps_required would be must not refuse admission */
    struct sbx_create_options co;
    memset(&co, 0, sizeof co);
    void *cb = shortened(&co, sizeof co, sizeof co.size);
    sbx_handle *h = NULL;
    cr_assert_eq(sbx_create(p, "short-key", cb, NULL, &h, &err), SBX_OK, "%s",
                 err.message);
    free(cb);

    /* exec args up to argv (env, cwd, stdin, timeout, sinks are garbage),
     * and a result that ends after exit_code */
    const char *argv[] = {"sh", "-c", "exit 7", NULL};
    struct sbx_exec_args a;
    memset(&a, 0, sizeof a);
    a.argv = argv;
    void *ab = shortened(&a, sizeof a, offsetof(struct sbx_exec_args, argv) + sizeof a.argv);
    struct sbx_exec_result r;
    memset(&r, 0, sizeof r);
    size_t rsize = offsetof(struct sbx_exec_result, exit_code) + sizeof r.exit_code;
    unsigned char *rb = shortened(&r, sizeof r, rsize);
    cr_assert_eq(sbx_exec(h, ab, (struct sbx_exec_result *)rb, NULL, &err), SBX_OK, "%s",
                 err.message);
    int code;
    memcpy(&code, rb + offsetof(struct sbx_exec_result, exit_code), sizeof code);
    cr_expect_eq(code, 7);
    for (size_t i = rsize; i < sizeof r + 64; i++)
        cr_assert_eq(rb[i], GARBAGE, "byte %zu past the caller's result was written", i);
    uint32_t kept;
    memcpy(&kept, rb, sizeof kept);
    cr_expect_eq(kept, rsize, "the caller's size member was changed");
    free(ab);
    free(rb);

    /* a struct whose size is not set is refused, not guessed at */
    struct sbx_exec_args unset;
    memset(&unset, 0, sizeof unset);
    unset.argv = argv;
    struct sbx_exec_result res = {.size = sizeof res};
    cr_expect_eq(sbx_exec(h, &unset, &res, NULL, &err), SBX_E_INVALID);
    cr_expect(strstr(err.message, "size is not set"), "%s", err.message);

    char ref[SBX_REF_MAX];
    snprintf(ref, sizeof ref, "%s", sbx_handle_ref(h));
    sbx_release(h);
    cr_expect_eq(sbx_destroy(p, "short-key", ref, NULL, &err), SBX_OK, "%s", err.message);
    sbx_close(ctx);
}

Test(short_structs, sessions_options_and_spec)
{
    sbx_ctx *ctx = open_short();
    sbx_error err;
    /* the options up to store_target: lease, wait and flags are garbage */
    struct sbx_sessions_options so;
    memset(&so, 0, sizeof so);
    void *sb = shortened(&so, sizeof so,
                         offsetof(struct sbx_sessions_options, store_target) +
                             sizeof so.store_target);
    sbx_sessions *m = NULL;
    cr_assert_eq(sbx_sessions_open(ctx, sb, &m, &err), SBX_OK, "%s", err.message);
    free(sb);
    /* a newer, larger spec: what follows ours is ignored */
    struct sbx_session_spec spec;
    memset(&spec, 0, sizeof spec);
    unsigned char *big = malloc(sizeof spec + 64);
    memset(big, GARBAGE, sizeof spec + 64);
    memcpy(big, &spec, sizeof spec);
    uint32_t bigger = (uint32_t)(sizeof spec + 64);
    memcpy(big, &bigger, sizeof bigger);
    sbx_handle *h = NULL;
    cr_assert_eq(sbx_session_acquire(m, "sess-key", (struct sbx_session_spec *)big, NULL,
                                     &h, NULL, &err),
                 SBX_OK, "%s", err.message);
    free(big);
    sbx_release(h);
    cr_expect_eq(sbx_session_delete(m, "sess-key", NULL, &err), SBX_OK, "%s", err.message);
    sbx_sessions_close(m);
    sbx_close(ctx);
}
