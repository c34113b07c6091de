/*
 * bench_k8s.c - the k8s provider against the fake cluster on loopback
 * (tests/k8s/fake: API server, controller, router, sandboxd), each measure
 * next to its floor in the same run:
 *   1. exec of `true` on an existing claim: sbx_exec through libsbx +
 *      k8s.so vs libcurl making gRPC calls straight to the fake router
 *      (HTTP/2 prior knowledge, a new connection per call as the provider
 *      does): (a) one Start of `true`, (b) three calls (Start, WriteStdin
 *      eof, an Execute of `true`), (c) the provider's own three calls
 *      (its wrapper, eof, its sweep script), interleaved;
 *   2. a claim on a warm pool: sbx_create until Ready vs the fake
 *      controller's own bind and Ready latency (its /_fake/stats).
 * Usage: bench_k8s [RUNS [CLAIMS]]   (defaults 50 and 8)
 */
#include "fake_bench.h"
#include "k8s_stack.h"

#include <sbx/sbx.h>

#include "exec_tree.h"

#include <process/v1/process.pb-c.h>

#include <curl/curl.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct k8s_stack k;
static char pod[256];

/* ---- the libcurl floor ------------------------------------------------ */
struct grpc_answer {
    long grpc_status;
};

static size_t on_hdr(char *d, size_t s, size_t n, void *ctx)
{
    struct grpc_answer *a = ctx;
    if (s * n > 12 && strncasecmp(d, "grpc-status:", 12) == 0)
        a->grpc_status = strtol(d + 12, NULL, 10);
    return s * n;
}

/* One gRPC call of method with a packed message; its grpc-status. */
static long grpc_call(const char *method, const uint8_t *msg, size_t len)
{
    uint8_t *frame = malloc(len + 5);
    frame[0] = 0;
    frame[1] = (uint8_t)(len >> 24), frame[2] = (uint8_t)(len >> 16);
    frame[3] = (uint8_t)(len >> 8), frame[4] = (uint8_t)len;
    memcpy(frame + 5, msg, len);
    char url[256], id[300];
    snprintf(url, sizeof url, "%s/process.v1.ProcessService/%s", k.router, method);
    snprintf(id, sizeof id, "X-Sandbox-ID: %s", pod);
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/grpc");
    h = curl_slist_append(h, "TE: trailers");
    h = curl_slist_append(h, id);
    h = curl_slist_append(h, "X-Sandbox-Namespace: default");
    h = curl_slist_append(h, "X-Sandbox-Port: 9090");
    CURL *c = curl_easy_init();
    struct grpc_answer a = {-1};
    size_t got = 0;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2_PRIOR_KNOWLEDGE);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, frame);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)(len + 5));
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_hdr);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &a);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, bench_discard);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &got);
    if (curl_easy_perform(c) != CURLE_OK)
        bench_die("floor", method);
    curl_easy_cleanup(c);
    curl_slist_free_all(h);
    free(frame);
    return a.grpc_status;
}

static void floor_start_true(void)
{
    char *cmd[] = {"true"};
    Process__V1__ProcessConfig cfg = PROCESS__V1__PROCESS_CONFIG__INIT;
    cfg.n_command = 1;
    cfg.command = cmd;
    Process__V1__StartRequest rq = PROCESS__V1__START_REQUEST__INIT;
    rq.config = &cfg;
    uint8_t buf[256];
    size_t n = process__v1__start_request__pack(&rq, buf);
    if (grpc_call("Start", buf, n) != 0)
        bench_die("floor", "Start of true failed");
}

