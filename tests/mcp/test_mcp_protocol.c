/*
 * test_mcp_protocol.c - `sbx mcp` as a client sees it: the lifecycle,
 * every JSON-RPC error code, oversized and hostile lines, the tool list
 * and its schemas (nothing a call can pass names a provider, a config or a
 * host path), on the local provider with a private store.
 */
#include "mcp_harness.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define T 10000

static json_object *result_of(json_object *resp)
{
    json_object *r = NULL;
    json_object_object_get_ex(resp, "result", &r);
    return r;
}

static void assert_alive(struct mcp_client *c, int id)
{
    json_object *r = mcp_request(c, id, "ping", NULL, T);
    cr_assert(r, "the server stopped answering");
    cr_assert_eq(mcp_error_code(r), 0);
    json_object_put(r);
}

static void negotiate(const char *asked, const char *expected)
{
    struct mcp_client c;
    mcp_start_raw(&c, NULL, false);
    char params[256];
    snprintf(params, sizeof params,
             "{\"protocolVersion\":\"%s\",\"capabilities\":{},\"clientInfo\":{\"name\":\"t\","
             "\"version\":\"1\"}}",
             asked);
    json_object *r = mcp_request(&c, 1, "initialize", params, T);
    cr_assert(r);
    json_object *res = result_of(r), *v, *caps, *tools, *info;
    cr_assert(res, "%s", json_object_to_json_string(r));
    cr_assert(json_object_object_get_ex(res, "protocolVersion", &v));
    cr_assert_str_eq(json_object_get_string(v), expected);
    cr_assert(json_object_object_get_ex(res, "capabilities", &caps));
    cr_assert(json_object_object_get_ex(caps, "tools", &tools));
    cr_assert(json_object_object_get_ex(res, "serverInfo", &info));
    cr_assert(json_object_object_get_ex(info, "name", &v));
    cr_assert_str_eq(json_object_get_string(v), "sbx");
    cr_assert(json_object_object_get_ex(info, "version", &v));
    json_object_put(r);
    cr_assert_eq(mcp_stop(&c, T), 0);
}

Test(lifecycle, version_negotiation)
{
    negotiate("2025-11-25", "2025-11-25");
    negotiate("2025-06-18", "2025-06-18");
    negotiate("2025-03-26", "2025-03-26");
    negotiate("2024-11-05", "2024-11-05");
    negotiate("1999-01-01", "2025-11-25");
}

Test(lifecycle, requests_before_initialize)
{
    struct mcp_client c;
    mcp_start_raw(&c, NULL, false);
    json_object *r = mcp_request(&c, 1, "tools/list", NULL, T);
    cr_assert_eq(mcp_error_code(r), -32600, "%s", json_object_to_json_string(r));
    json_object_put(r);
    r = mcp_call(&c, 2, "list_sandboxes", "{}", T, NULL);
    cr_assert_null(r);
    assert_alive(&c, 3); /* ping is always allowed */
    r = mcp_request(&c, 4, "initialize", "{\"capabilities\":{}}", T);
    cr_assert_eq(mcp_error_code(r), -32602, "initialize without protocolVersion");
    json_object_put(r);
    r = mcp_request(&c, 5, "initialize", "{\"protocolVersion\":\"2025-11-25\"}", T);
    cr_assert_eq(mcp_error_code(r), 0);
    json_object_put(r);
    r = mcp_request(&c, 6, "initialize", "{\"protocolVersion\":\"2025-11-25\"}", T);
    cr_assert_eq(mcp_error_code(r), -32600, "a second initialize");
    json_object_put(r);
    r = mcp_request(&c, 7, "tools/list", NULL, T);
    cr_assert_eq(mcp_error_code(r), 0);
    json_object_put(r);
    cr_assert_eq(mcp_stop(&c, T), 0);
}

