/*
 * bench_docker.c - the docker provider through the plugin ABI, side by
 * side in one run: with its in-container agent (the default), through the
 * Engine API (`agent: false`), the daemon's own floor (a minimal libcurl
 * loop issuing the same Engine API calls for an exec: create, start,
 * inspect, on one reused connection) and the local provider's exec.
 *
 *   bench_docker HOST IMAGE [RUNS]
 *
 * Per run and docker mode: create+start, 100 execs of `true`, write and
 * read a 1 MiB file, destroy. Prints medians over the runs (total, per
 * exec, each step) per mode, the floor's per-exec median, and the local
 * provider's per-exec median over the same number of execs.
 */
#include "bench_host.h"
#include "../../tests/support/op_args.h"

#include <sbx/provider.h>

#include <curl/curl.h>
#include <openssl/evp.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EXECS 100
#define FILE_BYTES (1024 * 1024)

static const char *cfg_host, *cfg_image;

struct mem {
    const char *p;
    size_t len, pos;
};

static long mem_read(void *ctx, void *buf, size_t cap)
{
    struct mem *m = ctx;
    size_t n = m->len - m->pos < cap ? m->len - m->pos : cap;
    memcpy(buf, m->p + m->pos, n);
    m->pos += n;
    return (long)n;
}

static int count_write(void *ctx, const void *p, size_t n)
{
    (void)p;
    *(size_t *)ctx += n;
    return 0;
}

/* ---- the floor -------------------------------------------------------- */

static size_t collect(char *p, size_t s, size_t n, void *ud)
{
    char *buf = ud;
    size_t len = strlen(buf), add = s * n;
    if (len + add < 4096) {
        memcpy(buf + len, p, add);
        buf[len + add] = '\0';
    }
    return s * n;
}

static void floor_request(CURL *e, const char *base, const char *path, const char *body,
                          char *out)
{
    char url[512];
    snprintf(url, sizeof url, "%s%s", base, path);
    out[0] = '\0';
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(e, CURLOPT_HTTPGET, body ? 0L : 1L);
    if (body)
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
    CURLcode rc = curl_easy_perform(e);
    if (rc != CURLE_OK) {
        fprintf(stderr, "floor: %s: %s\n", path, curl_easy_strerror(rc));
        exit(1);
    }
}

static double floor_execs(const char *id, double *per, int n)
{
    CURL *e = curl_easy_init();
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    const char *base = "http://localhost/v1.41";
    char tcpbase[256];
    if (!strncmp(cfg_host, "unix://", 7)) {
        curl_easy_setopt(e, CURLOPT_UNIX_SOCKET_PATH, cfg_host + 7);
    } else {
        snprintf(tcpbase, sizeof tcpbase, "http://%s/v1.41", cfg_host + 6);
        base = tcpbase;
    }
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdr);
    char *out = calloc(1, 4096);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, out);
    for (int i = 0; i < n; i++) {
        double t0 = bench_now();
        char path[SBX_REF_MAX + 32], eid[65];
        snprintf(path, sizeof path, "/containers/%s/exec", id);
        floor_request(e, base, path,
                      "{\"AttachStdout\":true,\"AttachStderr\":true,\"Cmd\":[\"true\"]}",
                      out);
        char *p = strstr(out, "\"Id\":\"");
        if (!p) {
            fprintf(stderr, "floor: exec create: %s\n", out);
            exit(1);
        }
        snprintf(eid, sizeof eid, "%.64s", p + 6);
        snprintf(path, sizeof path, "/exec/%s/start", eid);
        floor_request(e, base, path, "{\"Detach\":false,\"Tty\":false}", out);
        snprintf(path, sizeof path, "/exec/%s/json", eid);
        floor_request(e, base, path, NULL, out);
        per[i] = bench_now() - t0;
    }
    free(out);
    curl_slist_free_all(hdr);
    curl_easy_cleanup(e);
    return bench_median(per, (size_t)n);
}

/* The SHA-256 hex of a session key, as the host would pass it. */
static void key_hash(const char *key, char hash[65])
{
    unsigned char md[32];
    unsigned mdlen = 0;
    EVP_Digest(key, strlen(key), md, &mdlen, EVP_sha256(), NULL);
    for (int i = 0; i < 32; i++)
        snprintf(hash + 2 * i, 3, "%02x", md[i]);
}

