/*
 * tools_files.c - read_file, write_file, list_files, stat, mkdir, move,
 * delete (docs/MCP.md, "File tools").
 *
 * Every tool is one libsbx call on the sandbox's open handle, so the
 * provider confines each path (symlinks are never followed out of the
 * workspace) and the server only adds the bounds: a read streams into a
 * buffer of at most --max-read-bytes and stops there, a write is decoded
 * only when its size is within --max-write-bytes, a listing stops at its
 * limit. Paths go through sbxm_tool_path first, for a clear refusal of
 * ".." and of absolute paths outside the workspace.
 */
#include "tools_common.h"

#include "utf8.h"

#include <openssl/evp.h>

#include <stdlib.h>
#include <string.h>

/* The most entries list_files returns in one call. */
#define LIST_LIMIT_MAX 10000
#define LIST_LIMIT_DEFAULT 1000

/* ---- read_file ----------------------------------------------------------- */

/* Collects at most cap bytes after skipping `skip`, and notes whether more
 * came: the read is stopped (STOP) one byte past the cap. */
struct read_buf {
    uint64_t skip;
    char *buf;
    size_t len, alloc, cap;
    bool more;
    bool nomem;
};

#define STOP SBX_E_CANCELLED

static int read_chunk(void *ctx, const void *data, size_t n)
{
    struct read_buf *r = ctx;
    const char *p = data;
    if (r->skip) {
        size_t k = r->skip < n ? (size_t)r->skip : n;
        r->skip -= k;
        p += k;
        n -= k;
    }
    if (!n)
        return SBX_OK;
    size_t room = r->cap - r->len;
    size_t take = n < room ? n : room;
    if (take) {
        if (r->len + take > r->alloc) {
            size_t want = r->alloc ? r->alloc : 64 * 1024;
            while (want < r->len + take)
                want *= 2;
            if (want > r->cap)
                want = r->cap;
            char *b = realloc(r->buf, want);
            if (!b) {
                r->nomem = true;
                return SBX_E_NOMEM;
            }
            r->buf = b;
            r->alloc = want;
        }
        memcpy(r->buf + r->len, p, take);
        r->len += take;
    }
    if (take < n) {
        r->more = true; /* past the cap: stop the stream here */
        return STOP;
    }
    return SBX_OK;
}

static json_object *base64_json(const char *data, size_t n)
{
    size_t out = 4 * ((n + 2) / 3) + 1;
    char *b = malloc(out);
    if (!b)
        return NULL;
    int len = EVP_EncodeBlock((unsigned char *)b, (const unsigned char *)data, (int)n);
    json_object *j = json_object_new_string_len(b, len);
    free(b);
    return j;
}

/* The "encoding" argument: "text" (the default) or "base64". */
static int arg_encoding(const struct sbxm_call *c, bool *b64, sbx_error *err)
{
    const char *enc = sbxm_arg_str(c, "encoding");
    if (!enc)
        enc = "text";
    *b64 = !strcmp(enc, "base64");
    if (!*b64 && strcmp(enc, "text"))
        return sbx_error_set(err, SBX_E_INVALID,
                             "invalid \"encoding\" (\"text\" or \"base64\")");
    return SBX_OK;
}

