/*
 * cmd_providers.c - `sbx providers`: every plugin installed in the search
 * path, with its descriptor (loaded, never initialized) or its load error.
 *
 * The listing is collected into a json-c array first; the table and the
 * --json output are two renderings of it.
 */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <string.h>

static void usage(FILE *f)
{
    fputs("Usage: sbx providers [--json] [--keys]\n"
          "\n"
          "List every provider plugin installed in the plugin search path\n"
          "($SBX_PLUGIN_PATH, else plugin_dir, else the installed directory),\n"
          "and every provider the configuration enables that is not installed,\n"
          "each with its outcome: one broken provider never hides the others.\n"
          "Only descriptors are loaded: no provider is initialized, no\n"
          "credentials are read and nothing is contacted.\n"
          "\n"
          "Options:\n"
          "  --json          print a JSON array (name, version, description,\n"
          "                  isolation, security_boundary, abi, capabilities,\n"
          "                  config_keys, path, enabled, default, status, error)\n"
          "  --keys          also list each provider's configuration keys (and\n"
          "                  the environment variable each falls back to)\n"
          "  -c, --config FILE  read this configuration file\n"
          "  -h, --help      show this help\n", f);
}

static const char *config_type_name(int type)
{
    switch (type) {
    case SBX_CFG_STRING: return "string";
    case SBX_CFG_INT: return "int";
    case SBX_CFG_BOOL: return "bool";
    case SBX_CFG_SIZE: return "size";
    case SBX_CFG_MAP: return "map";
    case SBX_CFG_LIST: return "list";
    case SBX_CFG_NUMBER: return "number";
    }
    return "unknown";
}

struct listing {
    json_object *array;
    const char *default_name;
    bool failed; /* out of memory while building */
};

static json_object *string_or_null(const char *s)
{
    return s ? json_object_new_string(s) : NULL;
}

static json_object *describe_caps(uint64_t caps)
{
    json_object *arr = json_object_new_array();
    for (int i = 0; arr && i < 64; i++) {
        uint64_t bit = UINT64_C(1) << i;
        if (!(caps & bit))
            continue;
        const char *name = sbx_cap_name(bit);
        char unknown[32];
        if (!name) {
            snprintf(unknown, sizeof unknown, "0x%llx", (unsigned long long)bit);
            name = unknown;
        }
        json_object_array_add(arr, json_object_new_string(name));
    }
    return arr;
}

static json_object *describe_keys(const sbx_provider_info *info)
{
    json_object *arr = json_object_new_array();
    const char *key, *description;
    int type;
    for (size_t i = 0;
         arr && sbx_provider_info_config_key(info, i, &key, &type, &description); i++) {
        json_object *k = json_object_new_object();
        json_object_object_add(k, "key", json_object_new_string(key));
        json_object_object_add(k, "type", json_object_new_string(config_type_name(type)));
        json_object_object_add(k, "description", string_or_null(description));
        const char *env = NULL;
        bool secret = false;
        sbx_provider_info_config_env(info, i, &env, &secret);
        json_object_object_add(k, "env", string_or_null(env));
        json_object_object_add(k, "secret", json_object_new_boolean(secret));
        json_object_array_add(arr, k);
    }
    return arr;
}

static void collect(void *ud, const sbx_provider_info *info)
{
    struct listing *l = ud;
    json_object *o = json_object_new_object();
    if (!o) {
        l->failed = true;
        return;
    }
    const char *name = sbx_provider_info_name(info), *error;
    int status = sbx_provider_info_status(info, &error);
    unsigned major, minor;
    /* The descriptor's members, when it could be loaded at all. */
    bool d = sbx_provider_info_abi(info, &major, &minor);
    int isolation = sbx_provider_info_isolation(info);
    json_object_object_add(o, "name", string_or_null(name));
    json_object_object_add(o, "version", string_or_null(sbx_provider_info_version(info)));
    json_object_object_add(o, "description",
                           string_or_null(sbx_provider_info_description(info)));
    json_object_object_add(
        o, "isolation",
        d ? json_object_new_string(cli_isolation_text((uint32_t)isolation)) : NULL);
    json_object_object_add(o, "security_boundary",
                           d ? json_object_new_boolean(isolation != SBX_ISOLATION_NONE)
                             : NULL);
    if (d) {
        json_object *abi = json_object_new_object();
        json_object_object_add(abi, "major", json_object_new_int64(major));
        json_object_object_add(abi, "minor", json_object_new_int64(minor));
        json_object_object_add(o, "abi", abi);
        json_object_object_add(o, "capabilities",
                               describe_caps(sbx_provider_info_caps(info)));
        json_object_object_add(o, "config_keys", describe_keys(info));
    } else {
        json_object_object_add(o, "abi", NULL);
        json_object_object_add(o, "capabilities", json_object_new_array());
        json_object_object_add(o, "config_keys", json_object_new_array());
    }
    json_object_object_add(o, "path", string_or_null(sbx_provider_info_path(info)));
    json_object_object_add(o, "enabled",
                           json_object_new_boolean(sbx_provider_info_enabled(info)));
    json_object_object_add(
        o, "default", json_object_new_boolean(name && !strcmp(name, l->default_name)));
    json_object_object_add(o, "status",
                           json_object_new_string(status == SBX_OK ? "ok"
                                                                   : sbx_strerror(status)));
    json_object_object_add(o, "error", status == SBX_OK ? NULL : string_or_null(error));
    json_object_array_add(l->array, o);
}

static const char *field(json_object *o, const char *key)
{
    json_object *v;
    if (!json_object_object_get_ex(o, key, &v) || !v)
        return "-";
    return json_object_get_string(v);
}

