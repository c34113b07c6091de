/*
 * test_mcp_tools_files.c - read_file, write_file, list_files, stat, mkdir,
 * move and delete through `sbx mcp`'s stdio, as a client calls them: the
 * normal paths, and the hostile ones (paths out of the workspace, a
 * symlink planted inside pointing out, a FIFO, a huge file, invalid UTF-8,
 * bad base64, an oversize write).
 */
#include "tools_client.h"

#include <criterion/criterion.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static struct tc T;

static void setup(void)
{
    tc_start(&T, NULL);
}

static void setup_limits(void)
{
    const char *extra[] = {"--max-write-bytes", "1000", "--max-read-bytes", "64", NULL};
    tc_start(&T, extra);
}

static void teardown(void)
{
    tc_stop(&T);
}

TestSuite(mcp_files, .init = setup, .fini = teardown, .timeout = 120);
TestSuite(mcp_files_limits, .init = setup_limits, .fini = teardown, .timeout = 120);

#define S "\"sandbox\":\"" TC_SANDBOX "\""

static bool stat_exists(const char *path)
{
    json_object *root;
    json_object *o = tc_ok(&T, &root, "stat", "{" S ",\"path\":\"%s\"}", path);
    bool e = tc_bool(o, "exists");
    json_object_put(root);
    return e;
}

Test(mcp_files, write_then_read_text_and_base64)
{
    json_object *root;
    json_object *o = tc_ok(&T, &root, "write_file",
                           "{" S ",\"path\":\"a/b.txt\",\"content\":\"h\\u00e9llo\\n\","
                           "\"mode\":\"0640\"}");
    cr_expect_eq(tc_int(o, "bytes"), 7);
    cr_expect_str_eq(tc_str(o, "path"), "a/b.txt");
    json_object_put(root);

    o = tc_ok(&T, &root, "read_file", "{" S ",\"path\":\"a/b.txt\"}");
    cr_expect_str_eq(tc_str(o, "content"), "h\xc3\xa9llo\n");
    cr_expect_str_eq(tc_str(o, "encoding"), "text");
    cr_expect_eq(tc_int(o, "size"), 7);
    cr_expect_eq(tc_int(o, "bytes"), 7);
    cr_expect(!tc_bool(o, "truncated"));
    json_object_put(root);

    o = tc_ok(&T, &root, "stat", "{" S ",\"path\":\"a/b.txt\"}");
    cr_expect(tc_bool(o, "exists"));
    cr_expect_str_eq(tc_str(o, "type"), "file");
    cr_expect_str_eq(tc_str(o, "mode"), "0640");
    cr_expect_eq(tc_int(o, "size"), 7);
    json_object_put(root);

    /* bytes that are not text go as base64 ("AP8A" is 00 ff 00) */
    o = tc_ok(&T, &root, "write_file",
              "{" S ",\"path\":\"bin\",\"content\":\"AP8A\",\"encoding\":\"base64\","
              "\"mode\":420}");
    cr_expect_eq(tc_int(o, "bytes"), 3);
    json_object_put(root);
    o = tc_ok(&T, &root, "read_file", "{" S ",\"path\":\"bin\",\"encoding\":\"base64\"}");
    cr_expect_str_eq(tc_str(o, "content"), "AP8A");
    json_object_put(root);
    o = tc_ok(&T, &root, "stat", "{" S ",\"path\":\"bin\"}");
    cr_expect_str_eq(tc_str(o, "mode"), "0644");
    json_object_put(root);

    /* as text: refused, saying to use base64 */
    char *e = tc_err(&T, "read_file", "{" S ",\"path\":\"bin\"}");
    cr_expect(strstr(e, "read_file") && strstr(e, "\"bin\"") && strstr(e, "UTF-8") &&
                  strstr(e, "base64"),
              "%s", e);
    free(e);
}

