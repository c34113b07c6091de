/*
 * test_manifest_apply.c - a manifest materialized through the built `sbx`:
 * every entry type with its content and mode, the environment, a git ref,
 * on the local provider and (with SBX_TEST_DOCKER_HOST) on docker; the
 * manifest as part of a session's spec; a refused tree leaves no sandbox.
 */
#include "../cli/cli_harness.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static struct cli_env e;

static void write_file(const char *rel, const char *content, mode_t mode)
{
    char p[PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/%s", e.dir, rel);
    FILE *f = fopen(p, "w");
    cr_assert_not_null(f, "%s", p);
    fputs(content, f);
    fclose(f);
    cr_assert_eq(chmod(p, mode), 0);
}

/* Run a shell command in e.dir. */
static void sh(const char *cmd)
{
    char full[PATH_MAX + 1024];
    snprintf(full, sizeof full, "cd '%s' && %s", e.dir, cmd);
    cr_assert_eq(system(full), 0, "%s", full);
}

/* Sources under e.dir (granted by the configuration): a file, a tree and a
 * git repository whose tag v1 differs from its head. */
static void make_sources(void)
{
    sh("mkdir -p src/sub && printf 'deep\\n' > src/sub/deep.txt");
    write_file("src/top.sh", "#!/bin/sh\n", 0750);
    write_file("single.txt", "single\n", 0640);
    sh("git init -q repo && cd repo && printf 'v1\\n' > r.md && git add r.md && "
       "git -c user.email=t@t -c user.name=t commit -qm one && git tag v1 && "
       "printf 'v2\\n' > r.md && git -c user.email=t@t -c user.name=t commit -qam two");
    char m[PATH_MAX * 4 + 1024];
    snprintf(m, sizeof m,
             "version: 1\n"
             "environment: {GREETING: hello from the manifest}\n"
             "entries:\n"
             "  - {path: notes/readme.md, type: file, content: \"inline\\n\", mode: 0600}\n"
             "  - {path: blob.bin, type: file, encoding: base64, content: AAEC/w==}\n"
             "  - {path: cache, type: dir, mode: 0700}\n"
             "  - {path: single.txt, type: local_file, source: %s/single.txt}\n"
             "  - {path: tree, type: local_dir, source: %s/src}\n"
             "  - {path: repo, type: git_repo, url: %s/repo, ref: v1}\n",
             e.dir, e.dir, e.dir);
    write_file("m.yaml", m, 0644);
}

static void config(const char *provider_yaml)
{
    char yaml[PATH_MAX + 4096];
    snprintf(yaml, sizeof yaml,
             "manifest:\n  grants: [\"%s\"]\n%s", e.dir, provider_yaml);
    cli_env_write_config(&e, yaml);
}

static const char *probe =
    "echo \"$GREETING\"; cat notes/readme.md; od -An -tx1 blob.bin | tr -d ' \\n'; echo;"
    " cat single.txt tree/sub/deep.txt repo/r.md;"
    " ls -A repo; stat -c '%a %n' notes/readme.md single.txt tree/top.sh cache";

static const char *expected =
    "hello from the manifest\n"
    "inline\n"
    "000102ff\n"
    "single\ndeep\nv1\n"
    "r.md\n"
    "600 notes/readme.md\n640 single.txt\n750 tree/top.sh\n700 cache\n";

static void materializes_every_entry(void)
{
    make_sources();
    char mpath[PATH_MAX + 32];
    snprintf(mpath, sizeof mpath, "%s/m.yaml", e.dir);
    struct cli_result r;
    cli_run(&e, (const char *[]){"run", "--manifest", mpath, "--", "sh", "-c", probe, NULL},
            NULL, 120000, &r);
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    cr_assert_str_eq(r.out, expected);
    cli_result_free(&r);
}

static void setup_local(void)
{
    cli_env_init(&e);
    config("default_provider: local\nproviders:\n  local:\n    root: @ROOT@\n");
}

static void teardown(void)
{
    cli_env_fini(&e);
}

TestSuite(manifest_local, .init = setup_local, .fini = teardown, .timeout = 120);

Test(manifest_local, run_materializes_every_entry)
{
    materializes_every_entry();
    cr_assert_eq(cli_dir_entries(e.ws_root), 0, "sbx run left its workspace");
}

/* The same workspace written in the SDK's shape materializes the same. */
Test(manifest_local, the_sdk_shape_materializes_the_same)
{
    make_sources();
    char m[PATH_MAX * 4 + 1024];
    snprintf(m, sizeof m,
             "version: 1\n"
             "environment: {GREETING: hello from the manifest}\n"
             "entries:\n"
             "  notes: {type: dir, children: {readme.md: {type: file, content: \"inline\\n\","
             " permissions: -rw-------}}}\n"
             "  blob.bin: {type: file, encoding: base64, content: AAEC/w==}\n"
             "  cache: {type: dir, permissions: {owner: 7}}\n"
             "  single.txt: {type: local_file, src: %s/single.txt}\n"
             "  tree: {type: local_dir, src: %s/src}\n"
             "  repo: {type: git_repo, url: %s/repo, ref: v1}\n"
             "  tool.sh: {type: file, content: \"#!/bin/sh\\necho tool\\n\", executable: true}\n",
             e.dir, e.dir, e.dir);
    write_file("sdk.yaml", m, 0644);
    char mpath[PATH_MAX + 32], probe2[2048];
    snprintf(mpath, sizeof mpath, "%s/sdk.yaml", e.dir);
    snprintf(probe2, sizeof probe2, "%s; ./tool.sh; stat -c '%%a' tool.sh", probe);
    struct cli_result r;
    cli_run(&e, (const char *[]){"run", "--manifest", mpath, "--", "sh", "-c", probe2, NULL},
            NULL, 120000, &r);
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    char want[1024];
    snprintf(want, sizeof want, "%stool\n755\n", expected);
    cr_assert_str_eq(r.out, want);
    cli_result_free(&r);
}

Test(manifest_local, a_symlink_in_a_tree_stops_the_run_and_leaves_nothing)
{
    sh("mkdir -p src && ln -s /etc/passwd src/link");
    char m[PATH_MAX + 200];
    snprintf(m, sizeof m, "version: 1\nentries:\n  - {path: t, type: local_dir, source: %s/src}\n",
             e.dir);
    write_file("m.yaml", m, 0644);
    char mpath[PATH_MAX + 32];
    snprintf(mpath, sizeof mpath, "%s/m.yaml", e.dir);
    struct cli_result r;
    cli_run(&e, (const char *[]){"run", "--manifest", mpath, "--", "true", NULL}, NULL,
            60000, &r);
    cr_assert_eq(r.status, 125);
    cr_assert(strstr(r.err, "entry t: link: a symlink"), "%s", r.err);
    cli_result_free(&r);
    cr_assert_eq(cli_dir_entries(e.ws_root), 0, "a refused manifest left a workspace");
}

Test(manifest_local, a_source_outside_the_grants_is_refused_before_anything_runs)
{
    write_file("m.yaml", "version: 1\nentries:\n  - {path: p, type: local_file, source: /etc/passwd}\n",
               0644);
    char mpath[PATH_MAX + 32];
    snprintf(mpath, sizeof mpath, "%s/m.yaml", e.dir);
    struct cli_result r;
    cli_run(&e, (const char *[]){"run", "--manifest", mpath, "--", "true", NULL}, NULL,
            60000, &r);
    cr_assert_eq(r.status, 125);
    cr_assert(strstr(r.err, "m.yaml:3: entry p: source \"/etc/passwd\" is outside"), "%s",
              r.err);
    cli_result_free(&r);
    cr_assert_eq(cli_dir_entries(e.ws_root), 0);
}

Test(manifest_local, the_manifest_is_part_of_the_session_spec)
{
    make_sources();
    char mpath[PATH_MAX + 32];
    snprintf(mpath, sizeof mpath, "%s/m.yaml", e.dir);
    struct cli_result r;
    cli_run(&e, (const char *[]){"create", "mf", "--manifest", mpath, NULL}, NULL, 60000, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, "created\n");
    cli_result_free(&r);
    cli_run(&e, (const char *[]){"create", "mf", "--manifest", mpath, NULL}, NULL, 60000, &r);
    cr_assert_str_eq(r.out, "exists\n", "%s", r.err);
    cli_result_free(&r);
    /* exec with the manifest: its environment; the files are there */
    cli_run(&e, (const char *[]){"exec", "mf", "--manifest", mpath, "--", "sh", "-c", probe,
                                 NULL},
            NULL, 60000, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, expected);
    cli_result_free(&r);
    /* another manifest is another spec: refused, nothing run */
    write_file("m2.yaml", "version: 1\nentries:\n  - {path: other, type: dir}\n", 0644);
    char m2[PATH_MAX + 32];
    snprintf(m2, sizeof m2, "%s/m2.yaml", e.dir);
    cli_run(&e, (const char *[]){"create", "mf", "--manifest", m2, NULL}, NULL, 60000, &r);
    cr_assert_eq(r.status, 125);
    cr_assert(strstr(r.err, "another spec"), "%s", r.err);
    cli_result_free(&r);
    cli_run(&e, (const char *[]){"exec", "mf", "--manifest", m2, "--", "touch", "ran", NULL},
            NULL, 60000, &r);
    cr_assert_eq(r.status, 125);
    cli_result_free(&r);
    cli_run(&e, (const char *[]){"read", "mf", "ran", NULL}, NULL, 60000, &r);
    cr_assert_neq(r.status, 0, "a command ran under another manifest");
    cli_result_free(&r);
    cli_run(&e, (const char *[]){"destroy", "mf", NULL}, NULL, 60000, &r);
    cli_result_free(&r);
}

/* A secret in sbx's environment (where provider credentials live). */
#define SECRET "s3cr3t-never-stored-0123456789"

static bool file_contains(const char *path, const char *needle)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return false;
    size_t nl = strlen(needle), have = 0;
    char buf[65536 + 64];
    bool found = false;
    for (;;) {
        size_t n = fread(buf + have, 1, sizeof buf - have - 1, f);
        if (n == 0)
            break;
        have += n;
        buf[have] = '\0';
        if (memmem(buf, have, needle, nl)) {
            found = true;
            break;
        }
        /* keep the tail: a match may straddle two reads */
        size_t keep = have < nl ? have : nl;
        memmove(buf, buf + have - keep, keep);
        have = keep;
    }
    fclose(f);
    return found;
}

