/*
 * jsonrpc.c - one line of the stdio transport into a classified JSON-RPC
 * 2.0 message, or the error response it deserves. Pure: no I/O, no state,
 * so tests/fuzz/fuzz_mcp_message.c drives it directly.
 *
 * What is refused: a line that is not exactly one JSON value (-32700: bad
 * syntax, a NUL byte, invalid UTF-8, nesting deeper than SBXM_MAX_DEPTH,
 * trailing bytes); a value that is not a JSON-RPC 2.0 object (-32600:
 * arrays, i.e. batches, which MCP 2025-11-25 does not have; a missing or
 * wrong "jsonrpc"; an id that is not a string or an integer; a method
 * that is not a string; params that are not an object).
 */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

json_object *sbxm_error_response(json_object *id, int code, const char *fmt, ...)
{
    char msg[SBX_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_object *r = json_object_new_object(), *e = json_object_new_object();
    if (!r || !e) {
        json_object_put(r);
        json_object_put(e);
        return NULL;
    }
    json_object_object_add(r, "jsonrpc", json_object_new_string("2.0"));
    json_object_object_add(r, "id", id ? json_object_get(id) : NULL);
    json_object_object_add(e, "code", json_object_new_int(code));
    json_object_object_add(e, "message", json_object_new_string(msg));
    json_object_object_add(r, "error", e);
    return r;
}

json_object *sbxm_result_response(json_object *id, json_object *result)
{
    json_object *r = json_object_new_object();
    if (!r) {
        json_object_put(result);
        return NULL;
    }
    json_object_object_add(r, "jsonrpc", json_object_new_string("2.0"));
    json_object_object_add(r, "id", id ? json_object_get(id) : NULL);
    json_object_object_add(r, "result", result ? result : json_object_new_object());
    return r;
}

static void invalid(struct sbxm_msg *out, json_object *id, int code, const char *what)
{
    out->kind = SBXM_MSG_INVALID;
    out->error = sbxm_error_response(id, code, "%s", what);
}

/* Whether the value can be a request id: a string, or an integer (a
 * number with a fraction or an exponent is not one json-c keeps exactly). */
static bool id_ok(json_object *id)
{
    return json_object_is_type(id, json_type_string) ||
           json_object_is_type(id, json_type_int);
}

void sbxm_msg_parse(const char *line, size_t len, struct sbxm_msg *out)
{
    memset(out, 0, sizeof *out);
    if (len > SBXM_MAX_LINE) {
        invalid(out, NULL, SBXM_INVALID_REQUEST, "message longer than 16 MiB");
        return;
    }
    if (memchr(line, '\0', len)) {
        invalid(out, NULL, SBXM_PARSE_ERROR, "parse error: NUL byte in the message");
        return;
    }
    json_tokener *tok = json_tokener_new_ex(SBXM_MAX_DEPTH);
    if (!tok) {
        invalid(out, NULL, SBXM_INTERNAL_ERROR, "out of memory");
        return;
    }
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
    /* json-c takes an int length; SBXM_MAX_LINE fits. */
    json_object *root = json_tokener_parse_ex(tok, line, (int)len);
    enum json_tokener_error te = json_tokener_get_error(tok);
    size_t used = json_tokener_get_parse_end(tok);
    if (te == json_tokener_continue) {
        /* the end of the line ends a top-level number ("7"): say so */
        root = json_tokener_parse_ex(tok, "", 1);
        te = json_tokener_get_error(tok);
        used = len;
    }
    json_tokener_free(tok);
    if (te == json_tokener_continue) {
        json_object_put(root);
        invalid(out, NULL, SBXM_PARSE_ERROR, "parse error: the message is incomplete");
        return;
    }
    if (te != json_tokener_success) {
        char what[160];
        snprintf(what, sizeof what, "parse error: %s", json_tokener_error_desc(te));
        json_object_put(root);
        invalid(out, NULL, SBXM_PARSE_ERROR, what);
        return;
    }
    for (size_t i = used; i < len; i++) {
        if (!strchr(" \t\r", line[i])) {
            json_object_put(root);
            invalid(out, NULL, SBXM_PARSE_ERROR,
                    "parse error: bytes after the JSON value");
            return;
        }
    }
    out->root = root;
    if (json_object_is_type(root, json_type_array)) {
        invalid(out, NULL, SBXM_INVALID_REQUEST,
                "invalid request: batches are not part of MCP 2025-11-25");
        return;
    }
    if (!json_object_is_type(root, json_type_object)) {
        invalid(out, NULL, SBXM_INVALID_REQUEST,
                "invalid request: a message is a JSON object");
        return;
    }
    json_object *v, *id = NULL;
    bool has_id = json_object_object_get_ex(root, "id", &id);
    /* A bad id cannot be echoed: answer with id null. */
    json_object *reply_id = has_id && id_ok(id) ? id : NULL;
    if (!json_object_object_get_ex(root, "jsonrpc", &v) ||
        !json_object_is_type(v, json_type_string) ||
        strcmp(json_object_get_string(v), "2.0")) {
        invalid(out, reply_id, SBXM_INVALID_REQUEST,
                "invalid request: \"jsonrpc\" must be \"2.0\"");
        return;
    }
    if (has_id && !id_ok(id)) {
        invalid(out, NULL, SBXM_INVALID_REQUEST,
                "invalid request: \"id\" must be a string or an integer");
        return;
    }
    json_object *method = NULL;
    if (!json_object_object_get_ex(root, "method", &method)) {
        /* A response of the client's (we send no requests: ignored). */
        if (has_id && (json_object_object_get_ex(root, "result", NULL) ||
                       json_object_object_get_ex(root, "error", NULL))) {
            out->kind = SBXM_MSG_RESPONSE;
            out->id = id;
            return;
        }
        invalid(out, reply_id, SBXM_INVALID_REQUEST,
                "invalid request: \"method\" is missing");
        return;
    }
    if (!json_object_is_type(method, json_type_string) ||
        strlen(json_object_get_string(method)) != (size_t)json_object_get_string_len(method)) {
        invalid(out, reply_id, SBXM_INVALID_REQUEST,
                "invalid request: \"method\" must be a string (without NUL)");
        return;
    }
    json_object *params = NULL;
    if (json_object_object_get_ex(root, "params", &params) && params &&
        !json_object_is_type(params, json_type_object)) {
        invalid(out, reply_id, SBXM_INVALID_REQUEST,
                "invalid request: \"params\" must be an object");
        return;
    }
    out->method = json_object_get_string(method);
    out->params = params;
    if (has_id) {
        out->kind = SBXM_MSG_REQUEST;
        out->id = id;
    } else {
        out->kind = SBXM_MSG_NOTIFICATION;
    }
}

void sbxm_msg_free(struct sbxm_msg *m)
{
    json_object_put(m->root);
    json_object_put(m->error);
    memset(m, 0, sizeof *m);
}
