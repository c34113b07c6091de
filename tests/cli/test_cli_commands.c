/*
 * test_cli_commands.c - `sbx providers`, `sbx check`, `--help`,
 * `--version`, usage errors, and refusing a mismatched plugin.
 */
#include "cli_harness.h"

#include <criterion/criterion.h>
#include <json-c/json.h>

#include <sbx/provider.h> /* the ABI version --version prints */
#include <sbx/sbx.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static struct cli_env env;

static void setup(void)
{
    cli_env_init(&env);
}

static void teardown(void)
{
    cli_env_fini(&env);
}

TestSuite(cli_commands, .init = setup, .fini = teardown, .timeout = 60);

static void run(const char *const *args, struct cli_result *r)
{
    cli_run(&env, args, NULL, 30000, r);
}

/* The element of a `providers --json` array with this name, or NULL. */
static json_object *find_provider(json_object *arr, const char *name)
{
    for (size_t i = 0; i < json_object_array_length(arr); i++) {
        json_object *o = json_object_array_get_idx(arr, i), *n;
        if (json_object_object_get_ex(o, "name", &n) &&
            !strcmp(json_object_get_string(n), name))
            return o;
    }
    return NULL;
}

static json_object *member(json_object *o, const char *key)
{
    json_object *v = NULL;
    cr_assert(json_object_object_get_ex(o, key, &v), "no \"%s\" in %s", key,
              json_object_to_json_string(o));
    return v;
}

Test(cli_commands, providers_json_lists_local_with_its_fields)
{
    cli_env_add_fixtures(&env);
    cli_env_local_config(&env);
    struct cli_result r;
    run((const char *[]){"providers", "--json", NULL}, &r);
    cr_assert_eq(r.status, 0, "status %d, stderr: %s", r.status, r.err);
    json_object *arr = json_tokener_parse(r.out);
    cr_assert_not_null(arr, "not JSON: %s", r.out);
    cr_assert(json_object_is_type(arr, json_type_array));

    json_object *local = find_provider(arr, "local");
    cr_assert_not_null(local, "local not listed: %s", r.out);
    cr_assert_str_eq(json_object_get_string(member(local, "status")), "ok");
    cr_assert_gt(strlen(json_object_get_string(member(local, "version"))), 0);
    json_object *abi = member(local, "abi");
    cr_assert_eq(json_object_get_int(member(abi, "major")), 1);
    cr_assert_eq(json_object_get_int(member(abi, "minor")), SBX_ABI_MINOR);
    cr_assert(json_object_is_type(member(local, "capabilities"), json_type_array));
    /* local declares the 1.2 capabilities it serves, and none of those it
     * refuses (packages, egress, mounts) */
    json_object *lcaps = member(local, "capabilities");
    for (size_t i = 0; i < json_object_array_length(lcaps); i++) {
        const char *c = json_object_get_string(json_object_array_get_idx(lcaps, i));
        cr_assert(!strcmp(c, "processes") || !strcmp(c, "pty") || !strcmp(c, "file_ops") ||
                      !strcmp(c, "ports") || !strcmp(c, "pool"),
                  "local declares %s", c);
    }
    cr_assert_str_eq(json_object_get_string(member(local, "path")),
                     SBX_TEST_PROVIDER_DIR "/local.so");
    cr_assert(json_object_get_boolean(member(local, "enabled")));
    cr_assert(json_object_get_boolean(member(local, "default")));
    /* local is not a security boundary, and says so */
    cr_assert_str_eq(json_object_get_string(member(local, "isolation")), "none");
    cr_assert_not(json_object_get_boolean(member(local, "security_boundary")));
    cr_assert_gt(strlen(json_object_get_string(member(local, "description"))), 0);

    /* A valid fixture that is installed but not enabled. */
    json_object *good = find_provider(arr, "good");
    cr_assert_not_null(good, "good not listed: %s", r.out);
    cr_assert_not(json_object_get_boolean(member(good, "enabled")));
    json_object *caps = member(good, "capabilities");
    cr_assert_eq(json_object_array_length(caps), 1);
    cr_assert_str_eq(json_object_get_string(json_object_array_get_idx(caps, 0)),
                     "packages");
    json_object *keys = member(good, "config_keys");
    cr_assert_eq(json_object_array_length(keys), 2);
    cr_assert_str_eq(
        json_object_get_string(member(json_object_array_get_idx(keys, 1), "type")),
        "size");

    /* A broken plugin is listed with its error, not fatal. */
    json_object *major = find_provider(arr, "major");
    cr_assert_not_null(major, "major not listed: %s", r.out);
    cr_assert_str_eq(json_object_get_string(member(major, "status")), "plugin ABI error");
    cr_assert_not_null(strstr(json_object_get_string(member(major, "error")),
                              "host expects 1, plugin has 2"),
                       "error: %s", json_object_get_string(member(major, "error")));
    json_object_put(arr);
    cli_result_free(&r);
}

