/*
 * harness.c - the test host table and helpers for the docker provider tests.
 */
#include "harness.h"
#include "../support/op_args.h"

#include "http_client.h"

#include <criterion/criterion.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static const struct sbx_provider_desc *loaded;

static void host_log(const struct sbx_host *host, int level, const char *fmt, ...)
{
    (void)host;
    if (level > SBX_LOG_INFO && !getenv("SBX_TEST_VERBOSE"))
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[provider log %d] ", level);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static int host_set_error(const struct sbx_host *host, sbx_call *call, int status,
                          const char *fmt, ...)
{
    (void)host;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(call->message, sizeof call->message, fmt, ap);
    va_end(ap);
    call->status = status;
    return status;
}

static const char *host_config_get(const struct sbx_host *host, const char *key)
{
    const struct dh *h = host->ctx;
    for (size_t i = 0; h->extra_keys[i]; i += 2)
        if (strcmp(h->extra_keys[i], key) == 0)
            return h->extra_keys[i + 1];
    if (strcmp(key, "host") == 0)
        return h->host_uri;
    if (strcmp(key, "image") == 0)
        return h->image;
    if (strcmp(key, "resource_dir") == 0)
        return h->resource_dir;
    /* SBX_TEST_DOCKER_AGENT=0 runs every test through the Engine API path */
    const char *agent = getenv("SBX_TEST_DOCKER_AGENT");
    if (strcmp(key, "agent") == 0 && agent && strcmp(agent, "0") == 0)
        return "false";
    return NULL;
}

/* Map entries are given as "labels.<name>" extra keys. */
static int host_config_entry(const struct sbx_host *host, const char *key,
                             size_t index, const char **name, const char **value)
{
    const struct dh *h = host->ctx;
    size_t klen = strlen(key), n = 0;
    for (size_t i = 0; h->extra_keys[i]; i += 2) {
        const char *k = h->extra_keys[i];
        if (strncmp(k, key, klen) == 0 && k[klen] == '.') {
            if (n++ == index) {
                *name = k + klen + 1;
                *value = h->extra_keys[i + 1];
                return 1;
            }
        }
    }
    return 0;
}

static int host_cancelled(const struct sbx_host *host, const sbx_call *call)
{
    (void)host;
    return call->cancelled;
}

static int host_cancel_fd(const struct sbx_host *host, const sbx_call *call)
{
    (void)host;
    return call->cancel_pipe[0];
}

static const char *host_call_user(const struct sbx_host *host, const sbx_call *call)
{
    (void)host;
    return call ? call->user : NULL;
}

void dh_require_daemon(void)
{
    const char *h = getenv("SBX_TEST_DOCKER_HOST");
    if (!h || !*h)
        cr_skip_test("SBX_TEST_DOCKER_HOST is not set (scripts/services/dockerd.sh "
                     "start DIR provides a daemon)");
}

void dh_call_init(struct sbx_call *c)
{
    memset(c, 0, sizeof *c);
    cr_assert_eq(pipe2(c->cancel_pipe, O_CLOEXEC), 0);
}

void dh_call_free(struct sbx_call *c)
{
    close(c->cancel_pipe[0]);
    close(c->cancel_pipe[1]);
}

void dh_call_cancel(struct sbx_call *c)
{
    c->cancelled = 1;
    ssize_t w = write(c->cancel_pipe[1], "x", 1);
    (void)w;
}

static void load(void)
{
    if (loaded)
        return;
    char path[1024];
    snprintf(path, sizeof path, "%s/docker.so", SBX_TEST_PROVIDER_DIR);
    void *so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(so, "dlopen %s: %s", path, dlerror());
    sbx_provider_describe_fn fn = (sbx_provider_describe_fn)dlsym(so, SBX_PROVIDER_ENTRY);
    cr_assert_not_null(fn, "no %s in %s", SBX_PROVIDER_ENTRY, path);
    loaded = fn();
    cr_assert_eq(loaded->abi_major, SBX_ABI_MAJOR);
    cr_assert_str_eq(loaded->name, "docker");
}

