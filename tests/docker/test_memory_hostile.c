/*
 * test_memory_hostile.c - a read-write memory tree is a host directory the
 * container can change at any moment; the host must never act on a host
 * path through it. Through the CLI against a real daemon, with the race
 * points of an SBX_TEST_HOOKS build (SBX_TEST_MEMORY_RACE, see
 * plugins/docker/memory_race.c) making the container's moves land exactly
 * between the host looking at an entry and acting on it:
 *
 *   - a file, and a directory, swapped for a symlink to a host file or
 *     directory while the walk after a load fixes modes: the host's modes
 *     stay as they were, the host does not descend there, and the
 *     writeback is refused naming the entry;
 *   - entries planted right after a load, and in a tree a reload empties
 *     (symlinks to host paths, a FIFO): never followed, never opened,
 *     refused by name or removed as what they are;
 *   - a changed file swapped, just before the diff reads it, for a FIFO, a
 *     device or a symlink, or read through a parent directory swapped for
 *     a symlink: the writeback is refused naming the file, nothing else is
 *     read, and nothing of the change is lost;
 *   - a sparse file far over the store's limits: not read and spooled
 *     whole on the host.
 */
#include "../cli/cli_harness.h"

#include <criterion/criterion.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static struct cli_env e;
static char slug[64];
static char key[96];
static char victim[1024];     /* a host file: 0600, "host secret\n" */
static char victim_dir[1024]; /* a host directory: 0700, with secret.md 0600 */
static char victim_in[1100];

#ifndef SBX_TEST_HOOKS
#define NEED_HOOKS() cr_skip_test("built without SBX_TEST_HOOKS (no race points)")
#else
#define NEED_HOOKS() ((void)0)
#endif

static void write_file(const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    cr_assert(fd >= 0, "create %s", path);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    cr_assert_eq(chmod(path, mode), 0);
}

static void setup(void)
{
    if (!getenv("SBX_TEST_DOCKER_HOST") || !*getenv("SBX_TEST_DOCKER_HOST"))
        cr_skip_test("SBX_TEST_DOCKER_HOST is not set");
    cli_env_init(&e);
    cli_env_docker_config(&e, NULL);
    snprintf(slug, sizeof slug, "h%ld-%lld", (long)getpid(), cli_now_ms() % 100000000);
    snprintf(key, sizeof key, "memh-%s", slug);
    snprintf(victim, sizeof victim, "%.900s/victim", e.dir);
    snprintf(victim_dir, sizeof victim_dir, "%.900s/victim-dir", e.dir);
    snprintf(victim_in, sizeof victim_in, "%.1000s/secret.md", victim_dir);
    write_file(victim, "host secret\n", 0600);
    cr_assert_eq(mkdir(victim_dir, 0700), 0);
    write_file(victim_in, "inner secret\n", 0600);
    cr_assert_eq(chmod(victim_dir, 0700), 0);
}

static void teardown(void)
{
    struct cli_result r;
    cli_run(&e, (const char *[]){"memory", "resolve", slug, key, "--discard", NULL}, NULL,
            60000, &r);
    cli_result_free(&r);
    cli_run(&e, (const char *[]){"destroy", key, NULL}, NULL, 60000, &r);
    cli_result_free(&r);
    cli_run(&e, (const char *[]){"memory", "delete", slug, NULL}, NULL, 60000, &r);
    cli_result_free(&r);
    cli_env_fini(&e);
}

static void run(const char *const *args, const char *input, struct cli_result *r)
{
    cli_run(&e, args, input, 60000, r);
    cr_assert_neq(r->status, -1, "sbx %s %s hung", args[0], args[1] ? args[1] : "");
}

static void run_ok(const char *const *args, const char *input)
{
    struct cli_result r;
    run(args, input, &r);
    cr_assert_eq(r.status, 0, "sbx %s %s: exit %d: %s", args[0], args[1] ? args[1] : "",
                 r.status, r.err);
    cli_result_free(&r);
}

static void in_mount(const char *script, struct cli_result *r)
{
    char cmd[10000];
    snprintf(cmd, sizeof cmd, "cd /mnt/memory/%s && %.9000s", slug, script);
    run((const char *[]){"exec", key, "--", "sh", "-c", cmd, NULL}, NULL, r);
}

static void in_mount_ok(const char *script)
{
    struct cli_result r;
    in_mount(script, &r);
    cr_assert_eq(r.status, 0, "%s: exit %d: %s", script, r.status, r.err);
    cli_result_free(&r);
}

/* A store holding a.md and d/in.md, attached read-write to the session. */
static void store_and_session(void)
{
    run_ok((const char *[]){"memory", "create", slug, NULL}, NULL);
    run_ok((const char *[]){"memory", "put", slug, "a.md", NULL}, "alpha\n");
    run_ok((const char *[]){"memory", "put", slug, "d/in.md", NULL}, "inside\n");
    char arg[128];
    snprintf(arg, sizeof arg, "%s:rw", slug);
    run_ok((const char *[]){"create", key, "--memory", arg, NULL}, NULL);
}

