/*
 * test_lifecycle_docker.c - session pause, transparent resume, idle
 * eviction, max_sandboxes and fork through the built `sbx` on the docker
 * provider against the daemon of SBX_TEST_DOCKER_HOST (skipped when
 * unset). Every `sbx` invocation is a worker of its own: a session paused
 * by one is resumed by another's command. The daemon's own view
 * (State.Paused) is read with the docker CLI.
 */
#include "cli_harness.h"

#include <criterion/criterion.h>
#include <json-c/json.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RUN(e, r, ...)                                        \
    do {                                                      \
        const char *args_[] = {__VA_ARGS__, NULL};            \
        cli_run((e), args_, NULL, 60000, (r));                \
    } while (0)

static void ok(struct cli_env *e, const char *const *args, const char *want_out)
{
    struct cli_result r;
    cli_run(e, args, NULL, 60000, &r);
    cr_assert_eq(r.status, 0, "sbx %s: status %d: %s%s", args[0], r.status, r.out, r.err);
    if (want_out)
        cr_assert_str_eq(r.out, want_out, "sbx %s: [%s]", args[0], r.out);
    cli_result_free(&r);
}

/* The session's container reference (sbx state). */
static void ref_of(struct cli_env *e, const char *key, char ref[128])
{
    struct cli_result r;
    RUN(e, &r, "state", key);
    cr_assert_eq(r.status, 0, "%s", r.err);
    json_object *o = json_tokener_parse(r.out), *v;
    cr_assert(o && json_object_object_get_ex(o, "reference", &v), "%s", r.out);
    snprintf(ref, 128, "%s", json_object_get_string(v));
    json_object_put(o);
    cli_result_free(&r);
}

/* The daemon's State.Paused of container ref. */
static bool daemon_paused(const char *ref)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "docker -H '%s' inspect -f '{{.State.Paused}}' '%s'",
             getenv("SBX_TEST_DOCKER_HOST"), ref);
    FILE *f = popen(cmd, "r");
    cr_assert_not_null(f);
    char line[64] = "";
    cr_assert_not_null(fgets(line, sizeof line, f));
    pclose(f);
    return !strncmp(line, "true", 4);
}

/* The session's paused mark as `sbx sessions --json` shows it. */
static bool listed_paused(struct cli_env *e, const char *key)
{
    struct cli_result r;
    RUN(e, &r, "sessions", "--json");
    cr_assert_eq(r.status, 0, "%s", r.err);
    json_object *o = json_tokener_parse(r.out);
    cr_assert(o && json_object_is_type(o, json_type_array), "%s", r.out);
    bool paused = false, seen = false;
    for (size_t i = 0; i < json_object_array_length(o); i++) {
        json_object *s = json_object_array_get_idx(o, i), *k, *p;
        if (json_object_object_get_ex(s, "session", &k) &&
            !strcmp(json_object_get_string(k), key)) {
            seen = true;
            cr_assert(json_object_object_get_ex(s, "paused", &p), "%s", r.out);
            paused = json_object_get_boolean(p);
        }
    }
    cr_assert(seen, "%s not listed: %s", key, r.out);
    json_object_put(o);
    cli_result_free(&r);
    return paused;
}

static void env_with(struct cli_env *e, const char *provider_keys)
{
    cli_env_init(e);
    char head[PATH_MAX + 64];
    snprintf(head, sizeof head, "store: { driver: sqlite, path: %s/db }\n", e->home);
    cli_env_docker_config(e, head);
    FILE *f = fopen(e->config, "a");
    cr_assert_not_null(f);
    fputs(provider_keys, f);
    fclose(f);
}

