/*
 * manifest_arg.c - a manifest given in a tool call. Only what cannot reach
 * the host is accepted: inline `file` and `dir` entries, the environment,
 * users, groups and run_as. Checked on the JSON, by allowlist, before the
 * manifest parser sees it; then parsed with no grants and a base directory
 * that does not exist, so that even an entry that slipped through could
 * resolve no host source.
 */
#include "internal.h"

#include <stdio.h>
#include <string.h>

#define NO_BASE_DIR "/nonexistent/sbx-mcp-no-host-sources"

static bool key_in(const char *k, const char *const *allowed)
{
    for (; *allowed; allowed++)
        if (!strcmp(k, *allowed))
            return true;
    return false;
}

/* Every member of each object of array `list` is one of `allowed`. */
static int check_list(json_object *list, const char *what, const char *const *allowed,
                      sbx_error *err)
{
    if (!json_object_is_type(list, json_type_array))
        return sbx_error_set(err, SBX_E_INVALID, "manifest: %s must be an array", what);
    size_t n = json_object_array_length(list);
    for (size_t i = 0; i < n; i++) {
        json_object *o = json_object_array_get_idx(list, i);
        if (!json_object_is_type(o, json_type_object))
            return sbx_error_set(err, SBX_E_INVALID, "manifest: %s[%zu] must be an object",
                                 what, i);
        json_object_object_foreach(o, k, v) {
            (void)v;
            if (!key_in(k, allowed))
                return sbx_error_set(err, SBX_E_INVALID,
                                     "manifest: %s[%zu]: \"%.64s\" is not allowed in a "
                                     "manifest given by a tool call",
                                     what, i, k);
        }
    }
    return SBX_OK;
}

/* The SDK's shape: entries as an object of path: entry, a dir's children
 * as an object of name: entry (depth bounded by the parser's nesting
 * limit, checked here too). Inline types only, keys by allowlist; a mode
 * given as a number becomes its octal digits, as in the list shape. */
static int check_entry_map(json_object *map, int depth, sbx_error *err)
{
    static const char *const entry[] = {"type",        "content",     "encoding",
                                        "mode",        "group",       "permissions",
                                        "executable",  "description", "children",
                                        NULL};
    if (depth > 16)
        return sbx_error_set(err, SBX_E_INVALID, "manifest: children nested too deep");
    json_object_object_foreach(map, path, e) {
        json_object *t = NULL, *m = NULL, *kids = NULL;
        if (!json_object_is_type(e, json_type_object))
            return sbx_error_set(err, SBX_E_INVALID, "manifest: entry %.200s must be an object",
                                 path);
        if (!json_object_object_get_ex(e, "type", &t) || !json_object_is_type(t, json_type_string))
            return sbx_error_set(err, SBX_E_INVALID,
                                 "manifest: entry %.200s: \"type\" (file or dir) is required",
                                 path);
        const char *type = json_object_get_string(t);
        if (strcmp(type, "file") && strcmp(type, "dir"))
            return sbx_error_set(err, SBX_E_INVALID,
                                 "manifest: entry %.200s: type %.32s is refused: a tool call "
                                 "may give only inline entries (file, dir); host sources "
                                 "(local_file, local_dir, git_repo) are the operator's",
                                 path, type);
        json_object_object_foreach(e, k, v) {
            (void)v;
            if (!key_in(k, entry))
                return sbx_error_set(err, SBX_E_INVALID,
                                     "manifest: entry %.200s: \"%.64s\" is not allowed in a "
                                     "manifest given by a tool call",
                                     path, k);
        }
        if (json_object_object_get_ex(e, "mode", &m) && json_object_is_type(m, json_type_int)) {
            int64_t bits = json_object_get_int64(m);
            char oct[32];
            snprintf(oct, sizeof oct, "%llo", (unsigned long long)(bits < 0 ? 0 : bits));
            json_object_object_add(e, "mode", json_object_new_string(oct));
        }
        if (json_object_object_get_ex(e, "children", &kids)) {
            if (!json_object_is_type(kids, json_type_object))
                return sbx_error_set(err, SBX_E_INVALID,
                                     "manifest: entry %.200s: children must be an object", path);
            int rc = check_entry_map(kids, depth + 1, err);
            if (rc != SBX_OK)
                return rc;
        }
    }
    return SBX_OK;
}

