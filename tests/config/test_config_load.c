/*
 * test_config_load.c - reading sbx.yaml and conf.d drop-ins: lookup order,
 * merging, and the file:line: key: problem errors for bad files.
 */
#include "config_fixture.h"

#include <criterion/criterion.h>

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

TestSuite(config_load, .init = cfg_dir_setup, .fini = cfg_dir_teardown);

/* Assert msg equals the printf-style expectation, where every %s in fmt
 * is replaced by the fixture directory. */
static void assert_msg(const char *msg, const char *fmt, ...)
{
    char want[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(want, sizeof want, fmt, ap);
    va_end(ap);
    cr_assert_str_eq(msg, want);
}

/* ------------------------------------------------------------------------ */
/* Lookup and defaults                                                       */
/* ------------------------------------------------------------------------ */

Test(config_load, no_files_gives_builtin_defaults)
{
    struct sbx_config *cfg = NULL;
    sbx_error err;
    cr_assert_eq(cfg_load_sys(&cfg, &err), SBX_OK, "%s", err.message);
    cr_assert_not_null(cfg);
    cr_assert_null(cfg->default_provider);
    cr_assert_null(cfg->plugin_dir);
    cr_assert_null(cfg->store_driver);
    cr_assert_null(cfg->store_path);
    cr_assert_null(cfg->store_dsn);
    cr_assert_eq(cfg->nsections, 0);
    cr_assert_eq(cfg->nfiles, 0);
    cr_assert_null(sbxh_config_section(cfg, "local"));
    sbxh_config_free(cfg);
}

Test(config_load, missing_system_directory_gives_defaults)
{
    struct sbx_config *cfg = NULL;
    sbx_error err;
    sbx_error_clear(&err);
    cr_assert_eq(sbxh_config_open(NULL, cfg_path("absent/dir"), &cfg, &err),
                 SBX_OK, "%s", err.message);
    cr_assert_eq(cfg->nfiles, 0);
    cr_assert_eq(cfg->nsections, 0);
    sbxh_config_free(cfg);
}

Test(config_load, main_file_values)
{
    cfg_write("sbx.yaml",
              "# comment\n"
              "default_provider: docker\n"
              "plugin_dir: /opt/sbx/providers\n"
              "store: { driver: sqlite, path: /var/lib/sbx/sbx.db }\n"
              "providers:\n"
              "  docker: { image: 'debian:bookworm-slim', memory: 512m }\n"
              "  local: {}\n");
    struct sbx_config *cfg = NULL;
    sbx_error err;
    cr_assert_eq(cfg_load_sys(&cfg, &err), SBX_OK, "%s", err.message);
    cr_assert_str_eq(cfg->default_provider, "docker");
    cr_assert_str_eq(cfg->default_provider_file, cfg_path("sbx.yaml"));
    cr_assert_eq(cfg->default_provider_line, 2);
    cr_assert_str_eq(cfg->plugin_dir, "/opt/sbx/providers");
    cr_assert_str_eq(cfg->store_driver, "sqlite");
    cr_assert_str_eq(cfg->store_path, "/var/lib/sbx/sbx.db");
    cr_assert_null(cfg->store_dsn);
    cr_assert_eq(cfg->nfiles, 1);
    cr_assert_str_eq(cfg->files[0], cfg_path("sbx.yaml"));
    cr_assert_eq(cfg->nsections, 2);

    const struct sbx_config_section *d = sbxh_config_section(cfg, "docker");
    cr_assert_not_null(d);
    cr_assert_eq(d->line, 6);
    cr_assert_str_eq(d->file, cfg_path("sbx.yaml"));
    cr_assert_str_eq(sbxh_config_section_get(d, "image"), "debian:bookworm-slim");
    /* Unchecked values stay as written until sbxh_config_check_section. */
    cr_assert_str_eq(sbxh_config_section_get(d, "memory"), "512m");
    cr_assert_null(sbxh_config_section_get(d, "network"));
    cr_assert_eq(d->entries[0].line, 6);
    cr_assert_str_eq(d->entries[0].file, cfg_path("sbx.yaml"));

    const struct sbx_config_section *l = sbxh_config_section(cfg, "local");
    cr_assert_not_null(l);
    cr_assert_eq(l->count, 0);
    cr_assert_eq(l->line, 7);
    sbxh_config_free(cfg);
}

Test(config_load, postgres_store)
{
    cfg_write("sbx.yaml", "store:\n  driver: postgres\n"
                          "  dsn: host=/run/pg port=5433 dbname=sbx\n");
    struct sbx_config *cfg = NULL;
    sbx_error err;
    cr_assert_eq(cfg_load_sys(&cfg, &err), SBX_OK, "%s", err.message);
    cr_assert_str_eq(cfg->store_driver, "postgres");
    cr_assert_str_eq(cfg->store_dsn, "host=/run/pg port=5433 dbname=sbx");
    cr_assert_null(cfg->store_path);
    sbxh_config_free(cfg);
}

Test(config_load, empty_sections_enable_providers)
{
    cfg_write("sbx.yaml", "providers:\n"
                          "  local:\n"
                          "  docker: {}\n"
                          "  e2b: ~\n"
                          "store:\n");
    struct sbx_config *cfg = NULL;
    sbx_error err;
    cr_assert_eq(cfg_load_sys(&cfg, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(cfg->nsections, 3);
    cr_assert_str_eq(cfg->sections[0].name, "local");
    cr_assert_str_eq(cfg->sections[1].name, "docker");
    cr_assert_str_eq(cfg->sections[2].name, "e2b");
    for (size_t i = 0; i < 3; i++)
        cr_assert_eq(cfg->sections[i].count, 0);
    cr_assert_null(cfg->store_driver);
    sbxh_config_free(cfg);
}

Test(config_load, empty_and_comment_only_files_are_fine)
{
    static const char *const texts[] = {"", "# nothing here\n\n", "---\n",
                                        "--- ~\n", "---\n...\n"};
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++) {
        cfg_write("sbx.yaml", texts[i]);
        struct sbx_config *cfg = NULL;
        sbx_error err;
        cr_assert_eq(cfg_load_sys(&cfg, &err), SBX_OK, "text %zu: %s", i,
                     err.message);
        cr_assert_eq(cfg->nfiles, 1);
        cr_assert_eq(cfg->nsections, 0);
        cr_assert_null(cfg->default_provider);
        sbxh_config_free(cfg);
    }
}

/* ------------------------------------------------------------------------ */
/* Drop-ins                                                                  */
/* ------------------------------------------------------------------------ */

Test(config_load, dropins_are_read_in_name_order)
{
    cfg_write("sbx.yaml", "default_provider: local\n"
                          "providers:\n  local: {}\n");
    cfg_write("conf.d/20-b.yaml", "providers:\n  bee: { x: '2' }\n");
    cfg_write("conf.d/10-a.yaml", "providers:\n  aye: { x: '1' }\n");
    cfg_write("conf.d/30-c.yml", "providers:\n  yml: {}\n");
    cfg_write("conf.d/40-d.yaml.example", "providers:\n  example: {}\n");
    cfg_write("conf.d/.50-hidden.yaml", "providers:\n  hidden: {}\n");
    cfg_write("conf.d/README", "not yaml: [\n");
    struct sbx_config *cfg = NULL;
    sbx_error err;
    cr_assert_eq(cfg_load_sys(&cfg, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(cfg->nfiles, 3);
    cr_assert_str_eq(cfg->files[0], cfg_path("sbx.yaml"));
    cr_assert_str_eq(cfg->files[1], cfg_path("conf.d/10-a.yaml"));
    cr_assert_str_eq(cfg->files[2], cfg_path("conf.d/20-b.yaml"));
    cr_assert_eq(cfg->nsections, 3);
    cr_assert_str_eq(cfg->sections[0].name, "local");
    cr_assert_str_eq(cfg->sections[1].name, "aye");
    cr_assert_str_eq(cfg->sections[2].name, "bee");
    cr_assert_str_eq(cfg->sections[1].file, cfg_path("conf.d/10-a.yaml"));
    cr_assert_str_eq(cfg->sections[2].entries[0].file,
                     cfg_path("conf.d/20-b.yaml"));
    cr_assert_null(sbxh_config_section(cfg, "yml"));
    cr_assert_null(sbxh_config_section(cfg, "example"));
    cr_assert_null(sbxh_config_section(cfg, "hidden"));
    sbxh_config_free(cfg);
}

Test(config_load, dropin_without_main_file)
{
    cfg_write("conf.d/50-docker.yaml",
              "providers:\n  docker:\n    image: sbx-test:busybox\n");
    struct sbx_config *cfg = NULL;
    sbx_error err;
    cr_assert_eq(cfg_load_sys(&cfg, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(cfg->nfiles, 1);
    const struct sbx_config_section *d = sbxh_config_section(cfg, "docker");
    cr_assert_not_null(d);
    cr_assert_str_eq(sbxh_config_section_get(d, "image"), "sbx-test:busybox");
    cr_assert_eq(d->entries[0].line, 3);
    sbxh_config_free(cfg);
}

Test(config_load, dropin_sets_top_level_keys_main_file_lacks)
{
    cfg_write("sbx.yaml", "providers:\n  local: {}\n");
    cfg_write("conf.d/00-site.yaml", "default_provider: local\n"
                                     "store: { driver: sqlite }\n");
    cfg_write("conf.d/99-store.yaml", "store: { path: /srv/sbx.db }\n");
    struct sbx_config *cfg = NULL;
    sbx_error err;
    cr_assert_eq(cfg_load_sys(&cfg, &err), SBX_OK, "%s", err.message);
    cr_assert_str_eq(cfg->default_provider, "local");
    cr_assert_str_eq(cfg->default_provider_file, cfg_path("conf.d/00-site.yaml"));
    cr_assert_eq(cfg->default_provider_line, 1);
    cr_assert_str_eq(cfg->store_driver, "sqlite");
    cr_assert_str_eq(cfg->store_path, "/srv/sbx.db");
    sbxh_config_free(cfg);
}

Test(config_load, duplicate_section_across_files)
{
    cfg_write("sbx.yaml", "providers:\n  local: {}\n  docker:\n    image: a\n");
    cfg_write("conf.d/50-docker.yaml", "# shipped by the docker package\n"
                                       "providers:\n  docker: { image: b }\n");
    struct sbx_config *cfg = (struct sbx_config *)1;
    sbx_error err;
    cr_assert_eq(cfg_load_sys(&cfg, &err), SBX_E_CONFIG);
    cr_assert_null(cfg);
    assert_msg(err.message,
               "%s/conf.d/50-docker.yaml:3: providers.docker: set twice "
               "(first set at %s/sbx.yaml:3)",
               cfg_dir(), cfg_dir());
}

Test(config_load, default_provider_set_twice_across_files)
{
    cfg_write("sbx.yaml", "default_provider: local\n");
    cfg_write("conf.d/a.yaml", "\n\ndefault_provider: docker\n");
    struct sbx_config *cfg = NULL;
    sbx_error err;
    cr_assert_eq(cfg_load_sys(&cfg, &err), SBX_E_CONFIG);
    assert_msg(err.message,
               "%s/conf.d/a.yaml:3: default_provider: set twice (first set at "
               "%s/sbx.yaml:1)",
               cfg_dir(), cfg_dir());
}

Test(config_load, store_key_set_twice_across_files)
{
    cfg_write("sbx.yaml", "store: { driver: sqlite, path: /a.db }\n");
    cfg_write("conf.d/a.yaml", "store:\n  path: /b.db\n");
    struct sbx_config *cfg = NULL;
    sbx_error err;
    cr_assert_eq(cfg_load_sys(&cfg, &err), SBX_E_CONFIG);
    assert_msg(err.message,
               "%s/conf.d/a.yaml:2: store.path: set twice (first set at "
               "%s/sbx.yaml:1)",
               cfg_dir(), cfg_dir());
}

Test(config_load, dropin_syntax_error_names_the_dropin)
{
    cfg_write("sbx.yaml", "providers:\n  local: {}\n");
    cfg_write("conf.d/10-bad.yaml", "providers:\n  docker: { image: a\n");
    struct sbx_config *cfg = NULL;
    sbx_error err;
    cr_assert_eq(cfg_load_sys(&cfg, &err), SBX_E_CONFIG);
    char want[PATH_MAX + 8];
    snprintf(want, sizeof want, "%s:", cfg_path("conf.d/10-bad.yaml"));
    cr_assert(strncmp(err.message, want, strlen(want)) == 0, "%s", err.message);
}

Test(config_load, dropin_that_is_a_directory)
{
    cfg_write("sbx.yaml", "");
    cr_assert_eq(mkdir(cfg_path("conf.d"), 0755), 0);
    cr_assert_eq(mkdir(cfg_path("conf.d/sub.yaml"), 0755), 0);
    struct sbx_config *cfg = NULL;
    sbx_error err;
    cr_assert_eq(cfg_load_sys(&cfg, &err), SBX_E_IO);
    assert_msg(err.message, "%s/conf.d/sub.yaml: is a directory, not a file",
               cfg_dir());
}

/* ------------------------------------------------------------------------ */
/* Explicit path                                                             */
/* ------------------------------------------------------------------------ */

Test(config_load, explicit_path_reads_conf_d_beside_it)
{
    cfg_write("custom.yaml", "default_provider: local\n");
    cfg_write("conf.d/50-local.yaml", "providers:\n  local: { root: /srv }\n");
    /* The system file must not be read for an explicit path. */
    cfg_write("sbx.yaml", "providers:\n  docker: {}\n");
    struct sbx_config *cfg = NULL;
    sbx_error err;
    sbx_error_clear(&err);
    cr_assert_eq(sbxh_config_open(cfg_path("custom.yaml"), cfg_dir(), &cfg, &err),
                 SBX_OK, "%s", err.message);
    cr_assert_eq(cfg->nfiles, 2);
    cr_assert_str_eq(cfg->files[0], cfg_path("custom.yaml"));
    cr_assert_str_eq(cfg->files[1], cfg_path("conf.d/50-local.yaml"));
    cr_assert_str_eq(sbxh_config_section_get(sbxh_config_section(cfg, "local"),
                                             "root"),
                     "/srv");
    cr_assert_null(sbxh_config_section(cfg, "docker"));
    sbxh_config_free(cfg);
}

Test(config_load, explicit_path_without_conf_d)
{
    cfg_write("only.yaml", "plugin_dir: /p\n");
    struct sbx_config *cfg = NULL;
    sbx_error err;
    cr_assert_eq(cfg_load_file("only.yaml", &cfg, &err), SBX_OK, "%s",
                 err.message);
    cr_assert_str_eq(cfg->plugin_dir, "/p");
    cr_assert_eq(cfg->nfiles, 1);
    sbxh_config_free(cfg);
}

Test(config_load, explicit_path_must_exist)
{
    struct sbx_config *cfg = (struct sbx_config *)1;
    sbx_error err;
    cr_assert_eq(cfg_load_file("missing.yaml", &cfg, &err), SBX_E_IO);
    cr_assert_null(cfg);
    assert_msg(err.message, "%s/missing.yaml: cannot open: No such file or "
                            "directory",
               cfg_dir());
}

Test(config_load, explicit_path_that_is_a_directory)
{
    cr_assert_eq(mkdir(cfg_path("d.yaml"), 0755), 0);
    struct sbx_config *cfg = NULL;
    sbx_error err;
    cr_assert_eq(cfg_load_file("d.yaml", &cfg, &err), SBX_E_IO);
    assert_msg(err.message, "%s/d.yaml: is a directory, not a file", cfg_dir());
}

Test(config_load, null_error_pointer_is_allowed)
{
    cfg_write("sbx.yaml", "bogus: 1\n");
    struct sbx_config *cfg = NULL;
    cr_assert_eq(sbxh_config_open(NULL, cfg_dir(), &cfg, NULL), SBX_E_CONFIG);
    cr_assert_null(cfg);
}

/* ------------------------------------------------------------------------ */
/* Errors in a file                                                          */
/* ------------------------------------------------------------------------ */

Test(config_load, unknown_top_level_key)
{
    const char *msg = cfg_expect_error("plugin_dir: /p\n"
                                       "# typo below\n"
                                       "defualt_provider: local\n");
    assert_msg(msg,
               "%s/sbx.yaml:3: defualt_provider: unknown key (expected one of "
               "default_provider, plugin_dir, store, providers, package_managers, manifest, session, pools)",
               cfg_dir());
}

Test(config_load, unknown_store_key)
{
    const char *msg = cfg_expect_error("store:\n  driver: sqlite\n  pth: /x\n");
    assert_msg(msg,
               "%s/sbx.yaml:3: store.pth: unknown key (expected one of driver, "
               "path, dsn)",
               cfg_dir());
}

Test(config_load, duplicate_keys_name_both_lines)
{
    assert_msg(cfg_expect_error("plugin_dir: /a\nplugin_dir: /b\n"),
               "%s/sbx.yaml:2: plugin_dir: duplicate key (first set at line 1)",
               cfg_dir());
    assert_msg(cfg_expect_error("providers:\n  local: {}\n\n  local: {}\n"),
               "%s/sbx.yaml:4: providers.local: duplicate key (first set at "
               "line 2)",
               cfg_dir());
    assert_msg(cfg_expect_error("providers:\n  docker:\n    image: a\n"
                                "    network: none\n    image: b\n"),
               "%s/sbx.yaml:5: providers.docker.image: duplicate key (first "
               "set at line 3)",
               cfg_dir());
    assert_msg(cfg_expect_error("providers:\n  docker:\n    labels:\n"
                                "      team: a\n      team: b\n"),
               "%s/sbx.yaml:5: providers.docker.labels.team: duplicate key "
               "(first set at line 4)",
               cfg_dir());
    assert_msg(cfg_expect_error("store: {}\nproviders: {}\nstore: {}\n"),
               "%s/sbx.yaml:3: store: duplicate key (first set at line 1)",
               cfg_dir());
    assert_msg(cfg_expect_error("providers: {}\nproviders: {}\n"),
               "%s/sbx.yaml:2: providers: duplicate key (first set at line 1)",
               cfg_dir());
}

Test(config_load, wrong_types_name_file_line_key_and_expectation)
{
    assert_msg(cfg_expect_error("default_provider: { name: local }\n"),
               "%s/sbx.yaml:1: default_provider: expected a string, got a "
               "mapping",
               cfg_dir());
    assert_msg(cfg_expect_error("plugin_dir:\n  - /a\n  - /b\n"),
               "%s/sbx.yaml:2: plugin_dir: expected a string, got a sequence",
               cfg_dir());
    assert_msg(cfg_expect_error("plugin_dir:\n"),
               "%s/sbx.yaml:1: plugin_dir: expected a string, got an empty "
               "value",
               cfg_dir());
    assert_msg(cfg_expect_error("store: sqlite\n"),
               "%s/sbx.yaml:1: store: expected a mapping, got a scalar",
               cfg_dir());
    assert_msg(cfg_expect_error("store:\n  driver: [sqlite]\n"),
               "%s/sbx.yaml:2: store.driver: expected a string, got a sequence",
               cfg_dir());
    assert_msg(cfg_expect_error("providers:\n  - local\n"),
               "%s/sbx.yaml:2: providers: expected a mapping, got a sequence",
               cfg_dir());
    assert_msg(cfg_expect_error("providers:\n  local: yes\n"),
               "%s/sbx.yaml:2: providers.local: expected a mapping, got a "
               "scalar",
               cfg_dir());
    assert_msg(cfg_expect_error("providers:\n  local: ''\n"),
               "%s/sbx.yaml:2: providers.local: expected a mapping, got a "
               "scalar",
               cfg_dir());
    assert_msg(cfg_expect_error("- a\n- b\n"),
               "%s/sbx.yaml:1: expected a mapping of settings at the top "
               "level, got a sequence",
               cfg_dir());
    assert_msg(cfg_expect_error("just text\n"),
               "%s/sbx.yaml:1: expected a mapping of settings at the top "
               "level, got a scalar",
               cfg_dir());
    assert_msg(cfg_expect_error("? [a, b]\n: c\n"),
               "%s/sbx.yaml:1: top level: expected a plain key, got a sequence",
               cfg_dir());
}

Test(config_load, nested_values_too_deep)
{
    assert_msg(cfg_expect_error("providers:\n  docker:\n    labels:\n"
                                "      team:\n        name: x\n"),
               "%s/sbx.yaml:5: providers.docker.labels.team: expected a "
               "scalar, got a mapping (mappings nest only one level in a "
               "provider section)",
               cfg_dir());
    assert_msg(cfg_expect_error("providers:\n  docker:\n    args:\n"
                                "      - a\n      - [b, c]\n"),
               "%s/sbx.yaml:5: providers.docker.args.1: expected a scalar, "
               "got a sequence (a list holds plain values only)",
               cfg_dir());
}

Test(config_load, section_key_shape)
{
    assert_msg(cfg_expect_error("providers:\n  docker:\n    labels.team: x\n"),
               "%s/sbx.yaml:3: providers.docker.labels.team: a key name "
               "cannot contain '.'",
               cfg_dir());
    assert_msg(cfg_expect_error("providers:\n  docker:\n    '': x\n"),
               "%s/sbx.yaml:3: providers.docker: empty key", cfg_dir());
}

Test(config_load, bad_provider_names)
{
    assert_msg(cfg_expect_error("providers:\n  Docker: {}\n"),
               "%s/sbx.yaml:2: providers.Docker: invalid provider name "
               "(expected 1 to 64 characters of a-z, 0-9, '_' and '-')",
               cfg_dir());
    assert_msg(cfg_expect_error("providers:\n  ../evil: {}\n"),
               "%s/sbx.yaml:2: providers.../evil: invalid provider name "
               "(expected 1 to 64 characters of a-z, 0-9, '_' and '-')",
               cfg_dir());
    assert_msg(cfg_expect_error("default_provider: my provider\n"),
               "%s/sbx.yaml:1: default_provider: invalid provider name \"my "
               "provider\" (expected 1 to 64 characters of a-z, 0-9, '_' and "
               "'-')",
               cfg_dir());
    char yaml[256];
    char name[66];
    memset(name, 'a', 65);
    name[65] = '\0';
    snprintf(yaml, sizeof yaml, "providers:\n  %s: {}\n", name);
    const char *msg = cfg_expect_error(yaml);
    cr_assert(strstr(msg, ": invalid provider name") != NULL, "%s", msg);

    /* 64 characters, digits, '_' and '-' are fine. */
    memset(name, 'a', 64);
    name[64] = '\0';
    snprintf(yaml, sizeof yaml, "providers:\n  %s: {}\n  my_box-2: {}\n", name);
    cfg_write("sbx.yaml", yaml);
    struct sbx_config *cfg = NULL;
    sbx_error err;
    cr_assert_eq(cfg_load_sys(&cfg, &err), SBX_OK, "%s", err.message);
    cr_assert_not_null(sbxh_config_section(cfg, name));
    cr_assert_not_null(sbxh_config_section(cfg, "my_box-2"));
    sbxh_config_free(cfg);
}

Test(config_load, bad_store_driver)
{
    assert_msg(cfg_expect_error("store:\n  driver: mysql\n"),
               "%s/sbx.yaml:2: store.driver: unknown driver \"mysql\" (expected "
               "sqlite or postgres)",
               cfg_dir());
    assert_msg(cfg_expect_error("store: { driver: sqlite, dsn: 'host=x' }\n"),
               "%s/sbx.yaml:1: store.dsn: only used with driver postgres "
               "(driver is sqlite at %s/sbx.yaml:1; use store.path)",
               cfg_dir(), cfg_dir());
    assert_msg(cfg_expect_error("store:\n  path: /x.db\n  driver: postgres\n"),
               "%s/sbx.yaml:2: store.path: only used with driver sqlite "
               "(driver is postgres at %s/sbx.yaml:3; use store.dsn)",
               cfg_dir(), cfg_dir());
}

Test(config_load, dsn_is_never_echoed)
{
    const char *msg = cfg_expect_error(
        "store: { driver: sqlite, dsn: 'password=hunter2' }\n");
    cr_assert_null(strstr(msg, "hunter2"), "%s", msg);
    msg = cfg_expect_error("store:\n  dsn: password=hunter2\n  dsn: x\n");
    cr_assert_null(strstr(msg, "hunter2"), "%s", msg);
}

Test(config_load, yaml_syntax_errors_give_file_line_and_problem)
{
    assert_msg(cfg_expect_error("store: {}\nplugin_dir: /p: x\n"),
               "%s/sbx.yaml:2: mapping values are not allowed in this context",
               cfg_dir());
    assert_msg(cfg_expect_error("providers:\n  docker: { image: a\n"),
               "%s/sbx.yaml:3: did not find expected ',' or '}' (while parsing "
               "a flow mapping at line 2)",
               cfg_dir());
    assert_msg(cfg_expect_error("plugin_dir: \"/p\n"),
               "%s/sbx.yaml:2: found unexpected end of stream (while scanning a "
               "quoted scalar at line 1)",
               cfg_dir());
    assert_msg(cfg_expect_error("providers:\n  local: {}\n\tdocker: {}\n"),
               "%s/sbx.yaml:3: found character that cannot start any token "
               "(while scanning for the next token at line 3)",
               cfg_dir());
}

Test(config_load, invalid_utf8_is_refused)
{
    const char *msg = cfg_expect_error("plugin_dir: /p\xff\xfe\n");
    char want[PATH_MAX + 8];
    snprintf(want, sizeof want, "%s: invalid ", cfg_path("sbx.yaml"));
    cr_assert(strncmp(msg, want, strlen(want)) == 0, "%s", msg);
}

Test(config_load, aliases_are_refused)
{
    assert_msg(cfg_expect_error("providers:\n  docker: &d { image: a }\n"
                                "  other: *d\n"),
               "%s/sbx.yaml:3: aliases (*d) are not supported; write the value "
               "out",
               cfg_dir());
}

Test(config_load, second_document_is_refused)
{
    assert_msg(cfg_expect_error("plugin_dir: /a\n---\nplugin_dir: /b\n"),
               "%s/sbx.yaml:2: a second YAML document; a configuration file "
               "holds exactly one",
               cfg_dir());
}

Test(config_load, nul_in_value_is_refused)
{
    assert_msg(cfg_expect_error("plugin_dir: \"/p\\0/x\"\n"),
               "%s/sbx.yaml:1: a value contains a NUL character", cfg_dir());
}

/* ------------------------------------------------------------------------ */
/* Maps and lists                                                            */
/* ------------------------------------------------------------------------ */

Test(config_load, map_and_list_entries)
{
    cfg_write("sbx.yaml", "providers:\n"
                          "  docker:\n"
                          "    labels:\n"
                          "      team: infra\n"
                          "      com.example.tier: \"2\"\n"
                          "      empty:\n"
                          "    args: [--init, '-v', ~]\n"
                          "    none: []\n"
                          "    nomap: {}\n"
                          "    image: busybox\n");
    struct sbx_config *cfg = NULL;
    sbx_error err;
    cr_assert_eq(cfg_load_sys(&cfg, &err), SBX_OK, "%s", err.message);
    const struct sbx_config_section *d = sbxh_config_section(cfg, "docker");
    const char *name = NULL, *value = NULL;

    cr_assert_eq(sbxh_config_section_entry(d, "labels", 0, &name, &value), 1);
    cr_assert_str_eq(name, "team");
    cr_assert_str_eq(value, "infra");
    cr_assert_eq(sbxh_config_section_entry(d, "labels", 1, &name, &value), 1);
    cr_assert_str_eq(name, "com.example.tier");
    cr_assert_str_eq(value, "2");
    cr_assert_eq(sbxh_config_section_entry(d, "labels", 2, &name, &value), 1);
    cr_assert_str_eq(name, "empty");
    cr_assert_str_eq(value, "");
    cr_assert_eq(sbxh_config_section_entry(d, "labels", 3, &name, &value), 0);

    cr_assert_eq(sbxh_config_section_entry(d, "args", 0, &name, &value), 1);
    cr_assert_str_eq(name, "0");
    cr_assert_str_eq(value, "--init");
    cr_assert_eq(sbxh_config_section_entry(d, "args", 1, &name, &value), 1);
    cr_assert_str_eq(name, "1");
    cr_assert_str_eq(value, "-v");
    cr_assert_eq(sbxh_config_section_entry(d, "args", 2, &name, &value), 1);
    cr_assert_str_eq(value, "");
    cr_assert_eq(sbxh_config_section_entry(d, "args", 3, &name, &value), 0);

    cr_assert_eq(sbxh_config_section_entry(d, "none", 0, &name, &value), 0);
    cr_assert_eq(sbxh_config_section_entry(d, "nomap", 0, &name, &value), 0);
    /* A scalar key has no entries, and scalars are not MAP/SEQ. */
    cr_assert_eq(sbxh_config_section_entry(d, "image", 0, &name, &value), 0);
    cr_assert_eq(sbxh_config_section_entry(d, "missing", 0, &name, &value), 0);
    cr_assert_eq(sbxh_config_section_entry(NULL, "labels", 0, &name, &value), 0);

    /* Elements are addressable by their dotted key; containers are not. */
    cr_assert_str_eq(sbxh_config_section_get(d, "labels.team"), "infra");
    cr_assert_str_eq(sbxh_config_section_get(d, "labels.com.example.tier"), "2");
    cr_assert_str_eq(sbxh_config_section_get(d, "args.1"), "-v");
    cr_assert_null(sbxh_config_section_get(d, "labels"));
    cr_assert_null(sbxh_config_section_get(NULL, "image"));

    /* The flat layout the header documents. */
    cr_assert_str_eq(d->entries[0].key, "labels");
    cr_assert_eq(d->entries[0].node, SBX_NODE_MAP);
    cr_assert_null(d->entries[0].value);
    cr_assert_eq(d->entries[0].line, 3);
    cr_assert_str_eq(d->entries[1].key, "labels.team");
    cr_assert_eq(d->entries[1].node, SBX_NODE_SCALAR);
    cr_assert_eq(d->entries[1].line, 4);
    cr_assert_str_eq(d->entries[4].key, "args");
    cr_assert_eq(d->entries[4].node, SBX_NODE_SEQ);
    sbxh_config_free(cfg);
}

Test(config_load, free_null_is_ignored)
{
    sbxh_config_free(NULL);
    cr_assert_null(sbxh_config_section(NULL, "local"));
}

/* ------------------------------------------------------------------------ */
/* The shipped examples                                                      */
/* ------------------------------------------------------------------------ */

Test(config_load, shipped_example_config_loads)
{
    struct sbx_config *cfg = NULL;
    sbx_error err;
    sbx_error_clear(&err);
    /* etc/conf.d beside it holds only a README and *.example files. */
    cr_assert_eq(sbxh_config_open(SBX_TEST_SOURCE_DIR "/etc/sbx.yaml",
                                  cfg_path("none"), &cfg, &err),
                 SBX_OK, "%s", err.message);
    cr_assert_eq(cfg->nfiles, 1);
    cr_assert_str_eq(cfg->default_provider, "local");
    cr_assert_str_eq(cfg->store_driver, "sqlite");
    cr_assert_str_eq(cfg->store_path, "/var/lib/sbx/sbx.db");
    cr_assert_null(cfg->store_dsn);
    cr_assert_null(cfg->plugin_dir);
    cr_assert_eq(cfg->nsections, 1);
    struct sbx_config_section *local =
        (struct sbx_config_section *)sbxh_config_section(cfg, "local");
    cr_assert_not_null(local);
    static const struct sbx_config_key local_keys[] = {
        SBX_CONFIG_KEY("root", SBX_CFG_STRING, "root"), SBX_CONFIG_KEYS_END};
    cr_assert_eq(sbxh_config_check_section(local, local_keys, &err), SBX_OK,
                 "%s", err.message);
    cr_assert_str_eq(sbxh_config_section_get(local, "root"), "/var/lib/sbx/local");
    sbxh_config_free(cfg);
}

Test(config_load, shipped_example_dropin_loads)
{
    FILE *in = fopen(SBX_TEST_SOURCE_DIR "/etc/conf.d/50-docker.yaml.example", "r");
    cr_assert_not_null(in);
    char text[8192];
    size_t n = fread(text, 1, sizeof text - 1, in);
    fclose(in);
    text[n] = '\0';
    cfg_write("sbx.yaml", "default_provider: docker\n");
    cfg_write("conf.d/50-docker.yaml", text);

    struct sbx_config *cfg = NULL;
    sbx_error err;
    cr_assert_eq(cfg_load_sys(&cfg, &err), SBX_OK, "%s", err.message);
    struct sbx_config_section *d =
        (struct sbx_config_section *)sbxh_config_section(cfg, "docker");
    cr_assert_not_null(d);
    /* The docker keys of docs/CONFIG.md, with their documented types. */
    static const struct sbx_config_key docker_keys[] = {
        SBX_CONFIG_KEY("host", SBX_CFG_STRING, ""),       SBX_CONFIG_KEY("image", SBX_CFG_STRING, ""),
        SBX_CONFIG_KEY("network", SBX_CFG_STRING, ""),    SBX_CONFIG_KEY("memory", SBX_CFG_SIZE, ""),
        SBX_CONFIG_KEY("cpus", SBX_CFG_NUMBER, ""),       SBX_CONFIG_KEY("pids_limit", SBX_CFG_INT, ""),
        SBX_CONFIG_KEY("user", SBX_CFG_STRING, ""),       SBX_CONFIG_KEY("read_only_rootfs", SBX_CFG_BOOL, ""),
        SBX_CONFIG_KEY("labels", SBX_CFG_MAP, ""),        SBX_CONFIG_KEY("resource_dir", SBX_CFG_STRING, ""),
        SBX_CONFIG_KEYS_END};
    cr_assert_eq(sbxh_config_check_section(d, docker_keys, &err), SBX_OK, "%s",
                 err.message);
    cr_assert_str_eq(sbxh_config_section_get(d, "memory"), "536870912");
    cr_assert_str_eq(sbxh_config_section_get(d, "read_only_rootfs"), "false");
    const char *name, *value;
    cr_assert_eq(sbxh_config_section_entry(d, "labels", 0, &name, &value), 1);
    cr_assert_str_eq(name, "com.example.team");
    cr_assert_str_eq(value, "platform");
    sbxh_config_free(cfg);
}
