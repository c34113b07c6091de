/*
 * test_memory.c - memory stores on the docker provider through the CLI, on
 * both session stores (SQLite; PostgreSQL when SBX_TEST_PG_DSN is set):
 * heads visible before a command, changes and deletions committed after
 * it, a read-only attachment not writable even by root, a race of two
 * sessions with exactly one winner and one conflict (nothing overwritten,
 * the loser's change kept in its mount), refused entries, and kill -9 at
 * each writeback step followed by `sbx reconcile`: no lost change, nothing
 * committed twice.
 */
#include "../cli/cli_harness.h"

#include <criterion/criterion.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct cli_env e;
static char slug[64];
/* Session keys, unique per run like the slug (a PostgreSQL store is
 * shared by every run against it). */
static const char *const key_names[] = {"a", "b", "ro", "crash"};
static char key_buf[4][96];
static const char *keys[5];
#define KEY_A keys[0]
#define KEY_B keys[1]
#define KEY_RO keys[2]
#define KEY_CRASH keys[3]

static void setup_with(const char *head)
{
    if (!getenv("SBX_TEST_DOCKER_HOST") || !*getenv("SBX_TEST_DOCKER_HOST"))
        cr_skip_test("SBX_TEST_DOCKER_HOST is not set");
    cli_env_init(&e);
    cli_env_docker_config(&e, head);
    /* unique per run: a PostgreSQL store outlives the test */
    snprintf(slug, sizeof slug, "t%ld-%lld", (long)getpid(), cli_now_ms() % 100000000);
    for (size_t i = 0; i < 4; i++) {
        snprintf(key_buf[i], sizeof key_buf[i], "mem-%s-%s", slug, key_names[i]);
        keys[i] = key_buf[i];
    }
    keys[4] = NULL;
}

static void setup_sqlite(void)
{
    setup_with(NULL);
}

static void setup_pg(void)
{
    const char *dsn = getenv("SBX_TEST_PG_DSN");
    if (!dsn || !*dsn)
        cr_skip_test("SBX_TEST_PG_DSN is not set");
    char head[1024];
    snprintf(head, sizeof head, "store:\n  driver: postgres\n  dsn: \"%s\"\n", dsn);
    setup_with(head);
}

static void teardown(void)
{
    struct cli_result r;
    for (size_t i = 0; keys[i]; i++) {
        /* a conflict keeps a session from deletion: drop its changes */
        cli_run(&e, (const char *[]){"memory", "resolve", slug, keys[i], "--discard", NULL},
                NULL, 60000, &r);
        cli_result_free(&r);
        cli_run(&e, (const char *[]){"destroy", keys[i], NULL}, NULL, 60000, &r);
        cli_result_free(&r);
    }
    cli_run(&e, (const char *[]){"memory", "delete", slug, NULL}, NULL, 60000, &r);
    cli_result_free(&r);
    cli_env_fini(&e);
}

static void run(const char *const *args, const char *input, struct cli_result *r)
{
    cli_run(&e, args, input, 120000, r);
}

static void run_ok(const char *const *args, const char *input, struct cli_result *r)
{
    run(args, input, r);
    cr_assert_eq(r->status, 0, "sbx %s %s: exit %d: %s", args[0], args[1] ? args[1] : "",
                 r->status, r->err);
}

/* The content of path at the store's head ("" with found false when none). */
static char *store_cat(const char *path, bool *found)
{
    struct cli_result r;
    run((const char *[]){"memory", "cat", slug, path, NULL}, NULL, &r);
    *found = r.status == 0;
    char *out = strdup(r.status == 0 ? r.out : "");
    cli_result_free(&r);
    return out;
}

static void expect_store(const char *path, const char *want)
{
    bool found;
    char *got = store_cat(path, &found);
    if (!want)
        cr_expect(!found, "%s should not exist in the store, has \"%s\"", path, got);
    else
        cr_expect_str_eq(got, want, "store content of %s", path);
    free(got);
}