static const struct sbx_provider_ops *load(const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.so", SBX_BENCH_PROVIDER_DIR, name);
    void *so = dlopen(path, RTLD_NOW);
    if (!so) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        exit(1);
    }
    return ((sbx_provider_describe_fn)dlsym(so, SBX_PROVIDER_ENTRY))()->ops;
}

/* medians of one docker mode */
struct mode {
    const char *name; /* "sbx" (agent), "sbxapi" (Engine API) */
    void *st;
    double *totals, *per, *steps[5];
};

static void lifecycle(const struct sbx_provider_ops *ops, struct mode *m, int r,
                      const char *data)
{
    sbx_call c = {""};
    int rc;
    char key[64], hash[65], ref[SBX_REF_MAX];
    snprintf(key, sizeof key, "bench-%s-%ld-%d", m->name, (long)time(NULL), r);
    key_hash(key, hash);
    struct sbx_create_args ca = {sizeof ca, key, hash, "", 0, NULL, NULL, NULL};
    sbx_sandbox *sb = NULL;
    double t0 = bench_now();
    if ((rc = ops->create(m->st, &c, &ca, ref, &sb)))
        bench_die("bench_docker", "create", rc, &c);
    double t1 = bench_now();
    m->steps[0][r] = t1 - t0;
    const char *tru[] = {"true", NULL};
    for (int i = 0; i < EXECS; i++) {
        struct sbx_exec_args a = {0};
        a.size = sizeof a;
        a.argv = tru;
        struct sbx_exec_result res = {sizeof res, 0, 0, 0, 0, 0};
        double e0 = bench_now();
        if ((rc = ops->exec(sb, &c, &a, &res)) || res.exit_code)
            bench_die("bench_docker", "exec", rc, &c);
        m->per[r * EXECS + i] = bench_now() - e0;
    }
    double t2 = bench_now();
    m->steps[1][r] = t2 - t1;
    struct mem mm = {data, FILE_BYTES, 0};
    struct sbx_source src = {.size = sizeof(struct sbx_source), .ctx = &mm, .read = mem_read};
    if ((rc = ops->write_file(sb, &c, "bench.bin", &src, 0)))
        bench_die("bench_docker", "write", rc, &c);
    double t3 = bench_now();
    m->steps[2][r] = t3 - t2;
    size_t got = 0;
    struct sbx_sink sink = SBX_SINK_INIT(&got, count_write);
    if ((rc = ops->read_file(sb, &c, "bench.bin", &sink)) || got != FILE_BYTES)
        bench_die("bench_docker", "read", rc, &c);
    double t4 = bench_now();
    m->steps[3][r] = t4 - t3;
    ops->release(sb);
    if ((rc = ops->destroy(m->st, &c, TEST_DESTROY_ARGS(key, ref))))
        bench_die("bench_docker", "destroy", rc, &c);
    m->totals[r] = bench_now() - t0;
    m->steps[4][r] = bench_now() - t4;
}

static void report(struct mode *m, int runs)
{
    static const char *const step_names[5] = {"create_start", "execs_100", "write_1mib",
                                              "read_1mib", "destroy"};
    printf("%s_total_median_s %.4f\n", m->name, bench_median(m->totals, (size_t)runs));
    printf("%s_exec_median_ms %.3f\n", m->name,
           1000 * bench_median(m->per, (size_t)runs * EXECS));
    for (int s = 0; s < 5; s++)
        printf("%s_step_%s_median_ms %.1f\n", m->name, step_names[s],
               1000 * bench_median(m->steps[s], (size_t)runs));
}

