/*
 * spec.c - session specs: package names, parsing "manager:name", declared
 * ports, and the spec hash recorded on bindings.
 */
#include "sessions/internal.h"
#include "base/struct_size.h"

#include <sbx/manifest.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A package name is passed as one argv element to the manager: it must be
 * non-empty, must not look like an option, and holds no control
 * characters or spaces. */
static int check_package(const struct sbx_package *pkg, sbx_error *err)
{
    const char *mgr = sbx_package_manager_name(pkg->manager);
    if (!mgr)
        return sbx_error_set(err, SBX_E_INVALID,
                             "package manager %d is unknown (expected apt, cargo, "
                             "gem, go, npm or pip)", pkg->manager);
    if (!pkg->name || !pkg->name[0])
        return sbx_error_set(err, SBX_E_INVALID, "%s package: the name is empty",
                             mgr);
    if (pkg->name[0] == '-')
        return sbx_error_set(err, SBX_E_INVALID,
                             "%s package '%s': a name must not start with '-'", mgr,
                             pkg->name);
    if (strlen(pkg->name) > 512)
        return sbx_error_set(err, SBX_E_INVALID,
                             "%s package: the name is longer than 512 bytes", mgr);
    for (const unsigned char *p = (const unsigned char *)pkg->name; *p; p++)
        if (*p <= ' ' || *p == 0x7f)
            return sbx_error_set(err, SBX_E_INVALID,
                                 "%s package '%s': blanks and control characters "
                                 "are not allowed in a name", mgr, pkg->name);
    return SBX_OK;
}

SBX_API int sbx_package_parse(const char *text, struct sbx_package *out,
                              sbx_error *err)
{
    sbx_error_clear(err);
    const char *colon = text ? strchr(text, ':') : NULL;
    if (!colon)
        return sbx_error_set(err, SBX_E_INVALID,
                             "package '%s' is not MANAGER:NAME (for example "
                             "pip:requests==2.31.0 or apt:curl)", text ? text : "");
    out->manager = 0;
    const char *mgr;
    for (int i = 1; (mgr = sbx_package_manager_name(i)) != NULL; i++)
        if (strlen(mgr) == (size_t)(colon - text) &&
            !memcmp(mgr, text, (size_t)(colon - text)))
            out->manager = i;
    out->name = colon + 1;
    if (!out->manager)
        return sbx_error_set(err, SBX_E_INVALID,
                             "package '%s': unknown manager '%.*s' (expected apt, "
                             "cargo, gem, go, npm or pip)",
                             text, (int)(colon - text), text);
    return check_package(out, err);
}

int sbxh_session_ports_check(const uint16_t *ports, size_t n, sbx_error *err)
{
    if (n > SBX_SESSION_PORTS_MAX)
        return sbx_error_set(err, SBX_E_INVALID,
                             "session spec: %zu ports declared, at most %d", n,
                             SBX_SESSION_PORTS_MAX);
    if (n && !ports)
        return sbx_error_set(err, SBX_E_INVALID, "session spec: nports without ports");
    for (size_t i = 0; i < n; i++) {
        if (!ports[i])
            return sbx_error_set(err, SBX_E_INVALID,
                                 "session spec: port 0 is not a TCP port (1 to 65535)");
        for (size_t k = 0; k < i; k++)
            if (ports[k] == ports[i])
                return sbx_error_set(err, SBX_E_INVALID,
                                     "session spec: port %u is declared twice",
                                     (unsigned)ports[i]);
    }
    return SBX_OK;
}

static int cmp_port(const void *a, const void *b)
{
    return (int)*(const uint16_t *)a - (int)*(const uint16_t *)b;
}

/* Canonical text: a version line, the capability bits, then one line per
 * package "manager name" in the order given (installation order is part of
 * what the sandbox looks like). */
