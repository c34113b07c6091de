/*
 * test_frozen10.c - a provider built against a frozen header passes the
 * whole conformance suite on this host.
 *
 * Built once per frozen provider (tests/abi/CMakeLists.txt):
 * SBX_TEST_FROZEN_NAME is frozen10 (tests/abi/frozen/frozen10.c compiled
 * against the frozen 1.0 header) or frozen11 (the same file against the
 * frozen 1.1 header), SBX_TEST_FROZEN_MINOR the minor its descriptor must
 * claim. The module is compiled with the frozen header as its only include
 * directory and lives in a directory of its own. The suite runs through
 * its library, as test_conformance_local.c runs it on `local`: every case
 * must pass, except those that need a capability the provider does not
 * declare (it declares none), which must be skipped for that reason.
 */
#include "suite_runner.h"

#include <criterion/criterion.h>
#include <sbx/provider.h> /* reads the descriptors itself */

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#if !defined(SBX_TEST_FROZEN_NAME) || !defined(SBX_TEST_FROZEN_MINOR)
#error "define SBX_TEST_FROZEN_NAME and SBX_TEST_FROZEN_MINOR"
#endif

#define FROZEN_SO SBX_TEST_FROZEN_PROVIDER_DIR "/" SBX_TEST_FROZEN_NAME ".so"

static struct sr_run run;

static void cleanup(void)
{
    sr_free(&run);
}

static const char frozen_yaml[] = "  " SBX_TEST_FROZEN_NAME ":\n    root: @ROOT@\n";

/* The module really is the build from that frozen header: its descriptor
 * (read through the frozen prefix and the 1.0 members) claims that minor
 * and the ops table size of that header. */
Test(frozen, descriptor_claims_the_frozen_minor)
{
    void *so = dlopen(FROZEN_SO, RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(so, "dlopen %s: %s", FROZEN_SO, dlerror());
    sbx_provider_describe_fn describe =
        (sbx_provider_describe_fn)(uintptr_t)dlsym(so, SBX_PROVIDER_ENTRY);
    cr_assert_not_null(describe, "%s: no %s", FROZEN_SO, SBX_PROVIDER_ENTRY);
    const struct sbx_provider_desc *d = describe();
    cr_assert_not_null(d);
    cr_expect_eq(d->abi_major, 1);
    cr_expect_eq(d->abi_minor, SBX_TEST_FROZEN_MINOR, "%s claims ABI 1.%u",
                 SBX_TEST_FROZEN_NAME, d->abi_minor);
    /* 1.0's table ends with reserved[2], where 1.1 appended egress_set;
     * 1.1's ends with memory_watch. */
    size_t want_ops = SBX_TEST_FROZEN_MINOR == 0
                          ? offsetof(struct sbx_provider_ops, egress_set)
                          : SBX_OPS_SIZE_MEMORY_WATCH_1_1;
    cr_expect_eq(d->ops_size, want_ops, "ops_size %u, the 1.%d table is %zu bytes",
                 d->ops_size, SBX_TEST_FROZEN_MINOR, want_ops);
    cr_expect_eq(d->desc_size, SBX_DESC_SIZE_1_0);
    cr_expect_str_eq(d->name, SBX_TEST_FROZEN_NAME);
    cr_expect_eq(d->caps, 0);
    dlclose(so);
}

Test(frozen, every_case_passes_or_skips_for_a_capability, .fini = cleanup,
     .timeout = 900)
{
    cr_assert_eq(sr_run_suite(&run, SBX_TEST_FROZEN_NAME, frozen_yaml,
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
                         "%s needs a capability %s lacks: outcome %d: %s", r->name,
                         SBX_TEST_FROZEN_NAME, r->outcome, r->message);
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
    /* The header line names the provider, its version (1.<minor>.0) and the
     * file that was loaded: the frozen build, not something else on a
     * search path. */
    char want[64];
    snprintf(want, sizeof want, "provider %s 1.%d.0 ", SBX_TEST_FROZEN_NAME,
             SBX_TEST_FROZEN_MINOR);
    cr_assert(strstr(run.output, want), "no \"%s\" in: %s", want, run.output);
    cr_assert(strstr(run.output, FROZEN_SO), "%s was not loaded from %s: %s",
              SBX_TEST_FROZEN_NAME, SBX_TEST_FROZEN_PROVIDER_DIR, run.output);
    cr_assert_eq(sr_count_workspaces(&run), 0, "workspaces were left behind in %s",
                 run.workspaces);
}