Test(mcp_files, read_at_offset_and_capped)
{
    char content[101];
    for (int i = 0; i < 100; i++)
        content[i] = (char)('a' + i % 26);
    content[100] = '\0';
    json_object *root;
    json_object_put(
        (tc_ok(&T, &root, "write_file", "{" S ",\"path\":\"f\",\"content\":\"%s\"}", content),
         root));
    json_object *o =
        tc_ok(&T, &root, "read_file", "{" S ",\"path\":\"f\",\"offset\":10,\"max_bytes\":20}");
    cr_expect_eq(strncmp(tc_str(o, "content"), content + 10, 20), 0);
    cr_expect_eq(strlen(tc_str(o, "content")), 20);
    cr_expect(tc_bool(o, "truncated"));
    cr_expect_eq(tc_int(o, "size"), 100);
    cr_expect_eq(tc_int(o, "offset"), 10);
    json_object_put(root);
    /* the end exactly: not truncated */
    o = tc_ok(&T, &root, "read_file", "{" S ",\"path\":\"f\",\"offset\":80,\"max_bytes\":20}");
    cr_expect(!tc_bool(o, "truncated"));
    cr_expect_eq(tc_int(o, "bytes"), 20);
    json_object_put(root);
    /* past the end: empty */
    o = tc_ok(&T, &root, "read_file", "{" S ",\"path\":\"f\",\"offset\":500}");
    cr_expect_str_eq(tc_str(o, "content"), "");
    cr_expect(!tc_bool(o, "truncated"));
    json_object_put(root);
    /* a cap inside a two-byte character stops before it */
    json_object_put((tc_ok(&T, &root, "write_file",
                           "{" S ",\"path\":\"u\",\"content\":\"a\\u00e9b\"}"),
                     root));
    o = tc_ok(&T, &root, "read_file", "{" S ",\"path\":\"u\",\"max_bytes\":2}");
    cr_expect_str_eq(tc_str(o, "content"), "a");
    cr_expect_eq(tc_int(o, "bytes"), 1);
    cr_expect(tc_bool(o, "truncated"));
    json_object_put(root);
    char *e = tc_refused(&T, "read_file", "{" S ",\"path\":\"f\",\"offset\":-1}");
    free(e);
}

Test(mcp_files, huge_file_read_is_capped_in_bounded_memory)
{
    /* 300 MiB of (sparse) zeros: the read stops at the server's cap */
    cr_assert_eq(tc_sh(&T, "dd if=/dev/zero of=big bs=1048576 count=0 seek=300 2>/dev/null",
                       NULL),
                 0);
    long long t0 = cli_now_ms();
    json_object *root;
    json_object *o =
        tc_ok(&T, &root, "read_file", "{" S ",\"path\":\"big\",\"encoding\":\"base64\"}");
    long long ms = cli_now_ms() - t0;
    cr_expect(tc_bool(o, "truncated"));
    cr_expect_eq(tc_int(o, "bytes"), 1 << 20); /* the default --max-read-bytes */
    cr_expect_eq(tc_int(o, "size"), 300ll << 20);
    json_object_put(root);
    /* a max_bytes over the server's cap is held to it */
    o = tc_ok(&T, &root, "read_file",
              "{" S ",\"path\":\"big\",\"encoding\":\"base64\",\"max_bytes\":1000000000}");
    cr_expect_eq(tc_int(o, "bytes"), 1 << 20);
    json_object_put(root);
    long hwm = tc_server_hwm_kib(&T);
    if (getenv("TC_VERBOSE"))
        fprintf(stderr, "%s: %lld ms, server peak RSS %ld KiB\n", "read_file 300 MiB", ms, hwm);
    cr_expect_lt(hwm, 96 * 1024, "the server's peak RSS is %ld KiB", hwm);
    cr_expect_lt(ms, 10000, "a capped read of a huge file took %lld ms", ms);
}

