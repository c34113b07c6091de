/*
 * archive_lazy.c - forwarders to libarchive, which is loaded on first use.
 *
 * Each function below has libarchive's exact prototype (the compiler checks
 * it against <archive.h>) and calls the real one through a pointer resolved
 * the first time any of them, or sbxh_archive_load(), runs. Hidden, so they
 * never interpose on an application's own libarchive. The reading side that
 * archive_check.c uses and the writing side of snapshots are forwarded.
 */
#include "base/archive_lazy.h"

#include "base/lazy_lib.h"

#include <archive.h>
#include <archive_entry.h>
#include <pthread.h>
#include <stdbool.h>

static struct {
    struct archive * (*archive_read_new)(void);
    int (*archive_read_support_filter_gzip)(struct archive *a);
    int (*archive_read_support_format_tar)(struct archive *a);
    int (*archive_read_support_format_zip)(struct archive *a);
    int (*archive_read_open)(struct archive *a, void *client_data, archive_open_callback *opener, archive_read_callback *reader, archive_close_callback *closer);
    int (*archive_read_next_header)(struct archive *a, struct archive_entry **entry);
    la_ssize_t (*archive_read_data)(struct archive *a, void *buf, size_t len);
    int (*archive_read_free)(struct archive *a);
    const char * (*archive_error_string)(struct archive *a);
    __LA_MODE_T (*archive_entry_filetype)(struct archive_entry *e);
    const char * (*archive_entry_hardlink)(struct archive_entry *e);
    const char * (*archive_entry_pathname)(struct archive_entry *e);
    const char * (*archive_entry_pathname_utf8)(struct archive_entry *e);
    __LA_MODE_T (*archive_entry_perm)(struct archive_entry *e);
    la_int64_t (*archive_entry_size)(struct archive_entry *e);
    int (*archive_entry_size_is_set)(struct archive_entry *e);
    /* writing (snapshots) */
    int (*archive_read_support_filter_all)(struct archive *a);
    struct archive * (*archive_write_new)(void);
    int (*archive_write_set_format_pax_restricted)(struct archive *a);
    int (*archive_write_add_filter_gzip)(struct archive *a);
    int (*archive_write_add_filter_zstd)(struct archive *a);
    int (*archive_write_set_bytes_in_last_block)(struct archive *a, int bytes_in_last_block);
    int (*archive_write_set_bytes_per_block)(struct archive *a, int bytes_per_block);
    int (*archive_write_open_fd)(struct archive *a, int fd);
    int (*archive_write_open)(struct archive *a, void *client_data, archive_open_callback *opener, archive_write_callback *writer, archive_close_callback *closer);
    int (*archive_write_header)(struct archive *a, struct archive_entry *entry);
    la_ssize_t (*archive_write_data)(struct archive *a, const void *buf, size_t len);
    int (*archive_write_finish_entry)(struct archive *a);
    int (*archive_write_close)(struct archive *a);
    int (*archive_write_free)(struct archive *a);
    struct archive_entry * (*archive_entry_new)(void);
    void (*archive_entry_free)(struct archive_entry *e);
    struct archive_entry * (*archive_entry_clear)(struct archive_entry *e);
    void (*archive_entry_set_filetype)(struct archive_entry *e, unsigned int type);
    void (*archive_entry_set_perm)(struct archive_entry *e, __LA_MODE_T perm);
    void (*archive_entry_set_size)(struct archive_entry *e, la_int64_t size);
    void (*archive_entry_set_mtime)(struct archive_entry *e, time_t sec, long nsec);
    time_t (*archive_entry_mtime)(struct archive_entry *e);
    const char * (*archive_entry_hardlink_utf8)(struct archive_entry *e);
    const wchar_t * (*archive_entry_hardlink_w)(struct archive_entry *e);
    void (*archive_entry_copy_pathname)(struct archive_entry *e, const char *name);
    int (*archive_write_set_format_option)(struct archive *a, const char *m, const char *o, const char *v);
} fn;

