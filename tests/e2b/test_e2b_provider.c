/*
 * test_e2b_provider.c - the e2b provider through libsbx against the fake
 * (fake_e2b.py): credentials and their errors, ownership metadata, retries
 * of idempotent calls only, faults (5xx, slow answers, streams cut or
 * truncated, sandboxes that vanish), streaming as frames arrive and
 * connection reuse, and fork: the new key's owner, its snapshot deleted
 * after success and failure, a leftover removed by destroy.
 */
#include "fake_service.h"
#include "../support/provider_harness.h"

#include <sbx/sbx.h>

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define KEY "e2b_test_key_0123"

static struct fake_service fake;
static char cfgpath[PH_PATH_MAX];
static sbx_ctx *ctx;
static sbx_provider *prov;

static void up(void)
{
    cr_assert_eq(fake_start(&fake, "e2b", KEY), 0, "cannot start the fake");
    setenv("E2B_API_KEY", KEY, 1);
}

static void down(void)
{
    ph_close(&ctx, &prov);
    fake_stop(&fake);
    ph_remove_config(cfgpath);
}

/* Open a context whose e2b section points at the fake, plus extra lines. */
static int open_ctx(const char *extra, sbx_error *err)
{
    ph_write_config(cfgpath, "/tmp/sbx-e2b-test-XXXXXX",
                    "providers:\n  e2b:\n    api_url: \"%s\"\n    envd_url: \"%s\"\n"
                    "    domain: e2b.local\n    retries: 3\n%s",
                    fake.url, fake.url, extra ? extra : "");
    return ph_open(cfgpath, "e2b", true, &ctx, &prov, err);
}

TestSuite(e2b_provider, .init = up, .fini = down, .timeout = 120);

Test(e2b_provider, missing_key_is_a_config_error_naming_the_variable)
{
    unsetenv("E2B_API_KEY");
    sbx_error err;
    int rc = open_ctx(NULL, &err);
    cr_expect_eq(rc, SBX_E_CONFIG, "%d %s", rc, err.message);
    cr_expect(strstr(err.message, "E2B_API_KEY"), "%s", err.message);
}

Test(e2b_provider, rejected_key_names_the_variable_not_the_value)
{
    setenv("E2B_API_KEY", "wrong_secret_value", 1);
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    sbx_handle *h = NULL;
    struct sbx_create_options co = {sizeof co, NULL, 0, NULL, NULL, NULL};
    int rc = sbx_create(prov, "k1", &co, NULL, &h, &err);
    cr_expect_eq(rc, SBX_E_CONFIG, "%d %s", rc, err.message);
    cr_expect(strstr(err.message, "E2B_API_KEY"), "%s", err.message);
    cr_expect_null(strstr(err.message, "wrong_secret_value"), "%s", err.message);
}

Test(e2b_provider, create_sends_owner_hash_and_no_internet)
{
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    sbx_handle *h = ph_create(prov, "session-key-secret");
    char hash[SBX_KEY_HASH_LEN + 1];
    cr_assert_eq(sbx_key_hash("session-key-secret", hash), SBX_OK);
    char *s = fake_stats(&fake);
    cr_expect(strstr(s, hash), "owner hash not sent");
    cr_expect_null(strstr(s, "session-key-secret"), "the session key was sent");
    cr_expect(strstr(s, "\"allow_internet_access\": false"), "%s", s);
    cr_expect_null(strstr(s, KEY), "the API key landed in a request body");
    free(s);
    /* idempotent: a second create adopts the same sandbox */
    sbx_handle *h2 = ph_create(prov, "session-key-secret");
    cr_expect_str_eq(sbx_handle_ref(h), sbx_handle_ref(h2));
    cr_expect_eq(sbx_destroy(prov, "session-key-secret", sbx_handle_ref(h), NULL, &err), SBX_OK);
    sbx_release(h);
    sbx_release(h2);
}

