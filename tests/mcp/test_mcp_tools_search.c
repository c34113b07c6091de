/*
 * test_mcp_tools_search.c - search and git_clone through `sbx mcp`'s
 * stdio: matches by name and content, the bounds (a directory of 10000
 * files, a 100 MiB file), symlinks never followed, hostile URLs, branches
 * and paths refused, a real clone from a git daemon (local: the host's
 * git) or the clear error of an image without git (busybox on docker).
 */
#include "tools_client.h"

#include <criterion/criterion.h>

#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static struct tc T;

static void setup(void)
{
    tc_start(&T, NULL);
}

static void teardown(void)
{
    tc_stop(&T);
}

TestSuite(mcp_search, .init = setup, .fini = teardown, .timeout = 180);

#define S "\"sandbox\":\"" TC_SANDBOX "\""

static json_object *matches_of(json_object *o)
{
    json_object *m;
    cr_assert(json_object_object_get_ex(o, "matches", &m));
    return m;
}

static bool has_match(json_object *m, const char *path, long line)
{
    for (size_t i = 0; i < json_object_array_length(m); i++) {
        json_object *e = json_object_array_get_idx(m, i);
        json_object *l;
        if (!strcmp(tc_str(e, "path"), path) &&
            (line < 0 || (json_object_object_get_ex(e, "line", &l) &&
                          json_object_get_int64(l) == line)))
            return true;
    }
    return false;
}

Test(mcp_search, by_name_and_by_content)
{
    cr_assert_eq(tc_sh(&T, "mkdir -p src/lib docs && printf 'int main(void)\\n{\\n  return "
                           "needle_42;\\n}\\n' > src/main.c && printf 'needle_42 here\\n' > "
                           "src/lib/util.c && printf 'no match\\nlast needle_42' > docs/a.txt "
                           "&& printf 'needle_42\\000binary' > src/blob.bin",
                       NULL),
                 0);
    json_object *root;
    json_object *o = tc_ok(&T, &root, "search", "{" S ",\"path\":\".\",\"name\":\"*.c\"}");
    json_object *m = matches_of(o);
    cr_expect_eq(json_object_array_length(m), 2, "%s", json_object_to_json_string(o));
    cr_expect(has_match(m, "src/main.c", -1));
    cr_expect(has_match(m, "src/lib/util.c", -1));
    cr_expect(!tc_bool(o, "truncated"));
    json_object_put(root);

    o = tc_ok(&T, &root, "search", "{" S ",\"path\":\".\",\"content\":\"needle_42\"}");
    m = matches_of(o);
    cr_expect_eq(json_object_array_length(m), 3, "%s", json_object_to_json_string(o));
    cr_expect(has_match(m, "src/main.c", 3));
    cr_expect(has_match(m, "src/lib/util.c", 1));
    cr_expect(has_match(m, "docs/a.txt", 2)); /* a last line without a newline */
    cr_expect(!has_match(m, "src/blob.bin", -1), "a binary file was searched");
    json_object_put(root);

    /* both: content in files whose name matches; under a subdirectory */
    o = tc_ok(&T, &root, "search",
              "{" S ",\"path\":\"src\",\"name\":\"main.*\",\"content\":\"return\"}");
    m = matches_of(o);
    cr_expect_eq(json_object_array_length(m), 1);
    json_object *first = json_object_array_get_idx(m, 0);
    cr_expect_str_eq(tc_str(first, "path"), "src/main.c");
    cr_expect_str_eq(tc_str(first, "text"), "  return needle_42;");
    json_object_put(root);
    /* a file as path */
    o = tc_ok(&T, &root, "search", "{" S ",\"path\":\"docs/a.txt\",\"content\":\"match\"}");
    cr_expect_eq(json_object_array_length(matches_of(o)), 1);
    json_object_put(root);

    char *e = tc_err(&T, "search", "{" S ",\"path\":\".\"}");
    cr_expect(strstr(e, "name") && strstr(e, "content"), "%s", e);
    free(e);
    e = tc_err(&T, "search", "{" S ",\"path\":\".\",\"content\":\"a\\nb\"}");
    free(e);
    e = tc_err(&T, "search", "{" S ",\"path\":\"../\",\"name\":\"*\"}");
    cr_expect(strstr(e, ".."), "%s", e);
    free(e);
    e = tc_err(&T, "search", "{" S ",\"path\":\"nowhere\",\"name\":\"*\"}");
    cr_expect(strstr(e, "nowhere"), "%s", e);
    free(e);
}

