/*
 * archive_lazy.h - libarchive, loaded on first use (internal to libsbx).
 *
 * libarchive pulls in libxml2, ICU and the compressors: several
 * milliseconds on every start of every `sbx` command, although only
 * exports and skill bundles read archives. archive_lazy.c forwards the
 * functions archive_check.c uses to the library, dlopened when first needed.
 */
#ifndef SBX_HOST_ARCHIVE_LAZY_H
#define SBX_HOST_ARCHIVE_LAZY_H

#include <sbx/sbx.h>

/* The library loaded on first use (Debian: package libarchive13). */
#define SBX_LIBARCHIVE_SONAME "libarchive.so.13"

/* Load libarchive once per process (thread-safe). Returns SBX_OK, or
 * SBX_E_UNSUPPORTED with a message naming the library and dlerror(). */
int sbxh_archive_load(sbx_error *err);

#endif
