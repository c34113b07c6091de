/*
 * test_search_path.c - resolving names over a colon-separated search path
 * (first directory wins) and listing installed plugins.
 */
#include "registry/loader.h"
#include "loader_assert.h"

#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define FIXTURES SBX_TEST_FIXTURE_DIR
#define ALT SBX_TEST_FIXTURE_ALT_DIR

static char tmp_root[64];

/* A fresh scratch directory for the test (removed by cleanup). */
static void make_tmp(void)
{
    snprintf(tmp_root, sizeof tmp_root, "/tmp/sbx-loader-test-XXXXXX");
    cr_assert_not_null(mkdtemp(tmp_root));
}

static int remove_entry(const char *path, const struct stat *st, int flag,
                        struct FTW *ftw)
{
    return remove(path);
}

static void remove_tmp(void)
{
    if (tmp_root[0])
        nftw(tmp_root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void touch(const char *rel)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", tmp_root, rel);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    cr_assert(fd >= 0, "cannot create %s", path);
    close(fd);
}

static void mkdir_tmp(const char *rel)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", tmp_root, rel);
    cr_assert_eq(mkdir(path, 0755), 0, "cannot create %s", path);
}

static void symlink_tmp(const char *target, const char *rel)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", tmp_root, rel);
    cr_assert_eq(symlink(target, path), 0, "cannot create %s", path);
}

/* Load good over `path`; check which copy was chosen. */
static void expect_good_from(const char *search_path, const char *dir,
                             const char *version)
{
    struct sbx_plugin p = {0};
    sbx_error err;
    int rc = sbxh_plugin_load(search_path, "good", &p, &err);
    assert_status(rc, &err, SBX_OK);
    char want[4096];
    snprintf(want, sizeof want, "%s/good.so", dir);
    cr_assert_str_eq(p.path, want);
    cr_assert_str_eq(p.desc->version, version);
    sbxh_plugin_clear(&p);
}

Test(search_path, first_directory_wins)
{
    expect_good_from(ALT ":" FIXTURES, ALT, "2.0.0-alt");
    expect_good_from(FIXTURES ":" ALT, FIXTURES, "1.0.0");
}

Test(search_path, skips_empty_components_and_missing_directories)
{
    expect_good_from("::/nonexistent/sbx-dir:" FIXTURES "/:", FIXTURES, "1.0.0");
    expect_good_from(ALT "//", ALT, "2.0.0-alt");
}

Test(search_path, empty_component_is_not_the_current_directory, .init = make_tmp,
     .fini = remove_tmp)
{
    /* A stray ':' must not make the loader look in the working directory. */
    cr_assert_eq(chdir(FIXTURES), 0);
    struct sbx_plugin p = {0};
    sbx_error err;
    int rc = sbxh_plugin_load(":", "good", &p, &err);
    assert_status(rc, &err, SBX_E_NOT_FOUND);
    rc = sbxh_plugin_load(tmp_root, "good", &p, &err);
    assert_status(rc, &err, SBX_E_NOT_FOUND);
}

Test(search_path, unusable_entry_in_first_directory_is_not_skipped, .init = make_tmp,
     .fini = remove_tmp)
{
    /* Falling through to the next directory would silently load a different
     * plugin than the one the operator installed first. */
    mkdir_tmp("good.so");
    char path[4096];
    snprintf(path, sizeof path, "%s:%s", tmp_root, FIXTURES);
    struct sbx_plugin p = {0};
    sbx_error err;
    int rc = sbxh_plugin_load(path, "good", &p, &err);
    assert_status(rc, &err, SBX_E_ABI);
    char want[256];
    snprintf(want, sizeof want, "provider \"good\" (%s/good.so): not a regular file",
             tmp_root);
    assert_msg_has(&err, want);
}

Test(search_path, symlink_to_a_plugin_is_followed, .init = make_tmp,
     .fini = remove_tmp)
{
    symlink_tmp(FIXTURES "/good.so", "good.so");
    struct sbx_plugin p = {0};
    sbx_error err;
    int rc = sbxh_plugin_load(tmp_root, "good", &p, &err);
    assert_status(rc, &err, SBX_OK);
    cr_assert_str_eq(p.desc->name, "good");
    sbxh_plugin_clear(&p);
}

/* Compare a NULL-terminated list with the expected names. */
static void expect_names(char **names, const char *const *want, size_t n)
{
    cr_assert_not_null(names);
    size_t i = 0;
    for (; names[i]; i++) {
        cr_assert_lt(i, n, "unexpected extra name %s", names[i]);
        cr_assert_str_eq(names[i], want[i], "name %zu", i);
    }
    cr_assert_eq(i, n, "got %zu names, want %zu", i, n);
}

Test(plugin_names, sorted_unique_regular_so_files_with_valid_names,
     .init = make_tmp, .fini = remove_tmp)
{
    mkdir_tmp("one");
    mkdir_tmp("two");
    touch("one/b.so");
    touch("one/a.so");
    touch("one/Upper.so");   /* not a valid provider name */
    touch("one/notes.txt");  /* not .so */
    touch("one/libz.so.1");  /* not .so */
    touch("one/.so");        /* empty name */
    mkdir_tmp("one/sub.so"); /* not a regular file */
    symlink_tmp("a.so", "one/link.so");         /* link to a file: listed */
    symlink_tmp("no-such.so", "one/dangling.so"); /* link to nothing: not */
    touch("two/a.so");                          /* duplicate */
    touch("two/c.so");

    char path[4096];
    snprintf(path, sizeof path, "%s/one:/nonexistent/sbx-dir::%s/two/", tmp_root,
             tmp_root);
    char **names = sbxh_plugin_names(path);
    const char *want[] = {"a", "b", "c", "link"};
    expect_names(names, want, 4);
    sbxh_plugin_names_free(names);
}

Test(plugin_names, empty_or_missing_path_gives_empty_list)
{
    char **names = sbxh_plugin_names(NULL);
    expect_names(names, NULL, 0);
    sbxh_plugin_names_free(names);
    names = sbxh_plugin_names("");
    expect_names(names, NULL, 0);
    sbxh_plugin_names_free(names);
    names = sbxh_plugin_names("/nonexistent/sbx-dir");
    expect_names(names, NULL, 0);
    sbxh_plugin_names_free(names);
    sbxh_plugin_names_free(NULL);
}

Test(plugin_names, fixture_directory)
{
    char **names = sbxh_plugin_names(ALT ":" FIXTURES);
    const char *want[] = {"allcaps", "capnoops", "ctor", "garbage", "good", "initfail",
                          "linkshost", "major", "minor", "mismatch", "nosym",
                          "nullcore", "nulldesc", "overlap", "slowinit",
                          "smalldesc", "smallops", "unknowncap"};
    expect_names(names, want, sizeof want / sizeof want[0]);
    sbxh_plugin_names_free(names);
}
