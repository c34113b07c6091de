/*
 * manifest_parse.c - manifest text (YAML, or JSON, which YAML reads) into
 * struct sbx_manifest, with the line of everything for messages. Only the
 * shape is checked here; manifest_check.c checks the meaning.
 */
#include "config/manifest_internal.h"
#include "base/text_escape.h"

#include <openssl/evp.h>
#include <yaml.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct parse {
    struct sbx_manifest *m;
    yaml_document_t doc;
    unsigned char *seen; /* per node: visited once (aliases are refused) */
    size_t nnodes;
    sbx_error *err;
};

static int line_of(const yaml_node_t *n)
{
    return (int)n->start_mark.line + 1;
}

static int bad(struct parse *p, const yaml_node_t *n, const char *fmt, ...)
    SBX_PRINTF_LIKE(3, 4);

static int bad(struct parse *p, const yaml_node_t *n, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return sbx_error_set(p->err, SBX_E_INVALID, "%s:%d: %s", p->m->name,
                         n ? line_of(n) : 0, msg);
}

/* Node `id`, refusing a node reached twice (an alias). */
static yaml_node_t *node(struct parse *p, int id, const yaml_node_t *from, int *rc)
{
    yaml_node_t *n = yaml_document_get_node(&p->doc, id);
    if (!n) {
        *rc = bad(p, from, "malformed document");
        return NULL;
    }
    size_t i = (size_t)(id - 1);
    if (i < p->nnodes && p->seen[i]) {
        *rc = bad(p, n, "aliases are not allowed in a manifest");
        return NULL;
    }
    if (i < p->nnodes)
        p->seen[i] = 1;
    return n;
}

