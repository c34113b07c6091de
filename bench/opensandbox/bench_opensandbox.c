/*
 * bench_opensandbox.c - the opensandbox provider against the fake on
 * loopback (tests/opensandbox/fake_opensandbox.py), each measure next to
 * its floor in the same run:
 *   1. exec of `true`: libsbx + opensandbox.so vs a minimal libcurl client
 *      making the same call (one POST /command event stream read to its
 *      end, with the endpoint's headers);
 *   2. a file of SIZE MiB written and read back through the provider: peak
 *      RSS growth and throughput vs curl uploading (the same multipart
 *      body, streamed) and downloading (GET /files/download) the bytes;
 *   3. 100 sequential execs: connections the fake accepted meanwhile.
 * Usage: bench_opensandbox [RUNS [SIZE_MIB]]   (defaults 200, 256)
 */
#include "bench_common.h"
#include "fake_service.h"

#include <sbx/sbx.h>

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KEY "bench_key"

static struct fake_service fake;

static void die(const char *what, const char *msg)
{
    fprintf(stderr, "bench_opensandbox: %s: %s\n", what, msg);
    fake_stop(&fake);
    exit(1);
}

static void reset_peak(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (f) {
        fputs("5", f);
        fclose(f);
    }
}

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6))
            v = atol(line + 6);
    if (f)
        fclose(f);
    return v;
}

static int connections(void)
{
    long st;
    char *s = fake_http(&fake, "GET", "/_fake/stats", NULL, NULL, &st);
    char *p = s ? strstr(s, "\"connections\": ") : NULL;
    int n = p ? atoi(p + 15) : -1;
    free(s);
    return n;
}

/* ---- the libcurl floor ------------------------------------------------ */
static size_t discard(char *d, size_t s, size_t n, void *ctx)
{
    (void)d;
    *(size_t *)ctx += s * n;
    return s * n;
}

struct endpoint {
    char base[320];   /* http://host:port/path */
    char header[256]; /* "Name: value" or "" */
};

/* One POST /command of the same text the adapter sends, read to the end. */
static void floor_exec(CURL *c, const struct endpoint *ep)
{
    static const char json[] = "{\"command\":\"exec 'true' </dev/null\","
                               "\"cwd\":\"/home/user/workspace\",\"background\":false}";
    char url[400];
    snprintf(url, sizeof url, "%s/command", ep->base);
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    h = curl_slist_append(h, "Accept: text/event-stream");
    if (ep->header[0])
        h = curl_slist_append(h, ep->header);
    size_t got = 0;
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, json);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &got);
    if (curl_easy_perform(c) != CURLE_OK || got == 0)
        die("floor exec", "failed");
    curl_slist_free_all(h);
}

/* A multipart body as the adapter writes it: head, zeros, tail. */
struct mp {
    const char *head, *tail;
    size_t hl, tl, hoff, toff;
    uint64_t left;
};

static size_t mp_read(char *d, size_t s, size_t n, void *ctx)
{
    struct mp *m = ctx;
    size_t cap = s * n, k = 0;
    if (m->hoff < m->hl) {
        k = m->hl - m->hoff < cap ? m->hl - m->hoff : cap;
        memcpy(d, m->head + m->hoff, k);
        m->hoff += k;
        return k;
    }
    if (m->left) {
        k = cap < m->left ? cap : (size_t)m->left;
        memset(d, 0, k);
        m->left -= k;
        return k;
    }
    k = m->tl - m->toff < cap ? m->tl - m->toff : cap;
    memcpy(d, m->tail + m->toff, k);
    m->toff += k;
    return k;
}

/* curl upload (multipart, streamed) or download of size bytes; seconds. */
static double floor_file(CURL *c, const struct endpoint *ep, int upload, uint64_t size)
{
    char url[400];
    static const char head[] =
        "--b0undary\r\nContent-Disposition: form-data; name=\"metadata\"\r\n"
        "Content-Type: application/json\r\n\r\n"
        "{\"path\":\"/home/user/workspace/curl.bin\",\"mode\":644}\r\n"
        "--b0undary\r\nContent-Disposition: form-data; name=\"file\"; filename=\"file\"\r\n"
        "Content-Type: application/octet-stream\r\n\r\n";
    static const char tail[] = "\r\n--b0undary--\r\n";
    struct mp m = {head, tail, sizeof head - 1, sizeof tail - 1, 0, 0, size};
    struct curl_slist *h = NULL;
    if (ep->header[0])
        h = curl_slist_append(h, ep->header);
    size_t got = 0;
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &got);
    if (upload) {
        snprintf(url, sizeof url, "%s/files/upload", ep->base);
        h = curl_slist_append(h, "Content-Type: multipart/form-data; boundary=b0undary");
        h = curl_slist_append(h, "Expect:"); /* as the adapter: no 100-continue wait */
        curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "POST");
        curl_easy_setopt(c, CURLOPT_READFUNCTION, mp_read);
        curl_easy_setopt(c, CURLOPT_READDATA, &m);
        curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)(m.hl + size + m.tl));
    } else {
        snprintf(url, sizeof url, "%s/files/download?path=%%2Fhome%%2Fuser%%2Fworkspace%%2Fcurl.bin",
                 ep->base);
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    double t = bench_now();
    if (curl_easy_perform(c) != CURLE_OK)
        die("floor file", upload ? "upload failed" : "download failed");
    t = bench_now() - t;
    if (!upload && got != size)
        die("floor file", "short download");
    curl_slist_free_all(h);
    return t;
}

