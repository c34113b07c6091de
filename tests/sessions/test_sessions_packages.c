/*
 * test_sessions_packages.c - environment packages: installed after create,
 * as argument vectors (never through a shell), each manager checked first;
 * a failure leaves the intent and the sandbox is never published.
 *
 * The provider is the pkgtest fixture (local with the packages capability,
 * commands confined to PATH=<bin>); <bin> holds stand-in managers that
 * record every argument vector into a log. No real package manager runs.
 */
#include "session_env.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define RUN(s, r, ...)                                            \
    do {                                                          \
        const char *args_[] = {__VA_ARGS__, NULL};                \
        sess_run((s), args_, NULL, (r));                          \
    } while (0)

struct pkg_env {
    struct sess_env s;
    char bin[256]; /* short: a mkdtemp name under /tmp */
    char log[512];
};

/* A stand-in manager: records "[arg0][arg1]..." (shell builtins only: PATH
 * holds nothing else); its install command prints `msg` on stderr and exits
 * with `status`, everything else succeeds. */
static void stand_in(struct pkg_env *e, const char *name, int status, const char *msg)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%.64s", e->bin, name);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s: %s", path, strerror(errno));
    fprintf(f,
            "#!/bin/sh\n"
            "printf '[%%s]' \"${0##*/}\" \"$@\" >> '%s'\n"
            "echo >> '%s'\n"
            "[ -n \"$DEBIAN_FRONTEND\" ] && printf 'DEBIAN_FRONTEND=%%s\\n' "
            "\"$DEBIAN_FRONTEND\" >> '%s'\n"
            "[ \"$1\" = install ] || exit 0\n"
            "printf '%%s\\n' '%s' >&2\n"
            "exit %d\n",
            e->log, e->log, e->log, msg, status);
    cr_assert_eq(fclose(f), 0);
    cr_assert_eq(chmod(path, 0755), 0);
}

/* top_yaml: top-level keys appended after the providers (or NULL). */
static void pkg_env_init_with(struct pkg_env *e, const char *driver,
                              const char *top_yaml)
{
    memset(e, 0, sizeof *e);
    /* bin and the log live outside the workspace root. */
    snprintf(e->bin, sizeof e->bin, "/tmp/sbx-pkg-bin-XXXXXX");
    cr_assert_not_null(mkdtemp(e->bin));
    snprintf(e->log, sizeof e->log, "%s/argv.log", e->bin);
    char extra[2048];
    snprintf(extra, sizeof extra,
             "  pkgtest:\n"
             "    root: @ROOT@\n"
             "    bin: %s\n%s", e->bin, top_yaml ? top_yaml : "");
    sess_env_init(&e->s, driver, extra, false);
    size_t n = strlen(e->s.cli.plugin_path);
    snprintf(e->s.cli.plugin_path + n, sizeof e->s.cli.plugin_path - n, ":%s",
             SBX_TEST_SESSION_FIXTURE_DIR);
}

static void pkg_env_init(struct pkg_env *e, const char *driver)
{
    pkg_env_init_with(e, driver, NULL);
}

static void pkg_env_fini(struct pkg_env *e)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", e->bin);
    cr_assert_eq(system(cmd), 0);
    sess_env_fini(&e->s);
}

/* The log's content ("" when nothing ran); the caller frees it. */
static char *read_log(struct pkg_env *e)
{
    FILE *f = fopen(e->log, "r");
    if (!f)
        return strdup("");
    char *buf = calloc(1, 8192);
    size_t n = fread(buf, 1, 8191, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void installs_as_argv(const char *driver)
{
    struct pkg_env e;
    pkg_env_init(&e, driver);
    stand_in(&e, "pip", 0, "ok");
    stand_in(&e, "apt-get", 0, "ok");
    struct cli_result r;
    /* A name a shell would act on: it must reach pip as one argument. */
    RUN(&e.s, &r, "create", "pk", "--provider", "pkgtest", "--package",
        "pip:requests==2.31.0", "--package", "apt:curl", "--package",
        "pip:x;touch${IFS}pwned$(id)");
    cr_assert_eq(r.status, 0, "create: %s", r.err);
    cr_assert_str_eq(r.out, "created\n");
    cli_result_free(&r);
    char *log = read_log(&e);
    cr_assert_str_eq(log,
                     "[pip][--version]\n"
                     "[pip][install][--no-input][requests==2.31.0]"
                     "[x;touch${IFS}pwned$(id)]\n"
                     "[apt-get][--version]\n"
                     "DEBIAN_FRONTEND=noninteractive\n"
                     "[apt-get][update]\n"
                     "DEBIAN_FRONTEND=noninteractive\n"
                     "[apt-get][install][-y][--no-install-recommends][curl]\n"
                     "DEBIAN_FRONTEND=noninteractive\n");
    free(log);
    cr_assert_eq(sess_check_consistent(&e.s), 1);
    RUN(&e.s, &r, "exec", "pk", "--", "/bin/ls", "-A");
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, "", "a shell ran a package name: %s", r.out);
    cli_result_free(&r);

    /* Same spec again: exists; another spec: refused, nothing installed. */
    RUN(&e.s, &r, "create", "pk", "--package", "pip:requests==2.31.0", "--package",
        "apt:curl", "--package", "pip:x;touch${IFS}pwned$(id)");
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, "exists\n");
    cli_result_free(&r);
    RUN(&e.s, &r, "create", "pk", "--package", "pip:requests==2.32.0");
    cr_assert_eq(r.status, 125);
    cr_assert(strstr(r.err, "not applied"), "%s", r.err);
    cli_result_free(&r);
    log = read_log(&e);
    cr_assert_null(strstr(log, "2.32.0"), "a changed spec was applied: %s", log);
    free(log);
    pkg_env_fini(&e);
}

