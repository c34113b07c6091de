/*
 * test_snapshot.c - `sbx snapshot`, `sbx restore`, `sbx create
 * --from-snapshot`: a workspace survives the round trip exactly (content,
 * modes, empty directories) in each compression; hostile snapshots are
 * refused before anything changes; a workspace with a symlink is refused
 * by name; an interrupted snapshot leaves neither the file nor a temporary;
 * names that are not ASCII or not UTF-8 round-trip; a restore that fails
 * anywhere (a refused entry after valid ones, a truncated archive, a file
 * changed while it is read, a killed sbx) leaves the workspace as it was.
 */
#include "../cli/cli_harness.h"
#include "../e2b/fake_service.h"

#include <criterion/criterion.h>

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static struct cli_env e;

static void run_ok(const char *const *args, struct cli_result *r)
{
    cli_run(&e, args, NULL, 120000, r);
    cr_assert_eq(r->status, 0, "sbx %s: exit %d: %s", args[0], r->status, r->err);
}

/* Every entry with its type, mode and content digest, sorted. */
static const char *listing =
    "find . -path ./skills -prune -o -print | sort | while read -r p; do "
    "if [ -d \"$p\" ]; then echo \"d $(stat -c %a \"$p\") $p\"; "
    "else echo \"f $(stat -c %a \"$p\") $(md5sum < \"$p\" | cut -c1-32) $p\"; fi; done";

static char *list_of(const char *session)
{
    struct cli_result r;
    run_ok((const char *[]){"exec", session, "--", "sh", "-c", listing, NULL}, &r);
    char *out = strdup(r.out);
    cli_result_free(&r);
    return out;
}

static void fill(const char *session)
{
    struct cli_result r;
    run_ok((const char *[]){"exec", session, "--", "sh", "-c",
                            "mkdir -p a/b/c empty 'sp ace' && printf 'x\\000y' > a/b/c/bin "
                            "&& echo hi > 'sp ace/-dash' && chmod 0700 empty "
                            "&& echo run > a/run.sh && chmod 0755 a/run.sh "
                            "&& echo secret > .hidden && chmod 0600 .hidden",
                            NULL},
           &r);
    cli_result_free(&r);
}

static void file_in_dir(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", e.dir, name);
}

static void round_trip(void)
{
    fill("src");
    char *want = list_of("src");
    cr_assert(strstr(want, "f 600"), "listing: %s", want);
    const char *modes[][2] = {{"plain.tar", NULL}, {"gz.tar.gz", "--gzip"},
                              {"zst.tar.zst", "--zstd"}};
    for (size_t i = 0; i < 3; i++) {
        char file[PATH_MAX + 32], dst[16];
        file_in_dir(file, sizeof file, modes[i][0]);
        struct cli_result r;
        if (modes[i][1])
            run_ok((const char *[]){"snapshot", "src", file, modes[i][1], NULL}, &r);
        else
            run_ok((const char *[]){"snapshot", "src", file, NULL}, &r);
        cli_result_free(&r);
        snprintf(dst, sizeof dst, "dst%zu", i);
        run_ok((const char *[]){"create", dst, "--from-snapshot", file, NULL}, &r);
        cr_assert_str_eq(r.out, "created\n");
        cli_result_free(&r);
        char *got = list_of(dst);
        cr_assert_str_eq(got, want, "%s differs after the round trip", modes[i][0]);
        free(got);
        run_ok((const char *[]){"destroy", dst, NULL}, &r);
        cli_result_free(&r);
    }
    /* restore replaces: what was there and is not in the snapshot goes */
    struct cli_result r;
    run_ok((const char *[]){"exec", "src", "--", "sh", "-c", "rm -rf a && echo new > new", NULL},
           &r);
    cli_result_free(&r);
    char file[PATH_MAX + 32];
    file_in_dir(file, sizeof file, "gz.tar.gz");
    run_ok((const char *[]){"restore", "src", file, NULL}, &r);
    cli_result_free(&r);
    char *got = list_of("src");
    cr_assert_str_eq(got, want);
    free(got);
    free(want);
}

