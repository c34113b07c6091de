/*
 * test_conformance_docker.c - the whole conformance suite against the
 * docker provider on the test daemon (SBX_TEST_DOCKER_HOST, image
 * SBX_TEST_DOCKER_IMAGE): every case the provider's capabilities cover
 * passes, the others are skipped, and no container is left behind.
 */
#include "../conformance/suite_runner.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

Test(conformance_docker, every_case_passes, .timeout = 900)
{
    const char *host = getenv("SBX_TEST_DOCKER_HOST");
    if (!host || !*host)
        cr_skip_test("SBX_TEST_DOCKER_HOST is not set");
    const char *image = getenv("SBX_TEST_DOCKER_IMAGE");
    char yaml[1024];
    snprintf(yaml, sizeof yaml,
             "  docker:\n    host: \"%s\"\n    image: \"%s\"\n"
             "    resource_dir: \"@ROOT@\"\n",
             host, image && *image ? image : "sbx-test:busybox");
    struct sr_run r;
    cr_assert_eq(sr_run_suite(&r, "docker", yaml, SBX_TEST_PROVIDER_DIR,
                              SBX_CONFORMANCE_HUMAN, NULL),
                 0, "could not set up the run");
    cr_assert_eq(r.status, SBX_OK, "suite did not run: %s", r.err.message);
    cr_assert_eq(r.nresults, sbx_conformance_case_count());
    unsigned skip = 0;
    for (size_t i = 0; i < r.nresults; i++) {
        /* the provider declares no capability yet */
        int want = sbx_conformance_case_caps(i) ? SBX_CONFORMANCE_SKIP
                                                : SBX_CONFORMANCE_PASS;
        skip += want == SBX_CONFORMANCE_SKIP;
        cr_expect_eq(r.results[i].outcome, want, "%s: outcome %d: %s", r.results[i].name,
                     r.results[i].outcome, r.results[i].message);
    }
    cr_expect_eq(r.summary.failed, 0, "%s", r.output);
    cr_expect_eq(r.summary.skipped, skip);
    sr_free(&r);
}
