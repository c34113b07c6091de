/*
 * test_config_hostile.c - configurations written to hurt: keys that would
 * forge output or drive the terminal, drop-ins that point elsewhere or
 * belong to someone else, files and sections too large, and the cost of
 * loading many keys.
 */
#include "config_fixture.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

TestSuite(config_hostile, .init = cfg_dir_setup, .fini = cfg_dir_teardown);

static void assert_no_control_bytes(const char *msg)
{
    for (const unsigned char *p = (const unsigned char *)msg; *p; p++)
        cr_assert(*p >= 0x20 && *p < 0x7f, "raw byte 0x%02x in \"%s\"", *p, msg);
}

Test(config_hostile, keys_with_control_bytes_are_refused_and_escaped)
{
    /* A YAML double-quoted key can hold a newline and an ESC: echoed raw,
     * the first would forge an "sbx:" line, the second move the cursor. */
    const char *msg = cfg_expect_error("\"bad\\nsbx: all good\\e[2J\": 1\n");
    assert_no_control_bytes(msg);
    cr_assert_not_null(strstr(msg, "key \"bad\\x0asbx: all good\\x1b[2J\" contains "
                                   "bytes other than printable ASCII"),
                       "%s", msg);

    msg = cfg_expect_error("providers:\n  local:\n    \"r\\u00e9\\u009b\": x\n");
    assert_no_control_bytes(msg);
    cr_assert_not_null(strstr(msg, "providers.local: key \"r\\xc3\\xa9\\xc2\\x9b\""),
                       "%s", msg);
}

Test(config_hostile, a_dropin_that_is_a_symlink_is_not_read)
{
    /* The target's first line must never reach the message. */
    cfg_write("secret.txt", "root:TOP-SECRET-HASH:19000:0:99999:7:::\n");
    cfg_write("conf.d/.keep.yaml", "");
    char target[4096];
    snprintf(target, sizeof target, "%s", cfg_path("secret.txt"));
    cr_assert_eq(symlink(target, cfg_path("conf.d/10-evil.yaml")), 0);
    struct sbx_config *cfg = NULL;
    sbx_error err;
    cr_assert_eq(cfg_load_sys(&cfg, &err), SBX_E_IO);
    cr_assert_null(cfg);
    cr_assert_null(strstr(err.message, "TOP-SECRET"), "%s", err.message);
    cr_assert_not_null(strstr(err.message, "10-evil.yaml: cannot open"), "%s",
                       err.message);
    cr_assert_not_null(strstr(err.message, "not symbolic links"), "%s", err.message);
}

Test(config_hostile, a_dropin_owned_by_another_user_is_refused)
{
    if (geteuid() != 0)
        cr_skip_test("needs root to give the file away");
    cfg_write("conf.d/20-theirs.yaml", "providers:\n  local: {}\n");
    cr_assert_eq(chown(cfg_path("conf.d/20-theirs.yaml"), 65534, 65534), 0);
    struct sbx_config *cfg = NULL;
    sbx_error err;
    cr_assert_eq(cfg_load_sys(&cfg, &err), SBX_E_IO);
    cr_assert_not_null(strstr(err.message, "is owned by another user"), "%s",
                       err.message);
}

Test(config_hostile, a_dropin_that_is_a_fifo_is_refused_without_blocking)
{
    cfg_write("conf.d/.keep.yaml", "");
    cr_assert_eq(mkfifo(cfg_path("conf.d/30-fifo.yaml"), 0600), 0);
    struct sbx_config *cfg = NULL;
    sbx_error err;
    cr_assert_eq(cfg_load_sys(&cfg, &err), SBX_E_IO);
    cr_assert_not_null(strstr(err.message, "is not a regular file"), "%s", err.message);
}

Test(config_hostile, a_dropin_name_with_control_bytes_is_refused_and_escaped)
{
    cfg_write("conf.d/x\nsbx: ok.yaml", "providers:\n  local: {}\n");
    struct sbx_config *cfg = NULL;
    sbx_error err;
    cr_assert_eq(cfg_load_sys(&cfg, &err), SBX_E_CONFIG);
    assert_no_control_bytes(err.message);
    cr_assert_not_null(strstr(err.message, "\"x\\x0asbx: ok.yaml\""), "%s", err.message);
}

Test(config_hostile, files_over_one_mebibyte_are_refused)
{
    size_t n = 1024 * 1024 + 100;
    char *big = malloc(n + 1);
    cr_assert_not_null(big);
    memset(big, '#', n);
    big[n] = '\0';
    cfg_write("sbx.yaml", big);
    free(big);
    struct sbx_config *cfg = NULL;
    sbx_error err;
    cr_assert_eq(cfg_load_file("sbx.yaml", &cfg, &err), SBX_E_CONFIG);
    cr_assert_not_null(strstr(err.message, "is larger than the limit of 1 MiB"), "%s",
                       err.message);
}

/* A section of n keys "k0: v0" ... (and a list of n items when `list`). */
static char *section_text(size_t n, bool list)
{
    size_t cap = 64 + n * 32;
    char *s = malloc(cap);
    cr_assert_not_null(s);
    size_t used = (size_t)snprintf(s, cap, "providers:\n  local:\n%s",
                                   list ? "    items:\n" : "");
    for (size_t i = 0; i < n; i++)
        used += (size_t)snprintf(s + used, cap - used, list ? "      - v%zu\n" : "    k%zu: v%zu\n",
                                 i, i);
    return s;
}

Test(config_hostile, a_section_is_bounded)
{
    char *text = section_text(SBX_CONFIG_ENTRIES_MAX + 1, false);
    cfg_write("sbx.yaml", text);
    free(text);
    struct sbx_config *cfg = NULL;
    sbx_error err;
    cr_assert_eq(cfg_load_file("sbx.yaml", &cfg, &err), SBX_E_CONFIG);
    cr_assert_not_null(strstr(err.message, "more than 4096 keys and values in one "
                                           "provider section"),
                       "%s", err.message);
}

Test(config_hostile, the_largest_section_and_list_load_and_look_up_correctly)
{
    /* Every key and every list item is found, and where the limit allows
     * the most keys, loading and lookups stay linear (a quadratic loader
     * made 160 000 keys take 30 s; bench/config measures the ratio). */
    for (int list = 0; list < 2; list++) {
        size_t n = SBX_CONFIG_ENTRIES_MAX - 1;
        char *text = section_text(n, list);
        cfg_write("sbx.yaml", text);
        free(text);
        struct sbx_config *cfg = NULL;
        sbx_error err;
        cr_assert_eq(cfg_load_file("sbx.yaml", &cfg, &err), SBX_OK, "%s", err.message);
        const struct sbx_config_section *sec = sbxh_config_section(cfg, "local");
        cr_assert_not_null(sec);
        for (size_t i = 0; i < n; i += 97) {
            char key[32], want[32];
            snprintf(want, sizeof want, "v%zu", i);
            if (list) {
                const char *name, *value;
                cr_assert(sbxh_config_section_entry(sec, "items", i, &name, &value));
                cr_assert_str_eq(value, want);
            } else {
                snprintf(key, sizeof key, "k%zu", i);
                cr_assert_str_eq(sbxh_config_section_get(sec, key), want);
            }
        }
        if (list)
            cr_assert_not(sbxh_config_section_entry(sec, "items", n, NULL, NULL));
        sbxh_config_free(cfg);
    }
}