Test(lifecycle_docker, pause_resume_by_another_worker_fork, .timeout = 180)
{
    struct cli_env e;
    env_with(&e, "");
    ok(&e, (const char *const[]){"exec", "s1", "--", "sh", "-c", "echo one > f", NULL}, "");
    char ref[128];
    ref_of(&e, "s1", ref);
    ok(&e, (const char *const[]){"pause", "s1", NULL}, "paused\n");
    cr_assert(daemon_paused(ref), "the container is not paused");
    cr_assert(listed_paused(&e, "s1"));
    ok(&e, (const char *const[]){"pause", "s1", NULL}, "paused\n"); /* idempotent */
    /* another worker's command resumes it */
    ok(&e, (const char *const[]){"exec", "s1", "--", "cat", "f", NULL}, "one\n");
    cr_assert_not(daemon_paused(ref), "still paused after a command");
    cr_assert_not(listed_paused(&e, "s1"));
    /* explicit resume */
    ok(&e, (const char *const[]){"pause", "s1", NULL}, "paused\n");
    ok(&e, (const char *const[]){"resume", "s1", NULL}, "resumed\n");
    cr_assert_not(daemon_paused(ref));
    /* fork: a copy, then two independent workspaces */
    ok(&e, (const char *const[]){"fork", "s1", "s2", NULL}, "forked (native)\n");
    ok(&e, (const char *const[]){"exec", "s2", "--", "cat", "f", NULL}, "one\n");
    ok(&e, (const char *const[]){"exec", "s2", "--", "sh", "-c", "echo two > f", NULL}, "");
    ok(&e, (const char *const[]){"exec", "s1", "--", "cat", "f", NULL}, "one\n");
    char ref2[128];
    ref_of(&e, "s2", ref2);
    cr_assert_str_neq(ref, ref2, "the fork shares the container");
    struct cli_result r;
    RUN(&e, &r, "fork", "s1", "s2");
    cr_assert_neq(r.status, 0, "a fork onto an existing session");
    cli_result_free(&r);
    ok(&e, (const char *const[]){"destroy", "s1", NULL}, NULL);
    ok(&e, (const char *const[]){"destroy", "s2", NULL}, NULL);
    cli_env_fini(&e);
}

Test(lifecycle_docker, idle_pause_then_max_sandboxes, .timeout = 180)
{
    struct cli_env e;
    env_with(&e, "    idle_pause: 1ms\n    max_sandboxes: 2\n");
    ok(&e, (const char *const[]){"exec", "a", "--", "true", NULL}, "");
    ok(&e, (const char *const[]){"exec", "b", "--", "true", NULL}, "");
    struct cli_result r;
    RUN(&e, &r, "exec", "c", "--", "true");
    cr_assert_neq(r.status, 0, "a third sandbox past max_sandboxes 2");
    cr_assert(strstr(r.err, "max_sandboxes (2)"), "%s", r.err);
    cli_result_free(&r);
    RUN(&e, &r, "reconcile");
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_assert(strstr(r.out, "2 paused"), "%s", r.out);
    cli_result_free(&r);
    char ref[128];
    ref_of(&e, "a", ref);
    cr_assert(daemon_paused(ref), "idle_pause did not pause the container");
    ok(&e, (const char *const[]){"exec", "a", "--", "echo", "up", NULL}, "up\n");
    ok(&e, (const char *const[]){"destroy", "a", NULL}, NULL);
    ok(&e, (const char *const[]){"exec", "c", "--", "true", NULL}, "");
    ok(&e, (const char *const[]){"destroy", "b", NULL}, NULL);
    ok(&e, (const char *const[]){"destroy", "c", NULL}, NULL);
    cli_env_fini(&e);
}

/* The output of a shell command on this machine (trailing newline kept). */
static void host_out(const char *cmd, char *out, size_t cap)
{
    FILE *f = popen(cmd, "r");
    cr_assert_not_null(f);
    size_t n = fread(out, 1, cap - 1, f);
    out[n] = '\0';
    pclose(f);
}

/* How many images the fork made are left on the daemon (tagged or not). */
static int fork_images_left(void)
{
    char cmd[1024], out[4096];
    snprintf(cmd, sizeof cmd,
             "docker -H '%s' images -a --no-trunc --format '{{.Repository}} {{.ID}}' | "
             "grep -c '^sbx-fork ' ; docker -H '%s' images -a -f dangling=true -q | wc -l",
             getenv("SBX_TEST_DOCKER_HOST"), getenv("SBX_TEST_DOCKER_HOST"));
    host_out(cmd, out, sizeof out);
    int tagged = 0, dangling = 0;
    sscanf(out, "%d %d", &tagged, &dangling);
    return tagged + dangling;
}

