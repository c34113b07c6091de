/*
 * test_conformance_docker.c - the whole conformance suite against the
 * docker provider on the test daemon (SBX_TEST_DOCKER_HOST, image
 * SBX_TEST_DOCKER_IMAGE): every case the provider's capabilities cover
 * passes, the others are skipped, and no container is left behind.
 *
 * It runs twice: with the in-container agent (the default: exec and files
 * through sbx-agent) and with `agent: false` (everything through the
 * Engine API). Without the agent the users cases fail, asserted as
 * failures with the provider's refusal, since users need the agent
 * (docs/providers/docker.md); and one known failure is asserted as a
 * failure, so that it stays visible: exec_killed_by_signal. The Engine
 * API's exec inspect reports a command killed by signal N as exit code
 * 128+N, the same as `exit 128+N`, so the provider cannot tell the two
 * apart (docs/providers/docker.md); the agent reports wait statuses, and
 * there the case must pass. The 1.2 capabilities that need the agent
 * (processes, pty, file_ops) are refused the same way as users without it.
 * Ports need a network to publish on: the run makes a bridge network of
 * its own (the test daemon has no default bridge) and configures it.
 */
#include "../conformance/suite_runner.h"

#include <criterion/criterion.h>
#include <sbx/provider.h> /* reads the descriptor itself */

#include "http_client.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The capabilities docker.so declares, read from its descriptor. */
static uint64_t docker_caps(void)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/docker.so", SBX_TEST_PROVIDER_DIR);
    void *so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(so, "dlopen %s: %s", path, dlerror());
    sbx_provider_describe_fn fn = (sbx_provider_describe_fn)dlsym(so, SBX_PROVIDER_ENTRY);
    cr_assert_not_null(fn);
    return fn()->caps;
}

/* POST or DELETE on the daemon's Engine API; the HTTP status. */
static long engine(const char *host, const char *method, const char *path, const char *body)
{
    sbxp_http *http = NULL;
    sbxp_http_error err;
    cr_assert_eq(sbxp_http_new(host, &http, &err), SBX_OK, "%s", err.message);
    struct sbxp_http_request req = {0};
    req.method = method;
    req.path = path;
    if (body) {
        req.body = body;
        req.body_len = strlen(body);
        req.content_type = "application/json";
    }
    long status = 0;
    int rc = sbxp_http_request(http, &req, NULL, &status, &err);
    sbxp_http_free(http);
    return rc == SBX_OK ? status : (err.http_status ? err.http_status : -1);
}

static void run_suite(int agent)
{
    const char *host = getenv("SBX_TEST_DOCKER_HOST");
    if (!host || !*host)
        cr_skip_test("SBX_TEST_DOCKER_HOST is not set");
    const char *image = getenv("SBX_TEST_DOCKER_IMAGE");
    char net[64], body[128], path[128];
    snprintf(net, sizeof net, "sbx-conformance-%d", (int)getpid());
    snprintf(body, sizeof body, "{\"Name\":\"%s\",\"Driver\":\"bridge\"}", net);
    long made = engine(host, "POST", "/v1.41/networks/create", body);
    cr_assert(made == 201 || made == 409, "creating network %s: HTTP %ld", net, made);
    char yaml[1024];
    snprintf(yaml, sizeof yaml,
             "  docker:\n    host: \"%s\"\n    image: \"%s\"\n"
             "    resource_dir: \"@ROOT@\"\n    agent: %s\n    network: %s\n",
             host, image && *image ? image : "sbx-test:busybox", agent ? "true" : "false",
             net);
    struct sr_run r;
    cr_assert_eq(sr_run_suite(&r, "docker", yaml, SBX_TEST_PROVIDER_DIR,
                              SBX_CONFORMANCE_HUMAN, NULL),
                 0, "could not set up the run");
    cr_assert_eq(r.status, SBX_OK, "suite did not run: %s", r.err.message);
    cr_assert_eq(r.nresults, sbx_conformance_case_count());
    uint64_t caps = docker_caps();
    /* The capabilities that work on docker, so that their cases run here. */
    uint64_t working =
        SBX_CAP_OUTPUT_EXPORT | SBX_CAP_FILE_MOUNTS | SBX_CAP_SKILLS | SBX_CAP_USERS;
    cr_assert_eq(caps & working, working);
    unsigned skip = 0, known = 0, refused = 0;
    for (size_t i = 0; i < r.nresults; i++) {
        int want = (sbx_conformance_case_caps(i) & ~caps) ? SBX_CONFORMANCE_SKIP
                                                          : SBX_CONFORMANCE_PASS;
        const uint64_t need_agent =
            SBX_CAP_USERS | SBX_CAP_PROCESSES | SBX_CAP_PTY | SBX_CAP_FILE_OPS;
        if (!agent && want == SBX_CONFORMANCE_PASS &&
            (sbx_conformance_case_caps(i) & need_agent)) {
            want = SBX_CONFORMANCE_FAIL; /* refused, clearly, without the agent */
            refused++;
            cr_expect(strstr(r.results[i].message, "runs without") &&
                          strstr(r.results[i].message, "agent"),
                      "%s: %s", r.results[i].name, r.results[i].message);
        }
        if (!agent && !strcmp(r.results[i].name, "exec_killed_by_signal")) {
            want = SBX_CONFORMANCE_FAIL; /* the known limitation above */
            known++;
            cr_expect(strstr(r.results[i].message, "gave exit_code 143"), "%s",
                      r.results[i].message);
        }
        skip += want == SBX_CONFORMANCE_SKIP;
        cr_expect_eq(r.results[i].outcome, want, "%s: outcome %d: %s", r.results[i].name,
                     r.results[i].outcome, r.results[i].message);
    }
    cr_expect_eq(known, agent ? 0 : 1, "the known failure is no longer a case");
    cr_expect(agent ? refused == 0 : refused >= 4, "the users cases changed");
    cr_expect_eq(r.summary.failed, known + refused, "%s", r.output);
    cr_expect_eq(r.summary.skipped, skip);
    /* destroy removed every session's resource directory */
    cr_expect_eq(sr_count_workspaces(&r), 0, "resource directories left behind");
    sr_free(&r);
    snprintf(path, sizeof path, "/v1.41/networks/%s", net);
    engine(host, "DELETE", path, NULL);
}

Test(conformance_docker, every_case_passes_with_agent, .timeout = 900)
{
    run_suite(1);
}

Test(conformance_docker, every_case_passes_without_agent, .timeout = 900)
{
    run_suite(0);
}
