/*
 * loader.c - finding, opening and validating provider plugins.
 *
 * The handshake runs nothing of a plugin but sbx_provider_describe(): a
 * file with ELF constructors of its own (which dlopen would run) is
 * refused before it is mapped (plugin_elf.c). Everything the
 * descriptor says is checked before anyone calls an op, and every refusal
 * names the provider, the file and the expected and actual values, so an
 * operator can tell a stale plugin from a broken one without a debugger.
 */
#include "registry/loader.h"
#include "registry/capabilities.h"
#include "registry/plugin_elf.h"
#include "base/text_escape.h"

#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Longest provider name (see sbxh_plugin_name_valid). */
#define NAME_MAX_LEN 64
/* Longest provider version string a descriptor may carry. */
#define VERSION_MAX_LEN 64
/* Longest one-line description a descriptor may carry. */
#define DESCRIPTION_MAX_LEN 200
/* Most configuration keys a descriptor may declare: a bound that stops the
 * host from walking a missing terminator through the plugin's memory. */
#define CONFIG_KEYS_MAX 256

/* Ops every provider must implement (all inside SBX_OPS_SIZE_1_0). The ops
 * each capability needs are in the capability table (capabilities.c). */
#define OP SBXH_OP_REF
static const struct sbxh_op_ref core_ops[] = {
    OP(init),      OP(fini),       OP(create), OP(attach),  OP(exec),
    OP(read_file), OP(write_file), OP(root),   OP(release), OP(destroy),
};
#undef OP

bool sbxh_plugin_name_valid(const char *name)
{
    if (!name || !*name)
        return false;
    size_t n = 0;
    for (const char *c = name; *c; c++, n++) {
        if (n >= NAME_MAX_LEN)
            return false;
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_' ||
              *c == '-'))
            return false;
    }
    return true;
}

/* An untrusted string from a plugin, quoted and escaped for a message, so
 * a hostile descriptor cannot forge or garble the host's output. */
static void quote_untrusted(char *dst, size_t cap, const char *s)
{
    if (!s) {
        snprintf(dst, cap, "NULL");
        return;
    }
    char inner[NAME_MAX_LEN * 4 + 8];
    sbxh_text_escape(inner, sizeof inner, s, NAME_MAX_LEN);
    /* the precision keeps the quotes inside cap */
    snprintf(dst, cap, "\"%.*s\"", (int)(cap > 3 ? cap - 3 : 0), inner);
}

/* Set err to `provider "<name>" (<path>): <detail>` and return status. */
static int refuse(sbx_error *err, int status, const char *name, const char *path,
                  const char *fmt, ...) SBX_PRINTF_LIKE(5, 6);

