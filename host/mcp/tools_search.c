/*
 * tools_search.c - search and git_clone (docs/MCP.md, "Search tools").
 *
 * search walks the tree with sbx_file_list and reads files with sbx_read,
 * rather than running find/grep in the sandbox: those two calls exist on
 * every provider with file ops whatever the image holds, each is confined
 * by the provider (no path is ever resolved by a shell the sandbox could
 * race, symlinks are reported as themselves and never descended into or
 * read), and the server keeps every bound itself: entries visited, depth,
 * bytes read per file and per call, results. Files are scanned as they
 * stream, line by line, so a file of any size costs a fixed buffer.
 *
 * git_clone runs git in the sandbox with an argv (no shell), the URL after
 * "--", only the https, http, ssh and git transports (checked here, and
 * enforced by git itself for redirects and submodules through
 * GIT_ALLOW_PROTOCOL), into a new directory whose parent was checked
 * through the provider first.
 */
#include "tools_common.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define RESULTS_DEFAULT 100
#define RESULTS_MAX 1000
#define ENTRIES_MAX 100000              /* entries looked at in one call */
#define DEPTH_MAX 64                    /* directory levels below path */
#define FILE_SCAN_MAX (8u << 20)        /* bytes of one file searched */
#define CALL_SCAN_MAX (64u << 20)       /* bytes read in one call */
#define NEEDLE_MAX 1024
#define TEXT_MAX 240                    /* bytes of a matching line returned */
#define STOP SBX_E_CANCELLED

/* ---- search -------------------------------------------------------------- */

struct search {
    struct sbxm_call *c;
    const char *glob;       /* NULL: any name */
    const char *needle;     /* NULL: names only */
    size_t nlen;
    size_t max_results;
    json_object *matches;
    bool truncated;         /* a bound was reached: the matches may be partial */
    bool full;              /* max_results reached */
    uint64_t entries, scanned;
};

/* A queue of directories (and, for content, files) still to visit. */
struct item {
    char *path;
    int depth;
    bool dir;
};

struct queue {
    struct item *v;
    size_t head, len, cap;
};

static int push(struct queue *q, char *path, int depth, bool dir)
{
    if (!path)
        return SBX_E_NOMEM;
    if (q->len == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 64;
        struct item *v = realloc(q->v, cap * sizeof *v);
        if (!v) {
            free(path);
            return SBX_E_NOMEM;
        }
        q->v = v;
        q->cap = cap;
    }
    q->v[q->len++] = (struct item){path, depth, dir};
    return SBX_OK;
}

static void add_match(struct search *s, const char *path, const char *type, uint64_t line,
                      const char *text, size_t tlen)
{
    json_object *m = json_object_new_object();
    json_object_object_add(m, "path", sbxm_json_bytes(path, strlen(path)));
    if (type)
        json_object_object_add(m, "type", json_object_new_string(type));
    if (text) {
        json_object_object_add(m, "line", json_object_new_uint64(line));
        json_object_object_add(m, "text", sbxm_json_bytes(text, tlen));
    }
    json_object_array_add(s->matches, m);
    if (json_object_array_length(s->matches) >= s->max_results)
        s->full = true;
}

/* One directory's listing: names matched, subdirectories and files queued. */
struct lister {
    struct search *s;
    struct queue *q;
    const char *dir;
    int depth;
    int status;
};

static int list_entry(void *ctx, const struct sbx_file_info *fi)
{
    struct lister *l = ctx;
    struct search *s = l->s;
    if (s->full)
        return STOP;
    if (++s->entries > ENTRIES_MAX) {
        s->truncated = true;
        return STOP;
    }
    bool named = !s->glob || fnmatch(s->glob, fi->name, 0) == 0;
    if (fi->type == SBX_FILE_DIR && l->depth < DEPTH_MAX) {
        if ((l->status = push(l->q, sbxm_path_join(l->dir, fi->name), l->depth + 1, true)))
            return l->status;
    } else if (fi->type == SBX_FILE_DIR) {
        s->truncated = true;
    }
    if (!named)
        return SBX_OK;
    if (!s->needle) {
        char *p = sbxm_path_join(l->dir, fi->name);
        if (!p)
            return l->status = SBX_E_NOMEM;
        add_match(s, p, sbxm_file_type_name(fi->type), 0, NULL, 0);
        free(p);
        return s->full ? STOP : SBX_OK;
    }
    /* only regular files are read: never a symlink, FIFO or device */
    if (fi->type == SBX_FILE_REGULAR && fi->bytes >= s->nlen)
        return l->status = push(l->q, sbxm_path_join(l->dir, fi->name), l->depth, false);
    return SBX_OK;
}

