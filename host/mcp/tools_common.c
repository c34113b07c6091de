/*
 * tools_common.c - the path rule, JSON text of bytes, mode arguments and
 * error shapes of the file, search and state tools (tools_common.h).
 */
#include "tools_common.h"

#include "utf8.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Append component [s, s+n) to the path being built in out (len bytes). */
static void push_component(char *out, size_t *len, const char *s, size_t n)
{
    if (*len)
        out[(*len)++] = '/';
    memcpy(out + *len, s, n);
    *len += n;
    out[*len] = '\0';
}

int sbxm_tool_path(struct sbxm_call *c, sbx_handle *h, const char *tool, const char *key,
                   bool root_ok, char **out, sbx_error *err)
{
    *out = NULL;
    json_object *v = NULL;
    const char *in = NULL;
    size_t n = 0;
    if (json_object_object_get_ex(c->args, key, &v) && json_object_is_type(v, json_type_string)) {
        in = json_object_get_string(v);
        n = (size_t)json_object_get_string_len(v);
    }
    if (!in)
        in = "";
    if (strlen(in) != n)
        return sbx_error_set(err, SBX_E_INVALID, "\"%s\" holds a NUL byte", key);
    if (n >= SBXM_PATH_MAX)
        return sbx_error_set(err, SBX_E_INVALID, "\"%s\" is %zu bytes long (at most %d)", key, n, SBXM_PATH_MAX - 1);
    const char *p = in;
    if (*p == '/') {
        /* absolute: only under the workspace root, which is dropped */
        const char *root = sbx_handle_root(h);
        size_t rl = root ? strlen(root) : 0;
        while (rl > 1 && root[rl - 1] == '/')
            rl--;
        if (rl == 1 && root[0] == '/')
            rl = 0; /* a workspace at "/": every absolute path is inside */
        if (!root || (rl && (strncmp(p, root, rl) != 0 || (p[rl] && p[rl] != '/'))))
            return sbx_error_set(err, SBX_E_INVALID,
                                 "\"%.200s\" is outside the workspace (give a path "
                                 "relative to the workspace, or under %s)", in, root ? root : "its root");
        p += rl;
    }
    char *norm = malloc(n + 1);
    if (!norm)
        return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    size_t len = 0;
    norm[0] = '\0';
    while (*p) {
        while (*p == '/')
            p++;
        const char *s = p;
        while (*p && *p != '/')
            p++;
        size_t cl = (size_t)(p - s);
        if (cl == 0 || (cl == 1 && s[0] == '.'))
            continue;
        if (cl == 2 && s[0] == '.' && s[1] == '.') {
            free(norm);
            return sbx_error_set(err, SBX_E_INVALID,
                                 "\"%.200s\" has a \"..\" component (paths stay inside "
                                 "the workspace)", in);
        }
        push_component(norm, &len, s, cl);
    }
    if (!len && !root_ok) {
        free(norm);
        return sbx_error_set(err, SBX_E_INVALID, "\"%s\" %s", key,
                             *in ? "names the workspace root itself" : "is empty");
    }
    *out = norm;
    return SBX_OK;
}

const char *sbxm_path_shown(const char *rel)
{
    return rel && *rel ? rel : ".";
}

char *sbxm_path_join(const char *dir, const char *name)
{
    size_t dl = strlen(dir), nl = strlen(name);
    char *s = malloc(dl + nl + 2);
    if (!s)
        return NULL;
    if (dl) {
        memcpy(s, dir, dl);
        s[dl++] = '/';
    }
    memcpy(s + dl, name, nl + 1);
    return s;
}

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 when invalid
 * or incomplete. */
static size_t seq_len(const unsigned char *s, size_t n)
{
    size_t want = s[0] < 0x80 ? 1 : (s[0] & 0xe0) == 0xc0 ? 2 : (s[0] & 0xf0) == 0xe0 ? 3
                                  : (s[0] & 0xf8) == 0xf0 ? 4 : 0;
    if (!want || want > n)
        return 0;
    return sbxs_utf8_valid(s, want) ? want : 0;
}

json_object *sbxm_json_bytes(const char *s, size_t n)
{
    if (sbxs_utf8_valid(s, n))
        return json_object_new_string_len(s, (int)n);
    /* each invalid byte becomes U+FFFD (3 bytes) */
    char *t = malloc(n * 3 + 1);
    if (!t)
        return NULL;
    size_t o = 0;
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t k = seq_len(u + i, n - i);
        if (k) {
            memcpy(t + o, u + i, k);
            o += k;
            i += k;
        } else {
            memcpy(t + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        }
    }
    json_object *j = json_object_new_string_len(t, (int)o);
    free(t);
    return j;
}

