/*
 * tools_common.h - what the file, search and state tools share: the path
 * rule of a tool argument, bytes as JSON text, mode arguments, and tool
 * errors that name the tool, the path and the cause.
 */
#ifndef SBXM_TOOLS_COMMON_H
#define SBXM_TOOLS_COMMON_H

#include "mcp.h"

#include <stdbool.h>
#include <stddef.h>

/* Longest path argument a tool accepts (libsbx's own limit). */
#define SBXM_PATH_MAX 4096

/*
 * The workspace-relative form of a tool's path argument `key` into *out
 * (the caller frees it): a relative path, or an absolute one under the
 * workspace root (sbx_handle_root), with "." components and repeated '/'
 * dropped. "" is the root, accepted only when root_ok. Refused with
 * SBX_E_INVALID, naming the tool and the argument: a missing or empty
 * argument (unless root_ok), a NUL byte, a ".." component, an absolute
 * path outside the workspace, a path over SBXM_PATH_MAX. This is a
 * first, clear refusal; the provider still confines every operation
 * (symlinks never followed out).
 */
int sbxm_tool_path(struct sbxm_call *c, sbx_handle *h, const char *tool, const char *key,
                   bool root_ok, char **out, sbx_error *err);

/* The display form of a workspace-relative path ("." for the root). */
const char *sbxm_path_shown(const char *rel);

/* Join a workspace-relative directory and an entry name (caller frees;
 * NULL when out of memory). */
char *sbxm_path_join(const char *dir, const char *name);

/* A JSON string of n bytes: as they are when valid UTF-8, else with each
 * invalid byte replaced by U+FFFD (names on disk are bytes). */
json_object *sbxm_json_bytes(const char *s, size_t n);

/* The length of the longest prefix of the n bytes at s that ends on a
 * UTF-8 sequence boundary (an incomplete last sequence is left out). */
size_t sbxm_utf8_complete(const char *s, size_t n);

/*
 * A mode argument `key`: an octal string ("0644", "755") or an integer
 * (the bits' value, 420 for 0644), 1 to 0777. *mode is 0 when the
 * argument is absent. SBX_E_INVALID naming the tool otherwise.
 */
int sbxm_tool_mode(struct sbxm_call *c, const char *tool, const char *key, unsigned *mode,
                   sbx_error *err);

/*
 * Turn a failed operation's error into the tool's: "TOOL "PATH": cause"
 * with the operation's status (path NULL: "TOOL: cause"). cause may be
 * err itself. Returns the status.
 */
int sbxm_tool_fail(sbx_error *err, const char *tool, const char *path,
                   const sbx_error *cause);

/* Set a tool error from a format (after "TOOL "PATH": "). Returns status. */
int sbxm_tool_error(sbx_error *err, int status, const char *tool, const char *path,
                    const char *fmt, ...) SBX_PRINTF_LIKE(5, 6);

/* The type names of struct sbx_file_info (file, directory, symlink, other). */
const char *sbxm_file_type_name(unsigned type);

/* An entry or stat result as JSON: type, size, mode ("0644"), mtime (Unix
 * seconds, a number with the nanoseconds as fraction); name when not NULL. */
json_object *sbxm_file_info_json(const struct sbx_file_info *fi, const char *name);

/* The open handle of the call's "sandbox" argument (sbxm_handle), errors
 * naming the tool. */
int sbxm_tool_sandbox(struct sbxm_call *c, const char *tool, sbx_handle **h,
                      sbx_error *err);

/* The same, acting as `user` (NULL or "": the session's own user;
 * sbxm_handle_as). */
int sbxm_tool_handle_as(struct sbxm_call *c, const char *tool, const char *user,
                        sbx_handle **h, sbx_error *err);

#endif

