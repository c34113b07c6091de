/*
 * exec_env.h - a command's environment ("NAME=value" strings, as struct
 * sbx_exec_args carries it) as the JSON object of name to value that
 * envd and execd take.
 */
#ifndef SBXP_EXEC_ENV_H
#define SBXP_EXEC_ENV_H

#include <json-c/json.h>

/* Add each "NAME=value" of env (NULL-terminated, may be NULL) to envs as
 * NAME: "value"; a string without '=' is skipped, a name is cut at 255
 * bytes, a later NAME replaces an earlier one. */
void sbxp_exec_env_json(json_object *envs, const char *const *env);

#endif /* SBXP_EXEC_ENV_H */
