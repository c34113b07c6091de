/*
 * test_config_check.c - checking provider sections against declared keys:
 * unknown keys, every value type, canonical forms.
 */
#include "config_fixture.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>

TestSuite(config_check, .init = cfg_dir_setup, .fini = cfg_dir_teardown);

static const struct sbx_config_key keys[] = {
    SBX_CONFIG_KEY("name", SBX_CFG_STRING, "a string"),
    SBX_CONFIG_KEY("count", SBX_CFG_INT, "an integer"),
    SBX_CONFIG_KEY("ratio", SBX_CFG_NUMBER, "a number"),
    SBX_CONFIG_KEY("flag", SBX_CFG_BOOL, "a boolean"),
    SBX_CONFIG_KEY("memory", SBX_CFG_SIZE, "a size"),
    SBX_CONFIG_KEY("labels", SBX_CFG_MAP, "a map"),
    SBX_CONFIG_KEY("args", SBX_CFG_LIST, "a list"),
    SBX_CONFIG_KEYS_END,
};

/* The loaded configuration of the current test (freed by check_done). */
static struct sbx_config *loaded;

/* Load sbx.yaml holding `providers: { t: { <body> } }` (body is the YAML of
 * the section, indented by four spaces) and return section t. */
static struct sbx_config_section *section_of(const char *body)
{
    char yaml[4096];
    snprintf(yaml, sizeof yaml, "providers:\n  t:\n%s", body);
    cfg_write("sbx.yaml", yaml);
    sbx_error err;
    cr_assert_eq(cfg_load_sys(&loaded, &err), SBX_OK, "%s", err.message);
    struct sbx_config_section *sec =
        (struct sbx_config_section *)sbxh_config_section(loaded, "t");
    cr_assert_not_null(sec);
    return sec;
}

static void check_done(void)
{
    sbxh_config_free(loaded);
    loaded = NULL;
}

/* Check "    <key>: <value>\n" and return the canonical value (a copy in a
 * static buffer), or fail. */
static const char *canonical(const char *key, const char *value)
{
    static char out[256];
    char body[512];
    snprintf(body, sizeof body, "    %s: %s\n", key, value);
    struct sbx_config_section *sec = section_of(body);
    sbx_error err;
    sbx_error_clear(&err);
    cr_assert_eq(sbxh_config_check_section(sec, keys, &err), SBX_OK,
                 "%s: %s: %s", key, value, err.message);
    snprintf(out, sizeof out, "%s", sbxh_config_section_get(sec, key));
    check_done();
    return out;
}

/* Check "    <key>: <value>\n", expect SBX_E_CONFIG and return the message
 * with the "<file>:<line>: " prefix verified and removed. */
static const char *rejected(const char *key, const char *value)
{
    static char out[SBX_ERROR_MAX];
    char body[512];
    snprintf(body, sizeof body, "    %s: %s\n", key, value);
    struct sbx_config_section *sec = section_of(body);
    sbx_error err;
    sbx_error_clear(&err);
    cr_assert_eq(sbxh_config_check_section(sec, keys, &err), SBX_E_CONFIG,
                 "%s: %s was accepted", key, value);
    char prefix[4200];
    snprintf(prefix, sizeof prefix, "%s:3: ", cfg_path("sbx.yaml"));
    cr_assert(strncmp(err.message, prefix, strlen(prefix)) == 0, "%s",
              err.message);
    snprintf(out, sizeof out, "%s", err.message + strlen(prefix));
    check_done();
    return out;
}

Test(config_check, unknown_key_lists_known_keys)
{
    struct sbx_config_section *sec =
        section_of("    name: a\n    # typo\n    nmae: b\n");
    sbx_error err;
    sbx_error_clear(&err);
    cr_assert_eq(sbxh_config_check_section(sec, keys, &err), SBX_E_CONFIG);
    char want[4200];
    snprintf(want, sizeof want,
             "%s:5: providers.t.nmae: unknown key (known: name, count, ratio, "
             "flag, memory, labels, args)",
             cfg_path("sbx.yaml"));
    cr_assert_str_eq(err.message, want);
    cr_assert_eq(err.status, SBX_E_CONFIG);
    check_done();
}

Test(config_check, provider_without_keys)
{
    struct sbx_config_section *sec = section_of("    root: /x\n");
    sbx_error err;
    sbx_error_clear(&err);
    cr_assert_eq(sbxh_config_check_section(sec, NULL, &err), SBX_E_CONFIG);
    char want[4200];
    snprintf(want, sizeof want,
             "%s:3: providers.t.root: unknown key (this provider takes no keys)",
             cfg_path("sbx.yaml"));
    cr_assert_str_eq(err.message, want);
    check_done();

    /* An empty section passes with or without declared keys. */
    cfg_write("sbx.yaml", "providers:\n  t: {}\n");
    cr_assert_eq(cfg_load_sys(&loaded, &err), SBX_OK, "%s", err.message);
    sec = (struct sbx_config_section *)sbxh_config_section(loaded, "t");
    cr_assert_eq(sbxh_config_check_section(sec, NULL, &err), SBX_OK);
    cr_assert_eq(sbxh_config_check_section(sec, keys, &err), SBX_OK);
    check_done();
    cr_assert_eq(sbxh_config_check_section(NULL, keys, &err), SBX_OK);
}