Test(mcp_files, bad_base64_and_bad_arguments_write_nothing)
{
    char *e = tc_err(&T, "write_file",
                     "{" S ",\"path\":\"x\",\"content\":\"@@@@\",\"encoding\":\"base64\"}");
    cr_expect(strstr(e, "write_file") && strstr(e, "\"x\"") && strstr(e, "base64"), "%s", e);
    free(e);
    cr_expect(!stat_exists("x"));
    e = tc_err(&T, "write_file", "{" S ",\"path\":\"x\",\"content\":\"a\",\"mode\":\"999\"}");
    cr_expect(strstr(e, "mode"), "%s", e);
    free(e);
    e = tc_err(&T, "write_file", "{" S ",\"path\":\"x\",\"content\":\"a\",\"mode\":4095}");
    free(e);
    e = tc_refused(&T, "write_file", "{" S ",\"path\":\"x\\u0000y\",\"content\":\"a\"}");
    cr_expect(strstr(e, "NUL"), "%s", e);
    free(e);
    cr_expect(!stat_exists("x"));
    e = tc_err(&T, "read_file", "{\"sandbox\":\"no-such-sandbox\",\"path\":\"x\"}");
    cr_expect(strstr(e, "read_file"), "%s", e);
    free(e);
}

Test(mcp_files_limits, oversize_write_refused_and_nothing_written)
{
    char big[1502];
    memset(big, 'z', 1501);
    big[1501] = '\0';
    char *e = tc_err(&T, "write_file", "{" S ",\"path\":\"big\",\"content\":\"%s\"}", big);
    cr_expect(strstr(e, "--max-write-bytes") && strstr(e, "\"big\""), "%s", e);
    free(e);
    /* 1500 base64 chars decode to 1125 bytes: over 1000 */
    memset(big, 'A', 1500);
    big[1500] = '\0';
    e = tc_err(&T, "write_file",
               "{" S ",\"path\":\"big\",\"content\":\"%s\",\"encoding\":\"base64\"}", big);
    cr_expect(strstr(e, "--max-write-bytes"), "%s", e);
    free(e);
    cr_expect(!stat_exists("big"));
    /* at the limit it is written */
    big[1000] = '\0';
    memset(big, 'q', 1000);
    json_object *root;
    json_object *o = tc_ok(&T, &root, "write_file", "{" S ",\"path\":\"ok\",\"content\":\"%s\"}",
                           big);
    cr_expect_eq(tc_int(o, "bytes"), 1000);
    json_object_put(root);
    /* reads are held to --max-read-bytes 64 */
    o = tc_ok(&T, &root, "read_file", "{" S ",\"path\":\"ok\"}");
    cr_expect_eq(tc_int(o, "bytes"), 64);
    cr_expect(tc_bool(o, "truncated"));
    json_object_put(root);
}

Test(mcp_files, paths_out_of_the_workspace_are_refused)
{
    static const char *const bad[] = {"../x", "a/../../x", "..", "/etc/passwd", "/", NULL};
    for (size_t i = 0; bad[i]; i++) {
        char *e = tc_err(&T, "read_file", "{" S ",\"path\":\"%s\"}", bad[i]);
        cr_expect(strstr(e, "read_file"), "%s: %s", bad[i], e);
        free(e);
        e = tc_err(&T, "write_file", "{" S ",\"path\":\"%s\",\"content\":\"pwned\"}", bad[i]);
        free(e);
        e = tc_err(&T, "delete", "{" S ",\"path\":\"%s\",\"recursive\":true}", bad[i]);
        free(e);
        e = tc_err(&T, "move", "{" S ",\"from\":\"%s\",\"to\":\"y\"}", bad[i]);
        free(e);
    }
    char *e = tc_err(&T, "list_files", "{" S ",\"path\":\"..\"}");
    cr_expect(strstr(e, "..") != NULL, "%s", e);
    free(e);
    e = tc_err(&T, "stat", "{" S ",\"path\":\"../x\"}");
    free(e);
    e = tc_err(&T, "mkdir", "{" S ",\"path\":\"../newdir\",\"parents\":true}");
    free(e);
    /* nothing appeared beside the workspace */
    if (!T.docker) {
        char p[PATH_MAX + 200];
        snprintf(p, sizeof p, "%s/../x", T.ws);
        cr_expect_neq(access(p, F_OK), 0);
        snprintf(p, sizeof p, "%s/../newdir", T.ws);
        cr_expect_neq(access(p, F_OK), 0);
    }
    /* an absolute path under the workspace root is the same file */
    char *root_dir = NULL;
    cr_assert_eq(tc_sh(&T, "pwd", &root_dir), 0);
    root_dir[strcspn(root_dir, "\n")] = '\0';
    json_object *root;
    json_object_put((tc_ok(&T, &root, "write_file",
                           "{" S ",\"path\":\"%s/abs.txt\",\"content\":\"in\"}", root_dir),
                     root));
    json_object *o = tc_ok(&T, &root, "read_file", "{" S ",\"path\":\"abs.txt\"}");
    cr_expect_str_eq(tc_str(o, "content"), "in");
    json_object_put(root);
    free(root_dir);
}

