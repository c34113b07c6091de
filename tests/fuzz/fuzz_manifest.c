/*
 * fuzz_manifest.c - the workspace manifest parser and checks on arbitrary
 * bytes (YAML or JSON). Every input must end in SBX_OK or SBX_E_INVALID /
 * SBX_E_NOMEM with a message; nothing may crash, leak or read out of
 * bounds. Local sources resolve under /nonexistent, so none is read.
 */
#include <sbx/manifest.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sbx_manifest *m = NULL;
    sbx_error err;
    sbx_error_clear(&err);
    int rc = sbx_manifest_parse(NULL, (const char *)data, size, "fuzz.yaml", "/", &m,
                                &err);
    if (rc == SBX_OK) {
        if (!m || strlen(sbx_manifest_digest(m)) != 64)
            abort();
        const char *const *env = sbx_manifest_environment(m);
        for (size_t i = 0; env[i]; i++)
            if (!strchr(env[i], '='))
                abort();
        sbx_manifest_free(m);
    } else if (m || !err.message[0]) {
        abort(); /* a failure always says why and returns nothing */
    }
    return 0;
}
