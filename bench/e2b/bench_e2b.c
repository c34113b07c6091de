/*
 * bench_e2b.c - the e2b provider against the fake on loopback
 * (tests/e2b/fake_e2b.py), each measure next to its floor in the same run:
 *   1. exec of `true`: libsbx + e2b.so vs a minimal libcurl client making
 *      the same call (one process.Process/Start stream read to its end);
 *   2. a file of SIZE MiB written and read back through the provider: peak
 *      RSS growth and throughput vs curl uploading (POST /files) and
 *      downloading (GET /files) the same bytes;
 *   3. 100 sequential execs: connections the fake accepted meanwhile.
 * Usage: bench_e2b [RUNS [SIZE_MIB]]   (defaults 200 execs... see below)
 */
#include "fake_bench.h"

#include <sbx/sbx.h>

#include <curl/curl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>


/* ---- the libcurl floor ------------------------------------------------ */
/* One Start of `true` with the same headers as the adapter, read to the end. */
static void floor_exec(CURL *c, const char *sid, const char *token)
{
    static const char json[] =
        "{\"process\":{\"cmd\":\"true\",\"args\":[],\"cwd\":\"/home/user/workspace\"},"
        "\"stdin\":false}";
    char body[256];
    size_t n = sizeof json - 1;
    body[0] = 0;
    body[1] = (char)(n >> 24);
    body[2] = (char)(n >> 16);
    body[3] = (char)(n >> 8);
    body[4] = (char)n;
    memcpy(body + 5, json, n);
    char url[128], h1[160], h2[160];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/process.Process/Start", bench_fake_port);
    snprintf(h1, sizeof h1, "E2b-Sandbox-Id: %s", sid);
    snprintf(h2, sizeof h2, "X-Access-Token: %s", token);
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/connect+json");
    h = curl_slist_append(h, "Connect-Protocol-Version: 1");
    h = curl_slist_append(h, "E2b-Sandbox-Port: 49983");
    h = curl_slist_append(h, h1);
    h = curl_slist_append(h, h2);
    h = curl_slist_append(h, "Authorization: Basic dXNlcjo=");
    size_t got = 0;
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)(n + 5));
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, bench_discard);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &got);
    if (curl_easy_perform(c) != CURLE_OK || got == 0)
        bench_die("floor exec", "failed");
    curl_slist_free_all(h);
}

struct zeros {
    uint64_t left;
};

static size_t zero_read(char *d, size_t s, size_t n, void *ctx)
{
    struct zeros *z = ctx;
    size_t k = s * n < z->left ? s * n : (size_t)z->left;
    memset(d, 0, k);
    z->left -= k;
    return k;
}

/* curl POST /files (upload=1) or GET /files of size bytes; seconds. */
static double floor_file(CURL *c, const char *sid, const char *token, int upload,
                         uint64_t size)
{
    char url[256], h1[160], h2[160];
    snprintf(url, sizeof url,
             "http://127.0.0.1:%d/files?path=%%2Fhome%%2Fuser%%2Fworkspace%%2Fcurl.bin"
             "&username=user",
             bench_fake_port);
    snprintf(h1, sizeof h1, "E2b-Sandbox-Id: %s", sid);
    snprintf(h2, sizeof h2, "X-Access-Token: %s", token);
    struct curl_slist *h = curl_slist_append(NULL, h1);
    h = curl_slist_append(h, h2);
    h = curl_slist_append(h, "Content-Type: application/octet-stream");
    struct zeros z = {size};
    size_t got = 0;
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, bench_discard);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &got);
    if (upload) {
        curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "POST");
        curl_easy_setopt(c, CURLOPT_READFUNCTION, zero_read);
        curl_easy_setopt(c, CURLOPT_READDATA, &z);
        curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)size);
    }
    double t = bench_now();
    if (curl_easy_perform(c) != CURLE_OK)
        bench_die("floor file", upload ? "upload failed" : "download failed");
    t = bench_now() - t;
    if (!upload && got != size)
        bench_die("floor file", "short download");
    curl_slist_free_all(h);
    return t;
}

/* ---- through libsbx --------------------------------------------------- */
static long zsrc_read(void *ctx, void *buf, size_t cap)
{
    struct zeros *z = ctx;
    size_t k = cap < z->left ? cap : (size_t)z->left;
    memset(buf, 0, k);
    z->left -= k;
    return (long)k;
}

static int64_t zsrc_len(void *ctx)
{
    return (int64_t)((struct zeros *)ctx)->left;
}

static int count_write(void *ctx, const void *b, size_t n)
{
    (void)b;
    *(uint64_t *)ctx += n;
    return 0;
}

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

