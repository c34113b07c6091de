/*
 * manifest_load.c - loading a manifest (sbx/manifest.h): read, parse, check
 * with the grants of the trusted configuration; accessors.
 */
#include "api/ctx.h"
#include "config/config.h"
#include "config/manifest_internal.h"
#include "registry/provider.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* manifest.max_bytes: a size in bytes with an optional k, m or g (powers
 * of 1024); manifest.git_timeout: seconds, or a number with ms, s or m.
 * Decimal digits only. Returns the value, or -1 when malformed. */
static long long parse_limit(const char *s, bool duration)
{
    size_t digits = strspn(s, "0123456789");
    if (digits == 0 || digits > 12)
        return -1;
    long long v = strtoll(s, NULL, 10);
    const char *unit = s + digits;
    if (!duration) {
        if (!*unit)
            return v;
        if (unit[1])
            return -1;
        switch (*unit) {
        case 'k': case 'K': return v << 10;
        case 'm': case 'M': return v << 20;
        case 'g': case 'G': return v << 30;
        default: return -1;
        }
    }
    if (!*unit || !strcmp(unit, "s"))
        return v * 1000;
    if (!strcmp(unit, "ms"))
        return v;
    if (!strcmp(unit, "m"))
        return v * 60000;
    return -1;
}

int sbxh_manifest_config_check(const struct sbx_config *cfg, sbx_error *err)
{
    const struct sbx_config_section *sec = cfg ? cfg->manifest : NULL;
    for (size_t i = 0; sec && i < sec->count; i++) {
        const struct sbx_config_entry *e = &sec->entries[i];
        if (!strcmp(e->key, "grants") && e->node == SBX_NODE_SEQ)
            continue;
        if (!strncmp(e->key, "grants.", 7) && e->node == SBX_NODE_SCALAR &&
            strspn(e->key + 7, "0123456789") == strlen(e->key + 7)) {
            if (e->value[0] != '/')
                return sbx_error_set(err, SBX_E_CONFIG,
                                     "%s:%d: manifest.%s: a grant is an absolute "
                                     "directory",
                                     e->file, e->line, e->key);
            continue;
        }
        if (!strcmp(e->key, "max_bytes") || !strcmp(e->key, "git_timeout")) {
            bool duration = e->key[0] == 'g';
            if (e->node != SBX_NODE_SCALAR || parse_limit(e->value, duration) <= 0)
                return sbx_error_set(err, SBX_E_CONFIG,
                                     "%s:%d: manifest.%s: expected %s", e->file, e->line,
                                     e->key,
                                     duration ? "a positive number of seconds (or "
                                                "with ms, s, m)"
                                              : "a positive size in bytes (or with k, "
                                                "m, g)");
            continue;
        }
        if (!strcmp(e->key, "grants") || !strncmp(e->key, "grants.", 7))
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "%s:%d: manifest.grants: expected a list of absolute "
                                 "directories",
                                 e->file, e->line);
        return sbx_error_set(err, SBX_E_CONFIG,
                             "%s:%d: manifest.%s: unknown key (expected grants, "
                             "max_bytes, git_timeout)",
                             e->file, e->line, e->key);
    }
    return SBX_OK;
}

/* The configured grants, NULL-terminated (borrowed strings). */
static const char **grants_of(sbx_ctx *ctx)
{
    const struct sbx_config_section *sec = ctx ? ctx->config->manifest : NULL;
    size_t n = 0;
    while (sec && sbxh_config_section_entry(sec, "grants", n, NULL, NULL))
        n++;
    const char **g = calloc(n + 1, sizeof *g);
    for (size_t i = 0; g && i < n; i++)
        sbxh_config_section_entry(sec, "grants", i, NULL, &g[i]);
    return g;
}

/* The configured limit `key`, or def. */
static long long limit_of(sbx_ctx *ctx, const char *key, bool duration, long long def)
{
    const char *v = ctx ? sbxh_config_section_get(ctx->config->manifest, key) : NULL;
    long long n = v ? parse_limit(v, duration) : -1;
    return n > 0 ? n : def;
}

