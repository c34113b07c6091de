/*
 * config.c - loading sbx.yaml and conf.d drop-ins into struct sbx_config.
 *
 * Files are read with libyaml's event parser (streamed, never loaded whole)
 * by a small recursive-descent reader that knows the shape of the file:
 *
 *   default_provider: <name>
 *   plugin_dir: <path>
 *   store: { driver: sqlite|postgres, path: <path>, dsn: <dsn> }
 *   providers: { <name>: { key: scalar | {k: scalar} | [scalar] } | null }
 *
 * Every problem stops the load with "file:line: key: problem". Provider
 * sections are only checked for shape here; registry/provider_config.c validates them
 * against the provider's declared keys once the plugin is known. The
 * `package_managers` and `manifest` sections are read here too, and checked
 * by the features they configure when the context is opened (api/ctx.c):
 * the loader calls nothing above it.
 */
#include "config/config.h"
#include "base/install_dirs.h"

#include <yaml.h>

#include "base/text_escape.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define TOP_KEYS \
    "default_provider, plugin_dir, store, providers, package_managers, manifest, " \
    "session, pools"
#define STORE_KEYS "driver, path, dsn"
#define NAME_RULE "1 to 64 characters of a-z, 0-9, '_' and '-'"

/* Where a value was set, for "first set at" messages. */
struct origin {
    const char *file;
    int line;
};

/* State that lives across all files of one load. */
struct load {
    struct sbx_config *cfg;
    struct origin plugin_dir, store_driver, store_path, store_dsn;
    sbx_error *err;
};

/* One file being parsed. */
struct reader {
    struct load *ld;
    const char *file; /* borrowed from cfg->files */
    FILE *fp;
    size_t bytes; /* read so far, against SBX_CONFIG_FILE_MAX */
    yaml_parser_t parser;
    yaml_event_t ev;
    bool have_ev;
    int store_line, providers_line, managers_line,
        manifest_line, pools_line; /* same-file duplicates of these maps */
};

/* ------------------------------------------------------------------------ */
/* Small helpers                                                             */
/* ------------------------------------------------------------------------ */

static int line_of(const yaml_event_t *ev)
{
    return (int)ev->start_mark.line + 1;
}

static const char *event_kind(const yaml_event_t *ev)
{
    switch (ev->type) {
    case YAML_MAPPING_START_EVENT: return "a mapping";
    case YAML_SEQUENCE_START_EVENT: return "a sequence";
    case YAML_SCALAR_EVENT: return "a scalar";
    default: return "nothing";
    }
}

static const char *scalar_text(const yaml_event_t *ev)
{
    return (const char *)ev->data.scalar.value;
}

/* A plain, untagged empty, "~" or "null" scalar: YAML's null. */
static bool scalar_is_null(const yaml_event_t *ev)
{
    if (ev->type != YAML_SCALAR_EVENT || ev->data.scalar.tag != NULL ||
        ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return false;
    const char *s = scalar_text(ev);
    return s[0] == '\0' || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 ||
           strcmp(s, "Null") == 0 || strcmp(s, "NULL") == 0;
}

/* Whether a provider name is well formed: [a-z0-9_-]{1,64}. */
static bool provider_name_valid(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
              c == '-'))
            return false;
    }
    return true;
}

static char *join_path(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *s = malloc(a + b + 2);
    if (!s)
        return NULL;
    memcpy(s, dir, a);
    size_t n = a;
    if (a > 0 && dir[a - 1] != '/')
        s[n++] = '/';
    memcpy(s + n, name, b + 1);
    return s;
}

static int nomem(struct load *ld)
{
    return sbx_error_set(ld->err, SBX_E_NOMEM, "configuration: out of memory");
}

/* "first set at line N" in the same file, else "first set at FILE:N". */
static int duplicate(struct reader *r, int line, const char *key,
                     struct origin first)
{
    if (first.file == r->file || strcmp(first.file, r->file) == 0)
        return sbx_error_set(r->ld->err, SBX_E_CONFIG,
                             "%s:%d: %s: duplicate key (first set at line %d)",
                             r->file, line, key, first.line);
    return sbx_error_set(r->ld->err, SBX_E_CONFIG,
                         "%s:%d: %s: set twice (first set at %s:%d)", r->file,
                         line, key, first.file, first.line);
}

/* ------------------------------------------------------------------------ */
/* Events                                                                    */
/* ------------------------------------------------------------------------ */

/* Report a libyaml failure with file, line and libyaml's own text. */
static int syntax_error(struct reader *r)
{
    const yaml_parser_t *p = &r->parser;
    const char *problem = p->problem ? p->problem : "malformed YAML";
    if (p->error == YAML_MEMORY_ERROR)
        return nomem(r->ld);
    if (p->error == YAML_READER_ERROR)
        return sbx_error_set(r->ld->err, SBX_E_CONFIG,
                             "%s: %s (at byte %zu)", r->file, problem,
                             p->problem_offset);
    if (p->context)
        return sbx_error_set(r->ld->err, SBX_E_CONFIG, "%s:%d: %s (%s at line %d)",
                             r->file, (int)p->problem_mark.line + 1, problem,
                             p->context, (int)p->context_mark.line + 1);
    return sbx_error_set(r->ld->err, SBX_E_CONFIG, "%s:%d: %s", r->file,
                         (int)p->problem_mark.line + 1, problem);
}