/* A command that makes the next diff compare the whole tree (a directory
 * removed is an event the watch cannot resolve exactly): the watch is
 * armed after the load, so what a race did before it is seen only so. */
#define WHOLE "mkdir w && rmdir w"

static void race(const char *spec)
{
    cli_env_setenv(&e, "SBX_TEST_MEMORY_RACE", spec);
}

static char *store_cat(const char *path)
{
    struct cli_result r;
    run((const char *[]){"memory", "cat", slug, path, NULL}, NULL, &r);
    char *out = strdup(r.status == 0 ? r.out : "(none)");
    cli_result_free(&r);
    return out;
}

static void expect_store(const char *path, const char *want)
{
    char *got = store_cat(path);
    cr_expect_str_eq(got, want, "store content of %s", path);
    free(got);
}

static void expect_mode(const char *path, mode_t want)
{
    struct stat s;
    cr_assert_eq(lstat(path, &s), 0, "%s is gone", path);
    cr_expect_eq(s.st_mode & 07777, want, "%s: mode %o, was %o before", path,
                 (unsigned)(s.st_mode & 07777), (unsigned)want);
}

static void expect_victims_untouched(void)
{
    expect_mode(victim, 0600);
    expect_mode(victim_dir, 0700);
    expect_mode(victim_in, 0600);
    char buf[64] = "";
    int fd = open(victim, O_RDONLY | O_CLOEXEC);
    cr_assert(fd >= 0);
    cr_assert_geq(read(fd, buf, sizeof buf - 1), 0);
    close(fd);
    cr_expect_str_eq(buf, "host secret\n");
}

/* r refused the writeback naming path as what it is. */
static void expect_refused(const struct cli_result *r, const char *path, const char *as)
{
    char want[256];
    snprintf(want, sizeof want, "\"%s\" is %s", path, as);
    cr_expect_eq(r->status, 125, "the writeback is refused: exit %d: %s", r->status, r->err);
    cr_expect(strstr(r->err, want) != NULL, "stderr should say '%s': %s", want, r->err);
}

/* The load's walk fixes modes (0666 files): a.md becomes a symlink to a
 * host file between the walk's look at it and its chmod. */
Test(docker_memory_hostile, load_walk_file_swapped_for_symlink)
{
    NEED_HOOKS();
    store_and_session();
    char spec[4400];
    snprintf(spec, sizeof spec, "walk-entry:a.md:symlink=%s", victim);
    race(spec);
    struct cli_result r;
    in_mount(WHOLE, &r);
    expect_victims_untouched();
    expect_refused(&r, "a.md", "a symbolic link");
    cli_result_free(&r);
    race("");
    /* what was raced aside is the loaded file, mode fixed, nothing lost */
    in_mount("ls -l a.md.raced | cut -c1-10; rm a.md && mv a.md.raced a.md && cat a.md", &r);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.out, "-rw-rw-rw-\nalpha\n");
    cli_result_free(&r);
    expect_store("a.md", "alpha\n");
    expect_victims_untouched();
}

/* The same for a directory (0777 after a load): d becomes a symlink to a
 * host directory; the host neither chmods it nor descends into it. */
Test(docker_memory_hostile, load_walk_directory_swapped_for_symlink)
{
    NEED_HOOKS();
    store_and_session();
    char spec[4400];
    snprintf(spec, sizeof spec, "walk-entry:d:symlink=%s", victim_dir);
    race(spec);
    struct cli_result r;
    in_mount(WHOLE, &r);
    expect_victims_untouched();
    expect_refused(&r, "d", "a symbolic link");
    cli_result_free(&r);
    race("");
    in_mount("ls -ld d.raced | cut -c1-10; rm d && mv d.raced d && cat d/in.md", &r);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.out, "drwxrwxrwx\ninside\n");
    cli_result_free(&r);
    expect_store("d/in.md", "inside\n");
    expect_store("d/secret.md", "(none)");
    expect_victims_untouched();
}

/* Planted between the load's publish and its walk (as a process of the
 * container could): symlinks to host paths and a FIFO are reported as what
 * they are, never followed, never opened. */
Test(docker_memory_hostile, planted_after_a_load)
{
    NEED_HOOKS();
    store_and_session();
    char spec[4000];
    snprintf(spec, sizeof spec,
             "load-published::symlink=%s:link;load-published::symlink=%s:ldir;"
             "load-published::fifo:pipe",
             victim, victim_dir);
    race(spec);
    struct cli_result r;
    in_mount("ls && " WHOLE, &r);
    cr_expect_str_eq(r.out, "a.md\nd\nldir\nlink\npipe\n");
    cr_expect_eq(r.status, 125, "exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.err, "\"ldir\" is a symbolic link") ||
                  strstr(r.err, "\"link\" is a symbolic link") ||
                  strstr(r.err, "\"pipe\" is a FIFO"),
              "stderr: %s", r.err);
    cli_result_free(&r);
    expect_victims_untouched();
    race("");
    in_mount_ok("rm link ldir pipe");
    expect_victims_untouched();
    expect_store("a.md", "alpha\n");
}