Test(cli_commands, providers_table_names_every_plugin)
{
    cli_env_add_fixtures(&env);
    struct cli_result r;
    run((const char *[]){"providers", NULL}, &r);
    cr_assert_eq(r.status, 0, "status %d, stderr: %s", r.status, r.err);
    cr_assert(strncmp(r.out, "NAME", 4) == 0, "no header: %s", r.out);
    cr_assert_not_null(strstr(r.out, SBX_TEST_PROVIDER_DIR "/local.so"), "%s", r.out);
    cr_assert_not_null(strstr(r.out, "packages"), "good's capability: %s", r.out);
    cr_assert_not_null(strstr(r.out, "error: provider \"major\""), "%s", r.out);
    cli_result_free(&r);

    run((const char *[]){"providers", "--keys", NULL}, &r);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    cr_assert_not_null(strstr(r.out, "greeting (string): a string the fixture accepts"),
                       "%s", r.out);
    /* the services' variables each key falls back to (e2b's descriptor) */
    cr_assert_not_null(strstr(r.out, "[else $E2B_API_URL]"), "%s", r.out);
    cr_assert_not_null(strstr(r.out, "[only from $E2B_API_KEY]"), "%s", r.out);
    cli_result_free(&r);
}

Test(cli_commands, check_accepts_a_valid_configuration)
{
    cli_env_add_fixtures(&env);
    /* initfail's init always fails, but check only validates descriptors. */
    cli_env_write_config(&env, "default_provider: local\n"
                               "providers:\n"
                               "  local:\n"
                               "    root: @ROOT@\n"
                               "  initfail: {}\n");
    struct cli_result r;
    run((const char *[]){"check", NULL}, &r);
    cr_assert_eq(r.status, 0, "status %d, stderr: %s", r.status, r.err);
    cr_assert_not_null(strstr(r.out, "ok  local "), "%s", r.out);
    cr_assert_not_null(strstr(r.out, "ok  initfail "), "%s", r.out);
    cli_result_free(&r);

    /* --init runs init, which fails and is named. */
    run((const char *[]){"check", "--init", NULL}, &r);
    cr_assert_eq(r.status, 1, "status %d, stdout: %s", r.status, r.out);
    cr_assert_not_null(strstr(r.err, "initfail"), "stderr: %s", r.err);
    cr_assert_not_null(strstr(r.err, "backend unreachable"), "stderr: %s", r.err);
    cr_assert_not_null(strstr(r.out, "ok  local "), "%s", r.out);
    cli_result_free(&r);
}