/* Advance to the next event, refusing aliases and NUL bytes in scalars. */
static int next(struct reader *r)
{
    if (r->have_ev) {
        yaml_event_delete(&r->ev);
        r->have_ev = false;
    }
    if (!yaml_parser_parse(&r->parser, &r->ev))
        return syntax_error(r);
    r->have_ev = true;
    if (r->ev.type == YAML_ALIAS_EVENT) {
        char shown[160];
        return sbx_error_set(r->ld->err, SBX_E_CONFIG,
                             "%s:%d: aliases (*%s) are not supported; write the "
                             "value out",
                             r->file, line_of(&r->ev),
                             sbxh_text_escape(shown, sizeof shown,
                                              (const char *)r->ev.data.alias.anchor, 32));
    }
    if (r->ev.type == YAML_SCALAR_EVENT &&
        strlen(scalar_text(&r->ev)) != r->ev.data.scalar.length)
        return sbx_error_set(r->ld->err, SBX_E_CONFIG,
                             "%s:%d: a value contains a NUL character", r->file,
                             line_of(&r->ev));
    return SBX_OK;
}

/*
 * Read the key of a mapping entry. Returns SBX_OK with *key set (a copy the
 * caller frees) and *line, or SBX_OK with *key NULL at the end of the
 * mapping, or an error.
 */
static int next_key(struct reader *r, const char *where, char **key, int *line)
{
    *key = NULL;
    int rc = next(r);
    if (rc)
        return rc;
    if (r->ev.type == YAML_MAPPING_END_EVENT)
        return SBX_OK;
    *line = line_of(&r->ev);
    if (r->ev.type != YAML_SCALAR_EVENT)
        return sbx_error_set(r->ld->err, SBX_E_CONFIG,
                             "%s:%d: %s: expected a plain key, got %s", r->file,
                             *line, where, event_kind(&r->ev));
    /* Keys are echoed in messages: anything but printable ASCII could
     * forge output lines or drive the terminal, and is no key of ours. */
    if (!sbxh_text_printable(scalar_text(&r->ev))) {
        char shown[160];
        return sbx_error_set(r->ld->err, SBX_E_CONFIG,
                             "%s:%d: %s: key \"%s\" contains bytes other than "
                             "printable ASCII",
                             r->file, *line, where,
                             sbxh_text_escape(shown, sizeof shown, scalar_text(&r->ev),
                                              32));
    }
    *key = strdup(scalar_text(&r->ev));
    return *key ? SBX_OK : nomem(r->ld);
}

/* Read a non-empty string value for `key` into a new copy. */
static int string_value(struct reader *r, const char *key, char **out)
{
    int rc = next(r);
    if (rc)
        return rc;
    int line = line_of(&r->ev);
    if (r->ev.type != YAML_SCALAR_EVENT)
        return sbx_error_set(r->ld->err, SBX_E_CONFIG,
                             "%s:%d: %s: expected a string, got %s", r->file,
                             line, key, event_kind(&r->ev));
    if (scalar_is_null(&r->ev) || scalar_text(&r->ev)[0] == '\0')
        return sbx_error_set(r->ld->err, SBX_E_CONFIG,
                             "%s:%d: %s: expected a string, got an empty value",
                             r->file, line, key);
    *out = strdup(scalar_text(&r->ev));
    return *out ? SBX_OK : nomem(r->ld);
}

/*
 * Read the start of a value that must be a mapping or null. Returns SBX_OK
 * with *is_map telling which, or an error naming `key`.
 */
static int map_or_null(struct reader *r, const char *key, bool *is_map)
{
    int rc = next(r);
    if (rc)
        return rc;
    if (r->ev.type == YAML_MAPPING_START_EVENT) {
        *is_map = true;
        return SBX_OK;
    }
    if (scalar_is_null(&r->ev)) {
        *is_map = false;
        return SBX_OK;
    }
    return sbx_error_set(r->ld->err, SBX_E_CONFIG,
                         "%s:%d: %s: expected a mapping, got %s", r->file,
                         line_of(&r->ev), key, event_kind(&r->ev));
}

/* ------------------------------------------------------------------------ */
/* Provider sections                                                         */
/* ------------------------------------------------------------------------ */

static size_t key_hash(const char *key)
{
    size_t h = 1469598103934665603u; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        h = (h ^ *p) * 1099511628211u;
    return h;
}

/* Index of the entry with exactly this key, or -1 (one table probe run). */
static long find_entry(const struct sbx_config_section *sec, const char *key)
{
    if (!sec->nslots)
        return -1;
    size_t mask = sec->nslots - 1;
    for (size_t i = key_hash(key) & mask;; i = (i + 1) & mask) {
        size_t slot = sec->slots[i];
        if (slot == 0)
            return -1;
        if (strcmp(sec->entries[slot - 1].key, key) == 0)
            return (long)(slot - 1);
    }
}

static void index_insert(struct sbx_config_section *sec, size_t entry)
{
    size_t mask = sec->nslots - 1;
    size_t i = key_hash(sec->entries[entry].key) & mask;
    while (sec->slots[i])
        i = (i + 1) & mask;
    sec->slots[i] = entry + 1;
}

/* Make room for one more entry: the array and the index grow
 * geometrically, so a section of n keys costs O(n) to load. */