Test(sessions_packages, installs_as_argv_sqlite) { installs_as_argv("sqlite"); }
Test(sessions_packages, installs_as_argv_postgres) { installs_as_argv("postgres"); }

/* The command lines come from the configuration where it sets them: an
 * image whose "apt" packages go through apk, a pip that needs sudo. */
/* --progress=json: each step of each manager, with the lines its commands
 * print as detail, the last report of a manager finished. */
Test(sessions_packages, progress_names_the_step_and_the_managers_lines)
{
    struct pkg_env e;
    pkg_env_init(&e, "sqlite");
    stand_in(&e, "apt-get", 0, "Unpacking curl (7.88.1-10)");
    struct cli_result r;
    RUN(&e.s, &r, "create", "pg", "--provider", "pkgtest", "--progress=json", "--package",
        "apt:curl");
    cr_assert_eq(r.status, 0, "create: %s", r.err);
    cr_assert(strstr(r.err, "{\"progress\":\"installing apt packages\",\"unit\":\"steps\","
                            "\"done\":1,\"total\":3,"),
              "%s", r.err);
    cr_assert(strstr(r.err, "\"done\":3,\"total\":3,\"detail\":\"Unpacking curl (7.88.1-10)\""),
              "the install's own line: %s", r.err);
    cr_assert(strstr(r.err, "\"done\":3,\"total\":3,\"finished\":true}"), "%s", r.err);
    cli_result_free(&r);
    /* without a mode, stderr being a pipe: nothing */
    RUN(&e.s, &r, "create", "pg2", "--provider", "pkgtest", "--package", "apt:curl");
    cr_assert_eq(r.status, 0, "create: %s", r.err);
    cr_assert_str_eq(r.err, "");
    cli_result_free(&r);
    pkg_env_fini(&e);
}

/* A manager printing bytes that are not UTF-8 (Latin-1, a stray 0xff, and
 * a line so long that the report's 159 bytes end inside a two-byte
 * character): every progress line is still valid JSON in valid UTF-8, the
 * bad bytes become U+FFFD and the good ones are kept. */
