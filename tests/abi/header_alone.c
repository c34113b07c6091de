/*
 * header_alone.c - sbx/provider.h must compile on its own as strict C99
 * (compiled by a ctest test with -std=c99 -pedantic -Werror), including a
 * provider defined with SBX_PROVIDER_DEFINE. Nothing else is included.
 */
#include <sbx/provider.h>

static int demo_init(const struct sbx_host *host, sbx_call *call, void **state)
{
    (void)call;
    *state = NULL;
    if (host->size < sizeof *host)
        return SBX_E_ABI;
    return sbx_status_is_transient(SBX_E_TIMEOUT) ? SBX_OK : SBX_E_INTERNAL;
}

static const struct sbx_provider_ops demo_ops = {demo_init, NULL, NULL, NULL, NULL,
                                                 NULL, NULL, NULL, NULL, NULL,
                                                 NULL, NULL, NULL, NULL,
                                                 {NULL, NULL}, NULL, NULL,
                                                 NULL, NULL, NULL, NULL, NULL, NULL,
                                                 /* ABI 1.2: proc_start .. proc_list */
                                                 NULL, NULL, NULL, NULL, NULL,
                                                 /* proc_resize, file_list .. file_rename */
                                                 NULL, NULL, NULL, NULL, NULL, NULL,
                                                 /* port_resolve, pause, resume, health,
                                                  * fork */
                                                 NULL, NULL, NULL, NULL, NULL};

static const struct sbx_config_key demo_keys[] = {
    SBX_CONFIG_KEY("root", SBX_CFG_STRING, "a directory"),
    SBX_CONFIG_KEYS_END};

SBX_PROVIDER_DEFINE("demo", "0.0.1", "the header compiled alone", SBX_ISOLATION_NONE,
                    SBX_CAP_PACKAGES | SBX_CAP_OUTPUT_EXPORT, &demo_ops,
                    demo_keys)

/* Every inline helper and size macro must be usable from a C99 unit. */
const char *demo_message(void);
const char *demo_message(void)
{
    static const char buf[SBX_REF_MAX + SBX_KEY_HASH_LEN] = {0};
    (void)buf;
    return SBX_DESC_SIZE_1_0 + SBX_OPS_SIZE_1_0 > 0 ? sbx_strerror(SBX_E_ABI)
                                                    : SBX_PROVIDER_ENTRY;
}