static bool reserve_entry(struct sbx_config_section *sec)
{
    if (sec->count == sec->cap) {
        size_t cap = sec->cap ? sec->cap * 2 : 16;
        struct sbx_config_entry *e = realloc(sec->entries, cap * sizeof *e);
        if (!e)
            return false;
        sec->entries = e;
        sec->cap = cap;
    }
    if (2 * (sec->count + 1) > sec->nslots) {
        size_t n = sec->nslots ? sec->nslots * 2 : 32;
        size_t *slots = calloc(n, sizeof *slots);
        if (!slots)
            return false;
        free(sec->slots);
        sec->slots = slots;
        sec->nslots = n;
        for (size_t i = 0; i < sec->count; i++)
            index_insert(sec, i);
    }
    return true;
}

static int add_entry(struct load *ld, struct sbx_config_section *sec,
                     const char *key, const char *value, int node,
                     const char *file, int line)
{
    if (sec->count >= SBX_CONFIG_ENTRIES_MAX)
        return sbx_error_set(ld->err, SBX_E_CONFIG,
                             "%s:%d: providers.%s: more than %d keys and values in "
                             "one provider section",
                             file, line, sec->name, SBX_CONFIG_ENTRIES_MAX);
    if (!reserve_entry(sec))
        return nomem(ld);
    struct sbx_config_entry *e = &sec->entries[sec->count];
    *e = (struct sbx_config_entry){.node = node, .file = file, .line = line};
    e->key = strdup(key);
    e->value = value ? strdup(value) : NULL;
    if (!e->key || (value && !e->value)) {
        free(e->key);
        free(e->value);
        return nomem(ld);
    }
    index_insert(sec, sec->count);
    sec->count++;
    return SBX_OK;
}

/* "<a>.<b>" into a new string. */
static char *dotted(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    char *s = malloc(la + lb + 2);
    if (!s)
        return NULL;
    memcpy(s, a, la);
    s[la] = '.';
    memcpy(s + la + 1, b, lb + 1);
    return s;
}

/* The elements of a map-valued key: "<key>.<name>: scalar". `parent` is the
 * index of the MAP entry; `path` is "providers.<name>.<key>" for errors. */
static int read_entry_map(struct reader *r, struct sbx_config_section *sec,
                          size_t parent, const char *path)
{
    const char *key = sec->entries[parent].key;
    for (;;) {
        char *name = NULL;
        int line = 0;
        int rc = next_key(r, path, &name, &line);
        if (rc || !name)
            return rc;
        char *flat = dotted(key, name);
        char *full = dotted(path, name);
        if (!flat || !full) {
            rc = nomem(r->ld);
        } else if (name[0] == '\0') {
            rc = sbx_error_set(r->ld->err, SBX_E_CONFIG,
                               "%s:%d: %s: empty key", r->file, line, path);
        } else {
            long dup = find_entry(sec, flat);
            if (dup >= 0) {
                rc = duplicate(r, line, full,
                               (struct origin){sec->entries[dup].file,
                                               sec->entries[dup].line});
            } else if ((rc = next(r)) == SBX_OK) {
                if (r->ev.type != YAML_SCALAR_EVENT)
                    rc = sbx_error_set(
                        r->ld->err, SBX_E_CONFIG,
                        "%s:%d: %s: expected a scalar, got %s (mappings "
                        "nest only one level in a provider section)",
                        r->file, line_of(&r->ev), full, event_kind(&r->ev));
                else
                    rc = add_entry(r->ld, sec, flat,
                                   scalar_is_null(&r->ev) ? ""
                                                          : scalar_text(&r->ev),
                                   SBX_NODE_SCALAR, r->file, line);
            }
        }
        free(flat);
        free(full);
        free(name);
        if (rc)
            return rc;
    }
}

/* The items of a list-valued key: "<key>.<index>: scalar". */
static int read_entry_list(struct reader *r, struct sbx_config_section *sec,
                           size_t parent, const char *path)
{
    char *key = strdup(sec->entries[parent].key);
    if (!key)
        return nomem(r->ld);
    int rc;
    for (size_t i = 0;; i++) {
        if ((rc = next(r)))
            break;
        if (r->ev.type == YAML_SEQUENCE_END_EVENT)
            break;
        char idx[32];
        snprintf(idx, sizeof idx, "%zu", i);
        if (r->ev.type != YAML_SCALAR_EVENT) {
            rc = sbx_error_set(r->ld->err, SBX_E_CONFIG,
                               "%s:%d: %s.%s: expected a scalar, got %s (a list "
                               "holds plain values only)",
                               r->file, line_of(&r->ev), path, idx,
                               event_kind(&r->ev));
            break;
        }
        char *flat = dotted(key, idx);
        if (!flat) {
            rc = nomem(r->ld);
            break;
        }
        rc = add_entry(r->ld, sec, flat,
                       scalar_is_null(&r->ev) ? "" : scalar_text(&r->ev),
                       SBX_NODE_SCALAR, r->file, line_of(&r->ev));
        free(flat);
        if (rc)
            break;
    }
    free(key);
    return rc;
}

