/* conformance_lazy.c - libsbx-conformance on first use; see
 * conformance_lazy.h. */
#include "conformance_lazy.h"

#include "lazy_open.h"

#define SYM(field, name) {name, &c.field, sizeof c.field}

const struct cli_conformance *cli_conformance_load(void)
{
    static struct cli_conformance c;
    static int loaded;
    if (loaded)
        return &c;
    const struct cli_lazy_sym syms[] = {
        SYM(run, "sbx_conformance_run"),
        SYM(exit_code, "sbx_conformance_exit_code"),
        SYM(case_count, "sbx_conformance_case_count"),
        SYM(case_name, "sbx_conformance_case_name"),
        SYM(case_description, "sbx_conformance_case_description"),
        SYM(case_caps, "sbx_conformance_case_caps"),
    };
    if (cli_lazy_open("sbx conformance", CLI_CONFORMANCE_SONAME, "libsbx-conformance0", syms,
                      sizeof syms / sizeof syms[0]) != 0)
        return NULL;
    loaded = 1;
    return &c;
}