static int tool_read_file(struct sbxm_call *c, json_object **result, sbx_error *err)
{
    const struct sbxm_options *o = sbxm_options(c->srv);
    bool b64;
    int enc_rc = arg_encoding(c, &b64, err);
    if (enc_rc != SBX_OK)
        return enc_rc;
    int64_t offset = sbxm_arg_int(c, "offset", 0);
    if (offset < 0)
        return sbx_error_set(err, SBX_E_INVALID, "\"offset\" is negative");
    int64_t max = sbxm_arg_int(c, "max_bytes", (int64_t)o->max_read_bytes);
    if (max < 1)
        return sbx_error_set(err, SBX_E_INVALID, "\"max_bytes\" must be 1 or more");
    size_t cap = (uint64_t)max < o->max_read_bytes ? (size_t)max : o->max_read_bytes;

    sbx_handle *h;
    char *path;
    int rc = sbxm_tool_sandbox_path(c, "path", false, &h, &path, err);
    if (rc != SBX_OK)
        return rc;

    /* the size, and a clear refusal of what is not a regular file (the
     * provider refuses those too); providers without file ops skip it */
    sbx_error e;
    struct sbx_file_info fi;
    memset(&fi, 0, sizeof fi);
    fi.size = sizeof fi;
    bool have_size = false;
    rc = sbx_file_stat(h, path, &fi, c->cancel, &e);
    if (rc == SBX_OK) {
        if (fi.type != SBX_FILE_REGULAR) {
            rc = sbxm_tool_error(err, SBX_E_INVALID, path,
                                 "not a regular file (a %s)", sbxm_file_type_name(fi.type));
            free(path);
            return rc;
        }
        have_size = true;
    } else if (rc != SBX_E_UNSUPPORTED) {
        rc = sbxm_tool_fail(err, path, &e);
        free(path);
        return rc;
    }

    struct read_buf r = {.skip = (uint64_t)offset, .cap = cap};
    struct sbx_sink sink = SBX_SINK_INIT(&r, read_chunk);
    if (!have_size || (uint64_t)offset < fi.bytes || fi.bytes == 0) {
        rc = sbx_read(h, path, &sink, c->cancel, &e);
        if (rc != SBX_OK && r.more && !sbx_cancel_fired(c->cancel))
            rc = SBX_OK; /* we stopped it at the cap */
        if (rc != SBX_OK) {
            if (r.nomem)
                rc = sbxm_tool_error(err, SBX_E_NOMEM, path, "out of memory");
            else
                rc = sbxm_tool_fail(err, path, &e);
            free(r.buf);
            free(path);
            return rc;
        }
    }
    size_t n = r.len;
    if (!b64) {
        if (r.more)
            n = sbxm_utf8_complete(r.buf, n); /* the cap may split a character */
        if (!sbxs_utf8_valid(r.buf ? r.buf : "", n)) {
            rc = sbxm_tool_error(err, SBX_E_INVALID, path,
                                 "the content is not valid UTF-8 text; read it with "
                                 "\"encoding\": \"base64\"");
            free(r.buf);
            free(path);
            return rc;
        }
    }
    json_object *out = json_object_new_object();
    json_object *content = b64 ? base64_json(r.buf ? r.buf : "", n)
                               : json_object_new_string_len(r.buf ? r.buf : "", (int)n);
    free(r.buf);
    if (!content) {
        json_object_put(out);
        rc = sbxm_tool_error(err, SBX_E_NOMEM, path, "out of memory");
        free(path);
        return rc;
    }
    uint64_t size = have_size ? fi.bytes : (uint64_t)offset + r.len;
    json_object_object_add(out, "content", content);
    json_object_object_add(out, "encoding", json_object_new_string(b64 ? "base64" : "text"));
    json_object_object_add(out, "offset", json_object_new_int64(offset));
    json_object_object_add(out, "bytes", json_object_new_uint64(n));
    json_object_object_add(out, "size", have_size || !r.more ? json_object_new_uint64(size)
                                                              : NULL);
    json_object_object_add(out, "truncated",
                           json_object_new_boolean(r.more || n < r.len));
    *result = out;
    free(path);
    return SBX_OK;
}

/* ---- write_file ---------------------------------------------------------- */

/* Decode standard base64 (padding optional, whitespace ignored) into a new
 * buffer of at most max bytes. SBX_E_INVALID for a bad character,
 * SBX_E_NOMEM; over max is refused before decoding. */
