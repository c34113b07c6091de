/*
 * config_fixture.h - a temporary configuration directory for the config
 * tests: each test writes its YAML files there and loads them.
 */
#ifndef SBX_TEST_CONFIG_FIXTURE_H
#define SBX_TEST_CONFIG_FIXTURE_H

#include "api/ctx.h"

/* Create a fresh empty directory (criterion .init). */
void cfg_dir_setup(void);

/* Remove it with everything in it (criterion .fini). */
void cfg_dir_teardown(void);

/* The directory itself. */
const char *cfg_dir(void);

/* "<dir>/<rel>" in a static buffer (overwritten by the next call). */
const char *cfg_path(const char *rel);

/* Write `text` to <dir>/<rel>, creating conf.d/ on the way when needed. */
void cfg_write(const char *rel, const char *text);

/* Load with the fixture directory as the system configuration directory.
 * err is cleared first. */
int cfg_load_sys(struct sbx_config **out, sbx_error *err);

/* Load an explicit file <dir>/<rel> (the system directory must not be
 * read: it is pointed at a directory that does not exist). */
int cfg_load_file(const char *rel, struct sbx_config **out, sbx_error *err);

/* Load sbx.yaml consisting of `text` alone and expect SBX_E_CONFIG; returns
 * the message (static buffer) for exact comparison. */
const char *cfg_expect_error(const char *text);

#endif