/* Streaming scan of one file: a line matches when the needle occurs in it;
 * carry holds the last nlen-1 bytes of the line so far, so a match split
 * between chunks is found; text the line's first TEXT_MAX bytes. */
struct scanner {
    struct search *s;
    const char *path;
    uint64_t line, bytes;
    bool matched, first, binary, capped;
    char carry[NEEDLE_MAX];
    size_t carry_len;
    char text[TEXT_MAX];
    size_t text_len;
};

static void line_end(struct scanner *k)
{
    if (k->matched)
        add_match(k->s, k->path, NULL, k->line, k->text, sbxm_utf8_complete(k->text, k->text_len));
    k->line++;
    k->matched = false;
    k->carry_len = 0;
    k->text_len = 0;
}

static void scan_segment(struct scanner *k, const char *p, size_t n)
{
    size_t room = TEXT_MAX - k->text_len;
    size_t t = n < room ? n : room;
    memcpy(k->text + k->text_len, p, t);
    k->text_len += t;
    if (k->matched)
        return;
    size_t need = k->s->nlen;
    /* across the boundary: carry + the first need-1 bytes */
    if (k->carry_len) {
        char win[2 * NEEDLE_MAX];
        size_t head = n < need - 1 ? n : need - 1;
        memcpy(win, k->carry, k->carry_len);
        memcpy(win + k->carry_len, p, head);
        if (memmem(win, k->carry_len + head, k->s->needle, need)) {
            k->matched = true;
            return;
        }
    }
    if (memmem(p, n, k->s->needle, need)) {
        k->matched = true;
        return;
    }
    /* keep the last need-1 bytes of carry + segment */
    size_t keep = need - 1;
    if (n >= keep) {
        memcpy(k->carry, p + n - keep, keep);
        k->carry_len = keep;
    } else {
        size_t from_carry = keep - n < k->carry_len ? keep - n : k->carry_len;
        memmove(k->carry, k->carry + k->carry_len - from_carry, from_carry);
        memcpy(k->carry + from_carry, p, n);
        k->carry_len = from_carry + n;
    }
}

static int scan_chunk(void *ctx, const void *data, size_t n)
{
    struct scanner *k = ctx;
    struct search *s = k->s;
    const char *p = data;
    if (k->first) {
        k->first = false;
        if (memchr(p, '\0', n < 8192 ? n : 8192)) {
            k->binary = true; /* skipped as grep -I does */
            return STOP;
        }
    }
    uint64_t left = FILE_SCAN_MAX - k->bytes;
    uint64_t call_left = CALL_SCAN_MAX - s->scanned;
    if (call_left < left)
        left = call_left;
    if (n > left) {
        n = (size_t)left;
        k->capped = true;
        s->truncated = true;
    }
    k->bytes += n;
    s->scanned += n;
    while (n && !s->full) {
        const char *nl = memchr(p, '\n', n);
        size_t seg = nl ? (size_t)(nl - p) : n;
        scan_segment(k, p, seg);
        if (!nl)
            break;
        line_end(k);
        p = nl + 1;
        n -= seg + 1;
    }
    return s->full || k->capped ? STOP : SBX_OK;
}

static int scan_file(struct search *s, sbx_handle *h, const char *path, sbx_error *err)
{
    if (s->scanned >= CALL_SCAN_MAX) {
        s->truncated = true;
        return SBX_OK;
    }
    struct scanner k = {.s = s, .path = path, .line = 1, .first = true};
    struct sbx_sink sink = SBX_SINK_INIT(&k, scan_chunk);
    sbx_error e;
    int rc = sbx_read(h, path, &sink, s->c->cancel, &e);
    if (sbx_cancel_fired(s->c->cancel))
        return sbxm_tool_fail(err, "search", path, &e);
    if (rc != SBX_OK && !(k.binary || k.capped || s->full)) {
        /* a file that went away or cannot be read is skipped, not fatal */
        if (rc == SBX_E_NOT_FOUND || rc == SBX_E_DENIED || rc == SBX_E_INVALID)
            return SBX_OK;
        return sbxm_tool_fail(err, "search", path, &e);
    }
    if (!k.binary && !s->full && (k.matched || k.text_len))
        line_end(&k); /* the last line had no newline */
    return SBX_OK;
}

