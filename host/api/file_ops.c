/*
 * file_ops.c - the consumer API of SBX_CAP_FILE_OPS: list, stat, mkdir,
 * remove and rename in the workspace.
 *
 * The provider confines the paths; libsbx refuses what no provider should
 * see (a NUL-less overlong path, unknown flags, mode bits outside 0777)
 * and checks the names a listing reports, so a caller joining them to the
 * directory's path can never be led out of it by a name with a '/'.
 */
#include "api/cap_call.h"
#include "api/handle.h"
#include "api/handle_user.h"
#include "base/struct_size.h"
#include "registry/call.h"
#include "registry/provider.h"

#include <stdio.h>
#include <string.h>

/* Longest workspace-relative path libsbx passes on. */
#define FILE_PATH_MAX 4096

static int path_ok(const char *path, const char *op, bool root_ok, sbx_error *err)
{
    const char *p = path ? path : "";
    if (!root_ok && (!*p || !strcmp(p, ".")))
        return sbx_error_set(err, SBX_E_INVALID, "%s: the workspace root itself", op);
    if (strnlen(p, FILE_PATH_MAX) >= FILE_PATH_MAX)
        return sbx_error_set(err, SBX_E_INVALID, "%s: a path of %d bytes or more", op,
                             FILE_PATH_MAX);
    return SBX_OK;
}

static int file_begin(sbx_handle *h, const char *path, const char *op, bool root_ok,
                      sbx_cancel *cancel, sbx_error *err)
{
    int rc = sbxh_cap_call_begin(h, SBX_CAP_FILE_OPS, cancel, err);
    return rc != SBX_OK ? rc : path_ok(path, op, root_ok, err);
}

static bool info_ok(const struct sbx_file_info *info, bool named)
{
    if (!info || sbx_struct_size(info) < offsetof(struct sbx_file_info, mtime_ns) +
                                             sizeof info->mtime_ns)
        return false;
    if (info->type < SBX_FILE_REGULAR || info->type > SBX_FILE_OTHER ||
        (info->mode & ~07777u))
        return false;
    if (!named)
        return true;
    const char *n = info->name;
    return n && *n && strcmp(n, ".") && strcmp(n, "..") && !strchr(n, '/');
}

/* Checks each entry the provider lists before the caller sees it. */
struct checked_entries {
    struct sbx_file_list_sink sink;
    const struct sbx_file_list_sink *inner;
    const char *provider;
    sbx_error *err;
};

static int checked_entry(void *ctx, const struct sbx_file_info *info)
{
    struct checked_entries *c = ctx;
    if (!info_ok(info, true))
        return sbx_error_set(c->err, SBX_E_PROTOCOL,
                             "provider \"%s\": file_list gave a malformed entry (a name "
                             "that is empty, \".\", \"..\" or holds '/', or a bad type "
                             "or mode)",
                             c->provider);
    return c->inner->entry(c->inner->ctx, info);
}

SBX_API int sbx_file_list(sbx_handle *h, const char *path,
                          const struct sbx_file_list_sink *sink, sbx_cancel *cancel,
                          sbx_error *err)
{
    int rc = file_begin(h, path, "file_list", true, cancel, err);
    if (rc != SBX_OK)
        return rc;
    if (!sink || sbx_struct_size(sink) < offsetof(struct sbx_file_list_sink, entry) +
                                             sizeof sink->entry ||
        !sink->entry)
        return sbx_error_set(err, SBX_E_INVALID,
                             "file_list: no struct sbx_file_list_sink, or its size or "
                             "entry is not set");
    struct sbx_call call;
    sbxh_call_begin(&call, err, cancel);
    call.user = sbxh_acting_user(h, SBX_AS_HANDLE);
    struct checked_entries c = {
        .sink = {sizeof c.sink, &c, checked_entry},
        .inner = sink,
        .provider = h->provider->plugin.name,
        .err = call.err,
    };
    rc = SBX_PROVIDER_OP(h->provider, file_list)(h->sb, &call, path ? path : "", &c.sink);
    return sbxh_call_end(&call, rc, h->provider->plugin.name, "file_list");
}

