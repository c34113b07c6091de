/*
 * test_cli_fileops.c - `sbx ls`, `stat`, `mkdir`, `rm`, `mv` and `port`
 * on the local provider: what they print, the errors they name, symlinks
 * planted in the workspace never followed out of it, a wide directory
 * listed whole.
 */
#include "cli_harness.h"

#include <criterion/criterion.h>
#include <json-c/json.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static struct cli_env env;

static void setup(void)
{
    cli_env_init(&env);
    cli_env_local_config(&env);
}

static void teardown(void)
{
    cli_env_fini(&env);
}

TestSuite(cli_fileops, .init = setup, .fini = teardown, .timeout = 60);

static void run(const char *const *args, struct cli_result *r)
{
    cli_run(&env, args, NULL, 30000, r);
}

/* Run and expect success. */
static void ok(const char *const *args, struct cli_result *r)
{
    run(args, r);
    cr_assert_eq(r->status, 0, "sbx %s: status %d, stderr: %s", args[0], r->status, r->err);
}

/* Run and expect exit 125 with needle in stderr and nothing on stdout. */
static void fails(const char *const *args, const char *needle)
{
    struct cli_result r;
    run(args, &r);
    cr_assert_eq(r.status, 125, "sbx %s: status %d, stderr: %s", args[0], r.status, r.err);
    cr_assert_not_null(strstr(r.err, needle), "sbx %s: expected \"%s\" in: %s", args[0],
                       needle, r.err);
    cr_assert_str_empty(r.out, "sbx %s printed: %s", args[0], r.out);
    cli_result_free(&r);
}

static void sh(const char *script)
{
    struct cli_result r;
    ok((const char *[]){"exec", "s", "--", "sh", "-c", script, NULL}, &r);
    cli_result_free(&r);
}