int sbxh_session_spec_in(struct sbx_session_spec *copy, const struct sbx_session_spec **spec,
                         sbx_error *err)
{
    if (!*spec)
        return SBX_OK;
    if (!sbx_struct_in(copy, sizeof *copy, *spec,
                       offsetof(struct sbx_session_spec, npackages) +
                           sizeof copy->npackages))
        return sbx_error_set(err, SBX_E_INVALID, "session spec: size is not set");
    *spec = copy; /* members past the caller's size read as zero */
    return SBX_OK;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* "<word> <target>\n" per target, in strcmp order, at text + used; the new
 * used (>= len when out of memory). */
static size_t append_sorted(char *text, size_t len, size_t used, const char *word,
                            const char *const *v, size_t n)
{
    if (!n)
        return used;
    const char **copy = malloc(n * sizeof *copy);
    if (!copy)
        return len;
    for (size_t i = 0; i < n; i++)
        copy[i] = v[i] ? v[i] : "";
    qsort(copy, n, sizeof *copy, cmp_str);
    for (size_t i = 0; i < n && used < len; i++)
        used += (size_t)snprintf(text + used, len - used, "%s %s\n", word, copy[i]);
    free(copy);
    return used;
}

SBX_API int sbx_session_spec_hash(const struct sbx_session_spec *spec,
                                  char out[SBX_KEY_HASH_LEN + 1], sbx_error *err)
{
    sbx_error_clear(err);
    struct sbx_session_spec copy;
    int rc0 = sbxh_session_spec_in(&copy, &spec, err);
    if (rc0 != SBX_OK)
        return rc0;
    uint64_t caps = spec ? spec->caps : 0;
    size_t n = spec ? spec->npackages : 0;
    size_t nports = spec ? spec->nports : 0;
    int rcp = sbxh_session_ports_check(spec ? spec->ports : NULL, nports, err);
    if (rcp != SBX_OK)
        return rcp;
    size_t len = 96 + 80 + 16 + nports * 6; /* + the manifest and ports lines */
    if (spec)
        len += spec->nmemory * 80;
    if (spec && spec->limited_network) {
        for (size_t i = 0; i < spec->nallow; i++)
            len += (spec->allow[i] ? strlen(spec->allow[i]) : 0) + 8;
        for (size_t i = 0; i < spec->nsetup_allow; i++)
            len += (spec->setup_allow[i] ? strlen(spec->setup_allow[i]) : 0) + 16;
    }
    for (size_t i = 0; i < n; i++) {
        int rc = check_package(&spec->packages[i], err);
        if (rc != SBX_OK)
            return rc;
        len += strlen(spec->packages[i].name) + 16;
    }
    char *text = malloc(len);
    if (!text)
        return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    size_t used = (size_t)snprintf(text, len, "sbx-spec 1\ncaps %llx\n",
                                   (unsigned long long)caps);
    for (size_t i = 0; i < n; i++)
        used += (size_t)snprintf(text + used, len - used, "package %s %s\n",
                                 sbx_package_manager_name(spec->packages[i].manager),
                                 spec->packages[i].name);
    /* Only limited-network specs add lines: older hashes stay as they were.
     * An allowlist is a set: sorted, so that its order does not matter. */
    if (spec && spec->limited_network) {
        used += (size_t)snprintf(text + used, len - used, "network limited\n");
        used = append_sorted(text, len, used, "allow", spec->allow, spec->nallow);
        used = append_sorted(text, len, used, "setup-allow", spec->setup_allow,
                             spec->nsetup_allow);
        if (used >= len) {
            free(text);
            return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
        }
    }
    /* Only specs with a manifest add its line: older hashes stay. */
    if (spec && spec->manifest)
        used += (size_t)snprintf(text + used, len - used, "manifest %s\n",
                                 sbx_manifest_digest(spec->manifest));
    /* Only specs with memory add lines, sorted: a set. */
    if (spec && spec->nmemory && spec->memory) {
        const char **lines = calloc(spec->nmemory, sizeof *lines);
        char *buf = malloc(spec->nmemory * 80);
        if (!lines || !buf) {
            free(lines);
            free(buf);
            free(text);
            return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
        }
        for (size_t i = 0; i < spec->nmemory; i++) {
            snprintf(buf + i * 80, 80, "%.63s %s",
                     spec->memory[i].slug ? spec->memory[i].slug : "",
                     spec->memory[i].access == SBX_MEMORY_READ_WRITE ? "rw" : "ro");
            lines[i] = buf + i * 80;
        }
        used = append_sorted(text, len, used, "memory", lines, spec->nmemory);
        free(lines);
        free(buf);
        if (used >= len) {
            free(text);
            return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
        }
    }
    /* Only specs with ports add a line, ascending: a set. */
    if (nports) {
        uint16_t sorted[SBX_SESSION_PORTS_MAX];
        memcpy(sorted, spec->ports, nports * sizeof *sorted);
        qsort(sorted, nports, sizeof *sorted, cmp_port);
        used += (size_t)snprintf(text + used, len - used, "ports");
        for (size_t i = 0; i < nports && used < len; i++)
            used += (size_t)snprintf(text + used, len - used, " %u", (unsigned)sorted[i]);
        if (used < len)
            used += (size_t)snprintf(text + used, len - used, "\n");
        if (used >= len) {
            free(text);
            return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
        }
    }
    int rc = sbx_key_hash(text, out);
    free(text);
    if (rc != SBX_OK)
        return sbx_error_set(err, rc, "cannot hash the session spec (libcrypto failed)");
    return SBX_OK;
}
