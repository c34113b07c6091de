/*
 * memory_api.c - the public memory-store calls (sbx/memory.h) over the
 * session manager's store (store/memory_trees.c).
 */
#include "store/memory_trees.h"
#include "sessions/internal.h"
#include "sessions/memory_hooks.h"
#include "base/struct_size.h"

#include <sbx/memory.h>
#include <sbx/provider.h>

#include <stdlib.h>
#include <string.h>

/* The author of changes made outside a session. */
#define EXTERNAL_AUTHOR "external"
/* The content of a put is read in pieces of this size. */
#define PUT_CHUNK (64 * 1024)

SBX_API int sbx_memory_create(sbx_sessions *m, const char *slug,
                              const struct sbx_memory_limits *limits, sbx_error *err)
{
    if (!m)
        return sbx_error_set(err, SBX_E_INVALID, "memory: no session manager");
    struct sbx_memory_limits given;
    if (limits && !sbx_struct_in(&given, sizeof given, limits, sizeof given.size))
        return sbx_error_set(err, SBX_E_INVALID,
                             "memory: struct sbx_memory_limits: size is not set");
    struct sbx_mstore_limits l = {0, 0, 0};
    if (limits) {
        l.max_file_bytes = given.max_file_bytes;
        l.max_files = given.max_files;
        l.max_total_bytes = given.max_total_bytes;
    }
    return sbxh_mstore_create(m->store, slug, &l, err);
}

SBX_API int sbx_memory_delete(sbx_sessions *m, const char *slug, sbx_error *err)
{
    if (!m)
        return sbx_error_set(err, SBX_E_INVALID, "memory: no session manager");
    return sbxh_mstore_delete(m->store, slug, err);
}

struct store_cb {
    sbx_memory_store_fn fn;
    void *ud;
};

static int each_store(void *ud, const struct sbx_mstore_info *in, sbx_error *err)
{
    struct store_cb *cb = ud;
    struct sbx_memory_info out = {
        .size = sizeof out,
        .slug = in->slug,
        .version = in->version,
        .files = in->files,
        .bytes = in->bytes,
        .created_at = in->created_at,
        .max_file_bytes = in->limits.max_file_bytes,
        .max_files = in->limits.max_files,
        .max_total_bytes = in->limits.max_total_bytes,
    };
    return cb->fn(cb->ud, &out) == 0
               ? SBX_OK
               : sbx_error_set(err, SBX_E_CANCELLED, "memory: the listing was stopped");
}

SBX_API int sbx_memory_list(sbx_sessions *m, sbx_memory_store_fn each, void *ud,
                            sbx_error *err)
{
    if (!m || !each)
        return sbx_error_set(err, SBX_E_INVALID, "memory: no manager or callback");
    struct store_cb cb = {each, ud};
    return sbxh_mstore_list(m->store, each_store, &cb, err);
}

struct file_cb {
    sbx_memory_file_fn fn;
    void *ud;
};

static int each_file(void *ud, const struct sbx_mstore_file *in, sbx_error *err)
{
    struct file_cb *cb = ud;
    struct sbx_memory_file out = {
        .size = sizeof out,
        .path = in->path,
        .version = in->version,
        .deleted = in->deleted,
        .sha256 = in->sha256,
        .file_size = in->size,
        .author = in->author,
        .created_at = in->created_at,
    };
    return cb->fn(cb->ud, &out) == 0
               ? SBX_OK
               : sbx_error_set(err, SBX_E_CANCELLED, "memory: the listing was stopped");
}

SBX_API int sbx_memory_ls(sbx_sessions *m, const char *slug, int64_t at,
                          sbx_memory_file_fn each, void *ud, sbx_error *err)
{
    if (!m || !each)
        return sbx_error_set(err, SBX_E_INVALID, "memory: no manager or callback");
    struct file_cb cb = {each, ud};
    return sbxh_mstore_heads(m->store, slug, at, each_file, &cb, err);
}

SBX_API int sbx_memory_log(sbx_sessions *m, const char *slug, const char *path,
                           sbx_memory_file_fn each, void *ud, sbx_error *err)
{
    if (!m || !each)
        return sbx_error_set(err, SBX_E_INVALID, "memory: no manager or callback");
    struct file_cb cb = {each, ud};
    return sbxh_mstore_log(m->store, slug, path, each_file, &cb, err);
}