static const char *scalar(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* Mappings of a manifest are small (the environment is bounded below), so
 * a duplicate key is found by looking at the pairs before this one. */
#define MAP_PAIRS_MAX 1024

static int check_map(struct parse *p, const yaml_node_t *map, const char *what)
{
    size_t n = (size_t)(map->data.mapping.pairs.top - map->data.mapping.pairs.start);
    if (n > MAP_PAIRS_MAX)
        return bad(p, map, "%s: more than %d keys", what, MAP_PAIRS_MAX);
    for (yaml_node_pair_t *kv = map->data.mapping.pairs.start;
         kv < map->data.mapping.pairs.top; kv++) {
        const char *k = scalar(yaml_document_get_node(&p->doc, kv->key));
        for (yaml_node_pair_t *b = map->data.mapping.pairs.start; k && b < kv; b++) {
            const char *bk = scalar(yaml_document_get_node(&p->doc, b->key));
            if (bk && !strcmp(bk, k))
                return bad(p, yaml_document_get_node(&p->doc, kv->key),
                           "%s: key \"%.40s\" is given twice", what, k);
        }
    }
    return SBX_OK;
}

static int want_scalar(struct parse *p, const yaml_node_t *n, const char *what,
                       const char **out)
{
    *out = scalar(n);
    if (!*out)
        return bad(p, n, "%s: expected a string", what);
    if (strlen(*out) != n->data.scalar.length)
        return bad(p, n, "%s: holds a NUL byte", what);
    return SBX_OK;
}

static int dup_into(struct parse *p, const char *s, size_t len, char **out)
{
    *out = strndup(s, len);
    return *out ? SBX_OK : sbx_error_set(p->err, SBX_E_NOMEM, "out of memory");
}

static int want_string(struct parse *p, const yaml_node_t *n, const char *what, char **out)
{
    const char *s;
    int rc = want_scalar(p, n, what, &s);
    return rc != SBX_OK ? rc : dup_into(p, s, strlen(s), out);
}

static int want_long(struct parse *p, const yaml_node_t *n, const char *what, long min,
                     long max, int base, long *out)
{
    const char *s;
    int rc = want_scalar(p, n, what, &s);
    if (rc != SBX_OK)
        return rc;
    char *end;
    errno = 0;
    long v = strtol(s, &end, base);
    if (errno || end == s || *end || v < min || v > max)
        return bad(p, n, "%s: expected a number from %ld to %ld, got \"%.40s\"", what,
                   min, max, s);
    *out = v;
    return SBX_OK;
}

/* ---- entries ------------------------------------------------------------ */

static const struct {
    const char *name;
    int type;
} types[] = {{"file", MF_FILE},           {"dir", MF_DIR},
             {"local_file", MF_LOCAL_FILE}, {"local_dir", MF_LOCAL_DIR},
             {"git_repo", MF_GIT_REPO}};

/* Which keys an entry of each type may have (besides path, type, mode,
 * group, permissions, executable, description). The SDK's names (src;
 * repo and host; a dir's children) are accepted beside sbx's. */
static bool key_allowed(int type, const char *key)
{
    switch (type) {
    case MF_FILE:
        return !strcmp(key, "content") || !strcmp(key, "encoding");
    case MF_LOCAL_FILE:
    case MF_LOCAL_DIR:
        return !strcmp(key, "source") || !strcmp(key, "src");
    case MF_GIT_REPO:
        return !strcmp(key, "url") || !strcmp(key, "ref") || !strcmp(key, "repo") ||
               !strcmp(key, "host");
    case MF_DIR:
        return !strcmp(key, "children");
    default:
        return false;
    }
}

static int decode_base64(struct parse *p, const yaml_node_t *n, const char *text,
                         struct manifest_entry *e)
{
    /* EVP_DecodeBlock wants no whitespace: YAML folds long values. */
    size_t len = strlen(text);
    char *clean = malloc(len + 1);
    if (!clean)
        return sbx_error_set(p->err, SBX_E_NOMEM, "out of memory");
    size_t k = 0;
    for (size_t i = 0; i < len; i++)
        if (text[i] != ' ' && text[i] != '\n' && text[i] != '\r' && text[i] != '\t')
            clean[k++] = text[i];
    clean[k] = '\0';
    /* '=' only as the padding of the last quantum: EVP_DecodeBlock would
     * decode "QQ==QQ==" as if the first '=' were not there */
    size_t eq = strcspn(clean, "=");
    bool padding_ok = eq == k || (eq + 2 >= k && strspn(clean + eq, "=") == k - eq);
    if (k % 4 || k > INT32_MAX || !padding_ok) {
        free(clean);
        return bad(p, n, "entry %s: content is not valid base64", e->path);
    }
    e->content = malloc(k / 4 * 3 + 1);
    int got = e->content ? EVP_DecodeBlock(e->content, (unsigned char *)clean, (int)k) : -1;
    int pad = (k >= 1 && clean[k - 1] == '=') + (k >= 2 && clean[k - 2] == '=');
    free(clean);
    if (got < 0)
        return bad(p, n, "entry %s: content is not valid base64", e->path);
    e->content_len = (size_t)got - (size_t)pad;
    return SBX_OK;
}

/* The mode the SDK's `permissions` gives: a number (the mode, as the SDK's
 * Permissions.fromMode takes it: decimal, or octal with a leading 0 or
 * 0o), a string like "-rwxr-xr-x", or a mapping of owner, group and other
 * (0 to 7 each; owner defaults to 7, the others to 0, as in the SDK) with
 * an optional directory flag. Bits outside 0777 (set-id, sticky) are
 * refused: sbx writes permission bits only. */
static int parse_permissions(struct parse *p, const yaml_node_t *n, const char *shown,
                             long *mode)
{
    if (n->type == YAML_SCALAR_NODE) {
        const char *s = scalar(n);
        size_t len = strlen(s);
        if (len == 11 && strchr(".@+", s[10]))
            len = 10; /* ls's ACL and context markers */
        if (len == 10 && (s[0] == '-' || s[0] == 'd')) {
            static const char want[] = "rwxrwxrwx";
            long m = 0;
            for (int i = 0; i < 9; i++) {
                if (s[1 + i] == want[i])
                    m |= 1L << (8 - i);
                else if (s[1 + i] != '-')
                    return bad(p, n,
                               "entry %s: permissions \"%.12s\": only r, w, x and - "
                               "(set-id and sticky bits are not written)",
                               shown, s);
            }
            *mode = m;
        } else {
            char *end;
            errno = 0;
            int base = 10;
            if (s[0] == '0' && (s[1] == 'o' || s[1] == 'O'))
                s += 2, base = 8;
            else if (s[0] == '0' && s[1])
                base = 8;
            long v = strtol(s, &end, base);
            if (errno || end == s || *end || v < 0 || v > 0177777)
                return bad(p, n,
                           "entry %s: permissions: expected a mode number, a string like "
                           "-rwxr-xr-x or a mapping of owner, group and other",
                           shown);
            if (v & 07000)
                return bad(p, n,
                           "entry %s: permissions %#lo has set-id or sticky bits (only "
                           "0777 is written)",
                           shown, v & 07777);
            *mode = v & 0777;
        }
    } else if (n->type == YAML_MAPPING_NODE) {
        long bits[3] = {7, 0, 0};
        static const char *const who[] = {"owner", "group", "other"};
        int rc = check_map(p, n, "permissions");
        for (yaml_node_pair_t *kv = n->data.mapping.pairs.start;
             rc == SBX_OK && kv < n->data.mapping.pairs.top; kv++) {
            yaml_node_t *kn = node(p, kv->key, n, &rc);
            yaml_node_t *vn = kn ? node(p, kv->value, kn, &rc) : NULL;
            const char *k = scalar(kn);
            if (!vn)
                break;
            int i = 0;
            while (i < 3 && (!k || strcmp(k, who[i])))
                i++;
            if (i < 3)
                rc = want_long(p, vn, who[i], 0, 7, 10, &bits[i]);
            else if (k && !strcmp(k, "directory"))
                continue; /* the entry's type says it */
            else if (k && !strcmp(k, "sticky")) {
                const char *v = scalar(vn);
                if (!v || strcmp(v, "false"))
                    rc = bad(p, vn, "entry %s: permissions: sticky is not written", shown);
            } else
                rc = bad(p, kn,
                         "entry %s: permissions: unknown key \"%.40s\" (expected owner, "
                         "group, other, directory)",
                         shown, k ? k : "?");
        }
        if (rc != SBX_OK)
            return rc;
        *mode = bits[0] << 6 | bits[1] << 3 | bits[2];
    } else
        return bad(p, n,
                   "entry %s: permissions: expected a mode number, a string like "
                   "-rwxr-xr-x or a mapping of owner, group and other",
                   shown);
    if (*mode == 0)
        return bad(p, n, "entry %s: permissions give mode 0, which sbx does not write",
                   shown);
    return SBX_OK;
}

static int parse_entries_into(struct parse *p, const yaml_node_t *n, const char *prefix);

/* One entry. In the list shape (keypath NULL) the mapping has a path; in
 * the SDK's mapping shape keypath is the entry's path (its key, below the
 * dir whose children it is). */
static int parse_entry(struct parse *p, const yaml_node_t *n, struct manifest_entry *e,
                       const char *keypath)
{
    e->mode = -1;
    e->root = -1;
    e->line = line_of(n);
    if (n->type != YAML_MAPPING_NODE)
        return bad(p, n, keypath ? "entry %.120s: expected a mapping with type"
                                 : "an entry must be a mapping with path and type%.0s",
                   keypath ? keypath : "");
    const yaml_node_t *path = NULL, *type = NULL;
    int rc = check_map(p, n, "entry");
    if (rc != SBX_OK)
        return rc;
    /* path and type first: every later message names the entry */
    for (yaml_node_pair_t *kv = n->data.mapping.pairs.start;
         rc == SBX_OK && kv < n->data.mapping.pairs.top; kv++) {
        const char *k = scalar(yaml_document_get_node(&p->doc, kv->key));
        if (k && !strcmp(k, "path"))
            path = yaml_document_get_node(&p->doc, kv->value);
        else if (k && !strcmp(k, "type"))
            type = yaml_document_get_node(&p->doc, kv->value);
    }
    if (keypath && path)
        return bad(p, path, "entry %.120s: path: an entry of a mapping is named by its key",
                   keypath);
    if (keypath)
        rc = dup_into(p, keypath, strlen(keypath), &e->path);
    else if (!path)
        return bad(p, n, "an entry has no path");
    else
        rc = want_string(p, path, "path", &e->path);
    if (rc != SBX_OK)
        return rc;
    char shown[160];
    sbxh_text_escape(shown, sizeof shown, e->path, 120);
    const char *t = scalar(type);
    for (size_t i = 0; t && i < sizeof types / sizeof *types; i++)
        if (!strcmp(types[i].name, t))
            e->type = types[i].type;
    if (!e->type)
        return bad(p, type ? type : n,
                   "entry %s: type must be file, dir, local_file, local_dir or git_repo",
                   shown);
    const yaml_node_t *content = NULL, *encoding = NULL, *children = NULL, *mode_node = NULL;
    const yaml_node_t *repo = NULL, *host = NULL;
    for (yaml_node_pair_t *kv = n->data.mapping.pairs.start;
         rc == SBX_OK && kv < n->data.mapping.pairs.top; kv++) {
        yaml_node_t *kn = node(p, kv->key, n, &rc);
        yaml_node_t *vn = kn ? node(p, kv->value, kn, &rc) : NULL;
        if (!vn)
            break;
        const char *k = scalar(kn);
        if (!k)
            rc = bad(p, kn, "entry %s: keys must be strings", shown);
        else if (!strcmp(k, "path") || !strcmp(k, "type") || !strcmp(k, "description"))
            continue;
        else if (!strcmp(k, "mode") || !strcmp(k, "permissions") || !strcmp(k, "executable")) {
            /* one way of saying the mode per entry */
            if (mode_node)
                rc = bad(p, kn, "entry %s: give one of mode, permissions and executable",
                         shown);
            mode_node = kn;
            long mode = -1;
            if (rc != SBX_OK)
                break;
            if (!strcmp(k, "mode"))
                rc = want_long(p, vn, "mode", 1, 0777, 8, &mode);
            else if (!strcmp(k, "permissions"))
                rc = parse_permissions(p, vn, shown, &mode);
            else {
                const char *v = scalar(vn);
                if (e->type != MF_FILE && e->type != MF_LOCAL_FILE)
                    rc = bad(p, kn, "entry %s: executable is for files", shown);
                else if (v && !strcmp(v, "true"))
                    mode = 0755;
                else if (!v || strcmp(v, "false"))
                    rc = bad(p, vn, "entry %s: executable: expected true or false", shown);
            }
            e->mode = (int)mode;
        } else if (!strcmp(k, "group")) {
            /* a name, or the SDK's group object with a name */
            const yaml_node_t *gn = vn;
            if (vn->type == YAML_MAPPING_NODE) {
                gn = NULL;
                for (yaml_node_pair_t *g = vn->data.mapping.pairs.start;
                     g < vn->data.mapping.pairs.top; g++) {
                    const char *gk = scalar(yaml_document_get_node(&p->doc, g->key));
                    if (gk && !strcmp(gk, "name"))
                        gn = yaml_document_get_node(&p->doc, g->value);
                    else
                        return bad(p, vn, "entry %s: group: expected a name", shown);
                }
                if (!gn)
                    return bad(p, vn, "entry %s: group: expected a name", shown);
            }
            rc = want_string(p, gn, "group", &e->group);
        } else if (!strcmp(k, "ephemeral")) {
            const char *v = scalar(vn);
            if (!v || strcmp(v, "false"))
                rc = bad(p, vn,
                         "entry %s: ephemeral entries are not supported (a snapshot "
                         "holds the whole workspace)",
                         shown);
        } else if (!key_allowed(e->type, k))
            rc = bad(p, kn, "entry %s: unknown key \"%.40s\" for type %s", shown, k, t);
        else if (!strcmp(k, "content"))
            content = vn;
        else if (!strcmp(k, "encoding"))
            encoding = vn;
        else if (!strcmp(k, "source") || !strcmp(k, "src")) {
            if (e->source)
                rc = bad(p, kn, "entry %s: give source or src, not both", shown);
            else
                rc = want_string(p, vn, k, &e->source);
        } else if (!strcmp(k, "url"))
            rc = want_string(p, vn, "url", &e->url);
        else if (!strcmp(k, "ref"))
            rc = want_string(p, vn, "ref", &e->ref);
        else if (!strcmp(k, "repo"))
            repo = vn;
        else if (!strcmp(k, "host"))
            host = vn;
        else if (!strcmp(k, "children"))
            children = vn;
    }
    if (rc != SBX_OK)
        return rc;
    if (repo || host) {
        /* the SDK's git_repo: repo "owner/name" on host (github.com) */
        const char *r = NULL, *h = "github.com";
        if (e->url)
            return bad(p, repo ? repo : host, "entry %s: give url or repo, not both", shown);
        if (!repo)
            return bad(p, host, "entry %s: host without repo", shown);
        if ((rc = want_scalar(p, repo, "repo", &r)) != SBX_OK ||
            (host && (rc = want_scalar(p, host, "host", &h)) != SBX_OK))
            return rc;
        if (!*r || !*h || strchr(h, '/') || strchr(h, '@') || strstr(r, "..") ||
            r[0] == '/' || strspn(r, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                     "0123456789._-/") != strlen(r))
            return bad(p, repo, "entry %s: repo \"%.60s\" on host \"%.60s\" is not owner/name",
                       shown, r, h);
        size_t l = strlen(h) + strlen(r) + 10;
        if (!(e->url = malloc(l)))
            return sbx_error_set(p->err, SBX_E_NOMEM, "out of memory");
        snprintf(e->url, l, "https://%s/%s", h, r);
    }
    if (children) {
        /* the SDK's nested dir: its children are entries below its path */
        if (children->type != YAML_MAPPING_NODE)
            return bad(p, children, "entry %s: children: expected a mapping of name: entry",
                       shown);
        rc = parse_entries_into(p, children, e->path);
        if (rc != SBX_OK)
            return rc;
    }
    if (e->type == MF_FILE) {
        const char *text = NULL, *enc = "text";
        if (!content)
            return bad(p, n, "entry %s: a file needs content", shown);
        if (content->type != YAML_SCALAR_NODE)
            return bad(p, content, "entry %s: content: expected a string", shown);
        text = (const char *)content->data.scalar.value;
        if (encoding && (rc = want_scalar(p, encoding, "encoding", &enc)) != SBX_OK)
            return rc;
        if (!strcmp(enc, "base64"))
            return decode_base64(p, content, text, e);
        if (strcmp(enc, "text"))
            return bad(p, encoding, "entry %s: encoding must be text or base64", shown);
        e->content_len = content->data.scalar.length;
        e->content = malloc(e->content_len + 1);
        if (!e->content)
            return sbx_error_set(p->err, SBX_E_NOMEM, "out of memory");
        memcpy(e->content, text, e->content_len);
        return SBX_OK;
    }
    if ((e->type == MF_LOCAL_FILE || e->type == MF_LOCAL_DIR) && !e->source)
        return bad(p, n, "entry %s: %s needs a source", shown, t);
    if (e->type == MF_GIT_REPO && !e->url)
        return bad(p, n, "entry %s: git_repo needs a url", shown);
    return SBX_OK;
}

/* A new zeroed entry at the end of the manifest's entries (the array is
 * allocated for SBX_MANIFEST_ENTRIES_MAX at the first entry: a dir's
 * children make the count known only while parsing). */
static int next_entry(struct parse *p, const yaml_node_t *n, struct manifest_entry **out)
{
    if (p->m->nentries == SBX_MANIFEST_ENTRIES_MAX)
        return bad(p, n, "entries: more than %d", SBX_MANIFEST_ENTRIES_MAX);
    if (!p->m->entries &&
        !(p->m->entries = calloc(SBX_MANIFEST_ENTRIES_MAX, sizeof *p->m->entries)))
        return sbx_error_set(p->err, SBX_E_NOMEM, "out of memory");
    *out = &p->m->entries[p->m->nentries++];
    return SBX_OK;
}

/* The SDK's shape: a mapping of path: entry; below a dir, a mapping of
 * name: entry, whose paths are the dir's path, "/", the name. */
static int parse_entries_into(struct parse *p, const yaml_node_t *n, const char *prefix)
{
    int rc = check_map(p, n, prefix ? "children" : "entries");
    for (yaml_node_pair_t *kv = n->data.mapping.pairs.start;
         rc == SBX_OK && kv < n->data.mapping.pairs.top; kv++) {
        yaml_node_t *kn = node(p, kv->key, n, &rc);
        yaml_node_t *vn = kn ? node(p, kv->value, kn, &rc) : NULL;
        const char *k = NULL;
        struct manifest_entry *e;
        if (!vn || (rc = want_scalar(p, kn, "entry path", &k)) != SBX_OK ||
            (rc = next_entry(p, kn, &e)) != SBX_OK)
            break;
        if (prefix && (!*k || strchr(k, '/') || !strcmp(k, ".") || !strcmp(k, ".."))) {
            char shown[160];
            rc = bad(p, kn, "entry %s: children: \"%.60s\" is not a name", prefix,
                     sbxh_text_escape(shown, sizeof shown, k, 60));
            break;
        }
        size_t l = (prefix ? strlen(prefix) + 1 : 0) + strlen(k) + 1;
        char *path = malloc(l);
        if (!path)
            return sbx_error_set(p->err, SBX_E_NOMEM, "out of memory");
        snprintf(path, l, "%s%s%s", prefix ? prefix : "", prefix ? "/" : "", k);
        rc = parse_entry(p, vn, e, path);
        free(path);
    }
    return rc;
}

static int parse_entries(struct parse *p, const yaml_node_t *n)
{
    if (n->type == YAML_MAPPING_NODE)
        return parse_entries_into(p, n, NULL);
    if (n->type != YAML_SEQUENCE_NODE)
        return bad(p, n, "entries: expected a list of entries or a mapping of path: entry");
    size_t count = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    if (count > SBX_MANIFEST_ENTRIES_MAX)
        return bad(p, n, "entries: more than %d", SBX_MANIFEST_ENTRIES_MAX);
    int rc = SBX_OK;
    for (yaml_node_item_t *it = n->data.sequence.items.start;
         rc == SBX_OK && it < n->data.sequence.items.top; it++) {
        struct manifest_entry *e;
        yaml_node_t *en = node(p, *it, n, &rc);
        if (en && (rc = next_entry(p, en, &e)) == SBX_OK)
            rc = parse_entry(p, en, e, NULL);
    }
    return rc;
}

/* ---- environment, users, groups ---------------------------------------- */

static int parse_environment(struct parse *p, const yaml_node_t *n)
{
    if (n->type != YAML_MAPPING_NODE)
        return bad(p, n, "environment: expected a mapping of NAME: value");
    int rc = check_map(p, n, "environment");
    if (rc != SBX_OK)
        return rc;
    size_t count = (size_t)(n->data.mapping.pairs.top - n->data.mapping.pairs.start);
    free(p->m->env);
    p->m->env = calloc(count + 1, sizeof *p->m->env);
    if (!p->m->env)
        return sbx_error_set(p->err, SBX_E_NOMEM, "out of memory");
    for (yaml_node_pair_t *kv = n->data.mapping.pairs.start;
         rc == SBX_OK && kv < n->data.mapping.pairs.top; kv++) {
        yaml_node_t *kn = node(p, kv->key, n, &rc);
        yaml_node_t *vn = kn ? node(p, kv->value, kn, &rc) : NULL;
        const char *k = NULL, *v = NULL;
        if (!vn || (rc = want_scalar(p, kn, "environment name", &k)) != SBX_OK ||
            (rc = want_scalar(p, vn, "environment value", &v)) != SBX_OK)
            break;
        if (!*k || strspn(k, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                             "0123456789_") != strlen(k) ||
            (k[0] >= '0' && k[0] <= '9'))
            rc = bad(p, kn, "environment: \"%.40s\" is not a variable name", k);
        else {
            size_t l = strlen(k) + strlen(v) + 2;
            char *s = malloc(l);
            if (!s)
                return sbx_error_set(p->err, SBX_E_NOMEM, "out of memory");
            snprintf(s, l, "%s=%s", k, v);
            p->m->env[p->m->nenv++] = s;
        }
    }
    return rc;
}

static int parse_group(struct parse *p, const yaml_node_t *n, struct manifest_group *g)
{
    g->gid = -1;
    g->line = line_of(n);
    if (n->type != YAML_MAPPING_NODE)
        return bad(p, n, "groups: each group is a mapping with name (and gid)");
    int rc = check_map(p, n, "groups");
    for (yaml_node_pair_t *kv = n->data.mapping.pairs.start;
         rc == SBX_OK && kv < n->data.mapping.pairs.top; kv++) {
        yaml_node_t *kn = node(p, kv->key, n, &rc);
        yaml_node_t *vn = kn ? node(p, kv->value, kn, &rc) : NULL;
        const char *k = scalar(kn);
        if (!vn)
            break;
        if (k && !strcmp(k, "name"))
            rc = want_string(p, vn, "group name", &g->name);
        else if (k && !strcmp(k, "gid"))
            rc = want_long(p, vn, "gid", 1, 2147483647L, 10, &g->gid);
        else
            rc = bad(p, kn, "groups: unknown key \"%.40s\"", k ? k : "?");
    }
    if (rc == SBX_OK && !g->name)
        rc = bad(p, n, "groups: a group has no name");
    return rc;
}

static int parse_user(struct parse *p, const yaml_node_t *n, struct manifest_user *u)
{
    u->uid = -1;
    u->line = line_of(n);
    if (n->type != YAML_MAPPING_NODE)
        return bad(p, n, "users: each user is a mapping with name (uid, groups)");
    int rc = check_map(p, n, "users");
    for (yaml_node_pair_t *kv = n->data.mapping.pairs.start;
         rc == SBX_OK && kv < n->data.mapping.pairs.top; kv++) {
        yaml_node_t *kn = node(p, kv->key, n, &rc);
        yaml_node_t *vn = kn ? node(p, kv->value, kn, &rc) : NULL;
        const char *k = scalar(kn);
        if (!vn)
            break;
        if (k && !strcmp(k, "name")) {
            rc = want_string(p, vn, "user name", &u->name);
        } else if (k && !strcmp(k, "uid")) {
            rc = want_long(p, vn, "uid", 1, 2147483647L, 10, &u->uid);
        } else if (k && !strcmp(k, "groups")) {
            if (vn->type != YAML_SEQUENCE_NODE)
                return bad(p, vn, "users: groups: expected a list of group names");
            size_t c = (size_t)(vn->data.sequence.items.top - vn->data.sequence.items.start);
            u->groups = calloc(c + 1, sizeof *u->groups);
            if (!u->groups)
                return sbx_error_set(p->err, SBX_E_NOMEM, "out of memory");
            for (yaml_node_item_t *it = vn->data.sequence.items.start;
                 rc == SBX_OK && it < vn->data.sequence.items.top; it++) {
                yaml_node_t *gn = node(p, *it, vn, &rc);
                if (gn)
                    rc = want_string(p, gn, "group name", &u->groups[u->ngroups++]);
            }
        } else {
            rc = bad(p, kn, "users: unknown key \"%.40s\"", k ? k : "?");
        }
    }
    if (rc == SBX_OK && !u->name)
        rc = bad(p, n, "users: a user has no name");
    return rc;
}

/* A list of users or groups: calls one() per item into arr of `size`. */
static int parse_list(struct parse *p, const yaml_node_t *n, const char *what,
                      void **arr, size_t *count, size_t size,
                      int (*one)(struct parse *, const yaml_node_t *, void *))
{
    if (n->type != YAML_SEQUENCE_NODE)
        return bad(p, n, "%s: expected a list", what);
    size_t c = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    if (c > SBX_MANIFEST_ENTRIES_MAX)
        return bad(p, n, "%s: more than %d", what, SBX_MANIFEST_ENTRIES_MAX);
    *arr = calloc(c ? c : 1, size);
    if (!*arr)
        return sbx_error_set(p->err, SBX_E_NOMEM, "out of memory");
    int rc = SBX_OK;
    for (yaml_node_item_t *it = n->data.sequence.items.start;
         rc == SBX_OK && it < n->data.sequence.items.top; it++) {
        yaml_node_t *in = node(p, *it, n, &rc);
        if (in)
            rc = one(p, in, (char *)*arr + size * (*count)++);
    }
    return rc;
}

static int one_user(struct parse *p, const yaml_node_t *n, void *out)
{
    return parse_user(p, n, out);
}

static int one_group(struct parse *p, const yaml_node_t *n, void *out)
{
    return parse_group(p, n, out);
}

/* ---- the document ------------------------------------------------------- */

static int parse_top(struct parse *p, const yaml_node_t *root)
{
    if (!root || root->type != YAML_MAPPING_NODE)
        return bad(p, root, "a manifest is a mapping with version and entries");
    int rc = check_map(p, root, "manifest");
    bool have_version = false;
    for (yaml_node_pair_t *kv = root->data.mapping.pairs.start;
         rc == SBX_OK && kv < root->data.mapping.pairs.top; kv++) {
        yaml_node_t *kn = node(p, kv->key, root, &rc);
        yaml_node_t *vn = kn ? node(p, kv->value, kn, &rc) : NULL;
        const char *k = scalar(kn);
        if (!vn)
            break;
        if (k && !strcmp(k, "version")) {
            long v;
            rc = want_long(p, vn, "version", 1, 1, 10, &v);
            have_version = rc == SBX_OK;
        } else if (k && !strcmp(k, "entries")) {
            rc = parse_entries(p, vn);
        } else if (k && !strcmp(k, "environment")) {
            rc = parse_environment(p, vn);
        } else if (k && !strcmp(k, "users")) {
            rc = parse_list(p, vn, "users", (void **)&p->m->users, &p->m->nusers,
                            sizeof *p->m->users, one_user);
        } else if (k && !strcmp(k, "groups")) {
            rc = parse_list(p, vn, "groups", (void **)&p->m->groups, &p->m->ngroups,
                            sizeof *p->m->groups, one_group);
        } else if (k && !strcmp(k, "run_as")) {
            rc = want_string(p, vn, "run_as", &p->m->run_as);
            p->m->run_as_line = line_of(vn);
        } else {
            char shown[64];
            rc = bad(p, kn,
                     "unknown key \"%s\" (expected version, entries, environment, "
                     "users, groups, run_as)",
                     sbxh_text_escape(shown, sizeof shown, k ? k : "?", 40));
        }
    }
    if (rc == SBX_OK && !have_version)
        rc = bad(p, root, "version: missing (this sbx reads version 1)");
    return rc;
}

/* Build p->doc from libyaml's events, one at a time, with the limits
 * checked per event: yaml_parser_load would first build a document of any
 * depth and size (libyaml's scanner is quadratic in the nesting depth, and
 * 16 MiB of "[]," is millions of nodes), and could not be cancelled.
 * Aliases are refused here, at their line; the first document is read. */
static int build_document(struct parse *p, yaml_parser_t *parser, sbx_cancel *cancel)
{
    struct open_node {
        int id;
        int key; /* a mapping's key waiting for its value, or 0 */
    } stack[SBX_MANIFEST_DEPTH_MAX];
    size_t depth = 0, nodes = 0, events = 0;
    const char *name = p->m->name;
    if (!yaml_document_initialize(&p->doc, NULL, NULL, NULL, 1, 1))
        return sbx_error_set(p->err, SBX_E_NOMEM, "out of memory");
    for (;;) {
        if ((++events & 1023) == 0 && cancel && sbx_cancel_fired(cancel))
            return sbx_error_set(p->err, SBX_E_CANCELLED, "%s: cancelled while parsing",
                                 name);
        yaml_event_t ev;
        if (!yaml_parser_parse(parser, &ev)) {
            if (parser->error == YAML_MEMORY_ERROR)
                return sbx_error_set(p->err, SBX_E_NOMEM, "out of memory");
            return sbx_error_set(p->err, SBX_E_INVALID, "%s:%d: %s", name,
                                 (int)parser->problem_mark.line + 1,
                                 parser->problem ? parser->problem : "malformed YAML");
        }
        int line = (int)ev.start_mark.line + 1, id = 0, rc = SBX_OK;
        switch (ev.type) {
        case YAML_STREAM_END_EVENT:
        case YAML_DOCUMENT_END_EVENT:
            yaml_event_delete(&ev);
            return SBX_OK;
        case YAML_ALIAS_EVENT:
            rc = sbx_error_set(p->err, SBX_E_INVALID,
                               "%s:%d: aliases are not allowed in a manifest", name, line);
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
            if (depth > 0)
                depth--;
            break;
        case YAML_SCALAR_EVENT:
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT:
            if (++nodes > SBX_MANIFEST_NODES_MAX) {
                rc = sbx_error_set(p->err, SBX_E_INVALID,
                                   "%s:%d: more than %d YAML nodes (the limit of a "
                                   "manifest)",
                                   name, line, SBX_MANIFEST_NODES_MAX);
                break;
            }
            if (ev.type != YAML_SCALAR_EVENT && depth == SBX_MANIFEST_DEPTH_MAX) {
                rc = sbx_error_set(p->err, SBX_E_INVALID,
                                   "%s:%d: nested deeper than %d levels (the limit of a "
                                   "manifest)",
                                   name, line, SBX_MANIFEST_DEPTH_MAX);
                break;
            }
            if (ev.type == YAML_SCALAR_EVENT)
                id = yaml_document_add_scalar(&p->doc, ev.data.scalar.tag,
                                              ev.data.scalar.value,
                                              (int)ev.data.scalar.length,
                                              ev.data.scalar.style);
            else if (ev.type == YAML_SEQUENCE_START_EVENT)
                id = yaml_document_add_sequence(&p->doc, ev.data.sequence_start.tag,
                                                ev.data.sequence_start.style);
            else
                id = yaml_document_add_mapping(&p->doc, ev.data.mapping_start.tag,
                                               ev.data.mapping_start.style);
            if (!id) {
                rc = sbx_error_set(p->err, SBX_E_NOMEM, "out of memory");
                break;
            }
            yaml_node_t *n = yaml_document_get_node(&p->doc, id);
            n->start_mark = ev.start_mark;
            n->end_mark = ev.end_mark;
            if (depth > 0) {
                struct open_node *up = &stack[depth - 1];
                yaml_node_t *parent = yaml_document_get_node(&p->doc, up->id);
                int ok = 1;
                if (parent->type == YAML_SEQUENCE_NODE)
                    ok = yaml_document_append_sequence_item(&p->doc, up->id, id);
                else if (!up->key)
                    up->key = id;
                else {
                    ok = yaml_document_append_mapping_pair(&p->doc, up->id, up->key, id);
                    up->key = 0;
                }
                if (!ok) {
                    rc = sbx_error_set(p->err, SBX_E_NOMEM, "out of memory");
                    break;
                }
            }
            if (ev.type != YAML_SCALAR_EVENT)
                stack[depth++] = (struct open_node){id, 0};
            break;
        default: /* stream and document start */
            break;
        }
        yaml_event_delete(&ev);
        if (rc != SBX_OK)
            return rc;
    }
}

int sbxh_manifest_parse_text(struct sbx_manifest *m, const char *text, size_t len,
                             sbx_cancel *cancel, sbx_error *err)
{
    if (len > SBX_MANIFEST_FILE_MAX)
        return sbx_error_set(err, SBX_E_INVALID, "%s: larger than %d bytes", m->name,
                             SBX_MANIFEST_FILE_MAX);
    unsigned char md[32];
    if (EVP_Digest(text, len, md, NULL, EVP_sha256(), NULL) != 1)
        return sbx_error_set(err, SBX_E_INTERNAL, "%s: SHA-256 failed", m->name);
    for (size_t i = 0; i < sizeof md; i++)
        snprintf(m->text_digest + 2 * i, 3, "%02x", md[i]);
    if (!(m->env = calloc(1, sizeof *m->env)))
        return sbx_error_set(err, SBX_E_NOMEM, "out of memory");

    struct parse p = {.m = m, .err = err};
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser))
        return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    int rc = build_document(&p, &parser, cancel);
    yaml_parser_delete(&parser);
    if (rc != SBX_OK) {
        yaml_document_delete(&p.doc);
        return rc;
    }
    p.nnodes = (size_t)(p.doc.nodes.top - p.doc.nodes.start);
    p.seen = calloc(p.nnodes ? p.nnodes : 1, 1);
    if (!p.seen) {
        yaml_document_delete(&p.doc);
        return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    }
    yaml_node_t *root = yaml_document_get_root_node(&p.doc);
    if (!root)
        rc = sbx_error_set(err, SBX_E_INVALID, "%s: the manifest is empty", m->name);
    else {
        p.seen[0] = 1;
        rc = parse_top(&p, root);
    }
    if (rc == SBX_OK)
        rc = sbxh_manifest_digest_compute(m, err);
    free(p.seen);
    yaml_document_delete(&p.doc);
    return rc;
}