Test(cli_commands, check_reports_bad_yaml_with_file_and_line)
{
    cli_env_write_config(&env, "default_provider: local\n"
                               "providers:\n"
                               "  local:\n"
                               "    root: [unclosed\n");
    struct cli_result r;
    run((const char *[]){"check", NULL}, &r);
    cr_assert_eq(r.status, 1, "status %d, stdout: %s", r.status, r.out);
    char where[PATH_MAX + 8];
    snprintf(where, sizeof where, "sbx: %s:", env.config);
    cr_assert(strncmp(r.err, where, strlen(where)) == 0, "stderr: %s", r.err);
    int line = atoi(r.err + strlen(where));
    cr_assert(line >= 4 && line <= 5, "line %d in: %s", line, r.err);
    cli_result_free(&r);

    /* An unknown key in a provider section: file:line:key. */
    cli_env_write_config(&env, "providers:\n"
                               "  local:\n"
                               "    root: @ROOT@\n"
                               "    bogus_key: 1\n");
    run((const char *[]){"check", NULL}, &r);
    cr_assert_eq(r.status, 1, "status %d, stdout: %s", r.status, r.out);
    snprintf(where, sizeof where, "%s:4:", env.config);
    cr_assert_not_null(strstr(r.err, where), "stderr: %s", r.err);
    cr_assert_not_null(strstr(r.err, "bogus_key"), "stderr: %s", r.err);
    cli_result_free(&r);

    /* --config takes precedence over SBX_CONFIG. */
    run((const char *[]){"--config", "/nonexistent/sbx.yaml", "check", NULL}, &r);
    cr_assert_eq(r.status, 1);
    cr_assert_not_null(strstr(r.err, "/nonexistent/sbx.yaml"), "stderr: %s", r.err);
    cli_result_free(&r);
}

Test(cli_commands, run_refuses_an_enabled_plugin_with_another_abi)
{
    cli_env_add_fixtures(&env);
    cli_env_write_config(&env, "default_provider: local\n"
                               "providers:\n"
                               "  local:\n"
                               "    root: @ROOT@\n"
                               "  major: {}\n");
    struct cli_result r;
    run((const char *[]){"run", "--", "echo", "should not run", NULL}, &r);
    cr_assert_eq(r.status, 125, "status %d, stderr: %s", r.status, r.err);
    cr_assert_str_empty(r.out, "the command ran: %s", r.out);
    cr_assert_not_null(strstr(r.err, "sbx: provider \"major\""), "stderr: %s", r.err);
    cr_assert_not_null(strstr(r.err, CLI_FIXTURE_DIR "/major.so"), "stderr: %s", r.err);
    cr_assert_not_null(strstr(r.err, "host expects 1, plugin has 2"), "stderr: %s", r.err);
    cr_assert_eq(cli_dir_entries(env.ws_root), 0, "nothing may be provisioned");
    cli_result_free(&r);

    /* check fails the same way. */
    run((const char *[]){"check", NULL}, &r);
    cr_assert_eq(r.status, 1, "status %d", r.status);
    cr_assert_not_null(strstr(r.err, "host expects 1, plugin has 2"), "stderr: %s", r.err);
    cli_result_free(&r);
}

Test(cli_commands, providers_lists_everything_when_an_enabled_one_is_broken)
{
    /* major is refused by the handshake and ghost is not installed: the
     * listing still shows every installed provider, each with its outcome,
     * plus the enabled one that is missing. */
    cli_env_add_fixtures(&env);
    cli_env_write_config(&env, "default_provider: local\n"
                               "providers:\n"
                               "  local:\n"
                               "    root: @ROOT@\n"
                               "  major: {}\n"
                               "  ghost: {}\n");
    struct cli_result r;
    run((const char *[]){"providers", "--json", NULL}, &r);
    cr_assert_eq(r.status, 0, "status %d, stderr: %s", r.status, r.err);
    json_object *arr = json_tokener_parse(r.out);
    cr_assert_not_null(arr, "not JSON: %s", r.out);
    json_object *local = find_provider(arr, "local");
    cr_assert_not_null(local, "%s", r.out);
    cr_assert_str_eq(json_object_get_string(member(local, "status")), "ok");
    json_object *major = find_provider(arr, "major");
    cr_assert_not_null(major, "%s", r.out);
    cr_assert(json_object_get_boolean(member(major, "enabled")));
    cr_assert_str_eq(json_object_get_string(member(major, "status")), "plugin ABI error");
    json_object *ghost = find_provider(arr, "ghost");
    cr_assert_not_null(ghost, "an enabled provider that is not installed: %s", r.out);
    cr_assert(json_object_get_boolean(member(ghost, "enabled")));
    cr_assert_str_eq(json_object_get_string(member(ghost, "status")), "not found");
    cr_assert_not_null(strstr(json_object_get_string(member(ghost, "error")),
                              "not installed: no ghost.so"));
    cr_assert_not_null(find_provider(arr, "good"), "%s", r.out);
    json_object_put(arr);
    cli_result_free(&r);

    /* check names each problem, passes what works, and fails */
    run((const char *[]){"check", NULL}, &r);
    cr_assert_eq(r.status, 1, "status %d", r.status);
    cr_assert_not_null(strstr(r.err, "host expects 1, plugin has 2"), "stderr: %s", r.err);
    cr_assert_not_null(strstr(r.err, "not installed: no ghost.so"), "stderr: %s", r.err);
    cr_assert_not_null(strstr(r.out, "ok  local "), "stdout: %s", r.out);
    cr_assert_not_null(strstr(r.out, "isolation: none"), "stdout: %s", r.out);
    cr_assert_not_null(strstr(r.out, "not a security boundary"), "stdout: %s", r.out);
    cli_result_free(&r);
}