/* The body of `<group>.<name>: { ... }` after its MAPPING_START. */
static int read_section(struct reader *r, const char *group,
                        struct sbx_config_section *sec)
{
    char prefix[96];
    if (group)
        snprintf(prefix, sizeof prefix, "%s.%s", group, sec->name);
    else
        snprintf(prefix, sizeof prefix, "%s", sec->name);
    for (;;) {
        char *key = NULL;
        int line = 0;
        int rc = next_key(r, prefix, &key, &line);
        if (rc || !key)
            return rc;
        char *path = dotted(prefix, key);
        if (!path) {
            rc = nomem(r->ld);
        } else if (key[0] == '\0') {
            rc = sbx_error_set(r->ld->err, SBX_E_CONFIG, "%s:%d: %s: empty key",
                               r->file, line, prefix);
        } else if (strchr(key, '.')) {
            /* Dots separate a key from its map or list elements. */
            rc = sbx_error_set(r->ld->err, SBX_E_CONFIG,
                               "%s:%d: %s: a key name cannot contain '.'",
                               r->file, line, path);
        } else {
            long dup = find_entry(sec, key);
            if (dup >= 0)
                rc = duplicate(r, line, path,
                               (struct origin){sec->entries[dup].file,
                                               sec->entries[dup].line});
            else
                rc = next(r);
        }
        if (rc == SBX_OK) {
            size_t at = sec->count;
            switch (r->ev.type) {
            case YAML_SCALAR_EVENT:
                rc = add_entry(r->ld, sec, key,
                               scalar_is_null(&r->ev) ? "" : scalar_text(&r->ev),
                               SBX_NODE_SCALAR, r->file, line);
                break;
            case YAML_MAPPING_START_EVENT:
                rc = add_entry(r->ld, sec, key, NULL, SBX_NODE_MAP, r->file, line);
                if (rc == SBX_OK)
                    rc = read_entry_map(r, sec, at, path);
                break;
            case YAML_SEQUENCE_START_EVENT:
                rc = add_entry(r->ld, sec, key, NULL, SBX_NODE_SEQ, r->file, line);
                if (rc == SBX_OK)
                    rc = read_entry_list(r, sec, at, path);
                break;
            default:
                rc = sbx_error_set(r->ld->err, SBX_E_INTERNAL,
                                   "%s:%d: %s: unexpected YAML event", r->file,
                                   line, path);
                break;
            }
        }
        free(path);
        free(key);
        if (rc)
            return rc;
    }
}

static const struct sbx_config_section *
section_in(const struct sbx_config_section *sections, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(sections[i].name, name) == 0)
            return &sections[i];
    return NULL;
}

/* A map of named sections: `providers` (one per provider) or
 * `package_managers` (one per manager). */
struct section_group {
    const char *name;
    const char *what; /* "provider", "package manager" */
    struct sbx_config_section **sections;
    size_t *count;
};

/* The body of `<group>: { ... }` after its MAPPING_START. */
static int read_group(struct reader *r, const struct section_group *g)
{
    for (;;) {
        char *name = NULL;
        int line = 0;
        int rc = next_key(r, g->name, &name, &line);
        if (rc || !name)
            return rc;
        const struct sbx_config_section *prev =
            section_in(*g->sections, *g->count, name);
        bool is_map = false;
        char key[96];
        snprintf(key, sizeof key, "%s.%.64s", g->name, name);
        if (!provider_name_valid(name)) {
            rc = sbx_error_set(r->ld->err, SBX_E_CONFIG,
                               "%s:%d: %s.%.80s: invalid %s name (expected " NAME_RULE
                               ")",
                               r->file, line, g->name, name, g->what);
        } else if (prev) {
            rc = duplicate(r, line, key, (struct origin){prev->file, prev->line});
        } else {
            rc = map_or_null(r, key, &is_map);
        }
        if (rc == SBX_OK && *g->count >= SBX_CONFIG_SECTIONS_MAX)
            rc = sbx_error_set(r->ld->err, SBX_E_CONFIG,
                               "%s:%d: %s: more than %d sections", r->file, line,
                               g->name, SBX_CONFIG_SECTIONS_MAX);
        if (rc == SBX_OK) {
            struct sbx_config_section *s =
                realloc(*g->sections, (*g->count + 1) * sizeof *s);
            if (!s) {
                rc = nomem(r->ld);
            } else {
                *g->sections = s;
                s = &s[(*g->count)++];
                *s = (struct sbx_config_section){
                    .name = name, .file = r->file, .line = line};
                name = NULL; /* owned by the section now */
                if (is_map)
                    rc = read_section(r, g->name, s);
            }
        }
        free(name);
        if (rc)
            return rc;
    }
}

