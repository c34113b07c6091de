/*
 * test_mkdirs.c - sbxs_mkdirs: mkdir -p of an absolute path.
 */
#include "mkdirs.h"

#include <criterion/criterion.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char base[64];

static void setup(void)
{
    snprintf(base, sizeof base, "/tmp/sbx-mkdirs-XXXXXX");
    cr_assert_not_null(mkdtemp(base));
}

static void teardown(void)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "chmod -R u+w '%s'; rm -rf '%s'", base, base);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(mkdirs, .init = setup, .fini = teardown);

Test(mkdirs, creates_every_missing_component_with_the_mode)
{
    char path[256], deep[256];
    snprintf(path, sizeof path, "%s/a//b/c/", base);
    snprintf(deep, sizeof deep, "%s/a/b/c", base);
    mode_t old = umask(0);
    int rc = sbxs_mkdirs(path, 0750, NULL, 0);
    umask(old);
    cr_assert_eq(rc, 0, "%s", strerror(errno));
    struct stat st;
    cr_assert_eq(stat(deep, &st), 0);
    cr_assert(S_ISDIR(st.st_mode));
    cr_assert_eq(st.st_mode & 07777, 0750);
    /* Again: existing directories are fine and keep their mode. */
    cr_assert_eq(chmod(deep, 0700), 0);
    cr_assert_eq(sbxs_mkdirs(deep, 0755, NULL, 0), 0);
    cr_assert_eq(stat(deep, &st), 0);
    cr_assert_eq(st.st_mode & 07777, 0700);
}

Test(mkdirs, names_the_component_that_failed)
{
    char file[256], path[256], failed[256] = "";
    snprintf(file, sizeof file, "%s/file", base);
    FILE *f = fopen(file, "w");
    cr_assert_not_null(f);
    fclose(f);
    snprintf(path, sizeof path, "%s/file/sub/dir", base);
    cr_assert_eq(sbxs_mkdirs(path, 0755, failed, sizeof failed), -1);
    cr_assert_eq(errno, ENOTDIR);
    char want[256];
    snprintf(want, sizeof want, "%s/file/sub", base);
    cr_assert_str_eq(failed, want);
}

Test(mkdirs, refuses_relative_and_overlong_paths)
{
    cr_assert_eq(sbxs_mkdirs("relative/dir", 0755, NULL, 0), -1);
    cr_assert_eq(errno, EINVAL);
    char *longp = malloc(5000);
    longp[0] = '/';
    memset(longp + 1, 'x', 4998);
    longp[4999] = '\0';
    cr_assert_eq(sbxs_mkdirs(longp, 0755, NULL, 0), -1);
    cr_assert_eq(errno, ENAMETOOLONG);
    free(longp);
    cr_assert_eq(sbxs_mkdirs("/", 0755, NULL, 0), 0);
}
