/* mcp_harness.c - see mcp_harness.h. */
#include "mcp_harness.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void mcp_start_raw(struct mcp_client *c, const char *const *args, bool docker)
{
    memset(c, 0, sizeof *c);
    cli_env_init(&c->env);
    if (docker)
        cli_env_docker_config(&c->env, NULL);
    else
        cli_env_local_config(&c->env);
    const char *argv[32] = {"mcp"};
    size_t n = 1;
    for (size_t i = 0; args && args[i] && n < 31; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    cli_spawn(&c->env, argv, CLI_STDIN_PIPE, &c->p);
    c->cap = 1 << 16;
    c->buf = malloc(c->cap);
    cr_assert(c->buf);
}

static void initialize(struct mcp_client *c)
{
    json_object *r = mcp_request(c, 0, "initialize",
                                 "{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},"
                                 "\"clientInfo\":{\"name\":\"test\",\"version\":\"1\"}}",
                                 10000);
    cr_assert(r, "no answer to initialize");
    cr_assert_eq(mcp_error_code(r), 0, "initialize failed: %s", json_object_to_json_string(r));
    json_object_put(r);
    mcp_send(c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
}

void mcp_start(struct mcp_client *c, const char *const *args)
{
    mcp_start_raw(c, args, false);
    initialize(c);
}

void mcp_start_docker(struct mcp_client *c, const char *const *args)
{
    mcp_start_raw(c, args, true);
    initialize(c);
}

void mcp_write(struct mcp_client *c, const void *data, size_t len)
{
    const char *p = data;
    while (len) {
        ssize_t n = write(c->p.in_fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN) {
            struct pollfd pfd = {c->p.in_fd, POLLOUT, 0};
            poll(&pfd, 1, 1000);
            continue;
        }
        cr_assert(n > 0, "writing to sbx mcp: %s", strerror(errno));
        p += n;
        len -= (size_t)n;
    }
}

void mcp_send(struct mcp_client *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *line = NULL;
    int n = vasprintf(&line, fmt, ap);
    va_end(ap);
    cr_assert(n >= 0);
    mcp_write(c, line, (size_t)n);
    mcp_write(c, "\n", 1);
    free(line);
}

/* json_tokener_parse on a length (the line is not NUL-terminated). */
static json_object *parse_len(const char *s, size_t n)
{
    json_tokener *t = json_tokener_new();
    json_object *o = json_tokener_parse_ex(t, s, (int)n);
    json_tokener_free(t);
    return o ? o : json_object_new_string("<unparsable line>");
}

/* Read what the server wrote to stderr so far (it never blocks on a full
 * pipe); the start is kept. */
static bool drain_err(struct mcp_client *c)
{
    char tmp[4096];
    ssize_t n;
    while ((n = read(c->p.err_fd, tmp, sizeof tmp)) > 0) {
        size_t room = sizeof c->err - 1 - c->err_len, take = (size_t)n < room ? (size_t)n : room;
        memcpy(c->err + c->err_len, tmp, take);
        c->err_len += take;
        c->err[c->err_len] = '\0';
    }
    return n == 0; /* EOF: the server (and whatever inherited stderr) ended */
}

json_object *mcp_read(struct mcp_client *c, int timeout_ms)
{
    long long deadline = cli_now_ms() + timeout_ms;
    for (;;) {
        char *nl = memchr(c->buf, '\n', c->len);
        if (nl) {
            size_t at = (size_t)(nl - c->buf);
            json_object *o = parse_len(c->buf, at);
            memmove(c->buf, nl + 1, c->len - at - 1);
            c->len -= at + 1;
            return o;
        }
        if (c->cap - c->len < 4096) {
            c->cap *= 2;
            c->buf = realloc(c->buf, c->cap);
            cr_assert(c->buf);
        }
        ssize_t n = read(c->p.out_fd, c->buf + c->len, c->cap - c->len);
        if (n > 0) {
            c->len += (size_t)n;
            continue;
        }
        if (n == 0)
            return NULL;
        if (errno != EAGAIN && errno != EINTR)
            return NULL;
        long long left = deadline - cli_now_ms();
        if (left <= 0)
            return NULL;
        struct pollfd pfd[2] = {{c->p.out_fd, POLLIN, 0}, {c->p.err_fd, POLLIN, 0}};
        poll(pfd, 2, (int)left);
        drain_err(c);
    }
}

json_object *mcp_wait(struct mcp_client *c, int id, int timeout_ms)
{
    long long deadline = cli_now_ms() + timeout_ms;
    for (;;) {
        long long left = deadline - cli_now_ms();
        if (left <= 0)
            return NULL;
        json_object *m = mcp_read(c, (int)left);
        if (!m)
            return NULL;
        json_object *v;
        if (json_object_object_get_ex(m, "method", &v)) {
            if (!strcmp(json_object_get_string(v), "notifications/progress")) {
                c->progress++;
                json_object_put(c->last_progress);
                c->last_progress = json_object_get(m);
            }
            json_object_put(m);
            continue;
        }
        if (json_object_object_get_ex(m, "id", &v) && json_object_is_type(v, json_type_int) &&
            json_object_get_int(v) == id)
            return m;
        json_object_put(m);
    }
}



json_object *mcp_request(struct mcp_client *c, int id, const char *method,
                         const char *params_json, int timeout_ms)
{
    if (params_json)
        mcp_send(c, "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"%s\",\"params\":%s}", id,
                 method, params_json);
    else
        mcp_send(c, "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"%s\"}", id, method);
    return mcp_wait(c, id, timeout_ms);
}

int mcp_error_code(json_object *resp)
{
    json_object *e, *code;
    if (resp && json_object_object_get_ex(resp, "error", &e) &&
        json_object_object_get_ex(e, "code", &code))
        return json_object_get_int(code);
    return 0;
}

json_object *mcp_call(struct mcp_client *c, int id, const char *name, const char *args_json,
                      int timeout_ms, int *code)
{
    char *params = NULL;
    cr_assert(asprintf(&params, "{\"name\":\"%s\",\"arguments\":%s}", name,
                       args_json ? args_json : "{}") > 0);
    json_object *r = mcp_request(c, id, "tools/call", params, timeout_ms);
    free(params);
    cr_assert(r, "no response to tools/call %s (id %d) within %d ms", name, id, timeout_ms);
    if (code)
        *code = mcp_error_code(r);
    json_object *res = NULL;
    if (json_object_object_get_ex(r, "result", &res))
        res = json_object_get(res);
    json_object_put(r);
    return res;
}

json_object *mcp_sc(json_object *result, const char *key)
{
    json_object *sc, *v;
    if (result && json_object_object_get_ex(result, "structuredContent", &sc) &&
        json_object_object_get_ex(sc, key, &v))
        return v;
    return NULL;
}

const char *mcp_sc_str(json_object *result, const char *key)
{
    json_object *v = mcp_sc(result, key);
    return v ? json_object_get_string(v) : NULL;
}

const char *mcp_text(json_object *result)
{
    json_object *content, *t;
    if (result && json_object_object_get_ex(result, "content", &content) &&
        json_object_array_length(content) > 0 &&
        json_object_object_get_ex(json_object_array_get_idx(content, 0), "text", &t))
        return json_object_get_string(t);
    return "";
}

bool mcp_is_error(json_object *result)
{
    json_object *v;
    return result && json_object_object_get_ex(result, "isError", &v) &&
           json_object_get_boolean(v);
}

int mcp_stop(struct mcp_client *c, int timeout_ms)
{
    if (c->p.in_fd >= 0) {
        close(c->p.in_fd);
        c->p.in_fd = -1;
    }
    /* stderr until EOF (the sanitizers report at exit), then the status */
    long long deadline = cli_now_ms() + timeout_ms;
    while (!drain_err(c) && cli_now_ms() < deadline) {
        struct pollfd pfd = {c->p.err_fd, POLLIN, 0};
        poll(&pfd, 1, 100);
    }
    int st = cli_wait(&c->p, (int)(deadline - cli_now_ms() > 0 ? deadline - cli_now_ms() : 1));
    bool report = strstr(c->err, "ERROR: AddressSanitizer") || strstr(c->err, "ERROR: LeakSanitizer") ||
                  strstr(c->err, "runtime error:");
    cr_assert(!report, "sbx mcp's stderr holds a sanitizer report:\n%s", c->err);
    json_object_put(c->last_progress);
    free(c->buf);
    c->buf = NULL;
    cli_env_fini(&c->env);
    return st;
}