Test(mcp_files, planted_symlinks_are_never_followed_out)
{
    /* links to the outside: a directory, a file, and one via ".." */
    char script[PATH_MAX * 3];
    const char *outdir = T.docker ? "/etc" : T.env.dir;
    if (!T.docker) {
        char p[PATH_MAX + 200];
        snprintf(p, sizeof p, "%s/secret.txt", T.env.dir);
        FILE *f = fopen(p, "w");
        fputs("SECRET\n", f);
        fclose(f);
    }
    snprintf(script, sizeof script,
             "ln -s %s out && ln -s %s/%s pw && mkdir d && ln -s ../.. d/up", outdir, outdir,
             T.docker ? "passwd" : "secret.txt");
    cr_assert_eq(tc_sh(&T, script, NULL), 0);

    const char *fname = T.docker ? "passwd" : "secret.txt";
    char *e = tc_err(&T, "read_file", "{" S ",\"path\":\"pw\"}");
    cr_expect(strstr(e, "symlink") || strstr(e, "regular"), "%s", e);
    free(e);
    e = tc_err(&T, "read_file", "{" S ",\"path\":\"out/%s\"}", fname);
    free(e);
    e = tc_err(&T, "read_file", "{" S ",\"path\":\"d/up/%s\"}", fname);
    free(e);
    e = tc_err(&T, "write_file", "{" S ",\"path\":\"out/planted\",\"content\":\"x\"}");
    free(e);
    e = tc_err(&T, "write_file", "{" S ",\"path\":\"pw\",\"content\":\"x\"}");
    free(e);
    e = tc_err(&T, "list_files", "{" S ",\"path\":\"out\"}");
    free(e);
    e = tc_err(&T, "mkdir", "{" S ",\"path\":\"out/newdir\"}");
    free(e);
    e = tc_err(&T, "move", "{" S ",\"from\":\"d\",\"to\":\"out/d\"}");
    free(e);
    json_object *root;
    /* through the link: an error, or not there; never the target */
    root = tc_call(&T, "stat", "{" S ",\"path\":\"out/%s\"}", fname);
    json_object *o;
    if (!tc_bool(root, "isError")) {
        cr_assert(json_object_object_get_ex(root, "structuredContent", &o));
        cr_expect(!tc_bool(o, "exists"), "stat followed the link: %s",
                  json_object_to_json_string(o));
    }
    json_object_put(root);
    /* stat and list show the links as themselves */
    o = tc_ok(&T, &root, "stat", "{" S ",\"path\":\"out\"}");
    cr_expect_str_eq(tc_str(o, "type"), "symlink");
    json_object_put(root);
    o = tc_ok(&T, &root, "list_files", "{" S ",\"path\":\".\"}");
    json_object *entries;
    json_object_object_get_ex(o, "entries", &entries);
    int links = 0;
    for (size_t i = 0; i < json_object_array_length(entries); i++) {
        json_object *en = json_object_array_get_idx(entries, i);
        if (!strcmp(tc_str(en, "type"), "symlink"))
            links++;
    }
    cr_expect_eq(links, 2, "%s", json_object_to_json_string(o));
    json_object_put(root);
    /* delete removes the link, never what it points at */
    json_object_put((tc_ok(&T, &root, "delete", "{" S ",\"path\":\"pw\"}"), root));
    json_object_put((tc_ok(&T, &root, "delete", "{" S ",\"path\":\"d\",\"recursive\":true}"),
                     root));
    json_object_put((tc_ok(&T, &root, "delete", "{" S ",\"path\":\"out\",\"recursive\":true}"),
                     root));
    if (T.docker) {
        cr_expect_eq(tc_sh(&T, "test -s /etc/passwd", NULL), 0);
    } else {
        char p[PATH_MAX + 200];
        snprintf(p, sizeof p, "%s/secret.txt", T.env.dir);
        cr_expect_eq(access(p, F_OK), 0, "the link's target was removed");
        snprintf(p, sizeof p, "%s/planted", T.env.dir);
        cr_expect_neq(access(p, F_OK), 0, "a write went through the link");
    }
}