/* The provider's three calls, each as small as it can be. */
static void floor_three(void)
{
    floor_start_true();
    Process__V1__WriteStdinRequest w;
    process__v1__write_stdin_request__init(&w); /* (its INIT macro trips -Wmissing-braces) */
    Google__Protobuf__Empty e = GOOGLE__PROTOBUF__EMPTY__INIT;
    w.process_id = 1 << 30; /* finished by now: NOT_FOUND, as often for the provider */
    w.payload_case = PROCESS__V1__WRITE_STDIN_REQUEST__PAYLOAD_EOF;
    w.eof = &e;
    uint8_t buf[256];
    size_t n = process__v1__write_stdin_request__pack(&w, buf);
    (void)grpc_call("WriteStdin", buf, n);
    char *cmd[] = {"true"};
    Process__V1__ProcessConfig cfg = PROCESS__V1__PROCESS_CONFIG__INIT;
    cfg.n_command = 1;
    cfg.command = cmd;
    Process__V1__ExecuteRequest x = PROCESS__V1__EXECUTE_REQUEST__INIT;
    x.config = &cfg;
    n = process__v1__execute_request__pack(&x, buf);
    if (grpc_call("Execute", buf, n) != 0)
        bench_die("floor", "Execute failed");
}

/* The provider's exact calls (plugins/k8s/exec.c; wrap_sh copied from
 * there): Start of `true` in its wrapper with the tag, WriteStdin eof, the
 * sweep script as an Execute. What remains between this and sbx_exec is
 * the client side: libsbx, the provider's HTTP/2 and protobuf handling. */
static const char wrap_sh[] =
    "k=$1; t=$2; shift 2; p=$$; "
    "(while { read -r s </proc/$p/stat; } 2>/dev/null; do "
    "case \"${s##*) }\" in Z*|X*) break;; esac; sleep 0.2; done; "
    "unset " SBXP_EXEC_TAG_VAR "; exec sh -c \"$k\" sh \"$t\") "
    "</dev/null >/dev/null 2>&1 & exec \"$@\"";

static void floor_same(int i)
{
    char tok[32];
    snprintf(tok, sizeof tok, "benchtok%d", i);
    char *cmd[] = {"sh", "-c", (char *)wrap_sh, "sh", (char *)sbxp_exec_tree_kill_sh, tok, "true"};
    Process__V1__ProcessConfig__EnvVarsEntry ent = PROCESS__V1__PROCESS_CONFIG__ENV_VARS_ENTRY__INIT;
    Process__V1__ProcessConfig__EnvVarsEntry *ents[1] = {&ent};
    ent.key = SBXP_EXEC_TAG_VAR;
    ent.value = tok;
    Process__V1__ProcessConfig cfg = PROCESS__V1__PROCESS_CONFIG__INIT;
    cfg.n_command = 7;
    cfg.command = cmd;
    cfg.n_env_vars = 1;
    cfg.env_vars = ents;
    Process__V1__StartRequest rq = PROCESS__V1__START_REQUEST__INIT;
    rq.config = &cfg;
    uint8_t buf[4096];
    size_t n = process__v1__start_request__pack(&rq, buf);
    if (grpc_call("Start", buf, n) != 0)
        bench_die("floor", "Start of the wrapper failed");
    Process__V1__WriteStdinRequest w;
    process__v1__write_stdin_request__init(&w);
    Google__Protobuf__Empty e = GOOGLE__PROTOBUF__EMPTY__INIT;
    w.process_id = 1 << 30;
    w.payload_case = PROCESS__V1__WRITE_STDIN_REQUEST__PAYLOAD_EOF;
    w.eof = &e;
    n = process__v1__write_stdin_request__pack(&w, buf);
    (void)grpc_call("WriteStdin", buf, n);
    char *sw[] = {"sh", "-c", (char *)sbxp_exec_tree_kill_sh, "sh", tok};
    Process__V1__ProcessConfig sc = PROCESS__V1__PROCESS_CONFIG__INIT;
    sc.n_command = 5;
    sc.command = sw;
    Process__V1__ExecuteRequest x = PROCESS__V1__EXECUTE_REQUEST__INIT;
    x.config = &sc;
    n = process__v1__execute_request__pack(&x, buf);
    if (grpc_call("Execute", buf, n) != 0)
        bench_die("floor", "Execute of the sweep failed");
}

/* ---- through libsbx --------------------------------------------------- */
static void sbx_true(sbx_handle *h)
{
    const char *argv[] = {"true", NULL};
    struct sbx_exec_args a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.argv = argv;
    struct sbx_exec_result res;
    memset(&res, 0, sizeof res);
    res.size = sizeof res;
    sbx_error err;
    if (sbx_exec(h, &a, &res, NULL, &err) != SBX_OK || res.exit_code != 0)
        bench_die("exec", err.message);
}