Test(config_check, strings)
{
    cr_assert_str_eq(canonical("name", "debian:bookworm-slim"),
                     "debian:bookworm-slim");
    cr_assert_str_eq(canonical("name", "'512m'"), "512m");
    cr_assert_str_eq(canonical("name", "42"), "42");
    cr_assert_str_eq(rejected("name", "''"),
                     "providers.t.name: expected a string, got an empty value");
    cr_assert_str_eq(rejected("name", ""),
                     "providers.t.name: expected a string, got an empty value");
    cr_assert_str_eq(rejected("name", "{ a: b }"),
                     "providers.t.name: expected a string, got a mapping");
    cr_assert_str_eq(rejected("name", "[a]"),
                     "providers.t.name: expected a string, got a list");
}

Test(config_check, integers)
{
    cr_assert_str_eq(canonical("count", "256"), "256");
    cr_assert_str_eq(canonical("count", "-3"), "-3");
    cr_assert_str_eq(canonical("count", "+007"), "7");
    cr_assert_str_eq(canonical("count", "-0"), "0");
    cr_assert_str_eq(canonical("count", "9223372036854775807"),
                     "9223372036854775807");
    cr_assert_str_eq(canonical("count", "-9223372036854775808"),
                     "-9223372036854775808");
    cr_assert_str_eq(rejected("count", "9223372036854775808"),
                     "providers.t.count: out of range for a 64-bit integer, got "
                     "\"9223372036854775808\"");
    cr_assert_str_eq(rejected("count", "-9223372036854775809"),
                     "providers.t.count: out of range for a 64-bit integer, got "
                     "\"-9223372036854775809\"");
    cr_assert_str_eq(rejected("count", "12abc"),
                     "providers.t.count: expected a decimal integer, got "
                     "\"12abc\"");
    cr_assert_str_eq(rejected("count", "1.5"),
                     "providers.t.count: expected a decimal integer, got \"1.5\"");
    cr_assert_str_eq(rejected("count", "0x10"),
                     "providers.t.count: expected a decimal integer, got "
                     "\"0x10\"");
    cr_assert_str_eq(rejected("count", "'-'"),
                     "providers.t.count: expected a decimal integer, got \"-\"");
    cr_assert_str_eq(rejected("count", "[1]"),
                     "providers.t.count: expected an integer, got a list");
}

Test(config_check, numbers)
{
    cr_assert_str_eq(canonical("ratio", "1"), "1");
    cr_assert_str_eq(canonical("ratio", "0.5"), "0.5");
    cr_assert_str_eq(canonical("ratio", "+2.25"), "2.25");
    cr_assert_str_eq(canonical("ratio", "-1.0"), "-1.0");
    static const char *const bad[] = {"1.", ".5", "1e3", "1,5", "one", "1.2.3",
                                      "- 1"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char want[128];
        snprintf(want, sizeof want,
                 "providers.t.ratio: expected a decimal number such as 2 or "
                 "0.5, got \"%s\"",
                 bad[i]);
        char quoted[32];
        snprintf(quoted, sizeof quoted, "'%s'", bad[i]);
        cr_assert_str_eq(rejected("ratio", quoted), want);
    }
}

Test(config_check, booleans)
{
    static const char *const yes[] = {"true", "yes", "on", "True", "YES", "On"};
    static const char *const no[] = {"false", "no", "off", "False", "NO", "Off"};
    for (size_t i = 0; i < 6; i++) {
        cr_assert_str_eq(canonical("flag", yes[i]), "true", "%s", yes[i]);
        cr_assert_str_eq(canonical("flag", no[i]), "false", "%s", no[i]);
    }
    cr_assert_str_eq(rejected("flag", "1"),
                     "providers.t.flag: expected true/false, yes/no or on/off, "
                     "got \"1\"");
    cr_assert_str_eq(rejected("flag", "y"),
                     "providers.t.flag: expected true/false, yes/no or on/off, "
                     "got \"y\"");
    cr_assert_str_eq(rejected("flag", "{}"),
                     "providers.t.flag: expected a boolean, got a mapping");
}

