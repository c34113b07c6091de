/*
 * test_cli_health.c - `sbx health`: a verdict and the times per enabled
 * provider, exit 0 only when every one passed. local (no live check), a
 * provider whose init fails, an unknown name; on docker (with
 * SBX_TEST_DOCKER_HOST): the daemon's version, a dead socket and a frozen
 * one (accepts, never answers: FAIL within request_timeout, not hanging).
 */
#include "cli_harness.h"

#include <criterion/criterion.h>
#include <json-c/json.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static struct cli_env env;

static void setup(void)
{
    cli_env_init(&env);
}

static void teardown(void)
{
    cli_env_fini(&env);
}

TestSuite(cli_health, .init = setup, .fini = teardown, .timeout = 60);

Test(cli_health, local_passes_without_a_live_check)
{
    cli_env_local_config(&env);
    struct cli_result r;
    cli_run(&env, (const char *[]){"health", NULL}, NULL, 30000, &r);
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_assert(!strncmp(r.out, "ok    local ", 12), "%s", r.out);
    cr_assert(strstr(r.out, "no live check"), "%s", r.out);
    cli_result_free(&r);
    cli_run(&env, (const char *[]){"health", "nosuch", NULL}, NULL, 30000, &r);
    cr_assert_eq(r.status, 1);
    cr_assert(strstr(r.err, "provider \"nosuch\" is not enabled"), "%s", r.err);
    cli_result_free(&r);
}

Test(cli_health, a_failing_init_fails_the_verdict)
{
    cli_env_add_fixtures(&env);
    cli_env_write_config(&env, "default_provider: local\nproviders:\n  local:\n    root: @ROOT@\n"
                               "  initfail: {}\n");
    struct cli_result r;
    cli_run(&env, (const char *[]){"health", "--json", NULL}, NULL, 30000, &r);
    cr_assert_eq(r.status, 1, "%s%s", r.out, r.err);
    json_object *a = json_tokener_parse(r.out), *v;
    cr_assert(a && json_object_is_type(a, json_type_array), "%s", r.out);
    bool local_ok = false, initfail_failed = false;
    for (size_t i = 0; i < json_object_array_length(a); i++) {
        json_object *o = json_object_array_get_idx(a, i);
        json_object_object_get_ex(o, "provider", &v);
        const char *name = json_object_get_string(v);
        json_object_object_get_ex(o, "ok", &v);
        bool ok = json_object_get_boolean(v);
        if (!strcmp(name, "local"))
            local_ok = ok;
        if (!strcmp(name, "initfail")) {
            initfail_failed = !ok;
            cr_assert(json_object_object_get_ex(o, "error", &v) && json_object_get_string(v) &&
                          strstr(json_object_get_string(v), "init failed"),
                      "%s", r.out);
        }
    }
    cr_assert(local_ok && initfail_failed, "%s", r.out);
    json_object_put(a);
    cli_result_free(&r);
}

static void docker_config(const char *host, const char *extra)
{
    char yaml[PATH_MAX * 3];
    snprintf(yaml, sizeof yaml,
             "default_provider: docker\nproviders:\n  docker:\n    host: \"%s\"\n"
             "    image: sbx-test:busybox\n    resource_dir: \"@ROOT@\"\n%s",
             host, extra ? extra : "");
    cli_env_write_config(&env, yaml);
}

Test(cli_health, docker_reports_the_daemon)
{
    const char *host = getenv("SBX_TEST_DOCKER_HOST");
    if (!host || !*host)
        cr_skip_test("SBX_TEST_DOCKER_HOST is not set");
    docker_config(host, NULL);
    struct cli_result r;
    cli_run(&env, (const char *[]){"health", "docker", "--json", NULL}, NULL, 30000, &r);
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    json_object *a = json_tokener_parse(r.out), *v;
    cr_assert(a && json_object_array_length(a) == 1, "%s", r.out);
    json_object *o = json_object_array_get_idx(a, 0);
    cr_assert(json_object_object_get_ex(o, "checked", &v) && json_object_get_boolean(v));
    cr_assert(json_object_object_get_ex(o, "detail", &v) &&
                  strstr(json_object_get_string(v), "Docker Engine "),
              "%s", r.out);
    cr_assert(json_object_object_get_ex(o, "check_ms", &v) && json_object_get_double(v) > 0);
    json_object_put(a);
    cli_result_free(&r);
}

Test(cli_health, a_dead_daemon_fails)
{
    char host[PATH_MAX + 32];
    snprintf(host, sizeof host, "unix://%s/no-daemon.sock", env.dir);
    docker_config(host, NULL);
    struct cli_result r;
    cli_run(&env, (const char *[]){"health", NULL}, NULL, 30000, &r);
    cr_assert_eq(r.status, 1, "%s%s", r.out, r.err);
    cr_assert(!strncmp(r.out, "FAIL  docker ", 13), "%s", r.out);
    cr_assert(strstr(r.out, "no-daemon.sock"), "%s", r.out);
    cli_result_free(&r);
}

Test(cli_health, a_frozen_daemon_fails_within_the_request_timeout)
{
    /* a socket that is listened on and never answered */
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/frozen.sock", env.dir);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    cr_assert_lt(strlen(path), sizeof a.sun_path, "%s: too long for a socket", path);
    memcpy(a.sun_path, path, strlen(path) + 1);
    cr_assert_eq(bind(s, (struct sockaddr *)&a, sizeof a), 0);
    cr_assert_eq(listen(s, 16), 0);
    char host[PATH_MAX + 32];
    snprintf(host, sizeof host, "unix://%s", path);
    docker_config(host, "    request_timeout: 0.5\n");
    long long t0 = cli_now_ms();
    struct cli_result r;
    cli_run(&env, (const char *[]){"health", NULL}, NULL, 30000, &r);
    long long took = cli_now_ms() - t0;
    cr_assert_eq(r.status, 1, "%s%s", r.out, r.err);
    cr_assert(!strncmp(r.out, "FAIL  docker ", 13), "%s", r.out);
    cr_assert_lt(took, 5000, "took %lld ms", took);
    cli_result_free(&r);
    close(s);
}
