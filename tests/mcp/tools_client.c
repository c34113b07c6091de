/* tools_client.c - the MCP client of the tool tests (tools_client.h). */
#include "tools_client.h"

#include <criterion/criterion.h>

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

#define CALL_TIMEOUT_MS 60000

static void send_line(struct tc *t, const char *text)
{
    size_t n = strlen(text), off = 0;
    while (off < n) {
        ssize_t w = write(t->p.in_fd, text + off, n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN) {
            struct pollfd pfd = {t->p.in_fd, POLLOUT, 0};
            poll(&pfd, 1, 1000);
            continue;
        }
        cr_assert(w > 0, "writing to sbx mcp: %s", strerror(errno));
        off += (size_t)w;
    }
    cr_assert_eq(write(t->p.in_fd, "\n", 1), 1);
}

/* Read what the server logged; note sanitizer reports (UBSan's do not
 * change its exit status). */
static void drain_stderr(struct tc *t)
{
    char junk[4097];
    ssize_t n;
    while ((n = read(t->p.err_fd, junk, sizeof junk - 1)) > 0) {
        junk[n] = '\0';
        if (strstr(junk, "runtime error:") || strstr(junk, "Sanitizer")) {
            t->sanitizer = true;
            fprintf(stderr, "server: %s\n", junk);
        } else if (getenv("TC_VERBOSE")) {
            fprintf(stderr, "server: %s\n", junk);
        }
    }
}

/* The next line from the server (NUL-terminated, in t->buf; consumed up
 * to *next). stderr is drained so that the server never blocks on it. */
static char *read_line(struct tc *t, size_t *next)
{
    long long deadline = cli_now_ms() + CALL_TIMEOUT_MS;
    for (;;) {
        char *nl = t->len ? memchr(t->buf, '\n', t->len) : NULL;
        if (nl) {
            *nl = '\0';
            *next = (size_t)(nl - t->buf) + 1;
            return t->buf;
        }
        if (t->cap - t->len < 65536) {
            t->cap = t->cap ? t->cap * 2 : 1 << 20;
            t->buf = realloc(t->buf, t->cap);
            cr_assert_not_null(t->buf);
        }
        ssize_t n = read(t->p.out_fd, t->buf + t->len, t->cap - t->len - 1);
        if (n > 0) {
            t->len += (size_t)n;
            continue;
        }
        cr_assert(n != 0, "sbx mcp closed its stdout");
        drain_stderr(t);
        long long left = deadline - cli_now_ms();
        cr_assert(left > 0, "no answer from sbx mcp within %d ms", CALL_TIMEOUT_MS);
        struct pollfd pfd[2] = {{t->p.out_fd, POLLIN, 0}, {t->p.err_fd, POLLIN, 0}};
        poll(pfd, 2, (int)(left < 1000 ? left : 1000));
    }
}

static void consume(struct tc *t, size_t next)
{
    memmove(t->buf, t->buf + next, t->len - next);
    t->len -= next;
}

/* Send a request and return its response's "result" (or "error"). */
static json_object *request(struct tc *t, const char *method, json_object *params)
{
    long id = ++t->next_id;
    json_object *req = json_object_new_object();
    json_object_object_add(req, "jsonrpc", json_object_new_string("2.0"));
    json_object_object_add(req, "id", json_object_new_int64(id));
    json_object_object_add(req, "method", json_object_new_string(method));
    json_object_object_add(req, "params", params);
    send_line(t, json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN));
    json_object_put(req);
    for (;;) {
        size_t next;
        char *line = read_line(t, &next);
        json_object *msg = json_tokener_parse(line);
        cr_assert_not_null(msg, "not JSON from sbx mcp: %.200s", line);
        consume(t, next);
        json_object *jid;
        if (json_object_object_get_ex(msg, "id", &jid) && json_object_get_int64(jid) == id) {
            json_object *r;
            if (json_object_object_get_ex(msg, "result", &r) ||
                json_object_object_get_ex(msg, "error", &r)) {
                json_object_get(r);
                json_object_put(msg);
                return r;
            }
        }
        json_object_put(msg); /* a notification (progress), or another id */
    }
}

int tc_sh(struct tc *t, const char *script, char **out)
{
    const char *args[] = {"exec", TC_SANDBOX, "--", "sh", "-c", script, NULL};
    struct cli_result r;
    cli_run(&t->env, args, NULL, 60000, &r);
    if (out)
        *out = strdup(r.out);
    int st = r.status;
    if (st != 0 && getenv("TC_VERBOSE"))
        fprintf(stderr, "sh %s: %d %s\n", script, st, r.err);
    cli_result_free(&r);
    return st;
}