Test(mcp_search, matches_across_read_chunks)
{
    /* needles at and around power-of-two offsets, where streams split */
    cr_assert_eq(tc_sh(&T, "i=0; : > long.txt; while [ $i -lt 9 ]; do "
                           "head -c 32765 /dev/zero | tr '\\000' x >> long.txt; "
                           "printf 'NEEDLE\\n' >> long.txt; i=$((i+1)); done",
                       NULL),
                 0);
    json_object *root;
    json_object *o =
        tc_ok(&T, &root, "search", "{" S ",\"path\":\".\",\"content\":\"NEEDLE\"}");
    json_object *m = matches_of(o);
    cr_expect_eq(json_object_array_length(m), 9, "%s", json_object_to_json_string(o));
    for (long line = 1; line <= 9; line++)
        cr_expect(has_match(m, "long.txt", line), "line %ld", line);
    json_object_put(root);
}

Test(mcp_search, ten_thousand_files_stop_at_max_results)
{
    long long t00 = cli_now_ms();
    cr_assert_eq(tc_sh(&T, "mkdir many && cd many && i=1; while [ $i -le 10000 ]; do : > f$i; "
                           "i=$((i+1)); done",
                       NULL),
                 0);
    long long t0 = cli_now_ms();
    if (getenv("TC_VERBOSE"))
        fprintf(stderr, "10000 files made in %lld ms\n", t0 - t00);
    json_object *root;
    json_object *o = tc_ok(&T, &root, "search",
                           "{" S ",\"path\":\"many\",\"name\":\"f*\",\"max_results\":50}");
    long long ms = cli_now_ms() - t0;
    cr_expect_eq(json_object_array_length(matches_of(o)), 50);
    cr_expect(tc_bool(o, "truncated"));
    cr_expect_lt(tc_int(o, "entries_visited"), 10000);
    cr_expect_lt(ms, 10000, "%lld ms", ms);
    json_object_put(root);
    /* max_results is held to 1000 */
    o = tc_ok(&T, &root, "search",
              "{" S ",\"path\":\".\",\"name\":\"f*\",\"max_results\":100000}");
    cr_expect_eq(json_object_array_length(matches_of(o)), 1000);
    cr_expect(tc_bool(o, "truncated"));
    if (getenv("TC_VERBOSE"))
        fprintf(stderr, "searches in %lld + %lld ms\n", ms, cli_now_ms() - t0 - ms);
    json_object_put(root);
}

Test(mcp_search, huge_file_is_scanned_in_bounded_memory)
{
    cr_assert_eq(tc_sh(&T, "yes abcdefghijklmnopqrstuvwxyz | head -c 104857600 > big.txt",
                       NULL),
                 0);
    long long t0 = cli_now_ms();
    json_object *root;
    json_object *o =
        tc_ok(&T, &root, "search", "{" S ",\"path\":\".\",\"content\":\"not-in-there\"}");
    long long ms = cli_now_ms() - t0;
    cr_expect_eq(json_object_array_length(matches_of(o)), 0);
    cr_expect(tc_bool(o, "truncated"), "the per-file bound was not reported");
    cr_expect_leq(tc_int(o, "bytes_scanned"), 8 << 20);
    json_object_put(root);
    long hwm = tc_server_hwm_kib(&T);
    if (getenv("TC_VERBOSE"))
        fprintf(stderr, "%s: %lld ms, server peak RSS %ld KiB\n", "search 100 MiB", ms, hwm);
    cr_expect_lt(hwm, 96 * 1024, "the server's peak RSS is %ld KiB", hwm);
    cr_expect_lt(ms, 20000, "%lld ms", ms);
}

