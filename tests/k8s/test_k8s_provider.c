/*
 * test_k8s_provider.c - the k8s provider through libsbx against the fake
 * cluster (tests/k8s/fake), with the faults of tests/k8s/fake/README.md:
 * the claim (name, owner label, shutdownTime), attach and its ownership,
 * idempotent destroy, a 409 on create, a 429/5xx burst, a watch dropped
 * mid-wait, a watch whose version expired (410), a pod that never becomes
 * Ready (a short deadline: SBX_K8S_TEST_READY_MS, default 1500), a router
 * that resets the stream mid-output, an expired token (and a rotated token
 * file read again), configuration errors that never show a credential.
 */
#include "k8s_stack.h"
#include "../support/provider_harness.h"

#include <sbx/sbx.h>

#include <criterion/criterion.h>
#include <json-c/json.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

static struct k8s_stack k;
static char cfgpath[PH_PATH_MAX];
static sbx_ctx *ctx;
static sbx_provider *prov;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int ready_ms(void)
{
    const char *e = getenv("SBX_K8S_TEST_READY_MS");
    return e && atoi(e) > 0 ? atoi(e) : 1500;
}

static void up_with(const char *const *extra)
{
    if (k8s_stack_start(&k, extra) != 0)
        cr_skip_test("cannot start the fake cluster (python3-grpcio, protoc, openssl?)");
}

static void up(void)
{
    /* the provider's request bodies follow the CRDs' schemas */
    const char *strict[] = {"--field-validation", "Strict", NULL};
    up_with(strict);
}

static void close_ctx(void)
{
    ph_close(&ctx, &prov);
    ph_remove_config(cfgpath);
}

static void down(void)
{
    close_ctx();
    k8s_stack_stop(&k);
}

/* A context whose k8s section points at the stack, plus extra lines; the
 * whole section instead when section is given. */
static int open_ctx_section(const char *section, sbx_error *err)
{
    ph_write_config(cfgpath, "/tmp/sbx-k8s-test-XXXXXX", "providers:\n%s", section);
    return ph_open(cfgpath, "k8s", true, &ctx, &prov, err);
}

static int open_ctx(const char *extra, sbx_error *err)
{
    char yaml[4096];
    k8s_stack_yaml(&k, extra, yaml, sizeof yaml);
    return open_ctx_section(yaml, err);
}

/* The claim a reference "claim:<name>" names, as the API server has it. */
static json_object *claim_of(const char *ref)
{
    cr_assert(!strncmp(ref, "claim:", 6), "reference %s", ref);
    char path[1024];
    snprintf(path, sizeof path,
             "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/default/sandboxclaims/%s",
             ref + 6);
    long st = 0;
    char *body = k8s_stack_http(&k, "GET", path, NULL, 1, &st);
    json_object *o = st == 200 && body ? json_tokener_parse(body) : NULL;
    free(body);
    return o;
}

/* Requests of one Kubernetes verb ("create", "get", "list", "watch", ...)
 * to one resource in the fake's log, those a fault answered included. */
static int requests(const char *verb, const char *resource)
{
    long st = 0;
    char *s = k8s_stack_http(&k, "GET", "/_fake/stats", NULL, 0, &st);
    cr_assert_not_null(s);
    json_object *o = json_tokener_parse(s), *reqs;
    free(s);
    int n = 0;
    if (o && json_object_object_get_ex(o, "requests", &reqs))
        for (size_t i = 0; i < json_object_array_length(reqs); i++) {
            json_object *r = json_object_array_get_idx(reqs, i), *v, *res;
            if (json_object_object_get_ex(r, "verb", &v) &&
                json_object_object_get_ex(r, "resource", &res) &&
                !strcmp(json_object_get_string(v), verb) &&
                !strcmp(json_object_get_string(res), resource))
                n++;
        }
    json_object_put(o);
    return n;
}

