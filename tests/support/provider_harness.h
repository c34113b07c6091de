/*
 * provider_harness.h - what the remote providers' criterion tests (daytona,
 * e2b and cube, opensandbox, k8s) do around their cases: write a
 * configuration text to a private temporary file, open a context on it
 * (the build-tree plugins, no environment), look a provider up and ready
 * it; create a sandbox; run `sh -c SCRIPT`; close and remove the file.
 * Failures of the set-up steps are criterion assertions.
 */
#ifndef SBX_TEST_PROVIDER_HARNESS_H
#define SBX_TEST_PROVIDER_HARNESS_H

#include <sbx/sbx.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The size of a path buffer ph_write_config fills. */
#define PH_PATH_MAX 128

/*
 * Write printf-formatted text to a new configuration file and store its
 * path in path[PH_PATH_MAX]. tmpl is a mkdtemp/mkstemps template: one
 * ending in "XXXXXX.yaml" names the file itself, any other one a
 * directory made for it, which then holds "sbx.yaml". When path is not
 * "" (written before and not removed), that file is written again.
 */
void ph_write_config(char path[PH_PATH_MAX], const char *tmpl, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Remove what ph_write_config made (nothing when path is ""), and clear
 * path. */
void ph_remove_config(char path[PH_PATH_MAX]);

/*
 * sbx_open on the configuration at path with the build-tree plugins and
 * ignore_environment, then sbx_provider_lookup(name) and, when ready,
 * sbx_provider_ready. *ctx is set as soon as it is open (also when a later
 * step fails); *prov when it is found. The first failing step's code with
 * err filled, or SBX_OK.
 */
int ph_open(const char *path, const char *name, bool ready, sbx_ctx **ctx, sbx_provider **prov,
            sbx_error *err);

/* ph_open that must succeed (a criterion assertion naming the error). */
void ph_open_ok(const char *path, const char *name, sbx_ctx **ctx, sbx_provider **prov);

/* Close *ctx (if open) and clear *ctx and *prov (either may be NULL). */
void ph_close(sbx_ctx **ctx, sbx_provider **prov);

/* sbx_create of key with default options; *h NULL first. */
int ph_try_create(sbx_provider *prov, const char *key, sbx_handle **h, sbx_error *err);

/* ph_create with the ports the sandbox publishes (0-terminated, may be
 * NULL). */
sbx_handle *ph_create_ports(sbx_provider *prov, const char *key, const uint16_t *ports);

/* ph_try_create that must succeed ("create: <message>" otherwise). */
sbx_handle *ph_create(sbx_provider *prov, const char *key);

/* sbx_destroy that is expected to succeed (criterion expectation), then
 * sbx_release. */
void ph_destroy(sbx_provider *prov, const char *key, sbx_handle *h);

/* argv (NULL-terminated) with a 20 s timeout, stdout into out (may be
 * NULL: not kept); res filled. sbx_exec's code. */
int ph_exec_argv(sbx_handle *h, const char *const *argv, struct sbx_exec_result *res,
                 sbx_capture *out, sbx_cancel *cancel, sbx_error *err);

/* `sh -c script` with a 20 s timeout, stdout into out (may be NULL: not
 * kept); res filled. sbx_exec's code. */
int ph_exec_sh(sbx_handle *h, const char *script, struct sbx_exec_result *res, sbx_capture *out,
               sbx_error *err);

/* ph_exec_sh with a cancellation token (may be NULL). */
int ph_exec_sh_cancel(sbx_handle *h, const char *script, struct sbx_exec_result *res,
                      sbx_capture *out, sbx_cancel *cancel, sbx_error *err);

/* `sh -c script` as ph_exec_sh without output: SBX_OK when it exited 0,
 * minus its exit code when it exited otherwise, or sbx_exec's error. */
int ph_sh(sbx_handle *h, const char *script, sbx_error *err);

/* sbx_provider_health with h sized and zeroed first. */
int ph_health(sbx_provider *prov, struct sbx_health *h, sbx_error *err);

/* The origin (SBX_ORIGIN_*) of configuration key as sbx check shows it,
 * with its variable, value and secrecy (each pointer may be NULL); a
 * criterion failure when the provider has no such key. */
int ph_origin(sbx_provider *prov, const char *key, const char **env, const char **value,
              bool *secret);

/* How often needle stands in hay (non-overlapping). */
int ph_count(const char *hay, const char *needle);

/* Sleep s seconds (through signals). */
void ph_nap(double s);

/* The provider's id of a handle: its reference after "<provider>:". */
const char *ph_sid(sbx_handle *h);

/* The size of the one file matching a glob pattern; -1 when none or
 * several match. */
long ph_glob_size(const char *pattern);

#endif