Test(cli_commands, help_and_version)
{
    struct cli_result r;
    run((const char *[]){"--version", NULL}, &r);
    cr_assert_eq(r.status, 0);
    char want[64];
    snprintf(want, sizeof want, "sbx %s (provider ABI %d.%d)\n", SBX_VERSION,
             SBX_ABI_MAJOR, SBX_ABI_MINOR);
    cr_assert_str_eq(r.out, want);
    cli_result_free(&r);

    run((const char *[]){"--help", NULL}, &r);
    cr_assert_eq(r.status, 0);
    cr_assert_not_null(strstr(r.out, "Usage: sbx"), "%s", r.out);
    for (const char *const *c = (const char *const[]){"run", "providers", "check",
                                                       "conformance", NULL};
         *c; c++)
        cr_assert_not_null(strstr(r.out, *c), "%s missing from: %s", *c, r.out);
    cli_result_free(&r);

    static const char *const cmds[] = {"run", "providers", "check", "conformance"};
    for (size_t i = 0; i < 4; i++) {
        char usage[64];
        snprintf(usage, sizeof usage, "Usage: sbx %s", cmds[i]);
        run((const char *[]){cmds[i], "--help", NULL}, &r);
        cr_assert_eq(r.status, 0, "%s --help: %d", cmds[i], r.status);
        cr_assert(strncmp(r.out, usage, strlen(usage)) == 0, "%s", r.out);
        cr_assert_str_empty(r.err);
        cli_result_free(&r);
        run((const char *[]){"help", cmds[i], NULL}, &r);
        cr_assert_eq(r.status, 0);
        cr_assert(strncmp(r.out, usage, strlen(usage)) == 0, "%s", r.out);
        cli_result_free(&r);
    }
}

/* Run, expect `status` and a stderr containing `needle`. */
static void expect_usage_error(const char *const *args, int status, const char *needle)
{
    struct cli_result r;
    run(args, &r);
    cr_assert_eq(r.status, status, "%s: status %d, stderr: %s", args[0], r.status, r.err);
    cr_assert_not_null(strstr(r.err, needle), "expected \"%s\" in: %s", needle, r.err);
    cr_assert_str_empty(r.out);
    cli_result_free(&r);
}

