/*
 * provider_config.h - reading a provider's configuration keys (its
 * providers.<name> section) through the host table.
 */
#ifndef SBXP_PROVIDER_CONFIG_H
#define SBXP_PROVIDER_CONFIG_H

#include <sbx/provider.h>

#include <stdint.h>

/* The value of key in the provider's section, or NULL when it is not set
 * (or the host has no config_get). Borrowed from the host. */
const char *sbxp_config_get(const struct sbx_host *host, const char *key);

/*
 * An integer key: *out is def when the key is not set, else its value.
 * The host has already checked the type of a key declared SBX_CFG_INT;
 * this adds the range: a value that is not a whole number from min to max
 * is SBX_E_CONFIG on call, naming providers.<section>.<key> and the range.
 */
int sbxp_config_int(const struct sbx_host *host, sbx_call *call, const char *section,
                    const char *key, int64_t def, int64_t min, int64_t max, int64_t *out);

#endif /* SBXP_PROVIDER_CONFIG_H */
