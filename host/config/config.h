/*
 * config.h - reading sbx.yaml and its conf.d drop-ins (libyaml).
 *
 * Internal to libsbx. The configuration is parsed once into plain structs;
 * each provider section is kept as a flat list of dotted keys ("labels.team")
 * with the file and line each came from, so that the registry can check it
 * against the provider's declared config_keys and report file:line:key.
 */
#ifndef SBX_HOST_CONFIG_H
#define SBX_HOST_CONFIG_H

#include <sbx/provider.h>
#include <sbx/sbx.h>

#include <stddef.h>

/* Kind of YAML node an entry came from. */
enum sbx_config_node {
    SBX_NODE_SCALAR = 1,
    SBX_NODE_MAP = 2,
    SBX_NODE_SEQ = 3
};

/* One entry of a provider section. For a map or list key there is one entry
 * for the key itself (node MAP/SEQ, value NULL) and one per element
 * ("labels.team", "args.0") with node SCALAR. */
struct sbx_config_entry {
    char *key;   /* dotted path inside the section */
    char *value; /* scalar text, NULL for MAP/SEQ */
    int node;    /* enum sbx_config_node */
    const char *file; /* borrowed from struct sbx_config.files */
    int line;         /* 1-based */
};

/* The `providers.<name>` section. Entries are indexed by key (an open
 * addressing table of entry indices + 1, 0 = empty), so loading and lookups
 * stay linear in the number of keys. */
struct sbx_config_section {
    char *name;
    const char *file;
    int line;
    struct sbx_config_entry *entries;
    size_t count, cap;
    size_t *slots;
    size_t nslots; /* a power of two, at least twice count */
};

/* Limits that bound what one configuration may make the loader do. */
#define SBX_CONFIG_FILE_MAX (1024 * 1024) /* bytes per file */
#define SBX_CONFIG_ENTRIES_MAX 4096       /* entries per provider section */
#define SBX_CONFIG_SECTIONS_MAX 256       /* provider sections */
#define SBX_CONFIG_DROPINS_MAX 256        /* conf.d files */
#define SBX_CONFIG_PORTS_MAX 64           /* session.ports */

struct sbx_config {
    char *default_provider; /* NULL when unset */
    const char *default_provider_file;
    int default_provider_line;
    char *plugin_dir; /* NULL when unset */
    char *store_driver, *store_path, *store_dsn;
    struct sbx_config_section *sections;
    size_t nsections;
    /* `package_managers.<manager>`: command lines overriding the defaults
     * (config/package_managers.c checks and reads them; the check runs
     * when a context is opened, api/ctx.c). */
    struct sbx_config_section *managers;
    size_t nmanagers;
    /* `manifest`: host directories manifests may copy from (grants),
     * checked by api/manifest_load.c when a context is opened (api/ctx.c).
     * NULL when not configured. */
    struct sbx_config_section *manifest;
    /* `session`: what every session this configuration creates declares
     * unless its spec says otherwise (sessions/acquire.c). `ports`: TCP
     * ports to expose (checked at load: 1..65535, each once, at most
     * SBX_CONFIG_PORTS_MAX), in the order given; NULL when unset. */
    struct sbx_config_section *session;
    uint16_t *session_ports;
    size_t nsession_ports;
    /* `pools.<name>`: warm pools (config/pools.c reads the sections into
     * pools at load; whether each provider declares SBX_CAP_POOL is
     * checked when a session manager opens, sessions/pools.c). */
    struct sbx_config_section *pool_sections;
    size_t npool_sections;
    struct sbx_config_pool *pools;
    size_t npools;
    char **files; /* every file read, in order; owns the strings */
    size_t nfiles;
};

/* Most members one pool may keep. */
#define SBX_CONFIG_POOL_SIZE_MAX 1024
/* Most targets in a pool's allow or setup_allow. */
#define SBX_CONFIG_POOL_TARGETS_MAX 256

/* One warm pool: `size` sandboxes of `provider` made ahead of time for
 * the sessions whose spec has this shape (what a create is given: caps,
 * network and allowlists, ports; not the manifest or packages, which are
 * applied at claim). Strings owned. */