static int b64_decode(const char *path, const char *in, size_t len,
                      size_t max, unsigned char **out, size_t *outlen, sbx_error *err)
{
    *out = NULL;
    *outlen = 0;
    if (len / 4 * 3 > max + 3)
        return sbxm_tool_error(err, SBX_E_INVALID, path,
                               "the content decodes to about %zu bytes, over the server's "
                               "limit of %zu bytes (--max-write-bytes)",
                               len / 4 * 3, max);
    unsigned char *buf = malloc(len / 4 * 3 + 4);
    EVP_ENCODE_CTX *ctx = EVP_ENCODE_CTX_new();
    if (!buf || !ctx) {
        free(buf);
        EVP_ENCODE_CTX_free(ctx);
        return sbxm_tool_error(err, SBX_E_NOMEM, path, "out of memory");
    }
    EVP_DecodeInit(ctx);
    int n1 = 0, n2 = 0;
    int ok = EVP_DecodeUpdate(ctx, buf, &n1, (const unsigned char *)in, (int)len) >= 0 &&
             EVP_DecodeFinal(ctx, buf + n1, &n2) == 1;
    EVP_ENCODE_CTX_free(ctx);
    if (!ok) {
        free(buf);
        return sbxm_tool_error(err, SBX_E_INVALID, path,
                               "the content is not valid base64");
    }
    size_t n = (size_t)n1 + (size_t)n2;
    if (n > max) {
        free(buf);
        return sbxm_tool_error(err, SBX_E_INVALID, path,
                               "the content decodes to %zu bytes, over the server's limit "
                               "of %zu bytes (--max-write-bytes)",
                               n, max);
    }
    *out = buf;
    *outlen = n;
    return SBX_OK;
}

static int tool_write_file(struct sbxm_call *c, json_object **result, sbx_error *err)
{
    const struct sbxm_options *o = sbxm_options(c->srv);
    bool b64;
    int enc_rc = arg_encoding(c, &b64, err);
    if (enc_rc != SBX_OK)
        return enc_rc;
    unsigned mode;
    int rc = sbxm_tool_mode(c, "mode", &mode, err);
    if (rc != SBX_OK)
        return rc;
    json_object *cv = NULL;
    if (!json_object_object_get_ex(c->args, "content", &cv) ||
        !json_object_is_type(cv, json_type_string))
        return sbx_error_set(err, SBX_E_INVALID, "\"content\" is missing");
    const char *text = json_object_get_string(cv);
    size_t tlen = (size_t)json_object_get_string_len(cv);

    sbx_handle *h;
    if ((rc = sbxm_tool_handle_as(c, sbxm_arg_str(c, "user"), &h, err)) != SBX_OK)
        return rc;
    char *path;
    if ((rc = sbxm_tool_path(c, h, "path", false, &path, err)) != SBX_OK) {
        return rc;
    }
    unsigned char *decoded = NULL;
    const void *data = text;
    size_t len = tlen;
    if (b64) {
        rc = b64_decode(path, text, tlen, o->max_write_bytes, &decoded, &len, err);
        data = decoded;
    } else if (tlen > o->max_write_bytes) {
        rc = sbxm_tool_error(err, SBX_E_INVALID, path,
                             "%zu bytes is over the server's limit of %zu bytes "
                             "(--max-write-bytes)",
                             tlen, o->max_write_bytes);
    }
    if (rc == SBX_OK) {
        struct sbx_memory_source m = {data, len, 0};
        struct sbx_source src = sbx_memory_source(&m);
        sbx_error e;
        rc = sbx_write(h, path, &src, mode, c->cancel, &e);
        if (rc != SBX_OK)
            sbxm_tool_fail(err, path, &e);
    }
    free(decoded);
    if (rc == SBX_OK) {
        json_object *out = json_object_new_object();
        json_object_object_add(out, "path", sbxm_json_bytes(path, strlen(path)));
        json_object_object_add(out, "bytes", json_object_new_uint64(len));
        *result = out;
    }
    free(path);
    return rc;
}

/* ---- list_files ---------------------------------------------------------- */

struct listing {
    json_object *entries;
    size_t limit;
    bool more;
};

static int list_entry(void *ctx, const struct sbx_file_info *fi)
{
    struct listing *l = ctx;
    if (json_object_array_length(l->entries) >= l->limit) {
        l->more = true;
        return STOP;
    }
    json_object *e = sbxm_file_info_json(fi, fi->name);
    if (!e || json_object_array_add(l->entries, e) != 0) {
        json_object_put(e);
        return SBX_E_NOMEM;
    }
    return SBX_OK;
}

static int by_name(const void *a, const void *b)
{
    json_object *x = *(json_object *const *)a, *y = *(json_object *const *)b;
    json_object *nx, *ny;
    json_object_object_get_ex(x, "name", &nx);
    json_object_object_get_ex(y, "name", &ny);
    return strcmp(json_object_get_string(nx), json_object_get_string(ny));
}