Test(mcp_search, symlinks_are_never_followed)
{
    char script[PATH_MAX * 3];
    if (T.docker) {
        snprintf(script, sizeof script, "mkdir w && ln -s /etc w/etc && ln -s /etc/passwd pw");
    } else {
        char p[PATH_MAX + 200];
        snprintf(p, sizeof p, "%s/outside-secret.txt", T.env.dir);
        FILE *f = fopen(p, "w");
        fputs("root:SECRET-MARK\n", f);
        fclose(f);
        snprintf(script, sizeof script, "mkdir w && ln -s %s w/etc && ln -s %s pw", T.env.dir,
                 p);
    }
    cr_assert_eq(tc_sh(&T, script, NULL), 0);
    json_object *root;
    json_object *o = tc_ok(&T, &root, "search", "{" S ",\"path\":\".\",\"content\":\"root:\"}");
    cr_expect_eq(json_object_array_length(matches_of(o)), 0, "%s",
                 json_object_to_json_string(o));
    json_object_put(root);
    o = tc_ok(&T, &root, "search", "{" S ",\"path\":\".\",\"name\":\"*passwd*\"}");
    cr_expect_eq(json_object_array_length(matches_of(o)), 0);
    json_object_put(root);
    o = tc_ok(&T, &root, "search", "{" S ",\"path\":\".\",\"name\":\"*secret*\"}");
    cr_expect_eq(json_object_array_length(matches_of(o)), 0);
    json_object_put(root);
    /* the links themselves match by name, as themselves */
    o = tc_ok(&T, &root, "search", "{" S ",\"path\":\".\",\"name\":\"etc\"}");
    json_object *m = matches_of(o);
    cr_expect_eq(json_object_array_length(m), 1);
    cr_expect_str_eq(tc_str(json_object_array_get_idx(m, 0), "type"), "symlink");
    json_object_put(root);
    char *e = tc_err(&T, "search", "{" S ",\"path\":\"w/etc\",\"name\":\"*\"}");
    free(e);
    /* a FIFO is not read (the search would hang on it) */
    cr_assert_eq(tc_sh(&T, "mkfifo w/fifo", NULL), 0);
    o = tc_ok(&T, &root, "search", "{" S ",\"path\":\"w\",\"content\":\"x\"}");
    json_object_put(root);
}

Test(mcp_search, git_clone_refuses_hostile_urls_branches_and_paths)
{
    static const char *const urls[] = {
        "file:///etc",
        "FILE:///etc",
        "/tmp/repo",
        "./repo",
        "ext::sh -c touch% /tmp/sbx-pwned",
        "ext::sh",
        "fd::3",
        "-u/tmp/x",
        "--upload-pack=touch /tmp/sbx-pwned",
        "ssh://-oProxyCommand=touch%20/tmp/sbx-pwned/x",
        "https://",
        "http://host/a b",
        "host:path",
        "-oProxyCommand=x@host:repo",
        NULL,
    };
    for (size_t i = 0; urls[i]; i++) {
        char *e = tc_err(&T, "git_clone", "{" S ",\"url\":\"%s\",\"path\":\"r\"}", urls[i]);
        cr_expect(strstr(e, "https://") != NULL, "%s: %s", urls[i], e);
        free(e);
    }
    static const char *const branches[] = {"--upload-pack=x", "-b", "a..b", "a b", "/x",
                                           "x.lock", NULL};
    for (size_t i = 0; branches[i]; i++) {
        char *e = tc_err(&T, "git_clone",
                         "{" S ",\"url\":\"https://example.invalid/r.git\",\"path\":\"r\","
                         "\"branch\":\"%s\"}",
                         branches[i]);
        cr_expect(strstr(e, "branch"), "%s: %s", branches[i], e);
        free(e);
    }
    char *e = tc_err(&T, "git_clone",
                     "{" S ",\"url\":\"https://example.invalid/r.git\",\"path\":\"../r\"}");
    free(e);
    e = tc_err(&T, "git_clone",
               "{" S ",\"url\":\"https://example.invalid/r.git\",\"path\":\"-r\"}");
    free(e);
    e = tc_refused(&T, "git_clone",
                   "{" S ",\"url\":\"https://example.invalid/r.git\",\"path\":\"r\","
                   "\"depth\":-1}");
    free(e);
    cr_expect_neq(access("/tmp/sbx-pwned", F_OK), 0);
}

/* A git daemon serving dir on a free port of 127.0.0.1. */
static pid_t start_daemon(const char *dir, int *port)
{
    for (int attempt = 0; attempt < 20; attempt++) {
        *port = 20000 + (int)((getpid() * 7 + attempt * 131) % 20000);
        char portarg[32], base[PATH_MAX + 64];
        snprintf(portarg, sizeof portarg, "--port=%d", *port);
        snprintf(base, sizeof base, "--base-path=%s", dir);
        const char *argv[] = {"git", "daemon", "--reuseaddr", "--export-all",
                              "--listen=127.0.0.1", portarg, base, dir, NULL};
        pid_t pid;
        extern char **environ;
        cr_assert_eq(posix_spawnp(&pid, "git", NULL, NULL, (char *const *)argv, environ), 0);
        usleep(300 * 1000);
        int st;
        if (waitpid(pid, &st, WNOHANG) == 0)
            return pid; /* listening */
    }
    cr_assert_fail("git daemon would not start");
    return -1;
}