/* A tar made on the host by python's tarfile, with one hostile member. */
static void hostile_tar(const char *name, const char *member_code)
{
    char cmd[PATH_MAX * 2 + 1024];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && python3 -c \"import tarfile, io\n"
             "t = tarfile.open('%s', 'w')\n"
             "i = tarfile.TarInfo('ok.txt'); i.size = 2; t.addfile(i, io.BytesIO(b'ok'))\n"
             "%s\n"
             "t.close()\"",
             e.dir, name, member_code);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
}

static void hostile_snapshots_are_refused(void)
{
    struct cli_result r;
    run_ok((const char *[]){"exec", "victim", "--", "sh", "-c", "echo keep > marker", NULL},
           &r);
    cli_result_free(&r);
    hostile_tar("dotdot.tar", "i = tarfile.TarInfo('../evil'); i.size = 1; "
                              "t.addfile(i, io.BytesIO(b'e'))");
    hostile_tar("link.tar", "i = tarfile.TarInfo('l'); i.type = tarfile.SYMTYPE; "
                            "i.linkname = '/etc/passwd'; t.addfile(i)");
    hostile_tar("abs.tar", "i = tarfile.TarInfo('/abs'); i.size = 1; "
                           "t.addfile(i, io.BytesIO(b'a'))");
    const char *names[] = {"dotdot.tar", "link.tar", "abs.tar"};
    for (size_t i = 0; i < 3; i++) {
        char file[PATH_MAX + 32];
        file_in_dir(file, sizeof file, names[i]);
        cli_run(&e, (const char *[]){"restore", "victim", file, NULL}, NULL, 60000, &r);
        cr_assert_eq(r.status, 125, "%s was restored", names[i]);
        cr_assert(strstr(r.err, "refused"), "%s", r.err);
        cli_result_free(&r);
        cli_run(&e, (const char *[]){"create", "fresh", "--from-snapshot", file, NULL}, NULL,
                60000, &r);
        cr_assert_eq(r.status, 125);
        cli_result_free(&r);
    }
    /* the victim is untouched; the refused creates left no session */
    run_ok((const char *[]){"read", "victim", "marker", NULL}, &r);
    cr_assert_str_eq(r.out, "keep\n");
    cli_result_free(&r);
    run_ok((const char *[]){"exec", "victim", "--", "sh", "-c", "ls -A | grep -vx skills",
                            NULL},
           &r);
    cr_assert_str_eq(r.out, "marker\n", "a refused snapshot changed the workspace");
    cli_result_free(&r);
    run_ok((const char *[]){"sessions", NULL}, &r);
    cr_assert_null(strstr(r.out, "fresh"), "a refused create left its session: %s", r.out);
    cli_result_free(&r);
}

/* TMPDIR of the sbx processes: a directory of the test's own, checked
 * empty after failures. */
static void private_tmpdir(char *out, size_t cap)
{
    snprintf(out, cap, "%s/tmp", e.dir);
    cr_assert_eq(mkdir(out, 0700), 0);
    cli_env_setenv(&e, "TMPDIR", out);
}

static void symlinks_in_the_workspace_are_refused(void)
{
    char tmpdir[PATH_MAX + 8];
    private_tmpdir(tmpdir, sizeof tmpdir);
    struct cli_result r;
    run_ok((const char *[]){"exec", "linked", "--", "sh", "-c",
                            "echo a > a && ln -s a the-link", NULL},
           &r);
    cli_result_free(&r);
    char file[PATH_MAX + 32];
    file_in_dir(file, sizeof file, "linked.tar");
    cli_run(&e, (const char *[]){"snapshot", "linked", file, NULL}, NULL, 60000, &r);
    cr_assert_eq(r.status, 125);
    cr_assert(strstr(r.err, "the-link"), "the symlink is not named: %s", r.err);
    cli_result_free(&r);
    cr_assert_eq(access(file, F_OK), -1, "a refused snapshot was written");
    cr_assert_eq(cli_dir_entries(e.dir) >= 0, 1);
    char cmd[PATH_MAX + 128];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | grep -q sbx-snapshot", e.dir);
    cr_assert_neq(system(cmd), 0, "a temporary file was left");
    cr_assert_eq(cli_dir_entries(tmpdir), 0, "a failed snapshot left files in TMPDIR");
}