Test(e2b_provider, transient_failures_are_retried_for_idempotent_calls_only)
{
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    /* the lookup (GET) fails twice with 503, then works */
    cr_assert_eq(fake_faults(&fake, "[{\"match\":\"/v2/sandboxes\",\"kind\":\"status\","
                                    "\"status\":503,\"times\":2}]"),
                 0);
    sbx_handle *h = ph_create(prov, "k-retry");
    cr_expect_eq(sbx_destroy(prov, "k-retry", sbx_handle_ref(h), NULL, &err), SBX_OK);
    sbx_release(h);
    /* POST /sandboxes is not idempotent: one 502 fails the create */
    cr_assert_eq(fake_faults(&fake, "[{\"match\":\"/sandboxes\",\"kind\":\"status\","
                                    "\"status\":502,\"body\":{\"code\":502,\"message\":"
                                    "\"bad gateway\"}}]"),
                 0);
    free(fake_http(&fake, "POST", "/_fake/reset", "", NULL, NULL));
    cr_assert_eq(fake_faults(&fake, "[{\"match\":\"/sandboxes\",\"kind\":\"status\","
                                    "\"status\":502,\"body\":{\"code\":502,\"message\":"
                                    "\"bad gateway\"}}]"),
                 0);
    h = NULL;
    struct sbx_create_options co = {sizeof co, NULL, 0, NULL, NULL, NULL};
    int rc = sbx_create(prov, "k-post", &co, NULL, &h, &err);
    cr_expect_eq(rc, SBX_E_UNAVAILABLE, "%d %s", rc, err.message);
    cr_expect(strstr(err.message, "502"), "%s", err.message);
    char *s = fake_stats(&fake);
    cr_expect_eq(ph_count(s, "\"method\": \"POST\", \"path\": \"/sandboxes\""), 0,
                 "the failed POST reached the handler: %s", s);
    free(s);
}

Test(e2b_provider, output_streams_as_frames_arrive)
{
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    sbx_handle *h = ph_create(prov, "k-stream");
    struct sbx_exec_result res;
    sbx_capture out;
    sbx_capture_init(&out, 4096, 0);
    int rc = ph_exec_sh(h, "echo first; sleep 1; echo second; echo err >&2; exit 7", &res, &out, &err);
    cr_expect_eq(rc, SBX_OK, "%s", err.message);
    cr_expect_eq(res.exit_code, 7);
    cr_expect_eq(res.err_bytes, 4);
    char *t = sbx_capture_text(&out);
    cr_expect_str_eq(t, "first\nsecond\n");
    free(t);
    sbx_capture_free(&out);
    sbx_destroy(prov, "k-stream", sbx_handle_ref(h), NULL, &err);
    sbx_release(h);
}

Test(e2b_provider, cut_and_truncated_streams_are_protocol_errors)
{
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    sbx_handle *h = ph_create(prov, "k-cut");
    struct sbx_exec_result res;
    sbx_capture out;
    sbx_capture_init(&out, 4096, 0);
    cr_assert_eq(fake_faults(&fake, "[{\"match\":\"/process.Process/Start\",\"kind\":\"cut\"}]"),
                 0);
    int rc = ph_exec_sh(h, "echo hello", &res, &out, &err);
    cr_expect_eq(rc, SBX_E_PROTOCOL, "cut: %d %s", rc, err.message);
    cr_assert_eq(fake_faults(&fake,
                             "[{\"match\":\"/process.Process/Start\",\"kind\":\"truncate\"}]"),
                 0);
    rc = ph_exec_sh(h, "echo hello", &res, &out, &err);
    cr_expect_eq(rc, SBX_E_PROTOCOL, "truncated: %d %s", rc, err.message);
    cr_expect(strstr(err.message, "envelope"), "%s", err.message);
    /* and the next command works again */
    rc = ph_exec_sh(h, "exit 0", &res, &out, &err);
    cr_expect_eq(rc, SBX_OK, "%s", err.message);
    sbx_capture_free(&out);
    sbx_destroy(prov, "k-cut", sbx_handle_ref(h), NULL, &err);
    sbx_release(h);
}

Test(e2b_provider, vanished_sandbox_is_not_found)
{
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    sbx_handle *h = ph_create(prov, "k-vanish");
    char ref[SBX_REF_MAX];
    snprintf(ref, sizeof ref, "%s", sbx_handle_ref(h));
    cr_assert_eq(fake_faults(&fake,
                             "[{\"match\":\"/filesystem.Filesystem/Stat\",\"kind\":\"vanish\"}]"),
                 0);
    sbx_capture out;
    sbx_capture_init(&out, 64, 0);
    struct sbx_sink sink = sbx_capture_sink(&out);
    int rc = sbx_read(h, "x.txt", &sink, NULL, &err);
    cr_expect_eq(rc, SBX_E_NOT_FOUND, "%d %s", rc, err.message);
    sbx_capture_free(&out);
    sbx_release(h);
    h = NULL;
    rc = sbx_attach(prov, "k-vanish", ref, NULL, &h, &err);
    cr_expect_eq(rc, SBX_E_NOT_FOUND, "%d %s", rc, err.message);
    cr_expect_eq(sbx_destroy(prov, "k-vanish", ref, NULL, &err), SBX_OK, "%s", err.message);
}

