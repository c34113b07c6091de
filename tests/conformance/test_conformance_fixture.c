/*
 * test_conformance_fixture.c - the suite can fail: "cfixture" wraps the
 * local provider and breaks one contract at a time; exactly the cases
 * checking that contract must fail, with a message saying why, and the
 * reports must carry the failure (escaped: cfixture references contain
 * XML markup characters).
 */
#include "suite_runner.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>

/* The run of the current test; .fini removes its directory even when an
 * assertion ends the test early. */
static struct sr_run run;

static void cleanup(void)
{
    sr_free(&run);
}

static void run_fixture(struct sr_run *r, const char *mode)
{
    char yaml[1024];
    snprintf(yaml, sizeof yaml,
             "  cfixture:\n"
             "    root: @ROOT@\n"
             "    inner: %s/local.so\n"
             "    break: %s\n",
             SBX_TEST_PROVIDER_DIR, mode);
    cr_assert_eq(sr_run_suite(r, "cfixture", yaml,
                              SBX_TEST_CF_FIXTURE_DIR ":" SBX_TEST_PROVIDER_DIR,
                              SBX_CONFORMANCE_HUMAN, NULL),
                 0, "could not set up the run");
    cr_assert_eq(r->status, SBX_OK, "suite did not run: %s", r->err.message);
    cr_assert_eq(r->nresults, sbx_conformance_case_count());
}

static bool listed(const char *const *names, const char *name)
{
    for (size_t i = 0; names[i]; i++)
        if (!strcmp(names[i], name))
            return true;
    return false;
}

/* Exactly the cases in `failing` failed; the rest passed (or were skipped
 * for capabilities). Reports agree. */
static void expect_failures(struct sr_run *r, const char *const *failing)
{
    unsigned nfail = 0;
    for (size_t i = 0; failing[i]; i++)
        nfail++;
    for (size_t i = 0; i < r->nresults; i++) {
        const struct sr_result *res = &r->results[i];
        if (listed(failing, res->name)) {
            cr_expect_eq(res->outcome, SBX_CONFORMANCE_FAIL,
                         "%s should fail against the broken fixture", res->name);
            cr_expect(res->message[0], "%s failed without a message", res->name);
        } else if (sbx_conformance_case_caps(i) == 0) {
            cr_expect_eq(res->outcome, SBX_CONFORMANCE_PASS, "%s: %s", res->name,
                         res->message);
        }
    }
    cr_assert_eq(r->summary.failed, nfail);
    cr_assert_eq(sbx_conformance_exit_code(r->status, &r->summary), nfail ? 1 : 0);
    char line[64];
    snprintf(line, sizeof line, " passed, %u failed, ", nfail);
    cr_assert(strstr(r->output, line), "summary line missing");
    for (size_t i = 0; failing[i]; i++) {
        char fail_line[128];
        snprintf(fail_line, sizeof fail_line, "\nFAIL  %s (", failing[i]);
        cr_assert(strstr(r->output, fail_line), "no FAIL line for %s", failing[i]);
    }
    cr_assert_eq(sr_xmllint(r->junit), 0, "JUnit report is not well-formed XML");
    cr_assert_eq(sr_count_in_file(r->junit, "<failure "), (int)nfail);
    cr_assert_eq(sr_count_workspaces(r), 0, "workspaces were left behind");
}

Test(conformance_fixture, intact_fixture_passes, .fini = cleanup, .timeout = 600)
{
    run_fixture(&run, "none");
    const char *failing[] = {NULL};
    expect_failures(&run, failing);
}

Test(conformance_fixture, attach_ignoring_the_owner_fails_ownership, .fini = cleanup, .timeout = 600)
{
    run_fixture(&run, "attach_ignores_owner");
    const char *failing[] = {"attach_other_key_denied", NULL};
    expect_failures(&run, failing);
    const struct sr_result *res = sr_find(&run, "attach_other_key_denied");
    cr_assert(res && strstr(res->message, "returned SBX_OK; want SBX_E_DENIED"),
              "%s", res ? res->message : "missing");
    /* The message quotes the reference "fx<&>:...": escaped in the report. */
    cr_assert(strstr(res->message, "fx<&>:"), "%s", res->message);
    cr_assert_gt(sr_count_in_file(run.junit, "fx&lt;&amp;&gt;:"), 0);
    cr_assert_eq(sr_count_in_file(run.junit, "fx<&>"), 0);
}

Test(conformance_fixture, merged_streams_fail_stream_cases, .fini = cleanup, .timeout = 600)
{
    run_fixture(&run, "stderr_to_stdout");
    const char *failing[] = {"exec_stdout_stderr", "output_bounded", NULL};
    expect_failures(&run, failing);
}

Test(conformance_fixture, unconfined_reads_fail_escape_case, .fini = cleanup, .timeout = 600)
{
    run_fixture(&run, "read_unconfined");
    const char *failing[] = {"path_escape_read", NULL};
    expect_failures(&run, failing);
    const struct sr_result *res = sr_find(&run, "path_escape_read");
    cr_assert(res && strstr(res->message, "returned SBX_OK"), "%s",
              res ? res->message : "missing");
}

Test(conformance_fixture, buffered_output_fails_memory_bound, .fini = cleanup, .timeout = 600)
{
    run_fixture(&run, "hoard_output");
    const char *failing[] = {"output_bounded", NULL};
    expect_failures(&run, failing);
    const struct sr_result *res = sr_find(&run, "output_bounded");
    cr_assert(res && strstr(res->message, "peak RSS grew by"), "%s",
              res ? res->message : "missing");
}
