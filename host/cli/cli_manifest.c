/* cli_manifest.c - the --manifest option of create, exec and run: loading
 * the file and merging its environment into the command's. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

int cli_manifest_load(sbx_ctx *ctx, const char *path, sbx_manifest **out)
{
    *out = NULL;
    if (!path)
        return SBX_OK;
    sbx_error err;
    int rc = sbx_manifest_load_cancel(ctx, path, NULL, cli_run_cancel(), out, &err);
    if (rc != SBX_OK && !cli_caught_signal())
        cli_error("%s", err.message);
    return rc;
}

const char **cli_manifest_env(const sbx_manifest *m, const struct cli_exec_options *eo)
{
    const char *const *menv = sbx_manifest_environment(m);
    size_t n = 0;
    while (menv[n])
        n++;
    const char **env = calloc(n + eo->nenv + 1, sizeof *env);
    if (!env)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        /* a -e of the same name replaces the manifest's */
        size_t name = strcspn(menv[i], "=");
        bool overridden = false;
        for (size_t j = 0; !overridden && j < eo->nenv; j++)
            overridden = !strncmp(eo->env[j], menv[i], name + 1);
        if (!overridden)
            env[k++] = menv[i];
    }
    for (size_t j = 0; j < eo->nenv; j++)
        env[k++] = eo->env[j];
    env[k] = NULL;
    return env;
}
