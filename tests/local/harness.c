/*
 * harness.c - test host table, sinks, sources and fixtures for the tests of
 * the `local` provider.
 */
#include "harness.h"

#include <criterion/criterion.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <openssl/evp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct harness H;

/* ---- the host table --------------------------------------------------- */

static void th_log(const struct sbx_host *host, int level, const char *fmt,
                   ...)
{
    (void)host;
    if (getenv("SBX_TEST_VERBOSE") == NULL)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "[provider log %d] ", level);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static int th_set_error(const struct sbx_host *host, sbx_call *call,
                        int status, const char *fmt, ...)
{
    (void)host;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(call->msg, sizeof call->msg, fmt, ap);
    va_end(ap);
    call->status = status;
    return status;
}

static const char *th_config_get(const struct sbx_host *host, const char *key)
{
    const struct test_host *th = (const struct test_host *)host;
    if (strcmp(key, "root") == 0)
        return th->root;
    if (strcmp(key, "process_buffer") == 0)
        return th->process_buffer;
    if (strcmp(key, "supervisor_idle_ms") == 0)
        return th->supervisor_idle_ms;
    if (strcmp(key, "supervisor_timeout_ms") == 0)
        return th->supervisor_timeout_ms;
    if (strcmp(key, "supervisor_path") == 0)
        return th->supervisor_path;
    return NULL;
}

static int th_config_entry(const struct sbx_host *host, const char *key,
                           size_t index, const char **name,
                           const char **value)
{
    (void)host, (void)key, (void)index, (void)name, (void)value;
    return 0;
}

static int th_cancelled(const struct sbx_host *host, const sbx_call *call)
{
    (void)host;
    return call->flag;
}

static int th_cancel_fd(const struct sbx_host *host, const sbx_call *call)
{
    (void)host;
    return call->cancel_rd;
}

void harness_host_init(struct test_host *th, const char *root)
{
    memset(th, 0, sizeof *th);
    th->host.size = sizeof th->host;
    th->host.abi_minor = SBX_ABI_MINOR;
    th->host.ctx = th;
    th->host.log = th_log;
    th->host.set_error = th_set_error;
    th->host.config_get = th_config_get;
    th->host.config_entry = th_config_entry;
    th->host.cancelled = th_cancelled;
    th->host.cancel_fd = th_cancel_fd;
    th->root = root;
}

void harness_call_init(sbx_call *call)
{
    if (call->cancel_rd <= 0) {
        int p[2];
        cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
        call->cancel_rd = p[0];
        call->cancel_wr = p[1];
    }
    call->status = 0;
    call->msg[0] = '\0';
    call->flag = 0;
}

void harness_call_close(sbx_call *call)
{
    if (call->cancel_rd > 0) {
        close(call->cancel_rd);
        close(call->cancel_wr);
    }
    call->cancel_rd = call->cancel_wr = 0;
}

/* ---- plugin and fixtures ---------------------------------------------- */

const struct sbx_provider_desc *harness_desc(void)
{
    static const struct sbx_provider_desc *desc;
    if (desc == NULL) {
        /* Never dlclosed, like the host does. */
        void *so = dlopen(SBX_TEST_PROVIDER_DIR "/local.so", RTLD_NOW);
        cr_assert_not_null(so, "dlopen: %s", dlerror());
        sbx_provider_describe_fn fn =
            (sbx_provider_describe_fn)dlsym(so, SBX_PROVIDER_ENTRY);
        cr_assert_not_null(fn, "dlsym: %s", dlerror());
        desc = fn();
        cr_assert_not_null(desc);
    }
    return desc;
}

void harness_key_hash(const char *key, char out[SBX_KEY_HASH_LEN + 1])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    cr_assert_eq(EVP_Digest(key, strlen(key), md, &n, EVP_sha256(), NULL), 1);
    for (unsigned int i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", md[i]);
}

const struct sbx_create_args *harness_create_args(struct create_args_buf *b,
                                                  const char *key)
{
    memset(b, 0, sizeof *b);
    harness_key_hash(key, b->hash);
    b->args.size = sizeof b->args;
    b->args.session_key = key;
    b->args.key_hash = b->hash;
    b->args.spec_hash = "";
    return &b->args;
}

void path_join(char *out, size_t cap, const char *a, const char *b)
{
    int n = snprintf(out, cap, "%s/%s", a, b);
    cr_assert(n > 0 && (size_t)n < cap, "path too long");
}

void harness_setup(void)
{
    memset(&H, 0, sizeof H);
    snprintf(H.tmp, sizeof H.tmp, "/tmp/sbx-local-test-XXXXXX");
    cr_assert_not_null(mkdtemp(H.tmp));
    path_join(H.root, sizeof H.root, H.tmp, "root");
    path_join(H.outside, sizeof H.outside, H.tmp, "outside");
    cr_assert_eq(mkdir(H.outside, 0755), 0);

    H.desc = harness_desc();
    H.ops = H.desc->ops;
    harness_host_init(&H.th, H.root);
    harness_call_init(&H.call);
    int rc = H.ops->init(&H.th.host, &H.call, &H.state);
    cr_assert_eq(rc, SBX_OK, "init: %s", H.call.msg);

    struct create_args_buf cb;
    rc = H.ops->create(H.state, &H.call, harness_create_args(&cb, H_KEY),
                       H.ref, &H.sb);
    cr_assert_eq(rc, SBX_OK, "create: %s", H.call.msg);
    snprintf(H.ws, sizeof H.ws, "%s/%.64s", H.root, H.ref);
}

