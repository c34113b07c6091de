/* lazy_lib.c - dlopen a library and resolve a table of its functions. */
#include "base/lazy_lib.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sbxh_lazy_resolve(const char *soname, const char *package,
                      const char *purpose, const struct sbx_lazy_symbol *syms,
                      size_t count, char *failure, size_t cap)
{
    void *lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        snprintf(failure, cap, "%s needs %s (Debian package %s): %s", purpose,
                 soname, package, why ? why : "cannot be loaded");
        return -1;
    }
    for (size_t i = 0; i < count; i++) {
        void *sym = dlsym(lib, syms[i].name);
        if (!sym) {
            const char *why = dlerror();
            snprintf(failure, cap, "%s needs %s from %s (Debian package %s): %s",
                     purpose, syms[i].name, soname, package,
                     why ? why : "no such symbol");
            return -1;
        }
        /* POSIX guarantees a dlsym result converts to a function pointer;
         * memcpy keeps that conversion within ISO C. */
        memcpy(syms[i].slot, &sym, syms[i].size);
    }
    return 0;
}