static void echo_ok(sbx_handle *h, const char *want)
{
    sbx_capture out;
    sbx_capture_init(&out, 4096, 0);
    struct sbx_exec_result res;
    sbx_error err;
    char script[256];
    snprintf(script, sizeof script, "echo %s", want);
    cr_assert_eq(ph_exec_sh(h, script, &res, &out, &err), SBX_OK, "exec: %s", err.message);
    char *text = sbx_capture_text(&out);
    cr_expect(text && strstr(text, want), "output %s", text ? text : "(none)");
    free(text);
    sbx_capture_free(&out);
}

TestSuite(k8s, .init = up, .fini = down, .timeout = 120);

/* The claim: named after the key hash, the owner label, a shutdownTime,
 * the pool; attach by the owner, refused for another key; destroy twice. */
Test(k8s, claim_attach_destroy)
{
    sbx_error err;
    cr_assert_eq(open_ctx("    shutdown_after: 3600\n", &err), SBX_OK, "%s", err.message);
    sbx_handle *h = ph_create(prov, "k8s-session-key-1");
    char ref[SBX_REF_MAX];
    snprintf(ref, sizeof ref, "%s", sbx_handle_ref(h));
    cr_expect(strncmp(ref, "claim:sbx-", 10) == 0 && strlen(ref) == 6 + 4 + 40, "ref %s", ref);
    json_object *c = claim_of(ref);
    cr_assert_not_null(c, "no claim for %s", ref);
    json_object *meta, *labels, *spec, *v;
    cr_assert(json_object_object_get_ex(c, "metadata", &meta));
    cr_assert(json_object_object_get_ex(meta, "labels", &labels));
    cr_expect(json_object_object_get_ex(labels, "sbx.dev/owner", &v) &&
                  strlen(json_object_get_string(v)) == 63,
              "owner label");
    cr_expect(json_object_object_get_ex(labels, "sbx.dev/managed", &v) &&
              !strcmp(json_object_get_string(v), "true"));
    cr_assert(json_object_object_get_ex(c, "spec", &spec));
    json_object *lc, *pool;
    cr_expect(json_object_object_get_ex(spec, "lifecycle", &lc) &&
                  json_object_object_get_ex(lc, "shutdownTime", &v) &&
                  strlen(json_object_get_string(v)) == 20,
              "shutdownTime");
    cr_expect(json_object_object_get_ex(spec, "warmPoolRef", &pool) &&
              json_object_object_get_ex(pool, "name", &v) &&
              !strcmp(json_object_get_string(v), "sandboxd-pool"));
    json_object_put(c);
    echo_ok(h, "hello-k8s");
    sbx_release(h);

    /* idempotent create: the same key gives the same claim */
    sbx_handle *h2 = ph_create(prov, "k8s-session-key-1");
    cr_expect_str_eq(sbx_handle_ref(h2), ref);
    sbx_release(h2);

    cr_assert_eq(sbx_attach(prov, "k8s-session-key-1", ref, NULL, &h2, &err), SBX_OK, "%s",
                 err.message);
    echo_ok(h2, "attached");
    sbx_release(h2);
    cr_expect_eq(sbx_attach(prov, "another-key", ref, NULL, &h2, &err), SBX_E_DENIED, "%s",
                 err.message);
    cr_expect_eq(sbx_destroy(prov, "another-key", ref, NULL, &err), SBX_E_DENIED, "%s",
                 err.message);
    cr_expect_eq(sbx_attach(prov, "k8s-session-key-1", "claim:../etc", NULL, &h2, &err),
                 SBX_E_INVALID);
    cr_expect_eq(sbx_destroy(prov, "k8s-session-key-1", ref, NULL, &err), SBX_OK, "%s",
                 err.message);
    cr_expect_eq(sbx_destroy(prov, "k8s-session-key-1", ref, NULL, &err), SBX_OK,
                 "second destroy: %s", err.message);
    cr_expect_eq(sbx_attach(prov, "k8s-session-key-1", ref, NULL, &h2, &err), SBX_E_NOT_FOUND,
                 "%s", err.message);
    cr_expect_eq(k8s_stack_claims(&k), 0);
}