static int tool_list_files(struct sbxm_call *c, json_object **result, sbx_error *err)
{
    int64_t limit = sbxm_arg_int(c, "limit", LIST_LIMIT_DEFAULT);
    if (limit < 1)
        return sbx_error_set(err, SBX_E_INVALID, "\"limit\" must be 1 or more");
    if (limit > LIST_LIMIT_MAX)
        limit = LIST_LIMIT_MAX;
    sbx_handle *h;
    char *path;
    int rc = sbxm_tool_sandbox_path(c, "path", true, &h, &path, err);
    if (rc != SBX_OK)
        return rc;
    struct listing l = {json_object_new_array(), (size_t)limit, false};
    struct sbx_file_list_sink sink = {sizeof sink, &l, list_entry};
    sbx_error e;
    rc = sbx_file_list(h, path, &sink, c->cancel, &e);
    if (rc != SBX_OK && l.more && !sbx_cancel_fired(c->cancel))
        rc = SBX_OK; /* stopped at the limit */
    if (rc != SBX_OK) {
        json_object_put(l.entries);
        rc = sbxm_tool_fail(err, path, &e);
        free(path);
        return rc;
    }
    json_object_array_sort(l.entries, by_name);
    json_object *out = json_object_new_object();
    json_object_object_add(out, "path", json_object_new_string(sbxm_path_shown(path)));
    json_object_object_add(out, "entries", l.entries);
    json_object_object_add(out, "truncated", json_object_new_boolean(l.more));
    *result = out;
    free(path);
    return SBX_OK;
}

/* ---- stat, mkdir, move, delete ------------------------------------------ */

static int tool_stat(struct sbxm_call *c, json_object **result, sbx_error *err)
{
    sbx_handle *h;
    char *path;
    int rc = sbxm_tool_sandbox_path(c, "path", true, &h, &path, err);
    if (rc != SBX_OK)
        return rc;
    struct sbx_file_info fi;
    memset(&fi, 0, sizeof fi);
    fi.size = sizeof fi;
    sbx_error e;
    rc = sbx_file_stat(h, path, &fi, c->cancel, &e);
    if (rc == SBX_E_NOT_FOUND) {
        json_object *out = json_object_new_object();
        json_object_object_add(out, "exists", json_object_new_boolean(false));
        *result = out;
        rc = SBX_OK;
    } else if (rc == SBX_OK) {
        json_object *out = sbxm_file_info_json(&fi, NULL);
        json_object_object_add(out, "exists", json_object_new_boolean(true));
        *result = out;
    } else {
        rc = sbxm_tool_fail(err, path, &e);
    }
    free(path);
    return rc;
}

static int tool_mkdir(struct sbxm_call *c, json_object **result, sbx_error *err)
{
    unsigned mode;
    int rc = sbxm_tool_mode(c, "mode", &mode, err);
    if (rc != SBX_OK)
        return rc;
    sbx_handle *h;
    if ((rc = sbxm_tool_sandbox(c, &h, err)) != SBX_OK)
        return rc;
    char *path;
    if ((rc = sbxm_tool_path(c, h, "path", false, &path, err)) != SBX_OK)
        return rc;
    sbx_error e;
    uint32_t flags = sbxm_arg_bool(c, "parents", false) ? SBX_MKDIR_PARENTS : 0;
    rc = sbx_file_mkdir(h, path, mode, flags, c->cancel, &e);
    if (rc == SBX_OK) {
        json_object *out = json_object_new_object();
        json_object_object_add(out, "path", sbxm_json_bytes(path, strlen(path)));
        *result = out;
    } else {
        rc = sbxm_tool_fail(err, path, &e);
    }
    free(path);
    return rc;
}

