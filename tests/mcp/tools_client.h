/*
 * tools_client.h - a small MCP client for the file, search and state tool
 * tests: `sbx mcp` is spawned as an agent client does (stdio, one JSON
 * message per line, initialize first) in a private environment
 * (tests/cli/cli_harness.h), on the local provider, or on docker when
 * SBX_MCP_TEST_PROVIDER=docker (the test skips without
 * SBX_TEST_DOCKER_HOST).
 */
#ifndef SBX_TEST_MCP_TOOLS_CLIENT_H
#define SBX_TEST_MCP_TOOLS_CLIENT_H

#include "../cli/cli_harness.h"

#include <json-c/json.h>
#include <stdbool.h>

struct tc {
    struct cli_env env;
    struct cli_proc p;
    bool docker;
    char snapdir[PATH_MAX + 32]; /* --snapshot-dir */
    char ws[PATH_MAX + 80];  /* local: the workspace of TC_SANDBOX on the host */
    long next_id;
    bool sanitizer;          /* the server's stderr had a sanitizer report */
    char *buf;               /* the read buffer */
    size_t len, cap;
};

#define TC_SANDBOX "tools-s1"

/* Environment, a session TC_SANDBOX made with `sbx create`, the server
 * started (extra flags NULL-terminated, may be NULL) and initialized. */
void tc_start(struct tc *t, const char *const *extra);
/* Stop the server (EOF on stdin) and remove everything. */
void tc_stop(struct tc *t);

/* tools/call of tool with args (a JSON text, printf-style): the result
 * object (caller puts it). */
json_object *tc_call(struct tc *t, const char *tool, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The call must succeed: its structuredContent (owned by the returned root,
 * which is kept in *root for json_object_put). */
json_object *tc_ok(struct tc *t, json_object **root, const char *tool, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The call must be a tool error: its text (caller frees). */
char *tc_err(struct tc *t, const char *tool, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The call must be refused, as a tool error or as invalid params (-32602,
 * the server's schema check): the message (caller frees). */
char *tc_refused(struct tc *t, const char *tool, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Run `sh -c script` in the sandbox through `sbx exec` (setup and checks
 * that need the sandbox's view: symlinks, FIFOs). Returns the exit code;
 * stdout into out (may be NULL; caller frees). */
int tc_sh(struct tc *t, const char *script, char **out);

/* Members of structured results. */
const char *tc_str(json_object *o, const char *key);
long long tc_int(json_object *o, const char *key);
bool tc_bool(json_object *o, const char *key);

/* Peak resident memory of the server (VmHWM, KiB). */
long tc_server_hwm_kib(struct tc *t);

#endif
