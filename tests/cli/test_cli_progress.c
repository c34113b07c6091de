/*
 * test_cli_progress.c - progress of long steps on stderr, through `sbx
 * snapshot` and `sbx restore` of a workspace with a few MiB in it (local
 * provider): on a pipe nothing is printed; --progress=json gives one JSON
 * object per line, growing, the last one finished; on a pseudo-terminal
 * one line is redrawn in place and erased at the end; --quiet prints
 * nothing there; a bad mode is a usage error naming it.
 */
#include "cli_harness.h"

#include <criterion/criterion.h>
#include <json-c/json.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define BIG_BYTES 6000000

static struct cli_env env;
static char snap[PATH_MAX + 32];

static void run_ok(const char *const *args, struct cli_result *r)
{
    cli_run(&env, args, NULL, 60000, r);
    cr_assert_eq(r->status, 0, "sbx %s: exit %d: %s", args[0], r->status, r->err);
}

static void setup(void)
{
    cli_env_init(&env);
    cli_env_local_config(&env);
    snprintf(snap, sizeof snap, "%s/s.tar", env.dir);
    struct cli_result r;
    run_ok((const char *[]){"exec", "s", "--", "sh", "-c",
                            "head -c " "6000000" " /dev/urandom > big", NULL},
           &r);
    cli_result_free(&r);
}

static void teardown(void)
{
    struct cli_result r;
    cli_run(&env, (const char *[]){"destroy", "s", NULL}, NULL, 30000, &r);
    cli_result_free(&r);
    cli_env_fini(&env);
}

TestSuite(cli_progress, .init = setup, .fini = teardown, .timeout = 120);

Test(cli_progress, nothing_on_a_pipe)
{
    struct cli_result r;
    run_ok((const char *[]){"snapshot", "s", snap, NULL}, &r);
    cr_assert_str_eq(r.err, "", "stderr is a pipe: %s", r.err);
    cli_result_free(&r);
}

/* Check the JSON lines of one step: every line an object of step `what`,
 * done never going back, the last finished with done >= min (== total
 * when want_total). */
static void check_json(const char *text, const char *what, uint64_t min, uint64_t want_total)
{
    char *copy = strdup(text), *save = NULL;
    int lines = 0;
    int64_t last_done = -1;
    bool finished = false;
    for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        json_object *o = json_tokener_parse(l), *v;
        cr_assert(o, "not JSON: %s", l);
        cr_assert(json_object_object_get_ex(o, "progress", &v));
        cr_assert_str_eq(json_object_get_string(v), what);
        cr_assert(json_object_object_get_ex(o, "unit", &v));
        cr_assert_str_eq(json_object_get_string(v), "bytes");
        cr_assert(json_object_object_get_ex(o, "done", &v));
        int64_t done = json_object_get_int64(v);
        cr_assert_geq(done, last_done, "done went back: %s", l);
        last_done = done;
        cr_assert(json_object_object_get_ex(o, "total", &v));
        int64_t total = json_object_get_int64(v);
        if (want_total)
            cr_assert_eq((uint64_t)total, want_total, "%s", l);
        cr_assert(json_object_object_get_ex(o, "finished", &v));
        cr_assert_not(finished, "a report after the last: %s", l);
        finished = json_object_get_boolean(v);
        json_object_put(o);
        lines++;
    }
    free(copy);
    cr_assert_geq(lines, 2, "a start and an end at least: %s", text);
    cr_assert(finished, "the last report is finished: %s", text);
    cr_assert_geq((uint64_t)last_done, min);
    if (want_total)
        cr_assert_eq((uint64_t)last_done, want_total);
}

Test(cli_progress, json_lines_for_machines)
{
    struct cli_result r;
    run_ok((const char *[]){"snapshot", "--progress=json", "s", snap, NULL}, &r);
    check_json(r.err, "snapshot", BIG_BYTES, 0);
    cli_result_free(&r);
    struct stat st;
    cr_assert_eq(stat(snap, &st), 0);
    run_ok((const char *[]){"restore", "s", snap, "--progress", "json", NULL}, &r);
    check_json(r.err, "restore", (uint64_t)st.st_size, (uint64_t)st.st_size);
    cli_result_free(&r);
}

Test(cli_progress, one_line_redrawn_and_erased_on_a_terminal)
{
    struct cli_result r;
    cli_run_pty(&env, (const char *[]){"snapshot", "s", snap, NULL}, 60000, &r);
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.out);
    const char *line = strstr(r.out, "\r\033[Ksbx: snapshot: ");
    cr_assert(line, "no progress line: %s", r.out);
    cr_assert(strstr(line, "MiB"), "%s", r.out);
    /* erased at the end: the last thing on the terminal is the erase */
    size_t len = strlen(r.out);
    cr_assert(len >= 4 && !strcmp(r.out + len - 4, "\r\033[K"), "not erased: %s", r.out);
    cr_assert_null(strchr(r.out, '\n'), "the line stays one line: %s", r.out);
    cli_result_free(&r);
}

Test(cli_progress, quiet_on_a_terminal)
{
    struct cli_result r;
    cli_run_pty(&env, (const char *[]){"snapshot", "--quiet", "s", snap, NULL}, 60000, &r);
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.out);
    cr_assert_str_eq(r.out, "", "--quiet: %s", r.out);
    cli_result_free(&r);
}

Test(cli_progress, a_bad_mode_is_named)
{
    struct cli_result r;
    cli_run(&env, (const char *[]){"snapshot", "--progress=loud", "s", snap, NULL}, NULL,
            30000, &r);
    cr_assert_neq(r.status, 0);
    cr_assert(strstr(r.err, "--progress: expected auto, human, json or none, not 'loud'"),
              "%s", r.err);
    cli_result_free(&r);
}
