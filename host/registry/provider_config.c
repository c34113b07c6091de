/*
 * provider_config.c - checking a provider section against the provider's
 * declared configuration keys, and rewriting typed values in canonical form.
 */
#include "config/config.h"
#include "config/provider_lifecycle.h"
#include "registry/loader.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Longest piece of a bad value quoted back in an error message. */
#define QUOTE_MAX 40

static const char *node_kind(int node)
{
    switch (node) {
    case SBX_NODE_MAP: return "a mapping";
    case SBX_NODE_SEQ: return "a list";
    default: return "a scalar";
    }
}

/* Decimal digits into *out (no sign), refusing values above max. Returns
 * the number of digits consumed, 0 for none, -1 on overflow. */
static int parse_digits(const char *s, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;
    int n = 0;
    for (; isdigit((unsigned char)s[n]); n++) {
        unsigned d = (unsigned)(s[n] - '0');
        if (v > (max - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return n;
}

/* "[+-]digits" fitting int64 into canonical decimal text. */
static int canon_int(const char *s, char *buf, size_t cap, const char **why)
{
    bool neg = false;
    if (*s == '+' || *s == '-')
        neg = *s++ == '-';
    uint64_t v = 0;
    /* The magnitude of INT64_MIN is one more than INT64_MAX. */
    int n = parse_digits(s, neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX,
                         &v);
    if (n < 0) {
        *why = "out of range for a 64-bit integer";
        return -1;
    }
    if (n == 0 || s[n] != '\0') {
        *why = "expected a decimal integer";
        return -1;
    }
    if (neg && v != 0)
        snprintf(buf, cap, "-%" PRIu64, v);
    else
        snprintf(buf, cap, "%" PRIu64, v);
    return 0;
}

/* "[+-]digits[.digits]" (no exponent); the leading '+' is dropped. */
static int canon_number(const char *s, char *buf, size_t cap, const char **why)
{
    const char *p = s;
    if (*p == '+' || *p == '-')
        p++;
    size_t ints = strspn(p, "0123456789");
    size_t frac = 0;
    if (ints > 0 && p[ints] == '.')
        frac = strspn(p + ints + 1, "0123456789");
    size_t used = ints + (frac ? frac + 1 : 0);
    if (ints == 0 || p[used] != '\0' || (p[ints] == '.' && frac == 0)) {
        *why = "expected a decimal number such as 2 or 0.5";
        return -1;
    }
    if (strlen(s) >= cap) {
        *why = "number too long";
        return -1;
    }
    snprintf(buf, cap, "%s", *s == '+' ? s + 1 : s);
    return 0;
}

static int canon_bool(const char *s, char *buf, size_t cap, const char **why)
{
    static const char *const yes[] = {"true", "yes", "on"};
    static const char *const no[] = {"false", "no", "off"};
    for (size_t i = 0; i < 3; i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            snprintf(buf, cap, "true");
            return 0;
        }
        if (strcasecmp(s, no[i]) == 0) {
            snprintf(buf, cap, "false");
            return 0;
        }
    }
    *why = "expected true/false, yes/no or on/off";
    return -1;
}

/* "digits[k|m|g|t][b]" (case-insensitive, powers of 1024) into bytes. */
static int canon_size(const char *s, char *buf, size_t cap, const char **why)
{
    uint64_t v = 0;
    int n = parse_digits(s, (uint64_t)INT64_MAX, &v);
    if (n < 0) {
        *why = "too large (at most 8 EiB - 1 bytes)";
        return -1;
    }
    const char *p = s + n;
    int shift = 0;
    switch (tolower((unsigned char)*p)) {
    case 'k': shift = 10; break;
    case 'm': shift = 20; break;
    case 'g': shift = 30; break;
    case 't': shift = 40; break;
    default: break;
    }
    if (shift)
        p++;
    if (*p == 'b' || *p == 'B')
        p++;
    if (n == 0 || *p != '\0') {
        *why = "expected a size such as 4096, 512k, 512m or 2g";
        return -1;
    }
    if (v > ((uint64_t)INT64_MAX >> shift)) {
        *why = "too large (at most 8 EiB - 1 bytes)";
        return -1;
    }
    snprintf(buf, cap, "%" PRIu64, v << shift);
    return 0;
}

static const char *type_name(int type)
{
    switch (type) {
    case SBX_CFG_STRING: return "a string";
    case SBX_CFG_INT: return "an integer";
    case SBX_CFG_BOOL: return "a boolean";
    case SBX_CFG_SIZE: return "a size";
    case SBX_CFG_MAP: return "a mapping";
    case SBX_CFG_LIST: return "a list";
    case SBX_CFG_NUMBER: return "a number";
    default: return "an unknown type";
    }
}

/* "a, b, c" of the declared keys into buf (truncated to fit). */
static void known_keys(const struct sbx_config_key *keys, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    const struct sbx_config_key *k;
    for (size_t i = 0; (k = sbxh_config_key_at(keys, i)) != NULL; i++) {
        int w = snprintf(buf + len, cap - len, "%s%s", i ? ", " : "", k->key);
        if (w < 0 || (size_t)w >= cap - len) {
            buf[len] = '\0';
            snprintf(buf + len, cap - len, len ? ", ..." : "...");
            return;
        }
        len += (size_t)w;
    }
}

static const struct sbx_config_key *find_key(const struct sbx_config_key *keys,
                                             const char *key)
{
    const struct sbx_config_key *k;
    for (size_t i = 0; (k = sbxh_config_key_at(keys, i)) != NULL; i++)
        if (strcmp(k->key, key) == 0)
            return k;
    return NULL;
}

/* Check one scalar entry of a typed key and rewrite it in canonical form. */
static int check_scalar(const struct sbx_config_section *sec,
                        struct sbx_config_entry *e, int type, sbx_error *err)
{
    char buf[128];
    const char *why = NULL;
    int bad;
    if (e->value[0] == '\0')
        return sbx_error_set(err, SBX_E_CONFIG,
                             "%s:%d: providers.%s.%s: expected %s, got an "
                             "empty value",
                             e->file, e->line, sec->name, e->key,
                             type_name(type));
    switch (type) {
    case SBX_CFG_STRING: return SBX_OK;
    case SBX_CFG_INT: bad = canon_int(e->value, buf, sizeof buf, &why); break;
    case SBX_CFG_NUMBER: bad = canon_number(e->value, buf, sizeof buf, &why); break;
    case SBX_CFG_BOOL: bad = canon_bool(e->value, buf, sizeof buf, &why); break;
    case SBX_CFG_SIZE: bad = canon_size(e->value, buf, sizeof buf, &why); break;
    default:
        return sbx_error_set(err, SBX_E_INTERNAL,
                             "providers.%s.%s: not a scalar type", sec->name,
                             e->key);
    }
    if (bad)
        return sbx_error_set(err, SBX_E_CONFIG,
                             "%s:%d: providers.%s.%s: %s, got \"%.*s%s\"",
                             e->file, e->line, sec->name, e->key, why,
                             QUOTE_MAX, e->value,
                             strlen(e->value) > QUOTE_MAX ? "..." : "");
    if (strcmp(buf, e->value) != 0) {
        char *canon = strdup(buf);
        if (!canon)
            return sbx_error_set(err, SBX_E_NOMEM, "configuration: out of memory");
        free(e->value);
        e->value = canon;
    }
    return SBX_OK;
}

int sbxh_config_check_section(struct sbx_config_section *sec,
                              const struct sbx_config_key *keys,
                              sbx_error *err)
{
    if (!sec)
        return SBX_OK;
    for (size_t i = 0; i < sec->count; i++) {
        struct sbx_config_entry *e = &sec->entries[i];
        /* Section keys never contain a dot (the loader refuses them), so a
         * dotted key is an element already covered by its MAP/SEQ entry. */
        if (strchr(e->key, '.'))
            continue;
        /* the host's own keys (idle eviction, quotas), in every section */
        if (sbxh_config_lifecycle_key(e->key)) {
            int rc = sbxh_config_lifecycle_check(sec->name, e, err);
            if (rc != SBX_OK)
                return rc;
            continue;
        }
        const struct sbx_config_key *k = find_key(keys, e->key);
        if (!k) {
            char list[512];
            known_keys(keys, list, sizeof list);
            if (list[0] == '\0')
                return sbx_error_set(err, SBX_E_CONFIG,
                                     "%s:%d: providers.%s.%s: unknown key (this "
                                     "provider takes no keys)",
                                     e->file, e->line, sec->name, e->key);
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "%s:%d: providers.%s.%s: unknown key (known: %s)",
                                 e->file, e->line, sec->name, e->key, list);
        }
        if (k->size >= SBX_CONFIG_KEY_SIZE_ENV_1_2 && (k->flags & SBX_CFG_F_SECRET))
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "%s:%d: providers.%s.%s: a credential is never read from "
                                 "the configuration: set %s in the environment",
                                 e->file, e->line, sec->name, e->key, k->env);
        int want;
        switch (k->type) {
        case SBX_CFG_MAP: want = SBX_NODE_MAP; break;
        case SBX_CFG_LIST: want = SBX_NODE_SEQ; break;
        case SBX_CFG_STRING:
        case SBX_CFG_INT:
        case SBX_CFG_BOOL:
        case SBX_CFG_SIZE:
        case SBX_CFG_NUMBER: want = SBX_NODE_SCALAR; break;
        default:
            return sbx_error_set(err, SBX_E_ABI,
                                 "providers.%s.%s: the provider declares an "
                                 "unknown type %d for this key",
                                 sec->name, e->key, k->type);
        }
        if (e->node != want)
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "%s:%d: providers.%s.%s: expected %s, got %s",
                                 e->file, e->line, sec->name, e->key,
                                 type_name(k->type),
                                 e->node == SBX_NODE_SCALAR && !e->value[0]
                                     ? "an empty value"
                                     : node_kind(e->node));
        if (want == SBX_NODE_SCALAR) {
            int rc = check_scalar(sec, e, k->type, err);
            if (rc)
                return rc;
        }
    }
    return SBX_OK;
}