size_t sbxm_utf8_complete(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    /* find the start of the last sequence (at most 3 continuation bytes) */
    size_t i = n;
    for (int back = 0; i > 0 && back < 4; back++) {
        i--;
        if ((u[i] & 0xc0) != 0x80)
            break;
    }
    if (i >= n)
        return n;
    unsigned char b = u[i];
    size_t want = b < 0x80 ? 1 : (b & 0xe0) == 0xc0 ? 2 : (b & 0xf0) == 0xe0 ? 3
                           : (b & 0xf8) == 0xf0 ? 4 : 1;
    return i + want > n ? i : n;
}

int sbxm_tool_mode(struct sbxm_call *c, const char *tool, const char *key, unsigned *mode,
                   sbx_error *err)
{
    *mode = 0;
    json_object *v = NULL;
    if (!json_object_object_get_ex(c->args, key, &v) || !v)
        return SBX_OK;
    long long bits = -1;
    if (json_object_is_type(v, json_type_int)) {
        errno = 0;
        bits = (long long)json_object_get_int64(v);
    } else if (json_object_is_type(v, json_type_string)) {
        const char *s = json_object_get_string(v);
        size_t len = strlen(s);
        if (len >= 1 && len <= 4 && strspn(s, "01234567") == len)
            bits = strtoll(s, NULL, 8);
    }
    if (bits < 1 || bits > 0777)
        return sbx_error_set(err, SBX_E_INVALID,
                             "invalid \"%s\" (permission bits 0001 to 0777, as an octal "
                             "string such as \"0644\" or as their number, 420 for 0644; "
                             "setuid, setgid and sticky bits are not allowed)", key);
    *mode = (unsigned)bits;
    return SBX_OK;
}

int sbxm_tool_fail(sbx_error *err, const char *tool, const char *path,
                   const sbx_error *cause)
{
    int status = cause->status ? cause->status : SBX_E_INTERNAL;
    char msg[SBX_ERROR_MAX];
    snprintf(msg, sizeof msg, "%s", cause->message[0] ? cause->message
                                                      : sbx_strerror((sbx_status)status));
    if (path)
        return sbx_error_set(err, status, "\"%.200s\": %s", sbxm_path_shown(path), msg);
    return sbx_error_set(err, status, "%s", msg);
}

int sbxm_tool_error(sbx_error *err, int status, const char *tool, const char *path,
                    const char *fmt, ...)
{
    char msg[SBX_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (path)
        return sbx_error_set(err, status, "\"%.200s\": %s", sbxm_path_shown(path), msg);
    return sbx_error_set(err, status, "%s", msg);
}

const char *sbxm_file_type_name(unsigned type)
{
    switch (type) {
    case SBX_FILE_REGULAR: return "file";
    case SBX_FILE_DIR: return "directory";
    case SBX_FILE_SYMLINK: return "symlink";
    default: return "other";
    }
}

json_object *sbxm_file_info_json(const struct sbx_file_info *fi, const char *name)
{
    json_object *o = json_object_new_object();
    if (name)
        json_object_object_add(o, "name", sbxm_json_bytes(name, strlen(name)));
    json_object_object_add(o, "type", json_object_new_string(sbxm_file_type_name(fi->type)));
    json_object_object_add(o, "size", json_object_new_uint64(fi->bytes));
    char mode[8];
    snprintf(mode, sizeof mode, "%04o", (unsigned)(fi->mode & 07777));
    json_object_object_add(o, "mode", json_object_new_string(mode));
    json_object_object_add(o, "mtime", json_object_new_double((double)fi->mtime_ns / 1e9));
    return o;
}

int sbxm_tool_sandbox(struct sbxm_call *c, const char *tool, sbx_handle **h,
                      sbx_error *err)
{
    const char *name = sbxm_arg_str(c, "sandbox");
    if (!name || !*name)
        return sbx_error_set(err, SBX_E_INVALID, "\"sandbox\" is missing");
    sbx_error e;
    sbx_error_clear(&e);
    int rc = sbxm_handle(c, name, h, &e);
    return rc == SBX_OK ? SBX_OK : sbxm_tool_fail(err, tool, NULL, &e);
}

int sbxm_tool_handle_as(struct sbxm_call *c, const char *tool, const char *user,
                        sbx_handle **h, sbx_error *err)
{
    const char *name = sbxm_arg_str(c, "sandbox");
    if (!name || !*name)
        return sbx_error_set(err, SBX_E_INVALID, "\"sandbox\" is missing");
    sbx_error e;
    sbx_error_clear(&e);
    int rc = sbxm_handle_as(c, name, user, h, &e);
    return rc == SBX_OK ? SBX_OK : sbxm_tool_fail(err, tool, NULL, &e);
}