static int parse_manifest(sbx_ctx *ctx, const char *text, size_t len, const char *name,
                          const char *base_dir, sbx_cancel *cancel, sbx_manifest **out,
                          sbx_error *err)
{
    sbx_error_clear(err);
    if (!out || (!text && len))
        return sbx_error_set(err, SBX_E_INVALID, "manifest: no text or output");
    *out = NULL;
    struct sbx_manifest *m = calloc(1, sizeof *m);
    const char **grants = grants_of(ctx);
    if (!m || !grants || !(m->name = strdup(name ? name : "manifest"))) {
        free(m);
        free(grants);
        return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    }
    m->max_bytes = limit_of(ctx, "max_bytes", false, SBX_MANIFEST_MAX_BYTES_DEFAULT);
    m->git_timeout_ms = limit_of(ctx, "git_timeout", true,
                                 SBX_MANIFEST_GIT_TIMEOUT_MS_DEFAULT);
    int rc = sbxh_manifest_parse_text(m, text ? text : "", len, cancel, err);
    if (rc == SBX_OK)
        rc = sbxh_manifest_check(m, base_dir ? base_dir : ".", grants, err);
    free(grants);
    if (rc != SBX_OK) {
        sbx_manifest_free(m);
        return rc;
    }
    *out = m;
    return SBX_OK;
}

SBX_API int sbx_manifest_parse(sbx_ctx *ctx, const char *text, size_t len,
                               const char *name, const char *base_dir,
                               sbx_manifest **out, sbx_error *err)
{
    return parse_manifest(ctx, text, len, name, base_dir, NULL, out, err);
}

SBX_API int sbx_manifest_load(sbx_ctx *ctx, const char *path, const char *base_dir,
                              sbx_manifest **out, sbx_error *err)
{
    return sbx_manifest_load_cancel(ctx, path, base_dir, NULL, out, err);
}

SBX_API int sbx_manifest_load_cancel(sbx_ctx *ctx, const char *path, const char *base_dir,
                                     sbx_cancel *cancel, sbx_manifest **out,
                                     sbx_error *err)
{
    sbx_error_clear(err);
    if (!path || !out)
        return sbx_error_set(err, SBX_E_INVALID, "manifest: no file given");
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return sbx_error_set(err, e == ENOENT ? SBX_E_NOT_FOUND : SBX_E_IO,
                             "manifest %s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode) || st.st_size > SBX_MANIFEST_FILE_MAX) {
        close(fd);
        return sbx_error_set(err, SBX_E_INVALID,
                             "manifest %s: not a regular file of at most %d bytes", path,
                             SBX_MANIFEST_FILE_MAX);
    }
    size_t got = 0;
    char *text = sbxh_manifest_read_fd(fd, (size_t)st.st_size, &got);
    close(fd);
    if (!text)
        return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    if (got != (size_t)st.st_size) {
        free(text);
        return sbx_error_set(err, SBX_E_IO, "manifest %s: short read", path);
    }
    sbx_error_clear(err);
    int rc = parse_manifest(ctx, text, got, path, base_dir, cancel, out, err);
    free(text);
    return rc;
}

SBX_API const char *sbx_manifest_digest(const sbx_manifest *m)
{
    return m ? m->digest : NULL;
}

SBX_API bool sbx_manifest_has_users(const sbx_manifest *m)
{
    return m && (m->nusers || m->ngroups || m->run_as);
}

SBX_API const char *sbx_manifest_run_as(const sbx_manifest *m)
{
    return m ? m->run_as : NULL;
}

SBX_API const char *const *sbx_manifest_environment(const sbx_manifest *m)
{
    static const char *const none[] = {NULL};
    return m && m->env ? (const char *const *)m->env : none;
}

SBX_API void sbx_manifest_free(sbx_manifest *m)
{
    if (!m)
        return;
    sbxh_manifest_clear(m);
    free(m);
}
