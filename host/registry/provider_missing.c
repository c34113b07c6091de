/*
 * provider_missing.c - the error for an enabled provider that is not
 * installed.
 *
 * A packaged provider's drop-in (/etc/sbx/conf.d/NAME.yaml) is a conffile:
 * removing the package (dpkg -r) leaves it, still enabling the provider,
 * and only a purge deletes it. The operator who sees the error must learn
 * both ways out: install the package again, or drop the section (purge).
 */
#include "registry/provider_missing.h"

#include <stdio.h>
#include <string.h>

#ifndef SBX_PROVIDER_PACKAGES
#define SBX_PROVIDER_PACKAGES ""
#endif

/* "name=package name=package ...", from the build. */
static const char packages[] = SBX_PROVIDER_PACKAGES;

const char *sbxh_provider_package(const char *name)
{
    static char found[128];
    size_t len = strlen(name);
    for (const char *p = packages; *p;) {
        const char *end = strchr(p, ' ');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n > len + 1 && strncmp(p, name, len) == 0 && p[len] == '=' &&
            n - len - 1 < sizeof found) {
            memcpy(found, p + len + 1, n - len - 1);
            found[n - len - 1] = '\0';
            return found;
        }
        p += n;
        while (*p == ' ')
            p++;
    }
    return NULL;
}

/* Whether file is <dir>/conf.d/<name>.yaml: the name of the drop-in a
 * package ships (the file may also be the operator's own: the advice
 * covers both). */
static bool is_package_dropin(const char *file, const char *name)
{
    const char *base = strrchr(file, '/');
    if (!base || base - file < 7 || strncmp(base - 7, "/conf.d", 7) != 0)
        return false;
    base++;
    size_t len = strlen(name);
    return strncmp(base, name, len) == 0 && strcmp(base + len, ".yaml") == 0;
}

int sbxh_provider_missing(const struct sbx_config_section *sec, const char *name,
                          sbx_error *err)
{
    /* Keep the loader's details ("no N.so in search path ...; installed
     * providers: ..."), without its "provider ... not installed:" head;
     * another NOT_FOUND (a dangling link) is kept whole. */
    static const char head[] = "not installed: ";
    char details[SBX_ERROR_MAX];
    const char *tail = strstr(err->message, head);
    snprintf(details, sizeof details, "%s", tail ? tail + strlen(head) : err->message);
    const char *pkg = sbxh_provider_package(name);
    char what[200];
    const char *state = tail ? "not installed" : "not usable";
    if (pkg)
        snprintf(what, sizeof what, "%s (package %s)", state, pkg);
    else
        snprintf(what, sizeof what, "%s", state);
    if (!sec)
        return sbx_error_set(err, SBX_E_NOT_FOUND, "provider \"%s\" is %s: %s", name,
                             what, details);

    char advice[512];
    if (pkg && is_package_dropin(sec->file, name))
        snprintf(advice, sizeof advice,
                 "install %s, or delete %s (if %s was removed, that is its drop-in, "
                 "which stays until the package is purged: dpkg --purge %s)",
                 pkg, sec->file, pkg, pkg);
    else if (pkg)
        snprintf(advice, sizeof advice,
                 "install %s, or remove the providers.%s section from %s", pkg, name,
                 sec->file);
    else
        snprintf(advice, sizeof advice,
                 "install %s.so into the plugin directory, or remove the "
                 "providers.%s section from %s",
                 name, name, sec->file);
    return sbx_error_set(err, SBX_E_NOT_FOUND, "provider \"%s\" is enabled in %s:%d but %s: %s; %s",
                         name, sec->file, sec->line, what, details, advice);
}
