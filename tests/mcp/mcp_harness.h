/*
 * mcp_harness.h - drive a spawned `sbx mcp` from criterion tests: a
 * private environment (tests/cli/cli_harness.h), JSON-RPC lines written to
 * its stdin, responses read from its stdout with a deadline, notifications
 * (progress) counted on the way.
 */
#ifndef SBX_TEST_MCP_HARNESS_H
#define SBX_TEST_MCP_HARNESS_H

#include "../cli/cli_harness.h"

#include <json-c/json.h>

struct mcp_client {
    struct cli_env env;
    struct cli_proc p;
    char *buf; /* bytes read and not yet returned as lines */
    size_t len, cap;
    int progress; /* notifications/progress seen so far */
    char err[1 << 16]; /* the server's stderr (its start), for sanitizer reports */
    size_t err_len;
    json_object *last_progress;
};

/* Start `sbx mcp ARGS...` (args NULL-terminated, may be NULL) on the local
 * provider with a private store; with docker, on the test daemon (skips
 * the test when SBX_TEST_DOCKER_HOST is unset). */
void mcp_start(struct mcp_client *c, const char *const *args);
void mcp_start_docker(struct mcp_client *c, const char *const *args);
/* Start without the initialize exchange. */
void mcp_start_raw(struct mcp_client *c, const char *const *args, bool docker);

/* Write bytes / one line (a newline is added) to the server. */
void mcp_write(struct mcp_client *c, const void *data, size_t len);
void mcp_send(struct mcp_client *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The next message (any), or NULL after timeout_ms or EOF. */
json_object *mcp_read(struct mcp_client *c, int timeout_ms);

/* The response with id (an integer), skipping (and counting) notifications
 * and other responses. NULL on timeout. */
json_object *mcp_wait(struct mcp_client *c, int id, int timeout_ms);

/* Send a request and wait for its response. */
json_object *mcp_request(struct mcp_client *c, int id, const char *method,
                         const char *params_json, int timeout_ms);

/* tools/call NAME with arguments (JSON text); returns the "result" member
 * (a new reference) or NULL when the response was an error (then *code is
 * its code, when code is not NULL). */
json_object *mcp_call(struct mcp_client *c, int id, const char *name, const char *args_json,
                      int timeout_ms, int *code);

/* The error code of a response (0 when it is a result). */
int mcp_error_code(json_object *resp);

/* A member of the result's structuredContent (borrowed), or NULL. */
json_object *mcp_sc(json_object *result, const char *key);
const char *mcp_sc_str(json_object *result, const char *key);
/* The text of a tool result's first content item (borrowed). */
const char *mcp_text(json_object *result);
bool mcp_is_error(json_object *result);

/* Close stdin and wait up to timeout_ms for the exit status (-1: hung,
 * killed). Fails the test when the server's stderr holds a sanitizer
 * report (the server is a child: ctest sees only the test's output).
 * Frees the environment. */
int mcp_stop(struct mcp_client *c, int timeout_ms);

#endif
