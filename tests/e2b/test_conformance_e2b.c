/*
 * test_conformance_e2b.c - the conformance suite against the e2b provider
 * talking to the fake E2B control plane and envd on loopback: every case
 * its capabilities cover passes, the others are skipped.
 *
 * Built again with SBX_TEST_CUBE (test_cube_conformance): the cube
 * provider talking to the fake in CubeSandbox mode (CubeAPI without auth,
 * no envd token, CubeProxy routing by Host only, 500 for unknown
 * sandboxes), reached through proxy_address/proxy_port.
 */
#include "../conformance/suite_runner.h"
#include "fake_service.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef SBX_TEST_CUBE
#define PROV "cube"
#define SUITE conformance_cube
#else
#define PROV "e2b"
#define SUITE conformance_e2b
#endif

Test(SUITE, every_case_passes, .timeout = 600)
{
    struct fake_service f;
    sr_save_requests(NULL); /* no log of an older run is left for the contract test */
#ifdef SBX_TEST_CUBE
    cr_assert_eq(fake_start(&f, "cube", NULL), 0, "cannot start the fake (python3?)");
    unsetenv("CUBE_API_KEY");
#else
    cr_assert_eq(fake_start(&f, "e2b", "e2b_test_key"), 0, "cannot start the fake (python3?)");
    setenv("E2B_API_KEY", "e2b_test_key", 1);
#endif
    /* Per-sandbox state (memory baselines) in a directory of its own. */
    char state[256];
    snprintf(state, sizeof state, "%s/sbx-cf-" PROV "-state-XXXXXX",
             getenv("TMPDIR") && strlen(getenv("TMPDIR")) < 200 ? getenv("TMPDIR") : "/tmp");
    cr_assert(mkdtemp(state), "mkdtemp");
    char yaml[1024];
#ifdef SBX_TEST_CUBE
    snprintf(yaml, sizeof yaml,
             "  cube:\n    api_url: \"%s\"\n    template: tpl-cube-test\n"
             "    domain: cube.local\n    proxy_address: 127.0.0.1\n    proxy_port: %d\n"
             "    retries: 2\n    state_dir: \"%s\"\n",
             f.url, f.port, state);
#else
    snprintf(yaml, sizeof yaml,
             "  e2b:\n    api_url: \"%s\"\n    envd_url: \"%s\"\n    domain: e2b.local\n"
             "    template: base\n    retries: 2\n    state_dir: \"%s\"\n",
             f.url, f.url, state);
#endif
    struct sr_run r;
    cr_assert_eq(sr_run_suite(&r, PROV, yaml, SBX_TEST_PROVIDER_DIR, SBX_CONFORMANCE_HUMAN,
                              getenv("SBX_CF_FILTER")),
                 0);
    cr_assert_eq(r.status, SBX_OK, "suite did not run: %s", r.err.message);
    for (size_t i = 0; i < r.nresults; i++)
        cr_expect_neq(r.results[i].outcome, SBX_CONFORMANCE_FAIL, "%s: %s", r.results[i].name,
                      r.results[i].message);
    cr_expect_eq(r.summary.failed, 0, "%s", r.output);
    /* The capability the provider declares is exercised, not skipped. */
    const char *cap_cases[] = {"export_shell_and_files", "export_refuses_symlink",
                              "skill_install_read_only", "skill_install_verifies",
                              "skill_survives_restart", "mount_put_read_only",
                              "mount_put_verifies", "mount_remove_idempotent",
                              "memory_heads_and_commit", "memory_read_only",
                              "memory_conflict", "memory_crash_before_writeback",
#ifndef SBX_TEST_CUBE
                              /* e2b only: Cube has no snapshots */
                              "fork_copies_workspace", "fork_own_identity",
                              "fork_shares_nothing", "fork_source_keeps_running",
                              "fork_paused_source_stays_paused", "fork_gone",
#endif
                              NULL};
    for (size_t i = 0; cap_cases[i]; i++) {
        const struct sr_result *c = sr_find(&r, cap_cases[i]);
        cr_expect(c && c->outcome == SBX_CONFORMANCE_PASS, "%s did not pass", cap_cases[i]);
    }
    long st;
    char *stats = fake_http(&f, "GET", "/_fake/stats", NULL, NULL, &st);
    if (r.summary.failed == 0)
        sr_save_requests(stats);
    cr_expect(stats && strstr(stats, "\"sandboxes\": 0"), "sandboxes left: %s",
              stats ? stats : "?");
    free(stats);
#ifndef SBX_TEST_CUBE
    /* Every fork deleted its snapshot template. */
    char *snaps = fake_http(&f, "GET", "/snapshots", NULL, "X-API-Key: e2b_test_key", &st);
    cr_expect(snaps && st == 200 && !strcmp(snaps, "[]"), "snapshots left: %ld %s", st,
              snaps ? snaps : "?");
    free(snaps);
#else
    /* Cube declares no fork: the FORK cases are skipped. */
    const struct sr_result *fc = sr_find(&r, "fork_copies_workspace");
    cr_expect(fc && fc->outcome == SBX_CONFORMANCE_SKIP, "cube ran the fork cases");
#endif
    /* Destroying a sandbox forgets its memory state: nothing is left. */
    cr_expect_eq(rmdir(state), 0, "%s is not empty after every sandbox was destroyed", state);
    sr_free(&r);
    fake_stop(&f);
}