/* The ABI as "major.minor", or "-" when the descriptor could not be read. */
static const char *abi_text(json_object *o, char *buf, size_t len)
{
    json_object *abi, *major, *minor;
    if (!json_object_object_get_ex(o, "abi", &abi) || !abi ||
        !json_object_object_get_ex(abi, "major", &major) ||
        !json_object_object_get_ex(abi, "minor", &minor))
        return "-";
    snprintf(buf, len, "%d.%d", json_object_get_int(major), json_object_get_int(minor));
    return buf;
}

static const char *caps_text(json_object *o, char *buf, size_t len)
{
    json_object *caps;
    size_t used = 0;
    buf[0] = '\0';
    if (json_object_object_get_ex(o, "capabilities", &caps)) {
        size_t n = json_object_array_length(caps);
        for (size_t i = 0; i < n; i++) {
            int w = snprintf(buf + used, len - used, "%s%s", i ? "," : "",
                             json_object_get_string(json_object_array_get_idx(caps, i)));
            if (w < 0 || (size_t)w >= len - used)
                break;
            used += (size_t)w;
        }
    }
    return used ? buf : "-";
}

static const char *enabled_text(json_object *o)
{
    json_object *en, *def;
    json_object_object_get_ex(o, "enabled", &en);
    json_object_object_get_ex(o, "default", &def);
    if (json_object_get_boolean(def))
        return "default";
    return json_object_get_boolean(en) ? "yes" : "no";
}

static void print_table(json_object *arr, bool keys)
{
    size_t n = json_object_array_length(arr);
    int wname = 4, wver = 7, wcaps = 12;
    char buf[512];
    for (size_t i = 0; i < n; i++) {
        json_object *o = json_object_array_get_idx(arr, i);
        int l = (int)strlen(field(o, "name"));
        wname = l > wname ? l : wname;
        l = (int)strlen(field(o, "version"));
        wver = l > wver ? l : wver;
        l = (int)strlen(caps_text(o, buf, sizeof buf));
        wcaps = l > wcaps ? l : wcaps;
    }
    printf("%-*s  %-*s  %-3s  %-9s  %-*s  %-7s  %s\n", wname, "NAME", wver, "VERSION",
           "ABI", "ISOLATION", wcaps, "CAPABILITIES", "ENABLED", "PATH");
    for (size_t i = 0; i < n; i++) {
        json_object *o = json_object_array_get_idx(arr, i);
        char abi[32];
        printf("%-*s  %-*s  %-3s  %-9s  %-*s  %-7s  %s\n", wname, field(o, "name"), wver,
               field(o, "version"), abi_text(o, abi, sizeof abi), field(o, "isolation"),
               wcaps, caps_text(o, buf, sizeof buf), enabled_text(o), field(o, "path"));
        if (strcmp(field(o, "status"), "ok") != 0)
            printf("%*s  error: %s\n", wname, "", field(o, "error"));
        else if (!strcmp(field(o, "isolation"), "none"))
            printf("%*s  %s; not a security boundary\n", wname, "",
                   field(o, "description"));
        else
            printf("%*s  %s\n", wname, "", field(o, "description"));
        json_object *ks;
        if (keys && json_object_object_get_ex(o, "config_keys", &ks)) {
            size_t nk = json_object_array_length(ks);
            for (size_t k = 0; k < nk; k++) {
                json_object *key = json_object_array_get_idx(ks, k);
                json_object *env, *secret;
                bool has_env = json_object_object_get_ex(key, "env", &env) &&
                               json_object_get_type(env) == json_type_string;
                bool is_secret = json_object_object_get_ex(key, "secret", &secret) &&
                                 json_object_get_boolean(secret);
                printf("%*s  %s (%s): %s%s%s%s\n", wname, "", field(key, "key"),
                       field(key, "type"), field(key, "description"),
                       has_env ? (is_secret ? " [only from $" : " [else $") : "",
                       has_env ? json_object_get_string(env) : "", has_env ? "]" : "");
            }
        }
    }
}

int cmd_providers(const struct cli_globals *g, int argc, char **argv)
{
    int json = 0, keys = 0;
    const struct option longopts[] = {
        {"json", no_argument, &json, 1},
        {"keys", no_argument, &keys, 1},
        CLI_COMMON_LONGOPTS,
    };
    struct cli_globals globals = *g;
    const struct cli_command cmd = {"providers", CLI_EXIT_USAGE, usage, "+:c:h",
                                    longopts, NULL, NULL, &globals};
    int status = cli_parse_no_operands(&cmd, argc, argv);
    if (status != CLI_EXIT_OK)
        return status == CLI_HELP_SHOWN ? CLI_EXIT_OK : status;

    sbx_ctx *ctx;
    if (cli_open_lenient(&globals, &ctx) != SBX_OK)
        return CLI_EXIT_SBX;
    struct listing l = {json_object_new_array(), sbx_default_provider(ctx), false};
    sbx_error err;
    int rc = l.array ? sbx_list_installed(ctx, collect, &l, &err)
                     : sbx_error_set(&err, SBX_E_NOMEM, "out of memory");
    if (rc == SBX_OK && l.failed)
        rc = sbx_error_set(&err, SBX_E_NOMEM, "out of memory");
    if (rc != SBX_OK) {
        cli_error("%s", err.message);
    } else if (json) {
        puts(json_object_to_json_string_ext(l.array, JSON_C_TO_STRING_PRETTY |
                                                         JSON_C_TO_STRING_NOSLASHESCAPE));
    } else {
        print_table(l.array, keys != 0);
    }
    json_object_put(l.array);
    sbx_close(ctx);
    if (rc == SBX_OK && fflush(stdout) != 0) {
        cli_error("cannot write the listing: %s", strerror(errno));
        rc = SBX_E_IO;
    }
    return rc == SBX_OK ? CLI_EXIT_OK : CLI_EXIT_SBX;
}
