/* provider_config.c - a provider's configuration keys (see provider_config.h). */
#include "provider_config.h"

#include <errno.h>
#include <stdlib.h>

const char *sbxp_config_get(const struct sbx_host *host, const char *key)
{
    return host->config_get ? host->config_get(host, key) : NULL;
}

int sbxp_config_int(const struct sbx_host *host, sbx_call *call, const char *section,
                    const char *key, int64_t def, int64_t min, int64_t max, int64_t *out)
{
    const char *v = sbxp_config_get(host, key);
    *out = def;
    if (!v)
        return SBX_OK;
    char *end;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (errno || end == v || *end || n < min || n > max)
        return host->set_error(host, call, SBX_E_CONFIG,
                               "providers.%s.%s: want an integer from %lld to %lld", section,
                               key, (long long)min, (long long)max);
    *out = n;
    return SBX_OK;
}