/* ---- through libsbx --------------------------------------------------- */
struct zeros {
    uint64_t left;
};

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
    struct bench_exec r;
    bench_exec_counted(h, argv, &r);
    if (r.rc != SBX_OK || r.res.exit_code != 0)
        die("exec", r.err.message);
}

/* The execd endpoint of the sandbox, as the SDK resolves it. */
static void resolve(const char *sid, struct endpoint *ep)
{
    char path[256];
    snprintf(path, sizeof path, "/v1/sandboxes/%s/endpoints/44772", sid);
    long st;
    char *s = fake_http(&fake, "GET", path, NULL, "OPEN-SANDBOX-API-KEY: " KEY, &st);
    char host[256] = "", name[64] = "", value[128] = "";
    const char *e = s ? strstr(s, "\"endpoint\": \"") : NULL;
    if (!e || sscanf(e + 13, "%255[^\"]", host) != 1)
        die("endpoint", s ? s : "no answer");
    const char *hd = strstr(s, "\"headers\": {\"");
    if (hd && sscanf(hd + 13, "%63[^\"]\": \"%127[^\"]", name, value) == 2)
        snprintf(ep->header, sizeof ep->header, "%s: %s", name, value);
    snprintf(ep->base, sizeof ep->base, "http://%s", host);
    free(s);
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 200;
    uint64_t mib = argc > 2 ? (uint64_t)atoll(argv[2]) : 256;
    uint64_t size = mib << 20;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (fake_start_script(&fake, "tests/opensandbox/fake_opensandbox.py", NULL, KEY) != 0)
        die("fake", "did not start");
    setenv("OPEN_SANDBOX_API_KEY", KEY, 1);
    char cfg[128];
    snprintf(cfg, sizeof cfg, "%s/sbx.yaml", fake.dir);
    FILE *f = fopen(cfg, "w");
    fprintf(f, "providers:\n  opensandbox:\n    api_url: \"%s\"\n"
               "    workspace: /home/user/workspace\n",
            fake.url);
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
        sbx_provider_lookup(ctx, "opensandbox", &p, &err) != SBX_OK)
        die("open", err.message);
    struct sbx_create_options co = {sizeof co, NULL, 0, NULL, NULL, NULL};
    if (sbx_create(p, "bench", &co, NULL, &h, &err) != SBX_OK)
        die("create", err.message);
    const char *ref = sbx_handle_ref(h);
    struct endpoint ep = {"", ""};
    resolve(strchr(ref, ':') + 1, &ep);
    CURL *c = curl_easy_init();

    /* 1. exec, interleaved so that both see the same machine state */
    double *ta = calloc((size_t)runs, sizeof *ta), *tb = calloc((size_t)runs, sizeof *tb);
    for (int i = 0; i < 5; i++) {
        sbx_true(h);
        floor_exec(c, &ep);
    }
    for (int i = 0; i < runs; i++) {
        double t = bench_now();
        sbx_true(h);
        ta[i] = bench_now() - t;
        t = bench_now();
        floor_exec(c, &ep);
        tb[i] = bench_now() - t;
    }
    double ma = bench_median(ta, (size_t)runs), mb = bench_median(tb, (size_t)runs);
    printf("exec of true (median of %d): sbx %.2f ms, libcurl floor %.2f ms, ratio %.2fx "
           "(target <= 1.10x)\n",
           runs, ma * 1e3, mb * 1e3, ma / mb);

    /* 2. a big file through the provider vs curl, alternating, 3 rounds:
     * medians (the fake and the machine are noisy) */
    long rss0 = rss_kib();
    reset_peak();
    double tw[3], tr[3], cw[3], cr[3];
    for (int round = 0; round < 3; round++) {
        struct zeros z = {size};
        struct sbx_source src = SBX_SOURCE_INIT(&z, zsrc_read);
        src.length = zsrc_len;
        double t = bench_now();
        if (sbx_write(h, "big.bin", &src, 0, NULL, &err) != SBX_OK)
            die("write", err.message);
        tw[round] = bench_now() - t;
        cw[round] = floor_file(c, &ep, 1, size);
        uint64_t got = 0;
        struct sbx_sink sink = SBX_SINK_INIT(&got, count_write);
        t = bench_now();
        if (sbx_read(h, "big.bin", &sink, NULL, &err) != SBX_OK || got != size)
            die("read", err.message);
        tr[round] = bench_now() - t;
        cr[round] = floor_file(c, &ep, 0, size);
    }
    long growth = bench_vmhwm_kib() - rss0;
    double mtw = bench_median(tw, 3), mtr = bench_median(tr, 3);
    double mcw = bench_median(cw, 3), mcr = bench_median(cr, 3);
    double mbs = (double)mib;
    printf("%llu MiB (median of 3): write %.0f MiB/s (curl %.0f MiB/s, %.2fx), read %.0f MiB/s "
           "(curl %.0f MiB/s, %.2fx) (target >= 0.8x); peak RSS growth %ld KiB (target <= "
           "8192)\n",
           (unsigned long long)mib, mbs / mtw, mbs / mcw, mcw / mtw, mbs / mtr, mbs / mcr,
           mcr / mtr, growth);

    /* 3. 100 sequential execs over reused connections */
    int c0 = connections();
    for (int i = 0; i < 100; i++)
        sbx_true(h);
    int c1 = connections();
    /* the two stats requests opened one connection each */
    printf("100 sequential execs: %d new connections at the fake\n", c1 - c0 - 1);

    sbx_destroy(p, "bench", ref, NULL, &err);
    sbx_release(h);
    sbx_close(ctx);
    curl_easy_cleanup(c);
    free(ta);
    free(tb);
    fake_stop(&fake);
    return 0;
}