void tc_start(struct tc *t, const char *const *extra)
{
    memset(t, 0, sizeof *t);
    cli_env_init(&t->env);
    const char *prov = getenv("SBX_MCP_TEST_PROVIDER");
    t->docker = prov && !strcmp(prov, "docker");
    if (t->docker)
        cli_env_docker_config(&t->env, NULL);
    else
        cli_env_local_config(&t->env);
    snprintf(t->snapdir, sizeof t->snapdir, "%s/snapshots", t->env.dir);
    /* a port on local (docker's test daemon has no bridge network) */
    const char *create[] = {"create", "--port", "18431", TC_SANDBOX, NULL};
    if (t->docker) {
        create[1] = TC_SANDBOX;
        create[2] = NULL;
    }
    struct cli_result r;
    cli_run(&t->env, create, NULL, 60000, &r);
    cr_assert_eq(r.status, 0, "sbx create: %s", r.err);
    cli_result_free(&r);
    if (!t->docker) {
        unsigned char md[32];
        unsigned int ml = 0;
        EVP_Digest(TC_SANDBOX, strlen(TC_SANDBOX), md, &ml, EVP_sha256(), NULL);
        char hex[65];
        for (int i = 0; i < 32; i++)
            snprintf(hex + 2 * i, 3, "%02x", md[i]);
        snprintf(t->ws, sizeof t->ws, "%s/%s", t->env.ws_root, hex);
        cr_assert_eq(access(t->ws, F_OK), 0, "no workspace at %s", t->ws);
    }
    const char *args[32];
    size_t n = 0;
    args[n++] = "mcp";
    args[n++] = "--tools";
    args[n++] = "agent,sdk";
    args[n++] = "--snapshot-dir";
    args[n++] = t->snapdir;
    for (size_t i = 0; extra && extra[i] && n < 31; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    cli_spawn(&t->env, args, CLI_STDIN_PIPE, &t->p);
    json_object *params = json_tokener_parse(
        "{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},"
        "\"clientInfo\":{\"name\":\"sbx-tools-test\",\"version\":\"1\"}}");
    json_object *r0 = request(t, "initialize", params);
    json_object *pv;
    cr_assert(json_object_object_get_ex(r0, "protocolVersion", &pv),
              "initialize failed: %s", json_object_to_json_string(r0));
    json_object_put(r0);
    send_line(t, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
}

void tc_stop(struct tc *t)
{
    if (t->p.in_fd >= 0)
        close(t->p.in_fd);
    t->p.in_fd = -1;
    int st = cli_wait(&t->p, 20000);
    drain_stderr(t);
    close(t->p.out_fd);
    close(t->p.err_fd);
    free(t->buf);
    t->buf = NULL;
    const char *del[] = {"destroy", TC_SANDBOX, NULL};
    struct cli_result r;
    cli_run(&t->env, del, NULL, 60000, &r);
    cli_result_free(&r);
    cli_env_fini(&t->env);
    cr_expect_eq(st, 0, "sbx mcp exited with %d", st);
    cr_expect(!t->sanitizer, "the server's stderr has a sanitizer report");
}

static json_object *vcall(struct tc *t, const char *tool, const char *fmt, va_list ap)
{
    char *text = NULL;
    cr_assert(vasprintf(&text, fmt, ap) >= 0);
    json_object *args = json_tokener_parse(text);
    cr_assert_not_null(args, "test bug: arguments are not JSON: %s", text);
    free(text);
    json_object *params = json_object_new_object();
    json_object_object_add(params, "name", json_object_new_string(tool));
    json_object_object_add(params, "arguments", args);
    return request(t, "tools/call", params);
}

json_object *tc_call(struct tc *t, const char *tool, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    json_object *r = vcall(t, tool, fmt, ap);
    va_end(ap);
    return r;
}

static const char *result_text(json_object *r)
{
    json_object *content, *first, *text;
    if (json_object_object_get_ex(r, "content", &content) &&
        (first = json_object_array_get_idx(content, 0)) &&
        json_object_object_get_ex(first, "text", &text))
        return json_object_get_string(text);
    json_object *msg;
    if (json_object_object_get_ex(r, "message", &msg))
        return json_object_get_string(msg);
    return json_object_to_json_string(r);
}

json_object *tc_ok(struct tc *t, json_object **root, const char *tool, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    json_object *r = vcall(t, tool, fmt, ap);
    va_end(ap);
    json_object *sc;
    cr_assert(!tc_bool(r, "isError") && json_object_object_get_ex(r, "structuredContent", &sc),
              "%s failed: %s", tool, result_text(r));
    *root = r;
    return sc;
}

char *tc_err(struct tc *t, const char *tool, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    json_object *r = vcall(t, tool, fmt, ap);
    va_end(ap);
    cr_assert(tc_bool(r, "isError"), "%s should have failed: %s", tool,
              json_object_to_json_string(r));
    char *s = strdup(result_text(r));
    json_object_put(r);
    return s;
}

char *tc_refused(struct tc *t, const char *tool, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    json_object *r = vcall(t, tool, fmt, ap);
    va_end(ap);
    json_object *code;
    bool rpc = json_object_object_get_ex(r, "code", &code) && json_object_get_int(code) == -32602;
    cr_assert(rpc || tc_bool(r, "isError"), "%s should have been refused: %s", tool,
              json_object_to_json_string(r));
    char *s = strdup(result_text(r));
    json_object_put(r);
    return s;
}

const char *tc_str(json_object *o, const char *key)
{
    json_object *v;
    return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string)
               ? json_object_get_string(v)
               : NULL;
}

long long tc_int(json_object *o, const char *key)
{
    json_object *v;
    cr_assert(json_object_object_get_ex(o, key, &v) && v, "no \"%s\" in %s", key,
              json_object_to_json_string(o));
    return (long long)json_object_get_int64(v);
}

bool tc_bool(json_object *o, const char *key)
{
    json_object *v;
    return json_object_object_get_ex(o, key, &v) && json_object_get_boolean(v);
}

long tc_server_hwm_kib(struct tc *t)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)t->p.pid);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    long kib = -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmHWM:", 6))
            kib = strtol(line + 6, NULL, 10);
    fclose(f);
    return kib;
}