Test(config_check, sizes)
{
    cr_assert_str_eq(canonical("memory", "0"), "0");
    cr_assert_str_eq(canonical("memory", "4096"), "4096");
    cr_assert_str_eq(canonical("memory", "100b"), "100");
    cr_assert_str_eq(canonical("memory", "1k"), "1024");
    cr_assert_str_eq(canonical("memory", "1K"), "1024");
    cr_assert_str_eq(canonical("memory", "2kb"), "2048");
    cr_assert_str_eq(canonical("memory", "512m"), "536870912");
    cr_assert_str_eq(canonical("memory", "512MB"), "536870912");
    cr_assert_str_eq(canonical("memory", "2g"), "2147483648");
    cr_assert_str_eq(canonical("memory", "2Gb"), "2147483648");
    cr_assert_str_eq(canonical("memory", "1t"), "1099511627776");
    cr_assert_str_eq(canonical("memory", "3TB"), "3298534883328");
    /* The largest that fits a signed 64-bit byte count. */
    cr_assert_str_eq(canonical("memory", "8388607t"), "9223370937343148032");
    cr_assert_str_eq(canonical("memory", "9223372036854775807"),
                     "9223372036854775807");

    cr_assert_str_eq(rejected("memory", "8388608t"),
                     "providers.t.memory: too large (at most 8 EiB - 1 bytes), "
                     "got \"8388608t\"");
    cr_assert_str_eq(rejected("memory", "8589934592g"),
                     "providers.t.memory: too large (at most 8 EiB - 1 bytes), "
                     "got \"8589934592g\"");
    cr_assert_str_eq(rejected("memory", "9223372036854775808"),
                     "providers.t.memory: too large (at most 8 EiB - 1 bytes), "
                     "got \"9223372036854775808\"");
    cr_assert_str_eq(rejected("memory", "99999999999999999999999m"),
                     "providers.t.memory: too large (at most 8 EiB - 1 bytes), "
                     "got \"99999999999999999999999m\"");
    static const char *const bad[] = {"1.5g", "-1", "12 m", "m", "1p",
                                      "1gg", "1bk", "lots", "0x10"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char want[160];
        snprintf(want, sizeof want,
                 "providers.t.memory: expected a size such as 4096, 512k, 512m "
                 "or 2g, got \"%s\"",
                 bad[i]);
        char quoted[32];
        snprintf(quoted, sizeof quoted, "'%s'", bad[i]);
        cr_assert_str_eq(rejected("memory", quoted), want);
    }
}

Test(config_check, long_bad_values_are_truncated_in_messages)
{
    char value[200];
    memset(value, 'x', sizeof value - 1);
    value[sizeof value - 1] = '\0';
    const char *msg = rejected("count", value);
    char want[256];
    snprintf(want, sizeof want,
             "providers.t.count: expected a decimal integer, got \"%.40s...\"",
             value);
    cr_assert_str_eq(msg, want);
}

Test(config_check, maps_and_lists)
{
    struct sbx_config_section *sec =
        section_of("    labels: { team: infra, tier: '2' }\n"
                   "    args:\n      - --init\n      - -v\n"
                   "    memory: 1g\n    flag: on\n");
    sbx_error err;
    sbx_error_clear(&err);
    cr_assert_eq(sbxh_config_check_section(sec, keys, &err), SBX_OK, "%s",
                 err.message);
    const char *name, *value;
    cr_assert_eq(sbxh_config_section_entry(sec, "labels", 1, &name, &value), 1);
    cr_assert_str_eq(name, "tier");
    cr_assert_str_eq(value, "2");
    cr_assert_eq(sbxh_config_section_entry(sec, "args", 1, &name, &value), 1);
    cr_assert_str_eq(name, "1");
    cr_assert_str_eq(value, "-v");
    cr_assert_str_eq(sbxh_config_section_get(sec, "memory"), "1073741824");
    cr_assert_str_eq(sbxh_config_section_get(sec, "flag"), "true");

    /* Checking again keeps the canonical values. */
    cr_assert_eq(sbxh_config_check_section(sec, keys, &err), SBX_OK, "%s",
                 err.message);
    cr_assert_str_eq(sbxh_config_section_get(sec, "memory"), "1073741824");
    cr_assert_str_eq(sbxh_config_section_get(sec, "flag"), "true");
    check_done();

    cr_assert_str_eq(rejected("labels", "team"),
                     "providers.t.labels: expected a mapping, got a scalar");
    cr_assert_str_eq(rejected("labels", "[a, b]"),
                     "providers.t.labels: expected a mapping, got a list");
    cr_assert_str_eq(rejected("labels", ""),
                     "providers.t.labels: expected a mapping, got an empty "
                     "value");
    cr_assert_str_eq(rejected("args", "--init"),
                     "providers.t.args: expected a list, got a scalar");
    cr_assert_str_eq(rejected("args", "{ a: b }"),
                     "providers.t.args: expected a list, got a mapping");
}

Test(config_check, unknown_declared_type_is_an_abi_error)
{
    static const struct sbx_config_key odd[] = {SBX_CONFIG_KEY("x", 99, "?"), SBX_CONFIG_KEYS_END};
    struct sbx_config_section *sec = section_of("    x: 1\n");
    sbx_error err;
    sbx_error_clear(&err);
    cr_assert_eq(sbxh_config_check_section(sec, odd, &err), SBX_E_ABI);
    cr_assert_str_eq(err.message, "providers.t.x: the provider declares an "
                                  "unknown type 99 for this key");
    check_done();
}