Test(cli_commands, usage_errors_name_what_was_wrong)
{
    cli_env_local_config(&env);
    expect_usage_error((const char *[]){"run", "--bogus", "--", "true", NULL}, 125,
                       "sbx run: unknown option '--bogus'");
    expect_usage_error((const char *[]){"run", "-Z", "true", NULL}, 125,
                       "sbx run: unknown option '-Z'");
    expect_usage_error((const char *[]){"run", NULL}, 125, "sbx run: missing command");
    expect_usage_error((const char *[]){"run", "--", NULL}, 125, "missing command");
    expect_usage_error((const char *[]){"run", "--env", "NOEQUALS", "--", "true", NULL},
                       125, "invalid --env 'NOEQUALS' (expected NAME=VALUE)");
    expect_usage_error((const char *[]){"run", "--env", "=x", "--", "true", NULL}, 125,
                       "invalid --env '=x'");
    expect_usage_error((const char *[]){"run", "--timeout", "abc", "--", "true", NULL},
                       125, "invalid --timeout 'abc'");
    expect_usage_error((const char *[]){"run", "--timeout", "-1", "--", "true", NULL},
                       125, "invalid --timeout '-1'");
    expect_usage_error((const char *[]){"run", "--timeout", "5x", "--", "true", NULL},
                       125, "invalid --timeout '5x'");
    expect_usage_error((const char *[]){"run", "--timeout", NULL}, 125,
                       "option '--timeout' needs a value");
    expect_usage_error((const char *[]){"providers", "--json=yes", NULL}, 2,
                       "option '--json' takes no value");
    expect_usage_error((const char *[]){"providers", "extra", NULL}, 2,
                       "unexpected argument 'extra'");
    expect_usage_error((const char *[]){"frobnicate", NULL}, 2,
                       "unknown command 'frobnicate'");
    expect_usage_error((const char *[]){"--bogus", NULL}, 2, "unknown option '--bogus'");
    expect_usage_error((const char *[]){NULL}, 2, "Usage: sbx");
}

/* strtod would take hex, exponents, inf and leading blanks; a name with a
 * space or a newline is no variable name. */
Test(cli_commands, timeouts_are_decimal_and_env_names_are_variable_names)
{
    cli_env_local_config(&env);
    const char *bad_timeouts[] = {"0x10", "1e3", "inf", "nan", " 5", "5.", ".5", "+5", NULL};
    for (size_t i = 0; bad_timeouts[i]; i++) {
        char want[64];
        snprintf(want, sizeof want, "invalid --timeout '%s' (expected decimal seconds",
                 bad_timeouts[i]);
        expect_usage_error((const char *[]){"run", "--timeout", bad_timeouts[i], "--", "true",
                                            NULL},
                           125, want);
    }
    expect_usage_error((const char *[]){"exec", "s", "--timeout", "0x10", "--", "true", NULL},
                       125, "invalid --timeout '0x10'");
    expect_usage_error((const char *[]){"run", "--env", "A B=1", "--", "true", NULL}, 125,
                       "invalid --env 'A B=1' (expected NAME=VALUE); a NAME is letters");
    expect_usage_error((const char *[]){"run", "--env", "A\nB=1", "--", "true", NULL}, 125,
                       "invalid --env 'A' (expected NAME=VALUE)");
    expect_usage_error((const char *[]){"run", "--env", "1A=x", "--", "true", NULL}, 125,
                       "invalid --env '1A=x'");
    expect_usage_error((const char *[]){"run", "--env", "A-B=x", "--", "true", NULL}, 125,
                       "invalid --env 'A-B=x'");
    struct cli_result r;
    run((const char *[]){"run", "--timeout", "1.5", "--env", "_A1=x=y", "--", "sh", "-c",
                         "echo \"$_A1\"", NULL},
        &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, "x=y\n");
    cli_result_free(&r);
}

Test(cli_commands, options_after_the_separator_belong_to_the_command)
{
    cli_env_local_config(&env);
    struct cli_result r;
    run((const char *[]){"run", "--", "echo", "--help", "--timeout", "x", NULL}, &r);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    cr_assert_str_eq(r.out, "--help --timeout x\n");
    cli_result_free(&r);
    /* The first non-option word starts the command, too. */
    run((const char *[]){"run", "echo", "-n", "x", NULL}, &r);
    cr_assert_eq(r.status, 0, "stderr: %s", r.err);
    cr_assert_str_eq(r.out, "x");
    cli_result_free(&r);
}