static json_object *get_json(const char *path)
{
    long st = 0;
    char *s = k8s_stack_http(&k, "GET", path, NULL, 1, &st);
    json_object *o = s && st == 200 ? json_tokener_parse(s) : NULL;
    free(s);
    if (!o)
        bench_die("api", path);
    return o;
}

static const char *jstr(json_object *o, const char *a, const char *b, const char *c)
{
    json_object *x = o;
    const char *ks[] = {a, b, c};
    for (int i = 0; i < 3 && ks[i]; i++)
        if (!json_object_object_get_ex(x, ks[i], &x))
            return NULL;
    return json_object_get_string(x);
}

/* Ready, unclaimed members of the pool (the controller's pods that are
 * ready minus the claimed Sandboxes). */
static int warm_ready(void)
{
    json_object *o = get_json("/apis/agents.x-k8s.io/v1beta1/namespaces/default/sandboxes");
    json_object *items = NULL;
    json_object_object_get_ex(o, "items", &items);
    int n = 0;
    for (size_t i = 0; items && i < json_object_array_length(items); i++) {
        json_object *s = json_object_array_get_idx(items, i), *conds = NULL;
        const char *owner = jstr(s, "metadata", "labels", "agents.x-k8s.io/claim-uid");
        json_object *st = NULL, *md = NULL, *refs = NULL;
        json_object_object_get_ex(s, "metadata", &md);
        json_object_object_get_ex(md, "ownerReferences", &refs);
        int claimed = owner != NULL;
        for (size_t r = 0; refs && r < json_object_array_length(refs); r++) {
            const char *kind = jstr(json_object_array_get_idx(refs, r), "kind", NULL, NULL);
            if (kind && strcmp(kind, "SandboxClaim") == 0)
                claimed = 1;
        }
        json_object_object_get_ex(s, "status", &st);
        json_object_object_get_ex(st, "conditions", &conds);
        for (size_t c = 0; !claimed && conds && c < json_object_array_length(conds); c++) {
            json_object *cd = json_object_array_get_idx(conds, c);
            const char *t = jstr(cd, "type", NULL, NULL), *v = jstr(cd, "status", NULL, NULL);
            if (t && v && !strcmp(t, "Ready") && !strcmp(v, "True"))
                n++;
        }
    }
    json_object_put(o);
    return n;
}