/* Planted in the tree when a reload empties it (a new head from another
 * writer): removed as what they are, nothing below a symlink touched. */
Test(docker_memory_hostile, planted_before_a_reload)
{
    NEED_HOOKS();
    store_and_session();
    in_mount_ok("cat a.md > /dev/null");
    run_ok((const char *[]){"memory", "put", slug, "a.md", NULL}, "alpha2\n");
    char spec[4000];
    snprintf(spec, sizeof spec,
             "load-empty::symlink=%s:link;load-empty::symlink=%s:ldir;"
             "load-empty::fifo:pipe;load-empty::symlink=%s:d/deep",
             victim, victim_dir, victim_in);
    race(spec);
    struct cli_result r;
    in_mount("ls; ls d; cat a.md", &r);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.out, "a.md\nd\nin.md\nalpha2\n");
    cli_result_free(&r);
    expect_victims_untouched();
}

/* A changed file swapped, right before the diff reads it, for a FIFO (a
 * blocking open would hang the writeback) or a device (opening one can
 * have effects of its own): refused by name, and the change is not lost. */
static void diff_swapped_for(const char *what, const char *as)
{
    NEED_HOOKS();
    store_and_session();
    in_mount_ok("cat a.md >/dev/null");
    char spec[2048];
    snprintf(spec, sizeof spec, "diff-open:a.md:%.1500s", what);
    race(spec);
    struct cli_result r;
    in_mount("echo changed > a.md", &r);
    cr_expect_eq(r.status, 125, "exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.err, "\"a.md\"") && strstr(r.err, as), "stderr: %s", r.err);
    cli_result_free(&r);
    race("");
    expect_store("a.md", "alpha\n");
    /* the container puts the file back: its change is committed */
    in_mount_ok("rm a.md && mv a.md.raced a.md");
    expect_store("a.md", "changed\n");
}

Test(docker_memory_hostile, diff_file_swapped_for_fifo)
{
    diff_swapped_for("fifo", "FIFO");
}

Test(docker_memory_hostile, diff_file_swapped_for_device)
{
    diff_swapped_for("null", "device");
}

/* ... or for a symlink to a host file: sent as the link it is (refused by
 * name), the host file neither read nor changed. */
Test(docker_memory_hostile, diff_file_swapped_for_symlink)
{
    char what[1100];
    snprintf(what, sizeof what, "symlink=%s", victim);
    diff_swapped_for(what, "is a symbolic link");
    expect_victims_untouched();
}

/* The parent of a changed file swapped for a symlink to another directory
 * of the tree right before the diff reads the file: the diff does not read
 * the other file under this one's name. */
Test(docker_memory_hostile, diff_parent_swapped_for_symlink)
{
    NEED_HOOKS();
    store_and_session();
    in_mount_ok("mkdir e && echo other > e/in.md");
    expect_store("e/in.md", "other\n");
    race("diff-open:d/in.md:symlink=e:d");
    struct cli_result r;
    in_mount("echo changed > d/in.md", &r);
    cr_expect_eq(r.status, 125, "exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.err, "\"d/in.md\""), "stderr: %s", r.err);
    cli_result_free(&r);
    race("");
    expect_store("d/in.md", "inside\n");
    in_mount_ok("rm d && mv d.raced d");
    expect_store("d/in.md", "changed\n");
    expect_store("e/in.md", "other\n");
}

/* A sparse file the size of a disk costs the container nothing; reading it
 * stops at the store's limits instead of spooling it whole on the host. */
Test(docker_memory_hostile, sparse_file_read_within_the_limits)
{
    run_ok((const char *[]){"memory", "create", slug, "--max-file-size", "1m", "--max-files",
                            "10", "--max-total-size", "1m", NULL},
           NULL);
    char arg[128];
    snprintf(arg, sizeof arg, "%s:rw", slug);
    run_ok((const char *[]){"create", key, "--memory", arg, NULL}, NULL);
    struct cli_result r;
    long long t0 = cli_now_ms();
    in_mount("echo ok > ok.md && dd if=/dev/zero of=big.bin bs=1 count=0 seek=4294967296 "
             "2>/dev/null",
             &r);
    long long took = cli_now_ms() - t0;
    cr_expect_eq(r.status, 125, "exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.err, "larger than the store's limits") &&
                  strstr(r.err, "nothing was committed"),
              "stderr: %s", r.err);
    cli_result_free(&r);
    cr_expect_lt(took, 20000, "4 GiB of holes took %lld ms: read whole?", took);
    expect_store("ok.md", "(none)");
    in_mount_ok("rm big.bin");
    expect_store("ok.md", "ok\n");
}

TestSuite(docker_memory_hostile, .init = setup, .fini = teardown, .timeout = 240);
