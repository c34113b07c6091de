/*
 * fuzz_config.c - the YAML configuration loader and the provider-section
 * checks on arbitrary bytes. Every input must end in SBX_OK or an error
 * with a message; nothing may crash, leak or read out of bounds.
 */
#include "api/ctx.h"

#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A provider's declared keys, one of each type. */
static const struct sbx_config_key keys[] = {
    SBX_CONFIG_KEY("root", SBX_CFG_STRING, "a string"),
    SBX_CONFIG_KEY("count", SBX_CFG_INT, "an integer"),
    SBX_CONFIG_KEY("ratio", SBX_CFG_NUMBER, "a number"),
    SBX_CONFIG_KEY("flag", SBX_CFG_BOOL, "a boolean"),
    SBX_CONFIG_KEY("memory", SBX_CFG_SIZE, "a size"),
    SBX_CONFIG_KEY("labels", SBX_CFG_MAP, "a map"),
    SBX_CONFIG_KEY("args", SBX_CFG_LIST, "a list"),
    SBX_CONFIG_KEYS_END,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = memfd_create("sbx-fuzz-config", MFD_CLOEXEC);
    if (fd < 0)
        return 0;
    if (size && write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return 0;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    struct sbx_config *cfg = NULL;
    sbx_error err;
    sbx_error_clear(&err);
    if (sbxh_config_open(path, NULL, &cfg, &err) == SBX_OK) {
        for (size_t i = 0; i < cfg->nsections; i++) {
            sbx_error e2;
            sbxh_config_check_section(&cfg->sections[i], keys, &e2);
            /* lookups over whatever was loaded */
            sbxh_config_section_get(&cfg->sections[i], "root");
            const char *n, *v;
            for (size_t k = 0; sbxh_config_section_entry(&cfg->sections[i], "args", k, &n, &v);
                 k++)
                ;
        }
        sbxh_config_free(cfg);
    } else if (!err.message[0]) {
        __builtin_trap(); /* every refusal names its reason */
    }
    close(fd);
    return 0;
}