int main(int argc, char **argv)
{
    bench_name = "bench_e2b";
    int runs = argc > 1 ? atoi(argv[1]) : 200;
    uint64_t mib = argc > 2 ? (uint64_t)atoll(argv[2]) : 256;
    uint64_t size = mib << 20;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    bench_fake_start("tests/e2b/fake_e2b.py");
    setenv("E2B_API_KEY", BENCH_FAKE_KEY, 1);
    char cfg[128];
    snprintf(cfg, sizeof cfg, "%s/sbx.yaml", bench_fake_dir());
    FILE *f = fopen(cfg, "w");
    fprintf(f, "providers:\n  e2b:\n    api_url: \"http://127.0.0.1:%d\"\n"
               "    envd_url: \"http://127.0.0.1:%d\"\n    domain: e2b.local\n",
            bench_fake_port, bench_fake_port);
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
    if (sbx_open(&o, &ctx, &err) != SBX_OK || sbx_provider_lookup(ctx, "e2b", &p, &err) != SBX_OK)
        bench_die("open", err.message);
    struct sbx_create_options co = {sizeof co, NULL, 0, NULL, NULL, NULL};
    if (sbx_create(p, "bench", &co, NULL, &h, &err) != SBX_OK)
        bench_die("create", err.message);
    const char *ref = sbx_handle_ref(h);
    const char *sid = strchr(ref, ':') + 1;
    /* The floor needs the envd token: ask the control plane like the SDK. */
    CURL *c = curl_easy_init();
    char url[256], keyh[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/sandboxes/%s", bench_fake_port, sid);
    snprintf(keyh, sizeof keyh, "X-API-Key: %s", BENCH_FAKE_KEY);
    struct curl_slist *kh = curl_slist_append(NULL, keyh);
    struct bench_buf b = {NULL, 0};
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, kh);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, bench_collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    if (curl_easy_perform(c) != CURLE_OK || !b.p || !strstr(b.p, "envdAccessToken"))
        bench_die("token", "GET /sandboxes/{id} failed");
    char token[128];
    if (sscanf(strstr(b.p, "envdAccessToken") + 19, "%127[0-9a-f]", token) != 1)
        bench_die("token", "unparsable");
    free(b.p);
    curl_slist_free_all(kh);

    /* 1. exec, interleaved so that both see the same machine state */
    double *ta = calloc((size_t)runs, sizeof *ta), *tb = calloc((size_t)runs, sizeof *tb);
    for (int i = 0; i < 5; i++) {
        sbx_true(h);
        floor_exec(c, sid, token);
    }
    for (int i = 0; i < runs; i++) {
        double t = bench_now();
        sbx_true(h);
        ta[i] = bench_now() - t;
        t = bench_now();
        floor_exec(c, sid, token);
        tb[i] = bench_now() - t;
    }
    double ma = bench_median(ta, (size_t)runs), mb = bench_median(tb, (size_t)runs);
    printf("exec of true (median of %d): sbx %.2f ms, libcurl floor %.2f ms, ratio %.2fx "
           "(target <= 1.10x)\n",
           runs, ma * 1e3, mb * 1e3, ma / mb);

    /* 2. a big file through the provider vs curl */
    long rss0 = bench_status_kib("VmRSS");
    bench_reset_peak();
    struct zeros z = {size};
    struct sbx_source src = SBX_SOURCE_INIT(&z, zsrc_read);
    src.length = zsrc_len;
    double t = bench_now();
    if (sbx_write(h, "big.bin", &src, 0, NULL, &err) != SBX_OK)
        bench_die("write", err.message);
    double tw = bench_now() - t;
    uint64_t got = 0;
    struct sbx_sink sink = SBX_SINK_INIT(&got, count_write);
    t = bench_now();
    if (sbx_read(h, "big.bin", &sink, NULL, &err) != SBX_OK || got != size)
        bench_die("read", err.message);
    double tr = bench_now() - t;
    long growth = bench_status_kib("VmHWM") - rss0;
    double cw = floor_file(c, sid, token, 1, size), cr = floor_file(c, sid, token, 0, size);
    double mbs = (double)mib;
    printf("%llu MiB: write %.0f MiB/s (curl %.0f MiB/s, %.2fx), read %.0f MiB/s (curl %.0f "
           "MiB/s, %.2fx) (target >= 0.8x); peak RSS growth %ld KiB (target <= 8192)\n",
           (unsigned long long)mib, mbs / tw, mbs / cw, cw / tw, mbs / tr, mbs / cr, cr / tr,
           growth);

    /* 3. 100 sequential execs over reused connections */
    int c0 = bench_fake_connections(c);
    for (int i = 0; i < 100; i++)
        sbx_true(h);
    int c1 = bench_fake_connections(c);
    /* the two stats requests opened one connection each */
    printf("100 sequential execs: %d new connections at the fake\n", c1 - c0 - 1);

    sbx_destroy(p, "bench", ref, NULL, &err);
    sbx_release(h);
    sbx_close(ctx);
    curl_easy_cleanup(c);
    free(ta);
    free(tb);
    bench_fake_stop();
    return 0;
}