/* The next message must be an error with code and id null. */
static void expect_null_id_error(struct mcp_client *c, int code)
{
    json_object *m = mcp_read(c, T), *id;
    cr_assert(m, "no answer");
    cr_assert_eq(mcp_error_code(m), code, "%s", json_object_to_json_string(m));
    cr_assert(json_object_object_get_ex(m, "id", &id));
    cr_assert_null(id);
    json_object_put(m);
}

Test(errors, every_code)
{
    struct mcp_client c;
    mcp_start(&c, NULL);
    mcp_send(&c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":");
    expect_null_id_error(&c, -32700);
    mcp_send(&c, "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]");
    expect_null_id_error(&c, -32600); /* batches are not MCP 2025-11-25 */
    mcp_send(&c, "{\"id\":2,\"method\":\"ping\"}");
    json_object *r = mcp_wait(&c, 2, T);
    cr_assert_eq(mcp_error_code(r), -32600, "no jsonrpc member");
    json_object_put(r);
    mcp_send(&c, "{\"jsonrpc\":\"2.0\",\"id\":{\"x\":1},\"method\":\"ping\"}");
    expect_null_id_error(&c, -32600); /* an object id */
    mcp_send(&c, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":7}");
    r = mcp_wait(&c, 3, T);
    cr_assert_eq(mcp_error_code(r), -32600, "method not a string");
    json_object_put(r);
    mcp_send(&c, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"ping\",\"params\":[1]}");
    r = mcp_wait(&c, 4, T);
    cr_assert_eq(mcp_error_code(r), -32600, "params not an object");
    json_object_put(r);
    r = mcp_request(&c, 5, "resources/list", NULL, T);
    cr_assert_eq(mcp_error_code(r), -32601);
    json_object_put(r);
    int code = 0;
    cr_assert_null(mcp_call(&c, 6, "no_such_tool", "{}", T, &code));
    cr_assert_eq(code, -32602);
    cr_assert_null(mcp_call(&c, 7, "exec_command", "{\"sandbox\":5}", T, &code));
    cr_assert_eq(code, -32602, "a wrong type");
    cr_assert_null(mcp_call(&c, 8, "exec_command", "{}", T, &code));
    cr_assert_eq(code, -32602, "a required argument missing");
    cr_assert_null(mcp_call(&c, 9, "list_sandboxes", "{\"limit\":0}", T, &code));
    cr_assert_eq(code, -32602, "under the minimum");
    cr_assert_null(mcp_call(&c, 10, "list_sandboxes", "[]", T, &code));
    cr_assert_eq(code, -32602, "arguments not an object");
    /* a client's response to nothing: ignored, no answer */
    mcp_send(&c, "{\"jsonrpc\":\"2.0\",\"id\":99,\"result\":{}}");
    assert_alive(&c, 11);
    cr_assert_eq(mcp_stop(&c, T), 0);
}

Test(errors, oversized_line_is_refused_and_skipped)
{
    struct mcp_client c;
    mcp_start(&c, NULL);
    size_t n = (17u << 20);
    char *big = malloc(n);
    cr_assert(big);
    memset(big, ' ', n);
    memcpy(big, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"x\":\"", 56);
    /* the reader answers only after the newline; write from the test in
     * pieces so the pipe never holds it all */
    mcp_write(&c, big, n);
    mcp_write(&c, "\"}}\n", 4);
    free(big);
    expect_null_id_error(&c, -32600);
    assert_alive(&c, 2);
    cr_assert_eq(mcp_stop(&c, T), 0);
}

