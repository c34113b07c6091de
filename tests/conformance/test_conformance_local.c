/*
 * test_conformance_local.c - the whole conformance suite against the real
 * `local` provider, through the suite's library: every case passes, every
 * workspace is destroyed afterwards, and the reports are well-formed.
 */
#include "suite_runner.h"

#include <criterion/criterion.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The run of the current test; .fini removes its directory even when an
 * assertion ends the test early. */
static struct sr_run run;

static void cleanup(void)
{
    sr_free(&run);
}

static const char local_yaml[] = "  local:\n    root: @ROOT@\n";

/* The capabilities local declares (docs/providers/local.md). */
#define LOCAL_CAPS (SBX_CAP_PROCESSES | SBX_CAP_PTY | SBX_CAP_FILE_OPS | SBX_CAP_PORTS | \
                    SBX_CAP_POOL)

/* Does the local provider skip case i (it needs a capability local lacks)? */
static bool local_skips(size_t i)
{
    return (sbx_conformance_case_caps(i) & ~LOCAL_CAPS) != 0;
}

/* Cases the local provider must skip. */
static unsigned cases_needing_caps(void)
{
    unsigned n = 0;
    for (size_t i = 0; i < sbx_conformance_case_count(); i++)
        n += local_skips(i);
    return n;
}

Test(conformance_local, every_case_passes, .fini = cleanup, .timeout = 600)
{
    cr_assert_eq(sr_run_suite(&run, "local", local_yaml, SBX_TEST_PROVIDER_DIR,
                              SBX_CONFORMANCE_HUMAN, NULL),
                 0, "could not set up the run");
    cr_assert_eq(run.status, SBX_OK, "suite did not run: %s", run.err.message);

    unsigned total = (unsigned)sbx_conformance_case_count();
    unsigned skip = cases_needing_caps();
    cr_assert_eq(run.nresults, total, "%zu results reported, %u cases", run.nresults,
                 total);
    for (size_t i = 0; i < run.nresults; i++) {
        int want = local_skips(i) ? SBX_CONFORMANCE_SKIP : SBX_CONFORMANCE_PASS;
        cr_expect_eq(run.results[i].outcome, want, "%s: outcome %d: %s",
                     run.results[i].name, run.results[i].outcome, run.results[i].message);
    }
    cr_assert_eq(run.summary.failed, 0);
    cr_assert_eq(run.summary.passed, total - skip);
    cr_assert_eq(run.summary.skipped, skip);
    cr_assert_eq(sbx_conformance_exit_code(run.status, &run.summary), 0);

    char line[128];
    snprintf(line, sizeof line, "\n%u passed, 0 failed, %u skipped\n", total - skip,
             skip);
    cr_assert(strstr(run.output, line), "summary line %s missing", line);
    cr_assert(!strncmp(run.output, "sbx conformance: provider local ", 32),
              "header line missing");

    /* Every case destroyed what it created. */
    cr_assert_eq(sr_count_workspaces(&run), 0, "workspaces were left behind in %s",
                 run.workspaces);

    cr_assert_eq(sr_xmllint(run.junit), 0, "JUnit report is not well-formed XML");
    cr_assert_eq(sr_count_in_file(run.junit, "<testcase "), (int)total);
    cr_assert_eq(sr_count_in_file(run.junit, "<failure"), 0);
    cr_assert_eq(sr_count_in_file(run.junit, "<skipped"), (int)skip);
    cr_assert_eq(sr_count_in_file(run.junit, "<testsuite name=\"sbx.conformance.local\""), 1);
}

Test(conformance_local, tap_output_with_filter, .fini = cleanup, .timeout = 120)
{
    cr_assert_eq(sr_run_suite(&run, "local", local_yaml, SBX_TEST_PROVIDER_DIR,
                              SBX_CONFORMANCE_TAP, "exec_exit_codes, destroy_tw*"),
                 0);
    cr_assert_eq(run.status, SBX_OK, "%s", run.err.message);
    cr_assert_eq(run.summary.total, 2);
    cr_assert(!strncmp(run.output, "TAP version 13\n", 15), "%s", run.output);
    /* Table order, not filter order. */
    cr_assert(strstr(run.output, "\n1..2\nok 1 - destroy_twice\nok 2 - exec_exit_codes\n"),
              "%s", run.output);
    cr_assert(strstr(run.output, "\n# 2 passed, 0 failed, 0 skipped\n"), "%s", run.output);
    cr_assert_eq(sr_xmllint(run.junit), 0);
    cr_assert_eq(sr_count_in_file(run.junit, "<testcase "), 2);
}

Test(conformance_local, caller_built_before_case_timeout_still_runs, .fini = cleanup,
     .timeout = 120)
{
    /* An older caller's struct ends before case_timeout_ms: the default
     * deadline applies and nothing past its size is read. */
    struct sr_options extra = {
        .options_size = (uint32_t)offsetof(struct sbx_conformance_options,
                                           case_timeout_ms)};
    cr_assert_eq(sr_run_suite_with(&run, "local", local_yaml, SBX_TEST_PROVIDER_DIR,
                                   SBX_CONFORMANCE_HUMAN,
                                   "exec_killed_by_signal,write_file_atomic", &extra),
                 0);
    cr_assert_eq(run.status, SBX_OK, "%s", run.err.message);
    cr_assert_eq(run.summary.total, 2);
    cr_assert_eq(run.summary.passed, 2, "%s", run.output);
    cr_assert_eq(sr_count_workspaces(&run), 0);
}

Test(conformance_local, provider_that_is_not_enabled_is_an_error, .fini = cleanup)
{
    cr_assert_eq(sr_run_suite(&run, "nonexistent", local_yaml, SBX_TEST_PROVIDER_DIR,
                              SBX_CONFORMANCE_HUMAN, NULL),
                 0);
    cr_assert_neq(run.status, SBX_OK);
    cr_assert(strstr(run.err.message, "nonexistent"), "%s", run.err.message);
    cr_assert_eq(run.nresults, 0);
    cr_assert_eq(sbx_conformance_exit_code(run.status, &run.summary), 125);
    cr_assert_eq(access(run.junit, F_OK), -1, "no report when nothing ran");
}
