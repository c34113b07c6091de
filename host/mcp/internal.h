/*
 * internal.h - what the server's own files share beyond mcp.h: the
 * JSON-RPC message parser (jsonrpc.c, I/O free so the fuzz harness drives
 * it), the schema check (schema.c), the handle table (handles.c) and the
 * server's hooks for the call threads (server.c).
 */
#ifndef SBX_MCP_INTERNAL_H
#define SBX_MCP_INTERNAL_H

#include "mcp.h"

#include <pthread.h>

/* JSON-RPC 2.0 error codes. */
#define SBXM_PARSE_ERROR (-32700)
#define SBXM_INVALID_REQUEST (-32600)
#define SBXM_METHOD_NOT_FOUND (-32601)
#define SBXM_INVALID_PARAMS (-32602)
#define SBXM_INTERNAL_ERROR (-32603)

/* The longest message line accepted (bytes, without the newline). */
#define SBXM_MAX_LINE ((size_t)16 << 20)

/* Nesting accepted in a message (json-c's tokener depth). */
#define SBXM_MAX_DEPTH 64

enum sbxm_msg_kind {
    SBXM_MSG_INVALID,      /* answer with msg.error (a response object) */
    SBXM_MSG_REQUEST,      /* method, id, params */
    SBXM_MSG_NOTIFICATION, /* method, params; never answered */
    SBXM_MSG_RESPONSE,     /* a client's result or error: ignored */
};

/* One classified message. root owns everything; id, params borrowed. */
struct sbxm_msg {
    enum sbxm_msg_kind kind;
    json_object *root;
    json_object *id;     /* string or integer; NULL for notifications */
    const char *method;  /* borrowed from root */
    json_object *params; /* an object, or NULL when absent */
    json_object *error;  /* INVALID: the whole error response to send */
};

/*
 * Parse and validate one line (len bytes, no newline; any bytes: NUL,
 * invalid UTF-8, deep nesting, trailing garbage). Never fails to classify:
 * out->kind is INVALID with out->error holding the -32700 or -32600
 * response (id null when none could be read) when the line is not a
 * JSON-RPC 2.0 request, notification or response. Free with
 * sbxm_msg_free.
 */
void sbxm_msg_parse(const char *line, size_t len, struct sbxm_msg *out);
void sbxm_msg_free(struct sbxm_msg *m);

/* {"jsonrpc":"2.0","id":id,"error":{"code":code,"message":message}};
 * id is taken (a new reference), NULL for null. */
json_object *sbxm_error_response(json_object *id, int code, const char *fmt, ...)
    SBX_PRINTF_LIKE(3, 4);
/* {"jsonrpc":"2.0","id":id,"result":result}; result is taken. */
json_object *sbxm_result_response(json_object *id, json_object *result);

/*
 * Check value against schema (the subset of JSON Schema the tools use:
 * type object/string/integer/number/boolean/array, properties, required,
 * additionalProperties false, enum, minimum, maximum, minLength,
 * maxLength, items). Returns true, or false with why naming the member
 * ("arguments.timeout_ms: expected an integer"). Bounded by the schema's
 * depth; never reads past what it is given.
 */
bool sbxm_schema_check(json_object *schema, json_object *value, const char *where,
                       char *why, size_t whylen);

/* ---- handles.c ----------------------------------------------------------- */

struct sbxm_handles;
struct sbxm_handle_ref; /* one borrowed handle, returned by the call's end */

int sbxm_handles_new(sbx_sessions *m, struct sbxm_handles **out);
/* Release every handle (no call may run). */
void sbxm_handles_free(struct sbxm_handles *t);
/* The handle of (key, user): user NULL is the session's own (its run_as).
 * *ref is the borrow to give back with sbxm_handles_put. */
int sbxm_handles_get(struct sbxm_handles *t, const char *key, const char *user,
                     sbx_cancel *cancel, sbx_handle **out, struct sbxm_handle_ref **ref,
                     sbx_error *err);