Test(e2b_provider, slow_answers_time_out)
{
    sbx_error err;
    cr_assert_eq(open_ctx("    request_timeout_ms: 300\n", &err), SBX_OK, "%s", err.message);
    sbx_handle *h = ph_create(prov, "k-slow");
    cr_assert_eq(fake_faults(&fake, "[{\"match\":\"/filesystem.Filesystem/Stat\","
                                    "\"kind\":\"slow\",\"delay_ms\":1500}]"),
                 0);
    sbx_capture out;
    sbx_capture_init(&out, 64, 0);
    struct sbx_sink sink = sbx_capture_sink(&out);
    int rc = sbx_read(h, "x.txt", &sink, NULL, &err);
    cr_expect_eq(rc, SBX_E_TIMEOUT, "%d %s", rc, err.message);
    sbx_capture_free(&out);
    sbx_destroy(prov, "k-slow", sbx_handle_ref(h), NULL, &err);
    sbx_release(h);
}

Test(e2b_provider, connections_are_reused)
{
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    sbx_handle *h = ph_create(prov, "k-reuse");
    char *s = fake_stats(&fake);
    int before = atoi(strstr(s, "\"connections\": ") + strlen("\"connections\": "));
    free(s);
    for (int i = 0; i < 30; i++) {
        struct sbx_exec_result res;
        sbx_capture out;
        sbx_capture_init(&out, 64, 0);
        cr_assert_eq(ph_exec_sh(h, "echo x", &res, &out, &err), SBX_OK, "%s", err.message);
        sbx_capture_free(&out);
    }
    s = fake_stats(&fake);
    int after = atoi(strstr(s, "\"connections\": ") + strlen("\"connections\": "));
    free(s);
    cr_expect_leq(after - before, 3, "30 execs opened %d connections", after - before);
    sbx_destroy(prov, "k-reuse", sbx_handle_ref(h), NULL, &err);
    sbx_release(h);
}

#include "../../conformance/skill_bundles.h"

static int install_hello(sbx_handle *h, sbx_error *err)
{
    struct sbx_memory_source m = {BUNDLE_V1, sizeof BUNDLE_V1, 0};
    struct sbx_source src = sbx_memory_source(&m);
    struct sbx_blob b;
    memset(&b, 0, sizeof b);
    b.size = sizeof b;
    b.src = &src;
    b.length = sizeof BUNDLE_V1;
    b.sha256 = BUNDLE_V1_SHA;
    b.format = "tar.gz";
    sbx_error_clear(err);
    return sbx_skill_install(h, "hello", &b, NULL, err);
}

/* Read-only means something only when the sandbox user is not root: the
 * fake runs it as another uid when it can, and the skill is root's. */
Test(e2b_provider, skills_are_roots_and_the_sandbox_user_is_not)
{
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    sbx_handle *h = ph_create(prov, "k-skill-owner");
    cr_assert_str_eq(sbx_handle_root(h), "/home/user/workspace");
    cr_assert_eq(install_hello(h, &err), SBX_OK, "%s", err.message);
    struct sbx_exec_result res;
    sbx_capture out;
    sbx_capture_init(&out, 4096, 0);
    cr_assert_eq(ph_exec_sh(h, "id -u; cd /home/user/workspace/skills; stat -c '%u %a' . "
                        "hello/SKILL.md hello/bin hello/bin/run.sh; readlink hello",
                     &res, &out, &err),
                 SBX_OK, "%s", err.message);
    char *t = sbx_capture_text(&out);
    if (geteuid() == 0)
        cr_expect(!strncmp(t, "61000\n", 6), "the sandbox user is not uid 61000: %s", t);
    cr_expect(strstr(t, "\n0 755\n0 444\n0 555\n0 555\n.v-"), "%s", t);
    free(t);
    sbx_capture_free(&out);
    sbx_destroy(prov, "k-skill-owner", sbx_handle_ref(h), NULL, &err);
    sbx_release(h);
}

/* The sandbox user owns the workspace and may plant a symlink named
 * skills: the root steps refuse it rather than follow it. */