/* Lines of `sbx memory log SLUG PATH` (one per version). */
static int log_versions(const char *path)
{
    struct cli_result r;
    run_ok((const char *[]){"memory", "log", slug, path, NULL}, NULL, &r);
    int n = 0;
    for (const char *p = r.out; *p; p++)
        n += *p == '\n';
    cli_result_free(&r);
    return n;
}

static void new_store_with_a(void)
{
    struct cli_result r;
    run_ok((const char *[]){"memory", "create", slug, NULL}, NULL, &r);
    cli_result_free(&r);
    run_ok((const char *[]){"memory", "put", slug, "a.md", NULL}, "alpha\n", &r);
    cli_result_free(&r);
}

static void create_session(const char *key, const char *access)
{
    char arg[128];
    snprintf(arg, sizeof arg, "%s:%s", slug, access);
    struct cli_result r;
    run_ok((const char *[]){"create", key, "--memory", arg, NULL}, NULL, &r);
    cli_result_free(&r);
}

static void in_mount(const char *key, const char *script, struct cli_result *r)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cd /mnt/memory/%s && %s", slug, script);
    run((const char *[]){"exec", key, "--", "sh", "-c", cmd, NULL}, NULL, r);
}

static void heads_changes_and_read_only(void)
{
    new_store_with_a();
    create_session(KEY_A, "rw");
    create_session(KEY_RO, "ro");
    struct cli_result r;
    /* the heads are there before the first command */
    in_mount(KEY_A, "cat a.md && echo beta > b.md && echo alpha2 > a.md", &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.out, "alpha\n");
    cli_result_free(&r);
    expect_store("a.md", "alpha2\n");
    expect_store("b.md", "beta\n");
    /* a deletion is committed as a version */
    in_mount(KEY_A, "rm b.md && mkdir -p sub/deeper && echo g > sub/deeper/g.md", &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cli_result_free(&r);
    expect_store("b.md", NULL);
    expect_store("sub/deeper/g.md", "g\n");
    cr_expect_eq(log_versions("b.md"), 2, "b.md: written, then deleted");

    /* read-only: refreshed with the heads, and not writable by root */
    in_mount(KEY_RO, "id -u; cat a.md; echo evil > a.md; echo evil > new.md; rm -f a.md; "
                       "ls",
             &r);
    cr_expect_str_eq(r.out, "0\nalpha2\na.md\nsub\n", "stdout: %s", r.out);
    cr_expect(strstr(r.err, "Read-only file system") != NULL, "stderr: %s", r.err);
    cli_result_free(&r);
    expect_store("a.md", "alpha2\n");
    expect_store("new.md", NULL);
}

/* UTF-8 names beyond ASCII are loaded into the mount and committed back
 * byte for byte (libarchive's pax writer must not convert them through
 * the C locale, which crashed or refused them). */
static void non_ascii_names(void)
{
    struct cli_result r;
    run_ok((const char *[]){"memory", "create", slug, NULL}, NULL, &r);
    cli_result_free(&r);
    run_ok((const char *[]){"memory", "put", slug, "caf\xc3\xa9.md", NULL}, "cafe\n", &r);
    cli_result_free(&r);
    create_session(KEY_A, "rw");
    in_mount(KEY_A, "cat caf\xc3\xa9.md && mkdir -p \xe6\x97\xa5\xe6\x9c\xac && "
                    "echo nihon > \xe6\x97\xa5\xe6\x9c\xac/\xc3\xa9t\xc3\xa9.md && "
                    "echo cafe2 > caf\xc3\xa9.md",
             &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.out, "cafe\n");
    cli_result_free(&r);
    expect_store("caf\xc3\xa9.md", "cafe2\n");
    expect_store("\xe6\x97\xa5\xe6\x9c\xac/\xc3\xa9t\xc3\xa9.md", "nihon\n");
}

static void race_one_winner(void)
{
    new_store_with_a();
    create_session(KEY_A, "rw");
    create_session(KEY_B, "rw");
    /* a slow command of mem-a started from the same heads as mem-b's */
    struct cli_proc slow;
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "cat /mnt/memory/%s/a.md >/dev/null; echo go; sleep 3; "
             "echo from-a > /mnt/memory/%s/a.md",
             slug, slug);
    cli_spawn(&e, (const char *[]){"exec", KEY_A, "--", "sh", "-c", cmd, NULL},
              CLI_STDIN_NULL, &slow);
    char line[64];
    cr_assert(cli_read_line(&slow, line, sizeof line, 60000), "the slow command did not start");
    struct cli_result r;
    in_mount(KEY_B, "echo from-b > a.md", &r);
    cr_assert_eq(r.status, 0, "mem-b commits first: %s", r.err);
    cli_result_free(&r);
    int st = cli_wait(&slow, 60000);
    cr_expect_eq(st, 125, "mem-a's writeback is a conflict (exit %d)", st);
    /* nothing overwritten: the first commit stands */
    expect_store("a.md", "from-b\n");
    cr_expect_eq(log_versions("a.md"), 2, "one version by the put, one by mem-b");
    /* the loser's change stays in its mount, and is reported again */
    in_mount(KEY_A, "cat a.md", &r);
    cr_expect_eq(r.status, 125, "exit %d", r.status);
    cr_expect_str_eq(r.out, "from-a\n");
    cr_expect(strstr(r.err, "conflict") && strstr(r.err, "a.md"), "stderr: %s", r.err);
    cli_result_free(&r);
    expect_store("a.md", "from-b\n");
    /* the session cannot be deleted with its change unresolved */
    run((const char *[]){"destroy", KEY_A, NULL}, NULL, &r);
    cr_expect_eq(r.status, 125, "destroy with a conflict: exit %d", r.status);
    cr_expect(strstr(r.err, "sbx memory resolve"), "stderr: %s", r.err);
    cli_result_free(&r);
    /* --keep: the session's version wins, on purpose */
    run_ok((const char *[]){"memory", "resolve", slug, KEY_A, "--keep", NULL}, NULL, &r);
    cli_result_free(&r);
    expect_store("a.md", "from-a\n");
    in_mount(KEY_B, "cat a.md", &r);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.out, "from-a\n", "the other session sees the resolved head");
    cli_result_free(&r);
    run_ok((const char *[]){"destroy", KEY_A, NULL}, NULL, &r);
    cli_result_free(&r);
}