/* The local provider's exec of `true`, n times. */
static void local_execs(double *per, int n)
{
    const struct sbx_provider_ops *ops = load("local");
    static const char *const kv[] = {"root", "/tmp/sbx-bench-local", NULL};
    static struct sbx_host host;
    bench_host_init(&host, cfg_host, cfg_image, "/tmp/sbx-bench-docker-resources");
    bench_host_keys(&host, kv);
    sbx_call c = {""};
    void *st = NULL;
    int rc = ops->init(&host, &c, &st);
    if (rc)
        bench_die("bench_docker", "local init", rc, &c);
    char key[64], hash[65] = "", ref[SBX_REF_MAX];
    snprintf(key, sizeof key, "bench-local-%ld", (long)time(NULL));
    key_hash(key, hash);
    struct sbx_create_args ca = {sizeof ca, key, hash, "", 0, NULL, NULL, NULL};
    sbx_sandbox *sb = NULL;
    if ((rc = ops->create(st, &c, &ca, ref, &sb)))
        bench_die("bench_docker", "local create", rc, &c);
    const char *tru[] = {"true", NULL};
    for (int i = 0; i < n; i++) {
        struct sbx_exec_args a = {0};
        a.size = sizeof a;
        a.argv = tru;
        struct sbx_exec_result res = {sizeof res, 0, 0, 0, 0, 0};
        double e0 = bench_now();
        if ((rc = ops->exec(sb, &c, &a, &res)) || res.exit_code)
            bench_die("bench_docker", "local exec", rc, &c);
        per[i] = bench_now() - e0;
    }
    ops->release(sb);
    ops->destroy(st, &c, TEST_DESTROY_ARGS(key, ref));
    ops->fini(st);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s HOST IMAGE [RUNS]\n", argv[0]);
        return 2;
    }
    cfg_host = argv[1];
    cfg_image = argv[2];
    int runs = argc > 3 ? atoi(argv[3]) : 5;
    if (runs < 1)
        runs = 1;
    const struct sbx_provider_ops *ops = load("docker");
    static const char *const with_agent[] = {"agent", "true", NULL};
    static const char *const without[] = {"agent", "false", NULL};
    static struct sbx_host hosts[2];
    struct mode modes[2] = {{.name = "sbx"}, {.name = "sbxapi"}};
    for (int k = 0; k < 2; k++) {
        bench_host_init(&hosts[k], cfg_host, cfg_image, "/tmp/sbx-bench-docker-resources");
        bench_host_keys(&hosts[k], k == 0 ? with_agent : without);
        sbx_call c = {""};
        int rc = ops->init(&hosts[k], &c, &modes[k].st);
        if (rc)
            bench_die("bench_docker", "init", rc, &c);
        modes[k].totals = calloc((size_t)runs, sizeof(double));
        modes[k].per = calloc((size_t)runs * EXECS, sizeof(double));
        for (int s = 0; s < 5; s++)
            modes[k].steps[s] = calloc((size_t)runs, sizeof(double));
    }
    char *data = malloc(FILE_BYTES);
    for (size_t i = 0; i < FILE_BYTES; i++)
        data[i] = (char)(i * 31);
    double *floor_per = calloc((size_t)runs * EXECS, sizeof *floor_per);
    double *local_per = calloc((size_t)runs * EXECS, sizeof *local_per);
    for (int r = 0; r < runs; r++) {
        for (int k = 0; k < 2; k++)
            lifecycle(ops, &modes[k], r, data);

        /* the floor, on a container of the same image (Engine API kind) */
        sbx_call c = {""};
        char key[64], hash[65], ref[SBX_REF_MAX];
        snprintf(key, sizeof key, "bench-floor-%ld-%d", (long)time(NULL), r);
        key_hash(key, hash);
        struct sbx_create_args ca = {sizeof ca, key, hash, "", 0, NULL, NULL, NULL};
        sbx_sandbox *sb = NULL;
        int rc;
        if ((rc = ops->create(modes[1].st, &c, &ca, ref, &sb)))
            bench_die("bench_docker", "create", rc, &c);
        floor_execs(ref, floor_per + r * EXECS, EXECS);
        ops->release(sb);
        ops->destroy(modes[1].st, &c, TEST_DESTROY_ARGS(key, ref));
        local_execs(local_per + r * EXECS, EXECS);
    }
    for (int k = 0; k < 2; k++) {
        report(&modes[k], runs);
        ops->fini(modes[k].st);
    }
    printf("floor_exec_median_ms %.3f\n", 1000 * bench_median(floor_per, (size_t)runs * EXECS));
    printf("local_exec_median_ms %.3f\n", 1000 * bench_median(local_per, (size_t)runs * EXECS));
    free(data);
    free(floor_per);
    free(local_per);
    return 0;
}