static void an_interrupted_snapshot_writes_nothing(void)
{
    struct cli_result r;
    run_ok((const char *[]){"exec", "big", "--", "sh", "-c",
                            "dd if=/dev/zero of=big bs=1M count=256 2>/dev/null", NULL},
           &r);
    cli_result_free(&r);
    char file[PATH_MAX + 32];
    file_in_dir(file, sizeof file, "big.tar");
    struct cli_proc p;
    cli_spawn(&e, (const char *[]){"snapshot", "big", file, NULL}, CLI_STDIN_NULL, &p);
    usleep(150 * 1000);
    kill(p.pid, SIGINT);
    int status = cli_wait(&p, 60000);
    cr_assert(status == 130 || status == 0, "exit %d", status);
    if (status == 130)
        cr_assert_eq(access(file, F_OK), -1, "an interrupted snapshot published a file");
    char cmd[PATH_MAX + 128];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | grep -q sbx-snapshot", e.dir);
    cr_assert_neq(system(cmd), 0, "a temporary file was left");
}

/* A tree deeper than the archive checks allow (256 levels) is refused by
 * name, and a killed sbx never publishes a file. */
static void deep_trees_and_a_killed_snapshot(void)
{
    char tmpdir[PATH_MAX + 8];
    private_tmpdir(tmpdir, sizeof tmpdir);
    struct cli_result r;
    run_ok((const char *[]){"exec", "deep", "--", "sh", "-c",
                            "i=0; while [ $i -lt 300 ]; do mkdir d; cd d; i=$((i+1)); done; "
                            "echo bottom > f",
                            NULL},
           &r);
    cli_result_free(&r);
    char file[PATH_MAX + 32];
    file_in_dir(file, sizeof file, "deep.tar");
    cli_run(&e, (const char *[]){"snapshot", "deep", file, NULL}, NULL, 60000, &r);
    cr_assert_eq(r.status, 125, "a 300-level tree was snapshotted");
    cr_assert(strstr(r.err, "refused"), "%s", r.err);
    cli_result_free(&r);
    cr_assert_eq(access(file, F_OK), -1, "a refused snapshot was written");
    /* the same depth in a snapshot given to restore */
    char cmd[PATH_MAX * 2 + 512];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && python3 -c \"import tarfile, io\n"
             "t = tarfile.open('deep-in.tar', 'w')\n"
             "i = tarfile.TarInfo('/'.join(['d'] * 300) + '/f'); i.size = 1\n"
             "t.addfile(i, io.BytesIO(b'x')); t.close()\"",
             e.dir);
    cr_assert_eq(system(cmd), 0);
    file_in_dir(file, sizeof file, "deep-in.tar");
    cli_run(&e, (const char *[]){"restore", "deep", file, NULL}, NULL, 60000, &r);
    cr_assert_eq(r.status, 125, "a 300-level snapshot was restored");
    cli_result_free(&r);
    run_ok((const char *[]){"exec", "deep", "--", "sh", "-c", "ls -A | grep -vx skills", NULL},
           &r);
    cr_assert_str_eq(r.out, "d\n", "a refused restore changed the workspace");
    cli_result_free(&r);

    /* SIGKILL in the middle of a snapshot of a big file */
    run_ok((const char *[]){"exec", "deep", "--", "sh", "-c",
                            "rm -rf d && dd if=/dev/zero of=big bs=1M count=512 2>/dev/null",
                            NULL},
           &r);
    cli_result_free(&r);
    file_in_dir(file, sizeof file, "killed.tar");
    struct cli_proc p;
    cli_spawn(&e, (const char *[]){"snapshot", "deep", file, NULL}, CLI_STDIN_NULL, &p);
    usleep(100 * 1000);
    kill(p.pid, SIGKILL);
    cli_wait(&p, 60000);
    cr_assert_eq(access(file, F_OK), -1, "a killed snapshot published its file");
    snprintf(cmd, sizeof cmd, "ls -A '%s' | grep -q sbx-snapshot", e.dir);
    cr_assert_neq(system(cmd), 0, "a killed snapshot left its temporary file");
    cr_assert_eq(cli_dir_entries(tmpdir), 0, "a killed snapshot left files in TMPDIR");
}