/* fork_images_left() once it is back at `want` or below, or after 10 s:
 * the count is the daemon's, and the docker conformance runs beside this
 * test make native forks of their own, whose image is tagged sbx-fork
 * while the fork is being made (this test failed once, most likely on
 * one, in a full run; one in
 * flight when `want` was counted makes it higher). A leftover of ours
 * stays, so it still fails. */
static int fork_images_settled(int want)
{
    int n = fork_images_left();
    for (int i = 0; i < 50 && n > want; i++) {
        usleep(200 * 1000);
        n = fork_images_left();
    }
    return n;
}

/* The native fork (docker commit): modes, symlinks (kept as links, out of
 * the workspace too), a FIFO, a big file, from a paused source; no write
 * crosses; each destroy leaves the other; no image is
 * left once both are gone. */
Test(lifecycle_docker, native_fork_of_a_hostile_paused_source, .timeout = 240)
{
    struct cli_env e;
    env_with(&e, "");
    int images0 = fork_images_left();
    ok(&e, (const char *const[]){"exec", "h1", "--", "sh", "-c",
                                 "rm -rf esc up run.sh secret pipe d big n; echo x > run.sh && chmod 0751 run.sh && "
                                 "echo s > secret && chmod 0600 secret && "
                                 "ln -s /etc/passwd esc && ln -s ../../.. up && "
                                 "mkfifo pipe && mkdir -p d/e && echo deep > d/e/f && "
                                 "dd if=/dev/zero of=big bs=1M count=64 2>/dev/null",
                                 NULL},
       "");
    char ref[128];
    ref_of(&e, "h1", ref);
    ok(&e, (const char *const[]){"pause", "h1", NULL}, "paused\n");
    struct cli_result r;
    RUN(&e, &r, "fork", "--json", "h1", "h2");
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_assert(strstr(r.out, "\"native\""), "%s", r.out);
    cli_result_free(&r);
    /* the session attach of the source resumed it (as every attach does)
     * before the commit */
    ok(&e, (const char *const[]){"exec", "h2", "--", "sh", "-c",
                                 "stat -c '%a %F %n' run.sh secret pipe big d/e/f; "
                                 "readlink esc; readlink up; cat d/e/f; wc -c < big",
                                 NULL},
       "751 regular file run.sh\n600 regular file secret\n644 fifo pipe\n"
       "644 regular file big\n644 regular file d/e/f\n/etc/passwd\n../../..\ndeep\n"
       "67108864\n");
    ok(&e, (const char *const[]){"exec", "h2", "--", "sh", "-c", "echo two > d/e/f", NULL},
       "");
    ok(&e, (const char *const[]){"exec", "h1", "--", "sh", "-c", "cat d/e/f; echo one > n",
                                 NULL},
       "deep\n");
    ok(&e, (const char *const[]){"exec", "h2", "--", "sh", "-c", "test ! -e n && cat d/e/f",
                                 NULL},
       "two\n");
    char ref2[128];
    ref_of(&e, "h2", ref2);
    char cmd[1024], out[1024];
    snprintf(cmd, sizeof cmd, "docker -H '%s' inspect -f '{{index .Config.Labels \"sbx.owner\"}}' '%s' '%s'",
             getenv("SBX_TEST_DOCKER_HOST"), ref, ref2);
    host_out(cmd, out, sizeof out);
    char *nl = strchr(out, '\n');
    cr_assert(nl && strncmp(out, nl + 1, (size_t)(nl - out)) != 0,
              "the fork carries the source's owner label: %s", out);
    ok(&e, (const char *const[]){"destroy", "h1", NULL}, NULL);
    ok(&e, (const char *const[]){"exec", "h2", "--", "cat", "run.sh", NULL}, "x\n");
    ok(&e, (const char *const[]){"destroy", "h2", NULL}, NULL);
    cr_assert_leq(fork_images_settled(images0), images0, "a fork image was left behind");
    cli_env_fini(&e);
}

