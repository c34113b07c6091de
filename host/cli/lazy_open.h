/*
 * lazy_open.h - a shared library the CLI loads only for the command that
 * needs it (conformance_lazy.c, mhd_lazy.c): every other command starts
 * without it and its dependency chain.
 */
#ifndef SBX_CLI_LAZY_OPEN_H
#define SBX_CLI_LAZY_OPEN_H

#include <stddef.h>

/* One function to resolve: its name and the function pointer it fills. */
struct cli_lazy_sym {
    const char *name;
    void *slot;  /* address of the function pointer */
    size_t size; /* sizeof the function pointer */
};

/*
 * dlopen soname (RTLD_NOW | RTLD_LOCAL; it stays loaded) and fill every
 * slot. Returns 0, or -1 after printing an error naming what needed it,
 * the library, dlerror() and the Debian package to install.
 */
int cli_lazy_open(const char *what, const char *soname, const char *package,
                  const struct cli_lazy_sym *syms, size_t n);

#endif