/* ---- names, all-or-nothing restores ------------------------------------ */

/* café, 日本/d/f, a lone 0xff and a lone 0xe9 (not UTF-8). */
static void fill_names(const char *session)
{
    struct cli_result r;
    run_ok((const char *[]){"exec", session, "--", "sh", "-c",
                            "echo cafe > caf\xc3\xa9 && mkdir -p \xe6\x97\xa5\xe6\x9c\xac/d "
                            "&& echo nihon > \xe6\x97\xa5\xe6\x9c\xac/d/f "
                            "&& printf ff > \"$(printf '\\377')\" "
                            "&& mkdir \"$(printf 'x\\351y')\" "
                            "&& echo e9 > \"$(printf 'x\\351y')/$(printf '\\351')\"",
                            NULL},
           &r);
    cli_result_free(&r);
}

static void non_ascii_names_round_trip(void)
{
    fill("names");
    fill_names("names");
    char *want = list_of("names");
    cr_assert(strstr(want, "caf\xc3\xa9") && strstr(want, "\377") && strstr(want, "x\351y/\351"),
              "listing: %s", want);
    char file[PATH_MAX + 32];
    file_in_dir(file, sizeof file, "names.tar.gz");
    struct cli_result r;
    run_ok((const char *[]){"snapshot", "names", file, "--gzip", NULL}, &r);
    cli_result_free(&r);
    run_ok((const char *[]){"create", "names2", "--from-snapshot", file, NULL}, &r);
    cli_result_free(&r);
    char *got = list_of("names2");
    cr_assert_str_eq(got, want, "create --from-snapshot lost names");
    free(got);
    /* restore over a changed workspace */
    run_ok((const char *[]){"exec", "names", "--", "sh", "-c",
                            "rm -rf caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac && echo new > new", NULL},
           &r);
    cli_result_free(&r);
    run_ok((const char *[]){"restore", "names", file, NULL}, &r);
    cli_result_free(&r);
    got = list_of("names");
    cr_assert_str_eq(got, want, "restore lost names");
    free(got);
    free(want);
}

/* A tar made by python's tarfile: ok.txt, sub/two.txt, then `extra`. */
static void tar_with(const char *name, const char *extra)
{
    char cmd[PATH_MAX * 2 + 2048];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && python3 -c \"import tarfile, io\n"
             "t = tarfile.open('%s', 'w', format=tarfile.GNU_FORMAT)\n"
             "def f(n, b):\n"
             "    i = tarfile.TarInfo(n); i.size = len(b); t.addfile(i, io.BytesIO(b))\n"
             "f('ok.txt', b'ok')\n"
             "f('sub/two.txt', b'two' * 3000)\n"
             "%s\n"
             "t.close()\"",
             e.dir, name, extra);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
}

/* The workspace's own files: several, nested, non-ASCII; their listing. */
static char *fill_victim(const char *session)
{
    fill(session);
    fill_names(session);
    return list_of(session);
}