Test(mcp_files, fifo_is_refused_without_hanging)
{
    cr_assert_eq(tc_sh(&T, "mkfifo fifo", NULL), 0);
    long long t0 = cli_now_ms();
    char *e = tc_err(&T, "read_file", "{" S ",\"path\":\"fifo\"}");
    cr_expect(strstr(e, "regular"), "%s", e);
    free(e);
    cr_expect_lt(cli_now_ms() - t0, 5000);
    json_object *root;
    json_object *o = tc_ok(&T, &root, "stat", "{" S ",\"path\":\"fifo\"}");
    cr_expect_str_eq(tc_str(o, "type"), "other");
    json_object_put(root);
    e = tc_err(&T, "write_file", "{" S ",\"path\":\"fifo/x\",\"content\":\"x\"}");
    free(e);
}

Test(mcp_files, list_files_sorted_and_limited)
{
    cr_assert_eq(tc_sh(&T, "mkdir -p many/sub && cd many && for i in 1 2 3 4 5 6 7 8 9; do "
                           "echo $i > f$i; done",
                       NULL),
                 0);
    json_object *root;
    json_object *o = tc_ok(&T, &root, "list_files", "{" S ",\"path\":\"many\"}");
    json_object *entries;
    json_object_object_get_ex(o, "entries", &entries);
    cr_expect_eq(json_object_array_length(entries), 10);
    cr_expect(!tc_bool(o, "truncated"));
    json_object *first = json_object_array_get_idx(entries, 0);
    cr_expect_str_eq(tc_str(first, "name"), "f1");
    cr_expect_str_eq(tc_str(first, "type"), "file");
    cr_expect_eq(tc_int(first, "size"), 2);
    cr_expect_str_eq(tc_str(json_object_array_get_idx(entries, 9), "type"), "directory");
    json_object_put(root);
    o = tc_ok(&T, &root, "list_files", "{" S ",\"path\":\"many\",\"limit\":3}");
    json_object_object_get_ex(o, "entries", &entries);
    cr_expect_eq(json_object_array_length(entries), 3);
    cr_expect(tc_bool(o, "truncated"));
    json_object_put(root);
    char *e = tc_err(&T, "list_files", "{" S ",\"path\":\"nope\"}");
    cr_expect(strstr(e, "list_files") && strstr(e, "\"nope\""), "%s", e);
    free(e);
    e = tc_err(&T, "list_files", "{" S ",\"path\":\"many/f1\"}");
    free(e);
}

