/*
 * bench_daytona.c - the daytona provider against the fake on loopback
 * (tests/daytona/fake_daytona.py), each measure next to its floor in the
 * same run:
 *   1. exec of `true`: libsbx + daytona.so vs a minimal libcurl client
 *      making the same toolbox calls (create a session, run the command in
 *      it with its output sent to two files, download both, delete the
 *      session and the files);
 *   2. a file of SIZE MiB written and read back through the provider: peak
 *      RSS growth and throughput vs curl uploading (POST /files/upload,
 *      multipart) and downloading (GET /files/download) the same bytes;
 *   3. 100 sequential execs: connections the fake accepted meanwhile.
 * Usage: bench_daytona [RUNS [SIZE_MIB]]   (defaults 100 and 256)
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
/* One toolbox request; body NULL sends none. */
static void call(CURL *c, const char *method, const char *tb, const char *path,
                 const char *body)
{
    char url[512];
    snprintf(url, sizeof url, "%s%s", tb, path);
    struct curl_slist *h = curl_slist_append(NULL, "Authorization: Bearer " BENCH_FAKE_KEY);
    if (body)
        h = curl_slist_append(h, "Content-Type: application/json");
    size_t got = 0;
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    if (body)
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, bench_discard);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &got);
    long code = 0;
    if (curl_easy_perform(c) != CURLE_OK ||
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code) != CURLE_OK || code >= 400)
        bench_die("floor", path);
    curl_slist_free_all(h);
}