/* A top-level map of sections, each key at most once per file. */
static int read_group_once(struct reader *r, const struct section_group *g,
                           int line, int *seen_line)
{
    bool is_map = false;
    if (*seen_line)
        return duplicate(r, line, g->name, (struct origin){r->file, *seen_line});
    int rc = map_or_null(r, g->name, &is_map);
    if (rc == SBX_OK) {
        *seen_line = line;
        if (is_map)
            rc = read_group(r, g);
    }
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Top level                                                                 */
/* ------------------------------------------------------------------------ */

/* A top-level or store scalar that may be set once across all files. */
static int set_once(struct reader *r, const char *key, int line, char **slot,
                    struct origin *origin)
{
    if (*slot)
        return duplicate(r, line, key, *origin);
    int rc = string_value(r, key, slot);
    if (rc == SBX_OK)
        *origin = (struct origin){r->file, line};
    return rc;
}

/* The body of `store: { ... }` after its MAPPING_START. */
static int read_store(struct reader *r)
{
    struct load *ld = r->ld;
    struct sbx_config *cfg = ld->cfg;
    for (;;) {
        char *key = NULL;
        int line = 0;
        int rc = next_key(r, "store", &key, &line);
        if (rc || !key)
            return rc;
        if (strcmp(key, "driver") == 0) {
            rc = set_once(r, "store.driver", line, &cfg->store_driver,
                          &ld->store_driver);
            if (rc == SBX_OK && strcmp(cfg->store_driver, "sqlite") != 0 &&
                strcmp(cfg->store_driver, "postgres") != 0)
                rc = sbx_error_set(ld->err, SBX_E_CONFIG,
                                   "%s:%d: store.driver: unknown driver "
                                   "\"%.40s\" (expected sqlite or postgres)",
                                   r->file, line, cfg->store_driver);
        } else if (strcmp(key, "path") == 0) {
            rc = set_once(r, "store.path", line, &cfg->store_path,
                          &ld->store_path);
        } else if (strcmp(key, "dsn") == 0) {
            rc = set_once(r, "store.dsn", line, &cfg->store_dsn, &ld->store_dsn);
        } else {
            rc = sbx_error_set(ld->err, SBX_E_CONFIG,
                               "%s:%d: store.%.80s: unknown key (expected one "
                               "of " STORE_KEYS ")",
                               r->file, line, key);
        }
        free(key);
        if (rc)
            return rc;
    }
}

/* `manifest: { grants: [...] }`: one section, set once across all files. */
static int read_manifest(struct reader *r, int line)
{
    struct sbx_config *cfg = r->ld->cfg;
    if (cfg->manifest)
        return duplicate(r, line, "manifest",
                         (struct origin){cfg->manifest->file, cfg->manifest->line});
    bool is_map = false;
    int rc = map_or_null(r, "manifest", &is_map);
    if (rc != SBX_OK)
        return rc;
    cfg->manifest = calloc(1, sizeof *cfg->manifest);
    if (!cfg->manifest || !(cfg->manifest->name = strdup("manifest")))
        return nomem(r->ld);
    cfg->manifest->file = r->file;
    cfg->manifest->line = line;
    /* read_section names keys "<group>.<name>.key": the group is empty */
    return is_map ? read_section(r, NULL, cfg->manifest) : SBX_OK;
}

/* session.ports, from the section's entries: a list of distinct TCP ports
 * (file:line of the offending element in every error). */
static int session_ports(struct load *ld, struct sbx_config_section *sec)
{
    struct sbx_config *cfg = ld->cfg;
    size_t n = 0;
    for (size_t i = 0; i < sec->count; i++) {
        const struct sbx_config_entry *e = &sec->entries[i];
        if (strcmp(e->key, "ports") == 0) {
            if (e->node != SBX_NODE_SEQ)
                return sbx_error_set(ld->err, SBX_E_CONFIG,
                                     "%s:%d: session.ports: expected a list of TCP "
                                     "ports, e.g. [8080, 3000]",
                                     e->file, e->line);
        } else if (strncmp(e->key, "ports.", 6) != 0) {
            return sbx_error_set(ld->err, SBX_E_CONFIG,
                                 "%s:%d: session.%.80s: unknown key (expected ports)",
                                 e->file, e->line, e->key);
        } else {
            n++;
        }
    }
    if (n > SBX_CONFIG_PORTS_MAX)
        return sbx_error_set(ld->err, SBX_E_CONFIG,
                             "%s:%d: session.ports: %zu ports, at most %d", sec->file,
                             sec->line, n, SBX_CONFIG_PORTS_MAX);
    cfg->session_ports = calloc(n ? n : 1, sizeof *cfg->session_ports);
    if (!cfg->session_ports)
        return nomem(ld);
    for (size_t i = 0; i < sec->count; i++) {
        const struct sbx_config_entry *e = &sec->entries[i];
        if (strncmp(e->key, "ports.", 6) != 0)
            continue;
        const char *v = e->value ? e->value : "";
        char *end = NULL;
        unsigned long port = strspn(v, "0123456789") == strlen(v) && *v
                                 ? strtoul(v, &end, 10)
                                 : 0;
        if (port < 1 || port > 65535)
            return sbx_error_set(ld->err, SBX_E_CONFIG,
                                 "%s:%d: session.ports: \"%.40s\" is not a TCP port "
                                 "(1 to 65535)",
                                 e->file, e->line, v);
        for (size_t k = 0; k < cfg->nsession_ports; k++)
            if (cfg->session_ports[k] == port)
                return sbx_error_set(ld->err, SBX_E_CONFIG,
                                     "%s:%d: session.ports: port %lu is listed twice",
                                     e->file, e->line, port);
        cfg->session_ports[cfg->nsession_ports++] = (uint16_t)port;
    }
    return SBX_OK;
}

/* `session: { ports: [...] }`: one section, set once across all files. */
static int read_session(struct reader *r, int line)
{
    struct sbx_config *cfg = r->ld->cfg;
    if (cfg->session)
        return duplicate(r, line, "session",
                         (struct origin){cfg->session->file, cfg->session->line});
    bool is_map = false;
    int rc = map_or_null(r, "session", &is_map);
    if (rc != SBX_OK)
        return rc;
    cfg->session = calloc(1, sizeof *cfg->session);
    if (!cfg->session || !(cfg->session->name = strdup("session")))
        return nomem(r->ld);
    cfg->session->file = r->file;
    cfg->session->line = line;
    if (is_map && (rc = read_section(r, NULL, cfg->session)) != SBX_OK)
        return rc;
    return session_ports(r->ld, cfg->session);
}

/* The top-level mapping, after its MAPPING_START. */
static int read_top(struct reader *r)
{
    struct load *ld = r->ld;
    struct sbx_config *cfg = ld->cfg;
    for (;;) {
        char *key = NULL;
        int line = 0;
        int rc = next_key(r, "top level", &key, &line);
        if (rc || !key)
            return rc;
        bool is_map = false;
        if (strcmp(key, "default_provider") == 0) {
            struct origin o = {cfg->default_provider_file,
                               cfg->default_provider_line};
            rc = set_once(r, key, line, &cfg->default_provider, &o);
            if (rc == SBX_OK) {
                cfg->default_provider_file = o.file;
                cfg->default_provider_line = o.line;
                if (!provider_name_valid(cfg->default_provider))
                    rc = sbx_error_set(ld->err, SBX_E_CONFIG,
                                       "%s:%d: default_provider: invalid "
                                       "provider name \"%.80s\" (expected " NAME_RULE
                                       ")",
                                       r->file, line, cfg->default_provider);
            }
        } else if (strcmp(key, "plugin_dir") == 0) {
            rc = set_once(r, key, line, &cfg->plugin_dir, &ld->plugin_dir);
        } else if (strcmp(key, "store") == 0) {
            if (r->store_line)
                rc = duplicate(r, line, key,
                               (struct origin){r->file, r->store_line});
            else if ((rc = map_or_null(r, key, &is_map)) == SBX_OK) {
                r->store_line = line;
                if (is_map)
                    rc = read_store(r);
            }
        } else if (strcmp(key, "providers") == 0) {
            struct section_group g = {"providers", "provider", &cfg->sections, &cfg->nsections};
            rc = read_group_once(r, &g, line, &r->providers_line);
        } else if (strcmp(key, "manifest") == 0) {
            rc = read_manifest(r, line);
        } else if (strcmp(key, "session") == 0) {
            rc = read_session(r, line);
        } else if (strcmp(key, "package_managers") == 0) {
            struct section_group g = {"package_managers", "package manager",
                                      &cfg->managers,
                                      &cfg->nmanagers};
            rc = read_group_once(r, &g, line, &r->managers_line);
        } else if (strcmp(key, "pools") == 0) {
            /* checked and turned into cfg->pools by config/pools.c */
            struct section_group g = {"pools", "pool", &cfg->pool_sections,
                                      &cfg->npool_sections};
            rc = read_group_once(r, &g, line, &r->pools_line);
        } else {
            rc = sbx_error_set(ld->err, SBX_E_CONFIG,
                               "%s:%d: %.80s: unknown key (expected one of " TOP_KEYS
                               ")",
                               r->file, line, key);
        }
        free(key);
        if (rc)
            return rc;
    }
}

/* One YAML stream: empty, or a single document holding a mapping or null. */
static int read_stream(struct reader *r)
{
    int rc = next(r); /* STREAM_START */
    if (rc)
        return rc;
    if ((rc = next(r)))
        return rc;
    if (r->ev.type == YAML_STREAM_END_EVENT)
        return SBX_OK; /* empty file */
    /* DOCUMENT_START, then the root node. */
    if ((rc = next(r)))
        return rc;
    if (r->ev.type == YAML_MAPPING_START_EVENT) {
        if ((rc = read_top(r)))
            return rc;
    } else if (!scalar_is_null(&r->ev)) {
        return sbx_error_set(r->ld->err, SBX_E_CONFIG,
                             "%s:%d: expected a mapping of settings at the top "
                             "level, got %s",
                             r->file, line_of(&r->ev), event_kind(&r->ev));
    }
    if ((rc = next(r))) /* DOCUMENT_END */
        return rc;
    if ((rc = next(r)))
        return rc;
    if (r->ev.type == YAML_DOCUMENT_START_EVENT)
        return sbx_error_set(r->ld->err, SBX_E_CONFIG,
                             "%s:%d: a second YAML document; a configuration "
                             "file holds exactly one",
                             r->file, line_of(&r->ev));
    return SBX_OK;
}

/* ------------------------------------------------------------------------ */
/* Files                                                                     */
/* ------------------------------------------------------------------------ */

/* Record a file name in cfg->files (taking ownership) and return the copy
 * the entries borrow, or NULL when out of memory (path is freed). */
static const char *remember_file(struct sbx_config *cfg, char *path)
{
    char **f = realloc(cfg->files, (cfg->nfiles + 1) * sizeof *f);
    if (!f) {
        free(path);
        return NULL;
    }
    cfg->files = f;
    cfg->files[cfg->nfiles++] = path;
    return path;
}

/* libyaml's input: the file, counted against SBX_CONFIG_FILE_MAX so that a
 * huge file (or an endless pipe) stops the load early. */
static int read_bounded(void *data, unsigned char *buf, size_t size, size_t *got)
{
    struct reader *r = data;
    size_t n = fread(buf, 1, size, r->fp);
    if (n == 0 && ferror(r->fp))
        return 0;
    r->bytes += n;
    *got = n;
    return r->bytes <= SBX_CONFIG_FILE_MAX;
}

/*
 * Open a configuration file. A drop-in is opened without following a
 * symbolic link and must be a regular file owned by root or by the user:
 * a conf.d entry pointing at /etc/shadow must not be read, let alone have
 * its first line echoed in an error.
 */
static FILE *open_config(struct load *ld, const char *path, bool dropin, int *rc)
{
    int flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | (dropin ? O_NOFOLLOW | O_NONBLOCK : 0);
    int fd = open(path, flags);
    if (fd < 0) {
        int e = errno;
        *rc = sbx_error_set(ld->err, SBX_E_IO, "%s: cannot open: %s%s", path,
                            strerror(e),
                            dropin && e == ELOOP
                                ? " (drop-ins must be regular files, not symbolic "
                                  "links)"
                                : "");
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        *rc = sbx_error_set(ld->err, SBX_E_IO, "%s: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    const char *why = NULL;
    if (S_ISDIR(st.st_mode))
        why = "is a directory, not a file";
    else if (dropin && !S_ISREG(st.st_mode))
        why = "is not a regular file (drop-ins must be regular files)";
    else if (dropin && st.st_uid != 0 && st.st_uid != geteuid())
        why = "is owned by another user (drop-ins must be owned by root or by "
              "the user running sbx)";
    else if (S_ISREG(st.st_mode) && st.st_size > SBX_CONFIG_FILE_MAX)
        why = "is larger than the limit of 1 MiB";
    if (why) {
        *rc = sbx_error_set(ld->err, dropin || S_ISDIR(st.st_mode) ? SBX_E_IO
                                                                   : SBX_E_CONFIG,
                            "%s: %s", path, why);
        close(fd);
        return NULL;
    }
    if (dropin)
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    FILE *fp = fdopen(fd, "r");
    if (!fp) {
        *rc = nomem(ld);
        close(fd);
    }
    return fp;
}

/* Read one file; path is taken over. With `optional`, a missing file is
 * skipped silently; `dropin` applies the drop-in rules of open_config. */
static int read_file(struct load *ld, char *path, bool optional, bool dropin)
{
    int rc = SBX_OK;
    if (optional && access(path, F_OK) != 0 && errno == ENOENT) {
        free(path);
        return SBX_OK;
    }
    FILE *fp = open_config(ld, path, dropin, &rc);
    if (!fp) {
        free(path);
        return rc;
    }
    const char *file = remember_file(ld->cfg, path);
    if (!file) {
        fclose(fp);
        return nomem(ld);
    }

    struct reader r = {.ld = ld, .file = file, .fp = fp};
    if (!yaml_parser_initialize(&r.parser)) {
        rc = nomem(ld);
    } else {
        yaml_parser_set_input(&r.parser, read_bounded, &r);
        rc = read_stream(&r);
        if (r.have_ev)
            yaml_event_delete(&r.ev);
        yaml_parser_delete(&r.parser);
    }
    if (r.bytes > SBX_CONFIG_FILE_MAX)
        rc = sbx_error_set(ld->err, SBX_E_CONFIG, "%s: is larger than the limit of 1 MiB",
                           file);
    else if (rc == SBX_OK && ferror(fp))
        rc = sbx_error_set(ld->err, SBX_E_IO, "%s: read error", file);
    fclose(fp);
    return rc;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool is_dropin_name(const char *name)
{
    size_t n = strlen(name);
    return name[0] != '.' && n > 5 && strcmp(name + n - 5, ".yaml") == 0;
}

/* Read every <dir>/NAME.yaml in name order; a missing directory is fine. */
static int read_dropins(struct load *ld, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT)
            return SBX_OK;
        return sbx_error_set(ld->err, SBX_E_IO, "%s: cannot read drop-in "
                             "directory: %s", dir, strerror(errno));
    }
    char **names = NULL;
    size_t n = 0;
    int rc = SBX_OK;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!is_dropin_name(de->d_name))
            continue;
        if (!sbxh_text_printable(de->d_name)) {
            char shown[160];
            rc = sbx_error_set(ld->err, SBX_E_CONFIG,
                               "%s: drop-in \"%s\" has a name with bytes other "
                               "than printable ASCII",
                               dir, sbxh_text_escape(shown, sizeof shown, de->d_name, 64));
            break;
        }
        if (n >= SBX_CONFIG_DROPINS_MAX) {
            rc = sbx_error_set(ld->err, SBX_E_CONFIG, "%s: more than %d drop-ins", dir,
                               SBX_CONFIG_DROPINS_MAX);
            break;
        }
        char **grown = realloc(names, (n + 1) * sizeof *grown);
        char *copy = grown ? strdup(de->d_name) : NULL;
        if (grown)
            names = grown;
        if (!copy) {
            rc = nomem(ld);
            break;
        }
        names[n++] = copy;
    }
    closedir(d);
    if (rc == SBX_OK && n > 1)
        qsort(names, n, sizeof *names, compare_names);
    for (size_t i = 0; i < n; i++) {
        if (rc == SBX_OK) {
            char *path = join_path(dir, names[i]);
            rc = path ? read_file(ld, path, false, true) : nomem(ld);
        }
        free(names[i]);
    }
    free(names);
    return rc;
}