/* Containers the native fork made that are still on the daemon. */
static int fork_containers_left(void)
{
    char cmd[1024], out[64];
    /* every container carries the label; a fork's has the image as value */
    snprintf(cmd, sizeof cmd,
             "docker -H '%s' ps -a --format '{{index .Labels \"sbx.fork.image\"}}' | grep -c .",
             getenv("SBX_TEST_DOCKER_HOST"));
    host_out(cmd, out, sizeof out);
    return atoi(out);
}

/* `sbx fork` killed with SIGKILL at several points of a native fork (the
 * commit of a 64 MiB workspace, the tag, the new container): after `sbx
 * reconcile` the new session either works with the source's files or is
 * gone, the source still works, and once both are destroyed no fork image
 * and no fork container is left on the daemon. */
Test(lifecycle_docker, native_fork_killed_midway_leaves_nothing, .timeout = 300)
{
    struct cli_env e;
    env_with(&e, "");
    int images0 = fork_images_left(), containers0 = fork_containers_left();
    ok(&e, (const char *const[]){"exec", "k1", "--", "sh", "-c",
                                 "echo kept > f && dd if=/dev/zero of=big bs=1M count=64 2>/dev/null",
                                 NULL},
       "");
    static const int delays_ms[] = {50, 250, 600, 1200, 2500};
    for (size_t i = 0; i < sizeof delays_ms / sizeof delays_ms[0]; i++) {
        struct cli_proc p;
        cli_spawn(&e, (const char *const[]){"fork", "k1", "k2", NULL}, CLI_STDIN_NULL, &p);
        usleep((useconds_t)delays_ms[i] * 1000);
        kill(p.pid, SIGKILL);
        cli_wait(&p, 10000);
        ok(&e, (const char *const[]){"reconcile", NULL}, NULL);
        /* a session k2 that exists (its state is recorded) is a whole
         * copy; `exec` alone would create an empty k2 when there is none */
        struct cli_result r;
        RUN(&e, &r, "state", "k2");
        bool exists = r.status == 0;
        cli_result_free(&r);
        if (exists)
            ok(&e, (const char *const[]){"exec", "k2", "--", "cat", "f", NULL}, "kept\n");
        ok(&e, (const char *const[]){"exec", "k1", "--", "cat", "f", NULL}, "kept\n");
        RUN(&e, &r, "destroy", "k2");
        cli_result_free(&r);
        cr_assert_eq(fork_containers_left(), containers0,
                     "kill after %d ms: a fork container was left", delays_ms[i]);
        cr_assert_leq(fork_images_settled(images0), images0,
                      "kill after %d ms: a fork image was left", delays_ms[i]);
    }
    ok(&e, (const char *const[]){"destroy", "k1", NULL}, NULL);
    cli_env_fini(&e);
}

/* read_only_rootfs: the workspace is a volume a commit does not take; the
 * fork is streamed and says why. */
Test(lifecycle_docker, fork_with_read_only_rootfs_is_streamed, .timeout = 180)
{
    struct cli_env e;
    env_with(&e, "    read_only_rootfs: true\n");
    ok(&e, (const char *const[]){"exec", "r1", "--", "sh", "-c", "echo one > f", NULL}, "");
    struct cli_result r;
    RUN(&e, &r, "fork", "r1", "r2");
    cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
    cr_assert(strstr(r.out, "forked (streamed: ") && strstr(r.out, "read_only_rootfs"),
              "%s", r.out);
    cli_result_free(&r);
    ok(&e, (const char *const[]){"exec", "r2", "--", "cat", "f", NULL}, "one\n");
    ok(&e, (const char *const[]){"destroy", "r1", NULL}, NULL);
    ok(&e, (const char *const[]){"destroy", "r2", NULL}, NULL);
    cli_env_fini(&e);
}