SBX_API int sbx_file_stat(sbx_handle *h, const char *path, struct sbx_file_info *out,
                          sbx_cancel *cancel, sbx_error *err)
{
    int rc = file_begin(h, path, "file_stat", true, cancel, err);
    if (rc != SBX_OK)
        return rc;
    if (!out || sbx_struct_size(out) < offsetof(struct sbx_file_info, mtime_ns) +
                                           sizeof out->mtime_ns)
        return sbx_error_set(err, SBX_E_INVALID,
                             "file_stat: no struct sbx_file_info, or its size is not set");
    struct sbx_file_info st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    struct sbx_call call;
    sbxh_call_begin(&call, err, cancel);
    call.user = sbxh_acting_user(h, SBX_AS_HANDLE);
    rc = SBX_PROVIDER_OP(h->provider, file_stat)(h->sb, &call, path ? path : "", &st);
    rc = sbxh_call_end(&call, rc, h->provider->plugin.name, "file_stat");
    if (rc != SBX_OK)
        return rc;
    st.name = NULL;
    if (!info_ok(&st, false))
        return sbx_error_set(err, SBX_E_PROTOCOL,
                             "provider \"%s\": file_stat reported a bad type or mode",
                             h->provider->plugin.name);
    sbx_struct_out(out, &st, sizeof st);
    return SBX_OK;
}

SBX_API int sbx_file_mkdir(sbx_handle *h, const char *path, unsigned mode, uint32_t flags,
                           sbx_cancel *cancel, sbx_error *err)
{
    int rc = file_begin(h, path, "file_mkdir", false, cancel, err);
    if (rc != SBX_OK)
        return rc;
    if ((mode & ~0777u) || (flags & ~SBX_MKDIR_PARENTS))
        return sbx_error_set(err, SBX_E_INVALID,
                             "file_mkdir: mode %#o or flags 0x%x out of range (permission "
                             "bits 0777; SBX_MKDIR_PARENTS)",
                             mode, (unsigned)flags);
    struct sbx_call call;
    sbxh_call_begin(&call, err, cancel);
    call.user = sbxh_acting_user(h, SBX_AS_HANDLE);
    rc = SBX_PROVIDER_OP(h->provider, file_mkdir)(h->sb, &call, path, mode ? mode : 0755,
                                                  flags);
    return sbxh_call_end(&call, rc, h->provider->plugin.name, "file_mkdir");
}

SBX_API int sbx_file_remove(sbx_handle *h, const char *path, uint32_t flags,
                            sbx_cancel *cancel, sbx_error *err)
{
    int rc = file_begin(h, path, "file_remove", false, cancel, err);
    if (rc != SBX_OK)
        return rc;
    if (flags & ~SBX_REMOVE_RECURSIVE)
        return sbx_error_set(err, SBX_E_INVALID, "file_remove: unknown flags 0x%x",
                             (unsigned)flags);
    struct sbx_call call;
    sbxh_call_begin(&call, err, cancel);
    call.user = sbxh_acting_user(h, SBX_AS_HANDLE);
    rc = SBX_PROVIDER_OP(h->provider, file_remove)(h->sb, &call, path, flags);
    return sbxh_call_end(&call, rc, h->provider->plugin.name, "file_remove");
}

SBX_API int sbx_file_rename(sbx_handle *h, const char *from, const char *to,
                            uint32_t flags, sbx_cancel *cancel, sbx_error *err)
{
    int rc = file_begin(h, from, "file_rename", false, cancel, err);
    if (rc == SBX_OK)
        rc = path_ok(to, "file_rename", false, err);
    if (rc != SBX_OK)
        return rc;
    if (flags & ~SBX_RENAME_NOREPLACE)
        return sbx_error_set(err, SBX_E_INVALID, "file_rename: unknown flags 0x%x",
                             (unsigned)flags);
    struct sbx_call call;
    sbxh_call_begin(&call, err, cancel);
    call.user = sbxh_acting_user(h, SBX_AS_HANDLE);
    rc = SBX_PROVIDER_OP(h->provider, file_rename)(h->sb, &call, from, to, flags);
    return sbxh_call_end(&call, rc, h->provider->plugin.name, "file_rename");
}