Test(sessions_packages, progress_detail_that_is_not_utf8_stays_valid_json)
{
    struct pkg_env e;
    pkg_env_init(&e, "sqlite");
    char msg[512] = "caf\xe9 \xff ok \xc3\xa9";
    size_t n = strlen(msg);
    while (n < 300) { /* "é" (0xc3 0xa9) again and again: cut mid-character */
        msg[n++] = '\xc3';
        msg[n++] = '\xa9';
    }
    msg[n] = '\0';
    stand_in(&e, "apt-get", 0, msg);
    struct cli_result r;
    RUN(&e.s, &r, "create", "pu", "--provider", "pkgtest", "--progress=json", "--package",
        "apt:curl");
    cr_assert_eq(r.status, 0, "create: %s", r.err);
    json_tokener *tok = json_tokener_new();
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
    int with_detail = 0;
    char *save = NULL;
    for (char *l = strtok_r(r.err, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        json_tokener_reset(tok);
        json_object *o = json_tokener_parse_ex(tok, l, (int)strlen(l)), *d;
        cr_assert_not_null(o, "not valid JSON in UTF-8 (%s): %s",
                           json_tokener_error_desc(json_tokener_get_error(tok)), l);
        if (json_object_object_get_ex(o, "detail", &d)) {
            const char *s = json_object_get_string(d);
            cr_assert(strncmp(s, "caf\xef\xbf\xbd \xef\xbf\xbd ok \xc3\xa9\xc3\xa9", 16) == 0,
                      "the bad bytes as U+FFFD, the good kept: %s", s);
            size_t sl = strlen(s);
            cr_assert(sl >= 3 && strcmp(s + sl - 3, "\xef\xbf\xbd") == 0,
                      "the character cut at the end is U+FFFD: %s", s);
            with_detail++;
        }
        json_object_put(o);
    }
    json_tokener_free(tok);
    cr_assert_geq(with_detail, 1, "the manager's line as detail: %s", r.err);
    cli_result_free(&r);
    pkg_env_fini(&e);
}

Test(sessions_packages, configured_command_lines)
{
    struct pkg_env e;
    pkg_env_init_with(&e, "sqlite",
                      "package_managers:\n"
                      "  apt:\n"
                      "    check: [apk, --version]\n"
                      "    refresh: []\n"
                      "    install: [apk, add, --no-cache]\n"
                      "    env: []\n"
                      "  pip:\n"
                      "    install: [sudo, pip, install]\n");
    stand_in(&e, "apk", 0, "ok");
    stand_in(&e, "pip", 0, "ok");
    stand_in(&e, "sudo", 0, "ok");
    struct cli_result r;
    RUN(&e.s, &r, "create", "cf", "--provider", "pkgtest", "--package", "apt:curl",
        "--package", "pip:requests");
    cr_assert_eq(r.status, 0, "create: %s", r.err);
    cli_result_free(&r);
    char *log = read_log(&e);
    cr_assert_str_eq(log,
                     "[apk][--version]\n"
                     "[apk][add][--no-cache][curl]\n"
                     "[pip][--version]\n"
                     "[sudo][pip][install][requests]\n");
    free(log);
    pkg_env_fini(&e);
}

/* A failed setup leaves the intent (and its sandbox) for the reconciler and
 * never publishes the sandbox. */
static void failure_leaves_intent(struct pkg_env *e, const char *key,
                                  const char *expect)
{
    struct cli_result r;
    RUN(&e->s, &r, "create", key, "--provider", "pkgtest", "--package",
        "pip:requests", "--package", "gem:rails");
    cr_assert_eq(r.status, 125);
    cr_assert(strstr(r.err, expect), "expected '%s' in: %s", expect, r.err);
    cli_result_free(&r);
    cr_assert_eq(sess_count(&e->s, "SELECT count(*) FROM bindings"), 0,
                 "a half-provisioned sandbox was published");
    cr_assert_eq(sess_count(&e->s, "SELECT count(*) FROM intents "
                                   "WHERE external_id IS NOT NULL"), 1,
                 "the intent with its resource was not left");
    cr_assert_eq(sess_workspaces(&e->s), 1);
    RUN(&e->s, &r, "read", key, "anything");
    cr_assert_eq(r.status, 125, "the half-provisioned sandbox was reachable");
    cli_result_free(&r);
    RUN(&e->s, &r, "reconcile");
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    cli_result_free(&r);
    cr_assert_eq(sess_check_consistent(&e->s), 0);
}

Test(sessions_packages, missing_manager_is_checked_first)
{
    struct pkg_env e;
    pkg_env_init(&e, "sqlite");
    stand_in(&e, "pip", 0, "ok");
    failure_leaves_intent(&e, "nogem", "package manager 'gem' is not installed");
    char *log = read_log(&e);
    cr_assert_str_eq(log, "[pip][--version]\n"
                          "[pip][install][--no-input][requests]\n");
    free(log);
    pkg_env_fini(&e);
}

Test(sessions_packages, failed_install_names_the_cause)
{
    struct pkg_env e;
    pkg_env_init(&e, "sqlite");
    stand_in(&e, "pip", 0, "ok");
    stand_in(&e, "gem", 1, "ERROR: could not find gem rails");
    failure_leaves_intent(&e, "badgem", "could not find gem rails");
    char *log = read_log(&e);
    cr_assert(strstr(log, "[gem][install][--no-document][rails]\n"), "%s", log);
    free(log);
    pkg_env_fini(&e);
}

Test(sessions_packages, crash_during_package_setup)
{
    struct pkg_env e;
    pkg_env_init(&e, "sqlite");
    stand_in(&e, "pip", 0, "ok");
    struct cli_result r;
    sess_require_crash_hooks();
    cli_env_setenv(&e.s.cli, "SBX_TEST_CRASH_AT", "during-packages");
    RUN(&e.s, &r, "create", "crashy", "--provider", "pkgtest", "--package", "pip:a");
    cli_env_setenv(&e.s.cli, "SBX_TEST_CRASH_AT", "");
    cr_assert_eq(r.status, CLI_KILLED_BY + SIGKILL, "status %d: %s", r.status, r.err);
    cli_result_free(&r);
    cr_assert_eq(sess_count(&e.s, "SELECT count(*) FROM bindings"), 0);
    RUN(&e.s, &r, "reconcile");
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    cli_result_free(&r);
    cr_assert_eq(sess_check_consistent(&e.s), 0);
    /* And the retry provisions it completely. */
    RUN(&e.s, &r, "create", "crashy", "--provider", "pkgtest", "--package", "pip:a");
    cr_assert_eq(r.status, 0, "%s", r.err);
    cli_result_free(&r);
    cr_assert_eq(sess_check_consistent(&e.s), 1);
    pkg_env_fini(&e);
}