Test(mcp_files, stat_mkdir_move_delete)
{
    json_object *root;
    json_object *o = tc_ok(&T, &root, "stat", "{" S ",\"path\":\"missing\"}");
    cr_expect(!tc_bool(o, "exists"));
    json_object_put(root);

    char *e = tc_err(&T, "mkdir", "{" S ",\"path\":\"p/q/r\"}");
    free(e);
    o = tc_ok(&T, &root, "mkdir", "{" S ",\"path\":\"p/q/r\",\"parents\":true,\"mode\":\"0700\"}");
    cr_expect_str_eq(tc_str(o, "path"), "p/q/r");
    json_object_put(root);
    o = tc_ok(&T, &root, "stat", "{" S ",\"path\":\"p/q/r\"}");
    cr_expect_str_eq(tc_str(o, "type"), "directory");
    cr_expect_str_eq(tc_str(o, "mode"), "0700");
    json_object_put(root);
    json_object_put((tc_ok(&T, &root, "mkdir", "{" S ",\"path\":\"p/q/r\",\"parents\":true}"),
                     root));
    e = tc_err(&T, "mkdir", "{" S ",\"path\":\"p/q/r\"}");
    free(e);

    json_object_put((tc_ok(&T, &root, "write_file", "{" S ",\"path\":\"one\",\"content\":\"1\"}"),
                     root));
    json_object_put((tc_ok(&T, &root, "write_file", "{" S ",\"path\":\"two\",\"content\":\"2\"}"),
                     root));
    e = tc_err(&T, "move", "{" S ",\"from\":\"one\",\"to\":\"two\"}");
    cr_expect(strstr(e, "overwrite"), "%s", e);
    free(e);
    o = tc_ok(&T, &root, "read_file", "{" S ",\"path\":\"two\"}");
    cr_expect_str_eq(tc_str(o, "content"), "2");
    json_object_put(root);
    o = tc_ok(&T, &root, "move", "{" S ",\"from\":\"one\",\"to\":\"two\",\"overwrite\":true}");
    cr_expect_str_eq(tc_str(o, "to"), "two");
    json_object_put(root);
    o = tc_ok(&T, &root, "read_file", "{" S ",\"path\":\"two\"}");
    cr_expect_str_eq(tc_str(o, "content"), "1");
    json_object_put(root);
    cr_expect(!stat_exists("one"));
    o = tc_ok(&T, &root, "move", "{" S ",\"from\":\"two\",\"to\":\"p/q/r/three\"}");
    json_object_put(root);
    cr_expect(stat_exists("p/q/r/three"));

    e = tc_err(&T, "delete", "{" S ",\"path\":\"p\"}");
    cr_expect(strstr(e, "delete") && strstr(e, "\"p\""), "%s", e);
    free(e);
    json_object_put((tc_ok(&T, &root, "delete", "{" S ",\"path\":\"p\",\"recursive\":true}"),
                     root));
    cr_expect(!stat_exists("p"));
    e = tc_err(&T, "delete", "{" S ",\"path\":\"p\"}");
    free(e);
    e = tc_err(&T, "delete", "{" S ",\"path\":\".\",\"recursive\":true}");
    cr_expect(strstr(e, "root"), "%s", e);
    free(e);
}

Test(mcp_files, write_file_as_a_user)
{
    if (!T.docker) {
        /* local has no users: a clear refusal naming the capability */
        char *e = tc_err(&T, "write_file",
                         "{" S ",\"path\":\"u.txt\",\"content\":\"x\",\"user\":\"alice\"}");
        cr_expect(strstr(e, "write_file"), "%s", e);
        free(e);
        cr_expect(!stat_exists("u.txt"));
        return;
    }
    json_object *root;
    json_object_put((tc_ok(&T, &root, "add_user", "{" S ",\"name\":\"alice\"}"), root));
    cr_assert_eq(tc_sh(&T, "mkdir -p shared rootonly && chmod 0777 shared && chmod 0755 rootonly",
                       NULL),
                 0);
    json_object_put((tc_ok(&T, &root, "write_file",
                           "{" S ",\"path\":\"shared/a.txt\",\"content\":\"mine\",\"user\":\"alice\"}"),
                     root));
    char *owner = NULL;
    cr_assert_eq(tc_sh(&T, "stat -c %U shared/a.txt", &owner), 0);
    cr_expect_str_eq(owner, "alice\n");
    free(owner);
    char *e = tc_err(&T, "write_file",
                     "{" S ",\"path\":\"rootonly/b.txt\",\"content\":\"x\",\"user\":\"alice\"}");
    cr_expect(strstr(e, "rootonly/b.txt"), "%s", e);
    free(e);
    cr_expect(!stat_exists("rootonly/b.txt"));
}
