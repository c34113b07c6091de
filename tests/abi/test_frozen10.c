/*
 * test_frozen10.c - a provider built against the frozen 1.0 header passes
 * the whole conformance suite on this host.
 *
 * frozen10.so (tests/abi/frozen/frozen10.c) is compiled with the frozen
 * header as its only include directory and lives in a directory of its
 * own. The suite runs through its library, as test_conformance_local.c
 * runs it on `local`: every case must pass, except those that need a
 * capability frozen10 does not declare (it declares none), which must be
 * skipped for that reason.
 */
#include "suite_runner.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>

static struct sr_run run;

static void cleanup(void)
{
    sr_free(&run);
}

static const char frozen10_yaml[] = "  frozen10:\n    root: @ROOT@\n";

Test(frozen10, every_case_passes_or_skips_for_a_capability, .fini = cleanup,
     .timeout = 900)
{
    cr_assert_eq(sr_run_suite(&run, "frozen10", frozen10_yaml,
                              SBX_TEST_FROZEN_PROVIDER_DIR, SBX_CONFORMANCE_HUMAN,
                              NULL),
                 0, "could not set up the run");
    cr_assert_eq(run.status, SBX_OK, "suite did not run: %s", run.err.message);

    size_t total = sbx_conformance_case_count();
    cr_assert_eq(run.nresults, total, "%zu results reported, %zu cases", run.nresults,
                 total);
    unsigned skipped = 0;
    for (size_t i = 0; i < run.nresults; i++) {
        const struct sr_result *r = &run.results[i];
        if (sbx_conformance_case_caps(i) != 0) {
            cr_expect_eq(r->outcome, SBX_CONFORMANCE_SKIP,
                         "%s needs a capability frozen10 lacks: outcome %d: %s",
                         r->name, r->outcome, r->message);
            cr_expect(strstr(r->message, "lacks capability"),
                      "%s skipped for another reason: %s", r->name, r->message);
            skipped++;
        } else {
            cr_expect_eq(r->outcome, SBX_CONFORMANCE_PASS, "%s: outcome %d: %s",
                         r->name, r->outcome, r->message);
        }
    }
    cr_assert_eq(run.summary.failed, 0);
    cr_assert_eq(run.summary.skipped, skipped);
    cr_assert_eq(sbx_conformance_exit_code(run.status, &run.summary), 0);
    /* The header line names the provider and the file that was loaded:
     * the frozen build, not something else on a search path. */
    cr_assert(strstr(run.output, "provider frozen10 "), "%s", run.output);
    cr_assert(strstr(run.output, SBX_TEST_FROZEN_PROVIDER_DIR "/frozen10.so"),
              "frozen10 was not loaded from %s: %s", SBX_TEST_FROZEN_PROVIDER_DIR,
              run.output);
    cr_assert_eq(sr_count_workspaces(&run), 0, "workspaces were left behind in %s",
                 run.workspaces);
}
