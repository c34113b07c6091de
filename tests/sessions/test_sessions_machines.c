/*
 * test_sessions_machines.c - several workers, one PostgreSQL store.
 *
 * Two `sbx` workers that share nothing on the host but the docker daemon
 * and its resource directory (each has its own HOME, XDG_STATE_HOME,
 * XDG_RUNTIME_DIR and configuration file, as two machines would) run
 * commands of one session with a read-write memory store attached:
 *  - a command of one worker runs while the other's starts and ends: the
 *    second shares the mount and writes nothing back; the last to end
 *    commits both changes, each exactly once, in one commit;
 *  - a change committed to the store while a command runs makes that
 *    command's writeback a conflict, reported and recorded;
 *  - kill -9 of either worker mid-command releases its lock (the server
 *    ends its connection): the other's next command writes back what the
 *    dead one left and its own change.
 * Needs SBX_TEST_PG_DSN and SBX_TEST_DOCKER_HOST (skipped without).
 */
#include "cli_harness.h"
#include "scratch_db.h"

#include <criterion/criterion.h>

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct world {
    struct scratch_db db;
    struct cli_env w[2];
    char res[PATH_MAX]; /* the docker resource directory both use */
};

static void worker_init(struct world *x, int i)
{
    struct cli_env *e = &x->w[i];
    cli_env_init(e);
    char run[PATH_MAX + 8];
    snprintf(run, sizeof run, "%s/run", e->dir);
    cr_assert_eq(mkdir(run, 0700), 0);
    /* no lock directory in common */
    cli_env_setenv(e, "XDG_RUNTIME_DIR", run);
    cli_env_setenv(e, "SBX_STORE_DSN", x->db.target);
}

static void worker_config(struct world *x, int i)
{
    char yaml[8192];
    snprintf(yaml, sizeof yaml,
             "store: { driver: postgres }\n"
             "default_provider: docker\nproviders:\n  docker:\n    host: \"%s\"\n"
             "    image: \"%s\"\n    resource_dir: \"%s\"\n",
             getenv("SBX_TEST_DOCKER_HOST"),
             getenv("SBX_TEST_DOCKER_IMAGE") ? getenv("SBX_TEST_DOCKER_IMAGE")
                                             : "sbx-test:busybox",
             x->res);
    cli_env_write_config(&x->w[i], yaml);
}

static void world_init(struct world *x)
{
    memset(x, 0, sizeof *x);
    const char *host = getenv("SBX_TEST_DOCKER_HOST");
    if (!host || !*host)
        cr_skip_test("SBX_TEST_DOCKER_HOST is not set");
    char why[512] = "";
    int rc = scratch_create("postgres", &x->db, why, sizeof why);
    if (rc == SCRATCH_SKIP)
        cr_skip_test("%s", why);
    cr_assert_eq(rc, SCRATCH_OK, "scratch store: %s", why);
    worker_init(x, 0);
    worker_init(x, 1);
    cr_assert(strlen(x->w[0].dir) + 16 < sizeof x->res);
    memcpy(x->res, x->w[0].dir, strlen(x->w[0].dir) + 1);
    strcat(x->res, "/resources");
    cr_assert_eq(mkdir(x->res, 0755), 0);
    worker_config(x, 0);
    worker_config(x, 1);
}

/* Best effort: a container left behind dies with the test's daemon. */
static void world_fini(struct world *x, const char *key)
{
    struct cli_result r;
    const char *args[] = {"destroy", key, NULL};
    cli_run(&x->w[0], args, NULL, 60000, &r);
    cli_result_free(&r);
    cli_env_fini(&x->w[1]);
    cli_env_fini(&x->w[0]);
    scratch_destroy(&x->db);
}

static void run_ok(struct world *x, int i, const char *const *args, const char *input)
{
    struct cli_result r;
    cli_run(&x->w[i], args, input, 60000, &r);
    cr_assert_eq(r.status, 0, "worker %d: sbx %s %s: status %d: %s", i, args[0],
                 args[1] ? args[1] : "", r.status, r.err);
    cli_result_free(&r);
}

static long long count(struct world *x, const char *sql)
{
    long long v = -1;
    char why[512] = "";
    cr_assert_eq(scratch_query_int(&x->db, sql, &v, why, sizeof why), 0, "%s", why);
    return v;
}

/* Start `sbx exec KEY -- sh -c SCRIPT` on worker i and wait for the
 * script's "started" line. */
static void start_cmd(struct world *x, int i, const char *key, const char *script,
                      struct cli_proc *p)
{
    const char *args[] = {"exec", key, "--", "sh", "-c", script, NULL};
    cli_spawn(&x->w[i], args, CLI_STDIN_NULL, p);
    char line[256];
    cr_assert(cli_read_line(p, line, sizeof line, 30000), "worker %d: no output", i);
    cr_assert_str_eq(line, "started");
}

static void setup_session(struct world *x, const char *key)
{
    run_ok(x, 0, (const char *[]){"create", key, "--memory", "notes:rw", NULL}, NULL);
    /* the first command loads the heads (none yet) */
    run_ok(x, 0, (const char *[]){"exec", key, "--", "true", NULL}, NULL);
}

/* A session key of this run: a container an aborted run left behind on
 * the daemon (named by the key's hash) is never adopted. */