int dh_try_open(struct dh *h, const char *host_uri, const char *const *extra,
                char *msg, size_t cap)
{
    load();
    memset(h, 0, sizeof *h);
    h->desc = loaded;
    h->ops = loaded->ops;
    snprintf(h->host_uri, sizeof h->host_uri, "%s",
             host_uri ? host_uri : getenv("SBX_TEST_DOCKER_HOST"));
    const char *img = getenv("SBX_TEST_DOCKER_IMAGE");
    snprintf(h->image, sizeof h->image, "%s", img && *img ? img : "sbx-test:busybox");
    snprintf(h->resource_dir, sizeof h->resource_dir, "/tmp/sbx-docker-test-res");
    size_t n = 0;
    for (size_t i = 0; extra && extra[i] && n + 2 < 16; i += 2) {
        h->extra_keys[n++] = extra[i];
        h->extra_keys[n++] = extra[i + 1];
    }
    h->extra_keys[n] = NULL;
    h->host.size = sizeof h->host;
    h->host.abi_minor = SBX_ABI_MINOR;
    h->host.ctx = h;
    h->host.log = host_log;
    h->host.set_error = host_set_error;
    h->host.config_get = host_config_get;
    h->host.config_entry = host_config_entry;
    h->host.cancelled = host_cancelled;
    h->host.cancel_fd = host_cancel_fd;
    h->host.call_user = host_call_user;
    struct sbx_call c;
    dh_call_init(&c);
    int rc = h->ops->init(&h->host, &c, &h->state);
    if (msg)
        snprintf(msg, cap, "%s", c.message);
    dh_call_free(&c);
    return rc;
}

void dh_open(struct dh *h, const char *host_uri, const char *const *extra)
{
    char msg[2048];
    int rc = dh_try_open(h, host_uri, extra, msg, sizeof msg);
    cr_assert_eq(rc, SBX_OK, "init: %s: %s", sbx_strerror(rc), msg);
}

void dh_close(struct dh *h)
{
    if (h->state)
        h->ops->fini(h->state);
    h->state = NULL;
}

void dh_hash(const char *key, char hash[SBX_KEY_HASH_LEN + 1])
{
    unsigned char md[32];
    unsigned int len = 0;
    EVP_Digest(key, strlen(key), md, &len, EVP_sha256(), NULL);
    for (unsigned i = 0; i < 32; i++)
        snprintf(hash + 2 * i, 3, "%02x", md[i]);
}

void dh_new_key(char key[64], char hash[SBX_KEY_HASH_LEN + 1])
{
    unsigned char r[12];
    cr_assert_eq(getrandom(r, sizeof r, 0), (ssize_t)sizeof r);
    snprintf(key, 64, "test-session-%02x%02x%02x%02x%02x%02x%02x%02x%02x%02x%02x%02x",
             r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11]);
    dh_hash(key, hash);
}

int dh_create_status(struct dh *h, const char *key, const char *spec_hash,
                     char ref[SBX_REF_MAX], sbx_sandbox **sb, char *msg, size_t cap)
{
    char hash[SBX_KEY_HASH_LEN + 1];
    dh_hash(key, hash);
    struct sbx_create_args a = {sizeof a, key, hash, spec_hash, 0, NULL, NULL, NULL};
    struct sbx_call c;
    dh_call_init(&c);
    *sb = NULL;
    int rc = h->ops->create(h->state, &c, &a, ref, sb);
    if (msg && cap)
        snprintf(msg, cap, "%s", c.message);
    dh_call_free(&c);
    return rc;
}

sbx_sandbox *dh_create(struct dh *h, const char *key, char ref[SBX_REF_MAX])
{
    sbx_sandbox *sb;
    char msg[1024];
    int rc = dh_create_status(h, key, "spec-hash-1", ref, &sb, msg, sizeof msg);
    cr_assert_eq(rc, SBX_OK, "create: %s: %s", sbx_strerror(rc), msg);
    return sb;
}

void dh_destroy(struct dh *h, const char *key, const char *ref)
{
    struct sbx_call c;
    dh_call_init(&c);
    int rc = h->ops->destroy(h->state, &c, TEST_DESTROY_ARGS(key, ref));
    cr_assert_eq(rc, SBX_OK, "destroy: %s: %s", sbx_strerror(rc), c.message);
    dh_call_free(&c);
}

void dh_sandbox_setup(struct dh *h, char key[64], char hash[SBX_KEY_HASH_LEN + 1],
                      char ref[SBX_REF_MAX], sbx_sandbox **sb)
{
    dh_require_daemon();
    dh_open(h, NULL, NULL);
    dh_new_key(key, hash);
    *sb = dh_create(h, key, ref);
}

void dh_sandbox_teardown(struct dh *h, const char *key, const char *ref,
                         sbx_sandbox *sb)
{
    if (sb) {
        h->ops->release(sb);
        dh_destroy(h, key, ref);
    }
    dh_close(h);
}