static void refused_entries(void)
{
    new_store_with_a();
    create_session(KEY_A, "rw");
    struct cli_result r;
    in_mount(KEY_A, "echo ok > ok.md && ln -s /etc/passwd link", &r);
    cr_expect_eq(r.status, 125, "a symlink refuses the writeback: exit %d", r.status);
    cr_expect(strstr(r.err, "\"link\" is a symbolic link") != NULL, "stderr: %s", r.err);
    cli_result_free(&r);
    expect_store("ok.md", NULL); /* nothing of that writeback */
    in_mount(KEY_A, "rm link", &r);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cli_result_free(&r);
    expect_store("ok.md", "ok\n");
}

/* A name that is not UTF-8 and a file over the store's limit are refused
 * by name, nothing of that writeback committed; a FIFO too. */
static void refused_names_and_sizes(void)
{
    struct cli_result r;
    run_ok((const char *[]){"memory", "create", slug, "--max-file-size", "1k", NULL}, NULL, &r);
    cli_result_free(&r);
    create_session(KEY_A, "rw");
    in_mount(KEY_A, "echo ok > ok.md && echo x > \"$(printf 'bad\\377.md')\"", &r);
    cr_expect_eq(r.status, 125, "a non-UTF-8 name refuses the writeback: exit %d", r.status);
    cr_expect(strstr(r.err, "is not valid UTF-8") && strstr(r.err, "nothing was committed"),
              "stderr: %s", r.err);
    cli_result_free(&r);
    expect_store("ok.md", NULL);
    in_mount(KEY_A, "rm -f bad*.md && head -c 2048 /dev/zero > big.bin", &r);
    cr_expect_eq(r.status, 125, "a file over the limit refuses the writeback: exit %d", r.status);
    cr_expect(strstr(r.err, "\"big.bin\": the file is too large (2048 bytes, limit 1024)"),
              "stderr: %s", r.err);
    cli_result_free(&r);
    expect_store("ok.md", NULL);
    expect_store("big.bin", NULL);
    in_mount(KEY_A, "rm big.bin && mkfifo pipe", &r);
    cr_expect_eq(r.status, 125, "exit %d", r.status);
    cr_expect(strstr(r.err, "\"pipe\" is a FIFO"), "stderr: %s", r.err);
    cli_result_free(&r);
    /* deeper than any store path can be: refused naming where */
    in_mount(KEY_A, "rm pipe && mkdir -p $(printf 'd/%.0s' $(seq 1 200)) && touch d/deep.md",
             &r);
    cr_expect_eq(r.status, 125, "exit %d", r.status);
    cr_expect(strstr(r.err, "nested deeper than 128 levels"), "stderr: %s", r.err);
    cli_result_free(&r);
    in_mount(KEY_A, "rm -rf d", &r);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cli_result_free(&r);
    expect_store("ok.md", "ok\n");
}

