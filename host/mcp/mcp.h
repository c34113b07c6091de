/*
 * mcp.h - the MCP server behind `sbx mcp` (docs/MCP.md).
 *
 * JSON-RPC 2.0 over stdio, one message per line (the MCP stdio transport),
 * protocol revision 2025-11-25 (older revisions the client asks for are
 * accepted as the MCP lifecycle says). One long-lived process: sessions'
 * handles stay open between tool calls, so a call costs an operation.
 *
 * Trust model: the provider, the configuration, the session spec, the
 * snapshot directory and the set of tools come from the configuration file
 * and the command line (struct sbxm_options), never from a tool call. A
 * tool call names sandboxes (session keys), paths inside the workspace and
 * arguments of operations; it cannot name a host path, enable a provider or
 * widen a limit past the configured one.
 *
 * Built on the public headers (sbx/sbx.h, sbx/session.h, sbx/manifest.h)
 * alone, like the CLI. Symbols: sbxm_ (server), file-local static.
 */
#ifndef SBX_MCP_H
#define SBX_MCP_H

#include <sbx/manifest.h>
#include <sbx/sbx.h>
#include <sbx/session.h>

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Tool groups: --tools GROUP[,GROUP...] (default "agent"). */
#define SBXM_TOOLS_AGENT 0x1u /* the MCP tools every agent client gets */
#define SBXM_TOOLS_SDK 0x2u   /* extra tools the SDK client needs (manifests,
                                 users, snapshot transfer); docs/MCP.md */

/* What the operator decides (flags and sbx.yaml); borrowed by the server. */
struct sbxm_options {
    const char *config_path;  /* --config, NULL: the default search */
    const char *provider;     /* --provider, NULL: the configured default */
    const char *snapshot_dir; /* --snapshot-dir: where named snapshots live;
                                 NULL: <state dir>/mcp-snapshots */
    unsigned tools;           /* SBXM_TOOLS_* */
    size_t max_read_bytes;    /* read_file/ snapshot_read cap, default 1 MiB */
    size_t max_write_bytes;   /* write_file cap, default 16 MiB */
    size_t max_output_bytes;  /* exec_command/write_stdin cap, default 1 MiB */
    unsigned max_calls;       /* tool calls running at once, default 16 */
};

/* Serve MCP on in_fd/out_fd until EOF on in_fd (or a fatal write error).
 * Returns 0 after a clean end, nonzero after a fatal one (message on
 * stderr). Never exits the process; stderr is the log. */
int sbxm_serve(const struct sbxm_options *opts, int in_fd, int out_fd);

/* ---- internals shared by the server's files ---------------------------- */

struct sbxm_server; /* options, sbx_ctx, sbx_sessions, open handles, tools */

/* One tools/call, served on its own thread. */
struct sbxm_call {
    struct sbxm_server *srv;
    json_object *args;           /* the call's "arguments" (an object; borrowed) */
    sbx_cancel *cancel;          /* fired by notifications/cancelled and at EOF */
    json_object *progress_token; /* NULL when the client asked for no progress */
};

/* Send notifications/progress for the call (no-op without a token). */
void sbxm_progress(struct sbxm_call *c, double progress, double total, const char *message);

/*
 * The open handle of sandbox `name` (a session key): opened on first use
 * (sbx_session_attach) and kept until destroy_sandbox or the end. Borrowed:
 * valid until the call returns. SBX_E_NOT_FOUND naming the sandbox when it
 * has no session.
 */
int sbxm_handle(struct sbxm_call *c, const char *name, sbx_handle **out, sbx_error *err);

/* The same, acting as `user` (a tool's `user` argument; NULL or "": as
 * sbxm_handle, i.e. the session's run_as or the sandbox's default). One
 * handle per (sandbox, user) is kept. */
int sbxm_handle_as(struct sbxm_call *c, const char *name, const char *user,
                   sbx_handle **out, sbx_error *err);

/*
 * A manifest given in a tool call (create_sandbox, apply_manifest: a JSON
 * object in sbx's manifest format, docs/MANIFEST.md). sbxm_manifest_check
 * refuses, before anything parses it, what only the operator may use:
 * entries other than `file` and `dir` (local_file, local_dir and git_repo
 * read the host), keys naming host sources (`source`, `url`, `ref`) and
 * members the format does not have; SBX_E_INVALID naming the entry.
 * sbxm_manifest_from_arg checks, then parses it with no grants and no
 * base directory (sbx_manifest_parse): *out is freed with
 * sbx_manifest_free.
 */
int sbxm_manifest_check(json_object *manifest, sbx_error *err);
int sbxm_manifest_from_arg(json_object *manifest, sbx_manifest **out, sbx_error *err);

/* Whether the call was cancelled (notifications/cancelled, or the end). */
bool sbxm_cancelled(const struct sbxm_call *c);

/*
 * A tool. run() fills *result with the structured content (an object the
 * server owns afterwards; it is also sent as the text content) and returns
 * SBX_OK, or returns an SBX_E_* status with err set: the server turns it
 * into a tool error (isError, the message as text). Arguments are checked
 * against input_schema's required members and types by the server before
 * run(); run() checks values (ranges, paths).
 */
typedef int (*sbxm_tool_fn)(struct sbxm_call *c, json_object **result, sbx_error *err);

struct sbxm_tool {
    const char *name;
    const char *title;
    const char *description;
    const char *input_schema;  /* JSON Schema text (an object schema) */
    const char *output_schema; /* JSON Schema text, or NULL */
    unsigned group;            /* SBXM_TOOLS_* */
    bool read_only;            /* annotations.readOnlyHint */
    sbxm_tool_fn run;
};

/* Tables, each ended by an entry with name NULL (one per tools_*.c). */
extern const struct sbxm_tool sbxm_tools_sandbox[]; /* tools_sandbox.c */
extern const struct sbxm_tool sbxm_tools_exec[];    /* tools_exec.c */
extern const struct sbxm_tool sbxm_tools_files[];   /* tools_files.c */
extern const struct sbxm_tool sbxm_tools_search[];  /* tools_search.c: search, git_clone */
extern const struct sbxm_tool sbxm_tools_state[];   /* tools_state.c: snapshot, restore,
                                                       snapshot_read/_write, port_url */
extern const struct sbxm_tool sbxm_tools_sdk[];     /* tools_sdk.c: apply_manifest,
                                                       add_user, create_sandbox with
                                                       a manifest */
/* The server enables, in the table order above, each entry of a group
 * --tools names; an entry whose name is already enabled replaces it (a
 * group's variant of a tool). Every input_schema must be a closed object
 * schema ("type": "object", "additionalProperties": false): the server
 * refuses to start otherwise. */

/* Argument helpers (NULL / default when absent; the schema check already
 * rejected a wrong type). */
const char *sbxm_arg_str(const struct sbxm_call *c, const char *key);
int64_t sbxm_arg_int(const struct sbxm_call *c, const char *key, int64_t dflt);
bool sbxm_arg_bool(const struct sbxm_call *c, const char *key, bool dflt);

/* Bytes (command output, file text) as a JSON string: valid UTF-8 as it
 * is, each byte of an invalid sequence and each NUL as U+FFFD (counted in
 * *replaced, which may be NULL). NULL when out of memory. */
json_object *sbxm_text_value(const void *data, size_t n, size_t *replaced);

/* The operator's options of the server (limits, snapshot dir, tools). */
const struct sbxm_options *sbxm_options(const struct sbxm_server *srv);

#endif
