/*
 * provider_config.h - reading a provider's configuration keys (its
 * providers.<name> section) through the host table.
 */
#ifndef SBXP_PROVIDER_CONFIG_H
#define SBXP_PROVIDER_CONFIG_H

#include <sbx/provider.h>

#include <stddef.h>
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

/*
 * The services' own environment variables as fallbacks (ABI 1.2
 * SBX_CONFIG_KEY_ENV): the key's value from the configuration, else var's
 * when it is set and not empty (var may be NULL), else NULL. The host's
 * sbx_provider_config_origin follows the same rule, so `sbx check` shows
 * what the provider reads. *name (may be NULL) receives what to call the
 * value in an error: "providers.<section>.<key>" or the variable's name
 * (written into buf, cap bytes).
 */
const char *sbxp_config_env(const struct sbx_host *host, const char *section, const char *key,
                            const char *var, char *buf, size_t cap, const char **name);

/* sbxp_config_int with var as the fallback; a bad value from the
 * environment is SBX_E_CONFIG naming var and the range. */
int sbxp_config_int_env(const struct sbx_host *host, sbx_call *call, const char *section,
                        const char *key, const char *var, int64_t def, int64_t min,
                        int64_t max, int64_t *out);

/* A number of seconds: the key (an integer), else var, which may also
 * carry a unit as the services' tools write it: "300", "300s", "5m",
 * "2h". Out of min..max or not a number: SBX_E_CONFIG naming its source. */
int sbxp_config_seconds_env(const struct sbx_host *host, sbx_call *call, const char *section,
                            const char *key, const char *var, int64_t def, int64_t min,
                            int64_t max, int64_t *out);

/* A boolean: the key (true/false as the host wrote it), else var
 * (true/false, 1/0, yes/no, on/off, any case), else def. Anything else
 * in var is SBX_E_CONFIG naming it. */
int sbxp_config_bool_env(const struct sbx_host *host, sbx_call *call, const char *section,
                         const char *key, const char *var, int def, int *out);

/* A service URL from the key or var: http:// or https:// and a host,
 * without spaces; else SBX_E_CONFIG naming where it came from. NULL in
 * *out when neither is set. Borrowed. */
int sbxp_config_url_env(const struct sbx_host *host, sbx_call *call, const char *section,
                        const char *key, const char *var, const char **out);

#endif /* SBXP_PROVIDER_CONFIG_H */