Test(e2b_provider, skills_symlink_planted_by_the_user_is_refused)
{
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    sbx_handle *h = ph_create(prov, "k-skill-link");
    struct sbx_exec_result res;
    sbx_capture out;
    sbx_capture_init(&out, 4096, 0);
    cr_assert_eq(ph_exec_sh(h, "mkdir -p ../elsewhere && ln -s ../elsewhere skills", &res, &out,
                     &err),
                 SBX_OK, "%s", err.message);
    cr_assert_eq(res.exit_code, 0);
    int rc = install_hello(h, &err);
    cr_expect_eq(rc, SBX_E_INVALID, "%d %s", rc, err.message);
    cr_expect(strstr(err.message, "symlink"), "%s", err.message);
    sbx_capture_free(&out);
    sbx_capture_init(&out, 4096, 0);
    cr_assert_eq(ph_exec_sh(h, "ls -A ../elsewhere; stat -c %u ../elsewhere", &res, &out, &err),
                 SBX_OK, "%s", err.message);
    char *t = sbx_capture_text(&out);
    if (geteuid() == 0)
        cr_expect_str_eq(t, "61000\n", "the link's target was touched: %s", t);
    free(t);
    sbx_capture_free(&out);
    sbx_destroy(prov, "k-skill-link", sbx_handle_ref(h), NULL, &err);
    sbx_release(h);
}

/* A sandbox paused under the session (auto-pause, or by someone) is
 * resumed through connect when a file op or an exec finds it paused (the
 * proxy answers 502), and the call goes on as if nothing happened. */
Test(e2b_provider, paused_sandbox_is_resumed_by_file_ops_and_exec)
{
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    sbx_handle *h = ph_create(prov, "k-pause");
    struct sbx_memory_source m = {"kept\n", 5, 0};
    struct sbx_source src = sbx_memory_source(&m);
    cr_assert_eq(sbx_write(h, "kept.txt", &src, 0, NULL, &err), SBX_OK, "%s", err.message);
    free(fake_http(&fake, "POST", "/_fake/reset", "", NULL, NULL));
    cr_assert_eq(fake_faults(&fake,
                             "[{\"match\":\"/filesystem.Filesystem/Stat\",\"kind\":\"pause\"}]"),
                 0);
    sbx_capture out;
    sbx_capture_init(&out, 64, 0);
    struct sbx_sink sink = sbx_capture_sink(&out);
    int rc = sbx_read(h, "kept.txt", &sink, NULL, &err);
    cr_expect_eq(rc, SBX_OK, "read of a paused sandbox: %d %s", rc, err.message);
    char *t = sbx_capture_text(&out);
    cr_expect_str_eq(t, "kept\n");
    free(t);
    sbx_capture_free(&out);
    char *s = fake_stats(&fake);
    cr_expect_eq(ph_count(s, "/connect\""), 1, "one connect resumed it: %s", s);
    free(s);
    /* exec straight into a paused sandbox (no cwd: Start comes first) */
    free(fake_http(&fake, "POST", "/_fake/reset", "", NULL, NULL));
    cr_assert_eq(fake_faults(&fake,
                             "[{\"match\":\"/process.Process/Start\",\"kind\":\"pause\"}]"),
                 0);
    struct sbx_exec_result res;
    sbx_capture_init(&out, 64, 0);
    rc = ph_exec_sh(h, "cat kept.txt", &res, &out, &err);
    cr_expect_eq(rc, SBX_OK, "exec in a paused sandbox: %d %s", rc, err.message);
    cr_expect_eq(res.exit_code, 0);
    t = sbx_capture_text(&out);
    cr_expect_str_eq(t, "kept\n");
    free(t);
    sbx_capture_free(&out);
    s = fake_stats(&fake);
    cr_expect_eq(ph_count(s, "/connect\""), 1, "one connect resumed it: %s", s);
    /* (the other Start is the scan for what the command left behind) */
    cr_expect_eq(ph_count(s, "\"args\": [\"-c\", \"cat kept.txt\"]"), 1,
                 "the command ran once: %s", s);
    free(s);
    sbx_destroy(prov, "k-pause", sbx_handle_ref(h), NULL, &err);
    sbx_release(h);
}

/* The sandbox's endAt (as the fake's control plane records it) in
 * seconds since the epoch. */
