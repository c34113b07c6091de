/*
 * provider_info.c - the consumer's read-only view of a provider
 * (sbx_provider_info_* of sbx.h): what its descriptor declares, without
 * handing out the descriptor and its ops table.
 */
#include "registry/loader.h"
#include "registry/provider.h"

#include <stdlib.h>

void sbxh_provider_info_init(struct sbx_provider *p)
{
    p->info = (struct sbx_provider_info){
        .name = p->plugin.name,
        .path = p->plugin.path,
        .desc = p->plugin.desc,
        .status = SBX_OK,
        .error = NULL,
        .enabled = true,
    };
}

SBX_API const sbx_provider_info *sbx_provider_get_info(const sbx_provider *p)
{
    return &p->info;
}

SBX_API const char *sbx_provider_info_name(const sbx_provider_info *info)
{
    return info->name;
}

SBX_API const char *sbx_provider_info_path(const sbx_provider_info *info)
{
    return info->path;
}

SBX_API int sbx_provider_info_status(const sbx_provider_info *info,
                                     const char **message)
{
    if (message)
        *message = info->status == SBX_OK ? NULL : info->error;
    return info->status;
}

SBX_API bool sbx_provider_info_enabled(const sbx_provider_info *info)
{
    return info->enabled;
}

SBX_API const char *sbx_provider_info_version(const sbx_provider_info *info)
{
    return info->desc ? info->desc->version : NULL;
}

SBX_API const char *sbx_provider_info_description(const sbx_provider_info *info)
{
    return info->desc ? info->desc->description : NULL;
}

SBX_API int sbx_provider_info_isolation(const sbx_provider_info *info)
{
    return info->desc ? (int)info->desc->isolation : -1;
}

SBX_API uint64_t sbx_provider_info_caps(const sbx_provider_info *info)
{
    return info->desc ? info->desc->caps : 0;
}

SBX_API bool sbx_provider_info_abi(const sbx_provider_info *info, unsigned *major,
                                   unsigned *minor)
{
    if (!info->desc)
        return false;
    if (major)
        *major = info->desc->abi_major;
    if (minor)
        *minor = info->desc->abi_minor;
    return true;
}

SBX_API bool sbx_provider_info_config_key(const sbx_provider_info *info, size_t i,
                                          const char **key, int *type,
                                          const char **description)
{
    /* Entries step by their own size: a newer provider's may be larger. */
    const struct sbx_config_key *k =
        info->desc ? sbxh_config_key_at(info->desc->config_keys, i) : NULL;
    if (!k)
        return false;
    if (key)
        *key = k->key;
    if (type)
        *type = k->type;
    if (description)
        *description = k->description;
    return true;
}

SBX_API bool sbx_provider_info_config_env(const sbx_provider_info *info, size_t i,
                                          const char **env, bool *secret)
{
    const struct sbx_config_key *k =
        info->desc ? sbxh_config_key_at(info->desc->config_keys, i) : NULL;
    if (!k)
        return false;
    bool has_env = k->size >= SBX_CONFIG_KEY_SIZE_ENV_1_2;
    if (env)
        *env = has_env ? k->env : NULL;
    if (secret)
        *secret = has_env && (k->flags & SBX_CFG_F_SECRET);
    return true;
}

SBX_API void sbx_provider_abi_version(unsigned *major, unsigned *minor)
{
    if (major)
        *major = SBX_ABI_MAJOR;
    if (minor)
        *minor = SBX_ABI_MINOR;
}

SBX_API bool sbx_provider_config_origin(const sbx_provider *p, size_t i, const char **key,
                                        const char **env, int *origin, const char **value,
                                        bool *secret)
{
    const struct sbx_config_key *k =
        p->info.desc ? sbxh_config_key_at(p->info.desc->config_keys, i) : NULL;
    if (!k)
        return false;
    bool has_env = k->size >= SBX_CONFIG_KEY_SIZE_ENV_1_2;
    const char *var = has_env ? k->env : NULL;
    bool sec = has_env && (k->flags & SBX_CFG_F_SECRET);
    /* The host refuses a credential in the configuration: never look. */
    bool in_config = !sec && sbxh_config_section_node(p->section, k->key) != 0;
    const char *cv = in_config ? sbxh_config_section_get(p->section, k->key) : NULL;
    const char *ev = var ? getenv(var) : NULL;
    int o = SBX_ORIGIN_DEFAULT;
    const char *v = NULL;
    if (in_config) {
        o = SBX_ORIGIN_CONFIG;
        v = cv;
    } else if (ev && *ev) {
        o = SBX_ORIGIN_ENV;
        v = ev;
    }
    if (key)
        *key = k->key;
    if (env)
        *env = var;
    if (origin)
        *origin = o;
    if (value)
        *value = sec || k->type == SBX_CFG_MAP || k->type == SBX_CFG_LIST ? NULL : v;
    if (secret)
        *secret = sec;
    return true;
}