static int tool_search(struct sbxm_call *c, json_object **result, sbx_error *err)
{
    static const char tool[] = "search";
    const char *glob = sbxm_arg_str(c, "name");
    const char *needle = sbxm_arg_str(c, "content");
    if (glob && !*glob)
        glob = NULL;
    if (needle && !*needle)
        needle = NULL;
    if (!glob && !needle)
        return sbx_error_set(err, SBX_E_INVALID,
                             "give \"name\" (a glob), \"content\" (a string) or both");
    if (glob && strlen(glob) > 255)
        return sbx_error_set(err, SBX_E_INVALID, "\"name\" is over 255 bytes");
    if (needle && (strlen(needle) > NEEDLE_MAX || strchr(needle, '\n')))
        return sbx_error_set(err, SBX_E_INVALID,
                             "\"content\" must be one line of at most %d bytes",
                             NEEDLE_MAX);
    int64_t max = sbxm_arg_int(c, "max_results", RESULTS_DEFAULT);
    if (max < 1)
        return sbx_error_set(err, SBX_E_INVALID, "\"max_results\" must be 1 or more");
    if (max > RESULTS_MAX)
        max = RESULTS_MAX;
    sbx_handle *h;
    int rc = sbxm_tool_sandbox(c, tool, &h, err);
    if (rc != SBX_OK)
        return rc;
    char *root;
    if ((rc = sbxm_tool_path(c, h, tool, "path", true, &root, err)) != SBX_OK)
        return rc;

    struct search s = {.c = c, .glob = glob, .needle = needle,
                       .nlen = needle ? strlen(needle) : 0, .max_results = (size_t)max,
                       .matches = json_object_new_array()};
    struct queue q = {0};
    bool root_dir = true;
    if (*root) {
        struct sbx_file_info fi;
        memset(&fi, 0, sizeof fi);
        fi.size = sizeof fi;
        sbx_error e;
        rc = sbx_file_stat(h, root, &fi, c->cancel, &e);
        if (rc != SBX_OK)
            rc = sbxm_tool_fail(err, tool, root, &e);
        else if (fi.type == SBX_FILE_REGULAR && needle)
            root_dir = false;
        else if (fi.type != SBX_FILE_DIR)
            rc = sbxm_tool_error(err, SBX_E_INVALID, tool, root, "not a directory (a %s)",
                                 sbxm_file_type_name(fi.type));
    }
    if (rc == SBX_OK)
        rc = push(&q, strdup(root), 0, root_dir);
    if (rc == SBX_E_NOMEM)
        sbxm_tool_error(err, rc, tool, root, "out of memory");

    while (rc == SBX_OK && q.head < q.len && !s.full) {
        if (sbx_cancel_fired(c->cancel)) {
            rc = sbxm_tool_error(err, SBX_E_CANCELLED, tool, root, "cancelled");
            break;
        }
        struct item it = q.v[q.head];
        q.v[q.head++].path = NULL;
        if (!it.dir) {
            rc = scan_file(&s, h, it.path, err);
        } else if (s.entries >= ENTRIES_MAX) {
            s.truncated = true;
        } else {
            struct lister l = {&s, &q, it.path, it.depth, SBX_OK};
            struct sbx_file_list_sink sink = {sizeof sink, &l, list_entry};
            sbx_error e;
            rc = sbx_file_list(h, it.path, &sink, c->cancel, &e);
            if (l.status != SBX_OK)
                rc = sbxm_tool_error(err, l.status, tool, it.path, "out of memory");
            else if (rc != SBX_OK && (s.full || s.truncated) && !sbx_cancel_fired(c->cancel))
                rc = SBX_OK; /* stopped at a bound */
            else if (rc == SBX_E_NOT_FOUND && it.depth > 0)
                rc = SBX_OK; /* went away while we walked */
            else if (rc != SBX_OK)
                rc = sbxm_tool_fail(err, tool, it.path, &e);
        }
        free(it.path);
    }
    if (s.full && q.head < q.len)
        s.truncated = true;
    for (size_t i = q.head; i < q.len; i++)
        free(q.v[i].path);
    free(q.v);
    if (rc != SBX_OK) {
        json_object_put(s.matches);
        free(root);
        return rc;
    }
    json_object *out = json_object_new_object();
    json_object_object_add(out, "path", json_object_new_string(sbxm_path_shown(root)));
    json_object_object_add(out, "matches", s.matches);
    json_object_object_add(out, "truncated", json_object_new_boolean(s.truncated || s.full));
    json_object_object_add(out, "entries_visited", json_object_new_uint64(s.entries));
    json_object_object_add(out, "bytes_scanned", json_object_new_uint64(s.scanned));
    *result = out;
    free(root);
    return SBX_OK;
}

