/*
 * test_conformance_opensandbox.c - the conformance suite against the
 * opensandbox provider talking to the fake OpenSandbox (lifecycle server,
 * execd, egress sidecar) on loopback, once with direct endpoints and once
 * through the server proxy. proc_dir is below /home, which the fake keeps
 * per sandbox (a real sandbox's /var/lib is its own).
 */
#include "../conformance/suite_runner.h"
#include "../e2b/fake_service.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* execd's output events are JSON text: bytes that are not UTF-8 come back
 * as U+FFFD (as execd's Go encoder writes them). These cases push all 256
 * byte values through a command's stdout; they must fail that way, and only
 * they (docs/providers/opensandbox.md, "Limits"). */
static const char *const text_only[] = {"exec_stdin", "file_binary_roundtrip", NULL};

static int is_text_only(const char *name)
{
    for (size_t i = 0; text_only[i]; i++)
        if (!strcmp(text_only[i], name))
            return 1;
    return 0;
}

static void run(const char *proxy)
{
    struct fake_service f;
    cr_assert_eq(fake_start_script(&f, "tests/opensandbox/fake_opensandbox.py", NULL, "os_key"),
                 0, "cannot start the fake (python3?)");
    setenv("OPEN_SANDBOX_API_KEY", "os_key", 1);
    /* Per-sandbox state (memory baselines) in a directory of its own. */
    char state[256];
    snprintf(state, sizeof state, "%s/sbx-cf-osb-state-XXXXXX",
             getenv("TMPDIR") && strlen(getenv("TMPDIR")) < 200 ? getenv("TMPDIR") : "/tmp");
    cr_assert(mkdtemp(state), "mkdtemp");
    char yaml[1024];
    snprintf(yaml, sizeof yaml,
             "  opensandbox:\n    api_url: \"%s\"\n    image: ubuntu:22.04\n"
             "    workspace: /home/user/workspace\n    retries: 2\n    use_server_proxy: %s\n"
             "    proc_dir: /home/user/.sbx-procs\n"
             "    state_dir: \"%s\"\n",
             f.url, proxy, state);
    struct sr_run r;
    cr_assert_eq(sr_run_suite(&r, "opensandbox", yaml, SBX_TEST_PROVIDER_DIR,
                              SBX_CONFORMANCE_HUMAN, getenv("SBX_CF_FILTER")),
                 0);
    cr_assert_eq(r.status, SBX_OK, "suite did not run: %s", r.err.message);
    size_t lossy = 0;
    for (size_t i = 0; i < r.nresults; i++) {
        if (is_text_only(r.results[i].name) && r.results[i].outcome == SBX_CONFORMANCE_FAIL) {
            cr_expect(strstr(r.results[i].message, "bytes"), "%s failed otherwise: %s",
                      r.results[i].name, r.results[i].message);
            lossy++;
            continue;
        }
        cr_expect_neq(r.results[i].outcome, SBX_CONFORMANCE_FAIL, "%s: %s", r.results[i].name,
                      r.results[i].message);
    }
    cr_expect_eq(r.summary.failed, lossy, "%s", r.output);
    const char *cap_cases[] = {"export_shell_and_files", "export_refuses_symlink",
                               "egress_create_limited", "egress_set_exact",
                               "memory_heads_and_commit", "memory_read_only",
                               "memory_conflict", "memory_crash_before_writeback", NULL};
    for (size_t i = 0; cap_cases[i] && !getenv("SBX_CF_FILTER"); i++) {
        const struct sr_result *c = sr_find(&r, cap_cases[i]);
        cr_expect(c && c->outcome == SBX_CONFORMANCE_PASS, "%s did not pass", cap_cases[i]);
    }
    long st;
    char *stats = fake_http(&f, "GET", "/_fake/stats", NULL, NULL, &st);
    cr_expect(stats && strstr(stats, "\"sandboxes\": 0"), "sandboxes left: %.200s",
              stats ? stats : "?");
    free(stats);
    /* Destroying a sandbox forgets its memory state: nothing is left. */
    cr_expect_eq(rmdir(state), 0, "%s is not empty after every sandbox was destroyed", state);
    sr_free(&r);
    fake_stop(&f);
}

Test(conformance_opensandbox, direct_endpoints, .timeout = 600)
{
    run("false");
}

Test(conformance_opensandbox, server_proxy, .timeout = 600)
{
    run("true");
}
