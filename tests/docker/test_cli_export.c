/*
 * test_cli_export.c - `sbx export SESSION DIR` with the docker provider on
 * the test daemon, through the built sbx binary: outputs written by a
 * command arrive in DIR; a hostile entry makes it exit 125 naming the
 * entry, with DIR unchanged.
 */
#include "../cli/cli_harness.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void run_ok(const struct cli_env *e, const char *const *args, struct cli_result *r)
{
    cli_run(e, args, NULL, 120000, r);
    cr_assert_eq(r->status, 0, "sbx %s: exit %d: %s", args[0], r->status, r->err);
}

Test(docker_cli, export_outputs_to_a_directory, .timeout = 300)
{
    struct cli_env e;
    cli_env_init(&e);
    cli_env_docker_config(&e, NULL);
    char target[PATH_MAX + 8];
    snprintf(target, sizeof target, "%s/out", e.dir);
    struct cli_result r;

    const char *create[] = {"create", "-r", "output_export", "cli-export", NULL};
    run_ok(&e, create, &r);
    cli_result_free(&r);
    const char *fill[] = {"exec", "cli-export", "--", "sh", "-c",
                          "mkdir -p /mnt/session/outputs/d && echo hello > "
                          "/mnt/session/outputs/d/hello.txt",
                          NULL};
    run_ok(&e, fill, &r);
    cli_result_free(&r);
    const char *exp[] = {"export", "cli-export", target, NULL};
    run_ok(&e, exp, &r);
    cli_result_free(&r);
    char path[PATH_MAX + 32], buf[64] = "";
    snprintf(path, sizeof path, "%s/d/hello.txt", target);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s missing after sbx export", path);
    buf[fread(buf, 1, sizeof buf - 1, f)] = '\0';
    fclose(f);
    cr_expect_str_eq(buf, "hello\n");

    const char *spoil[] = {"exec", "cli-export", "--", "sh", "-c",
                           "rm -r /mnt/session/outputs/d && "
                           "mkfifo /mnt/session/outputs/fifo",
                           NULL};
    run_ok(&e, spoil, &r);
    cli_result_free(&r);
    cli_run(&e, exp, NULL, 120000, &r);
    cr_expect_eq(r.status, 125, "exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.err, "fifo\" is a FIFO") != NULL, "%s", r.err);
    cli_result_free(&r);
    cr_expect_eq(cli_dir_entries(target), 1, "the refused export changed the target");

    const char *big[] = {"export", "--max-file", "0", "cli-export", target, NULL};
    cli_run(&e, big, NULL, 60000, &r);
    cr_expect_eq(r.status, 125, "exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.err, "--max-file") != NULL, "%s", r.err);
    cli_result_free(&r);

    const char *destroy[] = {"destroy", "cli-export", NULL};
    run_ok(&e, destroy, &r);
    cli_result_free(&r);
    cli_env_fini(&e);
}
