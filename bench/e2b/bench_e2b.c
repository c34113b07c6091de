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
#include <sbx/sbx.h>

#include <curl/curl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define KEY "bench_key"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void die(const char *what, const char *msg)
{
    fprintf(stderr, "bench_e2b: %s: %s\n", what, msg);
    exit(1);
}

static long status_kib(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t fl = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, field, fl) && line[fl] == ':')
            v = atol(line + fl + 1);
    if (f)
        fclose(f);
    return v;
}

static void reset_peak(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (f) {
        fputs("5", f);
        fclose(f);
    }
}

/* ---- the fake --------------------------------------------------------- */
static pid_t fake_pid;
static int port;
static char dir[64] = "/tmp/sbx-bench-e2b-XXXXXX";

static void fake_start(void)
{
    if (!mkdtemp(dir))
        die("mkdtemp", "failed");
    char pf[128], script[1024];
    snprintf(pf, sizeof pf, "%s/port", dir);
    snprintf(script, sizeof script, "%s/tests/e2b/fake_e2b.py", SBX_BENCH_SOURCE_DIR);
    fake_pid = fork();
    if (fake_pid == 0) {
        execlp("python3", "python3", script, "--port-file", pf, "--api-key", KEY, "--dir", dir,
               (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 200 && !port; i++) {
        FILE *f = fopen(pf, "r");
        if (f) {
            if (fscanf(f, "%d", &port) != 1)
                port = 0;
            fclose(f);
        }
        usleep(50000);
    }
    if (!port)
        die("fake", "did not start");
}

static void fake_stop(void)
{
    kill(fake_pid, SIGTERM);
    waitpid(fake_pid, NULL, 0);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "bench_e2b: could not remove %s\n", dir);
}

struct buf {
    char *p;
    size_t len;
};

static size_t collect(char *d, size_t s, size_t n, void *ctx)
{
    struct buf *b = ctx;
    b->p = realloc(b->p, b->len + s * n + 1);
    memcpy(b->p + b->len, d, s * n);
    b->len += s * n;
    b->p[b->len] = 0;
    return s * n;
}

static int fake_connections(CURL *c)
{
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/_fake/stats", port);
    struct buf b = {NULL, 0};
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L);
    if (curl_easy_perform(c) != CURLE_OK || !b.p)
        die("stats", "request failed");
    char *p = strstr(b.p, "\"connections\": ");
    int n = p ? atoi(p + 15) : -1;
    free(b.p);
    return n;
}