static void no_stage_left(const char *session)
{
    struct cli_result r;
    run_ok((const char *[]){"exec", session, "--", "sh", "-c", "ls -A", NULL}, &r);
    cr_assert_null(strstr(r.out, ".sbx-restore"), "a staging directory stayed: %s", r.out);
    cli_result_free(&r);
}

static void refused_midway_leaves_every_file(void)
{
    char *want = fill_victim("midway");
    tar_with("skills.tar", "f('skills/x', b'x')");
    tar_with("dotdot-late.tar", "f('../evil', b'e')");
    tar_with("link-late.tar", "i = tarfile.TarInfo('zz'); i.type = tarfile.SYMTYPE; "
                              "i.linkname = '/etc/passwd'; t.addfile(i)");
    tar_with("stage-name.tar", "f('.sbx-restore.x/new/a', b'a')");
    tar_with("full.tar", "f('three.txt', b'3' * 20000)");
    /* full.tar cut in the middle of three.txt's data */
    char cmd[PATH_MAX * 2 + 256];
    snprintf(cmd, sizeof cmd, "cd '%s' && head -c 15000 full.tar > truncated.tar", e.dir);
    cr_assert_eq(system(cmd), 0);
    const char *names[] = {"skills.tar", "dotdot-late.tar", "link-late.tar", "stage-name.tar",
                           "truncated.tar"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char file[PATH_MAX + 32];
        file_in_dir(file, sizeof file, names[i]);
        struct cli_result r;
        cli_run(&e, (const char *[]){"restore", "midway", file, NULL}, NULL, 60000, &r);
        cr_assert_eq(r.status, 125, "%s: exit %d: %s", names[i], r.status, r.err);
        cli_result_free(&r);
        char *got = list_of("midway");
        cr_assert_str_eq(got, want, "%s changed the workspace", names[i]);
        free(got);
        no_stage_left("midway");
        /* and create --from-snapshot publishes nothing */
        cli_run(&e, (const char *[]){"create", "fresh-midway", "--from-snapshot", file, NULL}, NULL,
                60000, &r);
        cr_assert_eq(r.status, 125, "create from %s: exit %d", names[i], r.status);
        cli_result_free(&r);
        run_ok((const char *[]){"sessions", NULL}, &r);
        cr_assert_null(strstr(r.out, "fresh-midway"), "create from %s left its session: %s",
                       names[i], r.out);
        cli_result_free(&r);
    }
    free(want);
}

/* Flip the snapshot file in place between a valid and a hostile version
 * while restores read it: whatever a restore read was checked, so it ends
 * with the valid tree or refused with the workspace as it was, never with
 * a workspace half replaced. */
struct flipper {
    char good[PATH_MAX + 32], bad[PATH_MAX + 32], file[PATH_MAX + 32];
    volatile int stop;
};

static void *flip(void *ud)
{
    struct flipper *f = ud;
    static char a[65536], b[65536];
    int fa = open(f->good, O_RDONLY), fb = open(f->bad, O_RDONLY);
    ssize_t na = read(fa, a, sizeof a), nb = read(fb, b, sizeof b);
    close(fa);
    close(fb);
    int fd = open(f->file, O_WRONLY);
    for (unsigned i = 0; !f->stop && na > 0 && nb == na; i++) {
        if (pwrite(fd, i % 2 ? b : a, (size_t)na, 0) != na)
            break;
        usleep(300);
    }
    close(fd);
    return NULL;
}