/* Whether line (a whole line) is in text. */
static bool has_line(const char *text, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = text; (p = strstr(p, line)) != NULL; p++)
        if ((p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0'))
            return true;
    return false;
}

Test(cli_fileops, ls_lists_names_and_long_format)
{
    sh("mkdir -p d/sub && printf 12345 > d/f && chmod 0640 d/f && ln -s f d/l");
    struct cli_result r;
    ok((const char *[]){"ls", "s", "d", NULL}, &r);
    cr_assert(has_line(r.out, "f") && has_line(r.out, "l") && has_line(r.out, "sub"),
              "%s", r.out);
    cli_result_free(&r);

    ok((const char *[]){"ls", "-l", "s", "d", NULL}, &r);
    cr_assert_not_null(strstr(r.out, "-rw-r----- "), "%s", r.out);
    cr_assert_not_null(strstr(r.out, " 5 "), "size 5 shown: %s", r.out);
    cr_assert_not_null(strstr(r.out, "lrwxrwxrwx"), "%s", r.out);
    cr_assert_not_null(strstr(r.out, "drwx"), "%s", r.out);
    cli_result_free(&r);

    /* the root by default; options after the operands */
    ok((const char *[]){"ls", "s", NULL}, &r);
    cr_assert(has_line(r.out, "d"), "%s", r.out);
    cli_result_free(&r);

    ok((const char *[]){"ls", "s", "d", "--json", NULL}, &r);
    int n = 0;
    for (char *line = strtok(r.out, "\n"); line; line = strtok(NULL, "\n"), n++) {
        json_object *o = json_tokener_parse(line);
        cr_assert_not_null(o, "not JSON: %s", line);
        json_object *name, *type, *size, *mode;
        cr_assert(json_object_object_get_ex(o, "name", &name) &&
                  json_object_object_get_ex(o, "type", &type) &&
                  json_object_object_get_ex(o, "size", &size) &&
                  json_object_object_get_ex(o, "mode", &mode));
        if (!strcmp(json_object_get_string(name), "f")) {
            cr_assert_str_eq(json_object_get_string(type), "file");
            cr_assert_eq(json_object_get_int64(size), 5);
            cr_assert_str_eq(json_object_get_string(mode), "0640");
        }
        if (!strcmp(json_object_get_string(name), "l"))
            cr_assert_str_eq(json_object_get_string(type), "symlink");
        json_object_put(o);
    }
    cr_assert_eq(n, 3);
    cli_result_free(&r);
}

Test(cli_fileops, stat_describes_without_following)
{
    sh("printf abc > f && ln -s /etc/passwd l");
    struct cli_result r;
    ok((const char *[]){"stat", "s", "f", NULL}, &r);
    cr_assert_not_null(strstr(r.out, "type: file\nsize: 3\nmode: 0644"), "%s", r.out);
    cli_result_free(&r);
    ok((const char *[]){"stat", "--json", "s", "l", NULL}, &r);
    json_object *o = json_tokener_parse(r.out), *type;
    cr_assert_not_null(o, "%s", r.out);
    cr_assert(json_object_object_get_ex(o, "type", &type));
    cr_assert_str_eq(json_object_get_string(type), "symlink", "%s", r.out);
    json_object_put(o);
    cli_result_free(&r);
    fails((const char *[]){"stat", "s", "missing", NULL}, "missing");
}

/* A symlink planted in the workspace pointing out of it is never followed:
 * not listed through, not a parent of anything made, removed or renamed. */
Test(cli_fileops, symlinks_out_of_the_workspace_are_not_followed)
{
    char outside[PATH_MAX + 16];
    snprintf(outside, sizeof outside, "%s/outside", env.dir);
    cr_assert_eq(mkdir(outside, 0755), 0);
    char file[PATH_MAX + 32];
    snprintf(file, sizeof file, "%s/secret", outside);
    FILE *f = fopen(file, "w");
    cr_assert_not_null(f);
    fputs("x", f);
    fclose(f);
    char script[3 * PATH_MAX];
    snprintf(script, sizeof script, "ln -s '%s' out && mkdir d && ln -s '%s' d/out2",
             outside, outside);
    sh(script);

    fails((const char *[]){"ls", "s", "out", NULL}, "not a directory");
    fails((const char *[]){"ls", "s", "out/", NULL}, "out");
    fails((const char *[]){"mkdir", "s", "out/new", NULL}, "out");
    fails((const char *[]){"mkdir", "-p", "s", "d/out2/new", NULL}, "out2");
    fails((const char *[]){"mv", "s", "out/secret", "stolen", NULL}, "out");
    fails((const char *[]){"rm", "s", "out/secret", NULL}, "out");
    fails((const char *[]){"stat", "s", "out/secret", NULL}, "out");
    fails((const char *[]){"ls", "s", "..", NULL}, "..");
    fails((const char *[]){"ls", "s", "/etc", NULL}, "/etc");

    /* rm -r of a tree holding the link removes the link, not its target */
    struct cli_result r;
    ok((const char *[]){"rm", "-r", "s", "d", NULL}, &r);
    cli_result_free(&r);
    ok((const char *[]){"rm", "s", "out", NULL}, &r);
    cli_result_free(&r);
    struct stat st;
    cr_assert_eq(stat(file, &st), 0, "the target outside the workspace was removed");
    char made[PATH_MAX + 32];
    snprintf(made, sizeof made, "%s/new", outside);
    cr_assert_neq(stat(made, &st), 0, "a directory was made outside the workspace");
}

Test(cli_fileops, mkdir_rm_mv_and_their_errors)
{
    fails((const char *[]){"mkdir", "s", "a", NULL}, "has no sandbox");
    sh("true");
    struct cli_result r;
    ok((const char *[]){"mkdir", "s", "a", NULL}, &r);
    cli_result_free(&r);
    fails((const char *[]){"mkdir", "s", "a", NULL}, "exists");
    fails((const char *[]){"mkdir", "s", "x/y/z", NULL}, "x/y");
    ok((const char *[]){"mkdir", "-p", "-m", "0700", "s", "x/y/z", NULL}, &r);
    cli_result_free(&r);
    ok((const char *[]){"mkdir", "-p", "s", "x/y/z", NULL}, &r); /* exists: fine */
    cli_result_free(&r);
    ok((const char *[]){"stat", "s", "x/y/z", NULL}, &r);
    cr_assert_not_null(strstr(r.out, "type: directory"), "%s", r.out);
    cr_assert_not_null(strstr(r.out, "mode: 0700"), "%s", r.out);
    cli_result_free(&r);

    fails((const char *[]){"rm", "s", "x", NULL}, "not empty");
    ok((const char *[]){"rm", "s", "-r", "x", NULL}, &r);
    cli_result_free(&r);
    fails((const char *[]){"rm", "s", "x", NULL}, "x");
    fails((const char *[]){"rm", "-r", "s", "", NULL}, "root");

    sh("echo one > f1 && echo two > f2");
    fails((const char *[]){"mv", "--no-clobber", "s", "f1", "f2", NULL}, "exists");
    ok((const char *[]){"mv", "s", "f1", "a/f3", NULL}, &r);
    cli_result_free(&r);
    ok((const char *[]){"read", "s", "a/f3", NULL}, &r);
    cr_assert_str_eq(r.out, "one\n");
    cli_result_free(&r);
    ok((const char *[]){"mv", "s", "a/f3", "f2", NULL}, &r); /* replaces */
    cli_result_free(&r);
    ok((const char *[]){"read", "s", "f2", NULL}, &r);
    cr_assert_str_eq(r.out, "one\n");
    cli_result_free(&r);
    fails((const char *[]){"mv", "s", "nothing", "b", NULL}, "nothing");
}

Test(cli_fileops, usage_errors_name_what_was_wrong)
{
    fails((const char *[]){"ls", NULL}, "missing SESSION");
    fails((const char *[]){"stat", "s", NULL}, "missing PATH");
    fails((const char *[]){"mv", "s", "a", NULL}, "missing TO");
    fails((const char *[]){"mv", "s", NULL}, "missing FROM and TO");
    fails((const char *[]){"ls", "s", "a", "b", NULL}, "unexpected argument 'b'");
    fails((const char *[]){"mkdir", "-m", "9", "s", "a", NULL}, "invalid --mode '9'");
    fails((const char *[]){"rm", "--bogus", "s", "a", NULL}, "unknown option '--bogus'");
    fails((const char *[]){"port", "s", NULL}, "missing PORT");
    fails((const char *[]){"port", "s", "0", NULL}, "invalid PORT '0'");
    fails((const char *[]){"port", "s", "70000", NULL}, "invalid PORT '70000'");
    fails((const char *[]){"port", "s", "-1", NULL}, "unknown option '-1'");
    /* no such session: nothing is created by a file operation */
    fails((const char *[]){"ls", "nosuch", NULL}, "session");
    struct cli_result r;
    ok((const char *[]){"sessions", NULL}, &r);
    cr_assert_null(strstr(r.out, "nosuch"), "%s", r.out);
    cli_result_free(&r);
}

Test(cli_fileops, port_not_declared_is_named)
{
    sh("true");
    fails((const char *[]){"port", "s", "8080", NULL}, "8080");
}

/* A port declared at create (`sbx create --port`) resolves to a loopback
 * URL; --json adds the fields, the header only there. Skipped while this
 * tree's `sbx create` has no --port. */
Test(cli_fileops, a_declared_port_resolves_to_its_url)
{
    struct cli_result r;
    run((const char *[]){"create", "--port", "8080", "p", NULL}, &r);
    if (r.status != 0 && strstr(r.err, "unknown option '--port'")) {
        cli_result_free(&r);
        cr_skip_test("sbx create has no --port in this tree");
    }
    cr_assert_eq(r.status, 0, "%s", r.err);
    cli_result_free(&r);
    ok((const char *[]){"port", "p", "8080", NULL}, &r);
    cr_assert(!strncmp(r.out, "http://127.0.0.1:", 17), "%s", r.out);
    cr_assert_str_empty(r.err);
    char url[256];
    snprintf(url, sizeof url, "%.*s", (int)strcspn(r.out, "\n"), r.out);
    cli_result_free(&r);
    ok((const char *[]){"port", "--json", "p", "8080", NULL}, &r);
    json_object *o = json_tokener_parse(r.out), *v;
    cr_assert_not_null(o, "%s", r.out);
    cr_assert(json_object_object_get_ex(o, "url", &v));
    cr_assert_str_eq(json_object_get_string(v), url);
    cr_assert(json_object_object_get_ex(o, "host", &v));
    cr_assert_str_eq(json_object_get_string(v), "127.0.0.1");
    cr_assert(json_object_object_get_ex(o, "header", &v));
    cr_assert(json_object_is_type(v, json_type_null));
    json_object_put(o);
    cli_result_free(&r);
    fails((const char *[]){"port", "p", "8081", NULL}, "8081");
    ok((const char *[]){"destroy", "p", NULL}, &r);
    cli_result_free(&r);
}

/* A directory of 20 000 entries is listed whole (the listing is streamed:
 * sbx holds no list of it). */
Test(cli_fileops, a_wide_directory_is_listed_whole)
{
    sh("mkdir w && cd w && i=0; while [ $i -lt 20000 ]; do : > f$i; i=$((i+1)); done");
    struct cli_result r;
    ok((const char *[]){"ls", "s", "w", NULL}, &r);
    size_t lines = 0;
    for (const char *p = r.out; *p; p++)
        lines += *p == '\n';
    cr_assert_eq(lines, 20000);
    cr_assert(has_line(r.out, "f19999"));
    cli_result_free(&r);
}
