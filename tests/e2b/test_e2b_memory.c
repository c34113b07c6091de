/*
 * test_e2b_memory.c - memory stores on the e2b provider against the fake
 * (fake_e2b.py), through the session manager: a hostile tree (a name with
 * a newline that reads as two other paths, symlinks out of the tree, names
 * with spaces, dashes, backslashes and sha256sum's separator) is listed exactly, never
 * followed, refused by name and commits nothing until cleaned; a change
 * the sandbox's root makes to a read-only attachment is refused and the
 * mount restored; the baseline lives in state_dir, out of the sandbox.
 */
#include "fake_service.h"

#include <sbx/memory.h>
#include <sbx/sbx.h>
#include <sbx/session.h>

#include <criterion/criterion.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define KEY "e2b_test_key_0123"
#define SLUG "hostile"

static struct fake_service fake;
static char dir[128];
static sbx_ctx *ctx;
static sbx_sessions *m;

static void up(void)
{
    cr_assert_eq(fake_start(&fake, "e2b", KEY), 0, "cannot start the fake");
    setenv("E2B_API_KEY", KEY, 1);
    snprintf(dir, sizeof dir, "/tmp/sbx-e2b-memory-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    char path[256], state[200];
    snprintf(path, sizeof path, "%s/sbx.yaml", dir);
    snprintf(state, sizeof state, "%s/state", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fprintf(f, "providers:\n  e2b:\n    api_url: \"%s\"\n    envd_url: \"%s\"\n"
               "    domain: e2b.local\n    retries: 2\n    state_dir: \"%s\"\n",
            fake.url, fake.url, state);
    fclose(f);
    struct sbx_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.config_path = path;
    o.plugin_path = SBX_TEST_PROVIDER_DIR;
    o.ignore_environment = true;
    sbx_error err;
    cr_assert_eq(sbx_open(&o, &ctx, &err), SBX_OK, "%s", err.message);
    struct sbx_sessions_options so;
    memset(&so, 0, sizeof so);
    so.size = sizeof so;
    so.store_driver = "sqlite";
    char db[256];
    snprintf(db, sizeof db, "%s/sessions.db", dir);
    so.store_target = db;
    so.ignore_environment = true;
    cr_assert_eq(sbx_sessions_open(ctx, &so, &m, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(sbx_memory_create(m, SLUG, NULL, &err), SBX_OK, "%s", err.message);
}

static void down(void)
{
    if (m)
        sbx_sessions_close(m);
    m = NULL;
    if (ctx)
        sbx_close(ctx);
    ctx = NULL;
    fake_stop(&fake);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (dir[0] && system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", dir);
}

TestSuite(e2b_memory, .init = up, .fini = down, .timeout = 120);

static void put(const char *path, const char *text)
{
    struct sbx_memory_source ms = {text, strlen(text), 0};
    struct sbx_source src = sbx_memory_source(&ms);
    sbx_error err;
    cr_assert_eq(sbx_memory_put(m, SLUG, path, &src, SBX_MEMORY_ANY_VERSION, NULL, &err),
                 SBX_OK, "%s", err.message);
}

/* The store's head of path, malloc'd, or NULL when it has none. */
static char *head(const char *path)
{
    sbx_capture c;
    sbx_capture_init(&c, 4096, 0);
    struct sbx_sink sink = sbx_capture_sink(&c);
    sbx_error err;
    char *text = sbx_memory_cat(m, SLUG, path, 0, &sink, &err) == SBX_OK
                     ? sbx_capture_text(&c)
                     : NULL;
    sbx_capture_free(&c);
    return text;
}

static int add_path(void *ud, const struct sbx_memory_file *f)
{
    char *buf = ud;
    size_t n = strlen(buf);
    snprintf(buf + n, 4096 - n, "%s|", f->path);
    return 0;
}

/* Every path of the store's head, each followed by '|'. */
static void paths(char buf[4096])
{
    buf[0] = '\0';
    sbx_error err;
    cr_assert_eq(sbx_memory_ls(m, SLUG, 0, add_path, buf, &err), SBX_OK, "%s", err.message);
}

static sbx_handle *session(const char *key, int access)
{
    struct sbx_memory_attachment a = {sizeof a, (uint32_t)access, SLUG};
    struct sbx_session_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.size = sizeof spec;
    spec.provider = "e2b";
    spec.memory = &a;
    spec.nmemory = 1;
    sbx_handle *h = NULL;
    sbx_error err;
    cr_assert_eq(sbx_session_acquire(m, key, &spec, NULL, &h, NULL, &err), SBX_OK, "%s",
                 err.message);
    return h;
}

/* Run a script in the mount: sbx_exec's status; stdout in *out. */
static int in_mount(sbx_handle *h, const char *script, char **out, sbx_error *err)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cd /mnt/memory/" SLUG " && %s", script);
    const char *argv[] = {"sh", "-c", cmd, NULL};
    sbx_capture c;
    sbx_capture_init(&c, 65536, 0);
    struct sbx_sink so = sbx_capture_sink(&c);
    struct sbx_exec_args a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.argv = argv;
    a.out = &so;
    a.timeout_ms = 30000;
    struct sbx_exec_result r;
    memset(&r, 0, sizeof r);
    r.size = sizeof r;
    int rc = sbx_exec(h, &a, &r, NULL, err);
    if (rc == SBX_OK && r.exit_code != 0)
        rc = -r.exit_code;
    *out = sbx_capture_text(&c);
    sbx_capture_free(&c);
    return rc;
}

static void end(sbx_handle *h, const char *key)
{
    sbx_release(h);
    sbx_error err;
    cr_expect_eq(sbx_session_delete(m, key, NULL, &err), SBX_OK, "%s", err.message);
}

Test(e2b_memory, hostile_names_and_symlinks_are_refused_by_name_and_never_followed)
{
    put("a.md", "alpha\n");
    put("b.md", "beta\n");
    sbx_handle *h = session("mem-hostile", SBX_MEMORY_READ_WRITE);
    char *out = NULL;
    sbx_error err;
    /* A name that reads as "a.md" and "b.md" to a newline-separated
     * listing, symlinks to a file and to a directory outside the tree, and
     * names that are only odd (committed as they are). */
    int rc = in_mount(h,
                      "printf evil > \"$(printf 'a.md\\nb.md')\" && ln -s /etc/passwd pw && "
                      "ln -s / up && echo dash > ./-n.md && echo sp > 'a b *.md' && "
                      "echo bs > 'q\\nr.md' && "
                      "echo ok > ok.md",
                      &out, &err);
    free(out);
    cr_expect_eq(rc, SBX_E_INVALID, "a hostile tree: %d %s", rc, err.message);
    cr_expect(strstr(err.message, "\"pw\" is a symbolic link") ||
                  strstr(err.message, "\"up\" is a symbolic link"),
              "the refusal names a symlink: %s", err.message);
    char list[4096];
    paths(list);
    cr_expect_str_eq(list, "a.md|b.md|", "nothing of the refused writeback was committed");
    char *a = head("a.md");
    cr_expect_str_eq(a ? a : "", "alpha\n");
    free(a);

    /* the symlinks gone, the name with a newline is refused by name */
    rc = in_mount(h, "rm pw up", &out, &err);
    free(out);
    cr_expect_eq(rc, SBX_E_INVALID, "a name with a newline: %d %s", rc, err.message);
    cr_expect(strstr(err.message, "control character") &&
                  strstr(err.message, "nothing was committed"),
              "the refusal says why: %s", err.message);
    paths(list);
    cr_expect_str_eq(list, "a.md|b.md|", "still nothing committed");

    /* cleaned: the odd names are committed as they are, a.md and b.md
     * untouched (the newline name never read as them) */
    rc = in_mount(h, "rm \"$(printf 'a.md\\nb.md')\"", &out, &err);
    free(out);
    cr_expect_eq(rc, SBX_OK, "%s", err.message);
    paths(list);
    cr_expect_str_eq(list, "-n.md|a b *.md|a.md|b.md|ok.md|q\\nr.md|", "committed: %s", list);
    char *t = head("a b *.md"), *d = head("-n.md"), *b = head("b.md"), *q = head("q\\nr.md");
    cr_expect_str_eq(t ? t : "", "sp\n");
    cr_expect_str_eq(q ? q : "", "bs\n");
    free(q);
    cr_expect_str_eq(d ? d : "", "dash\n");
    cr_expect_str_eq(b ? b : "", "beta\n");
    free(t);
    free(d);
    free(b);
    end(h, "mem-hostile");
}

/* UTF-8 names beyond ASCII go into the sandbox's tree and come back byte
 * for byte (the re-encoded load and the diff write names as bytes). */
Test(e2b_memory, non_ascii_names_round_trip)
{
    put("caf\xc3\xa9.md", "cafe\n");
    sbx_handle *h = session("mem-utf8", SBX_MEMORY_READ_WRITE);
    char *out = NULL;
    sbx_error err;
    int rc = in_mount(h,
                      "cat caf\xc3\xa9.md && mkdir -p \xe6\x97\xa5 && "
                      "echo nihon > \xe6\x97\xa5/\xc3\xa9t\xc3\xa9.md && "
                      "echo cafe2 > caf\xc3\xa9.md",
                      &out, &err);
    cr_expect_eq(rc, SBX_OK, "%d %s", rc, err.message);
    cr_expect_str_eq(out ? out : "", "cafe\n", "the head was loaded under its name");
    free(out);
    char list[4096];
    paths(list);
    cr_expect_str_eq(list, "caf\xc3\xa9.md|\xe6\x97\xa5/\xc3\xa9t\xc3\xa9.md|", "committed: %s",
                     list);
    char *c = head("caf\xc3\xa9.md"), *n = head("\xe6\x97\xa5/\xc3\xa9t\xc3\xa9.md");
    cr_expect_str_eq(c ? c : "", "cafe2\n");
    cr_expect_str_eq(n ? n : "", "nihon\n");
    free(c);
    free(n);
    end(h, "mem-utf8");
}

/* The fake's host directory of the one sandbox it runs: what the
 * sandbox's root can write. */
static void sandbox_dir(char *buf, size_t cap)
{
    DIR *dd = opendir(fake.dir);
    cr_assert_not_null(dd);
    struct dirent *de;
    buf[0] = '\0';
    while ((de = readdir(dd)))
        if (!strncmp(de->d_name, "sbx-fake-", 9)) {
            int n = snprintf(buf, cap, "%s/%s", fake.dir, de->d_name);
            cr_assert(n > 0 && (size_t)n < cap, "sandbox directory path too long");
        }
    closedir(dd);
    cr_assert(buf[0], "no sandbox directory in %s", fake.dir);
}

Test(e2b_memory, read_only_changed_by_the_sandbox_root_is_refused_and_restored)
{
    put("a.md", "alpha\n");
    sbx_handle *h = session("mem-ro", SBX_MEMORY_READ_ONLY);
    char *out = NULL;
    sbx_error err;
    /* the sandbox user cannot write a read-only tree */
    int rc = in_mount(h, "(echo x > a.md) 2>/dev/null && echo WROTE; cat a.md", &out, &err);
    cr_expect_eq(rc, SBX_OK, "%s", err.message);
    cr_expect_str_eq(out ? out : "", "alpha\n");
    free(out);
    /* its root can: write straight into the sandbox's file system */
    char sd[256], p[400];
    sandbox_dir(sd, sizeof sd);
    snprintf(p, sizeof p, "%s/mnt/memory/" SLUG "/a.md", sd);
    FILE *f = fopen(p, "w");
    cr_assert_not_null(f, "%s", p);
    fputs("tampered\n", f);
    fclose(f);
    rc = in_mount(h, "cat a.md", &out, &err);
    free(out);
    cr_expect_eq(rc, SBX_E_DENIED, "a change in a read-only mount: %d %s", rc, err.message);
    cr_expect(strstr(err.message, "read-only") && strstr(err.message, "a.md"), "%s",
              err.message);
    char *a = head("a.md");
    cr_expect_str_eq(a ? a : "", "alpha\n", "the store is untouched");
    free(a);
    /* restored before the next command */
    rc = in_mount(h, "cat a.md", &out, &err);
    cr_expect_eq(rc, SBX_OK, "%s", err.message);
    cr_expect_str_eq(out ? out : "", "alpha\n", "the mount is restored");
    free(out);
    /* the baseline is on the host, not in the sandbox */
    snprintf(p, sizeof p, "%s/state", dir);
    DIR *dd = opendir(p);
    cr_assert_not_null(dd, "no state in %s", p);
    closedir(dd);
    end(h, "mem-ro");
}
