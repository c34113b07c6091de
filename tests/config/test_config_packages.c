/*
 * test_config_packages.c - `package_managers.<manager>`: the command lines
 * that install a spec's packages, replacing the built-in defaults per
 * vector; every malformed entry is refused with file:line and key.
 */
#include "config_fixture.h"
#include "config/package_managers.h"

#include <criterion/criterion.h>
#include <sbx/session.h>

#include <stdio.h>
#include <string.h>

TestSuite(config_packages, .init = cfg_dir_setup, .fini = cfg_dir_teardown);

/* "[a][b]..." of a NULL-terminated vector. */
static const char *joined(const char **v)
{
    static char buf[512];
    buf[0] = '\0';
    for (size_t i = 0; v[i]; i++) {
        size_t n = strlen(buf);
        snprintf(buf + n, sizeof buf - n, "[%s]", v[i]);
    }
    return buf;
}

Test(config_packages, defaults_without_configuration)
{
    struct sbx_package_cmds c;
    sbx_error err;
    cr_assert_eq(sbxh_package_cmds_get(NULL, SBX_PKG_APT, &c, &err), SBX_OK);
    cr_assert_str_eq(joined(c.check), "[apt-get][--version]");
    cr_assert_str_eq(joined(c.refresh), "[apt-get][update]");
    cr_assert_str_eq(joined(c.install), "[apt-get][install][-y][--no-install-recommends]");
    cr_assert_str_eq(joined(c.env), "[DEBIAN_FRONTEND=noninteractive]");
    sbxh_package_cmds_free(&c);
    cr_assert_eq(sbxh_package_cmds_get(NULL, SBX_PKG_PIP, &c, &err), SBX_OK);
    cr_assert_str_eq(joined(c.refresh), "");
    sbxh_package_cmds_free(&c);
    cr_assert_eq(sbxh_package_cmds_get(NULL, 99, &c, &err), SBX_E_INVALID);
}

Test(config_packages, configured_vectors_replace_defaults_one_by_one)
{
    cfg_write("sbx.yaml", "package_managers:\n"
                          "  apt:\n"
                          "    check: [apk, --version]\n"
                          "    refresh: []\n"
                          "    install: [apk, add, --no-cache]\n"
                          "  pip:\n"
                          "    install: [sudo, pip, install]\n"
                          "    env: [PIP_INDEX_URL=http://mirror/simple]\n");
    struct sbx_config *cfg = NULL;
    sbx_error err;
    cr_assert_eq(cfg_load_sys(&cfg, &err), SBX_OK, "%s", err.message);
    struct sbx_package_cmds c;
    cr_assert_eq(sbxh_package_cmds_get(cfg, SBX_PKG_APT, &c, &err), SBX_OK);
    cr_assert_str_eq(joined(c.check), "[apk][--version]");
    cr_assert_str_eq(joined(c.refresh), "");
    cr_assert_str_eq(joined(c.install), "[apk][add][--no-cache]");
    /* Not configured: the default stays. */
    cr_assert_str_eq(joined(c.env), "[DEBIAN_FRONTEND=noninteractive]");
    sbxh_package_cmds_free(&c);
    cr_assert_eq(sbxh_package_cmds_get(cfg, SBX_PKG_PIP, &c, &err), SBX_OK);
    cr_assert_str_eq(joined(c.check), "[pip][--version]");
    cr_assert_str_eq(joined(c.install), "[sudo][pip][install]");
    cr_assert_str_eq(joined(c.env), "[PIP_INDEX_URL=http://mirror/simple]");
    sbxh_package_cmds_free(&c);
    sbxh_config_free(cfg);
}

static void expect(const char *yaml, const char *tail)
{
    const char *msg = cfg_expect_error(yaml);
    char want[1024];
    snprintf(want, sizeof want, "%s/sbx.yaml:%s", cfg_dir(), tail);
    cr_assert_str_eq(msg, want);
}

Test(config_packages, malformed_entries_name_file_line_and_key)
{
    expect("package_managers:\n  apk:\n    install: [apk, add]\n",
           "2: package_managers.apk: unknown package manager (expected apt, "
           "cargo, gem, go, npm or pip)");
    expect("package_managers:\n  apt:\n    instal: [apt, add]\n",
           "3: package_managers.apt.instal: unknown key (expected check, "
           "refresh, install or env)");
    expect("package_managers:\n  apt:\n    install: apt-get install\n",
           "3: package_managers.apt.install: expected a list of strings");
    expect("package_managers:\n  apt:\n    install: {a: b}\n",
           "3: package_managers.apt.install: expected a list of strings");
    expect("package_managers:\n  apt:\n    install: []\n",
           "3: package_managers.apt.install: cannot be empty");
    expect("package_managers:\n  npm:\n    check: []\n",
           "3: package_managers.npm.check: cannot be empty");
    expect("package_managers:\n  apt:\n    install: [apt-get, '']\n",
           "3: package_managers.apt.install.1: an empty argument");
    expect("package_managers:\n  apt:\n    env: [NOEQUALS]\n",
           "3: package_managers.apt.env.0: expected NAME=VALUE");
    const char *msg = cfg_expect_error("package_managers:\n  apt:\n    install: [a]\n"
                                       "package_managers:\n  pip: {}\n");
    char want[1024];
    snprintf(want, sizeof want,
             "%s/sbx.yaml:4: package_managers: duplicate key (first set at line 1)",
             cfg_dir());
    cr_assert_str_eq(msg, want);
}

Test(config_packages, manifest_grants_are_absolute_directories)
{
    cfg_write("sbx.yaml", "manifest:\n  grants: [/srv/data, /opt/t]\n");
    struct sbx_config *cfg = NULL;
    sbx_error err;
    cr_assert_eq(cfg_load_sys(&cfg, &err), SBX_OK, "%s", err.message);
    const char *v = NULL;
    cr_assert(sbxh_config_section_entry(cfg->manifest, "grants", 1, NULL, &v));
    cr_assert_str_eq(v, "/opt/t");
    sbxh_config_free(cfg);
    expect("manifest:\n  grants: [relative/dir]\n",
           "2: manifest.grants.0: a grant is an absolute directory");
    expect("manifest:\n  grants: /srv\n",
           "2: manifest.grants: expected a list of absolute directories");
    expect("manifest:\n  grant: [/srv]\n",
           "2: manifest.grant: unknown key (expected grants, max_bytes, git_timeout)");
}

Test(config_packages, manifest_limits_are_decimal_sizes_and_durations)
{
    cfg_write("sbx.yaml", "manifest:\n  max_bytes: 64m\n  git_timeout: 500ms\n");
    struct sbx_config *cfg = NULL;
    sbx_error err;
    cr_assert_eq(cfg_load_sys(&cfg, &err), SBX_OK, "%s", err.message);
    sbxh_config_free(cfg);
    expect("manifest:\n  max_bytes: 0x10\n",
           "2: manifest.max_bytes: expected a positive size in bytes (or with k, m, g)");
    expect("manifest:\n  max_bytes: 0\n",
           "2: manifest.max_bytes: expected a positive size in bytes (or with k, m, g)");
    expect("manifest:\n  git_timeout: 1h\n",
           "2: manifest.git_timeout: expected a positive number of seconds (or with ms, "
           "s, m)");
    expect("manifest:\n  git_timeout: [1]\n",
           "2: manifest.git_timeout: expected a positive number of seconds (or with ms, "
           "s, m)");
}
