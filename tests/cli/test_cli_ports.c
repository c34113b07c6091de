/*
 * test_cli_ports.c - `--port` of `sbx create` and `sbx run`: malformed and
 * repeated ports are usage errors, a provider without the ports
 * capability refuses them before anything is made (naming itself and the
 * capability), and with one that has it (the portstest fixture: local
 * declared with SBX_CAP_PORTS, recording the ports its create gets) they
 * reach the provider and `sbx run` prints where each port is reached.
 */
#include "cli_harness.h"

#include <sbx/sbx.h>

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct cli_env env;
static char log_file[PATH_MAX + 16];

static void setup(void)
{
    cli_env_init(&env);
    snprintf(log_file, sizeof log_file, "%s/create.log", env.dir);
    char yaml[2 * PATH_MAX];
    snprintf(yaml, sizeof yaml,
             "default_provider: local\n"
             "providers:\n"
             "  local:\n"
             "    root: @ROOT@\n"
             "  portstest:\n"
             "    root: @ROOT@\n"
             "    log: %s\n",
             log_file);
    cli_env_write_config(&env, yaml);
    size_t n = strlen(env.plugin_path);
    snprintf(env.plugin_path + n, sizeof env.plugin_path - n, ":%s",
             SBX_TEST_SESSION_FIXTURE_DIR);
    cli_env_add_fixtures(&env); /* `good`: a provider without ports */
}

static void teardown(void)
{
    cli_env_fini(&env);
}

TestSuite(cli_ports, .init = setup, .fini = teardown, .timeout = 60);

static const char *create_log(void)
{
    static char buf[4096];
    buf[0] = '\0';
    FILE *f = fopen(log_file, "r");
    if (f) {
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = '\0';
        fclose(f);
    }
    return buf;
}

static void expect_usage_error(const char *const *args, const char *what)
{
    struct cli_result r;
    cli_run(&env, args, NULL, 30000, &r);
    cr_expect_eq(r.status, 125, "%s: status %d", what, r.status);
    cr_expect(strstr(r.err, what), "want \"%s\" in: %s", what, r.err);
    cli_result_free(&r);
}

Test(cli_ports, bad_ports_are_usage_errors)
{
    expect_usage_error((const char *[]){"run", "--port", "0", "--", "true", NULL},
                       "--port 0: not a TCP port (1 to 65535)");
    expect_usage_error((const char *[]){"run", "--port", "65536", "--", "true", NULL},
                       "--port 65536: not a TCP port");
    expect_usage_error((const char *[]){"run", "--port", "http", "--", "true", NULL},
                       "--port http: not a TCP port");
    expect_usage_error((const char *[]){"run", "--port", "-80", "--", "true", NULL},
                       "--port -80: not a TCP port");
    expect_usage_error((const char *[]){"run", "--port", "80x", "--", "true", NULL},
                       "--port 80x: not a TCP port");
    expect_usage_error(
        (const char *[]){"run", "--port", "80", "--port", "80", "--", "true", NULL},
        "--port 80 is given twice");
    expect_usage_error((const char *[]){"create", "--port", "0", "k", NULL},
                       "--port 0: not a TCP port");
    expect_usage_error(
        (const char *[]){"create", "--port", "8080", "--port", "8080", "k", NULL},
        "--port 8080 is given twice");
    cr_expect_str_eq(create_log(), "");
    cr_expect_eq(cli_dir_entries(env.ws_root), 0);
}

/* (local declares ports since ABI 1.2: the `good` fixture does not) */
Test(cli_ports, a_provider_without_the_capability_refuses_them)
{
    const char *cap = sbx_cap_name(SBX_CAP_PORTS);
    struct cli_result r;
    cli_run(&env,
            (const char *[]){"run", "--provider", "good", "--port", "8080", "--", "true",
                             NULL},
            NULL, 30000, &r);
    cr_expect_eq(r.status, 125, "status %d: %s", r.status, r.err);
    cr_expect(strstr(r.err, "good") && strstr(r.err, cap), "%s", r.err);
    cli_result_free(&r);
    cli_run(&env,
            (const char *[]){"create", "--provider", "good", "--port", "8080", "k", NULL},
            NULL, 30000, &r);
    cr_expect_eq(r.status, 125, "status %d: %s", r.status, r.err);
    cr_expect(strstr(r.err, "good") && strstr(r.err, cap), "%s", r.err);
    cli_result_free(&r);
    cr_expect_eq(cli_dir_entries(env.ws_root), 0, "nothing may be provisioned");
}

Test(cli_ports, the_ports_reach_the_provider)
{
    struct cli_result r;
    cli_run(&env,
            (const char *[]){"create", "--provider", "portstest", "--port", "8080", "--port",
                             "3000", "web", NULL},
            NULL, 30000, &r);
    cr_expect_eq(r.status, 0, "status %d: %s", r.status, r.err);
    cr_expect_str_eq(r.out, "created\n");
    cli_result_free(&r);
    cr_expect_str_eq(create_log(), "create 8080,3000\n");
    /* again with the same set: exists; with another: an error, not applied */
    cli_run(&env,
            (const char *[]){"create", "--provider", "portstest", "--port", "3000", "--port",
                             "8080", "web", NULL},
            NULL, 30000, &r);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.out, "exists\n");
    cli_result_free(&r);
    cli_run(&env,
            (const char *[]){"create", "--provider", "portstest", "--port", "8080", "web",
                             NULL},
            NULL, 30000, &r);
    cr_expect_eq(r.status, 125);
    cr_expect(strstr(r.err, "another spec"), "%s", r.err);
    cli_result_free(&r);
    /* run prints each endpoint before the command */
    cli_run(&env,
            (const char *[]){"run", "--provider", "portstest", "--port", "8080", "--",
                             "echo", "ran", NULL},
            NULL, 30000, &r);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.err, "sbx: port 8080: http://127.0.0.1:18080\n");
    cr_expect_str_eq(r.out, "ran\n");
    cli_result_free(&r);
    cr_expect_str_eq(create_log(), "create 8080,3000\ncreate 8080\n");
}

Test(cli_ports, help_names_the_option)
{
    const char *cmds[] = {"create", "run"};
    for (int i = 0; i < 2; i++) {
        struct cli_result r;
        cli_run(&env, (const char *[]){cmds[i], "--help", NULL}, NULL, 30000, &r);
        cr_expect_eq(r.status, 0);
        cr_expect(strstr(r.out, "--port PORT"), "%s --help: %s", cmds[i], r.out);
        cli_result_free(&r);
    }
}
