/*
 * test_conformance_dfixture.c - the MEMORY conformance cases can fail:
 * "dfixture" wraps the docker provider and breaks one memory contract at a
 * time; exactly the cases that check it must fail, and with no break every
 * memory case passes. Needs the test daemon (SBX_TEST_DOCKER_HOST).
 */
#include "../conformance/suite_runner.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct sr_run run;

static void cleanup(void)
{
    sr_free(&run);
}

#define MEMORY_CASES                                                                    \
    "memory_heads_and_commit,memory_read_only,memory_conflict,memory_crash_before_writeback"

static void run_broken(const char *mode, const char *const *failing)
{
    const char *host = getenv("SBX_TEST_DOCKER_HOST");
    if (!host || !*host)
        cr_skip_test("SBX_TEST_DOCKER_HOST is not set");
    const char *image = getenv("SBX_TEST_DOCKER_IMAGE");
    char yaml[1024];
    snprintf(yaml, sizeof yaml,
             "  dfixture:\n    inner: %s/docker.so\n    break: %s\n"
             "    host: \"%s\"\n    image: \"%s\"\n    resource_dir: \"@ROOT@\"\n",
             SBX_TEST_PROVIDER_DIR, mode, host,
             image && *image ? image : "sbx-test:busybox");
    cr_assert_eq(sr_run_suite_with(&run, "dfixture", yaml,
                                   SBX_TEST_CF_FIXTURE_DIR ":" SBX_TEST_PROVIDER_DIR,
                                   SBX_CONFORMANCE_HUMAN, MEMORY_CASES, NULL),
                 0, "could not set up the run");
    cr_assert_eq(run.status, SBX_OK, "suite did not run: %s", run.err.message);
    cr_assert_eq(run.nresults, 4, "%s", run.output);
    unsigned nfail = 0;
    for (size_t i = 0; failing[i]; i++)
        nfail++;
    for (size_t i = 0; i < run.nresults; i++) {
        const struct sr_result *res = &run.results[i];
        bool should_fail = false;
        for (size_t k = 0; failing[k]; k++)
            should_fail |= !strcmp(failing[k], res->name);
        cr_expect_eq(res->outcome, should_fail ? SBX_CONFORMANCE_FAIL : SBX_CONFORMANCE_PASS,
                     "break %s: %s: outcome %d: %s", mode, res->name, res->outcome,
                     res->message);
    }
    cr_expect_eq(run.summary.failed, nfail, "%s", run.output);
    cr_expect_eq(sr_count_workspaces(&run), 0, "resource directories left behind");
}

TestSuite(conformance_dfixture, .fini = cleanup, .timeout = 600);

Test(conformance_dfixture, no_break_passes)
{
    run_broken("none", (const char *[]){NULL});
}

Test(conformance_dfixture, read_only_made_writable_fails_read_only)
{
    run_broken("memory_ro_writable", (const char *[]){"memory_read_only", NULL});
    const struct sr_result *res = sr_find(&run, "memory_read_only");
    cr_expect(res && strstr(res->message, "the change was not reported"), "%s",
              res ? res->message : "");
}

Test(conformance_dfixture, ignored_load_fails_heads)
{
    run_broken("memory_load_ignored",
               (const char *[]){"memory_heads_and_commit", "memory_read_only", "memory_conflict",
                                "memory_crash_before_writeback", NULL});
}

Test(conformance_dfixture, blind_diff_fails_commits)
{
    run_broken("memory_diff_blind",
               (const char *[]){"memory_heads_and_commit", "memory_conflict",
                                "memory_crash_before_writeback", NULL});
}

Test(conformance_dfixture, accepting_at_attach_fails_crash_survival)
{
    run_broken("memory_attach_accepts", (const char *[]){"memory_crash_before_writeback", NULL});
}
