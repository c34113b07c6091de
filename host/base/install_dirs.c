/*
 * install_dirs.c - build-time install directories, or the same layout
 * relative to the library when the installed tree was relocated.
 */
#include "base/install_dirs.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef SBX_PROVIDER_DIR
#define SBX_PROVIDER_DIR "/usr/local/lib/sbx/providers"
#endif
#ifndef SBX_SYSCONF_DIR
#define SBX_SYSCONF_DIR "/usr/local/etc/sbx"
#endif
/* The configured library directory and the two directories relative to it
 * (set by host/CMakeLists.txt from GNUInstallDirs). */
#ifndef SBX_LIB_DIR
#define SBX_LIB_DIR "/usr/local/lib"
#endif
#ifndef SBX_PROVIDER_DIR_REL
#define SBX_PROVIDER_DIR_REL "sbx/providers"
#endif
#ifndef SBX_SYSCONF_DIR_REL
#define SBX_SYSCONF_DIR_REL "../etc/sbx"
#endif

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char provider_dir[PATH_MAX];
static char sysconf_dir[PATH_MAX];

/* The directory this code was loaded from, resolved, or "" when unknown. */
static void own_dir(char *out, size_t cap)
{
    Dl_info info;
    char resolved[PATH_MAX];
    out[0] = '\0';
    if (!dladdr((void *)own_dir, &info) || !info.dli_fname ||
        !realpath(info.dli_fname, resolved))
        return;
    char *slash = strrchr(resolved, '/');
    if (!slash)
        return;
    *slash = '\0';
    snprintf(out, cap, "%s", resolved[0] ? resolved : "/");
}

static void compute(void)
{
    snprintf(provider_dir, sizeof provider_dir, "%s", SBX_PROVIDER_DIR);
    snprintf(sysconf_dir, sizeof sysconf_dir, "%s", SBX_SYSCONF_DIR);
    char here[PATH_MAX], configured[PATH_MAX];
    own_dir(here, sizeof here);
    if (!here[0])
        return;
    /* Installed where it was configured to be (or that directory resolves
     * to the same place): the build-time paths are right. */
    if (realpath(SBX_LIB_DIR, configured) && strcmp(configured, here) == 0)
        return;
    /* Relocated only if the providers are where the layout says: a library
     * loaded from a build tree or copied alone keeps the configured paths. */
    char candidate[PATH_MAX];
    int n = snprintf(candidate, sizeof candidate, "%s/%s", here, SBX_PROVIDER_DIR_REL);
    char resolved[PATH_MAX];
    if (n < 0 || (size_t)n >= sizeof candidate || !realpath(candidate, resolved))
        return;
    snprintf(provider_dir, sizeof provider_dir, "%s", resolved);
    n = snprintf(candidate, sizeof candidate, "%s/%s", here, SBX_SYSCONF_DIR_REL);
    if (n > 0 && (size_t)n < sizeof candidate)
        snprintf(sysconf_dir, sizeof sysconf_dir, "%s", candidate);
}

const char *sbxh_install_provider_dir(void)
{
    pthread_once(&once, compute);
    return provider_dir;
}

const char *sbxh_install_sysconf_dir(void)
{
    pthread_once(&once, compute);
    return sysconf_dir;
}