static int refuse(sbx_error *err, int status, const char *name, const char *path,
                  const char *fmt, ...)
{
    char detail[SBX_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    return sbx_error_set(err, status, "provider \"%s\" (%s): %s", name, path, detail);
}

/* Whether the op at `offset` lies inside the plugin's table and is set.
 * Members beyond ops_size do not exist in the plugin and count as absent. */
static bool op_present(const struct sbx_provider_ops *ops, uint32_t ops_size,
                       size_t offset, bool *beyond)
{
    void (*fn)(void);
    *beyond = offset + sizeof fn > ops_size;
    if (*beyond)
        return false;
    /* All function pointers share one representation on the platforms we
     * support; memcpy avoids reading a member through the wrong type. */
    memcpy(&fn, (const char *)ops + offset, sizeof fn);
    return fn != NULL;
}

/* Descriptor strings must be short printable text (shown by `sbx providers`). */
static bool text_valid(const char *v, size_t max)
{
    if (!v || !*v || strnlen(v, max + 1) > max)
        return false;
    for (const unsigned char *c = (const unsigned char *)v; *c; c++)
        if (*c < 0x20 || *c >= 0x7f)
            return false;
    return true;
}

/* The prefix, then the members a 1.0 host reads. */
static int validate_header(const struct sbx_provider_desc *desc, const char *name,
                           const char *path, sbx_error *err)
{
    if (!desc)
        return refuse(err, SBX_E_ABI, name, path,
                      "%s() returned NULL: expected a provider descriptor",
                      SBX_PROVIDER_ENTRY);
    if (desc->abi_major != SBX_ABI_MAJOR)
        return refuse(err, SBX_E_ABI, name, path,
                      "ABI major version mismatch: host expects %d, plugin has %u "
                      "(plugin ABI %u.%u)",
                      SBX_ABI_MAJOR, desc->abi_major, desc->abi_major,
                      desc->abi_minor);
    if (desc->abi_minor > SBX_ABI_MINOR)
        return refuse(err, SBX_E_ABI, name, path,
                      "ABI minor version too new: host supports up to %d.%d, "
                      "plugin requires %u.%u",
                      SBX_ABI_MAJOR, SBX_ABI_MINOR, desc->abi_major, desc->abi_minor);
    if (desc->desc_size < SBX_DESC_SIZE_1_0)
        return refuse(err, SBX_E_ABI, name, path,
                      "descriptor size too small: host expects at least %zu bytes "
                      "(ABI %d.0), plugin has %u",
                      (size_t)SBX_DESC_SIZE_1_0, SBX_ABI_MAJOR, desc->desc_size);
    if (desc->ops_size < SBX_OPS_SIZE_1_0)
        return refuse(err, SBX_E_ABI, name, path,
                      "ops table size too small: host expects at least %zu bytes "
                      "(ABI %d.0), plugin has %u",
                      (size_t)SBX_OPS_SIZE_1_0, SBX_ABI_MAJOR, desc->ops_size);

    char shown[NAME_MAX_LEN * 4 + 8];
    if (!sbxh_plugin_name_valid(desc->name)) {
        quote_untrusted(shown, sizeof shown, desc->name);
        return refuse(err, SBX_E_ABI, name, path,
                      "invalid provider name in descriptor: expected \"%s\" "
                      "(letters a-z, digits, '_' or '-', 1 to %d characters), "
                      "plugin has %s",
                      name, NAME_MAX_LEN, shown);
    }
    if (strcmp(desc->name, name) != 0)
        return refuse(err, SBX_E_ABI, name, path,
                      "name mismatch: expected \"%s\" (the file name), plugin has "
                      "\"%s\"",
                      name, desc->name);
    if (!text_valid(desc->version, VERSION_MAX_LEN)) {
        quote_untrusted(shown, sizeof shown, desc->version);
        return refuse(err, SBX_E_ABI, name, path,
                      "invalid provider version: expected a non-empty printable "
                      "string of at most %d characters, plugin has %s",
                      VERSION_MAX_LEN, shown);
    }
    if (!text_valid(desc->description, DESCRIPTION_MAX_LEN)) {
        quote_untrusted(shown, sizeof shown, desc->description);
        return refuse(err, SBX_E_ABI, name, path,
                      "invalid provider description: expected one printable line "
                      "of 1 to %d characters, plugin has %s",
                      DESCRIPTION_MAX_LEN, shown);
    }
    if (desc->isolation > SBX_ISOLATION_VM)
        return refuse(err, SBX_E_ABI, name, path,
                      "unknown isolation %u: host knows 0 (none), 1 (container) "
                      "and 2 (vm) (ABI %d.%d)",
                      desc->isolation, SBX_ABI_MAJOR, SBX_ABI_MINOR);
    if (desc->reserved0)
        return refuse(err, SBX_E_ABI, name, path,
                      "reserved member reserved0 is not zero: expected 0, plugin "
                      "has 0x%x",
                      desc->reserved0);
    for (size_t i = 0; i < sizeof desc->reserved / sizeof desc->reserved[0]; i++)
        if (desc->reserved[i])
            return refuse(err, SBX_E_ABI, name, path,
                          "reserved member reserved[%zu] is not zero: expected "
                          "NULL, plugin has %p",
                          i, desc->reserved[i]);
    return SBX_OK;
}

const struct sbx_config_key *sbxh_config_key_at(const struct sbx_config_key *keys,
                                                size_t i)
{
    if (!keys)
        return NULL;
    const struct sbx_config_key *k =
        (const struct sbx_config_key *)((const char *)keys + i * keys->size);
    return k->key ? k : NULL;
}

/* The key array: entries of one size, at least the 1.0 entry, well-formed
 * names and types, terminated within CONFIG_KEYS_MAX entries. */
static int validate_config_keys(const struct sbx_config_key *keys, const char *name,
                                const char *path, sbx_error *err)
{
    if (!keys)
        return SBX_OK;
    if (keys->size < SBX_CONFIG_KEY_SIZE_1_0 || keys->size % sizeof(void *))
        return refuse(err, SBX_E_ABI, name, path,
                      "config key entry size invalid: expected a multiple of %zu of "
                      "at least %zu bytes (ABI 1.0; write entries with "
                      "SBX_CONFIG_KEY), plugin has %u",
                      sizeof(void *), (size_t)SBX_CONFIG_KEY_SIZE_1_0, keys->size);
    char shown[NAME_MAX_LEN * 4 + 8];
    for (size_t i = 0; i <= CONFIG_KEYS_MAX; i++) {
        const struct sbx_config_key *k =
            (const struct sbx_config_key *)((const char *)keys + i * keys->size);
        if (!k->key)
            return SBX_OK;
        if (i == CONFIG_KEYS_MAX)
            break;
        if (k->size != keys->size)
            return refuse(err, SBX_E_ABI, name, path,
                          "config key %zu has size %u, the first has %u: expected "
                          "every entry built with SBX_CONFIG_KEY",
                          i, k->size, keys->size);
        if (!text_valid(k->key, NAME_MAX_LEN) || strchr(k->key, '.')) {
            quote_untrusted(shown, sizeof shown, k->key);
            return refuse(err, SBX_E_ABI, name, path,
                          "config key %zu has an invalid name: expected printable "
                          "text without '.', at most %d characters, plugin has %s",
                          i, NAME_MAX_LEN, shown);
        }
        if (k->type < SBX_CFG_STRING || k->type > SBX_CFG_NUMBER)
            return refuse(err, SBX_E_ABI, name, path,
                          "config key \"%s\" has unknown type %d: host knows %d to "
                          "%d (ABI %d.%d)",
                          k->key, k->type, SBX_CFG_STRING, SBX_CFG_NUMBER,
                          SBX_ABI_MAJOR, SBX_ABI_MINOR);
        if (k->size >= SBX_CONFIG_KEY_SIZE_ENV_1_2) {
            if (k->env && !text_valid(k->env, NAME_MAX_LEN))
                return refuse(err, SBX_E_ABI, name, path,
                              "config key \"%s\" has an invalid environment variable name",
                              k->key);
            if ((k->flags & SBX_CFG_F_SECRET) && (!k->env || k->type != SBX_CFG_STRING))
                return refuse(err, SBX_E_ABI, name, path,
                              "config key \"%s\" is SBX_CFG_F_SECRET: expected a string "
                              "read from an environment variable (SBX_CONFIG_SECRET)",
                              k->key);
            if (k->flags & ~SBX_CFG_F_SECRET)
                return refuse(err, SBX_E_ABI, name, path,
                              "config key \"%s\" has unknown flags 0x%x", k->key,
                              (unsigned)(k->flags & ~SBX_CFG_F_SECRET));
        }
    }
    return refuse(err, SBX_E_ABI, name, path,
                  "config key array has no terminator within %d entries: expected "
                  "it to end with SBX_CONFIG_KEYS_END",
                  CONFIG_KEYS_MAX);
}

static int validate_ops(const struct sbx_provider_desc *desc, const char *name,
                        const char *path, sbx_error *err)
{
    const struct sbx_provider_ops *ops = desc->ops;
    if (!ops)
        return refuse(err, SBX_E_ABI, name, path,
                      "ops table is NULL: expected a pointer to the provider's ops");

    bool beyond;
    for (size_t i = 0; i < sizeof core_ops / sizeof core_ops[0]; i++)
        if (!op_present(ops, desc->ops_size, core_ops[i].offset, &beyond))
            return refuse(err, SBX_E_ABI, name, path,
                          "core op %s is missing: expected a function, plugin has "
                          "NULL",
                          core_ops[i].name);

    for (size_t i = 0; i < sizeof ops->reserved / sizeof ops->reserved[0]; i++) {
        size_t off = offsetof(struct sbx_provider_ops, reserved) + i * sizeof(void (*)(void));
        if (op_present(ops, desc->ops_size, off, &beyond))
            return refuse(err, SBX_E_ABI, name, path,
                          "reserved op slot reserved[%zu] is set: expected NULL "
                          "(the memory and egress ops are appended in ABI 1.1)",
                          i);
    }

    /* A descriptor may claim only the bits its own minor knows (a 1.0
     * descriptor none that 1.1 introduced); validate_header refused minors
     * above this host's. */
    uint64_t known = sbxh_caps_known(desc->abi_minor);
    uint64_t unknown = desc->caps & ~known;
    if (unknown)
        return refuse(err, SBX_E_ABI, name, path,
                      "unknown capability bits 0x%llx: host knows 0x%llx (ABI %d.%u), "
                      "plugin declares 0x%llx",
                      (unsigned long long)unknown, (unsigned long long)known,
                      SBX_ABI_MAJOR, desc->abi_minor, (unsigned long long)desc->caps);

    for (size_t i = 0; i < sbxh_ncaps; i++) {
        const struct sbxh_cap *r = &sbxh_caps[i];
        if (!(desc->caps & r->bit))
            continue;
        uint64_t lacking = r->needs & ~desc->caps;
        if (lacking) {
            const struct sbxh_cap *n = sbxh_cap_find(lacking & -lacking);
            return refuse(err, SBX_E_ABI, name, path,
                          "capability %s declared without %s, which it needs: "
                          "expected bits 0x%llx set, plugin declares 0x%llx",
                          r->name, n ? n->name : "?",
                          (unsigned long long)(r->bit | r->needs),
                          (unsigned long long)desc->caps);
        }
        for (size_t j = 0; j < r->nops; j++) {
            if (op_present(ops, desc->ops_size, r->ops[j].offset, &beyond))
                continue;
            if (beyond)
                return refuse(err, SBX_E_ABI, name, path,
                              "capability %s declared but op %s is absent: expected "
                              "an ops table of at least %zu bytes, plugin has %u",
                              r->name, r->ops[j].name,
                              r->ops[j].offset + sizeof(void (*)(void)),
                              desc->ops_size);
            return refuse(err, SBX_E_ABI, name, path,
                          "capability %s declared but op %s is missing: expected a "
                          "function, plugin has NULL",
                          r->name, r->ops[j].name);
        }
    }
    return SBX_OK;
}

int sbxh_plugin_validate(const struct sbx_provider_desc *desc, const char *name,
                         const char *path, sbx_error *err)
{
    if (!sbxh_plugin_name_valid(name)) {
        char shown[NAME_MAX_LEN * 4 + 8];
        quote_untrusted(shown, sizeof shown, name);
        return sbx_error_set(err, SBX_E_INVALID,
                             "invalid provider name %s: expected letters a-z, "
                             "digits, '_' or '-', 1 to %d characters",
                             shown, NAME_MAX_LEN);
    }
    if (!path)
        path = "?";
    int rc = validate_header(desc, name, path, err);
    if (rc != SBX_OK)
        return rc;
    rc = validate_config_keys(desc->config_keys, name, path, err);
    if (rc != SBX_OK)
        return rc;
    return validate_ops(desc, name, path, err);
}

/* ------------------------------------------------------------------------ */
/* Search path                                                                */
/* ------------------------------------------------------------------------ */

/*
 * Walk the colon-separated directories of a search path. Empty components
 * are skipped rather than taken as the current directory, so a stray ':'
 * never loads code from wherever the process happens to run. Trailing
 * slashes are dropped. Returns the next component's start and length, or
 * NULL at the end.
 */
static const char *next_dir(const char **cursor, size_t *len)
{
    const char *p = *cursor;
    while (p && *p) {
        const char *end = strchr(p, ':');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        const char *start = p;
        p = end ? end + 1 : p + n;
        while (n > 1 && start[n - 1] == '/')
            n--;
        if (n > 0) {
            *cursor = p;
            *len = n;
            return start;
        }
    }
    *cursor = p;
    return NULL;
}

/* "<dir>/<file>" in a new string, or NULL when out of memory. */
static char *join(const char *dir, size_t dir_len, const char *file, const char *ext)
{
    size_t flen = strlen(file), elen = strlen(ext);
    bool slash = !(dir_len == 1 && dir[0] == '/');
    char *p = malloc(dir_len + slash + flen + elen + 1);
    if (!p)
        return NULL;
    memcpy(p, dir, dir_len);
    if (slash)
        p[dir_len] = '/';
    memcpy(p + dir_len + slash, file, flen);
    memcpy(p + dir_len + slash + flen, ext, elen + 1);
    return p;
}

/* Whether `path` is (or links to) a regular file. */
static bool is_regular(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void sbxh_plugin_names_free(char **names)
{
    if (!names)
        return;
    for (char **n = names; *n; n++)
        free(*n);
    free(names);
}

/* Append every "<valid name>.so" regular file of one directory. */
static bool collect_dir(const char *dir, size_t dir_len, char ***names, size_t *count,
                        size_t *cap)
{
    char *dirz = strndup(dir, dir_len);
    if (!dirz)
        return false;
    DIR *d = opendir(dirz);
    if (!d) { /* a missing or unreadable directory holds no plugins */
        free(dirz);
        return true;
    }
    bool ok = true;
    struct dirent *e;
    while (ok && (e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n <= 3 || n - 3 > NAME_MAX_LEN || strcmp(e->d_name + n - 3, ".so") != 0)
            continue;
        char stem[NAME_MAX_LEN + 1];
        memcpy(stem, e->d_name, n - 3);
        stem[n - 3] = '\0';
        if (!sbxh_plugin_name_valid(stem))
            continue;
        char *full = join(dirz, dir_len, e->d_name, "");
        if (!full) {
            ok = false;
            break;
        }
        bool regular = is_regular(full);
        free(full);
        if (!regular)
            continue;
        if (*count + 2 > *cap) {
            size_t ncap = *cap ? *cap * 2 : 16;
            char **grown = realloc(*names, ncap * sizeof *grown);
            if (!grown) {
                ok = false;
                break;
            }
            *names = grown;
            *cap = ncap;
        }
        (*names)[*count] = strdup(stem);
        if (!(*names)[*count]) {
            ok = false;
            break;
        }
        (*count)++;
    }
    closedir(d);
    free(dirz);
    return ok;
}

char **sbxh_plugin_names(const char *search_path)
{
    char **names = NULL;
    size_t count = 0, cap = 0;
    const char *cursor = search_path, *dir;
    size_t len;
    while ((dir = next_dir(&cursor, &len)) != NULL) {
        if (!collect_dir(dir, len, &names, &count, &cap)) {
            if (names)
                names[count] = NULL;
            sbxh_plugin_names_free(names);
            return NULL;
        }
    }
    if (!names) {
        names = calloc(1, sizeof *names);
        return names;
    }
    qsort(names, count, sizeof *names, cmp_names);
    size_t kept = 0;
    for (size_t i = 0; i < count; i++) {
        if (kept && strcmp(names[kept - 1], names[i]) == 0)
            free(names[i]);
        else
            names[kept++] = names[i];
    }
    names[kept] = NULL;
    return names;
}

/* The NOT_FOUND refusal, listing what is installed. */
static int refuse_unknown(const char *search_path, const char *name, sbx_error *err)
{
    char list[SBX_ERROR_MAX];
    size_t used = 0;
    char **names = sbxh_plugin_names(search_path);
    if (!names) {
        snprintf(list, sizeof list, "(could not list: out of memory)");
    } else if (!names[0]) {
        snprintf(list, sizeof list, "none");
    } else {
        list[0] = '\0';
        for (char **n = names; *n; n++) {
            int w = snprintf(list + used, sizeof list - used, "%s%s",
                             used ? ", " : "", *n);
            if (w < 0 || (size_t)w >= sizeof list - used) {
                /* too many to show: keep what fits and say so */
                if (used + 5 < sizeof list)
                    snprintf(list + used, sizeof list - used, ", ...");
                break;
            }
            used += (size_t)w;
        }
    }
    sbxh_plugin_names_free(names);
    return sbx_error_set(err, SBX_E_NOT_FOUND,
                         "provider \"%s\" (%s.so): not installed: no %s.so in "
                         "search path \"%s\"; installed providers: %s",
                         name, name, name, search_path ? search_path : "", list);
}

/*
 * Find the first <dir>/<name>.so of the search path; the first directory
 * that has the entry wins, even when that entry is unusable (falling
 * through to a later directory would silently load a different plugin).
 */
static int resolve(const char *search_path, const char *name, char **out,
                   sbx_error *err)
{
    const char *cursor = search_path, *dir;
    size_t len;
    while ((dir = next_dir(&cursor, &len)) != NULL) {
        char *path = join(dir, len, name, ".so");
        if (!path)
            return sbx_error_set(err, SBX_E_NOMEM, "provider \"%s\": out of memory",
                                 name);
        struct stat st;
        if (stat(path, &st) == 0) {
            if (!S_ISREG(st.st_mode)) {
                int rc = refuse(err, SBX_E_ABI, name, path,
                                "not a regular file: expected a shared object, "
                                "found a %s",
                                S_ISDIR(st.st_mode) ? "directory" : "special file");
                free(path);
                return rc;
            }
            *out = path;
            return SBX_OK;
        }
        int e = errno;
        if (e == ENOENT && lstat(path, &st) == 0) {
            int rc = refuse(err, SBX_E_NOT_FOUND, name, path,
                            "file is missing: the symbolic link points to a file "
                            "that does not exist");
            free(path);
            return rc;
        }
        if (e != ENOENT && e != ENOTDIR) {
            int rc = refuse(err, SBX_E_ABI, name, path, "cannot access file: %s",
                            strerror(e));
            free(path);
            return rc;
        }
        free(path);
    }
    return refuse_unknown(search_path, name, err);
}

/*
 * A provider links nothing from the host (-z defs at build time cannot
 * prove it: the host's own libsbx would satisfy the symbols). Walk the
 * loaded object's dynamic section and refuse a DT_NEEDED entry naming
 * libsbx, so a provider that would break with the next libsbx soname, or
 * call host internals, is stopped at the handshake.
 */
static int check_no_libsbx(void *dl, const char *name, const char *path,
                           sbx_error *err)
{
    struct link_map *lm = NULL;
    if (dlinfo(dl, RTLD_DI_LINKMAP, &lm) != 0 || !lm || !lm->l_ld)
        return SBX_OK; /* nothing to inspect: not an ELF object we can read */
    const char *strtab = NULL;
    for (const ElfW(Dyn) *d = lm->l_ld; d->d_tag != DT_NULL; d++)
        if (d->d_tag == DT_STRTAB) {
            ElfW(Addr) a = d->d_un.d_ptr;
            /* glibc relocates these entries in place on most targets;
             * where it does not, they are still offsets from l_addr. */
            if (a < lm->l_addr)
                a += lm->l_addr;
            strtab = (const char *)a;
        }
    if (!strtab)
        return SBX_OK;
    for (const ElfW(Dyn) *d = lm->l_ld; d->d_tag != DT_NULL; d++) {
        if (d->d_tag != DT_NEEDED)
            continue;
        const char *need = strtab + d->d_un.d_val;
        if (strncmp(need, "libsbx.so", 9) == 0 || strncmp(need, "libsbx-", 7) == 0)
            return refuse(err, SBX_E_ABI, name, path,
                          "links against the host library (needs %.64s): expected "
                          "a provider that links nothing from the host; build it "
                          "with only pkg-config sbx-provider",
                          need);
    }
    return SBX_OK;
}

/*
 * Refuse a file whose constructors dlopen would run before the descriptor
 * could be checked. A file that cannot be read as ELF here is left to
 * dlopen, which reports what is wrong with it.
 */
static int check_no_constructors(const char *name, const char *path, sbx_error *err)
{
    if (!SBX_PLUGIN_CONSTRUCTOR_CHECK)
        return SBX_OK;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return SBX_OK;
    size_t n = 0;
    const char *why = NULL;
    int rc = sbxh_plugin_elf_constructors(fd, &n, &why);
    close(fd);
    if (rc == 0 && n > SBX_PLUGIN_TOOLCHAIN_CONSTRUCTORS)
        return refuse(err, SBX_E_ABI, name, path,
                      "has ELF constructors, which would run when it is loaded, "
                      "before the handshake: expected at most %d load-time "
                      "initializer (the toolchain's own), plugin has %zu "
                      "(DT_INIT_ARRAY and DT_PREINIT_ARRAY entries); do that work "
                      "in init",
                      SBX_PLUGIN_TOOLCHAIN_CONSTRUCTORS, n);
    return SBX_OK;
}

/* Check the file, dlopen, find the entry point, describe and validate. */
static int open_plugin(const char *name, const char *path, void **dl_out,
                       const struct sbx_provider_desc **desc_out, sbx_error *err)
{
    int pre = check_no_constructors(name, path, err);
    if (pre != SBX_OK)
        return pre;
    dlerror();
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        const char *why = dlerror();
        return refuse(err, SBX_E_ABI, name, path, "cannot load shared object: %s",
                      why ? why : "unknown dlopen error");
    }
    dlerror();
    void *sym = dlsym(dl, SBX_PROVIDER_ENTRY);
    const char *why = dlerror();
    int rc;
    if (!sym) {
        rc = refuse(err, SBX_E_ABI, name, path,
                    "entry point %s() not found: expected the symbol to be exported, "
                    "plugin does not export it (%s)",
                    SBX_PROVIDER_ENTRY, why ? why : "symbol is NULL");
    } else {
        sbx_provider_describe_fn describe;
        /* POSIX guarantees a data pointer from dlsym converts to a function
         * pointer; memcpy keeps -pedantic quiet about it. */
        memcpy(&describe, &sym, sizeof describe);
        const struct sbx_provider_desc *desc = describe();
        rc = sbxh_plugin_validate(desc, name, path, err);
        if (rc == SBX_OK)
            rc = check_no_libsbx(dl, name, path, err);
        if (rc == SBX_OK) {
            *dl_out = dl;
            *desc_out = desc;
            return SBX_OK;
        }
    }
    /* Refused before any op ran: unmapping it is safe, and keeps a process
     * that probes many broken plugins from accumulating them. */
    dlclose(dl);
    return rc;
}

int sbxh_plugin_load(const char *search_path, const char *name,
                     struct sbx_plugin *out, sbx_error *err)
{
    if (!sbxh_plugin_name_valid(name)) {
        char shown[NAME_MAX_LEN * 4 + 8];
        quote_untrusted(shown, sizeof shown, name);
        return sbx_error_set(err, SBX_E_INVALID,
                             "invalid provider name %s: expected letters a-z, "
                             "digits, '_' or '-', 1 to %d characters",
                             shown, NAME_MAX_LEN);
    }
    char *path = NULL;
    int rc = resolve(search_path, name, &path, err);
    if (rc != SBX_OK)
        return rc;

    void *dl = NULL;
    const struct sbx_provider_desc *desc = NULL;
    rc = open_plugin(name, path, &dl, &desc, err);
    if (rc != SBX_OK) {
        free(path);
        return rc;
    }
    /* Validated: from here on the plugin stays mapped for good. */
    char *name_copy = strdup(name);
    if (!name_copy) {
        free(path);
        return sbx_error_set(err, SBX_E_NOMEM, "provider \"%s\": out of memory", name);
    }
    out->name = name_copy;
    out->path = path;
    out->desc = desc;
    out->dl = dl;
    return SBX_OK;
}

void sbxh_plugin_clear(struct sbx_plugin *p)
{
    if (!p)
        return;
    free(p->name);
    free(p->path);
    p->name = NULL;
    p->path = NULL;
    p->desc = NULL;
    /* p->dl is deliberately left open: plugins are never dlclosed. */
    p->dl = NULL;
}