static int tool_move(struct sbxm_call *c, json_object **result, sbx_error *err)
{
    sbx_handle *h;
    int rc = sbxm_tool_sandbox(c, &h, err);
    if (rc != SBX_OK)
        return rc;
    char *from, *to;
    if ((rc = sbxm_tool_path(c, h, "from", false, &from, err)) != SBX_OK)
        return rc;
    if ((rc = sbxm_tool_path(c, h, "to", false, &to, err)) != SBX_OK) {
        free(from);
        return rc;
    }
    sbx_error e;
    uint32_t flags = sbxm_arg_bool(c, "overwrite", false) ? 0 : SBX_RENAME_NOREPLACE;
    rc = sbx_file_rename(h, from, to, flags, c->cancel, &e);
    if (rc == SBX_OK) {
        json_object *out = json_object_new_object();
        json_object_object_add(out, "from", sbxm_json_bytes(from, strlen(from)));
        json_object_object_add(out, "to", sbxm_json_bytes(to, strlen(to)));
        *result = out;
    } else if (rc == SBX_E_EXISTS && !flags) {
        rc = sbxm_tool_fail(err, from, &e);
    } else if (rc == SBX_E_EXISTS) {
        rc = sbxm_tool_error(err, rc, from,
                             "\"%.200s\" exists (pass \"overwrite\": true to replace it)",
                             to);
    } else {
        rc = sbxm_tool_fail(err, from, &e);
    }
    free(from);
    free(to);
    return rc;
}

static int tool_delete(struct sbxm_call *c, json_object **result, sbx_error *err)
{
    sbx_handle *h;
    char *path;
    int rc = sbxm_tool_sandbox_path(c, "path", false, &h, &path, err);
    if (rc != SBX_OK)
        return rc;
    sbx_error e;
    uint32_t flags = sbxm_arg_bool(c, "recursive", false) ? SBX_REMOVE_RECURSIVE : 0;
    rc = sbx_file_remove(h, path, flags, c->cancel, &e);
    if (rc == SBX_OK) {
        json_object *out = json_object_new_object();
        json_object_object_add(out, "path", sbxm_json_bytes(path, strlen(path)));
        *result = out;
    } else {
        rc = sbxm_tool_fail(err, path, &e);
    }
    free(path);
    return rc;
}

/* ---- the table ----------------------------------------------------------- */

#define SANDBOX_PROP "\"sandbox\":{\"type\":\"string\",\"description\":\"the sandbox (session key)\"}"
#define PATH_PROP(name, what) "\"" name "\":{\"type\":\"string\",\"description\":\"" what "\"}"
#define MODE_PROP(what)                                                                  \
    "\"mode\":{\"type\":[\"string\",\"integer\"],\"description\":\"" what                \
    " permission bits: an octal string such as \\\"0644\\\", or their number\"}"

