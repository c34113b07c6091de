/* provider_config.c - a provider's configuration keys (see provider_config.h). */
#include "provider_config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

const char *sbxp_config_env(const struct sbx_host *host, const char *section, const char *key,
                            const char *var, char *buf, size_t cap, const char **name)
{
    const char *v = sbxp_config_get(host, key);
    if (v) {
        if (name) {
            snprintf(buf, cap, "providers.%s.%s", section, key);
            *name = buf;
        }
        return v;
    }
    const char *e = var ? getenv(var) : NULL;
    if (name)
        *name = var;
    return e && *e ? e : NULL;
}

static int want_int(const struct sbx_host *host, sbx_call *call, const char *name,
                    const char *what, int64_t min, int64_t max)
{
    return host->set_error(host, call, SBX_E_CONFIG, "%s: want %s from %lld to %lld", name,
                           what, (long long)min, (long long)max);
}

int sbxp_config_int_env(const struct sbx_host *host, sbx_call *call, const char *section,
                        const char *key, const char *var, int64_t def, int64_t min,
                        int64_t max, int64_t *out)
{
    if (sbxp_config_get(host, key))
        return sbxp_config_int(host, call, section, key, def, min, max, out);
    char buf[128];
    const char *name;
    const char *v = sbxp_config_env(host, section, key, var, buf, sizeof buf, &name);
    *out = def;
    if (!v)
        return SBX_OK;
    char *end;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (errno || end == v || *end || n < min || n > max)
        return want_int(host, call, name, "an integer", min, max);
    *out = n;
    return SBX_OK;
}

int sbxp_config_seconds_env(const struct sbx_host *host, sbx_call *call, const char *section,
                            const char *key, const char *var, int64_t def, int64_t min,
                            int64_t max, int64_t *out)
{
    if (sbxp_config_get(host, key))
        return sbxp_config_int(host, call, section, key, def, min, max, out);
    char buf[128];
    const char *name;
    const char *v = sbxp_config_env(host, section, key, var, buf, sizeof buf, &name);
    *out = def;
    if (!v)
        return SBX_OK;
    char *end;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    long long unit = !strcmp(end, "") || !strcmp(end, "s") ? 1
                     : !strcmp(end, "m")                    ? 60
                     : !strcmp(end, "h")                    ? 3600
                                                            : 0;
    if (errno || end == v || *v == '-' || *v == '+' || !unit || n > max / unit ||
        n * unit < min)
        return want_int(host, call, name, "a number of seconds (or with s, m or h)", min,
                        max);
    *out = n * unit;
    return SBX_OK;
}

int sbxp_config_bool_env(const struct sbx_host *host, sbx_call *call, const char *section,
                         const char *key, const char *var, int def, int *out)
{
    const char *c = sbxp_config_get(host, key);
    if (c) {
        *out = !strcmp(c, "true");
        return SBX_OK;
    }
    char buf[128];
    const char *name;
    const char *v = sbxp_config_env(host, section, key, var, buf, sizeof buf, &name);
    *out = def;
    if (!v)
        return SBX_OK;
    static const char *const yes[] = {"true", "1", "yes", "on"};
    static const char *const no[] = {"false", "0", "no", "off"};
    for (size_t i = 0; i < 4; i++) {
        if (!strcasecmp(v, yes[i])) {
            *out = 1;
            return SBX_OK;
        }
        if (!strcasecmp(v, no[i])) {
            *out = 0;
            return SBX_OK;
        }
    }
    return host->set_error(host, call, SBX_E_CONFIG,
                           "%s: want true or false (1/0, yes/no, on/off)", name);
}

int sbxp_config_url_env(const struct sbx_host *host, sbx_call *call, const char *section,
                        const char *key, const char *var, const char **out)
{
    char buf[128];
    const char *name;
    const char *v = sbxp_config_env(host, section, key, var, buf, sizeof buf, &name);
    *out = v;
    if (!v)
        return SBX_OK;
    const char *rest = !strncmp(v, "http://", 7) ? v + 7 : !strncmp(v, "https://", 8) ? v + 8 : NULL;
    int bad = !rest || !*rest || *rest == '/' || strlen(v) > 400;
    for (const char *p = v; !bad && *p; p++)
        if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f)
            bad = 1;
    if (bad)
        return host->set_error(host, call, SBX_E_CONFIG,
                               "%s: want a URL http://host[:port][/path] or https://... "
                               "without spaces",
                               name);
    return SBX_OK;
}