static void a_file_changed_while_read(void)
{
    char *want = fill_victim("flipped");
    tar_with("good.tar", "f('evil', b'e')");
    tar_with("bad.tar", "f('../ev', b'e')"); /* same length */
    struct flipper *f = calloc(1, sizeof *f);
    file_in_dir(f->good, sizeof f->good, "good.tar");
    file_in_dir(f->bad, sizeof f->bad, "bad.tar");
    file_in_dir(f->file, sizeof f->file, "flipping.tar");
    char cmd[PATH_MAX * 3];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", f->good, f->file);
    cr_assert_eq(system(cmd), 0);
    /* what the valid version restores to */
    struct cli_result r;
    run_ok((const char *[]){"create", "ref", "--from-snapshot", f->good, NULL}, &r);
    cli_result_free(&r);
    char *good_list = list_of("ref");
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, flip, f), 0);
    int restored = 0;
    for (int i = 0; i < 6 && !restored; i++) {
        cli_run(&e, (const char *[]){"restore", "flipped", f->file, NULL}, NULL, 60000, &r);
        char *got = list_of("flipped");
        if (r.status == 0) {
            cr_assert_str_eq(got, good_list, "restored content that was not checked");
            restored = 1;
        } else {
            cr_assert_eq(r.status, 125, "exit %d: %s", r.status, r.err);
            cr_assert_str_eq(got, want, "a refused restore changed the workspace: %s", r.err);
        }
        free(got);
        cli_result_free(&r);
    }
    f->stop = 1;
    pthread_join(t, NULL);
    no_stage_left("flipped");
    free(good_list);
    free(want);
    free(f);
}

/* SIGKILL of sbx after the extraction and in the middle of the swap
 * (SBX_TEST_CRASH_AT): the next restore rolls the workspace back, even
 * one that is then refused. */
static void a_killed_restore_is_rolled_back(void)
{
#ifndef SBX_TEST_HOOKS
    cr_skip_test("built without SBX_TEST_HOOKS (no crash points)");
#endif
    char *want = fill_victim("killed");
    tar_with("good.tar", "f('more/deep/file', b'x' * 5000)");
    tar_with("refused.tar", "f('../evil', b'e')");
    char good[PATH_MAX + 32], refused[PATH_MAX + 32];
    file_in_dir(good, sizeof good, "good.tar");
    file_in_dir(refused, sizeof refused, "refused.tar");
    const char *steps[] = {"restore-before-swap", "restore-mid-swap"};
    for (size_t i = 0; i < 2; i++) {
        struct cli_result r;
        cli_env_setenv(&e, "SBX_TEST_CRASH_AT", steps[i]);
        cli_run(&e, (const char *[]){"restore", "killed", good, NULL}, NULL, 60000, &r);
        cr_assert_eq(r.status, CLI_KILLED_BY + SIGKILL, "%s: exit %d: %s", steps[i], r.status, r.err);
        cli_result_free(&r);
        cli_env_setenv(&e, "SBX_TEST_CRASH_AT", "");
        cli_run(&e, (const char *[]){"restore", "killed", refused, NULL}, NULL, 60000, &r);
        cr_assert_eq(r.status, 125, "exit %d: %s", r.status, r.err);
        cli_result_free(&r);
        char *got = list_of("killed");
        cr_assert_str_eq(got, want, "after a kill at %s the workspace differs", steps[i]);
        free(got);
        no_stage_left("killed");
    }
    free(want);
}

/* create --from-snapshot killed during its restore: nothing is published,
 * and the reconciler removes the sandbox. */
static void a_killed_create_publishes_nothing(void)
{
#ifndef SBX_TEST_HOOKS
    cr_skip_test("built without SBX_TEST_HOOKS (no crash points)");
#endif
    tar_with("good.tar", "");
    char file[PATH_MAX + 32];
    file_in_dir(file, sizeof file, "good.tar");
    struct cli_result r;
    cli_env_setenv(&e, "SBX_TEST_CRASH_AT", "restore-before-swap");
    cli_run(&e, (const char *[]){"create", "killed-create", "--from-snapshot", file, NULL},
            NULL, 60000, &r);
    cr_assert_eq(r.status, CLI_KILLED_BY + SIGKILL, "exit %d: %s", r.status, r.err);
    cli_result_free(&r);
    cli_env_setenv(&e, "SBX_TEST_CRASH_AT", "");
    run_ok((const char *[]){"sessions", NULL}, &r);
    cr_assert_null(strstr(r.out, "killed-create"), "published: %s", r.out);
    cli_result_free(&r);
    run_ok((const char *[]){"reconcile", NULL}, &r);
    cr_assert(strstr(r.out, "1 cleaned") || strstr(r.err, "1 cleaned"), "%s%s", r.out, r.err);
    cli_result_free(&r);
    cr_assert_eq(cli_dir_entries(e.ws_root), 0, "the workspace stayed after reconcile");
}