static const char *run_key(const char *base)
{
    static char keys[4][64];
    static int next;
    char *k = keys[next++ % 4];
    snprintf(k, sizeof keys[0], "%s-%ld", base, (long)getpid());
    return k;
}

#define COMMITS "SELECT count(*) FROM memory_commits WHERE slug = 'notes'"

static long long versions_of(struct world *x, const char *path)
{
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM memory_versions WHERE slug = 'notes' AND path = '%s'",
             path);
    return count(x, sql);
}

TestSuite(sessions_machines, .timeout = 240);

Test(sessions_machines, commands_of_two_workers_take_turns)
{
    struct world x;
    world_init(&x);
    const char *key = run_key("shared");
    run_ok(&x, 0, (const char *[]){"memory", "create", "notes", NULL}, NULL);
    setup_session(&x, key);
    cr_assert_eq(count(&x, COMMITS), 0);

    for (int round = 0; round < 2; round++) {
        int a = round, b = 1 - round; /* each worker runs the long command once */
        char sa[128], sb[128], fa[32], fb[32];
        snprintf(fa, sizeof fa, "a%d.txt", round);
        snprintf(fb, sizeof fb, "b%d.txt", round);
        snprintf(sa, sizeof sa, "echo a > /mnt/memory/notes/%s; echo started; sleep 3", fa);
        snprintf(sb, sizeof sb, "echo b > /mnt/memory/notes/%s", fb);
        long long before = count(&x, COMMITS);
        struct cli_proc p;
        start_cmd(&x, a, key, sa, &p);
        /* the other worker's command starts and ends while a's runs */
        run_ok(&x, b, (const char *[]){"exec", key, "--", "sh", "-c", sb, NULL}, NULL);
        cr_assert_eq(count(&x, COMMITS), before,
                     "round %d: a writeback happened while worker %d's command ran", round,
                     a);
        cr_assert_eq(cli_wait(&p, 60000), 0, "round %d: worker %d's command failed", round, a);
        /* the last command wrote back both changes, once each */
        cr_assert_eq(count(&x, COMMITS), before + 1, "round %d", round);
        cr_assert_eq(versions_of(&x, fa), 1, "round %d: %s", round, fa);
        cr_assert_eq(versions_of(&x, fb), 1, "round %d: %s", round, fb);
    }
    cr_assert_eq(count(&x, "SELECT count(*) FROM session_memory WHERE state <> 0"), 0);
    world_fini(&x, key);
}

Test(sessions_machines, a_conflict_is_reported_to_the_writer)
{
    struct world x;
    world_init(&x);
    const char *key = run_key("conflicted");
    run_ok(&x, 0, (const char *[]){"memory", "create", "notes", NULL}, NULL);
    setup_session(&x, key);
    struct cli_proc p;
    start_cmd(&x, 0, key,
              "echo mine > /mnt/memory/notes/plan.md; echo started; sleep 2", &p);
    /* someone else commits the same path meanwhile (worker 1, directly) */
    run_ok(&x, 1, (const char *[]){"memory", "put", "notes", "plan.md", NULL}, "theirs\n");
    char err[4096] = "";
    cli_read_err(&p, err, sizeof err, 60000);
    int status = cli_wait(&p, 60000);
    cr_assert_neq(status, 0, "the conflicting writeback was not reported");
    cr_assert(strstr(err, "conflict"), "no conflict in: %s", err);
    cr_assert_eq(count(&x, "SELECT count(*) FROM session_memory WHERE state = 2"), 1,
                 "the attachment is not recorded in conflict");
    cr_assert_eq(versions_of(&x, "plan.md"), 1, "the conflicting change was committed");
    world_fini(&x, key);
}

Test(sessions_machines, kill_9_of_either_worker_releases_its_lock)
{
    struct world x;
    world_init(&x);
    const char *key = run_key("killed");
    run_ok(&x, 0, (const char *[]){"memory", "create", "notes", NULL}, NULL);
    setup_session(&x, key);
    for (int victim = 0; victim < 2; victim++) {
        int other = 1 - victim;
        char sk[128], so[128], fk[32], fo[32];
        snprintf(fk, sizeof fk, "dead%d.txt", victim);
        snprintf(fo, sizeof fo, "alive%d.txt", victim);
        snprintf(sk, sizeof sk, "echo k > /mnt/memory/notes/%s; echo started; sleep 20", fk);
        snprintf(so, sizeof so, "echo o > /mnt/memory/notes/%s", fo);
        struct cli_proc p;
        start_cmd(&x, victim, key, sk, &p);
        cr_assert_eq(kill(p.pid, SIGKILL), 0);
        cr_assert_eq(cli_wait(&p, 10000), CLI_KILLED_BY + SIGKILL);
        long long t0 = cli_now_ms();
        run_ok(&x, other, (const char *[]){"exec", key, "--", "sh", "-c", so, NULL},
               NULL);
        cr_assert_lt(cli_now_ms() - t0, 15000, "the other worker waited for the dead one");
        /* what the dead worker's command changed and the survivor's own
         * change are both committed, once */
        cr_assert_eq(versions_of(&x, fk), 1, "victim %d: %s", victim, fk);
        cr_assert_eq(versions_of(&x, fo), 1, "victim %d: %s", victim, fo);
    }
    world_fini(&x, key);
}