static double end_at(sbx_handle *h)
{
    const char *ref = sbx_handle_ref(h);
    char path[256];
    snprintf(path, sizeof path, "/sandboxes/%s", strchr(ref, ':') + 1);
    long st = 0;
    char *doc = fake_http(&fake, "GET", path, NULL, "X-API-Key: " KEY, &st);
    cr_assert(doc && st == 200, "GET %s: %ld", path, st);
    const char *p = strstr(doc, "\"endAt\": \"");
    cr_assert_not_null(p, "%s", doc);
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    double frac = 0;
    cr_assert_not_null(strptime(p + 10, "%Y-%m-%dT%H:%M:%S", &tm));
    const char *dot = strchr(p + 10, '.');
    if (dot)
        frac = atof(dot);
    free(doc);
    return (double)timegm(&tm) + frac;
}

/* The TTL (lifetime 4 s here) is extended as the sandbox is used, by file
 * ops and execs, and during a command that runs longer than the TTL; an
 * idle sandbox's TTL is left alone. */
Test(e2b_provider, lifetime_is_extended_with_use_only, .timeout = 60)
{
    sbx_error err;
    cr_assert_eq(open_ctx("    lifetime: 4\n", &err), SBX_OK, "%s", err.message);
    sbx_handle *h = ph_create(prov, "k-ttl");
    double e0 = end_at(h);
    ph_nap(1.0);
    cr_expect_float_eq(end_at(h), e0, 0.01, "idle: the TTL moved");
    /* past half the lifetime: a read extends it */
    ph_nap(1.5);
    sbx_capture out;
    sbx_capture_init(&out, 64, 0);
    struct sbx_sink sink = sbx_capture_sink(&out);
    sbx_read(h, "missing.txt", &sink, NULL, &err);
    sbx_capture_free(&out);
    double e1 = end_at(h);
    cr_expect_gt(e1, e0 + 2.0, "a file op after 2.5 s did not extend the TTL (%.2f -> %.2f)",
                 e0, e1);
    /* a command longer than the TTL keeps the sandbox alive while it runs */
    struct sbx_exec_result res;
    sbx_capture_init(&out, 64, 0);
    int rc = ph_exec_sh(h, "sleep 6; echo done", &res, &out, &err);
    cr_expect_eq(rc, SBX_OK, "a 6 s command with a 4 s TTL: %d %s", rc, err.message);
    cr_expect_eq(res.exit_code, 0, "exit %d signal %d", res.exit_code, res.term_signal);
    char *t = sbx_capture_text(&out);
    cr_expect_str_eq(t, "done\n");
    free(t);
    sbx_capture_free(&out);
    double e2 = end_at(h);
    cr_expect_gt(e2, e1 + 3.0, "the TTL did not move during the long command");
    /* idle again: left alone */
    ph_nap(1.0);
    cr_expect_float_eq(end_at(h), e2, 0.01, "idle: the TTL moved");
    sbx_destroy(prov, "k-ttl", sbx_handle_ref(h), NULL, &err);
    sbx_release(h);
}

/* A timed-out command's whole tree goes, also a descendant that left the
 * command's process group and session (setsid): envd's deadline and
 * SendSignal reach the command's own process only. */
Test(e2b_provider, timeout_kills_descendants_that_left_the_group, .timeout = 60)
{
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    sbx_handle *h = ph_create(prov, "k-tree");
    const char *argv[] = {"sh", "-c",
                          "setsid sh -c 'sleep 30 & echo $! > gc; wait' & echo $! > child; "
                          "echo $$ > pid; wait",
                          NULL};
    struct sbx_exec_args a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.argv = argv;
    a.timeout_ms = 1000;
    struct sbx_exec_result res;
    memset(&res, 0, sizeof res);
    res.size = sizeof res;
    int rc = sbx_exec(h, &a, &res, NULL, &err);
    cr_expect_eq(rc, SBX_OK, "%s", err.message);
    cr_expect(res.timed_out, "not timed out");
    sbx_capture out;
    sbx_capture_init(&out, 4096, 0);
    cr_assert_eq(ph_exec_sh(h,
                     "alive() { kill -0 \"$1\" 2>/dev/null || return 1; read -r s < "
                     "/proc/$1/stat || return 1; case \"$s\" in *\") Z \"*) return 1;; "
                     "esac; }; for i in 1 2 3; do left=; for f in pid child gc; do "
                     "test -s $f || { left=\"$left no-$f\"; continue; }; "
                     "if alive $(cat $f); then left=\"$left $f\"; fi; done; "
                     "test -z \"$left\" && break; sleep 1; done; echo \"left:$left\"",
                     &res, &out, &err),
                 SBX_OK, "%s", err.message);
    char *t = sbx_capture_text(&out);
    cr_expect_str_eq(t, "left:\n", "survivors of the timeout: %s", t);
    free(t);
    sbx_capture_free(&out);
    sbx_destroy(prov, "k-tree", sbx_handle_ref(h), NULL, &err);
    sbx_release(h);
}

