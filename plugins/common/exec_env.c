/* exec_env.c - a command's environment as JSON (see exec_env.h). */
#include "exec_env.h"

#include <stdio.h>
#include <string.h>

void sbxp_exec_env_json(json_object *envs, const char *const *env)
{
    for (size_t i = 0; env && env[i]; i++) {
        const char *eq = strchr(env[i], '=');
        if (!eq)
            continue;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(eq - env[i]), env[i]);
        json_object_object_add(envs, name, json_object_new_string(eq + 1));
    }
}
