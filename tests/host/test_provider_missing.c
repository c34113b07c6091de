/*
 * test_provider_missing.c - an enabled provider that is not installed: the
 * error names the file and line that enable it, the package that ships it,
 * and, for the drop-in a package ships (conf.d/NAME.yaml), that it stays
 * after the package is removed until the package is purged.
 */
#include "registry/provider_missing.h"

#include <criterion/criterion.h>
#include <sbx/sbx.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[] = "/tmp/sbx-missing-XXXXXX";
static char path[512], confd[512];

static void setup(void)
{
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/sbx.yaml", dir);
    snprintf(confd, sizeof confd, "%s/conf.d", dir);
    cr_assert_eq(mkdir(confd, 0700), 0);
    char empty[600];
    snprintf(empty, sizeof empty, "%s/empty", dir);
    cr_assert_eq(mkdir(empty, 0700), 0);
}

static void teardown(void)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
}

static void write_to(const char *file, const char *text)
{
    FILE *f = fopen(file, "w");
    cr_assert_not_null(f, "%s", file);
    fputs(text, f);
    cr_assert_eq(fclose(f), 0);
}

/* sbx_open with the configuration of `dir` and a plugin path holding
 * nothing; returns its status, the message in *err. */
static int open_empty(sbx_error *err)
{
    char plugins[600];
    snprintf(plugins, sizeof plugins, "%s/empty", dir);
    struct sbx_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.config_path = path;
    o.plugin_path = plugins;
    o.ignore_environment = true;
    sbx_ctx *ctx = NULL;
    int rc = sbx_open(&o, &ctx, err);
    sbx_close(ctx);
    return rc;
}

TestSuite(provider_missing, .init = setup, .fini = teardown);

Test(provider_missing, package_dropin_names_file_package_and_purge)
{
    write_to(path, "");
    char dropin[600];
    snprintf(dropin, sizeof dropin, "%s/docker.yaml", confd);
    write_to(dropin, "# shipped by the package\nproviders:\n  docker: {}\n");
    sbx_error err;
    cr_assert_eq(open_empty(&err), SBX_E_NOT_FOUND, "%s", err.message);
    char want[800];
    snprintf(want, sizeof want, "provider \"docker\" is enabled in %s:3 but not installed "
             "(package sbx-provider-docker): no docker.so in search path", dropin);
    cr_assert_not_null(strstr(err.message, want), "%s", err.message);
    cr_assert_not_null(strstr(err.message, "installed providers: none"), "%s", err.message);
    snprintf(want, sizeof want, "install sbx-provider-docker, or delete %s", dropin);
    cr_assert_not_null(strstr(err.message, want), "%s", err.message);
    cr_assert_not_null(strstr(err.message, "dpkg --purge sbx-provider-docker"), "%s",
                       err.message);
}

Test(provider_missing, section_elsewhere_says_remove_the_section)
{
    write_to(path, "providers:\n  e2b: {}\n");
    sbx_error err;
    cr_assert_eq(open_empty(&err), SBX_E_NOT_FOUND, "%s", err.message);
    cr_assert_not_null(strstr(err.message, "not installed (package sbx-provider-e2b)"), "%s",
                       err.message);
    char want[800];
    snprintf(want, sizeof want, "remove the providers.e2b section from %s", path);
    cr_assert_not_null(strstr(err.message, want), "%s", err.message);
    /* not a package's drop-in: no purge advice */
    cr_assert_null(strstr(err.message, "purge"), "%s", err.message);
}

Test(provider_missing, unknown_provider_has_no_package)
{
    write_to(path, "providers:\n  acme: {}\n");
    sbx_error err;
    cr_assert_eq(open_empty(&err), SBX_E_NOT_FOUND, "%s", err.message);
    cr_assert_not_null(strstr(err.message, "is enabled in"), "%s", err.message);
    cr_assert_not_null(strstr(err.message, "but not installed: no acme.so"), "%s",
                       err.message);
    cr_assert_null(strstr(err.message, "package"), "%s", err.message);
    cr_assert_not_null(strstr(err.message, "install acme.so into the plugin directory"),
                       "%s", err.message);
}

Test(provider_missing, package_names_come_from_the_build)
{
    cr_assert_str_eq(sbxh_provider_package("docker"), "sbx-provider-docker");
    cr_assert_str_eq(sbxh_provider_package("daytona"), "sbx-provider-daytona");
    cr_assert_str_eq(sbxh_provider_package("local"), "sbx");
    cr_assert_null(sbxh_provider_package("dock"));
    cr_assert_null(sbxh_provider_package("dockerx"));
    cr_assert_null(sbxh_provider_package("acme"));
}