void sbxm_handles_put(struct sbxm_handles *t, struct sbxm_handle_ref *ref);
/* Keep h (acquired by create_sandbox) as the handle of (key, session's
 * user), borrowed by *ref (NULL when it was released instead: one was
 * already open, which *ref then borrows, or memory ran out). */
void sbxm_handles_adopt(struct sbxm_handles *t, const char *key, sbx_handle *h,
                        struct sbxm_handle_ref **ref);
/* Forget every handle of key (released once no call borrows it). */
void sbxm_handles_drop(struct sbxm_handles *t, const char *key);

/* ---- server.c and calls.c ------------------------------------------------ */

struct sbxm_call_slot; /* calls.c: one running tools/call */
struct sbxm_proc_entry;

struct sbxm_server {
    struct sbxm_options opts; /* a copy, snapshot_dir resolved */
    char *snapshot_dir;
    sbx_ctx *ctx;
    sbx_sessions *m;
    struct sbxm_handles *handles;
    const char *provider;
    int out_fd;
    pthread_mutex_t out_mu; /* one whole message at a time on out_fd */
    bool out_broken;        /* a write failed: the client is gone */
    /* the enabled tools, their parsed schemas and the tools/list array */
    const struct sbxm_tool **tools;
    json_object **schemas;
    size_t ntools;
    json_object *tools_list;
    /* lifecycle (reader thread only) */
    bool initialized;
    char protocol[16];
    /* running calls */
    pthread_mutex_t calls_mu;
    struct sbxm_call_slot *calls;
    unsigned running;
    bool closing; /* EOF: no response is sent any more */
    /* process cursors */
    pthread_mutex_t procs_mu;
    struct sbxm_proc_entry *procs;
    size_t nprocs;
};

/* Give the call a borrow it holds until its end (sbxm_handles_adopt). */
void sbxm_call_keep(struct sbxm_call *c, struct sbxm_handle_ref *ref);
/* Write one message (a line) to the client; takes msg. */
void sbxm_send(struct sbxm_server *srv, json_object *msg);
/* Handle a tools/call request (params already an object or NULL). */
void sbxm_call_start(struct sbxm_server *srv, json_object *id, json_object *params);
/* notifications/cancelled of request id. */
void sbxm_call_cancel(struct sbxm_server *srv, json_object *id);
/* Join the calls that finished; with all, fire every call's cancel first
 * and wait for all of them (EOF). */
void sbxm_calls_reap(struct sbxm_server *srv, bool all);

/* create_sandbox's work (tools_sandbox.c), with an inline manifest for the
 * sdk variant (tools_sdk.c); manifest_arg NULL: none. */
int sbxm_create_sandbox(struct sbxm_call *c, json_object *manifest_arg, json_object **result,
                        sbx_error *err);

/* ---- for the tools' files ---------------------------------------------------- */

sbx_ctx *sbxm_ctx(const struct sbxm_server *srv);
sbx_sessions *sbxm_sessions(const struct sbxm_server *srv);
/* The provider new sandboxes are made on (--provider, else the default). */
const char *sbxm_provider_name(const struct sbxm_server *srv);

/* Process cursors (tools_exec.c's continuation state), kept per server. */
struct sbxm_proc_state {
    uint64_t out_cursor, err_cursor;
    bool tty;
    char user[SBX_USER_NAME_MAX + 1];
};
/* Record / look up / forget the cursors of (sandbox, process id). */
int sbxm_proc_put(struct sbxm_server *srv, const char *sandbox, const char *id,
                  const struct sbxm_proc_state *st);
bool sbxm_proc_get(struct sbxm_server *srv, const char *sandbox, const char *id,
                   struct sbxm_proc_state *st);
void sbxm_proc_forget(struct sbxm_server *srv, const char *sandbox, const char *id);

#endif
