/*
 * test_embedder.c - what an agent runtime linking libsbx relies on: its
 * own sinks and sources explain their failures in the call's error, libsbx's
 * fd streams say which descriptor failed and why, and log lines go to the
 * embedder's callback instead of stderr.
 */
#include <criterion/criterion.h>
#include <sbx/sbx.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FIXTURES SBX_TEST_BUILD_DIR "/fixture-plugins"

static char root[] = "/tmp/sbx-embedder-XXXXXX";
static char cfg[4096];
static sbx_ctx *ctx;
static sbx_provider *local;
static sbx_handle *h;

static void setup(void)
{
    strcpy(root, "/tmp/sbx-embedder-XXXXXX");
    cr_assert_not_null(mkdtemp(root));
    snprintf(cfg, sizeof cfg, "%s/sbx.yaml", root);
    FILE *f = fopen(cfg, "w");
    fprintf(f, "providers:\n  local:\n    root: %s/ws\n", root);
    fclose(f);
    struct sbx_options o = {.size = sizeof o, .config_path = cfg,
                            .plugin_path = SBX_TEST_PROVIDER_DIR,
                            .ignore_environment = true};
    sbx_error err;
    cr_assert_eq(sbx_open(&o, &ctx, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(sbx_provider_lookup(ctx, "local", &local, &err), SBX_OK);
    cr_assert_eq(sbx_create(local, "embedder", NULL, NULL, &h, &err), SBX_OK, "%s",
                 err.message);
}

static void teardown(void)
{
    char ref[SBX_REF_MAX];
    snprintf(ref, sizeof ref, "%s", sbx_handle_ref(h));
    sbx_release(h);
    sbx_error err;
    sbx_destroy(local, "embedder", ref, NULL, &err);
    sbx_close(ctx);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    cr_expect_eq(system(cmd), 0);
}

TestSuite(embedder, .init = setup, .fini = teardown, .timeout = 60);

static int refusing_write(void *ctx_, const void *buf, size_t len)
{
    (void)ctx_;
    (void)buf;
    (void)len;
    sbx_stream_error("the quota of %s is exhausted", "/srv/agent");
    return SBX_E_IO;
}

Test(embedder, a_failing_sink_tells_its_own_reason)
{
    const char *argv[] = {"sh", "-c", "echo hello", NULL};
    struct sbx_sink out = SBX_SINK_INIT(NULL, refusing_write);
    struct sbx_exec_args a = {.size = sizeof a, .argv = argv, .out = &out};
    struct sbx_exec_result r = {.size = sizeof r};
    sbx_error err;
    int rc = sbx_exec(h, &a, &r, NULL, &err);
    cr_assert_neq(rc, SBX_OK);
    cr_assert(!strncmp(err.message, "exec stdout: the quota of /srv/agent is exhausted",
                       49),
              "%s", err.message);
}

static long failing_read(void *ctx_, void *buf, size_t cap)
{
    int *calls = ctx_;
    if ((*calls)++ == 0) {
        memset(buf, 'x', cap < 10 ? cap : 10);
        return cap < 10 ? (long)cap : 10;
    }
    sbx_stream_error("the upload from %s was cut", "client 7");
    return -1;
}

Test(embedder, a_failing_source_tells_its_own_reason)
{
    int calls = 0;
    struct sbx_source src = SBX_SOURCE_INIT(&calls, failing_read);
    sbx_error err;
    int rc = sbx_write(h, "f.txt", &src, 0, NULL, &err);
    cr_assert_neq(rc, SBX_OK);
    cr_assert(!strncmp(err.message, "write source: the upload from client 7 was cut", 46),
              "%s", err.message);
}

Test(embedder, fd_sinks_name_the_descriptor_and_the_errno)
{
    struct sbx_memory_source m = {"content", 7, 0};
    struct sbx_source src = sbx_memory_source(&m);
    sbx_error err;
    cr_assert_eq(sbx_write(h, "f.txt", &src, 0, NULL, &err), SBX_OK, "%s", err.message);
    int p[2];
    cr_assert_eq(pipe(p), 0);
    close(p[0]);
    signal(SIGPIPE, SIG_IGN);
    struct sbx_sink sink = sbx_fd_sink(&p[1]);
    int rc = sbx_read(h, "f.txt", &sink, NULL, &err);
    close(p[1]);
    cr_assert_neq(rc, SBX_OK);
    char want[64];
    snprintf(want, sizeof want, "read sink: writing descriptor %d: Broken pipe", p[1]);
    cr_assert(strstr(err.message, want), "%s", err.message);
}

struct log_seen {
    pthread_mutex_t lock;
    int count, level;
    char provider[64], line[256];
};

static void on_log(void *log_ctx, int level, const char *provider, const char *line)
{
    struct log_seen *s = log_ctx;
    pthread_mutex_lock(&s->lock);
    s->count++;
    s->level = level;
    snprintf(s->provider, sizeof s->provider, "%s", provider ? provider : "(libsbx)");
    snprintf(s->line, sizeof s->line, "%s", line);
    pthread_mutex_unlock(&s->lock);
}

Test(embedder, log_lines_go_to_the_embedders_callback)
{
    static struct log_seen seen = {PTHREAD_MUTEX_INITIALIZER, 0, 0, "", ""};
    struct sbx_options o = {.size = sizeof o, .config_path = "/dev/null",
                            .plugin_path = FIXTURES, .provider = "initfail",
                            .ignore_environment = true, .log = on_log,
                            .log_ctx = &seen};
    sbx_ctx *c;
    sbx_error err;
    cr_assert_eq(sbx_open(&o, &c, &err), SBX_OK, "%s", err.message);
    sbx_provider *p;
    cr_assert_eq(sbx_provider_lookup(c, "initfail", &p, &err), SBX_OK);
    cr_assert_eq(sbx_provider_ready(p, NULL, &err), SBX_E_UNAVAILABLE);
    cr_assert_eq(seen.count, 1);
    cr_assert_eq(seen.level, SBX_LOG_WARN);
    cr_assert_str_eq(seen.provider, "initfail");
    cr_assert_str_eq(seen.line, "giving up on the backend (attempt 1)");
    sbx_close(c);
}

struct ready_job {
    sbx_provider *p;
    sbx_cancel *cancel;
    int rc;
    char msg[SBX_ERROR_MAX];
};

static void *ready(void *arg)
{
    struct ready_job *j = arg;
    sbx_error err;
    j->rc = sbx_provider_ready(j->p, j->cancel, &err);
    snprintf(j->msg, sizeof j->msg, "%s", err.message);
    return NULL;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

Test(embedder, a_hanging_init_can_be_cancelled_and_blocks_no_one)
{
    struct sbx_options o = {.size = sizeof o, .config_path = "/dev/null",
                            .plugin_path = FIXTURES, .provider = "slowinit",
                            .ignore_environment = true};
    sbx_ctx *c;
    sbx_error err;
    cr_assert_eq(sbx_open(&o, &c, &err), SBX_OK, "%s", err.message);
    sbx_provider *p;
    cr_assert_eq(sbx_provider_lookup(c, "slowinit", &p, &err), SBX_OK);
    struct ready_job a = {p, NULL, -1, ""}, b = {p, NULL, -1, ""};
    cr_assert_eq(sbx_cancel_new(&a.cancel), SBX_OK);
    cr_assert_eq(sbx_cancel_new(&b.cancel), SBX_OK);
    pthread_t ta, tb;
    pthread_create(&ta, NULL, ready, &a);
    usleep(100 * 1000); /* a is in init now */
    pthread_create(&tb, NULL, ready, &b);
    usleep(100 * 1000);
    /* b waits for a's init; cancelling b frees it at once */
    double t0 = now_s();
    sbx_cancel_fire(b.cancel);
    pthread_join(tb, NULL);
    cr_expect_eq(b.rc, SBX_E_CANCELLED, "%s", b.msg);
    cr_expect_lt(now_s() - t0, 1.0, "the waiter was held by the running init");
    /* a's own token reaches init itself */
    t0 = now_s();
    sbx_cancel_fire(a.cancel);
    pthread_join(ta, NULL);
    cr_expect_eq(a.rc, SBX_E_CANCELLED, "%s", a.msg);
    cr_expect(strstr(a.msg, "init cancelled (attempt 1)"), "%s", a.msg);
    cr_expect_lt(now_s() - t0, 1.0);
    sbx_cancel_free(a.cancel);
    sbx_cancel_free(b.cancel);
    /* the failed init is retried by the next caller */
    sbx_cancel *c3;
    sbx_cancel_new(&c3);
    sbx_cancel_fire(c3);
    struct ready_job d = {p, c3, -1, ""};
    ready(&d);
    cr_expect(strstr(d.msg, "attempt 2") || d.rc == SBX_E_CANCELLED, "%s", d.msg);
    sbx_cancel_free(c3);
    sbx_close(c);
}

Test(embedder, closing_a_context_with_live_handles_is_defined)
{
    struct sbx_options o = {.size = sizeof o, .config_path = cfg,
                            .plugin_path = SBX_TEST_PROVIDER_DIR,
                            .ignore_environment = true};
    sbx_ctx *c;
    sbx_error err;
    cr_assert_eq(sbx_open(&o, &c, &err), SBX_OK, "%s", err.message);
    sbx_provider *p;
    cr_assert_eq(sbx_provider_lookup(c, "local", &p, &err), SBX_OK);
    sbx_handle *left = NULL;
    cr_assert_eq(sbx_create(p, "left-open", NULL, NULL, &left, &err), SBX_OK, "%s",
                 err.message);
    char ref[SBX_REF_MAX];
    snprintf(ref, sizeof ref, "%s", sbx_handle_ref(left));
    sbx_close(c); /* the handle is still held */
    cr_assert_null(sbx_handle_provider(left));
    cr_assert_str_eq(sbx_handle_ref(left), ref, "the reference stays readable");
    const char *argv[] = {"true", NULL};
    struct sbx_exec_args a = {.size = sizeof a, .argv = argv};
    struct sbx_exec_result r = {.size = sizeof r};
    cr_assert_eq(sbx_exec(left, &a, &r, NULL, &err), SBX_E_INVALID);
    cr_assert(strstr(err.message, "context of this sandbox handle was closed"), "%s",
              err.message);
    sbx_release(left); /* frees it; nothing leaks (ASan) */
    /* the sandbox itself stayed: a new context attaches to it */
    cr_assert_eq(sbx_open(&o, &c, &err), SBX_OK);
    cr_assert_eq(sbx_provider_lookup(c, "local", &p, &err), SBX_OK);
    cr_assert_eq(sbx_attach(p, "left-open", ref, NULL, &left, &err), SBX_OK, "%s",
                 err.message);
    sbx_release(left);
    cr_assert_eq(sbx_destroy(p, "left-open", ref, NULL, &err), SBX_OK);
    sbx_close(c);
}