Test(mcp_search, git_clone_of_a_served_repository)
{
    if (T.docker) {
        /* the busybox image has no git: a clear error, nothing made */
        char *e = tc_err(&T, "git_clone",
                         "{" S ",\"url\":\"git://127.0.0.1:1/r.git\",\"path\":\"r\"}");
        cr_expect(strstr(e, "git is not installed"), "%s", e);
        free(e);
        json_object *root;
        json_object *o = tc_ok(&T, &root, "stat", "{" S ",\"path\":\"r\"}");
        cr_expect(!tc_bool(o, "exists"));
        json_object_put(root);
        return;
    }
    char dir[PATH_MAX + 16], script[PATH_MAX * 5];
    snprintf(dir, sizeof dir, "%s/served", T.env.dir);
    snprintf(script, sizeof script,
             "set -e; export HOME=%s GIT_CONFIG_NOSYSTEM=1; mkdir -p %s; cd %s; "
             "git init -q -b main work; cd work; echo hello > README; "
             "git add README; git -c user.name=t -c user.email=t@t commit -q -m one; "
             "git checkout -q -b topic; echo topic > T; git add T; "
             "git -c user.name=t -c user.email=t@t commit -q -m two; git checkout -q main; "
             "cd ..; git clone -q --bare work r.git",
             T.env.home, dir, dir);
    cr_assert_eq(system(script), 0);
    char head[64] = "";
    snprintf(script, sizeof script, "git -C %s/r.git rev-parse main", dir);
    FILE *f = popen(script, "r");
    cr_assert(f && fgets(head, sizeof head, f));
    pclose(f);
    head[strcspn(head, "\n")] = '\0';
    int port;
    pid_t d = start_daemon(dir, &port);

    json_object *root;
    json_object *o = tc_ok(&T, &root, "mkdir", "{" S ",\"path\":\"src\"}");
    json_object_put(root);
    o = tc_ok(&T, &root, "git_clone",
              "{" S ",\"url\":\"git://127.0.0.1:%d/r.git\",\"path\":\"src/repo\"}", port);
    cr_expect_str_eq(tc_str(o, "commit"), head);
    cr_expect_str_eq(tc_str(o, "path"), "src/repo");
    json_object_put(root);
    o = tc_ok(&T, &root, "read_file", "{" S ",\"path\":\"src/repo/README\"}");
    cr_expect_str_eq(tc_str(o, "content"), "hello\n");
    json_object_put(root);
    /* a branch, shallow */
    o = tc_ok(&T, &root, "git_clone",
              "{" S ",\"url\":\"git://127.0.0.1:%d/r.git\",\"path\":\"t\",\"branch\":\"topic\","
              "\"depth\":1}",
              port);
    cr_expect_neq(strcmp(tc_str(o, "commit"), head), 0);
    json_object_put(root);
    o = tc_ok(&T, &root, "stat", "{" S ",\"path\":\"t/T\"}");
    cr_expect(tc_bool(o, "exists"));
    json_object_put(root);
    /* into an existing path: refused; a repository that is not there */
    char *e = tc_err(&T, "git_clone",
                     "{" S ",\"url\":\"git://127.0.0.1:%d/r.git\",\"path\":\"t\"}", port);
    cr_expect(strstr(e, "exists"), "%s", e);
    free(e);
    e = tc_err(&T, "git_clone", "{" S ",\"url\":\"git://127.0.0.1:%d/none.git\",\"path\":\"n\"}",
               port);
    cr_expect(strstr(e, "git clone failed"), "%s", e);
    free(e);
    /* into a parent that is a symlink leading out: refused before git runs */
    snprintf(script, sizeof script, "ln -s %s outlink", T.env.dir);
    cr_assert_eq(tc_sh(&T, script, NULL), 0);
    e = tc_err(&T, "git_clone",
               "{" S ",\"url\":\"git://127.0.0.1:%d/r.git\",\"path\":\"outlink/r2\"}", port);
    free(e);
    char p[PATH_MAX + 16];
    snprintf(p, sizeof p, "%s/r2", T.env.dir);
    cr_expect_neq(access(p, F_OK), 0, "git cloned through the link");
    kill(d, SIGTERM);
    waitpid(d, NULL, 0);
}