/* 409 on create (the fake answers AlreadyExists without making it): the
 * claim is read back, gone, and posted again. */
Test(k8s, conflict_on_create)
{
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(k8s_stack_faults(&k, "[{\"kind\": \"conflict\", \"verb\": \"create\", "
                                      "\"resource\": \"sandboxclaims\"}]"),
                 0);
    sbx_handle *h = ph_create(prov, "k8s-conflict");
    echo_ok(h, "after-409");
    cr_expect_eq(requests("create", "sandboxclaims"), 2, "one 409, then the create");
    cr_expect_geq(requests("get", "sandboxclaims"), 1, "the 409 is read back");
    char ref[SBX_REF_MAX];
    snprintf(ref, sizeof ref, "%s", sbx_handle_ref(h));
    sbx_release(h);
    cr_expect_eq(sbx_destroy(prov, "k8s-conflict", ref, NULL, &err), SBX_OK, "%s",
                 err.message);
}

/* A claim someone else made under the name (another owner label): create
 * is SBX_E_EXISTS, nothing is deleted. */
Test(k8s, foreign_claim_holds_the_name)
{
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    sbx_handle *h = ph_create(prov, "k8s-foreign");
    char ref[SBX_REF_MAX], path[1024];
    snprintf(ref, sizeof ref, "%s", sbx_handle_ref(h));
    sbx_release(h);
    snprintf(path, sizeof path,
             "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/default/sandboxclaims/%s",
             ref + 6);
    long st = 0;
    free(k8s_stack_http(&k, "PATCH", path,
                        "{\"metadata\": {\"labels\": {\"sbx.dev/owner\": \"someone-else\"}}}", 1,
                        &st));
    /* the fake takes a merge patch with this content type only */
    if (st == 415) {
        cr_skip_test("the fake wants a merge-patch content type");
    }
    cr_assert_eq(ph_try_create(prov, "k8s-foreign", &h, &err), SBX_E_EXISTS, "%s", err.message);
    cr_expect(strstr(err.message, "not this session's"), "%s", err.message);
    cr_expect_eq(sbx_destroy(prov, "k8s-foreign", ref, NULL, &err), SBX_E_DENIED, "%s",
                 err.message);
    cr_expect_eq(k8s_stack_claims(&k), 1);
}

/* A burst of 429 and 5xx on create and get: retried with backoff. */
Test(k8s, burst_429_5xx)
{
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(k8s_stack_faults(
                     &k, "[{\"kind\": \"status\", \"verb\": \"create\", \"resource\": "
                         "\"sandboxclaims\", \"status\": 429, \"retry_after\": 0, \"times\": 3},"
                         "{\"kind\": \"status\", \"verb\": \"create\", \"resource\": "
                         "\"sandboxclaims\", \"status\": 503, \"times\": 1},"
                         "{\"kind\": \"status\", \"verb\": \"get\", \"resource\": "
                         "\"sandboxclaims\", \"status\": 500, \"times\": 2}]"),
                 0);
    sbx_handle *h = ph_create(prov, "k8s-burst");
    echo_ok(h, "after-burst");
    cr_expect_geq(requests("create", "sandboxclaims"), 5, "four failures and the create");
    char ref[SBX_REF_MAX];
    snprintf(ref, sizeof ref, "%s", sbx_handle_ref(h));
    sbx_release(h);
    /* attach and destroy GET through the 5xx */
    cr_assert_eq(sbx_attach(prov, "k8s-burst", ref, NULL, &h, &err), SBX_OK, "%s", err.message);
    sbx_release(h);
    cr_expect_eq(sbx_destroy(prov, "k8s-burst", ref, NULL, &err), SBX_OK, "%s", err.message);
}

/* A 400 is not retried: the error is the server's, at once. */
Test(k8s, final_error_not_retried)
{
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(k8s_stack_faults(&k, "[{\"kind\": \"status\", \"verb\": \"create\", "
                                      "\"resource\": \"sandboxclaims\", \"status\": 400, "
                                      "\"message\": \"bad claim\"}]"),
                 0);
    sbx_handle *h;
    cr_expect_eq(ph_try_create(prov, "k8s-400", &h, &err), SBX_E_INVALID, "%s", err.message);
    cr_expect(strstr(err.message, "bad claim"), "%s", err.message);
    cr_expect_eq(requests("create", "sandboxclaims"), 1);
}