SBX_API int sbx_memory_cat(sbx_sessions *m, const char *slug, const char *path,
                           int64_t at, const struct sbx_sink *sink, sbx_error *err)
{
    if (!m || !sink || sink->size < SBX_SINK_SIZE_1_0 || !sink->write)
        return sbx_error_set(err, SBX_E_INVALID, "memory: no manager or sink");
    return sbxh_mstore_read(m->store, slug, path, at, sink, NULL, err);
}

/* The content of a put, read from the caller's source up to the limit. */
struct put_content {
    unsigned char *data;
    size_t len;
};

static int load_put(void *ud, size_t index, const void **data, size_t *len,
                    sbx_error *err)
{
    (void)index;
    (void)err;
    struct put_content *p = ud;
    *data = p->data ? p->data : (const void *)"";
    *len = p->len;
    return SBX_OK;
}

/* Read all of src, refusing more than max bytes. */
static int read_source(const struct sbx_source *src, int64_t max, const char *path,
                       struct put_content *out, sbx_error *err)
{
    size_t cap = 0;
    for (;;) {
        if (out->len + PUT_CHUNK > cap) {
            size_t ncap = cap ? cap * 2 : PUT_CHUNK;
            unsigned char *n = realloc(out->data, ncap);
            if (!n)
                return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
            out->data = n;
            cap = ncap;
        }
        long got = src->read(src->ctx, out->data + out->len, PUT_CHUNK);
        if (got < 0)
            return sbx_error_set(err, SBX_E_IO, "memory: reading the content of \"%s\" "
                                                "failed", path);
        if (got == 0)
            return SBX_OK;
        out->len += (size_t)got;
        if ((int64_t)out->len > max)
            return sbx_error_set(err, SBX_E_INVALID,
                                 "memory: \"%s\": the file is too large (limit %lld)",
                                 path, (long long)max);
    }
}

static int change(sbx_sessions *m, const char *slug, const char *path,
                  const struct sbx_source *src, int64_t base, int64_t *version,
                  sbx_error *err)
{
    if (!m)
        return sbx_error_set(err, SBX_E_INVALID, "memory: no session manager");
    if (base < SBX_MEMORY_ANY_VERSION)
        return sbx_error_set(err, SBX_E_INVALID, "memory: base version %lld is negative",
                             (long long)base);
    struct sbx_mstore_info info;
    int rc = sbxh_mstore_check_path(path, err);
    if (rc == SBX_OK)
        rc = sbxh_mstore_info(m->store, slug, &info, err);
    struct put_content content = {NULL, 0};
    if (rc == SBX_OK && src)
        rc = read_source(src, info.limits.max_file_bytes, path, &content, err);
    if (rc == SBX_OK) {
        struct sbx_mstore_change ch = {path, base, src == NULL};
        struct sbx_mstore_commit c = {.slug = slug, .author = EXTERNAL_AUTHOR,
                                      .changes = &ch, .nchanges = 1, .load = load_put,
                                      .ud = &content};
        rc = sbxh_mstore_commit(m->store, &c, version, NULL, NULL, err);
    }
    free(content.data);
    return rc;
}

SBX_API int sbx_memory_put(sbx_sessions *m, const char *slug, const char *path,
                           const struct sbx_source *src, int64_t base,
                           int64_t *version, sbx_error *err)
{
    if (!src || src->size < SBX_SOURCE_SIZE_1_0 || !src->read)
        return sbx_error_set(err, SBX_E_INVALID, "memory: put needs a source");
    return change(m, slug, path, src, base, version, err);
}

SBX_API int sbx_memory_rm(sbx_sessions *m, const char *slug, const char *path,
                          int64_t base, int64_t *version, sbx_error *err)
{
    return change(m, slug, path, NULL, base, version, err);
}

SBX_API int sbx_memory_resolve(sbx_sessions *m, const char *session_key, const char *slug,
                               bool keep, sbx_error *err)
{
    sbx_error_clear(err);
    if (!m || !session_key || !*session_key)
        return sbx_error_set(err, SBX_E_INVALID, "memory: no session manager or key");
    int rc = sbxh_mstore_check_slug(slug, err);
    if (rc != SBX_OK)
        return rc;
    /* the checks, then a handle of the session, then the resolve: the
     * hooks do not attach (sessions/acquire.c calls them) */
    struct sbx_store_memory_row row;
    sbx_handle *h = NULL;
    rc = sbxh_session_memory_conflict(m, session_key, slug, &row, err);
    if (rc == SBX_OK)
        rc = sbx_session_attach(m, session_key, NULL, &h, err);
    if (rc == SBX_OK)
        rc = sbxh_session_memory_resolve(m, session_key, h, &row, keep, NULL, err);
    sbx_release(h);
    return rc;
}