/* A stage of a process this host cannot judge (another realm) is never
 * rolled back; while it is half swapped in, restore and snapshot refuse
 * naming it; a stage that never started swapping does not block. */
static void a_foreign_stage_is_left_alone(void)
{
    struct cli_result r;
    run_ok((const char *[]){"exec", "foreign", "--", "sh", "-c",
                            "echo mine > mine && mkdir -p "
                            ".sbx-restore.0123456789abcdef.1.1.0badcafe/new "
                            ".sbx-restore.0123456789abcdef.1.1.0badcafe/old && "
                            ": > .sbx-restore.0123456789abcdef.1.1.0badcafe/moved",
                            NULL},
           &r);
    cli_result_free(&r);
    tar_with("ok.tar", "");
    char file[PATH_MAX + 32], out[PATH_MAX + 32];
    file_in_dir(file, sizeof file, "ok.tar");
    file_in_dir(out, sizeof out, "foreign.tar");
    cli_run(&e, (const char *[]){"restore", "foreign", file, NULL}, NULL, 60000, &r);
    cr_assert_eq(r.status, 125, "exit %d", r.status);
    cr_assert(strstr(r.err, ".sbx-restore.0123456789abcdef.1.1.0badcafe"), "%s", r.err);
    cli_result_free(&r);
    cli_run(&e, (const char *[]){"snapshot", "foreign", out, NULL}, NULL, 60000, &r);
    cr_assert_eq(r.status, 125, "snapshot of a half-swapped workspace: exit %d", r.status);
    cli_result_free(&r);
    run_ok((const char *[]){"exec", "foreign", "--", "sh", "-c",
                            "ls -A | grep -v skills | tr '\\n' ' '", NULL},
           &r);
    cr_assert_str_eq(r.out, ".sbx-restore.0123456789abcdef.1.1.0badcafe mine ",
                     "the workspace changed");
    cli_result_free(&r);
    /* not swapping: restores go ahead and keep it */
    run_ok((const char *[]){"exec", "foreign", "--", "sh", "-c",
                            "rm .sbx-restore.0123456789abcdef.1.1.0badcafe/moved", NULL},
           &r);
    cli_result_free(&r);
    run_ok((const char *[]){"restore", "foreign", file, NULL}, &r);
    cli_result_free(&r);
    run_ok((const char *[]){"exec", "foreign", "--", "sh", "-c",
                            "ls -A | grep -v skills | tr '\\n' ' '", NULL},
           &r);
    cr_assert_str_eq(r.out, ".sbx-restore.0123456789abcdef.1.1.0badcafe ok.txt sub ");
    cli_result_free(&r);
}

static void setup_local(void)
{
    cli_env_init(&e);
    cli_env_local_config(&e);
}

static void teardown(void)
{
    cli_env_fini(&e);
}

TestSuite(snapshot_local, .init = setup_local, .fini = teardown, .timeout = 180);

