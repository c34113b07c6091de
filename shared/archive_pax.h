/*
 * archive_pax.h - a libarchive writer for names that are bytes (shared by
 * host and plugins; symbols prefixed sbxs_).
 */
#ifndef SBX_SHARED_ARCHIVE_PAX_H
#define SBX_SHARED_ARCHIVE_PAX_H

struct archive;

/*
 * Make w (from archive_write_new, not yet opened) write restricted pax
 * whose names are raw bytes (hdrcharset=BINARY): set names with
 * archive_entry_copy_pathname / copy_symlink / copy_hardlink, never the
 * _utf8 or _w forms. libarchive otherwise converts a non-ASCII name
 * through the process's locale, which is "C" in a program that never
 * called setlocale (as a library and its plugins must not): the
 * conversion fails, and a name set only in its UTF-8 form made the pax
 * writer pass NULL to strlen. Returns ARCHIVE_OK or libarchive's error
 * (archive_error_string(w) says which).
 */
int sbxs_archive_write_pax_bytes(struct archive *w);

#endif
