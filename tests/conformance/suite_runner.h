/*
 * suite_runner.h - run the conformance suite from a test against a
 * provider configured in a private temporary directory, and inspect what
 * it reported.
 */
#ifndef SBX_TEST_SUITE_RUNNER_H
#define SBX_TEST_SUITE_RUNNER_H

#include <sbx/conformance.h>

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#define SR_MAX_RESULTS 128

struct sr_result {
    char name[64];
    int outcome;
    char message[1024];
};

struct sr_run {
    char dir[64];             /* temporary directory of this run */
    char workspaces[PATH_MAX]; /* dir/ws: the provider's root */
    char config[PATH_MAX];    /* dir/sbx.yaml */
    char junit[PATH_MAX];     /* dir/junit.xml */
    int status;               /* what sbx_conformance_run returned */
    sbx_error err;
    struct sbx_conformance_summary summary;
    char *output;             /* everything printed to opts.out */
    size_t output_len;
    struct sr_result results[SR_MAX_RESULTS];
    size_t nresults;
};

/*
 * Make a temporary directory, write a config whose `providers` section is
 * `provider_yaml` (with every "@ROOT@" replaced by the workspace root),
 * and run the suite against `provider` with the plugin path `plugin_path`.
 * Returns 0, or -1 when the directory or config could not be made.
 */
int sr_run_suite(struct sr_run *r, const char *provider, const char *provider_yaml,
                 const char *plugin_path, int format, const char *filter);

/* Less common settings of a run; zero members keep the defaults. */
struct sr_options {
    int64_t case_timeout_ms; /* sbx_conformance_options.case_timeout_ms */
    uint32_t options_size;   /* sbx_conformance_options.size (an older
                                caller's); 0 means sizeof */
};

/* sr_run_suite with extra settings (extra may be NULL). */
int sr_run_suite_with(struct sr_run *r, const char *provider,
                      const char *provider_yaml, const char *plugin_path,
                      int format, const char *filter,
                      const struct sr_options *extra);

/* The result of case `name`, or NULL when it was not reported. */
const struct sr_result *sr_find(const struct sr_run *r, const char *name);

/* Number of entries in the workspace root (0 when it does not exist). */
int sr_count_workspaces(const struct sr_run *r);

/* Exit status of `xmllint --noout path` (127 when it cannot be run). */
int sr_xmllint(const char *path);

/* Number of occurrences of needle in the file at path (-1: unreadable). */
int sr_count_in_file(const char *path, const char *needle);

/* With SBX_CF_REQUEST_LOG=FILE: remove FILE, then, when stats is not
 * NULL, write stats (a fake's /_fake/stats answer) there, for the
 * contract tests that check every request against the published specs
 * (tests/<area>/sdk/run_contract_test.sh). Called with NULL when a run
 * starts, so that a failed run leaves no older log behind. */
void sr_save_requests(const char *stats);

/* Remove the temporary directory and free the output. */
void sr_free(struct sr_run *r);

#endif /* SBX_TEST_SUITE_RUNNER_H */
