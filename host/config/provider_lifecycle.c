/*
 * provider_lifecycle.c - the keys every provider section takes besides
 * the provider's own, read by the host rather than the plugin:
 * idle_pause and idle_destroy (durations: the idle evictor of the
 * reconciler, sessions/evict.c) and max_sandboxes (a positive integer:
 * admission, sessions/acquire.c). docs/CONFIG.md describes them.
 */
#include "config/config.h"
#include "config/provider_lifecycle.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool sbxh_config_lifecycle_key(const char *key)
{
    return !strcmp(key, "idle_pause") || !strcmp(key, "idle_destroy") ||
           !strcmp(key, "max_sandboxes");
}

bool sbxh_config_duration_ms(const char *text, int64_t *out)
{
    /* digits with an optional fraction, then a unit (none: seconds) */
    size_t whole = strspn(text, "0123456789");
    size_t frac = text[whole] == '.' ? strspn(text + whole + 1, "0123456789") : 0;
    if (whole == 0 || (text[whole] == '.' && frac == 0))
        return false;
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end != text + whole + (frac ? frac + 1 : 0) || errno == ERANGE || !isfinite(v))
        return false;
    double scale;
    if (!strcmp(end, "") || !strcmp(end, "s"))
        scale = 1000.0;
    else if (!strcmp(end, "ms"))
        scale = 1.0;
    else if (!strcmp(end, "m"))
        scale = 60000.0;
    else if (!strcmp(end, "h"))
        scale = 3600000.0;
    else if (!strcmp(end, "d"))
        scale = 86400000.0;
    else
        return false;
    double ms = v * scale;
    if (ms > 9.0e15)
        return false;
    *out = (int64_t)ms;
    if ((double)*out < ms)
        (*out)++;
    return true;
}

static bool positive_int(const char *text, int64_t *out)
{
    size_t n = strspn(text, "0123456789");
    if (n == 0 || n > 12 || text[n])
        return false;
    *out = strtoll(text, NULL, 10);
    return *out > 0;
}

int sbxh_config_lifecycle_check(const char *section, const struct sbx_config_entry *e,
                                sbx_error *err)
{
    int64_t v;
    if (e->node != SBX_NODE_SCALAR)
        return sbx_error_set(err, SBX_E_CONFIG, "%s:%d: providers.%s.%s: expected %s",
                             e->file, e->line, section, e->key,
                             strcmp(e->key, "max_sandboxes") ? "a duration"
                                                             : "a positive integer");
    if (!strcmp(e->key, "max_sandboxes")) {
        if (!positive_int(e->value, &v))
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "%s:%d: providers.%s.max_sandboxes: expected a positive "
                                 "integer, got \"%.40s\"",
                                 e->file, e->line, section, e->value);
        return SBX_OK;
    }
    if (!sbxh_config_duration_ms(e->value, &v) || v == 0)
        return sbx_error_set(err, SBX_E_CONFIG,
                             "%s:%d: providers.%s.%s: expected a positive duration such "
                             "as 90s, 30m, 2h, 1d, got \"%.40s\"",
                             e->file, e->line, section, e->key, e->value);
    return SBX_OK;
}

void sbxh_config_provider_lifecycle(const struct sbx_config *cfg, const char *provider,
                                    struct sbx_provider_lifecycle *out)
{
    memset(out, 0, sizeof *out);
    const struct sbx_config_section *sec = cfg ? sbxh_config_section(cfg, provider) : NULL;
    const char *v;
    if ((v = sbxh_config_section_get(sec, "idle_pause")) != NULL)
        sbxh_config_duration_ms(v, &out->idle_pause_ms);
    if ((v = sbxh_config_section_get(sec, "idle_destroy")) != NULL)
        sbxh_config_duration_ms(v, &out->idle_destroy_ms);
    if ((v = sbxh_config_section_get(sec, "max_sandboxes")) != NULL)
        positive_int(v, &out->max_sandboxes);
}
