/*
 * pq_lazy.h - libpq, loaded on first use (internal to libsbx).
 *
 * libsbx does not link libpq: its dependency chain (Kerberos, LDAP, SASL,
 * GnuTLS, ...) costs every `sbx` start several milliseconds, and most hosts
 * never use the PostgreSQL store. pq_lazy.c defines the libpq functions the
 * PostgreSQL store calls, with libpq's own signatures, as hidden forwarders
 * to the real library, which is dlopened the first time it is needed
 * (lazy_lib.c).
 */
#ifndef SBX_HOST_PQ_LAZY_H
#define SBX_HOST_PQ_LAZY_H

#include <sbx/sbx.h>

/* The library loaded on first use (Debian: package libpq5). */
#define SBX_LIBPQ_SONAME "libpq.so.5"

/*
 * Load libpq and resolve every function the store uses, once per process
 * (thread-safe). Call before any other libpq function. Returns SBX_OK, or
 * SBX_E_UNSUPPORTED with a message naming the library and dlerror() when it
 * is missing or lacks a symbol.
 */
int sbxh_pq_load(sbx_error *err);

#endif