/* Bundles are unpacked in the sandbox with tar: a zip is refused up front,
 * and nothing reaches the sandbox. */
Test(e2b_provider, skill_zip_bundle_is_refused)
{
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    sbx_handle *h = ph_create(prov, "k-skill-zip");
    struct sbx_memory_source m = {BUNDLE_V1, sizeof BUNDLE_V1, 0};
    struct sbx_source src = sbx_memory_source(&m);
    struct sbx_blob b;
    memset(&b, 0, sizeof b);
    b.size = sizeof b;
    b.src = &src;
    b.length = sizeof BUNDLE_V1;
    b.sha256 = BUNDLE_V1_SHA;
    b.format = "zip";
    free(fake_http(&fake, "POST", "/_fake/reset", "", NULL, NULL));
    int rc = sbx_skill_install(h, "zipped", &b, NULL, &err);
    cr_expect_eq(rc, SBX_E_INVALID, "%d %s", rc, err.message);
    cr_expect(strstr(err.message, "zip"), "%s", err.message);
    char *s = fake_stats(&fake);
    cr_expect_eq(ph_count(s, "\"path\": \"/files"), 0, "the bundle was uploaded: %s", s);
    free(s);
    sbx_destroy(prov, "k-skill-zip", sbx_handle_ref(h), NULL, &err);
    sbx_release(h);
}

/* envd writes as root, so the provider itself keeps write_file out of a
 * published skill, as the sandbox's permissions keep its commands out. */
Test(e2b_provider, write_file_into_a_published_skill_is_refused)
{
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    sbx_handle *h = ph_create(prov, "k-skill-write");
    cr_assert_eq(install_hello(h, &err), SBX_OK, "%s", err.message);
    const char *paths[] = {"skills/hello/SKILL.md", "skills/hello/new.txt",
                           "skills/hello/bin/run.sh", NULL};
    for (size_t i = 0; paths[i]; i++) {
        struct sbx_memory_source m = {"evil\n", 5, 0};
        struct sbx_source src = sbx_memory_source(&m);
        int rc = sbx_write(h, paths[i], &src, 0, NULL, &err);
        cr_expect_eq(rc, SBX_E_INVALID, "%s: %d %s", paths[i], rc, err.message);
        cr_expect(strstr(err.message, "skill"), "%s", err.message);
    }
    struct sbx_exec_result res;
    sbx_capture out;
    sbx_capture_init(&out, 4096, 0);
    cr_assert_eq(ph_exec_sh(h, "cat skills/hello/SKILL.md; ls skills/hello", &res, &out, &err),
                 SBX_OK, "%s", err.message);
    char *t = sbx_capture_text(&out);
    cr_expect_str_eq(t, "# hello skill\nSKILL.md\nbin\n");
    free(t);
    sbx_capture_free(&out);
    /* the workspace around it stays writable */
    struct sbx_memory_source m = {"fine\n", 5, 0};
    struct sbx_source src = sbx_memory_source(&m);
    cr_expect_eq(sbx_write(h, "notes.txt", &src, 0, NULL, &err), SBX_OK, "%s", err.message);
    sbx_destroy(prov, "k-skill-write", sbx_handle_ref(h), NULL, &err);
    sbx_release(h);
}

/* ---- fork (SBX_CAP_FORK) ------------------------------------------------ */

/* GET /snapshots of the fake's E2B API (the snapshot templates left). */
static char *snapshots(void)
{
    long st = 0;
    char *doc = fake_http(&fake, "GET", "/snapshots", NULL, "X-API-Key: " KEY, &st);
    cr_assert(doc && st == 200, "GET /snapshots: %ld", st);
    return doc;
}

/* The fake's count of sandboxes. */
static int sandboxes(void)
{
    char *s = fake_stats(&fake);
    const char *p = strstr(s, "\"sandboxes\": ");
    cr_assert_not_null(p, "%s", s);
    int n = atoi(p + strlen("\"sandboxes\": "));
    free(s);
    return n;
}

static int try_fork(sbx_handle *src, const char *key, sbx_handle **out, sbx_error *err)
{
    struct sbx_create_options co;
    memset(&co, 0, sizeof co);
    co.size = sizeof co;
    *out = NULL;
    sbx_error_clear(err);
    return sbx_fork(src, key, &co, NULL, out, err);
}

