/*
 * test_cli_progress.c - progress of long steps on stderr, through `sbx
 * snapshot` and `sbx restore` of a workspace with a few MiB in it (local
 * provider): on a pipe nothing is printed; --progress=json gives one JSON
 * object per line, growing, the last one finished; on a pseudo-terminal
 * one line is redrawn in place and erased at the end; --quiet prints
 * nothing there; a bad mode is a usage error naming it. On docker (with
 * SBX_TEST_DOCKER_HOST): a real image pull, from a registry on this
 * machine, reports its bytes.
 */
#include "cli_harness.h"

#include <criterion/criterion.h>
#include <json-c/json.h>

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define SBX_TEST_PRINTF(f, a) __attribute__((format(printf, f, a)))

#define BIG_BYTES 6000000

static struct cli_env env;
static char snap[PATH_MAX + 32];

static void run_ok_in(const struct cli_env *e, const char *const *args, const char *input,
                      struct cli_result *r)
{
    cli_run(e, args, input, 60000, r);
    cr_assert_eq(r->status, 0, "sbx %s: exit %d: %s", args[0], r->status, r->err);
}

static void run_ok(const char *const *args, struct cli_result *r)
{
    run_ok_in(&env, args, NULL, r);
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

/* ---- an image pull on a real daemon ------------------------------------- */

/* The daemon's test image, served under a new name by a registry on this
 * machine (tests/docker/registry/serve.py) with one more layer of random
 * bytes: an image the daemon does not have, so `sbx run` pulls it. */
static struct cli_env denv;
static pid_t registry = -1;
static char pulled[128];

static void sh_ok(const char *fmt, ...) SBX_TEST_PRINTF(1, 2);
static void sh_ok(const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
}

static void setup_pull(void)
{
    cli_env_init(&denv);
    const char *host = getenv("SBX_TEST_DOCKER_HOST");
    if (!host || strncmp(host, "unix://", 7) != 0)
        cr_skip_test("SBX_TEST_DOCKER_HOST (a unix socket) is not set");
    const char *img = getenv("SBX_TEST_DOCKER_IMAGE");
    sh_ok("curl -sf --unix-socket '%s' -o '%s/img.tar' 'http://d/images/%s/get'", host + 7,
          denv.dir, img && *img ? img : "sbx-test:busybox");
    char saved[PATH_MAX + 16], portfile[PATH_MAX + 16];
    snprintf(saved, sizeof saved, "%s/img.tar", denv.dir);
    snprintf(portfile, sizeof portfile, "%s/port", denv.dir);
    registry = fork();
    cr_assert_geq(registry, 0);
    if (registry == 0) {
        execlp("python3", "python3", SBX_TEST_SOURCE_DIR "/tests/docker/registry/serve.py",
               saved, "sbx-pull", "1", portfile, "3000000", (char *)NULL);
        _exit(127);
    }
    int port = 0;
    for (int i = 0; i < 200 && !port; i++) {
        FILE *f = fopen(portfile, "r");
        if (f) {
            if (fscanf(f, "%d", &port) != 1)
                port = 0;
            fclose(f);
        }
        if (!port)
            usleep(50000);
    }
    cr_assert(port, "the registry did not start");
    snprintf(pulled, sizeof pulled, "127.0.0.1:%d/sbx-pull:1", port);
    char yaml[2048];
    snprintf(yaml, sizeof yaml,
             "default_provider: docker\nproviders:\n  docker:\n    host: \"%s\"\n"
             "    image: \"%s\"\n    resource_dir: \"@ROOT@\"\n",
             host, pulled);
    cli_env_write_config(&denv, yaml);
}

static void teardown_pull(void)
{
    if (registry > 0) {
        kill(registry, SIGKILL);
        waitpid(registry, NULL, 0);
    }
    const char *host = getenv("SBX_TEST_DOCKER_HOST");
    if (host && pulled[0] && system(NULL)) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd,
                 "curl -s --unix-socket '%s' -X DELETE 'http://d/images/%s?force=1' "
                 ">/dev/null",
                 host + 7, pulled);
        if (system(cmd) != 0) {
            /* the image stays on the test daemon: harmless */
        }
    }
    cli_env_fini(&denv);
}