Test(cli_commands, conformance_runs_the_suite_with_tap_and_junit)
{
    cli_env_local_config(&env);
    char junit[PATH_MAX + 16];
    snprintf(junit, sizeof junit, "%s/report.xml", env.dir);
    struct cli_result r;
    /* Options may follow the provider name. */
    run((const char *[]){"conformance", "local", "--tap", "--filter",
                         "exec_exit_codes,exec_env", "--junit", junit, NULL},
        &r);
    cr_assert_eq(r.status, 0, "status %d, stdout: %s, stderr: %s", r.status, r.out, r.err);
    cr_assert(strncmp(r.out, "TAP version 13\n", 15) == 0, "%s", r.out);
    cr_assert_not_null(strstr(r.out, "1..2"), "%s", r.out);
    cr_assert_not_null(strstr(r.out, "ok 1 - exec_exit_codes"), "%s", r.out);
    cr_assert_not_null(strstr(r.out, "ok 2 - exec_env"), "%s", r.out);
    FILE *f = fopen(junit, "r");
    cr_assert_not_null(f, "no JUnit report at %s", junit);
    char head[256] = "";
    size_t n = fread(head, 1, sizeof head - 1, f);
    head[n] = '\0';
    fclose(f);
    cr_assert_not_null(strstr(head, "<testsuites"), "%s", head);
    cr_assert_eq(cli_dir_entries(env.ws_root), 0, "the suite left a workspace");
    cli_result_free(&r);

    run((const char *[]){"conformance", "--list", NULL}, &r);
    cr_assert_eq(r.status, 0);
    cr_assert_not_null(strstr(r.out, "attach_other_key_denied"), "%s", r.out);
    cli_result_free(&r);

    /* A provider that is not installed: the suite cannot run. */
    run((const char *[]){"conformance", "nosuchprovider", NULL}, &r);
    cr_assert_eq(r.status, 125, "status %d", r.status);
    cr_assert_not_null(strstr(r.err, "sbx: "), "stderr: %s", r.err);
    cr_assert_not_null(strstr(r.err, "nosuchprovider"), "stderr: %s", r.err);
    cli_result_free(&r);

    /* A filter matching nothing is an error, not an empty success. */
    run((const char *[]){"conformance", "--filter", "no_such_case", NULL}, &r);
    cr_assert_eq(r.status, 125, "status %d, stdout %s", r.status, r.out);
    cli_result_free(&r);
}

/* The listing names a provider's capabilities as sbx_cap_name does (the
 * host's one capability table), in bit order. */
Test(cli_commands, providers_json_names_capabilities_from_the_table)
{
    cli_env_add_fixtures(&env);
    cli_env_local_config(&env);
    struct cli_result r;
    run((const char *[]){"providers", "--json", NULL}, &r);
    cr_assert_eq(r.status, 0, "status %d, stderr: %s", r.status, r.err);
    json_object *arr = json_tokener_parse(r.out);
    cr_assert_not_null(arr, "not JSON: %s", r.out);
    json_object *allcaps = find_provider(arr, "allcaps");
    cr_assert_not_null(allcaps, "allcaps not listed: %s", r.out);
    json_object *caps = member(allcaps, "capabilities");
    size_t n = 0;
    for (int b = 0; b < 64; b++) {
        if (!(SBX_CAP_ALL_1_0 & (UINT64_C(1) << b)))
            continue;
        const char *want = sbx_cap_name(UINT64_C(1) << b);
        cr_assert_not_null(want, "bit %d of SBX_CAP_ALL_1_0 has no name", b);
        cr_assert_lt(n, json_object_array_length(caps), "%s", r.out);
        cr_assert_str_eq(json_object_get_string(json_object_array_get_idx(caps, n)),
                         want);
        n++;
    }
    cr_assert_eq(json_object_array_length(caps), n, "%s", r.out);
    json_object_put(arr);
    cli_result_free(&r);
}

/* The help and the refusal of --require list every name the table has. */
Test(cli_commands, create_lists_every_capability_name)
{
    struct cli_result r;
    run((const char *[]){"create", "--help", NULL}, &r);
    cr_assert_eq(r.status, 0, "status %d, stderr: %s", r.status, r.err);
    for (int b = 0; b < 64; b++) {
        const char *name = sbx_cap_name(UINT64_C(1) << b);
        if (name)
            cr_assert(strstr(r.out, name), "help lacks %s: %s", name, r.out);
    }
    cli_result_free(&r);
}