/* The watch dropped mid-wait (a TCP reset) while the pod starts: the
 * watch is started again from the last version and the claim goes Ready. */
Test(k8s, watch_dropped_mid_wait)
{
    close_ctx();
    k8s_stack_stop(&k);
    /* the pool's pods take 1.5 s to be Ready: the first claim waits */
    const char *extra[] = {"--ready-delay-ms", "1500", "--field-validation", "Strict", NULL};
    up_with(extra);
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(k8s_stack_faults(&k, "[{\"kind\": \"drop_watch\", \"resource\": "
                                      "\"sandboxclaims\", \"after_ms\": 150, \"times\": 2}]"),
                 0);
    int64_t t0 = now_ms();
    sbx_handle *h = ph_create(prov, "k8s-drop-c");
    int64_t took = now_ms() - t0;
    /* (the fake logs a watch when it ends: the last one may not be yet) */
    cr_expect_geq(requests("watch", "sandboxclaims"), 2,
                  "the dropped watches were not started again (%d watches, %lld ms)",
                  requests("watch", "sandboxclaims"), (long long)took);
    cr_expect_lt(took, 10000);
    echo_ok(h, "after-drop");
    sbx_release(h);
}

/* The version the watch starts from is compacted away: 410 (an ERROR
 * event), a re-list, and the wait goes on. */
Test(k8s, watch_expired_relists)
{
    close_ctx();
    k8s_stack_stop(&k);
    const char *extra[] = {"--ready-delay-ms", "1500", "--field-validation", "Strict", NULL};
    up_with(extra);
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    /* delay the watch so that the compaction comes before it */
    cr_assert_eq(k8s_stack_faults(&k, "[{\"kind\": \"slow\", \"verb\": \"watch\", "
                                      "\"resource\": \"sandboxclaims\", \"delay_ms\": 300}]"),
                 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        usleep(100 * 1000);
        long st;
        free(k8s_stack_http(&k, "POST", "/_fake/compact", "{}", 0, &st));
        _exit(0);
    }
    sbx_handle *h = ph_create(prov, "k8s-410-c");
    waitpid(pid, NULL, 0);
    cr_expect_geq(requests("get", "sandboxclaims"), 1, "no re-list after 410");
    echo_ok(h, "after-410");
    sbx_release(h);
}

/* A pod that never becomes Ready: SBX_E_TIMEOUT at ready_timeout_ms with
 * the last reason, and the claim is deleted. */