/* Reshaping the tree: every kind of change a watch has to get right (a
 * directory renamed and removed, a file replaced by a directory, a new
 * tree with nested directories, the same file touched many times, a file
 * written through a rename over it), each commit checked against the
 * store. */
static void tree_reshaped(void)
{
    new_store_with_a();
    create_session(KEY_A, "rw");
    struct cli_result r;
    in_mount(KEY_A, "mkdir -p d1/x && echo 1 > d1/x/one.md && echo 2 > d1/two.md && "
                    "echo f > swap.md && mkdir gone && echo g > gone/g.md", &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cli_result_free(&r);
    expect_store("d1/x/one.md", "1\n");
    expect_store("gone/g.md", "g\n");
    in_mount(KEY_A, "mv d1 d2 && rm -rf gone && rm swap.md && mkdir swap.md && "
                    "echo in > swap.md/in.md", &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cli_result_free(&r);
    expect_store("d1/x/one.md", NULL);
    expect_store("d1/two.md", NULL);
    expect_store("d2/x/one.md", "1\n");
    expect_store("d2/two.md", "2\n");
    expect_store("gone/g.md", NULL);
    expect_store("swap.md/in.md", "in\n");
    in_mount(KEY_A, "mkdir -p n1/n2/n3 && echo deep > n1/n2/n3/d.md && "
                    "for i in 1 2 3 4 5 6 7 8 9 10; do echo $i >> a.md; done && "
                    "echo new > tmp.md && mv tmp.md d2/two.md", &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cli_result_free(&r);
    expect_store("n1/n2/n3/d.md", "deep\n");
    expect_store("a.md", "alpha\n1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n");
    expect_store("d2/two.md", "new\n");
    expect_store("tmp.md", NULL);
    /* and a command that changes nothing commits nothing */
    int before = log_versions("a.md");
    in_mount(KEY_A, "cat a.md > /dev/null && ls -R > /dev/null", &r);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cli_result_free(&r);
    cr_expect_eq(log_versions("a.md"), before);
}

/* kill -9 at a writeback step, then reconcile: the change is in the store,
 * once. */
static void crash_then_reconcile(const char *step)
{
    new_store_with_a();
    create_session(KEY_CRASH, "rw");
    cli_env_setenv(&e, "SBX_TEST_CRASH_AT", step);
    char script[256];
    snprintf(script, sizeof script, "echo %s > a.md && echo new > n.md && rm -f gone.md",
             step);
    struct cli_result r;
    in_mount(KEY_CRASH, script, &r);
    cr_expect_eq(r.status, CLI_KILLED_BY + SIGKILL, "%s: exit %d: %s", step, r.status, r.err);
    cli_result_free(&r);
    cli_env_setenv(&e, "SBX_TEST_CRASH_AT", "");
    run_ok((const char *[]){"reconcile", NULL}, NULL, &r);
    cr_expect(strstr(r.out, "1 sessions' memory written back"), "%s: reconcile said: %s", step,
              r.out);
    cli_result_free(&r);
    char want[128];
    snprintf(want, sizeof want, "%s\n", step);
    expect_store("a.md", want);
    expect_store("n.md", "new\n");
    cr_expect_eq(log_versions("a.md"), 2, "%s: a.md committed exactly once", step);
    /* and the next command sees the committed tree, nothing pending */
    in_mount(KEY_CRASH, "cat a.md n.md", &r);
    cr_expect_eq(r.status, 0, "%s", r.err);
    snprintf(want, sizeof want, "%s\nnew\n", step);
    cr_expect_str_eq(r.out, want);
    cli_result_free(&r);
    cr_expect_eq(log_versions("a.md"), 2, "%s: nothing committed twice", step);
}

/* kill -9 of sbx while the command runs: the change it made is written
 * back by the next step of the session. */
static void crash_during_command(void)
{
    new_store_with_a();
    create_session(KEY_CRASH, "rw");
    struct cli_proc p;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "echo during > /mnt/memory/%s/a.md; echo go; sleep 30", slug);
    cli_spawn(&e, (const char *[]){"exec", KEY_CRASH, "--", "sh", "-c", cmd, NULL},
              CLI_STDIN_NULL, &p);
    char line[64];
    cr_assert(cli_read_line(&p, line, sizeof line, 60000));
    kill(p.pid, SIGKILL);
    cli_wait(&p, 10000);
    expect_store("a.md", "alpha\n");
    struct cli_result r;
    in_mount(KEY_CRASH, "cat a.md", &r);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.out, "during\n");
    cli_result_free(&r);
    expect_store("a.md", "during\n");
}

TestSuite(docker_memory_sqlite, .init = setup_sqlite, .fini = teardown, .timeout = 300);
TestSuite(docker_memory_pg, .init = setup_pg, .fini = teardown, .timeout = 300);

Test(docker_memory_sqlite, heads_changes_and_read_only) { heads_changes_and_read_only(); }
Test(docker_memory_pg, heads_changes_and_read_only) { heads_changes_and_read_only(); }
Test(docker_memory_sqlite, race_one_winner) { race_one_winner(); }
Test(docker_memory_sqlite, non_ascii_names) { non_ascii_names(); }
Test(docker_memory_pg, race_one_winner) { race_one_winner(); }
Test(docker_memory_sqlite, refused_entries) { refused_entries(); }
Test(docker_memory_sqlite, tree_reshaped) { tree_reshaped(); }
Test(docker_memory_sqlite, refused_names_and_sizes) { refused_names_and_sizes(); }
Test(docker_memory_sqlite, crash_during_command) { crash_during_command(); }
Test(docker_memory_pg, crash_during_command) { crash_during_command(); }
Test(docker_memory_sqlite, crash_before_commit) { crash_then_reconcile("memory-before-commit"); }
Test(docker_memory_sqlite, crash_after_commit) { crash_then_reconcile("memory-after-commit"); }
Test(docker_memory_sqlite, crash_after_accept) { crash_then_reconcile("memory-after-accept"); }
Test(docker_memory_pg, crash_before_commit) { crash_then_reconcile("memory-before-commit"); }
Test(docker_memory_pg, crash_after_commit) { crash_then_reconcile("memory-after-commit"); }
Test(docker_memory_pg, crash_after_accept) { crash_then_reconcile("memory-after-accept"); }
