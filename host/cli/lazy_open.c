/* lazy_open.c - see lazy_open.h. */
#include "lazy_open.h"

#include "cli.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * soname from each directory of the program's own library search path
 * (its RUNPATH, LD_LIBRARY_PATH, the system's: dlinfo RTLD_DI_SERINFO).
 * dlopen by soname searches the RUNPATH of its caller, and under
 * AddressSanitizer the caller is the sanitizer's dlopen interceptor: the
 * build tree's library (found through sbx's RUNPATH) was not found there.
 */
static void *open_on_search_path(const char *soname)
{
    void *self = dlopen(NULL, RTLD_NOW);
    Dl_serinfo size;
    if (!self || dlinfo(self, RTLD_DI_SERINFOSIZE, &size) != 0)
        return NULL;
    Dl_serinfo *si = malloc(size.dls_size);
    void *lib = NULL;
    if (si && (memcpy(si, &size, sizeof size), dlinfo(self, RTLD_DI_SERINFOSIZE, si) == 0) &&
        dlinfo(self, RTLD_DI_SERINFO, si) == 0) {
        for (unsigned i = 0; i < si->dls_cnt && !lib; i++) {
            char path[4096];
            int len = snprintf(path, sizeof path, "%s/%s", si->dls_serpath[i].dls_name, soname);
            if (len > 0 && (size_t)len < sizeof path)
                lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        }
    }
    free(si);
    return lib;
}

int cli_lazy_open(const char *what, const char *soname, const char *package,
                  const struct cli_lazy_sym *syms, size_t n)
{
    void *lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        char why[512];
        snprintf(why, sizeof why, "%s", dlerror());
        lib = open_on_search_path(soname);
        if (!lib) {
            cli_error("%s needs %s, which cannot be loaded: %s; install the package %s",
                      what, soname, why, package);
            return -1;
        }
    }
    for (size_t i = 0; i < n; i++) {
        void *sym = dlsym(lib, syms[i].name);
        if (!sym) {
            cli_error("%s: %s has no symbol %s: %s", what, soname, syms[i].name, dlerror());
            dlclose(lib);
            return -1;
        }
        /* POSIX makes a function's address from dlsym usable this way */
        memcpy(syms[i].slot, &sym, syms[i].size);
    }
    return 0;
}