static int remove_entry(const char *path, const struct stat *st, int flag,
                        struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

void harness_teardown(void)
{
    if (H.sb != NULL)
        H.ops->release(H.sb);
    if (H.state != NULL && H.ref[0] != '\0') {
        /* stops the workspace's process supervisor, if a test started one */
        char hash[SBX_KEY_HASH_LEN + 1];
        harness_key_hash(H_KEY, hash);
        struct sbx_destroy_args da = {sizeof da, H_KEY, hash, H.ref};
        harness_call_init(&H.call);
        (void)H.ops->destroy(H.state, &H.call, &da);
    }
    if (H.state != NULL)
        H.ops->fini(H.state);
    harness_call_close(&H.call);
    if (H.tmp[0] != '\0')
        nftw(H.tmp, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- sinks and sources ------------------------------------------------ */

static int buf_sink_write(void *ctx, const void *data, size_t len)
{
    struct buf_sink *b = ctx;
    b->calls++;
    if (b->len + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + len + 1)
            cap *= 2;
        b->data = realloc(b->data, cap);
        cr_assert_not_null(b->data);
        b->cap = cap;
    }
    memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = '\0';
    if (b->limit != 0 && b->len > b->limit)
        return b->fail_status;
    return 0;
}

struct sbx_sink buf_sink(struct buf_sink *b)
{
    return (struct sbx_sink){.size = sizeof(struct sbx_sink), .ctx = b, .write = buf_sink_write};
}

void buf_sink_free(struct buf_sink *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

const char *buf_sink_str(const struct buf_sink *b)
{
    return b->data != NULL ? (const char *)b->data : "";
}

static long mem_source_read(void *ctx, void *buf, size_t cap)
{
    struct mem_source *m = ctx;
    if (m->fail_at != 0 && m->pos >= m->fail_at) {
        m->call->status = SBX_E_IO;
        snprintf(m->call->msg, sizeof m->call->msg, "test source failed");
        return -1;
    }
    size_t n = m->len - m->pos;
    if (n > cap)
        n = cap;
    if (m->chunk != 0 && n > m->chunk)
        n = m->chunk;
    memcpy(buf, m->data + m->pos, n);
    m->pos += n;
    return (long)n;
}

struct sbx_source mem_source(struct mem_source *m)
{
    return (struct sbx_source){.size = sizeof(struct sbx_source), .ctx = m, .read = mem_source_read};
}

/* ---- commands and files ------------------------------------------------ */

double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void run_cmd(struct run_result *r, const char *const *argv,
             const char *const *env, const char *cwd,
             const struct sbx_source *in, long long timeout_ms)
{
    memset(r, 0, sizeof *r);
    struct sbx_sink out = buf_sink(&r->out), err = buf_sink(&r->err);
    struct sbx_exec_args a = {
        .size = sizeof a, .argv = argv, .env = env, .cwd = cwd, .in = in,
        .timeout_ms = timeout_ms, .out = &out, .err = &err,
    };
    r->res.size = sizeof r->res;
    harness_call_init(&H.call);
    double t0 = now_seconds();
    r->rc = H.ops->exec(H.sb, &H.call, &a, &r->res);
    r->seconds = now_seconds() - t0;
}

void run_result_free(struct run_result *r)
{
    buf_sink_free(&r->out);
    buf_sink_free(&r->err);
}

int put_file(const char *path, const void *data, size_t len, unsigned mode)
{
    struct mem_source m = {.data = data, .len = len, .call = &H.call};
    struct sbx_source src = mem_source(&m);
    harness_call_init(&H.call);
    return H.ops->write_file(H.sb, &H.call, path, &src, mode);
}

int get_file(const char *path, struct buf_sink *out)
{
    struct sbx_sink sink = buf_sink(out);
    harness_call_init(&H.call);
    return H.ops->read_file(H.sb, &H.call, path, &sink);
}

int process_gone(int pid)
{
    char path[64], stat_line[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    for (int i = 0; i < 200; i++) {
        if (kill(pid, 0) < 0 && errno == ESRCH)
            return 1;
        long n = slurp_small(path, stat_line, sizeof stat_line);
        if (n < 0)
            return 1;
        /* "pid (comm) S ...": the state follows the last ')'. */
        const char *paren = strrchr(stat_line, ')');
        if (paren != NULL && (paren[2] == 'Z' || paren[2] == 'X'))
            return 1;
        usleep(10 * 1000);
    }
    return 0;
}

long slurp_small(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t len = 0;
    for (;;) {
        ssize_t n = read(fd, buf + len, cap - 1 - len);
        if (n <= 0)
            break;
        len += (size_t)n;
        if (len == cap - 1)
            break;
    }
    close(fd);
    buf[len] = '\0';
    return (long)len;
}