/* ---- git_clone ----------------------------------------------------------- */

#define GIT_URL_MAX 2048
#define GIT_TIMEOUT_MS (30 * 60 * 1000)
#define GIT_ERR_KEEP 2048

/* The transports git may use, here and for whatever the clone leads to
 * (redirects, submodules): git's own allowlist. */
static const char git_protocols[] = "GIT_ALLOW_PROTOCOL=https:http:ssh:git";

/* Whether url is one git_clone accepts: scheme://... with one of the four
 * schemes, or the scp-like user@host:path form of ssh. */
static bool url_ok(const char *url)
{
    size_t n = strlen(url);
    if (!n || n > GIT_URL_MAX || url[0] == '-')
        return false;
    for (const unsigned char *p = (const unsigned char *)url; *p; p++)
        if (*p <= 0x20 || *p == 0x7f || *p == '\\')
            return false;
    if (strstr(url, "::"))
        return false; /* git's "<transport>::<address>" remote helpers (ext::) */
    static const char *const schemes[] = {"https://", "http://", "ssh://", "git://"};
    for (size_t i = 0; i < sizeof schemes / sizeof *schemes; i++) {
        size_t k = strlen(schemes[i]);
        if (!strncasecmp(url, schemes[i], k))
            return url[k] && url[k] != '/' && url[k] != '-';
    }
    /* user@host:path, host of letters, digits, '.', '-' */
    const char *at = strchr(url, '@'), *colon = strchr(url, ':');
    if (!at || !colon || at > colon || at == url || colon == at + 1)
        return false;
    if (strchr(url, '/') && strchr(url, '/') < colon)
        return false;
    for (const char *p = at + 1; p < colon; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
              (*p >= '0' && *p <= '9') || *p == '.' || *p == '-'))
            return false;
    return at[1] != '-' && colon[1] != '\0';
}

/* A branch or tag name as git check-ref-format would take it (roughly,
 * and stricter): [A-Za-z0-9._/-], no leading '-' or '/', no "..", no "//",
 * not ending in '/', ".lock" or '.'. */
static bool branch_ok(const char *b)
{
    size_t n = strlen(b);
    if (!n || n > 255 || b[0] == '-' || b[0] == '/' || b[n - 1] == '/' || b[n - 1] == '.')
        return false;
    if (strstr(b, "..") || strstr(b, "//") || strstr(b, "/.") ||
        (n >= 5 && !strcmp(b + n - 5, ".lock")))
        return false;
    return b[0] != '.' && strspn(b, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                    "0123456789._/-") == n;
}

/* The message of a failed git, with the URL's credentials (user:password@)
 * blotted out wherever they appear. */
static void redact(char *msg, const char *url)
{
    const char *sep = strstr(url, "://");
    const char *start = sep ? sep + 3 : url;
    const char *at = strchr(start, '@');
    const char *slash = strchr(start, '/');
    if (!at || (slash && slash < at))
        return;
    size_t ul = (size_t)(at - start);
    if (!ul)
        return;
    char user[256];
    if (ul >= sizeof user)
        ul = sizeof user - 1;
    memcpy(user, start, ul);
    user[ul] = '\0';
    for (char *p = strstr(msg, user); p; p = strstr(p + 3, user)) {
        memset(p, '*', ul > 3 ? 3 : ul);
        memmove(p + 3, p + ul, strlen(p + ul) + 1);
    }
}

/* Run argv in dir with the clone's environment; stderr (and stdout when
 * out is not NULL) captured, bounded. */
static int run_git(struct sbxm_call *c, sbx_handle *h, const char *dir,
                   const char *const *argv, sbx_capture *out, sbx_capture *errc,
                   struct sbx_exec_result *res, sbx_error *err)
{
    static const char *const env[] = {
        git_protocols,
        "GIT_TERMINAL_PROMPT=0",                /* never wait for a password */
        "GIT_SSH_COMMAND=ssh -o BatchMode=yes", /* nor for ssh's questions */
        "GIT_CONFIG_NOSYSTEM=1",
        "LC_ALL=C",
        NULL,
    };
    struct sbx_sink so = out ? sbx_capture_sink(out) : (struct sbx_sink){0};
    struct sbx_sink se = sbx_capture_sink(errc);
    struct sbx_exec_args a = {
        .size = sizeof a,
        .argv = argv,
        .env = NULL,
        .cwd = dir,
        .timeout_ms = GIT_TIMEOUT_MS,
        .out = out ? &so : NULL,
        .err = &se,
    };
    /* the sandbox's environment (PATH, HOME) plus ours: env NULL would
     * drop ours, a whole env would drop its PATH; so pass ours through
     * `env`, the one program every sandbox with git has */
    const char *full[16];
    size_t n = 0;
    full[n++] = "env";
    for (size_t i = 0; env[i]; i++)
        full[n++] = env[i];
    for (size_t i = 0; argv[i] && n < 15; i++)
        full[n++] = argv[i];
    full[n] = NULL;
    a.argv = full;
    memset(res, 0, sizeof *res);
    res->size = sizeof *res;
    return sbx_exec(h, &a, res, c->cancel, err);
}