Test(manifest_local, state_and_resume_need_the_trusted_manifest_and_hold_no_secret)
{
    make_sources();
    cli_env_setenv(&e, "E2B_API_KEY", SECRET);
    cli_env_setenv(&e, "DAYTONA_API_KEY", SECRET);
    char mpath[PATH_MAX + 32], m2[PATH_MAX + 32];
    snprintf(mpath, sizeof mpath, "%s/m.yaml", e.dir);
    write_file("m2.yaml", "version: 1\nentries:\n  - {path: x, type: dir}\n", 0644);
    snprintf(m2, sizeof m2, "%s/m2.yaml", e.dir);
    struct cli_result r;
    cli_run(&e, (const char *[]){"create", "st", "--manifest", mpath, NULL}, NULL, 60000, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_null(strstr(r.err, SECRET));
    cli_result_free(&r);
    cli_run(&e, (const char *[]){"state", "st", NULL}, NULL, 60000, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "\"provider\":\"local\""), "%s", r.out);
    cr_assert(strstr(r.out, "\"manifest_digest\":\""), "%s", r.out);
    cr_assert_null(strstr(r.out, SECRET), "a secret in the state");
    cr_assert_null(strstr(r.out, e.dir), "a host path in the state: %s", r.out);
    cli_result_free(&r);
    /* resume: only with the trusted manifest */
    cli_run(&e, (const char *[]){"resume", "st", NULL}, NULL, 60000, &r);
    cr_assert_eq(r.status, 125);
    cr_assert(strstr(r.err, "none was given"), "%s", r.err);
    cli_result_free(&r);
    cli_run(&e, (const char *[]){"resume", "st", "--manifest", m2, NULL}, NULL, 60000, &r);
    cr_assert_eq(r.status, 125);
    cr_assert(strstr(r.err, "this manifest differs"), "%s", r.err);
    cli_result_free(&r);
    cli_run(&e, (const char *[]){"resume", "st", "--manifest", mpath, NULL}, NULL, 60000, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, "resumed\n");
    cli_result_free(&r);
    /* a session made without a manifest resumes without one */
    cli_run(&e, (const char *[]){"create", "plain", NULL}, NULL, 60000, &r);
    cli_result_free(&r);
    cli_run(&e, (const char *[]){"resume", "plain", NULL}, NULL, 60000, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cli_result_free(&r);
    cli_run(&e, (const char *[]){"resume", "plain", "--manifest", mpath, NULL}, NULL, 60000,
            &r);
    cr_assert_eq(r.status, 125);
    cli_result_free(&r);
    /* the secret is nowhere in the store */
    char db[PATH_MAX + 64];
    snprintf(db, sizeof db, "%s/sbx/sbx.db", e.state);
    cr_assert_eq(access(db, R_OK), 0, "no store at %s", db);
    cr_assert_not(file_contains(db, SECRET), "a secret in the store");
    char wal[PATH_MAX + 80];
    snprintf(wal, sizeof wal, "%s-wal", db);
    cr_assert_not(file_contains(wal, SECRET), "a secret in the store's log");
    cli_run(&e, (const char *[]){"destroy", "st", NULL}, NULL, 60000, &r);
    cli_result_free(&r);
    cli_run(&e, (const char *[]){"state", "st", NULL}, NULL, 60000, &r);
    cr_assert_eq(r.status, 125, "a destroyed session still has a state");
    cli_result_free(&r);
}

Test(manifest_local, users_are_refused_at_admission)
{
    write_file("m.yaml", "version: 1\nusers: [{name: agent}]\nrun_as: agent\n", 0644);
    char mpath[PATH_MAX + 32];
    snprintf(mpath, sizeof mpath, "%s/m.yaml", e.dir);
    struct cli_result r;
    cli_run(&e, (const char *[]){"create", "u", "--manifest", mpath, NULL}, NULL, 60000, &r);
    cr_assert_eq(r.status, 125);
    cr_assert(strstr(r.err, "provider \"local\" lacks capability users"), "%s", r.err);
    cli_result_free(&r);
    cr_assert_eq(cli_dir_entries(e.ws_root), 0, "something was provisioned");
    /* sbx run: refused before a sandbox is made, too */
    cli_run(&e, (const char *[]){"run", "--manifest", mpath, "--", "true", NULL}, NULL,
            60000, &r);
    cr_assert_eq(r.status, 125);
    cr_assert(strstr(r.err, "provider \"local\" lacks capability users"), "%s", r.err);
    cli_result_free(&r);
    cr_assert_eq(cli_dir_entries(e.ws_root), 0, "something was provisioned");
}

static void setup_docker(void)
{
    if (!getenv("SBX_TEST_DOCKER_HOST") || !*getenv("SBX_TEST_DOCKER_HOST"))
        cr_skip_test("SBX_TEST_DOCKER_HOST is not set");
    cli_env_init(&e);
    char head[PATH_MAX + 64];
    snprintf(head, sizeof head, "manifest:\n  grants: [\"%s\"]\n", e.dir);
    cli_env_docker_config(&e, head);
}

TestSuite(manifest_docker, .init = setup_docker, .fini = teardown, .timeout = 240);

Test(manifest_docker, run_materializes_every_entry)
{
    materializes_every_entry();
}

/* users, groups, run_as on docker (through the agent): the manifest below
 * has a read-only directory (root's, 0555) with a read-only file, a
 * root-only file, a group-writable directory, and runs everything as
 * agent (uid 1500, supplementary group dev). */
static const char *users_manifest =
    "version: 1\n"
    "groups: [{name: dev, gid: 2000}]\n"
    "users: [{name: agent, uid: 1500, groups: [dev]}]\n"
    "run_as: agent\n"
    "entries:\n"
    "  - {path: ro, type: dir, mode: 0555}\n"
    "  - {path: ro/data.txt, type: file, content: \"original\\n\", mode: 0444}\n"
    "  - {path: secret.txt, type: file, content: \"root only\\n\", mode: 0600}\n"
    "  - {path: shared, type: dir, mode: 0775, group: dev}\n";

/* `sbx exec SESSION -- sh -c SCRIPT`: its result (the caller frees it). */
static void exec_sh(const char *session, const char *script, struct cli_result *r)
{
    cli_run(&e, (const char *[]){"exec", session, "--", "sh", "-c", script, NULL}, NULL,
            60000, r);
}

Test(manifest_docker, run_as_applies_to_every_command_and_file_operation)
{
    write_file("m.yaml", users_manifest, 0644);
    char mpath[PATH_MAX + 32];
    snprintf(mpath, sizeof mpath, "%s/m.yaml", e.dir);
    struct cli_result r;
    cli_run(&e, (const char *[]){"create", "u", "--manifest", mpath, NULL}, NULL, 120000, &r);
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    cli_result_free(&r);

    /* every `sbx` below is a later process: it learns run_as from the store */
    exec_sh("u", "id -u; id -g; id -G; echo \"$HOME\"; stat -c '%U %a' /home/agent", &r);
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    cr_assert_str_eq(r.out, "1500\n1500\n1500 2000\n/home/agent\nagent 750\n");
    cli_result_free(&r);

    /* the read-only entry: writing, replacing and removing all fail */
    exec_sh("u", "echo changed > ro/data.txt", &r);
    cr_assert_neq(r.status, 0, "a write into a read-only entry succeeded");
    cli_result_free(&r);
    exec_sh("u", "echo changed > t && mv -f t ro/data.txt", &r);
    cr_assert_neq(r.status, 0, "a read-only entry was replaced");
    cli_result_free(&r);
    exec_sh("u", "rm -f ro/data.txt", &r);
    cr_assert_neq(r.status, 0, "a read-only entry was removed");
    cli_result_free(&r);
    cli_run(&e, (const char *[]){"read", "u", "ro/data.txt", NULL}, NULL, 60000, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, "original\n", "the read-only entry changed");
    cli_result_free(&r);
    exec_sh("u", "stat -c '%U %G %a' ro ro/data.txt shared secret.txt .", &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, "root root 555\nroot root 444\nroot dev 775\nroot root 600\n"
                            "agent root 755\n");
    cli_result_free(&r);
    /* the group gives its members what its mode says */
    exec_sh("u", "echo mine > shared/f && cat shared/f", &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, "mine\n");
    cli_result_free(&r);

    /* sbx write: the file is run_as's */
    cli_run(&e, (const char *[]){"write", "u", "written.txt", NULL}, "by the cli\n", 60000, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cli_result_free(&r);
    exec_sh("u", "stat -c '%u %g' written.txt", &r);
    cr_assert_str_eq(r.out, "1500 1500\n");
    cli_result_free(&r);
    /* ... and a write where run_as may not write is refused */
    cli_run(&e, (const char *[]){"write", "u", "ro/new.txt", NULL}, "x\n", 60000, &r);
    cr_assert_eq(r.status, 125, "a write into the read-only entry succeeded");
    cr_assert(strstr(r.err, "ermission denied"), "%s", r.err);
    cli_result_free(&r);
    /* sbx read of a root-only file: refused */
    cli_run(&e, (const char *[]){"read", "u", "secret.txt", NULL}, NULL, 60000, &r);
    cr_assert_eq(r.status, 125, "run_as read a root-only file");
    cr_assert(strstr(r.err, "ermission denied"), "%s", r.err);
    cr_assert_eq(r.out[0], '\0', "some of the root-only file came out: %s", r.out);
    cli_result_free(&r);

    /* sbx state says who the session runs as */
    cli_run(&e, (const char *[]){"state", "u", NULL}, NULL, 60000, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "\"run_as\":\"agent\""), "%s", r.out);
    cli_result_free(&r);
    cli_run(&e, (const char *[]){"destroy", "u", NULL}, NULL, 60000, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cli_result_free(&r);
}

Test(manifest_docker, sbx_run_runs_its_command_as_run_as)
{
    write_file("m.yaml", users_manifest, 0644);
    char mpath[PATH_MAX + 32];
    snprintf(mpath, sizeof mpath, "%s/m.yaml", e.dir);
    struct cli_result r;
    cli_run(&e, (const char *[]){"run", "--manifest", mpath, "--", "sh", "-c",
                                 "id -un; echo x > ro/data.txt || cat ro/data.txt", NULL},
            NULL, 120000, &r);
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    cr_assert_str_eq(r.out, "agent\noriginal\n");
    cli_result_free(&r);
}

/* Without the agent the docker provider cannot act as a user: the
 * manifest's first group stops the create with that reason, and the
 * half-made sandbox is never published. */
Test(manifest_docker, without_the_agent_users_are_refused_clearly)
{
    const char *host = getenv("SBX_TEST_DOCKER_HOST");
    const char *img = getenv("SBX_TEST_DOCKER_IMAGE");
    char yaml[4096];
    snprintf(yaml, sizeof yaml,
             "default_provider: docker\nproviders:\n  docker:\n    host: \"%s\"\n"
             "    image: \"%s\"\n    resource_dir: \"@ROOT@\"\n    agent: false\n",
             host, img && *img ? img : "sbx-test:busybox");
    cli_env_write_config(&e, yaml);
    write_file("m.yaml", users_manifest, 0644);
    char mpath[PATH_MAX + 32];
    snprintf(mpath, sizeof mpath, "%s/m.yaml", e.dir);
    struct cli_result r;
    cli_run(&e, (const char *[]){"create", "na", "--manifest", mpath, NULL}, NULL, 120000, &r);
    cr_assert_eq(r.status, 125, "exit %d: %s", r.status, r.err);
    cr_assert(strstr(r.err, "group dev") && strstr(r.err, "runs without the sbx agent"), "%s",
              r.err);
    cli_result_free(&r);
    cli_run(&e, (const char *[]){"state", "na", NULL}, NULL, 60000, &r);
    cr_assert_eq(r.status, 125, "a sandbox whose manifest failed was published: %s", r.out);
    cli_result_free(&r);
    /* the reconciler removes what the failed create left */
    cli_run(&e, (const char *[]){"reconcile", NULL}, NULL, 60000, &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cli_result_free(&r);
}

/* ---- git_repo on the host: its clone, its limits, its prompts ----------- */

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>

extern char **environ;

static char tmpdir[PATH_MAX + 8];

/* sbx's TMPDIR, private to the test, so that what it leaves is seen. */
static void private_tmpdir(void)
{
    snprintf(tmpdir, sizeof tmpdir, "%s/tmp", e.dir);
    cr_assert_eq(mkdir(tmpdir, 0700), 0);
    cli_env_setenv(&e, "TMPDIR", tmpdir);
}

static void run_manifest(const char *text, int timeout_ms, struct cli_result *r)
{
    write_file("m.yaml", text, 0644);
    char mpath[PATH_MAX + 32];
    snprintf(mpath, sizeof mpath, "%s/m.yaml", e.dir);
    cli_run(&e, (const char *[]){"run", "--manifest", mpath, "--", "sh", "-c",
                                 "cat */r.md 2>/dev/null; cat f.txt t/f.txt 2>/dev/null; true",
                                 NULL},
            NULL, timeout_ms, r);
}

Test(manifest_local, the_host_clone_is_removed_after_success_and_after_failure)
{
    private_tmpdir();
    make_sources();
    char m[PATH_MAX + 256];
    snprintf(m, sizeof m, "version: 1\nentries:\n  - {path: c, type: git_repo, url: %s/repo}\n",
             e.dir);
    struct cli_result r;
    run_manifest(m, 60000, &r);
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    cr_assert_str_eq(r.out, "v2\n");
    cli_result_free(&r);
    cr_assert_eq(cli_dir_entries(tmpdir), 0, "a clone was left in TMPDIR after success");
    /* a ref that does not exist: the checkout step fails, named as such */
    snprintf(m, sizeof m,
             "version: 1\nentries:\n  - {path: c, type: git_repo, url: %s/repo, ref: nope}\n",
             e.dir);
    run_manifest(m, 60000, &r);
    cr_assert_eq(r.status, 125, "exit %d: %s", r.status, r.err);
    cr_assert(strstr(r.err, "entry c: git ls-tree of nope in ") && strstr(r.err, " failed: "),
              "%s", r.err);
    cr_assert_null(strstr(r.err, ": -c"), "%s", r.err);
    cli_result_free(&r);
    cr_assert_eq(cli_dir_entries(tmpdir), 0, "a clone was left in TMPDIR after a failure");
}

Test(manifest_local, a_clone_or_tree_over_the_size_limit_is_refused_naming_it)
{
    char yaml[PATH_MAX + 512];
    snprintf(yaml, sizeof yaml,
             "manifest:\n  grants: [\"%s\"]\n  max_bytes: 1m\n"
             "default_provider: local\nproviders:\n  local:\n    root: @ROOT@\n",
             e.dir);
    cli_env_write_config(&e, yaml);
    private_tmpdir();
    /* 3 MiB of zeros: a few KiB of objects */
    sh("git init -q big && cd big && head -c 3145728 /dev/zero > z && git add z && "
       "git -c user.email=t@t -c user.name=t commit -qm z");
    char m[PATH_MAX + 256];
    snprintf(m, sizeof m, "version: 1\nentries:\n  - {path: c, type: git_repo, url: %s/big}\n",
             e.dir);
    struct cli_result r;
    run_manifest(m, 60000, &r);
    cr_assert_eq(r.status, 125, "exit %d: %s", r.status, r.err);
    cr_assert(strstr(r.err, "entry c: git repository ") &&
                  strstr(r.err, "/big: the work tree of HEAD is larger than the limit of "
                                "1048576 bytes (manifest.max_bytes)"),
              "%s", r.err);
    cli_result_free(&r);
    cr_assert_eq(cli_dir_entries(tmpdir), 0, "a clone was left in TMPDIR");
    /* the same for a local_dir */
    snprintf(m, sizeof m, "version: 1\nentries:\n  - {path: t, type: local_dir, source: %s/big}\n",
             e.dir);
    run_manifest(m, 60000, &r);
    cr_assert_eq(r.status, 125, "exit %d: %s", r.status, r.err);
    cr_assert(strstr(r.err, "entry t: source \"") &&
                  strstr(r.err, "/big\" is larger than the limit of 1048576 bytes "
                                "(manifest.max_bytes)"),
              "%s", r.err);
    cli_result_free(&r);
}

/* Start python3 SCRIPT PORTFILE; returns its pid and the port it wrote. */
static pid_t start_server(const char *script, int *port)
{
    char spath[PATH_MAX + 32], ppath[PATH_MAX + 32];
    snprintf(spath, sizeof spath, "%s/srv.py", e.dir);
    snprintf(ppath, sizeof ppath, "%s/port", e.dir);
    write_file("srv.py", script, 0644);
    pid_t pid;
    char *argv[] = {"python3", spath, ppath, NULL};
    cr_assert_eq(posix_spawnp(&pid, "python3", NULL, NULL, argv, environ), 0);
    for (int i = 0; i < 100; i++) {
        FILE *f = fopen(ppath, "r");
        if (f && fscanf(f, "%d", port) == 1) {
            fclose(f);
            return pid;
        }
        if (f)
            fclose(f);
        usleep(50000);
    }
    kill(pid, SIGKILL);
    cr_assert_fail("the test server did not start");
    return -1;
}

static const char *server_401 =
    "import http.server, os, sys\n"
    "class H(http.server.BaseHTTPRequestHandler):\n"
    "    def do_GET(self):\n"
    "        self.send_response(401)\n"
    "        self.send_header('WWW-Authenticate', 'Basic realm=\"sbx\"')\n"
    "        self.send_header('Content-Length', '0')\n"
    "        self.end_headers()\n"
    "    do_POST = do_GET\n"
    "    def log_message(self, *a):\n"
    "        pass\n"
    "s = http.server.HTTPServer(('127.0.0.1', 0), H)\n"
    "open(sys.argv[1] + '.t', 'w').write(str(s.server_address[1]))\n"
    "os.rename(sys.argv[1] + '.t', sys.argv[1])\n"
    "s.serve_forever()\n";

Test(manifest_local, git_asks_no_one_for_credentials)
{
    private_tmpdir();
    /* a credential helper in the caller's git config: it must not run */
    char gc[PATH_MAX + 64], marker[PATH_MAX + 64], text[2 * PATH_MAX + 256];
    snprintf(marker, sizeof marker, "%s/helper-ran", e.dir);
    snprintf(gc, sizeof gc, "%s/.gitconfig", e.home);
    snprintf(text, sizeof text,
             "[credential]\n\thelper = \"!f() { touch '%s'; echo username=u; echo "
             "password=p; }; f\"\n",
             marker);
    FILE *f = fopen(gc, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
    int port;
    pid_t srv = start_server(server_401, &port);
    char m[512];
    snprintf(m, sizeof m,
             "version: 1\nentries:\n  - {path: c, type: git_repo, url: "
             "'http://127.0.0.1:%d/r.git'}\n",
             port);
    long long t0 = cli_now_ms();
    struct cli_result r;
    run_manifest(m, 30000, &r);
    long long took = cli_now_ms() - t0;
    kill(srv, SIGKILL);
    waitpid(srv, NULL, 0);
    cr_assert_eq(r.status, 125, "exit %d: %s", r.status, r.err);
    char want[128];
    snprintf(want, sizeof want, "entry c: git clone of http://127.0.0.1:%d/r.git failed: ", port);
    cr_assert(strstr(r.err, want), "%s", r.err);
    cr_assert_eq(access(marker, F_OK), -1, "the caller's credential helper ran");
    cr_assert_lt(took, 15000, "took %lld ms", took);
    cli_result_free(&r);
    cr_assert_eq(cli_dir_entries(tmpdir), 0, "a clone was left in TMPDIR");
}

/* A TCP port on 127.0.0.1 that accepts connections (the kernel does) and
 * never says anything. */
static int silent_port(int *port)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof a;
    cr_assert(s >= 0 && bind(s, (struct sockaddr *)&a, sizeof a) == 0 && listen(s, 4) == 0 &&
              getsockname(s, (struct sockaddr *)&a, &l) == 0);
    *port = ntohs(a.sin_port);
    return s;
}

/* The connection git's ssh made is closed: ssh is gone. */
static void assert_peer_gone(int lsock)
{
    struct pollfd p = {lsock, POLLIN, 0};
    cr_assert_gt(poll(&p, 1, 5000), 0, "ssh never connected");
    int c = accept(lsock, NULL, NULL);
    cr_assert(c >= 0);
    /* ssh sends its version line first: read to the end */
    for (;;) {
        struct pollfd q = {c, POLLIN, 0};
        char b[256];
        cr_assert_gt(poll(&q, 1, 3000), 0, "ssh is still connected: a process was left behind");
        ssize_t n = read(c, b, sizeof b);
        if (n <= 0)
            break;
    }
    close(c);
}

Test(manifest_local, a_silent_ssh_server_times_out_and_leaves_no_process)
{
    char yaml[PATH_MAX + 512];
    snprintf(yaml, sizeof yaml,
             "manifest:\n  git_timeout: 2\n"
             "default_provider: local\nproviders:\n  local:\n    root: @ROOT@\n");
    cli_env_write_config(&e, yaml);
    private_tmpdir();
    int port, lsock = silent_port(&port);
    char m[512];
    snprintf(m, sizeof m,
             "version: 1\nentries:\n  - {path: c, type: git_repo, url: "
             "'ssh://git@127.0.0.1:%d/r.git'}\n",
             port);
    long long t0 = cli_now_ms();
    struct cli_result r;
    run_manifest(m, 20000, &r);
    long long took = cli_now_ms() - t0;
    cr_assert_eq(r.status, 125, "exit %d: %s", r.status, r.err);
    cr_assert(strstr(r.err, "entry c: git clone of ssh://git@127.0.0.1:") &&
                  strstr(r.err, "timed out"),
              "%s", r.err);
    cr_assert_lt(took, 8000, "took %lld ms with a deadline of 2 s", took);
    cli_result_free(&r);
    assert_peer_gone(lsock);
    close(lsock);
    cr_assert_eq(cli_dir_entries(tmpdir), 0, "a clone was left in TMPDIR");
}

Test(manifest_local, sigterm_during_a_clone_kills_git_and_its_ssh)
{
    private_tmpdir();
    int port, lsock = silent_port(&port);
    char m[512], mpath[PATH_MAX + 32];
    snprintf(m, sizeof m,
             "version: 1\nentries:\n  - {path: c, type: git_repo, url: "
             "'ssh://git@127.0.0.1:%d/r.git'}\n",
             port);
    write_file("m.yaml", m, 0644);
    snprintf(mpath, sizeof mpath, "%s/m.yaml", e.dir);
    struct cli_proc p;
    cli_spawn(&e, (const char *[]){"run", "--manifest", mpath, "--", "true", NULL},
              CLI_STDIN_NULL, &p);
    struct pollfd pf = {lsock, POLLIN, 0};
    cr_assert_gt(poll(&pf, 1, 10000), 0, "ssh never connected");
    kill(p.pid, SIGTERM);
    int status = cli_wait(&p, 10000);
    cr_assert_eq(status, 128 + SIGTERM, "exit %d", status);
    assert_peer_gone(lsock);
    close(lsock);
    cr_assert_eq(cli_dir_entries(tmpdir), 0, "a clone was left in TMPDIR");
}

/* ---- local sources changed between the check and the apply ------------- */

#ifdef SBX_TEST_HOOKS
static void hook(const char *cmd)
{
    cli_env_setenv(&e, "SBX_TEST_MANIFEST_APPLY_HOOK", cmd);
}

/* A directory outside every grant, holding f.txt "outside". */
static void outside(char *out, size_t cap)
{
    snprintf(out, cap, "/tmp/sbx-outside-XXXXXX");
    cr_assert_not_null(mkdtemp(out));
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/f.txt", out);
    FILE *f = fopen(p, "w");
    fputs("outside\n", f);
    fclose(f);
}
#endif

Test(manifest_local, a_directory_swapped_for_a_symlink_after_the_check_is_not_followed)
{
#ifndef SBX_TEST_HOOKS
    cr_skip_test("built without SBX_TEST_HOOKS");
#else
    char out[64], cmd[PATH_MAX * 2], m[PATH_MAX + 256];
    outside(out, sizeof out);
    sh("mkdir -p d/t && printf 'inside\\n' > d/f.txt && printf 'inside\\n' > d/t/f.txt");
    snprintf(cmd, sizeof cmd, "cd '%s' && mv d d.orig && ln -s '%s' d && mkdir -p %s/t && "
                              "cp %s/f.txt %s/t/",
             e.dir, out, out, out, out);
    hook(cmd);
    snprintf(m, sizeof m, "version: 1\nentries:\n  - {path: f.txt, type: local_file, source: "
                          "%s/d/f.txt}\n",
             e.dir);
    struct cli_result r;
    run_manifest(m, 30000, &r);
    cr_assert_eq(r.status, 125, "exit %d: out %s err %s", r.status, r.out, r.err);
    cr_assert(strstr(r.err, "entry f.txt: source: a component of its path became a symlink"),
              "%s", r.err);
    cr_assert_null(strstr(r.out, "outside"), "a file outside the grants was copied");
    cli_result_free(&r);
    /* the same for a local_dir */
    sh("rm d && mv d.orig d");
    snprintf(m, sizeof m, "version: 1\nentries:\n  - {path: t, type: local_dir, source: "
                          "%s/d/t}\n",
             e.dir);
    run_manifest(m, 30000, &r);
    cr_assert_eq(r.status, 125, "exit %d: out %s err %s", r.status, r.out, r.err);
    cr_assert(strstr(r.err, "entry t: source: a component of its path became a symlink"),
              "%s", r.err);
    cr_assert_null(strstr(r.out, "outside"), "a tree outside the grants was copied");
    cli_result_free(&r);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", out);
    cr_assert_eq(system(cmd), 0);
#endif
}

Test(manifest_local, a_file_swapped_for_a_fifo_after_the_check_does_not_block)
{
#ifndef SBX_TEST_HOOKS
    cr_skip_test("built without SBX_TEST_HOOKS");
#else
    char cmd[PATH_MAX + 128], m[PATH_MAX + 256];
    write_file("f.txt", "inside\n", 0644);
    snprintf(cmd, sizeof cmd, "cd '%s' && rm f.txt && mkfifo f.txt", e.dir);
    hook(cmd);
    snprintf(m, sizeof m, "version: 1\nentries:\n  - {path: f.txt, type: local_file, source: "
                          "%s/f.txt}\n",
             e.dir);
    long long t0 = cli_now_ms();
    struct cli_result r;
    run_manifest(m, 15000, &r);
    cr_assert_eq(r.status, 125, "exit %d (-1: it hung): %s", r.status, r.err);
    cr_assert(strstr(r.err, "entry f.txt: source: is no longer a regular file"), "%s", r.err);
    cr_assert_lt(cli_now_ms() - t0, 10000);
    cli_result_free(&r);
#endif
}

/* A host repository that starts pointing at another one after the check:
 * git clones a checked copy of it, so the change is seen and refused. */
Test(manifest_local, a_repository_changed_after_the_check_is_refused)
{
#ifndef SBX_TEST_HOOKS
    cr_skip_test("built without SBX_TEST_HOOKS");
#else
    private_tmpdir();
    make_sources();
    sh("git init -q victim && cd victim && printf 'secret\\n' > r.md && git add r.md && "
       "git -c user.email=t@t -c user.name=t commit -qm s");
    char out[64], cmd[PATH_MAX * 3 + 256], m[PATH_MAX + 256];
    outside(out, sizeof out);
    snprintf(cmd, sizeof cmd, "mv '%s/victim' '%s/' && printf '%s/victim/.git\\n' > '%s/repo/.git/commondir'",
             e.dir, out, out, e.dir);
    hook(cmd);
    snprintf(m, sizeof m, "version: 1\nentries:\n  - {path: c, type: git_repo, url: %s/repo}\n",
             e.dir);
    struct cli_result r;
    run_manifest(m, 30000, &r);
    cr_assert_eq(r.status, 125, "exit %d: out %s err %s", r.status, r.out, r.err);
    cr_assert(strstr(r.err, "entry c: git repository ") &&
                  strstr(r.err, ".git/commondir names another repository"),
              "%s", r.err);
    cr_assert_null(strstr(r.out, "secret"), "another repository was cloned");
    cli_result_free(&r);
    cr_assert_eq(cli_dir_entries(tmpdir), 0, "a clone was left in TMPDIR");
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", out);
    cr_assert_eq(system(cmd), 0);
#endif
}

/* The same with sbx on a terminal (python's pty): git must not prompt on
 * it (git opens /dev/tty for "Username for ..." when it has one). */
Test(manifest_local, git_does_not_prompt_on_the_callers_terminal)
{
    private_tmpdir();
    int port;
    pid_t srv = start_server(server_401, &port);
    char m[512], script[12 * PATH_MAX], out[PATH_MAX + 32];
    snprintf(m, sizeof m,
             "version: 1\nentries:\n  - {path: c, type: git_repo, url: "
             "'http://127.0.0.1:%d/r.git'}\n",
             port);
    write_file("m.yaml", m, 0644);
    snprintf(out, sizeof out, "%s/tty.out", e.dir);
    snprintf(script, sizeof script,
             "cd '%s' && timeout -s KILL 20 python3 -c 'import pty, sys; "
             "sys.exit(pty.spawn(sys.argv[1:]) >> 8)' env -i PATH=/usr/local/bin:/usr/bin:/bin "
             "HOME='%s' SBX_CONFIG='%s' SBX_PLUGIN_PATH='%s' XDG_STATE_HOME='%s' TMPDIR='%s' "
             "LC_ALL=C '%s' run --manifest m.yaml -- true < /dev/null > '%s' 2>&1; "
             "echo \"exit $?\" >> '%s'",
             e.dir, e.home, e.config, e.plugin_path, e.state, tmpdir, CLI_SBX_BIN, out, out);
    long long t0 = cli_now_ms();
    cr_assert_eq(system(script), 0);
    long long took = cli_now_ms() - t0;
    kill(srv, SIGKILL);
    waitpid(srv, NULL, 0);
    char text[8192] = "";
    FILE *f = fopen(out, "r");
    cr_assert_not_null(f);
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    /* git's prompt is "Username for 'URL': "; its error without a terminal
     * says "could not read Username for" */
    for (const char *p = text; (p = strstr(p, "Username for")); p++)
        cr_assert(p - text >= 5 && !strncmp(p - 5, "read ", 5),
                  "git prompted on the terminal: %s", text);
    cr_assert(strstr(text, "git clone of http://127.0.0.1:") && strstr(text, "exit 125"),
              "%s", text);
    cr_assert_lt(took, 15000, "took %lld ms", took);
}