/* `true` the way the provider runs it, with the least a client can do. */
static void floor_exec(CURL *c, const char *tb, int i)
{
    char sid[64], path[256], body[512];
    snprintf(sid, sizeof sid, "floor-%d", i);
    snprintf(body, sizeof body, "{\"sessionId\":\"%s\"}", sid);
    call(c, "POST", tb, "/process/session", body);
    snprintf(path, sizeof path, "/process/session/%s/exec", sid);
    snprintf(body, sizeof body,
             "{\"command\":\"sh -c 'mkdir -p /tmp/.f%d && cd /home/daytona/workspace && exec "
             "true </dev/null >/tmp/.f%d/out 2>/tmp/.f%d/err'\",\"runAsync\":false}",
             i, i, i);
    call(c, "POST", tb, path, body);
    snprintf(path, sizeof path, "/process/session/%s", sid);
    call(c, "DELETE", tb, path, NULL);
    snprintf(path, sizeof path, "/files/download?path=%%2Ftmp%%2F.f%d%%2Fout", i);
    call(c, "GET", tb, path, NULL);
    snprintf(path, sizeof path, "/files/download?path=%%2Ftmp%%2F.f%d%%2Ferr", i);
    call(c, "GET", tb, path, NULL);
    snprintf(path, sizeof path, "/files?path=%%2Ftmp%%2F.f%d&recursive=true", i);
    call(c, "DELETE", tb, path, NULL);
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

/* curl multipart upload or download of size bytes; seconds. */
static double floor_file(CURL *c, const char *tb, int upload, uint64_t size)
{
    char url[512];
    snprintf(url, sizeof url, "%s/files/%s?path=%%2Fhome%%2Fdaytona%%2Fworkspace%%2Fcurl.bin",
             tb, upload ? "upload" : "download");
    struct curl_slist *h = curl_slist_append(NULL, "Authorization: Bearer " BENCH_FAKE_KEY);
    struct zeros z = {size};
    size_t got = 0;
    curl_mime *mime = NULL;
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, bench_discard);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &got);
    if (upload) {
        mime = curl_mime_init(c);
        curl_mimepart *part = curl_mime_addpart(mime);
        curl_mime_name(part, "file");
        curl_mime_filename(part, "curl.bin");
        curl_mime_data_cb(part, (curl_off_t)size, zero_read, NULL, NULL, &z);
        curl_easy_setopt(c, CURLOPT_MIMEPOST, mime);
    }
    double t = bench_now();
    if (curl_easy_perform(c) != CURLE_OK)
        bench_die("floor file", upload ? "upload failed" : "download failed");
    t = bench_now() - t;
    if (!upload && got != size)
        bench_die("floor file", "short download");
    curl_mime_free(mime);
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
    bench_name = "bench_daytona";
    int runs = argc > 1 ? atoi(argv[1]) : 100;
    uint64_t mib = argc > 2 ? (uint64_t)atoll(argv[2]) : 256;
    uint64_t size = mib << 20;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    bench_fake_start("tests/daytona/fake_daytona.py");
    setenv("DAYTONA_API_KEY", BENCH_FAKE_KEY, 1);
    char cfg[128];
    snprintf(cfg, sizeof cfg, "%s/sbx.yaml", bench_fake_dir());
    FILE *f = fopen(cfg, "w");
    fprintf(f, "providers:\n  daytona:\n    api_url: \"http://127.0.0.1:%d/api\"\n", bench_fake_port);
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
    if (sbx_open(&o, &ctx, &err) != SBX_OK ||
        sbx_provider_lookup(ctx, "daytona", &p, &err) != SBX_OK)
        bench_die("open", err.message);
    struct sbx_create_options co = {sizeof co, NULL, 0, NULL, NULL, NULL};
    if (sbx_create(p, "bench", &co, NULL, &h, &err) != SBX_OK)
        bench_die("create", err.message);
    const char *ref = sbx_handle_ref(h);
    char tb[256];
    snprintf(tb, sizeof tb, "http://127.0.0.1:%d/toolbox/%s", bench_fake_port, strchr(ref, ':') + 1);
    CURL *c = curl_easy_init();

    /* 1. exec, interleaved so that both see the same machine state */
    double *ta = calloc((size_t)runs, sizeof *ta), *tb2 = calloc((size_t)runs, sizeof *tb2);
    for (int i = 0; i < 5; i++) {
        sbx_true(h);
        floor_exec(c, tb, 100000 + i);
    }
    for (int i = 0; i < runs; i++) {
        double t = bench_now();
        sbx_true(h);
        ta[i] = bench_now() - t;
        t = bench_now();
        floor_exec(c, tb, i);
        tb2[i] = bench_now() - t;
    }
    double ma = bench_median(ta, (size_t)runs), mb = bench_median(tb2, (size_t)runs);
    printf("exec of true (median of %d): sbx %.2f ms, libcurl floor %.2f ms, ratio %.2fx "
           "(target <= 1.10x)\n",
           runs, ma * 1e3, mb * 1e3, ma / mb);

    /* 2. a big file through the provider vs curl: each twice, alternating,
     * best of two (the first writes of a run pay for the page cache) */
    long rss0 = bench_status_kib("VmRSS");
    bench_reset_peak();
    double tw = 1e9, tr = 1e9, cw = 1e9, cr = 1e9;
    for (int round = 0; round < 2; round++) {
        struct zeros z = {size};
        struct sbx_source src = SBX_SOURCE_INIT(&z, zsrc_read);
        src.length = zsrc_len;
        double t = bench_now();
        if (sbx_write(h, "big.bin", &src, 0, NULL, &err) != SBX_OK)
            bench_die("write", err.message);
        t = bench_now() - t;
        tw = t < tw ? t : tw;
        t = floor_file(c, tb, 1, size);
        cw = t < cw ? t : cw;
        uint64_t got = 0;
        struct sbx_sink sink = SBX_SINK_INIT(&got, count_write);
        t = bench_now();
        if (sbx_read(h, "big.bin", &sink, NULL, &err) != SBX_OK || got != size)
            bench_die("read", err.message);
        t = bench_now() - t;
        tr = t < tr ? t : tr;
        t = floor_file(c, tb, 0, size);
        cr = t < cr ? t : cr;
    }
    long growth = bench_status_kib("VmHWM") - rss0;
    double mbs = (double)mib;
    printf("%llu MiB (best of 2): write %.0f MiB/s (curl %.0f MiB/s, %.2fx), read %.0f MiB/s "
           "(curl %.0f MiB/s, %.2fx) (target >= 0.8x); peak RSS growth %ld KiB (target <= "
           "8192)\n",
           (unsigned long long)mib, mbs / tw, mbs / cw, cw / tw, mbs / tr, mbs / cr, cr / tr,
           growth);

    /* the fixed cost of a file operation: a read of one byte */
    {
        struct zeros z1 = {1};
        struct sbx_source s1 = SBX_SOURCE_INIT(&z1, zsrc_read);
        s1.length = zsrc_len;
        if (sbx_write(h, "one.bin", &s1, 0, NULL, &err) != SBX_OK)
            bench_die("write", err.message);
        double tf[9];
        for (int i = 0; i < 9; i++) {
            uint64_t n1 = 0;
            struct sbx_sink k1 = SBX_SINK_INIT(&n1, count_write);
            double t0 = bench_now();
            if (sbx_read(h, "one.bin", &k1, NULL, &err) != SBX_OK || n1 != 1)
                bench_die("read", err.message);
            tf[i] = bench_now() - t0;
        }
        printf("read of 1 byte (median of 9, the fixed cost of a read): %.2f ms\n",
               bench_median(tf, 9) * 1e3);
    }

    /* 3. 100 sequential execs over reused connections */
    int c0 = bench_fake_connections(c);
    for (int i = 0; i < 100; i++)
        sbx_true(h);
    int c1 = bench_fake_connections(c);
    /* the two stats requests opened one connection each */
    printf("100 sequential execs (600 requests): %d new connections at the fake\n", c1 - c0 - 1);

    sbx_destroy(p, "bench", ref, NULL, &err);
    sbx_release(h);
    sbx_close(ctx);
    curl_easy_cleanup(c);
    free(ta);
    free(tb2);
    bench_fake_stop();
    return 0;
}