/* The conf.d directory beside an explicit file. */
static char *dropin_dir_beside(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return strdup("conf.d");
    size_t len = (size_t)(slash - path) + 1; /* keep the slash */
    char *s = malloc(len + sizeof "conf.d");
    if (!s)
        return NULL;
    memcpy(s, path, len);
    memcpy(s + len, "conf.d", sizeof "conf.d");
    return s;
}

/* Settings that only make sense together. */
static int check_store(struct load *ld)
{
    const struct sbx_config *cfg = ld->cfg;
    if (!cfg->store_driver)
        return SBX_OK;
    if (strcmp(cfg->store_driver, "sqlite") == 0 && cfg->store_dsn)
        return sbx_error_set(ld->err, SBX_E_CONFIG,
                             "%s:%d: store.dsn: only used with driver postgres "
                             "(driver is sqlite at %s:%d; use store.path)",
                             ld->store_dsn.file, ld->store_dsn.line,
                             ld->store_driver.file, ld->store_driver.line);
    if (strcmp(cfg->store_driver, "postgres") == 0 && cfg->store_path)
        return sbx_error_set(ld->err, SBX_E_CONFIG,
                             "%s:%d: store.path: only used with driver sqlite "
                             "(driver is postgres at %s:%d; use store.dsn)",
                             ld->store_path.file, ld->store_path.line,
                             ld->store_driver.file, ld->store_driver.line);
    return SBX_OK;
}