struct sbx_config_pool {
    char *name;
    const char *file; /* borrowed from files */
    int line;
    char *provider;
    size_t size;
    char **caps;       /* capability names; resolved by sessions/pools.c */
    size_t ncaps;
    bool limited_network;
    char **allow;
    size_t nallow;
    char **setup_allow;
    size_t nsetup_allow;
    uint16_t *ports;   /* NULL when none */
    size_t nports;
};

/* config/pools.c: read cfg->pool_sections into cfg->pools (SBX_E_CONFIG
 * "file:line: pools.<name>.<key>: problem"), and free them. */
int sbxh_config_pools_read(struct sbx_config *cfg, sbx_error *err);
void sbxh_config_pools_free(struct sbx_config *cfg);

/*
 * Load the configuration. path: an explicit file (must exist); NULL means
 * the system file <sysconfdir>/sbx.yaml (absent: fine) followed by
 * <sysconfdir>/conf.d/<name>.yaml in name order (hidden files and other
 * extensions skipped), where <sysconfdir> is SBX_SYSCONF_DIR, e.g.
 * /usr/local/etc/sbx. No files at all means built-in defaults: no
 * sections, every setting NULL. With an explicit path, the conf.d directory
 * beside it is read too (if it exists). Later files may add provider
 * sections and settings; a section, a top-level scalar or a store key set
 * twice is an error naming both places.
 * On success *out is a new configuration the caller frees with
 * sbxh_config_free; on failure *out is NULL.
 * Errors: SBX_E_CONFIG "file:line: key: problem" for unknown keys, wrong
 * types, bad provider names, bad store drivers and YAML syntax errors (the
 * package_managers and manifest sections are checked by sbxh_config_open,
 * api/ctx.h);
 * SBX_E_IO for unreadable files (or a directory where a file is expected);
 * SBX_E_NOMEM.
 */
int sbxh_config_load(const char *path, struct sbx_config **out, sbx_error *err);

/* Same, but with the system configuration directory given (the directory
 * holding sbx.yaml and conf.d/; NULL means SBX_SYSCONF_DIR). Used by tests
 * and by anything that must not read the installed configuration. */
int sbxh_config_load_dir(const char *path, const char *sysconfdir,
                         struct sbx_config **out, sbx_error *err);

/* Free a configuration. NULL is ignored. */
void sbxh_config_free(struct sbx_config *cfg);

/* The section of a provider, or NULL. */
const struct sbx_config_section *
sbxh_config_section(const struct sbx_config *cfg, const char *name);

/*
 * Check a section against a provider's declared keys (NULL-key terminated
 * array, may be NULL meaning "no keys"): unknown key or wrong type gives
 * SBX_E_CONFIG "file:line: providers.<name>.<key>: problem". Values of typed
 * keys are rewritten in canonical form (SIZE in bytes, BOOL true/false, INT
 * as plain decimal, NUMBER without a leading '+'); checking twice is
 * harmless. A declared type this host does not know is SBX_E_ABI. sec may
 * be NULL (nothing to check).
 */
int sbxh_config_check_section(struct sbx_config_section *sec,
                              const struct sbx_config_key *keys,
                              sbx_error *err);

/* The `package_managers.<name>` section, or NULL. */
const struct sbx_config_section *
sbxh_config_manager(const struct sbx_config *cfg, const char *name);

/* Value of a scalar key of a section, or NULL (sec may be NULL). */
const char *sbxh_config_section_get(const struct sbx_config_section *sec,
                                    const char *key);

/* The node kind (enum sbx_config_node) of key in sec, or 0 when absent. */
int sbxh_config_section_node(const struct sbx_config_section *sec,
                             const char *key);

/* Entry `index` of a MAP or LIST key: 1 with *name and *value set, or 0. */
int sbxh_config_section_entry(const struct sbx_config_section *sec,
                              const char *key, size_t index, const char **name,
                              const char **value);

#endif