Test(k8s, never_ready)
{
    sbx_error err;
    char extra[128];
    snprintf(extra, sizeof extra, "    ready_timeout_ms: %d\n", ready_ms());
    cr_assert_eq(open_ctx(extra, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(k8s_stack_faults(&k, "[{\"kind\": \"never_ready\"}]"), 0);
    int64_t t0 = now_ms();
    sbx_handle *h;
    cr_assert_eq(ph_try_create(prov, "k8s-never", &h, &err), SBX_E_TIMEOUT, "%s", err.message);
    int64_t took = now_ms() - t0;
    cr_expect_geq(took, ready_ms() - 100);
    cr_expect_lt(took, ready_ms() + 5000, "took %lld ms", (long long)took);
    cr_expect(strstr(err.message, "not Ready within") && strstr(err.message, "ready_timeout_ms"),
              "%s", err.message);
    cr_expect(strstr(err.message, "DependenciesNotReady"), "no reason in: %s", err.message);
    cr_expect_eq(k8s_stack_claims(&k), 0, "the failed claim was left behind");
}

/* The pool named in the configuration does not exist: the claim's
 * terminal reason, at once, as a configuration error. */
Test(k8s, missing_pool_is_terminal)
{
    sbx_error err;
    char yaml[2048];
    snprintf(yaml, sizeof yaml,
             "  k8s:\n    kubeconfig: \"%s\"\n    warm_pool: no-such-pool\n"
             "    router_url: \"%s\"\n    ready_timeout_ms: 20000\n",
             k.kubeconfig, k.router);
    cr_assert_eq(open_ctx_section(yaml, &err), SBX_OK, "%s", err.message);
    int64_t t0 = now_ms();
    sbx_handle *h;
    cr_assert_eq(ph_try_create(prov, "k8s-nopool", &h, &err), SBX_E_CONFIG, "%s", err.message);
    cr_expect_lt(now_ms() - t0, 5000, "a terminal reason waited for the deadline");
    cr_expect(strstr(err.message, "WarmPoolNotFound") && strstr(err.message, "warm_pool"), "%s",
              err.message);
    cr_expect_eq(k8s_stack_claims(&k), 0);
}

/* The router resets the connection mid-output: exec fails with
 * SBX_E_PROTOCOL promptly, and the command does not run on. */
Test(k8s, router_reset_mid_output)
{
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    sbx_handle *h = ph_create(prov, "k8s-reset");
    cr_assert_eq(k8s_stack_faults(&k, "[{\"kind\": \"reset\", \"verb\": \"Start\", "
                                      "\"resource\": \"router\", \"after_messages\": 3}]"),
                 0);
    sbx_capture out;
    sbx_capture_init(&out, 1 << 20, 0);
    struct sbx_exec_result res;
    int64_t t0 = now_ms();
    int rc = ph_exec_sh(h, "i=0; while [ $i -lt 200 ]; do echo line$i; i=$((i+1)); sleep 0.02; done; "
                    "touch finished",
                 &res, &out, &err);
    cr_expect_eq(rc, SBX_E_PROTOCOL, "%s", err.message);
    cr_expect_lt(now_ms() - t0, 3000);
    sbx_capture_free(&out);
    /* killed: it never reaches its end */
    sleep(4);
    sbx_capture_init(&out, 4096, 0);
    cr_assert_eq(ph_exec_sh(h, "test -e finished && echo ran-on || echo killed", &res, &out, &err),
                 SBX_OK, "%s", err.message);
    char *text = sbx_capture_text(&out);
    cr_expect(text && strstr(text, "killed"), "the command ran on after the reset: %s", text);
    free(text);
    sbx_capture_free(&out);
    sbx_release(h);
}

/* Every token expires: SBX_E_CONFIG naming where the token came from,
 * never the token. */
Test(k8s, expired_token)
{
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    long st = 0;
    free(k8s_stack_http(&k, "POST", "/_fake/token", "{\"expire\": true}", 0, &st));
    cr_assert_eq(st, 200);
    sbx_handle *h;
    cr_assert_eq(ph_try_create(prov, "k8s-expired", &h, &err), SBX_E_CONFIG, "%s", err.message);
    cr_expect(strstr(err.message, "refused") && strstr(err.message, k.kubeconfig), "%s",
              err.message);
    cr_expect(!strstr(err.message, k.token), "the token is in the message: %s", err.message);
}

/* A rotated token file: the 401 makes the provider read it again. */
Test(k8s, rotated_token_file)
{
    char kc[256], tok[256];
    snprintf(kc, sizeof kc, "%s/kc-tokenfile", k.dir);
    snprintf(tok, sizeof tok, "%s/token", k.dir);
    FILE *f = fopen(tok, "w");
    cr_assert_not_null(f);
    fprintf(f, "%s\n", k.token);
    fclose(f);
    f = fopen(kc, "w");
    cr_assert_not_null(f);
    fprintf(f,
            "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: k\n"
            "  cluster:\n    server: %s\n    certificate-authority: %s\ncontexts:\n"
            "- name: c\n  context: {cluster: k, user: u, namespace: default}\nusers:\n"
            "- name: u\n  user:\n    tokenFile: token\n",
            k.api, k.ca);
    fclose(f);
    char yaml[2048];
    snprintf(yaml, sizeof yaml,
             "  k8s:\n    kubeconfig: \"%s\"\n    warm_pool: sandboxd-pool\n"
             "    router_url: \"%s\"\n",
             kc, k.router);
    sbx_error err;
    cr_assert_eq(open_ctx_section(yaml, &err), SBX_OK, "%s", err.message);
    long st = 0;
    free(k8s_stack_http(&k, "POST", "/_fake/token", "{\"expire\": true}", 0, &st));
    free(k8s_stack_http(&k, "POST", "/_fake/token", "{\"token\": \"rotated-token-2\"}", 0, &st));
    cr_assert_eq(st, 200);
    f = fopen(tok, "w");
    cr_assert_not_null(f);
    fprintf(f, "rotated-token-2\n");
    fclose(f);
    sbx_handle *h = ph_create(prov, "k8s-rotated");
    echo_ok(h, "rotated");
    sbx_release(h);
}

/* Configuration errors name the key; a kubeconfig's credentials never
 * appear in them. */
Test(k8s, config_errors)
{
    sbx_error err;
    char yaml[2048];
    snprintf(yaml, sizeof yaml, "  k8s:\n    kubeconfig: \"%s\"\n    router_url: \"%s\"\n",
             k.kubeconfig, k.router);
    cr_expect_eq(open_ctx_section(yaml, &err), SBX_E_CONFIG);
    cr_expect(strstr(err.message, "warm_pool"), "%s", err.message);
    close_ctx();
    snprintf(yaml, sizeof yaml,
             "  k8s:\n    kubeconfig: \"%s\"\n    warm_pool: p\n    template: t\n"
             "    router_url: \"%s\"\n",
             k.kubeconfig, k.router);
    cr_expect_eq(open_ctx_section(yaml, &err), SBX_E_CONFIG);
    cr_expect(strstr(err.message, "not both"), "%s", err.message);
    close_ctx();
    snprintf(yaml, sizeof yaml, "  k8s:\n    kubeconfig: \"%s\"\n    warm_pool: p\n",
             k.kubeconfig);
    cr_expect_eq(open_ctx_section(yaml, &err), SBX_E_CONFIG);
    cr_expect(strstr(err.message, "router_url"), "%s", err.message);
    close_ctx();
    snprintf(yaml, sizeof yaml,
             "  k8s:\n    kubeconfig: \"%s\"\n    context: nope\n    warm_pool: p\n"
             "    router_url: \"%s\"\n",
             k.kubeconfig, k.router);
    cr_expect_eq(open_ctx_section(yaml, &err), SBX_E_CONFIG);
    cr_expect(strstr(err.message, "no context \"nope\""), "%s", err.message);
    cr_expect(!strstr(err.message, k.token), "%s", err.message);
}

/* Template mode: a Sandbox carrying the template's pod template, named
 * and labelled as a claim, Ready, used, destroyed. */
Test(k8s, template_mode)
{
    sbx_error err;
    char yaml[2048];
    snprintf(yaml, sizeof yaml,
             "  k8s:\n    kubeconfig: \"%s\"\n    template: sandboxd-template\n"
             "    router_url: \"%s\"\n    ready_timeout_ms: 20000\n",
             k.kubeconfig, k.router);
    cr_assert_eq(open_ctx_section(yaml, &err), SBX_OK, "%s", err.message);
    sbx_handle *h = ph_create(prov, "k8s-template");
    char ref[SBX_REF_MAX], path[1024];
    snprintf(ref, sizeof ref, "%s", sbx_handle_ref(h));
    cr_expect(!strncmp(ref, "sandbox:sbx-", 12), "ref %s", ref);
    snprintf(path, sizeof path, "/apis/agents.x-k8s.io/v1beta1/namespaces/default/sandboxes/%s",
             ref + 8);
    long st = 0;
    char *body = k8s_stack_http(&k, "GET", path, NULL, 1, &st);
    cr_expect_eq(st, 200);
    cr_expect(body && strstr(body, "\"podTemplate\"") && strstr(body, "sbx.dev/owner"), "%s",
              body ? body : "");
    free(body);
    echo_ok(h, "from-template");
    sbx_release(h);
    cr_expect_eq(sbx_attach(prov, "other", ref, NULL, &h, &err), SBX_E_DENIED, "%s", err.message);
    cr_expect_eq(sbx_destroy(prov, "k8s-template", ref, NULL, &err), SBX_OK, "%s", err.message);
    body = k8s_stack_http(&k, "GET", path, NULL, 1, &st);
    free(body);
    cr_expect(st == 404 || st == 200, "status %ld", st); /* deleted, or going */
    cr_expect_eq(sbx_attach(prov, "k8s-template", ref, NULL, &h, &err), SBX_E_NOT_FOUND, "%s",
                 err.message);
}

/* In a pod: the service account's token, CA and namespace files; a token
 * rotated in place (as kubelet does) is read again after the 401. */
Test(k8s, in_cluster_rotation)
{
    char yaml[2048];
    snprintf(yaml, sizeof yaml,
             "  k8s:\n    in_cluster: true\n    api_url: \"%s\"\n"
             "    token_file: \"%s/serviceaccount/token\"\n"
             "    ca_file: \"%s/serviceaccount/ca.crt\"\n    warm_pool: sandboxd-pool\n"
             "    router_url: \"%s\"\n",
             k.api, k.dir, k.dir, k.router);
    sbx_error err;
    cr_assert_eq(open_ctx_section(yaml, &err), SBX_OK, "%s", err.message);
    sbx_handle *h = ph_create(prov, "k8s-in-cluster");
    echo_ok(h, "in-cluster");
    char ref[SBX_REF_MAX];
    snprintf(ref, sizeof ref, "%s", sbx_handle_ref(h));
    sbx_release(h);
    long st = 0;
    free(k8s_stack_http(&k, "POST", "/_fake/token", "{\"rotate\": true, \"grace\": 0}", 0, &st));
    cr_assert_eq(st, 200);
    cr_assert_eq(sbx_attach(prov, "k8s-in-cluster", ref, NULL, &h, &err), SBX_OK,
                 "after the rotation: %s", err.message);
    sbx_release(h);
    cr_expect_eq(sbx_destroy(prov, "k8s-in-cluster", ref, NULL, &err), SBX_OK, "%s",
                 err.message);
}

/* ---- health ---------------------------------------------------------------
 * The health op: discovery of both agent-sandbox groups and a list in the
 * namespace, each sent once. Its own suite: some tests start the fake with
 * CRDs missing (--no-crd). */

static int health(struct sbx_health *h, sbx_error *err)
{
    memset(h, 0, sizeof *h);
    h->size = sizeof *h;
    sbx_error_clear(err);
    return sbx_provider_health(prov, NULL, h, err);
}

TestSuite(k8s_health, .fini = down, .timeout = 60);

/* Healthy: the detail names the server's host and port and what was
 * found, never the token; nothing was created. */
Test(k8s_health, healthy)
{
    up();
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    struct sbx_health h;
    cr_assert_eq(health(&h, &err), SBX_OK, "%s", err.message);
    cr_expect(h.checked);
    char hostport[64];
    snprintf(hostport, sizeof hostport, "API server %.40s:", k.api + strlen("https://"));
    cr_expect(strncmp(h.detail, hostport, strlen(hostport) - 1) == 0, "%s", h.detail);
    cr_expect(strstr(h.detail, "sandboxclaims served"), "%s", h.detail);
    cr_expect(strstr(h.detail, "namespace default"), "%s", h.detail);
    cr_expect(!strstr(h.detail, k.token) && !strstr(h.detail, "https://"), "%s", h.detail);
    cr_expect_eq(requests("list", "sandboxclaims"), 1);
    cr_expect_eq(k8s_stack_claims(&k), 0);
}

/* A refused token: SBX_E_DENIED naming where the token came from. */
Test(k8s_health, token_refused)
{
    up();
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    long st = 0;
    free(k8s_stack_http(&k, "POST", "/_fake/token", "{\"expire\": true}", 0, &st));
    cr_assert_eq(st, 200);
    struct sbx_health h;
    cr_assert_eq(health(&h, &err), SBX_E_DENIED, "%s", err.message);
    cr_expect(strstr(err.message, "refused") && strstr(err.message, "HTTP 401") &&
                  strstr(err.message, k.kubeconfig),
              "%s", err.message);
    cr_expect(!strstr(err.message, k.token), "the token is in the message: %s", err.message);
}

/* Nothing listening: SBX_E_UNAVAILABLE, "cannot reach", at once (no retries). */
Test(k8s_health, unreachable)
{
    up();
    sbx_error err;
    cr_assert_eq(open_ctx("    api_url: \"https://127.0.0.1:1\"\n", &err), SBX_OK, "%s",
                 err.message);
    struct sbx_health h;
    int64_t t0 = now_ms();
    cr_assert_eq(health(&h, &err), SBX_E_UNAVAILABLE, "%s", err.message);
    cr_expect(strstr(err.message, "cannot reach the API server at 127.0.0.1:1"), "%s",
              err.message);
    cr_expect_lt(now_ms() - t0, 2000, "retried?");
}

/* The SandboxClaim CRD not installed: its group still serves the other
 * extensions, the claims are missing from its discovery document. */
Test(k8s_health, claim_crd_missing)
{
    const char *args[] = {"--no-crd", "sandboxclaims", NULL};
    up_with(args);
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    struct sbx_health h;
    cr_assert_eq(health(&h, &err), SBX_E_UNAVAILABLE, "%s", err.message);
    cr_expect(strstr(err.message, "not sandboxclaims") &&
                  strstr(err.message, "sandboxclaims.extensions.agents.x-k8s.io is not installed"),
              "%s", err.message);
}

/* No agent-sandbox at all: the group is not served (404). */
Test(k8s_health, no_crds)
{
    const char *args[] = {"--no-crd", "sandboxes", "--no-crd", "sandboxclaims",
                          "--no-crd", "sandboxtemplates", "--no-crd", "sandboxwarmpools", NULL};
    up_with(args);
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    struct sbx_health h;
    cr_assert_eq(health(&h, &err), SBX_E_UNAVAILABLE, "%s", err.message);
    cr_expect(strstr(err.message, "does not serve agents.x-k8s.io/v1beta1") &&
                  strstr(err.message, "CRDs are not installed"),
              "%s", err.message);
}

/* Template mode needs sandboxtemplates, not sandboxclaims. */
Test(k8s_health, template_mode_crds)
{
    const char *args[] = {"--no-crd", "sandboxclaims", NULL};
    up_with(args);
    char yaml[2048];
    snprintf(yaml, sizeof yaml,
             "  k8s:\n    kubeconfig: \"%s\"\n    template: sandboxd-template\n"
             "    router_url: \"%s\"\n",
             k.kubeconfig, k.router);
    sbx_error err;
    cr_assert_eq(open_ctx_section(yaml, &err), SBX_OK, "%s", err.message);
    struct sbx_health h;
    cr_assert_eq(health(&h, &err), SBX_OK, "%s", err.message);
    cr_expect(strstr(h.detail, "sandboxtemplates served"), "%s", h.detail);
}

/* A failing API server (503 on discovery): SBX_E_UNAVAILABLE, sent once. */
Test(k8s_health, failing)
{
    up();
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(k8s_stack_faults(&k, "[{\"kind\": \"status\", \"status\": 503, \"verb\": \"list\","
                                      " \"resource\": \"sandboxclaims\", \"times\": 1}]"),
                 0);
    struct sbx_health h;
    cr_assert_eq(health(&h, &err), SBX_E_UNAVAILABLE, "%s", err.message);
    cr_expect(strstr(err.message, "is failing (HTTP 503)"), "%s", err.message);
    cr_expect_eq(requests("list", "sandboxclaims"), 1, "retried");
}