static int tool_git_clone(struct sbxm_call *c, json_object **result, sbx_error *err)
{
    static const char tool[] = "git_clone";
    const char *url = sbxm_arg_str(c, "url");
    const char *branch = sbxm_arg_str(c, "branch");
    int64_t depth = sbxm_arg_int(c, "depth", 0);
    if (!url || !url_ok(url))
        return sbx_error_set(err, SBX_E_INVALID,
                             "\"url\" must be an https://, http://, ssh:// or git:// URL "
                             "or user@host:path (not a local path, file://, a remote "
                             "helper such as ext::, or anything starting with '-')");
    if (branch && !branch_ok(branch))
        return sbx_error_set(err, SBX_E_INVALID,
                             "invalid \"branch\" (a branch or tag name: letters, "
                             "digits, '.', '_', '/', '-', not starting with '-')");
    if (depth < 0 || depth > 1000000)
        return sbx_error_set(err, SBX_E_INVALID,
                             "\"depth\" must be 1 to 1000000 (0 or absent: full)");
    sbx_handle *h;
    int rc = sbxm_tool_sandbox(c, tool, &h, err);
    if (rc != SBX_OK)
        return rc;
    char *path;
    if ((rc = sbxm_tool_path(c, h, tool, "path", false, &path, err)) != SBX_OK)
        return rc;
    /* git creates only the last component, in a parent the provider
     * resolved (no symlink anywhere): git itself never walks a path */
    char *slash = strrchr(path, '/');
    char *parent = slash ? strndup(path, (size_t)(slash - path)) : strdup("");
    const char *base = slash ? slash + 1 : path;
    sbx_error e;
    struct sbx_file_info fi;
    memset(&fi, 0, sizeof fi);
    fi.size = sizeof fi;
    if (!parent) {
        rc = sbxm_tool_error(err, SBX_E_NOMEM, tool, path, "out of memory");
    } else if (base[0] == '-') {
        rc = sbxm_tool_error(err, SBX_E_INVALID, tool, path, "a name starting with '-'");
    } else if (*parent && (rc = sbx_file_stat(h, parent, &fi, c->cancel, &e)) != SBX_OK) {
        rc = sbxm_tool_fail(err, tool, parent, &e);
    } else if (*parent && fi.type != SBX_FILE_DIR) {
        rc = sbxm_tool_error(err, SBX_E_INVALID, tool, parent, "not a directory (a %s)",
                             sbxm_file_type_name(fi.type));
    } else if ((rc = sbx_file_stat(h, path, &fi, c->cancel, &e)) == SBX_OK) {
        rc = sbxm_tool_error(err, SBX_E_EXISTS, tool, path, "exists already");
    } else if (rc != SBX_E_NOT_FOUND) {
        rc = sbxm_tool_fail(err, tool, path, &e);
    } else {
        rc = SBX_OK;
    }
    char depth_text[32] = "";
    if (rc == SBX_OK) {
        sbxm_progress(c, 0, 2, "cloning");
        const char *argv[12];
        size_t n = 0;
        argv[n++] = "git";
        argv[n++] = "clone";
        argv[n++] = "--no-recurse-submodules";
        if (branch) {
            argv[n++] = "--branch";
            argv[n++] = branch;
        }
        if (depth > 0) {
            snprintf(depth_text, sizeof depth_text, "--depth=%lld", (long long)depth);
            argv[n++] = depth_text;
        }
        argv[n++] = "--";
        argv[n++] = url;
        argv[n++] = base;
        argv[n] = NULL;
        sbx_capture ec;
        sbx_capture_init(&ec, 0, GIT_ERR_KEEP);
        struct sbx_exec_result res;
        rc = run_git(c, h, parent, argv, NULL, &ec, &res, &e);
        if (rc == SBX_E_NO_COMMAND || (rc == SBX_OK && res.exit_code == 127)) {
            rc = sbxm_tool_error(err, SBX_E_UNSUPPORTED, tool, path,
                                 "git is not installed in the sandbox (its image has no "
                                 "git program)");
        } else if (rc != SBX_OK) {
            rc = sbxm_tool_fail(err, tool, path, &e);
        } else if (res.exit_code != 0 || res.term_signal) {
            char *text = sbx_capture_text(&ec);
            char *msg = text;
            if (msg) {
                size_t l = strlen(msg);
                while (l && (msg[l - 1] == '\n' || msg[l - 1] == ' '))
                    msg[--l] = '\0';
                redact(msg, url);
            }
            if (res.timed_out)
                rc = sbxm_tool_error(err, SBX_E_TIMEOUT, tool, path,
                                     "git clone timed out: %.900s", msg ? msg : "");
            else
                rc = sbxm_tool_error(err, SBX_E_INVALID, tool, path,
                                     "git clone failed (exit %d): %.900s", res.exit_code,
                                     msg ? msg : "");
            free(text);
        }
        sbx_capture_free(&ec);
    }
    json_object *commit = NULL;
    if (rc == SBX_OK) {
        sbxm_progress(c, 1, 2, "cloned");
        const char *argv[] = {"git", "-C", base, "rev-parse", "--verify", "-q", "HEAD", NULL};
        sbx_capture oc, ec;
        sbx_capture_init(&oc, 128, 0);
        sbx_capture_init(&ec, 0, 256);
        struct sbx_exec_result res;
        if (run_git(c, h, parent, argv, &oc, &ec, &res, &e) == SBX_OK &&
            res.exit_code == 0) {
            char *t = sbx_capture_text(&oc);
            if (t) {
                t[strcspn(t, "\n")] = '\0';
                if (strlen(t) >= 40 && strspn(t, "0123456789abcdef") == strlen(t))
                    commit = json_object_new_string(t);
            }
            free(t);
        }
        sbx_capture_free(&oc);
        sbx_capture_free(&ec);
        json_object *out = json_object_new_object();
        json_object_object_add(out, "path", sbxm_json_bytes(path, strlen(path)));
        json_object_object_add(out, "commit", commit); /* null: an empty repository */
        *result = out;
    }
    free(parent);
    free(path);
    return rc;
}