Test(errors, hostile_lines_never_crash)
{
    struct mcp_client c;
    mcp_start(&c, NULL);
    /* a NUL byte */
    static const char nul[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\0\"method\":\"ping\"}\n";
    mcp_write(&c, nul, sizeof nul - 1);
    expect_null_id_error(&c, -32700);
    /* invalid UTF-8 */
    mcp_send(&c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\xfe\"}");
    expect_null_id_error(&c, -32700);
    /* deep nesting */
    size_t depth = 100000;
    char *deep = malloc(depth * 2 + 1);
    memset(deep, '[', depth);
    memset(deep + depth, ']', depth);
    deep[2 * depth] = '\n';
    mcp_write(&c, deep, 2 * depth + 1);
    free(deep);
    expect_null_id_error(&c, -32700);
    /* huge numbers, as id and as argument */
    mcp_send(&c, "{\"jsonrpc\":\"2.0\",\"id\":1e999,\"method\":\"ping\"}");
    json_object *m = mcp_read(&c, T);
    cr_assert(m);
    cr_assert_neq(mcp_error_code(m), 0);
    json_object_put(m);
    int code = 0;
    json_object *r = mcp_call(&c, 2, "list_sandboxes",
                              "{\"limit\":123456789012345678901234567890}", T, &code);
    cr_assert_null(r);
    cr_assert_eq(code, -32602);
    /* a string id with a NUL escape, echoed as given */
    mcp_send(&c, "{\"jsonrpc\":\"2.0\",\"id\":\"a\\u0000b\",\"method\":\"ping\"}");
    m = mcp_read(&c, T);
    cr_assert(m);
    json_object_put(m);
    /* a method holding a NUL is not "ping" */
    mcp_send(&c, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\\u0000x\"}");
    r = mcp_wait(&c, 3, T);
    cr_assert_eq(mcp_error_code(r), -32600);
    json_object_put(r);
    /* tools/call with every member of the wrong type */
    mcp_send(&c, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":[],"
                 "\"arguments\":7,\"_meta\":5}}");
    r = mcp_wait(&c, 4, T);
    cr_assert_eq(mcp_error_code(r), -32602);
    json_object_put(r);
    mcp_send(&c, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":"
                 "\"list_sandboxes\",\"_meta\":{\"progressToken\":{\"a\":1}}}}");
    r = mcp_wait(&c, 5, T);
    cr_assert_eq(mcp_error_code(r), 0, "a bad progress token is ignored");
    json_object_put(r);
    /* empty lines and whitespace */
    mcp_write(&c, "\n", 1);
    mcp_send(&c, "   \r");
    assert_alive(&c, 6);
    cr_assert_eq(mcp_stop(&c, T), 0);
}

static json_object *tools_list(struct mcp_client *c, int id)
{
    json_object *r = mcp_request(c, id, "tools/list", NULL, T), *tools;
    cr_assert(r);
    cr_assert(json_object_object_get_ex(result_of(r), "tools", &tools));
    json_object_get(tools);
    json_object_put(r);
    return tools;
}

static json_object *find_tool(json_object *tools, const char *name)
{
    for (size_t i = 0; i < json_object_array_length(tools); i++) {
        json_object *t = json_object_array_get_idx(tools, i), *n;
        json_object_object_get_ex(t, "name", &n);
        if (!strcmp(json_object_get_string(n), name))
            return t;
    }
    return NULL;
}

/* Argument names that would let a call choose what the operator decides. */
static const char *const operator_words[] = {"provider", "config", "plugin", "snapshot_dir",
                                             "host",     "source", "base_dir", "store",
                                             "grant",    "limit_bytes", NULL};

static void assert_closed_schemas(json_object *tools)
{
    cr_assert_gt(json_object_array_length(tools), 0);
    for (size_t i = 0; i < json_object_array_length(tools); i++) {
        json_object *t = json_object_array_get_idx(tools, i), *n, *s, *v, *props, *ann;
        json_object_object_get_ex(t, "name", &n);
        const char *name = json_object_get_string(n);
        cr_assert(json_object_object_get_ex(t, "description", &v), "%s", name);
        cr_assert(json_object_object_get_ex(t, "annotations", &ann), "%s", name);
        cr_assert(json_object_object_get_ex(ann, "readOnlyHint", &v), "%s", name);
        cr_assert(json_object_object_get_ex(t, "inputSchema", &s), "%s", name);
        cr_assert(json_object_object_get_ex(s, "type", &v));
        cr_assert_str_eq(json_object_get_string(v), "object", "%s", name);
        cr_assert(json_object_object_get_ex(s, "additionalProperties", &v), "%s", name);
        cr_assert(!json_object_get_boolean(v), "%s: additionalProperties must be false", name);
        if (json_object_object_get_ex(s, "properties", &props)) {
            json_object_object_foreach(props, k, pv) {
                (void)pv;
                for (size_t w = 0; operator_words[w]; w++)
                    cr_assert_null(strstr(k, operator_words[w]),
                                   "tool %s takes \"%s\": a call must not pick that", name, k);
            }
        }
    }
}

Test(tools, list_and_schemas_are_closed)
{
    struct mcp_client c;
    mcp_start(&c, NULL);
    json_object *tools = tools_list(&c, 1);
    assert_closed_schemas(tools);
    cr_assert(find_tool(tools, "exec_command"));
    cr_assert(find_tool(tools, "create_sandbox"));
    cr_assert_null(find_tool(tools, "apply_manifest"), "sdk tools only with --tools sdk");
    json_object *cs = find_tool(tools, "create_sandbox"), *s, *props, *m;
    json_object_object_get_ex(cs, "inputSchema", &s);
    json_object_object_get_ex(s, "properties", &props);
    cr_assert(!json_object_object_get_ex(props, "manifest", &m),
              "no manifest argument without --tools sdk");
    json_object_put(tools);
    /* additionalProperties false is enforced, not only declared */
    int code = 0;
    cr_assert_null(mcp_call(&c, 2, "create_sandbox",
                            "{\"sandbox\":\"x\",\"provider\":\"docker\"}", T, &code));
    cr_assert_eq(code, -32602);
    cr_assert_null(mcp_call(&c, 3, "create_sandbox",
                            "{\"sandbox\":\"x\",\"config\":\"/etc/sbx/sbx.yaml\"}", T, &code));
    cr_assert_eq(code, -32602);
    cr_assert_null(mcp_call(&c, 4, "create_sandbox",
                            "{\"manifest\":{\"version\":1}}", T, &code));
    cr_assert_eq(code, -32602, "manifest is an sdk argument");
    cr_assert_eq(mcp_stop(&c, T), 0);

    mcp_start(&c, (const char *const[]){"--tools", "sdk", NULL});
    tools = tools_list(&c, 1);
    assert_closed_schemas(tools);
    cr_assert(find_tool(tools, "apply_manifest"));
    cr_assert(find_tool(tools, "add_user"));
    cr_assert(find_tool(tools, "exec_command"), "sdk includes agent");
    size_t n = 0;
    for (size_t i = 0; i < json_object_array_length(tools); i++) {
        json_object *nm;
        json_object_object_get_ex(json_object_array_get_idx(tools, i), "name", &nm);
        n += !strcmp(json_object_get_string(nm), "create_sandbox");
    }
    cr_assert_eq(n, 1, "one create_sandbox (the sdk variant)");
    json_object_put(tools);
    cr_assert_eq(mcp_stop(&c, T), 0);
}

Test(tools, unknown_tools_flag_is_a_usage_error)
{
    struct cli_env e;
    cli_env_init(&e);
    cli_env_local_config(&e);
    struct cli_result r;
    cli_run(&e, (const char *const[]){"mcp", "--tools", "root", NULL}, NULL, T, &r);
    cr_assert_eq(r.status, 2);
    cr_assert(strstr(r.err, "--tools root"), "%s", r.err);
    cli_result_free(&r);
    cli_run(&e, (const char *const[]){"mcp", "--max-calls", "0", NULL}, NULL, T, &r);
    cr_assert_eq(r.status, 2);
    cli_result_free(&r);
    cli_env_fini(&e);
}
