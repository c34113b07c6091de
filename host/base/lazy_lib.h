/*
 * lazy_lib.h - resolving a shared library's functions on first use
 * (internal to libsbx).
 *
 * libsbx links only what every command needs. Libraries whose dependency
 * chains cost each start several milliseconds and that only some paths use
 * (libpq for the PostgreSQL store, libarchive for exports and bundles) are
 * dlopened the first time they are needed; pq_lazy.c and archive_lazy.c
 * define hidden forwarders with the libraries' own prototypes.
 */
#ifndef SBX_HOST_LAZY_LIB_H
#define SBX_HOST_LAZY_LIB_H

#include <stddef.h>

/* One function to resolve: its name and the pointer that receives it. */
struct sbx_lazy_symbol {
    const char *name;
    void *slot;  /* address of a function pointer */
    size_t size; /* sizeof that pointer */
};

/*
 * dlopen `soname` (RTLD_NOW | RTLD_LOCAL) and resolve every symbol. On
 * failure writes into `failure` (cap bytes) a message naming the library,
 * what it is needed for (`purpose`, e.g. "the PostgreSQL store"), the Debian
 * package that provides it and dlerror(), and returns -1. The library stays
 * mapped for the life of the process.
 */
int sbxh_lazy_resolve(const char *soname, const char *package,
                      const char *purpose, const struct sbx_lazy_symbol *syms,
                      size_t count, char *failure, size_t cap);

#endif