/* ---- the libcurl floor ------------------------------------------------ */
static size_t discard(char *d, size_t s, size_t n, void *ctx)
{
    (void)d;
    *(size_t *)ctx += s * n;
    return s * n;
}

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
    snprintf(url, sizeof url, "http://127.0.0.1:%d/process.Process/Start", port);
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
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &got);
    if (curl_easy_perform(c) != CURLE_OK || got == 0)
        die("floor exec", "failed");
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
             port);
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
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &got);
    if (upload) {
        curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "POST");
        curl_easy_setopt(c, CURLOPT_READFUNCTION, zero_read);
        curl_easy_setopt(c, CURLOPT_READDATA, &z);
        curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)size);
    }
    double t = now();
    if (curl_easy_perform(c) != CURLE_OK)
        die("floor file", upload ? "upload failed" : "download failed");
    t = now() - t;
    if (!upload && got != size)
        die("floor file", "short download");
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
        die("exec", err.message);
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 200;
    uint64_t mib = argc > 2 ? (uint64_t)atoll(argv[2]) : 256;
    uint64_t size = mib << 20;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    fake_start();
    setenv("E2B_API_KEY", KEY, 1);
    char cfg[128];
    snprintf(cfg, sizeof cfg, "%s/sbx.yaml", dir);
    FILE *f = fopen(cfg, "w");
    fprintf(f, "providers:\n  e2b:\n    api_url: \"http://127.0.0.1:%d\"\n"
               "    envd_url: \"http://127.0.0.1:%d\"\n    domain: e2b.local\n",
            port, port);
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
        die("open", err.message);
    struct sbx_create_options co = {sizeof co, NULL, 0, NULL};
    if (sbx_create(p, "bench", &co, NULL, &h, &err) != SBX_OK)
        die("create", err.message);
    const char *ref = sbx_handle_ref(h);
    const char *sid = strchr(ref, ':') + 1;
    /* The floor needs the envd token: ask the control plane like the SDK. */
    CURL *c = curl_easy_init();
    char url[256], keyh[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/sandboxes/%s", port, sid);
    snprintf(keyh, sizeof keyh, "X-API-Key: %s", KEY);
    struct curl_slist *kh = curl_slist_append(NULL, keyh);
    struct buf b = {NULL, 0};
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, kh);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    if (curl_easy_perform(c) != CURLE_OK || !b.p || !strstr(b.p, "envdAccessToken"))
        die("token", "GET /sandboxes/{id} failed");
    char token[128];
    if (sscanf(strstr(b.p, "envdAccessToken") + 19, "%127[0-9a-f]", token) != 1)
        die("token", "unparsable");
    free(b.p);
    curl_slist_free_all(kh);

    /* 1. exec, interleaved so that both see the same machine state */
    double *ta = calloc((size_t)runs, sizeof *ta), *tb = calloc((size_t)runs, sizeof *tb);
    for (int i = 0; i < 5; i++) {
        sbx_true(h);
        floor_exec(c, sid, token);
    }
    for (int i = 0; i < runs; i++) {
        double t = now();
        sbx_true(h);
        ta[i] = now() - t;
        t = now();
        floor_exec(c, sid, token);
        tb[i] = now() - t;
    }
    double ma = median(ta, (size_t)runs), mb = median(tb, (size_t)runs);
    printf("exec of true (median of %d): sbx %.2f ms, libcurl floor %.2f ms, ratio %.2fx "
           "(target <= 1.10x)\n",
           runs, ma * 1e3, mb * 1e3, ma / mb);

    /* 2. a big file through the provider vs curl */
    long rss0 = status_kib("VmRSS");
    reset_peak();
    struct zeros z = {size};
    struct sbx_source src = SBX_SOURCE_INIT(&z, zsrc_read);
    src.length = zsrc_len;
    double t = now();
    if (sbx_write(h, "big.bin", &src, 0, NULL, &err) != SBX_OK)
        die("write", err.message);
    double tw = now() - t;
    uint64_t got = 0;
    struct sbx_sink sink = SBX_SINK_INIT(&got, count_write);
    t = now();
    if (sbx_read(h, "big.bin", &sink, NULL, &err) != SBX_OK || got != size)
        die("read", err.message);
    double tr = now() - t;
    long growth = status_kib("VmHWM") - rss0;
    double cw = floor_file(c, sid, token, 1, size), cr = floor_file(c, sid, token, 0, size);
    double mbs = (double)mib;
    printf("%llu MiB: write %.0f MiB/s (curl %.0f MiB/s, %.2fx), read %.0f MiB/s (curl %.0f "
           "MiB/s, %.2fx) (target >= 0.8x); peak RSS growth %ld KiB (target <= 8192)\n",
           (unsigned long long)mib, mbs / tw, mbs / cw, cw / tw, mbs / tr, mbs / cr, cr / tr,
           growth);

    /* 3. 100 sequential execs over reused connections */
    int c0 = fake_connections(c);
    for (int i = 0; i < 100; i++)
        sbx_true(h);
    int c1 = fake_connections(c);
    /* the two stats requests opened one connection each */
    printf("100 sequential execs: %d new connections at the fake\n", c1 - c0 - 1);

    sbx_destroy(p, "bench", ref, NULL, &err);
    sbx_release(h);
    sbx_close(ctx);
    curl_easy_cleanup(c);
    free(ta);
    free(tb);
    fake_stop();
    return 0;
}