int sbxh_config_load_dir(const char *path, const char *sysconfdir,
                         struct sbx_config **out, sbx_error *err)
{
    *out = NULL;
    struct sbx_config *cfg = calloc(1, sizeof *cfg);
    if (!cfg)
        return sbx_error_set(err, SBX_E_NOMEM, "configuration: out of memory");
    struct load ld = {.cfg = cfg, .err = err};
    int rc;
    char *dir = NULL;
    if (path) {
        char *copy = strdup(path);
        dir = dropin_dir_beside(path);
        rc = copy && dir ? read_file(&ld, copy, false, false) : nomem(&ld);
        if (!dir)
            free(copy);
    } else {
        const char *sys = sysconfdir ? sysconfdir : sbxh_install_sysconf_dir();
        char *main_file = join_path(sys, "sbx.yaml");
        dir = join_path(sys, "conf.d");
        rc = main_file && dir ? read_file(&ld, main_file, true, false) : nomem(&ld);
        if (!dir)
            free(main_file);
    }
    if (rc == SBX_OK)
        rc = read_dropins(&ld, dir);
    if (rc == SBX_OK)
        rc = check_store(&ld);
    if (rc == SBX_OK)
        rc = sbxh_config_pools_read(cfg, err);
    free(dir);
    if (rc) {
        sbxh_config_free(cfg);
        return rc;
    }
    *out = cfg;
    return SBX_OK;
}