/* The fork is the new key's alone: its metadata names the new key's hash
 * (never the old key's), attach with the old key is denied; the snapshot
 * it was made from, named after the new key, is deleted afterwards. */
Test(e2b_provider, fork_is_the_new_keys_and_its_snapshot_goes)
{
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    sbx_handle *src = ph_create(prov, "k-fork-old");
    struct sbx_memory_source m = {"copied\n", 7, 0};
    struct sbx_source in = sbx_memory_source(&m);
    cr_assert_eq(sbx_write(src, "mark.txt", &in, 0, NULL, &err), SBX_OK, "%s", err.message);
    free(fake_http(&fake, "POST", "/_fake/reset", "", NULL, NULL));
    sbx_handle *fk = NULL;
    cr_assert_eq(try_fork(src, "k-fork-new", &fk, &err), SBX_OK, "%s", err.message);
    char ref[SBX_REF_MAX], old_hash[SBX_KEY_HASH_LEN + 1], new_hash[SBX_KEY_HASH_LEN + 1];
    snprintf(ref, sizeof ref, "%s", sbx_handle_ref(fk));
    cr_assert_eq(sbx_key_hash("k-fork-old", old_hash), SBX_OK);
    cr_assert_eq(sbx_key_hash("k-fork-new", new_hash), SBX_OK);
    /* the snapshot's name, the new sandbox's template and metadata */
    char *s = fake_stats(&fake);
    char want[128];
    snprintf(want, sizeof want, "\"name\": \"sbx-fork-%.16s\"", new_hash);
    cr_expect_eq(ph_count(s, want), 1, "no snapshot named after the new key: %s", s);
    cr_expect_eq(ph_count(s, "\"templateID\": \"fake-team/sbx-fork-"), 1,
                 "the sandbox was not made from the snapshot: %s", s);
    cr_expect_eq(ph_count(s, "/fork\""), 0, "POST /sandboxes/{id}/fork was used: %s", s);
    cr_expect_eq(ph_count(s, "\"method\": \"DELETE\", \"path\": \"/templates/"), 1,
                 "the snapshot template was not deleted: %s", s);
    free(s);
    long st = 0;
    char path[256];
    snprintf(path, sizeof path, "/sandboxes/%s", strchr(ref, ':') + 1);
    char *doc = fake_http(&fake, "GET", path, NULL, "X-API-Key: " KEY, &st);
    cr_assert(doc && st == 200, "GET %s: %ld", path, st);
    cr_expect(strstr(doc, new_hash), "the fork's metadata lacks the new key's hash: %s", doc);
    cr_expect_null(strstr(doc, old_hash), "the fork's metadata names the old key: %s", doc);
    free(doc);
    char *left = snapshots();
    cr_expect_str_eq(left, "[]", "snapshots left after the fork: %s", left);
    free(left);
    /* the old key is denied, the new one attaches and reads the copy */
    sbx_handle *h = NULL;
    int rc = sbx_attach(prov, "k-fork-old", ref, NULL, &h, &err);
    cr_expect_eq(rc, SBX_E_DENIED, "attach of the fork with the old key: %d %s", rc,
                 err.message);
    sbx_release(h);
    h = NULL;
    cr_assert_eq(sbx_attach(prov, "k-fork-new", ref, NULL, &h, &err), SBX_OK, "%s",
                 err.message);
    sbx_capture out;
    sbx_capture_init(&out, 64, 0);
    struct sbx_sink sink = sbx_capture_sink(&out);
    cr_expect_eq(sbx_read(h, "mark.txt", &sink, NULL, &err), SBX_OK, "%s", err.message);
    char *t = sbx_capture_text(&out);
    cr_expect_str_eq(t, "copied\n");
    free(t);
    sbx_capture_free(&out);
    sbx_release(h);
    cr_expect_eq(sbx_destroy(prov, "k-fork-new", ref, NULL, &err), SBX_OK, "%s", err.message);
    sbx_release(fk);
    cr_expect_eq(sbx_destroy(prov, "k-fork-old", sbx_handle_ref(src), NULL, &err), SBX_OK,
                 "%s", err.message);
    sbx_release(src);
}

/* POST /sandboxes fails (500) after the snapshot was taken: the fork
 * fails saying so, and leaves neither the snapshot nor a sandbox. */
