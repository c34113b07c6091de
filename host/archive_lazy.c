/*
 * archive_lazy.c - forwarders to libarchive, which is loaded on first use.
 *
 * Each function below has libarchive's exact prototype (the compiler checks
 * it against <archive.h>) and calls the real one through a pointer resolved
 * the first time any of them, or sbx_archive_load(), runs. Hidden, so they
 * never interpose on an application's own libarchive. Only the reading side
 * that archive_check.c uses is forwarded.
 */
#include "archive_lazy.h"

#include "lazy_lib.h"

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
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char failure[512]; /* empty when loading succeeded */

static void load_once(void)
{
    sbx_lazy_resolve(SBX_LIBARCHIVE_SONAME, "libarchive13", "reading archives (exports, skill bundles)", symbols,
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

int sbx_archive_load(sbx_error *err)
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
