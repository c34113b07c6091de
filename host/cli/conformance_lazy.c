/* conformance_lazy.c - libsbx-conformance on first use; see
 * conformance_lazy.h. */
#include "conformance_lazy.h"

#include "cli.h"

#include <dlfcn.h>
#include <string.h>

/* dlsym into a function pointer (POSIX guarantees the conversion). */
static int resolve(void *lib, const char *name, void *slot, size_t size)
{
    void *sym = dlsym(lib, name);
    if (!sym) {
        cli_error("%s: no symbol %s: %s", CLI_CONFORMANCE_SONAME, name, dlerror());
        return -1;
    }
    memcpy(slot, &sym, size);
    return 0;
}

const struct cli_conformance *cli_conformance_load(void)
{
    static struct cli_conformance c;
    static int loaded;
    if (loaded)
        return &c;
    void *lib = dlopen(CLI_CONFORMANCE_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        cli_error("cannot load the conformance suite (%s): %s; install the package "
                  "libsbx-conformance0",
                  CLI_CONFORMANCE_SONAME, dlerror());
        return NULL;
    }
#define RESOLVE(field, name) resolve(lib, name, &c.field, sizeof c.field)
    if (RESOLVE(run, "sbx_conformance_run") || RESOLVE(exit_code, "sbx_conformance_exit_code") ||
        RESOLVE(case_count, "sbx_conformance_case_count") ||
        RESOLVE(case_name, "sbx_conformance_case_name") ||
        RESOLVE(case_description, "sbx_conformance_case_description") ||
        RESOLVE(case_caps, "sbx_conformance_case_caps")) {
        dlclose(lib);
        return NULL;
    }
#undef RESOLVE
    loaded = 1;
    return &c;
}
