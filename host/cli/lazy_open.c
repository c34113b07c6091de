/* lazy_open.c - see lazy_open.h. */
#include "lazy_open.h"

#include "cli.h"

#include <dlfcn.h>
#include <string.h>

int cli_lazy_open(const char *what, const char *soname, const char *package,
                  const struct cli_lazy_sym *syms, size_t n)
{
    void *lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        cli_error("%s needs %s, which cannot be loaded: %s; install the package %s", what,
                  soname, dlerror(), package);
        return -1;
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
