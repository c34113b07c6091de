/*
 * conformance_lazy.h - libsbx-conformance, loaded by `sbx conformance`
 * only.
 *
 * The suite's library links libcurl (its HTTP cases), whose dependency
 * chain (OpenSSL, Kerberos, LDAP, SSH, ...) is more than half of the
 * libraries a linked `sbx` loaded: every command paid for it at start-up
 * (5.1 ms of `sbx --version`, half of it in the dynamic loader; under
 * AddressSanitizer also LeakSanitizer's scan of their data at exit). The
 * package sbx still depends on libsbx-conformance0.
 */
#ifndef SBX_CLI_CONFORMANCE_LAZY_H
#define SBX_CLI_CONFORMANCE_LAZY_H

#include <sbx/conformance.h>

/* The library's functions the CLI calls (see sbx/conformance.h). */
struct cli_conformance {
    int (*run)(const struct sbx_options *open_opts,
               const struct sbx_conformance_options *opts,
               struct sbx_conformance_summary *summary, sbx_error *err);
    int (*exit_code)(int status, const struct sbx_conformance_summary *summary);
    size_t (*case_count)(void);
    const char *(*case_name)(size_t i);
    const char *(*case_description)(size_t i);
    uint64_t (*case_caps)(size_t i);
};

/* The soname dlopened (package libsbx-conformance0). */
#define CLI_CONFORMANCE_SONAME "libsbx-conformance.so.0"

/*
 * Load the library (once; it stays loaded) and resolve the functions.
 * Returns the table, or NULL after printing an error that names the
 * library, dlerror() and the package to install.
 */
const struct cli_conformance *cli_conformance_load(void);

#endif
