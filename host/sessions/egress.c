/*
 * egress.c - the egress policies of a limited-network spec: the
 * setup policy the sandbox is created with (the spec's allowlist, its
 * setup_allow and the registries of the package managers it names) and
 * the final one (the allowlist alone), applied before the binding is
 * published.
 */
#include "sessions/internal.h"

#include <stdlib.h>
#include <string.h>

/* Where each manager downloads from, allowed while packages install. */
static const char *const registries[][4] = {
    [SBX_PKG_APT] = {"deb.debian.org", "security.debian.org", "archive.ubuntu.com",
                     "security.ubuntu.com"},
    [SBX_PKG_CARGO] = {"crates.io", "index.crates.io", "static.crates.io", NULL},
    [SBX_PKG_GEM] = {"rubygems.org", "index.rubygems.org", NULL, NULL},
    [SBX_PKG_GO] = {"proxy.golang.org", "sum.golang.org", NULL, NULL},
    [SBX_PKG_NPM] = {"registry.npmjs.org", NULL, NULL, NULL},
    [SBX_PKG_PIP] = {"pypi.org", "files.pythonhosted.org", NULL, NULL},
};

/* A host name or "*.domain": lowercase letters, digits, '-' and '.'. */
static int check_target(const char *t, sbx_error *err)
{
    const char *p = t && !strncmp(t, "*.", 2) ? t + 2 : t;
    size_t n = p ? strlen(p) : 0;
    int ok = n > 0 && n <= 253 && p[0] != '.' && p[0] != '-' && p[n - 1] != '.' &&
             !strstr(p, "..");
    for (size_t i = 0; ok && i < n; i++)
        ok = (p[i] >= 'a' && p[i] <= 'z') || (p[i] >= '0' && p[i] <= '9') || p[i] == '-' ||
             p[i] == '.';
    if (!ok)
        return sbx_error_set(err, SBX_E_INVALID,
                             "allowed host '%s' is not a host name or *.domain (lowercase "
                             "letters, digits, '-' and '.')",
                             t ? t : "");
    return SBX_OK;
}

static void add(const char **v, size_t *n, const char *t)
{
    for (size_t i = 0; i < *n; i++)
        if (!strcmp(v[i], t))
            return;
    v[(*n)++] = t;
}

int sbxh_session_egress_init(struct sbx_session_egress *eg, const struct sbx_session_spec *spec,
                             sbx_error *err)
{
    memset(eg, 0, sizeof *eg);
    if (!spec || !spec->limited_network)
        return SBX_OK;
    size_t cap = spec->nallow + spec->nsetup_allow + 4 * spec->npackages + 1;
    eg->final_v = calloc(spec->nallow + 1, sizeof *eg->final_v);
    eg->setup_v = calloc(cap, sizeof *eg->setup_v);
    if (!eg->final_v || !eg->setup_v) {
        sbxh_session_egress_free(eg);
        return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    }
    size_t nf = 0, ns = 0;
    for (size_t i = 0; i < spec->nallow; i++) {
        int rc = check_target(spec->allow[i], err);
        if (rc != SBX_OK) {
            sbxh_session_egress_free(eg);
            return rc;
        }
        add(eg->final_v, &nf, spec->allow[i]);
        add(eg->setup_v, &ns, spec->allow[i]);
    }
    for (size_t i = 0; i < spec->nsetup_allow; i++) {
        int rc = check_target(spec->setup_allow[i], err);
        if (rc != SBX_OK) {
            sbxh_session_egress_free(eg);
            return rc;
        }
        add(eg->setup_v, &ns, spec->setup_allow[i]);
    }
    for (size_t i = 0; i < spec->npackages; i++) {
        int m = spec->packages[i].manager;
        if (m <= 0 || (size_t)m >= sizeof registries / sizeof registries[0])
            continue;
        for (size_t j = 0; j < 4 && registries[m][j]; j++)
            add(eg->setup_v, &ns, registries[m][j]);
    }
    eg->limited = true;
    eg->final.size = sizeof eg->final;
    eg->final.default_action = SBX_EGRESS_DENY;
    eg->final.allow = eg->final_v;
    eg->setup.size = sizeof eg->setup;
    eg->setup.default_action = SBX_EGRESS_DENY;
    eg->setup.allow = eg->setup_v;
    return SBX_OK;
}

void sbxh_session_egress_free(struct sbx_session_egress *eg)
{
    free(eg->final_v);
    free(eg->setup_v);
    memset(eg, 0, sizeof *eg);
}