const struct sbxm_tool sbxm_tools_files[] = {
    {"read_file", "Read a file",
     "Read a file of the sandbox's workspace as UTF-8 text or base64, from offset, at most "
     "max_bytes (bounded by the server's --max-read-bytes). truncated says more follows; "
     "bytes is how many bytes of the file content holds (read on at offset + bytes).",
     "{\"type\":\"object\",\"properties\":{" SANDBOX_PROP ","
     PATH_PROP("path", "workspace-relative path (or absolute under the workspace root)") ","
     "\"encoding\":{\"type\":\"string\",\"enum\":[\"text\",\"base64\"]},"
     "\"offset\":{\"type\":\"integer\",\"minimum\":0},"
     "\"max_bytes\":{\"type\":\"integer\",\"minimum\":1}},"
     "\"required\":[\"sandbox\",\"path\"],\"additionalProperties\":false}",
     "{\"type\":\"object\",\"properties\":{\"content\":{\"type\":\"string\"}"
     ",\"encoding\":{\"type\":\"string\"},\"offset\":{\"type\":\"integer\"},"
     "\"bytes\":{\"type\":\"integer\"},\"size\":{\"type\":[\"integer\",\"nul"
     "l\"]},\"truncated\":{\"type\":\"boolean\"}},\"required\":[\"content\","
     "\"encoding\",\"bytes\",\"truncated\"]}",
     SBXM_TOOLS_AGENT, true, tool_read_file},
    {"write_file", "Write a file",
     "Write a file of the sandbox's workspace from UTF-8 text or base64 (at most the "
     "server's --max-write-bytes). Parent directories are made; the file appears complete "
     "or not at all.",
     "{\"type\":\"object\",\"properties\":{" SANDBOX_PROP ","
     PATH_PROP("path", "workspace-relative path (or absolute under the workspace root)") ","
     "\"content\":{\"type\":\"string\"},"
     "\"encoding\":{\"type\":\"string\",\"enum\":[\"text\",\"base64\"]}," MODE_PROP("the file's")
     ",\"user\":{\"type\":\"string\",\"description\":\"write as this sandbox user\"}},"
     "\"required\":[\"sandbox\",\"path\",\"content\"],\"additionalProperties\":false}",
     "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\""
     "bytes\":{\"type\":\"integer\"}},\"required\":[\"path\",\"bytes\"]}",
     SBXM_TOOLS_AGENT, false, tool_write_file},
    {"list_files", "List a directory",
     "List the entries of a directory of the workspace (symlinks as themselves), sorted by "
     "name, at most limit (1000 by default, 10000 at most).",
     "{\"type\":\"object\",\"properties\":{" SANDBOX_PROP ","
     PATH_PROP("path", "workspace-relative directory; \\\".\\\" is the root") ","
     "\"limit\":{\"type\":\"integer\",\"minimum\":1}},"
     "\"required\":[\"sandbox\",\"path\"],\"additionalProperties\":false}",
     "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\""
     "entries\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"propert"
     "ies\":{\"name\":{\"type\":\"string\"},\"type\":{\"type\":\"string\"},\""
     "size\":{\"type\":\"integer\"},\"mode\":{\"type\":\"string\"},\"mtime\""
     ":{\"type\":\"number\"}}}},\"truncated\":{\"type\":\"boolean\"}},\"requ"
     "ired\":[\"entries\",\"truncated\"]}",
     SBXM_TOOLS_AGENT, true, tool_list_files},
    {"stat", "Describe a path",
     "Whether a workspace path exists, and its type (file, directory, symlink - never "
     "followed - or other), size, mode and mtime.",
     "{\"type\":\"object\",\"properties\":{" SANDBOX_PROP ","
     PATH_PROP("path", "workspace-relative path") "},"
     "\"required\":[\"sandbox\",\"path\"],\"additionalProperties\":false}",
     "{\"type\":\"object\",\"properties\":{\"exists\":{\"type\":\"boolean\"}"
     ",\"type\":{\"type\":\"string\"},\"size\":{\"type\":\"integer\"},\"mode"
     "\":{\"type\":\"string\"},\"mtime\":{\"type\":\"number\"}},\"required\""
     ":[\"exists\"]}",
     SBXM_TOOLS_AGENT, true, tool_stat},
    {"mkdir", "Make a directory",
     "Make a directory in the workspace; parents makes missing parents and accepts an "
     "existing directory.",
     "{\"type\":\"object\",\"properties\":{" SANDBOX_PROP ","
     PATH_PROP("path", "workspace-relative path") ","
     "\"parents\":{\"type\":\"boolean\"}," MODE_PROP("the directory's (default 0755)") "},"
     "\"required\":[\"sandbox\",\"path\"],\"additionalProperties\":false}",
     "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"}},\""
     "required\":[\"path\"]}",
     SBXM_TOOLS_AGENT, false, tool_mkdir},
    {"move", "Move or rename",
     "Rename a workspace path; an existing target is refused unless overwrite is true.",
     "{\"type\":\"object\",\"properties\":{" SANDBOX_PROP ","
     PATH_PROP("from", "workspace-relative path") "," PATH_PROP("to", "workspace-relative path") ","
     "\"overwrite\":{\"type\":\"boolean\"}},"
     "\"required\":[\"sandbox\",\"from\",\"to\"],\"additionalProperties\":false}",
     "{\"type\":\"object\",\"properties\":{\"from\":{\"type\":\"string\"},\""
     "to\":{\"type\":\"string\"}},\"required\":[\"from\",\"to\"]}",
     SBXM_TOOLS_AGENT, false, tool_move},
    {"delete", "Delete a path",
     "Remove a file, a symlink (itself, never its target) or an empty directory; recursive "
     "removes a directory and all it holds.",
     "{\"type\":\"object\",\"properties\":{" SANDBOX_PROP ","
     PATH_PROP("path", "workspace-relative path") ","
     "\"recursive\":{\"type\":\"boolean\"}},"
     "\"required\":[\"sandbox\",\"path\"],\"additionalProperties\":false}",
     "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"}},\""
     "required\":[\"path\"]}",
     SBXM_TOOLS_AGENT, false, tool_delete},
    {0},
};