#define SYMBOL(name) {#name, &fn.name, sizeof fn.name}
static const struct sbx_lazy_symbol symbols[] = {
    SYMBOL(archive_read_new),
    SYMBOL(archive_read_support_filter_gzip),
    SYMBOL(archive_read_support_format_tar),
    SYMBOL(archive_read_support_format_zip),
    SYMBOL(archive_read_open),
    SYMBOL(archive_read_next_header),
    SYMBOL(archive_read_data),
    SYMBOL(archive_read_free),
    SYMBOL(archive_error_string),
    SYMBOL(archive_entry_filetype),
    SYMBOL(archive_entry_hardlink),
    SYMBOL(archive_entry_pathname),
    SYMBOL(archive_entry_pathname_utf8),
    SYMBOL(archive_entry_perm),
    SYMBOL(archive_entry_size),
    SYMBOL(archive_entry_size_is_set),
    SYMBOL(archive_read_support_filter_all),
    SYMBOL(archive_write_new),
    SYMBOL(archive_write_set_format_pax_restricted),
    SYMBOL(archive_write_add_filter_gzip),
    SYMBOL(archive_write_add_filter_zstd),
    SYMBOL(archive_write_set_bytes_in_last_block),
    SYMBOL(archive_write_set_bytes_per_block),
    SYMBOL(archive_write_open_fd),
    SYMBOL(archive_write_open),
    SYMBOL(archive_write_header),
    SYMBOL(archive_write_data),
    SYMBOL(archive_write_finish_entry),
    SYMBOL(archive_write_close),
    SYMBOL(archive_write_free),
    SYMBOL(archive_entry_new),
    SYMBOL(archive_entry_free),
    SYMBOL(archive_entry_clear),
    SYMBOL(archive_entry_set_filetype),
    SYMBOL(archive_entry_set_perm),
    SYMBOL(archive_entry_set_size),
    SYMBOL(archive_entry_set_mtime),
    SYMBOL(archive_entry_mtime),
    SYMBOL(archive_entry_hardlink_utf8),
    SYMBOL(archive_entry_hardlink_w),
    SYMBOL(archive_entry_copy_pathname),
    SYMBOL(archive_write_set_format_option),
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char failure[512]; /* empty when loading succeeded */

static void load_once(void)
{
    sbxh_lazy_resolve(SBX_LIBARCHIVE_SONAME, "libarchive13", "reading and writing archives (exports, skill bundles, snapshots)", symbols,
                      sizeof symbols / sizeof symbols[0], failure, sizeof failure);
}

/* Called by every forwarder: false when the library could not be loaded.
 * Only the constructors (which then return NULL) can be reached that way by
 * code that skipped its load check: every other function takes an object
 * one of them made. Nothing aborts. */
static bool ensure_loaded(void)
{
    pthread_once(&once, load_once);
    return failure[0] == '\0';
}

int sbxh_archive_load(sbx_error *err)
{
    pthread_once(&once, load_once);
    if (failure[0])
        return sbx_error_set(err, SBX_E_UNSUPPORTED, "%s", failure);
    return SBX_OK;
}

struct archive *archive_read_new(void)
{
    if (!ensure_loaded())
        return NULL;
    return fn.archive_read_new();
}

int archive_read_support_filter_gzip(struct archive *a)
{
    if (!ensure_loaded())
        return -1;
    return fn.archive_read_support_filter_gzip(a);
}

int archive_read_support_format_tar(struct archive *a)
{
    if (!ensure_loaded())
        return -1;
    return fn.archive_read_support_format_tar(a);
}

int archive_read_support_format_zip(struct archive *a)
{
    if (!ensure_loaded())
        return -1;
    return fn.archive_read_support_format_zip(a);
}

int archive_read_open(struct archive *a, void *client_data, archive_open_callback *opener, archive_read_callback *reader, archive_close_callback *closer)
{
    if (!ensure_loaded())
        return -1;
    return fn.archive_read_open(a, client_data, opener, reader, closer);
}

int archive_read_next_header(struct archive *a, struct archive_entry **entry)
{
    if (!ensure_loaded())
        return -1;
    return fn.archive_read_next_header(a, entry);
}

la_ssize_t archive_read_data(struct archive *a, void *buf, size_t len)
{
    if (!ensure_loaded())
        return -1;
    return fn.archive_read_data(a, buf, len);
}

int archive_read_free(struct archive *a)
{
    if (!ensure_loaded())
        return -1;
    return fn.archive_read_free(a);
}

const char *archive_error_string(struct archive *a)
{
    if (!ensure_loaded())
        return NULL;
    return fn.archive_error_string(a);
}

__LA_MODE_T archive_entry_filetype(struct archive_entry *e)
{
    if (!ensure_loaded())
        return 0;
    return fn.archive_entry_filetype(e);
}

const char *archive_entry_hardlink(struct archive_entry *e)
{
    if (!ensure_loaded())
        return NULL;
    return fn.archive_entry_hardlink(e);
}

const char *archive_entry_pathname(struct archive_entry *e)
{
    if (!ensure_loaded())
        return NULL;
    return fn.archive_entry_pathname(e);
}

const char *archive_entry_pathname_utf8(struct archive_entry *e)
{
    if (!ensure_loaded())
        return NULL;
    return fn.archive_entry_pathname_utf8(e);
}

__LA_MODE_T archive_entry_perm(struct archive_entry *e)
{
    if (!ensure_loaded())
        return 0;
    return fn.archive_entry_perm(e);
}

la_int64_t archive_entry_size(struct archive_entry *e)
{
    if (!ensure_loaded())
        return 0;
    return fn.archive_entry_size(e);
}

int archive_entry_size_is_set(struct archive_entry *e)
{
    if (!ensure_loaded())
        return -1;
    return fn.archive_entry_size_is_set(e);
}

int archive_read_support_filter_all(struct archive *a)
{
    if (!ensure_loaded())
        return -1;
    return fn.archive_read_support_filter_all(a);
}

struct archive *archive_write_new(void)
{
    if (!ensure_loaded())
        return NULL;
    return fn.archive_write_new();
}

int archive_write_set_format_pax_restricted(struct archive *a)
{
    if (!ensure_loaded())
        return -1;
    return fn.archive_write_set_format_pax_restricted(a);
}

int archive_write_add_filter_gzip(struct archive *a)
{
    if (!ensure_loaded())
        return -1;
    return fn.archive_write_add_filter_gzip(a);
}

int archive_write_add_filter_zstd(struct archive *a)
{
    if (!ensure_loaded())
        return -1;
    return fn.archive_write_add_filter_zstd(a);
}

int archive_write_set_bytes_in_last_block(struct archive *a, int bytes_in_last_block)
{
    if (!ensure_loaded())
        return -1;
    return fn.archive_write_set_bytes_in_last_block(a, bytes_in_last_block);
}

int archive_write_open_fd(struct archive *a, int fd)
{
    if (!ensure_loaded())
        return -1;
    return fn.archive_write_open_fd(a, fd);
}

int archive_write_open(struct archive *a, void *client_data, archive_open_callback *opener, archive_write_callback *writer, archive_close_callback *closer)
{
    if (!ensure_loaded())
        return -1;
    return fn.archive_write_open(a, client_data, opener, writer, closer);
}

int archive_write_header(struct archive *a, struct archive_entry *entry)
{
    if (!ensure_loaded())
        return -1;
    return fn.archive_write_header(a, entry);
}

la_ssize_t archive_write_data(struct archive *a, const void *buf, size_t len)
{
    if (!ensure_loaded())
        return -1;
    return fn.archive_write_data(a, buf, len);
}

int archive_write_finish_entry(struct archive *a)
{
    if (!ensure_loaded())
        return -1;
    return fn.archive_write_finish_entry(a);
}

int archive_write_close(struct archive *a)
{
    if (!ensure_loaded())
        return -1;
    return fn.archive_write_close(a);
}

int archive_write_free(struct archive *a)
{
    if (!ensure_loaded())
        return -1;
    return fn.archive_write_free(a);
}

struct archive_entry *archive_entry_new(void)
{
    if (!ensure_loaded())
        return NULL;
    return fn.archive_entry_new();
}

void archive_entry_free(struct archive_entry *e)
{
    if (!ensure_loaded())
        return;
    fn.archive_entry_free(e);
}

void archive_entry_set_filetype(struct archive_entry *e, unsigned int type)
{
    if (!ensure_loaded())
        return;
    fn.archive_entry_set_filetype(e, type);
}

void archive_entry_set_perm(struct archive_entry *e, __LA_MODE_T perm)
{
    if (!ensure_loaded())
        return;
    fn.archive_entry_set_perm(e, perm);
}

void archive_entry_set_size(struct archive_entry *e, la_int64_t size)
{
    if (!ensure_loaded())
        return;
    fn.archive_entry_set_size(e, size);
}

void archive_entry_set_mtime(struct archive_entry *e, time_t sec, long nsec)
{
    if (!ensure_loaded())
        return;
    fn.archive_entry_set_mtime(e, sec, nsec);
}

time_t archive_entry_mtime(struct archive_entry *e)
{
    if (!ensure_loaded())
        return 0;
    return fn.archive_entry_mtime(e);
}

struct archive_entry *archive_entry_clear(struct archive_entry *e)
{
    if (!ensure_loaded())
        return NULL;
    return fn.archive_entry_clear(e);
}

int archive_write_set_bytes_per_block(struct archive *a, int bytes_per_block)
{
    if (!ensure_loaded())
        return -1;
    return fn.archive_write_set_bytes_per_block(a, bytes_per_block);
}

const char *archive_entry_hardlink_utf8(struct archive_entry *e)
{
    if (!ensure_loaded())
        return NULL;
    return fn.archive_entry_hardlink_utf8(e);
}

const wchar_t *archive_entry_hardlink_w(struct archive_entry *e)
{
    if (!ensure_loaded())
        return NULL;
    return fn.archive_entry_hardlink_w(e);
}

void archive_entry_copy_pathname(struct archive_entry *e, const char *name)
{
    if (!ensure_loaded())
        return;
    fn.archive_entry_copy_pathname(e, name);
}

int archive_write_set_format_option(struct archive *a, const char *m, const char *o,
                                    const char *v)
{
    if (!ensure_loaded())
        return -1;
    return fn.archive_write_set_format_option(a, m, o, v);
}