Test(snapshot_local, round_trip) { round_trip(); }
Test(snapshot_local, hostile_snapshots_are_refused) { hostile_snapshots_are_refused(); }
Test(snapshot_local, symlinks_in_the_workspace_are_refused)
{
    symlinks_in_the_workspace_are_refused();
}
Test(snapshot_local, deep_trees_and_a_killed_snapshot) { deep_trees_and_a_killed_snapshot(); }
Test(snapshot_local, an_interrupted_snapshot_writes_nothing)
{
    an_interrupted_snapshot_writes_nothing();
}
Test(snapshot_local, non_ascii_names_round_trip) { non_ascii_names_round_trip(); }
Test(snapshot_local, refused_midway_leaves_every_file) { refused_midway_leaves_every_file(); }
Test(snapshot_local, a_file_changed_while_read) { a_file_changed_while_read(); }
Test(snapshot_local, a_killed_restore_is_rolled_back) { a_killed_restore_is_rolled_back(); }
Test(snapshot_local, a_foreign_stage_is_left_alone) { a_foreign_stage_is_left_alone(); }
Test(snapshot_local, a_killed_create_publishes_nothing) { a_killed_create_publishes_nothing(); }

static void setup_docker(void)
{
    if (!getenv("SBX_TEST_DOCKER_HOST") || !*getenv("SBX_TEST_DOCKER_HOST"))
        cr_skip_test("SBX_TEST_DOCKER_HOST is not set");
    cli_env_init(&e);
    cli_env_docker_config(&e, NULL);
}

static void teardown_docker(void)
{
    static const char *const sessions[] = {"src", "dst0", "dst1", "dst2", "victim",
                                           "fresh", "linked", "big", "names", "names2",
                                           "ref", "midway", "fresh-midway", "flipped",
                                           "killed"};
    for (size_t i = 0; i < sizeof sessions / sizeof *sessions; i++) {
        struct cli_result r;
        cli_run(&e, (const char *[]){"destroy", sessions[i], NULL}, NULL, 60000, &r);
        cli_result_free(&r);
    }
    cli_env_fini(&e);
}

TestSuite(snapshot_docker, .init = setup_docker, .fini = teardown_docker, .timeout = 300);

Test(snapshot_docker, round_trip) { round_trip(); }
Test(snapshot_docker, hostile_snapshots_are_refused) { hostile_snapshots_are_refused(); }
Test(snapshot_docker, symlinks_in_the_workspace_are_refused)
{
    symlinks_in_the_workspace_are_refused();
}
Test(snapshot_docker, non_ascii_names_round_trip) { non_ascii_names_round_trip(); }
Test(snapshot_docker, refused_midway_leaves_every_file) { refused_midway_leaves_every_file(); }
Test(snapshot_docker, a_killed_restore_is_rolled_back) { a_killed_restore_is_rolled_back(); }

/* e2b against its fake: commands run in a directory of the fake's. */
static struct fake_service fake;
static char e2b_state[PATH_MAX + 16];

static void setup_e2b(void)
{
    cr_assert_eq(fake_start(&fake, "e2b", "e2b_test_key"), 0, "cannot start the fake (python3?)");
    cli_env_init(&e);
    snprintf(e2b_state, sizeof e2b_state, "%s/e2b-state", e.dir);
    cr_assert_eq(mkdir(e2b_state, 0700), 0);
    char yaml[PATH_MAX + 1024];
    snprintf(yaml, sizeof yaml,
             "default_provider: e2b\nproviders:\n  e2b:\n    api_url: \"%s\"\n"
             "    envd_url: \"%s\"\n    domain: e2b.local\n    template: base\n"
             "    state_dir: \"%s\"\n",
             fake.url, fake.url, e2b_state);
    cli_env_write_config(&e, yaml);
    cli_env_setenv(&e, "E2B_API_KEY", "e2b_test_key");
}

static void teardown_e2b(void)
{
    cli_env_fini(&e);
    fake_stop(&fake);
}

TestSuite(snapshot_e2b, .init = setup_e2b, .fini = teardown_e2b, .timeout = 300);

Test(snapshot_e2b, non_ascii_names_round_trip) { non_ascii_names_round_trip(); }
Test(snapshot_e2b, refused_midway_leaves_every_file) { refused_midway_leaves_every_file(); }
Test(snapshot_e2b, a_killed_restore_is_rolled_back) { a_killed_restore_is_rolled_back(); }

