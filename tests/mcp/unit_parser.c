/*
 * unit_parser.c - the JSON-RPC line classifier (host/mcp/jsonrpc.c) and the
 * schema check (host/mcp/schema.c), called directly.
 */
#include "mcp/internal.h"

#include <criterion/criterion.h>
#include <string.h>

static int code_of(const char *line, size_t len)
{
    struct sbxm_msg m;
    sbxm_msg_parse(line, len, &m);
    int code = 0;
    if (m.kind == SBXM_MSG_INVALID) {
        json_object *e, *c;
        cr_assert(json_object_object_get_ex(m.error, "error", &e));
        cr_assert(json_object_object_get_ex(e, "code", &c));
        code = json_object_get_int(c);
    }
    sbxm_msg_free(&m);
    return code;
}

#define CODE(s) code_of(s, strlen(s))

Test(parser, classifies)
{
    struct sbxm_msg m;
    const char *req = "{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"x\",\"params\":{}}";
    sbxm_msg_parse(req, strlen(req), &m);
    cr_assert_eq(m.kind, SBXM_MSG_REQUEST);
    cr_assert_str_eq(m.method, "x");
    cr_assert(m.params);
    sbxm_msg_free(&m);
    const char *note = "{\"jsonrpc\":\"2.0\",\"method\":\"n\"}";
    sbxm_msg_parse(note, strlen(note), &m);
    cr_assert_eq(m.kind, SBXM_MSG_NOTIFICATION);
    sbxm_msg_free(&m);
    const char *resp = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}";
    sbxm_msg_parse(resp, strlen(resp), &m);
    cr_assert_eq(m.kind, SBXM_MSG_RESPONSE);
    sbxm_msg_free(&m);
}

Test(parser, refuses)
{
    cr_assert_eq(CODE("{"), -32700);
    cr_assert_eq(CODE("{} {}"), -32700);
    cr_assert_eq(CODE("nul"), -32700);
    cr_assert_eq(code_of("{\"a\":\0}", 7), -32700);
    cr_assert_eq(CODE("\"\xc3\x28\""), -32700);
    cr_assert_eq(CODE("[]"), -32600);
    cr_assert_eq(CODE("7"), -32600);
    cr_assert_eq(CODE("{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"x\"}"), -32600);
    cr_assert_eq(CODE("{\"jsonrpc\":\"2.0\",\"id\":true,\"method\":\"x\"}"), -32600);
    cr_assert_eq(CODE("{\"jsonrpc\":2,\"id\":1,\"method\":\"x\"}"), -32600);
    cr_assert_eq(CODE("{\"jsonrpc\":\"2.0\",\"id\":1}"), -32600);
    cr_assert_eq(CODE("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":\"s\"}"), -32600);
    char deep[200];
    memset(deep, '[', 100);
    memset(deep + 100, ']', 100);
    cr_assert_eq(code_of(deep, 200), -32700, "deeper than SBXM_MAX_DEPTH");
}

static bool ok(const char *schema, const char *value)
{
    json_object *s = json_tokener_parse(schema), *v = json_tokener_parse(value);
    char why[256];
    bool r = sbxm_schema_check(s, v, "arguments", why, sizeof why);
    json_object_put(s);
    json_object_put(v);
    return r;
}

Test(schema, subset)
{
    const char *s = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\","
                    "\"minimum\":1,\"maximum\":5},\"b\":{\"type\":\"string\",\"maxLength\":3,"
                    "\"enum\":[\"x\",\"yy\"]},\"c\":{\"type\":\"array\",\"items\":{\"type\":"
                    "\"boolean\"}},\"d\":{\"type\":[\"string\",\"null\"]}},\"required\":[\"a\"],"
                    "\"additionalProperties\":false}";
    cr_assert(ok(s, "{\"a\":3}"));
    cr_assert(ok(s, "{\"a\":3.0}"), "an integral number is an integer");
    cr_assert(ok(s, "{\"a\":1,\"b\":\"yy\",\"c\":[true,false],\"d\":null}"));
    cr_assert(!ok(s, "{}"), "required");
    cr_assert(!ok(s, "{\"a\":0}"), "minimum");
    cr_assert(!ok(s, "{\"a\":6}"), "maximum");
    cr_assert(!ok(s, "{\"a\":1.5}"), "not an integer");
    cr_assert(!ok(s, "{\"a\":\"1\"}"), "type");
    cr_assert(!ok(s, "{\"a\":1,\"b\":\"z\"}"), "enum");
    cr_assert(!ok(s, "{\"a\":1,\"b\":\"yyyy\"}"), "maxLength");
    cr_assert(!ok(s, "{\"a\":1,\"c\":[1]}"), "items");
    cr_assert(!ok(s, "{\"a\":1,\"e\":1}"), "additionalProperties");
    cr_assert(!ok(s, "{\"a\":1,\"d\":\"x\\u0000y\"}"), "NUL in a string");
    cr_assert(!ok(s, "{\"a\":1e400}"), "infinite");
}