TestSuite(cli_progress_pull, .init = setup_pull, .fini = teardown_pull, .timeout = 120);

Test(cli_progress_pull, an_image_pull_reports_its_bytes)
{
    struct cli_result r;
    cli_run(&denv, (const char *[]){"run", "--progress=json", "--", "true", NULL}, NULL,
            90000, &r);
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    char want[200];
    snprintf(want, sizeof want, "{\"progress\":\"pulling %s\",\"unit\":\"bytes\"", pulled);
    const char *first = strstr(r.err, want);
    cr_assert(first, "no pull progress: %s", r.err);
    /* the last pull report: every layer's bytes, more than the payload */
    const char *last = first, *next;
    while ((next = strstr(last + 1, want)))
        last = next;
    long long done = -1, total = -1;
    const char *d = strstr(last, "\"done\":"), *t = strstr(last, "\"total\":");
    cr_assert(d && t, "%s", last);
    sscanf(d, "\"done\":%lld", &done);
    sscanf(t, "\"total\":%lld", &total);
    cr_assert_gt(total, 3000000, "%s", last);
    cr_assert_eq(done, total, "%s", last);
    cli_result_free(&r);
}

/* ---- memory loads and write-backs over 1 MiB (docker) -------------------- */

static struct cli_env menv;

static void setup_memory(void)
{
    cli_env_init(&menv);
    cli_env_docker_config(&menv, NULL);
}

static void teardown_memory(void)
{
    struct cli_result r;
    cli_run(&menv, (const char *[]){"destroy", "pm", NULL}, NULL, 30000, &r);
    cli_result_free(&r);
    cli_env_fini(&menv);
}

TestSuite(cli_progress_memory, .init = setup_memory, .fini = teardown_memory, .timeout = 120);

Test(cli_progress_memory, loads_and_write_backs_report_their_bytes)
{
    struct cli_result r;
    run_ok_in(&menv, (const char *[]){"memory", "create", "notes", "--max-file-size", "8M", NULL},
              NULL, &r);
    cli_result_free(&r);
    /* 2 MiB at the store's head */
    char *big = malloc(2 * 1024 * 1024 + 1);
    cr_assert_not_null(big);
    for (size_t i = 0; i < 2 * 1024 * 1024; i++)
        big[i] = (char)('a' + i % 26);
    big[2 * 1024 * 1024] = '\0';
    run_ok_in(&menv, (const char *[]){"memory", "put", "notes", "big.txt", NULL}, big, &r);
    cli_result_free(&r);
    free(big);
    run_ok_in(&menv, (const char *[]){"create", "pm", "--memory", "notes:rw", NULL}, NULL, &r);
    cli_result_free(&r);
    /* the heads are loaded before the first command */
    run_ok_in(&menv, (const char *[]){"exec", "pm", "--progress=json", "--", "true", NULL},
              NULL, &r);
    cr_assert(strstr(r.err, "{\"progress\":\"loading memory notes\",\"unit\":\"bytes\""),
              "%s", r.err);
    cr_assert(strstr(r.err, "\"finished\":true}"), "%s", r.err);
    cli_result_free(&r);
    /* a command that writes 3 MiB more: the write-back reads them */
    run_ok_in(&menv, (const char *[]){"exec", "pm", "--progress=json", "--", "sh", "-c",
                                      "head -c 3000000 /dev/zero > /mnt/memory/notes/new.bin",
                                      NULL},
              NULL, &r);
    cr_assert(strstr(r.err, "{\"progress\":\"writing back memory notes\",\"unit\":\"bytes\""),
              "%s", r.err);
    cli_result_free(&r);
    /* a small change: nothing */
    run_ok_in(&menv, (const char *[]){"exec", "pm", "--progress=json", "--", "sh", "-c",
                                      "echo x > /mnt/memory/notes/small.txt", NULL},
              NULL, &r);
    cr_assert_null(strstr(r.err, "memory notes"), "%s", r.err);
    cli_result_free(&r);
}
