/*
 * fuzz_mcp_message.c - what `sbx mcp` does with one line from a client
 * before any tool runs: the JSON-RPC parser and validator
 * (sbxm_msg_parse), then, for a message with params, the schema check of
 * its arguments against every tool's inputSchema and the manifest check
 * (sbxm_manifest_check, sbxm_manifest_from_arg). Every input must end in a
 * classified message or an error response naming a JSON-RPC code; nothing
 * may crash, leak, hang or read out of bounds.
 */
#include "mcp/internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_tools(const struct sbxm_tool *t, json_object *args)
{
    for (; t->name; t++) {
        json_object *schema = json_tokener_parse(t->input_schema);
        if (!schema)
            abort(); /* a table's schema always parses */
        char why[256];
        if (!sbxm_schema_check(schema, args, "arguments", why, sizeof why) && !why[0])
            abort(); /* a refusal always says why */
        json_object_put(schema);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sbxm_msg m;
    sbxm_msg_parse((const char *)data, size, &m);
    switch (m.kind) {
    case SBXM_MSG_INVALID: {
        json_object *e, *code;
        if (!json_object_object_get_ex(m.error, "error", &e) ||
            !json_object_object_get_ex(e, "code", &code))
            abort();
        int c = json_object_get_int(code);
        if (c != SBXM_PARSE_ERROR && c != SBXM_INVALID_REQUEST && c != SBXM_INTERNAL_ERROR)
            abort();
        if (!json_object_to_json_string(m.error))
            abort();
        break;
    }
    case SBXM_MSG_REQUEST:
    case SBXM_MSG_NOTIFICATION:
        if (!m.method || (m.params && !json_object_is_type(m.params, json_type_object)))
            abort();
        if (m.kind == SBXM_MSG_REQUEST && !m.id)
            abort();
        if (m.params) {
            json_object *args = NULL, *manifest = NULL;
            if (!json_object_object_get_ex(m.params, "arguments", &args))
                args = m.params;
            check_tools(sbxm_tools_sandbox, args);
            check_tools(sbxm_tools_exec, args);
            check_tools(sbxm_tools_sdk, args);
            if (json_object_is_type(args, json_type_object) &&
                json_object_object_get_ex(args, "manifest", &manifest)) {
                sbx_error err;
                sbx_manifest *mf = NULL;
                sbx_error_clear(&err);
                int rc = sbxm_manifest_from_arg(manifest, &mf, &err);
                if (rc == SBX_OK ? !mf : (mf || !err.message[0]))
                    abort();
                sbx_manifest_free(mf);
            }
        }
        break;
    case SBXM_MSG_RESPONSE:
        break;
    }
    sbxm_msg_free(&m);
    return 0;
}