int main(int argc, char **argv)
{
    bench_name = "bench_k8s";
    int runs = argc > 1 ? atoi(argv[1]) : 50;
    int claims = argc > 2 ? atoi(argv[2]) : 8;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (k8s_stack_start(&k, NULL) != 0)
        bench_die("fake", "cannot start tests/k8s/fake/fake_k8s.py");
    char cfg[128], yaml[4096];
    snprintf(cfg, sizeof cfg, "%s/sbx.yaml", k.dir);
    k8s_stack_yaml(&k, NULL, yaml, sizeof yaml);
    FILE *f = fopen(cfg, "w");
    fprintf(f, "providers:\n%s", yaml);
    fclose(f);
    struct sbx_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.config_path = cfg;
    o.plugin_path = SBX_BENCH_PROVIDER_DIR;
    o.ignore_environment = true;
    sbx_ctx *ctx;
    sbx_provider *p;
    sbx_handle *h;
    sbx_error err;
    if (sbx_open(&o, &ctx, &err) != SBX_OK || sbx_provider_lookup(ctx, "k8s", &p, &err) != SBX_OK)
        bench_die("open", err.message);
    struct sbx_create_options co = {sizeof co, NULL, 0, NULL, NULL, NULL};
    if (sbx_create(p, "bench-exec", &co, NULL, &h, &err) != SBX_OK)
        bench_die("create", err.message);
    json_object *cl = get_json("/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/default/"
                               "sandboxclaims");
    json_object *items = NULL;
    json_object_object_get_ex(cl, "items", &items);
    const char *pn = items ? jstr(json_object_array_get_idx(items, 0), "status", "sandbox", "name")
                           : NULL;
    if (!pn)
        bench_die("claim", "no sandbox name in its status");
    snprintf(pod, sizeof pod, "%s", pn);
    json_object_put(cl);

    /* 1. exec, interleaved so that all three see the same machine state */
    double *ta = calloc((size_t)runs, sizeof *ta), *tb = calloc((size_t)runs, sizeof *tb),
           *tc = calloc((size_t)runs, sizeof *tc), *td = calloc((size_t)runs, sizeof *td);
    for (int i = 0; i < 3; i++) {
        sbx_true(h);
        floor_three();
    }
    for (int i = 0; i < runs; i++) {
        double t = bench_now();
        sbx_true(h);
        ta[i] = bench_now() - t;
        t = bench_now();
        floor_start_true();
        tb[i] = bench_now() - t;
        t = bench_now();
        floor_three();
        tc[i] = bench_now() - t;
        t = bench_now();
        floor_same(i);
        td[i] = bench_now() - t;
    }
    double ma = bench_median(ta, (size_t)runs), mb = bench_median(tb, (size_t)runs),
           mc = bench_median(tc, (size_t)runs), md = bench_median(td, (size_t)runs);
    printf("exec of true (median of %d): sbx %.2f ms; curl one Start %.2f ms (%.2fx); "
           "curl Start+WriteStdin+Execute of true %.2f ms (%.2fx); curl of the provider's "
           "own three calls (wrapper, eof, sweep) %.2f ms (%.2fx)\n",
           runs, ma * 1e3, mb * 1e3, ma / mb, mc * 1e3, ma / mc, md * 1e3, ma / md);
    sbx_release(h);

    /* 2. warm claims: time to Ready vs the controller's own latency */
    double *tw = calloc((size_t)claims, sizeof *tw), *tr = calloc((size_t)claims, sizeof *tr);
    int warm = 0;
    for (int i = 0; i < claims; i++) {
        for (int w = 0; w < 600 && warm_ready() < 1; w++)
            usleep(50000);
        char key[64];
        snprintf(key, sizeof key, "bench-claim-%d", i);
        double t = bench_now();
        if (sbx_create(p, key, &co, NULL, &h, &err) != SBX_OK)
            bench_die("create", err.message);
        double took = bench_now() - t;
        char ref[SBX_REF_MAX];
        snprintf(ref, sizeof ref, "%s", sbx_handle_ref(h));
        sbx_release(h);
        json_object *s = get_json("/_fake/stats"), *ctl = NULL, *binds = NULL;
        json_object_object_get_ex(s, "controller", &ctl);
        json_object_object_get_ex(ctl, "binds", &binds);
        size_t nb = binds ? json_object_array_length(binds) : 0;
        json_object *last = nb ? json_object_array_get_idx(binds, nb - 1) : NULL, *rm = NULL;
        const char *launch = last ? jstr(last, "launch", NULL, NULL) : NULL;
        if (last && launch && !strcmp(launch, "warm") &&
            json_object_object_get_ex(last, "ready_ms", &rm)) {
            tw[warm] = took;
            tr[warm] = json_object_get_double(rm) / 1e3;
            warm++;
        } else {
            printf("claim %d: launch %s, not counted\n", i, launch ? launch : "?");
        }
        json_object_put(s);
        if (sbx_destroy(p, key, ref, NULL, &err) != SBX_OK)
            bench_die("destroy", err.message);
    }
    if (warm) {
        double mw = bench_median(tw, (size_t)warm), mr = bench_median(tr, (size_t)warm);
        /* the fake binds within a millisecond: a ratio to that says nothing */
        printf("warm claim to Ready (median of %d): sbx_create %.1f ms; the controller's "
               "creation-to-Ready %.1f ms; overhead %.1f ms\n",
               warm, mw * 1e3, mr * 1e3, (mw - mr) * 1e3);
    }
    sbx_close(ctx);
    k8s_stack_stop(&k);
    return 0;
}