/* ---- the table ----------------------------------------------------------- */

#define SANDBOX_PROP "\"sandbox\":{\"type\":\"string\",\"description\":\"the sandbox (session key)\"}"

const struct sbxm_tool sbxm_tools_search[] = {
    {"search", "Search files",
     "Find files under a workspace directory by name (a glob such as \"*.c\") and/or by "
     "content (a fixed string, one line; binary files are skipped). Bounded: max_results "
     "(100 by default, 1000 at most), 100000 entries, 64 levels, 8 MiB searched per file "
     "and 64 MiB per call; truncated says a bound was reached. Symlinks are never "
     "followed.",
     "{\"type\":\"object\",\"properties\":{" SANDBOX_PROP ","
     "\"path\":{\"type\":\"string\",\"description\":\"workspace-relative directory (or file) "
     "to search; \\\".\\\" is the root\"},"
     "\"name\":{\"type\":\"string\",\"description\":\"glob on entry names\"},"
     "\"content\":{\"type\":\"string\",\"description\":\"fixed string to find\"},"
     "\"max_results\":{\"type\":\"integer\",\"minimum\":1}},"
     "\"required\":[\"sandbox\",\"path\"],\"additionalProperties\":false}",
     NULL, SBXM_TOOLS_AGENT, true, tool_search},
    {"git_clone", "Clone a git repository",
     "Clone a repository into a new workspace directory with git in the sandbox: https, "
     "http, ssh or git URLs only; optional branch (or tag) and depth. Returns the commit "
     "checked out (null for an empty repository).",
     "{\"type\":\"object\",\"properties\":{" SANDBOX_PROP ","
     "\"url\":{\"type\":\"string\"},"
     "\"path\":{\"type\":\"string\",\"description\":\"workspace-relative directory to make\"},"
     "\"branch\":{\"type\":\"string\"},"
     "\"depth\":{\"type\":\"integer\",\"minimum\":1}},"
     "\"required\":[\"sandbox\",\"url\",\"path\"],\"additionalProperties\":false}",
     NULL, SBXM_TOOLS_AGENT, false, tool_git_clone},
    {0},
};