int sbxm_manifest_check(json_object *manifest, sbx_error *err)
{
    static const char *const top[] = {"version", "environment", "entries", "users",
                                      "groups",  "run_as",      NULL};
    static const char *const entry[] = {"path", "type", "content", "encoding",
                                        "mode", "group", NULL};
    static const char *const user[] = {"name", "uid", "group", "groups", NULL};
    static const char *const group[] = {"name", "gid", NULL};
    if (!json_object_is_type(manifest, json_type_object))
        return sbx_error_set(err, SBX_E_INVALID, "manifest: must be an object");
    json_object_object_foreach(manifest, k, v) {
        (void)v;
        if (!key_in(k, top))
            return sbx_error_set(err, SBX_E_INVALID,
                                 "manifest: \"%.64s\" is not allowed in a manifest given "
                                 "by a tool call",
                                 k);
    }
    json_object *list;
    int rc;
    if (json_object_object_get_ex(manifest, "entries", &list) &&
        json_object_is_type(list, json_type_object)) {
        /* checked (and its number modes rewritten) on a copy: the caller's
         * object is left as it is */
        json_object *copy = NULL;
        if (json_object_deep_copy(list, &copy, NULL) != 0)
            return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
        rc = check_entry_map(copy, 0, err);
        json_object_put(copy);
        if (rc != SBX_OK)
            return rc;
    } else if (json_object_object_get_ex(manifest, "entries", &list)) {
        if (!json_object_is_type(list, json_type_array))
            return sbx_error_set(err, SBX_E_INVALID,
                                 "manifest: entries must be an array or an object of "
                                 "path: entry");
        /* the type first: the refusal of a host source names it */
        size_t n = json_object_array_length(list);
        for (size_t i = 0; i < n; i++) {
            json_object *e = json_object_array_get_idx(list, i), *t = NULL, *p = NULL;
            if (!json_object_is_type(e, json_type_object))
                return sbx_error_set(err, SBX_E_INVALID,
                                     "manifest: entries[%zu] must be an object", i);
            json_object_object_get_ex(e, "path", &p);
            const char *path = json_object_is_type(p, json_type_string)
                                   ? json_object_get_string(p)
                                   : "?";
            if (!json_object_object_get_ex(e, "type", &t) ||
                !json_object_is_type(t, json_type_string))
                return sbx_error_set(err, SBX_E_INVALID,
                                     "manifest: entry %.200s: \"type\" (file or dir) is "
                                     "required",
                                     path);
            const char *type = json_object_get_string(t);
            if (strcmp(type, "file") && strcmp(type, "dir"))
                return sbx_error_set(err, SBX_E_INVALID,
                                     "manifest: entry %.200s: type %.32s is refused: a "
                                     "tool call may give only inline entries (file, "
                                     "dir); host sources (local_file, local_dir, "
                                     "git_repo) are the operator's",
                                     path, type);
        }
        if ((rc = check_list(list, "entries", entry, err)) != SBX_OK)
            return rc;
    }
    if (json_object_object_get_ex(manifest, "users", &list) &&
        (rc = check_list(list, "users", user, err)) != SBX_OK)
        return rc;
    if (json_object_object_get_ex(manifest, "groups", &list) &&
        (rc = check_list(list, "groups", group, err)) != SBX_OK)
        return rc;
    return SBX_OK;
}

int sbxm_manifest_from_arg(json_object *manifest, sbx_manifest **out, sbx_error *err)
{
    *out = NULL;
    int rc = sbxm_manifest_check(manifest, err);
    if (rc != SBX_OK)
        return rc;
    /* A mode given as a JSON number (493) is the permission bits; the
     * manifest format reads its octal digits ("755"): give it those. */
    json_object *copy = NULL;
    if (json_object_deep_copy(manifest, &copy, NULL) != 0)
        return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    json_object *list;
    if (json_object_object_get_ex(copy, "entries", &list) &&
        json_object_is_type(list, json_type_object))
        rc = check_entry_map(list, 0, err);
    else if (json_object_object_get_ex(copy, "entries", &list)) {
        size_t n = json_object_array_length(list);
        for (size_t i = 0; i < n; i++) {
            json_object *e = json_object_array_get_idx(list, i), *m;
            if (json_object_object_get_ex(e, "mode", &m) &&
                json_object_is_type(m, json_type_int)) {
                int64_t v = json_object_get_int64(m);
                char oct[32];
                snprintf(oct, sizeof oct, "%llo", (unsigned long long)(v < 0 ? 0 : v));
                json_object_object_add(e, "mode", json_object_new_string(oct));
            }
        }
    }
    if (rc != SBX_OK) {
        json_object_put(copy);
        return rc;
    }
    size_t len = 0;
    const char *text = json_object_to_json_string_length(copy, JSON_C_TO_STRING_PLAIN, &len);
    rc = text ? sbx_manifest_parse(NULL, text, len, "manifest", NO_BASE_DIR, out, err)
              : sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    json_object_put(copy);
    return rc;
}
