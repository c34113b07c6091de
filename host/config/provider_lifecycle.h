/*
 * provider_lifecycle.h - host-level keys of a provider section
 * (idle_pause, idle_destroy, max_sandboxes; internal to libsbx).
 */
#ifndef SBX_HOST_PROVIDER_LIFECYCLE_H
#define SBX_HOST_PROVIDER_LIFECYCLE_H

#include <sbx/sbx.h>

#include <stdbool.h>
#include <stdint.h>

struct sbx_config;
struct sbx_config_entry;

/* What a provider section sets; 0 where unset. */
struct sbx_provider_lifecycle {
    int64_t idle_pause_ms;
    int64_t idle_destroy_ms;
    int64_t max_sandboxes;
};

/* Whether key is one of the host's keys (checked here, not against the
 * provider's declared keys). */
bool sbxh_config_lifecycle_key(const char *key);

/* Check an entry of such a key: SBX_E_CONFIG "file:line:
 * providers.<section>.<key>: ..." when malformed. */
int sbxh_config_lifecycle_check(const char *section, const struct sbx_config_entry *e,
                                sbx_error *err);

/* "90", "1.5s", "500ms", "30m", "2h", "1d" (no unit: seconds). */
bool sbxh_config_duration_ms(const char *text, int64_t *out);

/* The values for provider (all 0 when its section sets none). */
void sbxh_config_provider_lifecycle(const struct sbx_config *cfg, const char *provider,
                                    struct sbx_provider_lifecycle *out);

#endif
