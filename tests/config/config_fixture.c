/* config_fixture.c - temporary configuration directories for the tests. */
#include "config_fixture.h"

#include <criterion/criterion.h>

#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[1024];

void cfg_dir_setup(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/sbx-config-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    cr_assert_not_null(mkdtemp(dir), "mkdtemp failed");
}

static int remove_one(const char *path, const struct stat *st, int flag,
                      struct FTW *ftw)
{
    return remove(path);
}

void cfg_dir_teardown(void)
{
    if (dir[0])
        nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
    dir[0] = '\0';
}

const char *cfg_dir(void)
{
    return dir;
}

const char *cfg_path(const char *rel)
{
    static char buf[PATH_MAX];
    snprintf(buf, sizeof buf, "%s/%s", dir, rel);
    return buf;
}

void cfg_write(const char *rel, const char *text)
{
    if (strncmp(rel, "conf.d/", 7) == 0)
        mkdir(cfg_path("conf.d"), 0755);
    FILE *f = fopen(cfg_path(rel), "w");
    cr_assert_not_null(f, "cannot write %s", rel);
    fputs(text, f);
    cr_assert_eq(fclose(f), 0);
}

int cfg_load_sys(struct sbx_config **out, sbx_error *err)
{
    sbx_error_clear(err);
    return sbxh_config_open(NULL, dir, out, err);
}

int cfg_load_file(const char *rel, struct sbx_config **out, sbx_error *err)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    sbx_error_clear(err);
    return sbxh_config_open(path, cfg_path("no-such-sysconfdir"), out, err);
}

const char *cfg_expect_error(const char *text)
{
    static sbx_error err;
    static struct sbx_config sentinel;
    struct sbx_config *cfg = &sentinel; /* a failed load must reset it */
    cfg_write("sbx.yaml", text);
    int rc = cfg_load_sys(&cfg, &err);
    cr_assert_eq(rc, SBX_E_CONFIG, "status %d (%s) for:\n%s", rc, err.message,
                 text);
    cr_assert_eq(err.status, SBX_E_CONFIG);
    cr_assert_null(cfg, "*out must be NULL after a failed load");
    return err.message;
}