static int buf_write(void *ctx, const void *p, size_t n)
{
    struct dh_buf *b = ctx;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *more = realloc(b->data, cap);
        if (!more)
            return SBX_E_NOMEM;
        b->data = more;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

struct sbx_sink dh_buf_sink(struct dh_buf *b)
{
    struct sbx_sink s = SBX_SINK_INIT(b, buf_write);
    return s;
}

void dh_buf_free(struct dh_buf *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

static long mem_read(void *ctx, void *buf, size_t cap)
{
    struct dh_mem *m = ctx;
    size_t n = m->len - m->pos;
    if (n > cap)
        n = cap;
    memcpy(buf, m->data + m->pos, n);
    m->pos += n;
    return (long)n;
}

struct sbx_source dh_mem_source(struct dh_mem *m)
{
    struct sbx_source s = {.size = sizeof(struct sbx_source), .ctx = m, .read = mem_read};
    return s;
}

int dh_exec(struct dh *h, sbx_sandbox *sb, const char *const *argv,
            const char *stdin_text, int64_t timeout_ms, struct dh_buf *out,
            struct dh_buf *err, struct sbx_exec_result *res, struct sbx_call *call)
{
    struct dh_mem m = {stdin_text, stdin_text ? strlen(stdin_text) : 0, 0};
    struct sbx_source in = dh_mem_source(&m);
    struct sbx_sink so = dh_buf_sink(out), se = dh_buf_sink(err);
    struct sbx_exec_args a = {0};
    a.size = sizeof a;
    a.argv = argv;
    a.in = stdin_text ? &in : NULL;
    a.timeout_ms = timeout_ms;
    a.out = out ? &so : NULL;
    a.err = err ? &se : NULL;
    memset(res, 0, sizeof *res);
    res->size = sizeof *res;
    return h->ops->exec(sb, call, &a, res);
}

char *dh_sh(struct dh *h, sbx_sandbox *sb, const char *script)
{
    const char *argv[] = {"sh", "-c", script, NULL};
    struct dh_buf out = {0}, err = {0};
    struct sbx_exec_result res;
    struct sbx_call c;
    dh_call_init(&c);
    int rc = dh_exec(h, sb, argv, NULL, 60000, &out, &err, &res, &c);
    cr_assert_eq(rc, SBX_OK, "sh -c '%s': %s: %s", script, sbx_strerror(rc), c.message);
    cr_assert_eq(res.exit_code, 0, "sh -c '%s' exited %d: %s", script, res.exit_code,
                 err.data ? err.data : "");
    dh_call_free(&c);
    dh_buf_free(&err);
    if (!out.data)
        out.data = calloc(1, 1);
    return out.data;
}

int dh_write(struct dh *h, sbx_sandbox *sb, const char *path, const void *data,
             size_t len, unsigned mode, struct sbx_call *call)
{
    struct dh_mem m = {data, len, 0};
    struct sbx_source src = dh_mem_source(&m);
    return h->ops->write_file(sb, call, path, &src, mode);
}

int dh_read(struct dh *h, sbx_sandbox *sb, const char *path, struct dh_buf *out,
            struct sbx_call *call)
{
    struct sbx_sink s = dh_buf_sink(out);
    return h->ops->read_file(sb, call, path, &s);
}

long dh_api(const char *host_uri, const char *method, const char *path,
            const char *json_body, struct dh_buf *body)
{
    sbxp_http *http = NULL;
    sbxp_http_error err;
    cr_assert_eq(sbxp_http_new(host_uri, &http, &err), SBX_OK, "%s", err.message);
    struct sbxp_http_request req = {0};
    req.method = method;
    req.path = path;
    if (json_body) {
        req.body = json_body;
        req.body_len = strlen(json_body);
        req.content_type = "application/json";
    }
    struct sbx_sink s = dh_buf_sink(body);
    long status = 0;
    int rc = sbxp_http_request(http, &req, body ? &s : NULL, &status, &err);
    if (rc != SBX_OK && body)
        buf_write(body, err.message, strlen(err.message));
    sbxp_http_free(http);
    return rc == SBX_OK ? status : (err.http_status ? err.http_status : -1);
}

int dh_attach(struct dh *h, const char *key, const char *ref, sbx_sandbox **out,
              char *msg, size_t cap)
{
    struct sbx_call c;
    dh_call_init(&c);
    *out = NULL;
    int rc = h->ops->attach(h->state, &c, TEST_ATTACH_ARGS(key, ref), out);
    if (msg)
        snprintf(msg, cap, "%s", c.message);
    dh_call_free(&c);
    return rc;
}

char *dh_procs(struct dh *h, sbx_sandbox *sb, const char *ere)
{
    char script[1024];
    snprintf(script, sizeof script,
             "ps -o pid,stat,args | grep -v '^ *[0-9][0-9]* *Z' | grep -E -e '%s'; "
             "true",
             ere);
    return dh_sh(h, sb, script);
}

double dh_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

double dh_slack(double ms)
{
    const char *v = getenv("SBX_CONFORMANCE_TIME_SCALE");
    char *end = NULL;
    double scale = v && *v ? strtod(v, &end) : 1.0;
    if (!v || !*v || !end || *end || !(scale >= 1.0 && scale <= 10.0))
        scale = 1.0;
    return ms * scale;
}

int dh_system(const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    return system(cmd);
}