Test(e2b_provider, fork_failing_after_the_snapshot_leaves_nothing)
{
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    sbx_handle *src = ph_create(prov, "k-fork-src");
    free(fake_http(&fake, "POST", "/_fake/reset", "", NULL, NULL));
    cr_assert_eq(fake_faults(&fake, "[{\"match\":\"/sandboxes\",\"exact\":true,"
                                    "\"method\":\"POST\",\"kind\":\"status\",\"status\":500}]"),
                 0);
    sbx_handle *fk = NULL;
    int rc = try_fork(src, "k-fork-fail", &fk, &err);
    cr_expect_neq(rc, SBX_OK, "the fork succeeded although POST /sandboxes failed");
    cr_expect(strstr(err.message, "creating a sandbox of template") &&
                  strstr(err.message, "500"),
              "%s", err.message);
    char *s = fake_stats(&fake);
    cr_expect_eq(ph_count(s, "/snapshots\""), 1, "no snapshot was taken: %s", s);
    free(s);
    char *left = snapshots();
    cr_expect_str_eq(left, "[]", "the snapshot was left: %s", left);
    free(left);
    cr_expect_eq(sandboxes(), 1, "a sandbox besides the source was left");
    /* a failure once the sandbox exists (its first command, which clears
     * what the snapshot carried over): that sandbox goes too */
    cr_assert_eq(fake_faults(&fake, "[{\"match\":\"/process.Process/Start\","
                                    "\"kind\":\"status\",\"status\":500}]"),
                 0);
    rc = try_fork(src, "k-fork-fail", &fk, &err);
    cr_expect_neq(rc, SBX_OK, "the fork succeeded although its first command failed");
    cr_expect(err.message[0], "no message");
    left = snapshots();
    cr_expect_str_eq(left, "[]", "the snapshot was left: %s", left);
    free(left);
    cr_expect_eq(sandboxes(), 1, "the fork's sandbox was left");
    /* and the source works on, and forks once the service does */
    cr_expect_eq(ph_sh(src, "true", &err), SBX_OK, "%s", err.message);
    cr_assert_eq(try_fork(src, "k-fork-fail", &fk, &err), SBX_OK, "%s", err.message);
    ph_destroy(prov, "k-fork-fail", fk);
    ph_destroy(prov, "k-fork-src", src);
}

/* A fork killed between its snapshot and the snapshot's deletion leaves a
 * snapshot named after the new key: destroy of that key removes it (and
 * again finds nothing: idempotent), another key's stays. */
Test(e2b_provider, destroy_removes_a_forks_leftover_snapshot)
{
    sbx_error err;
    cr_assert_eq(open_ctx(NULL, &err), SBX_OK, "%s", err.message);
    sbx_handle *src = ph_create(prov, "k-left-src");
    char hash[SBX_KEY_HASH_LEN + 1], other[SBX_KEY_HASH_LEN + 1];
    cr_assert_eq(sbx_key_hash("k-left-new", hash), SBX_OK);
    cr_assert_eq(sbx_key_hash("k-left-other", other), SBX_OK);
    char path[256], body[128];
    snprintf(path, sizeof path, "/sandboxes/%s/snapshots", ph_sid(src));
    const char *names[] = {hash, other};
    for (int i = 0; i < 2; i++) {
        long st = 0;
        snprintf(body, sizeof body, "{\"name\":\"sbx-fork-%.16s\"}", names[i]);
        free(fake_http(&fake, "POST", path, body, "X-API-Key: " KEY, &st));
        cr_assert_eq(st, 201, "POST %s: %ld", path, st);
    }
    /* what reconcile does with the intent's key: create, then destroy */
    sbx_handle *h = ph_create(prov, "k-left-new");
    char ref[SBX_REF_MAX];
    snprintf(ref, sizeof ref, "%s", sbx_handle_ref(h));
    sbx_release(h);
    cr_expect_eq(sbx_destroy(prov, "k-left-new", ref, NULL, &err), SBX_OK, "%s", err.message);
    char *left = snapshots();
    char want[64];
    snprintf(want, sizeof want, "sbx-fork-%.16s", hash);
    cr_expect_null(strstr(left, want), "the leftover snapshot is still there: %s", left);
    snprintf(want, sizeof want, "sbx-fork-%.16s", other);
    cr_expect(strstr(left, want), "another key's snapshot was removed: %s", left);
    free(left);
    /* again, the sandbox gone: fine */
    cr_expect_eq(sbx_destroy(prov, "k-left-new", ref, NULL, &err), SBX_OK, "%s", err.message);
    ph_destroy(prov, "k-left-src", src);
}