int sbxh_config_load(const char *path, struct sbx_config **out, sbx_error *err)
{
    return sbxh_config_load_dir(path, sbxh_install_sysconf_dir(), out, err);
}

/* ------------------------------------------------------------------------ */
/* Access and cleanup                                                        */
/* ------------------------------------------------------------------------ */

static void free_sections(struct sbx_config_section *sections, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct sbx_config_section *s = &sections[i];
        free(s->slots);
        for (size_t j = 0; j < s->count; j++) {
            free(s->entries[j].key);
            free(s->entries[j].value);
        }
        free(s->entries);
        free(s->name);
    }
    free(sections);
}

void sbxh_config_free(struct sbx_config *cfg)
{
    if (!cfg)
        return;
    free(cfg->default_provider);
    free(cfg->plugin_dir);
    free(cfg->store_driver);
    free(cfg->store_path);
    free(cfg->store_dsn);
    free_sections(cfg->sections, cfg->nsections);
    free_sections(cfg->managers, cfg->nmanagers);
    free_sections(cfg->manifest, cfg->manifest ? 1 : 0);
    free_sections(cfg->session, cfg->session ? 1 : 0);
    free(cfg->session_ports);
    free_sections(cfg->pool_sections, cfg->npool_sections);
    sbxh_config_pools_free(cfg);
    for (size_t i = 0; i < cfg->nfiles; i++)
        free(cfg->files[i]);
    free(cfg->files);
    free(cfg);
}

const struct sbx_config_section *
sbxh_config_section(const struct sbx_config *cfg, const char *name)
{
    return cfg && name ? section_in(cfg->sections, cfg->nsections, name) : NULL;
}

const struct sbx_config_section *
sbxh_config_manager(const struct sbx_config *cfg, const char *name)
{
    return cfg && name ? section_in(cfg->managers, cfg->nmanagers, name) : NULL;
}

const char *sbxh_config_section_get(const struct sbx_config_section *sec,
                                    const char *key)
{
    if (!sec || !key)
        return NULL;
    long i = find_entry(sec, key);
    if (i < 0 || sec->entries[i].node != SBX_NODE_SCALAR)
        return NULL;
    return sec->entries[i].value;
}

int sbxh_config_section_node(const struct sbx_config_section *sec,
                             const char *key)
{
    long i = sec && key ? find_entry(sec, key) : -1;
    return i < 0 ? 0 : sec->entries[i].node;
}

int sbxh_config_section_entry(const struct sbx_config_section *sec,
                              const char *key, size_t index, const char **name,
                              const char **value)
{
    if (!sec || !key)
        return 0;
    long at = find_entry(sec, key);
    if (at < 0 || sec->entries[at].node == SBX_NODE_SCALAR)
        return 0;
    /* Elements follow their MAP/SEQ entry directly, in order: element
     * `index` is entries[at + 1 + index] if it still carries the prefix. */
    size_t j = (size_t)at + 1 + index;
    size_t klen = strlen(key);
    if (index >= sec->count || j >= sec->count)
        return 0;
    const struct sbx_config_entry *el = &sec->entries[j];
    if (strncmp(el->key, key, klen) != 0 || el->key[klen] != '.')
        return 0;
    if (name)
        *name = el->key + klen + 1;
    if (value)
        *value = el->value;
    return 1;
}
