/*
 * test_file_ops.c - SBX_CAP_FILE_OPS on docker (list, stat, mkdir, remove,
 * rename through sbx-agent) against a real daemon: every op and its
 * errors, and the hostile cases: symlinks planted by root in the container
 * pointing out of the workspace (for every op), a symlink swapped under the
 * ops while they run, 10000 entries listed in bounded memory, a FIFO
 * stat'ed and listed without blocking, a recursive remove of a tree that
 * holds a symlink to /, the call's user, and a container without the agent.
 */
#include "harness.h"

#include <criterion/criterion.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static struct dh h;
static char key[64], hash[65], ref[SBX_REF_MAX];
static sbx_sandbox *sb;

static void setup(void)
{
    /* the ops are the agent's (without it: docker_file_ops_fallback) */
    if (getenv("SBX_TEST_DOCKER_AGENT") && !strcmp(getenv("SBX_TEST_DOCKER_AGENT"), "0"))
        cr_skip_test("the agent is disabled for this run (SBX_TEST_DOCKER_AGENT=0)");
    dh_sandbox_setup(&h, key, hash, ref, &sb);
}

static void teardown(void)
{
    dh_sandbox_teardown(&h, key, ref, sb);
}

TestSuite(docker_file_ops, .init = setup, .fini = teardown, .timeout = 180);

static int do_stat(const char *path, struct sbx_file_info *fi, struct sbx_call *c)
{
    memset(fi, 0, sizeof *fi);
    fi->size = sizeof *fi;
    return h.ops->file_stat(sb, c, path, fi);
}

/* A listing collected for the small cases ("name:type:bytes:mode," in
 * the order the agent gave). */
struct names {
    char text[8192];
    size_t n;
};

static int collect(void *ctx, const struct sbx_file_info *fi)
{
    struct names *nm = ctx;
    size_t l = strlen(nm->text);
    snprintf(nm->text + l, sizeof nm->text - l, "%s:%u:%llu:%o,", fi->name, fi->type,
             (unsigned long long)fi->bytes, fi->mode);
    nm->n++;
    return 0;
}

static int do_list(const char *path, struct names *nm, struct sbx_call *c)
{
    memset(nm, 0, sizeof *nm);
    struct sbx_file_list_sink s = {sizeof s, nm, collect};
    return h.ops->file_list(sb, c, path, &s);
}

Test(docker_file_ops, every_op_and_its_errors)
{
    struct sbx_call c;
    dh_call_init(&c);
    struct sbx_file_info fi;
    /* mkdir: exact mode whatever the umask, parents, existing */
    cr_assert_eq(h.ops->file_mkdir(sb, &c, "d", 0750, 0), SBX_OK, "%s", c.message);
    cr_expect_eq(h.ops->file_mkdir(sb, &c, "d", 0755, 0), SBX_E_EXISTS);
    cr_expect_eq(h.ops->file_mkdir(sb, &c, "d", 0755, SBX_MKDIR_PARENTS), SBX_OK);
    cr_expect_eq(h.ops->file_mkdir(sb, &c, "x/y/z", 0700, 0), SBX_E_NOT_FOUND);
    cr_assert_eq(h.ops->file_mkdir(sb, &c, "x/y/z", 0777, SBX_MKDIR_PARENTS), SBX_OK, "%s",
                 c.message);
    char *m = dh_sh(&h, sb, "stat -c '%a %F' d x x/y x/y/z");
    cr_expect_str_eq(m, "750 directory\n755 directory\n755 directory\n777 directory\n");
    free(m);
    cr_assert_eq(dh_write(&h, sb, "d/f.txt", "hello", 5, 0640, &c), SBX_OK);
    cr_expect_eq(h.ops->file_mkdir(sb, &c, "d/f.txt", 0755, SBX_MKDIR_PARENTS), SBX_E_EXISTS,
                 "a file is not a directory");

    /* stat: file, directory, root; mtime in nanoseconds */
    cr_assert_eq(do_stat("d/f.txt", &fi, &c), SBX_OK, "%s", c.message);
    cr_expect_eq(fi.type, SBX_FILE_REGULAR);
    cr_expect_eq(fi.bytes, 5);
    cr_expect_eq(fi.mode, 0640);
    cr_expect_null(fi.name);
    m = dh_sh(&h, sb, "stat -c %Y d/f.txt");
    cr_expect_eq(fi.mtime_ns / 1000000000, atoll(m), "%lld vs %s", (long long)fi.mtime_ns, m);
    free(m);
    cr_assert_eq(do_stat("d", &fi, &c), SBX_OK);
    cr_expect_eq(fi.type, SBX_FILE_DIR);
    cr_expect_eq(fi.mode, 0750);
    cr_assert_eq(do_stat("", &fi, &c), SBX_OK, "%s", c.message);
    cr_expect_eq(fi.type, SBX_FILE_DIR);
    cr_expect_eq(do_stat("nope", &fi, &c), SBX_E_NOT_FOUND);
    cr_expect_eq(do_stat("d/f.txt/below", &fi, &c), SBX_E_INVALID);
    cr_expect_eq(do_stat("../etc", &fi, &c), SBX_E_INVALID);
    cr_expect_eq(do_stat("/etc/passwd", &fi, &c), SBX_E_INVALID);

    /* list: entries with types, sizes and modes; errors */
    struct names nm;
    free(dh_sh(&h, sb, "ln -s f.txt d/ln; mkdir d/sub; chmod 700 d/sub"));
    cr_assert_eq(do_list("d", &nm, &c), SBX_OK, "%s", c.message);
    cr_expect_eq(nm.n, 3, "%s", nm.text);
    cr_expect(strstr(nm.text, "f.txt:1:5:640,"), "%s", nm.text);
    cr_expect(strstr(nm.text, "ln:3:5:777,"), "%s", nm.text);
    cr_expect(strstr(nm.text, "sub:2:"), "%s", nm.text);
    cr_expect(strstr(nm.text, ":700,"), "%s", nm.text);
    cr_assert_eq(do_list("", &nm, &c), SBX_OK);
    cr_expect(strstr(nm.text, "d:2:") && strstr(nm.text, "x:2:"), "%s", nm.text);
    cr_expect_not(strstr(nm.text, "skills:"), "the empty skills mount point is not listed: %s",
                  nm.text);
    /* a trailing "/" or "/." names the directory a link leads to */
    cr_assert_eq(do_list("d/ln/..", &nm, &c), SBX_E_INVALID);
    free(dh_sh(&h, sb, "ln -s sub d/lsub"));
    cr_assert_eq(do_list("d/lsub/", &nm, &c), SBX_OK, "%s", c.message);
    cr_assert_eq(do_list("d/lsub/.", &nm, &c), SBX_OK, "%s", c.message);
    cr_assert_eq(do_stat("d/lsub/.", &fi, &c), SBX_OK, "%s", c.message);
    cr_expect_eq(fi.type, SBX_FILE_DIR);
    cr_assert_eq(do_stat("d/lsub", &fi, &c), SBX_OK);
    cr_expect_eq(fi.type, SBX_FILE_SYMLINK);
    cr_expect_eq(h.ops->file_remove(sb, &c, "d/lsub", 0), SBX_OK);
    cr_expect_eq(do_list("nope", &nm, &c), SBX_E_NOT_FOUND);
    /* the outputs directory, as read and write see it */
    cr_assert_eq(dh_write(&h, sb, "/mnt/session/outputs/o.txt", "o", 1, 0, &c), SBX_OK, "%s",
                 c.message);
    cr_assert_eq(do_list("/mnt/session/outputs", &nm, &c), SBX_OK, "%s", c.message);
    cr_expect_str_eq(nm.text, "o.txt:1:1:644,");
    cr_assert_eq(do_stat("/mnt/session/outputs/o.txt", &fi, &c), SBX_OK, "%s", c.message);
    cr_expect_eq(h.ops->file_rename(sb, &c, "/mnt/session/outputs/o.txt", "o.txt", 0),
                 SBX_E_INVALID, "across file systems");
    cr_expect_eq(h.ops->file_remove(sb, &c, "/mnt/session/outputs/o.txt", 0), SBX_OK, "%s",
                 c.message);
    cr_expect_eq(do_list("d/f.txt", &nm, &c), SBX_E_INVALID, "a file is not a directory");
    cr_expect_eq(do_list("d/ln", &nm, &c), SBX_E_INVALID, "a symlink is not followed");

    /* rename: file, replace, no-replace, missing, into a missing dir */
    cr_assert_eq(dh_write(&h, sb, "a.txt", "A", 1, 0, &c), SBX_OK);
    cr_assert_eq(dh_write(&h, sb, "b.txt", "B", 1, 0, &c), SBX_OK);
    cr_expect_eq(h.ops->file_rename(sb, &c, "a.txt", "b.txt", SBX_RENAME_NOREPLACE),
                 SBX_E_EXISTS);
    cr_assert_eq(h.ops->file_rename(sb, &c, "a.txt", "b.txt", 0), SBX_OK, "%s", c.message);
    m = dh_sh(&h, sb, "cat b.txt; ls a.txt 2>/dev/null; echo .");
    cr_expect_str_eq(m, "A.\n");
    free(m);
    cr_expect_eq(h.ops->file_rename(sb, &c, "a.txt", "c.txt", 0), SBX_E_NOT_FOUND);
    cr_assert_eq(h.ops->file_rename(sb, &c, "b.txt", "x/y/z/b.txt", 0), SBX_OK);
    cr_assert_eq(h.ops->file_rename(sb, &c, "x/y", "d/y2", 0), SBX_OK, "%s", c.message);
    cr_assert_eq(do_stat("d/y2/z/b.txt", &fi, &c), SBX_OK, "%s", c.message);
    cr_expect_eq(h.ops->file_rename(sb, &c, "d/y2", "d/y2/z/in", 0), SBX_E_INVALID,
                 "into itself");
    cr_expect_eq(h.ops->file_rename(sb, &c, "d/y2", "../out", 0), SBX_E_INVALID);

    /* remove: file, symlink, non-empty dir, recursive, missing */
    cr_expect_eq(h.ops->file_remove(sb, &c, "d/sub", 0), SBX_OK, "%s", c.message);
    cr_expect_eq(h.ops->file_remove(sb, &c, "d", 0), SBX_E_EXISTS, "not empty");
    cr_expect_eq(h.ops->file_remove(sb, &c, "d/ln", 0), SBX_OK);
    cr_expect_eq(do_stat("d/f.txt", &fi, &c), SBX_OK, "removing a link keeps its target");
    cr_expect_eq(h.ops->file_remove(sb, &c, "d", SBX_REMOVE_RECURSIVE), SBX_OK, "%s",
                 c.message);
    cr_expect_eq(do_stat("d", &fi, &c), SBX_E_NOT_FOUND);
    cr_expect_eq(h.ops->file_remove(sb, &c, "d", 0), SBX_E_NOT_FOUND);
    cr_expect_eq(h.ops->file_remove(sb, &c, "", SBX_REMOVE_RECURSIVE), SBX_E_INVALID);
    cr_expect_eq(h.ops->file_mkdir(sb, &c, "", 0755, SBX_MKDIR_PARENTS), SBX_E_INVALID);
    dh_call_free(&c);
}

static int stop_after_two(void *ctx, const struct sbx_file_info *fi)
{
    (void)fi;
    return ++*(int *)ctx == 2 ? SBX_E_CANCELLED : 0;
}

Test(docker_file_ops, a_sink_stops_a_listing)
{
    free(dh_sh(&h, sb, "mkdir many; for i in 1 2 3 4 5 6 7 8; do : > many/$i; done"));
    struct sbx_call c;
    dh_call_init(&c);
    int seen = 0;
    struct sbx_file_list_sink s = {sizeof s, &seen, stop_after_two};
    cr_expect_eq(h.ops->file_list(sb, &c, "many", &s), SBX_E_CANCELLED);
    cr_expect_eq(seen, 2);
    /* the agent is still there for the next op */
    struct sbx_file_info fi;
    cr_expect_eq(do_stat("many/1", &fi, &c), SBX_OK, "%s", c.message);
    dh_call_free(&c);
}

/* The planted links: out -> /etc, outf -> /etc/passwd, rel -> ../../../etc
 * (relative: from in/deep, three levels up is /), made by root in the container. Nothing any op
 * does through them may touch /etc. */
static const char plant[] =
    "ln -s /etc out; ln -s /etc/passwd outf; mkdir -p in/deep; ln -s ../../../etc in/deep/rel;"
    "md5sum /etc/passwd > /tmp/sum; ls /etc > /tmp/etc.before";

static void etc_untouched(void)
{
    char *m = dh_sh(&h, sb,
                    "md5sum -c -s /tmp/sum && ls /etc | cmp -s - /tmp/etc.before && echo same");
    cr_expect_str_eq(m, "same\n", "/etc was changed through a symlink");
    free(m);
}

Test(docker_file_ops, planted_symlinks_are_never_followed_out)
{
    free(dh_sh(&h, sb, plant));
    struct sbx_call c;
    dh_call_init(&c);
    struct sbx_file_info fi;
    struct names nm;
    /* stat: the links as themselves; through them: refused */
    cr_assert_eq(do_stat("out", &fi, &c), SBX_OK, "%s", c.message);
    cr_expect_eq(fi.type, SBX_FILE_SYMLINK);
    cr_assert_eq(do_stat("outf", &fi, &c), SBX_OK);
    cr_expect_eq(fi.type, SBX_FILE_SYMLINK);
    cr_expect_eq(fi.bytes, strlen("/etc/passwd"), "the link's own size, not passwd's");
    cr_expect_eq(do_stat("out/passwd", &fi, &c), SBX_E_INVALID, "%s", c.message);
    cr_expect_eq(do_stat("in/deep/rel/passwd", &fi, &c), SBX_E_INVALID);
    /* list */
    cr_expect_eq(do_list("out", &nm, &c), SBX_E_INVALID);
    cr_expect_eq(do_list("out/", &nm, &c), SBX_E_INVALID);
    cr_expect_eq(do_list("out/.", &nm, &c), SBX_E_INVALID);
    cr_expect_eq(do_stat("out/.", &fi, &c), SBX_E_INVALID);
    cr_expect_eq(do_stat("out/", &fi, &c), SBX_E_INVALID);
    cr_expect_eq(do_list("in/deep/rel", &nm, &c), SBX_E_INVALID);
    cr_assert_eq(do_list("in/deep", &nm, &c), SBX_OK);
    cr_expect_str_eq(nm.text, "rel:3:12:777,");
    /* mkdir */
    cr_expect_eq(h.ops->file_mkdir(sb, &c, "out/sbx-made", 0755, 0), SBX_E_INVALID);
    cr_expect_eq(h.ops->file_mkdir(sb, &c, "out/sbx-made/x", 0755, SBX_MKDIR_PARENTS),
                 SBX_E_INVALID);
    cr_expect_eq(h.ops->file_mkdir(sb, &c, "in/deep/rel/sbx-made", 0755, 0), SBX_E_INVALID);
    cr_expect_eq(h.ops->file_mkdir(sb, &c, "out", 0755, SBX_MKDIR_PARENTS), SBX_E_EXISTS,
                 "a symlink to a directory is not a directory");
    /* remove: through a link refused; the link itself removed, not its target */
    cr_expect_eq(h.ops->file_remove(sb, &c, "out/passwd", 0), SBX_E_INVALID);
    cr_expect_eq(h.ops->file_remove(sb, &c, "out/passwd", SBX_REMOVE_RECURSIVE),
                 SBX_E_INVALID);
    cr_expect_eq(h.ops->file_remove(sb, &c, "in/deep/rel/group", 0), SBX_E_INVALID);
    cr_expect_eq(h.ops->file_remove(sb, &c, "outf", 0), SBX_OK, "%s", c.message);
    /* rename: out of, into and through links refused; a link moved as itself */
    cr_expect_eq(h.ops->file_rename(sb, &c, "out/passwd", "stolen", 0), SBX_E_INVALID);
    cr_assert_eq(dh_write(&h, sb, "mine", "x", 1, 0, &c), SBX_OK);
    cr_expect_eq(h.ops->file_rename(sb, &c, "mine", "out/passwd", 0), SBX_E_INVALID);
    cr_expect_eq(h.ops->file_rename(sb, &c, "mine", "in/deep/rel/shadow", 0), SBX_E_INVALID);
    cr_assert_eq(h.ops->file_rename(sb, &c, "out", "moved", 0), SBX_OK, "%s", c.message);
    cr_assert_eq(do_stat("moved", &fi, &c), SBX_OK);
    cr_expect_eq(fi.type, SBX_FILE_SYMLINK);
    cr_expect_eq(h.ops->file_remove(sb, &c, "moved", SBX_REMOVE_RECURSIVE), SBX_OK,
                 "a link to a directory is removed as a link");
    etc_untouched();
    char *m = dh_sh(&h, sb, "ls -d /etc/sbx-made /stolen stolen 2>/dev/null; echo .");
    cr_expect_str_eq(m, ".\n");
    free(m);
    dh_call_free(&c);
}

/* A process in the container flips the link `d` between real/ (which has
 * etc/mine) and / (which has etc/passwd) as fast as it can while the ops
 * run: whenever an op resolves `d`, it must act on what it opened beneath
 * the workspace, never through the link to /. */
struct flipper {
    volatile int stop;
};

static void *flip(void *arg)
{
    (void)arg;
    struct sbx_call c;
    dh_call_init(&c);
    const char *argv[] = {"sh", "-c",
                          "i=0; while [ $i -lt 20000 ] && [ ! -e stop ]; do "
                          "ln -sfn / d; ln -sfn real d; i=$((i+1)); done",
                          NULL};
    struct dh_buf out = {0}, err = {0};
    struct sbx_exec_result res;
    dh_exec(&h, sb, argv, NULL, 120000, &out, &err, &res, &c);
    dh_buf_free(&out);
    dh_buf_free(&err);
    dh_call_free(&c);
    return NULL;
}

Test(docker_file_ops, a_link_swapped_under_the_ops_never_leads_out)
{
    free(dh_sh(&h, sb, "md5sum /etc/passwd > /tmp/sum; ls /etc > /tmp/etc.before; "
                       "mkdir -p real/etc; : > real/etc/mine; ln -s real d"));
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, flip, NULL), 0);
    struct sbx_call c;
    dh_call_init(&c);
    int outside = 0;
    /* stat is the cheapest op: many of them to hit the window often */
    int seen_out = 0, seen_in = 0;
    for (int i = 0; i < 2000; i++) {
        struct sbx_file_info fi;
        int rc = do_stat("d/etc/passwd", &fi, &c);
        outside += rc == SBX_OK;
        seen_out += rc == SBX_E_INVALID;
        seen_in += rc == SBX_E_NOT_FOUND;
    }
    /* the link really moved under the ops, both ways */
    cr_expect(seen_out > 0 && seen_in > 0, "refused %d, not found %d", seen_out, seen_in);
    cr_log_info("2000 stats: %d refused (d -> /), %d not found (d -> real)", seen_out,
                seen_in);
    for (int i = 0; i < 150; i++) {
        struct sbx_file_info fi;
        struct names nm;
        /* /etc has passwd; real/etc has only mine */
        if (do_stat("d/etc/passwd", &fi, &c) == SBX_OK)
            outside++;
        if (do_list("d/etc", &nm, &c) == SBX_OK && strstr(nm.text, "passwd:"))
            outside++;
        h.ops->file_mkdir(sb, &c, "d/etc/sbx-made", 0755, 0);
        h.ops->file_mkdir(sb, &c, "d/etc/sbx-deep/x", 0755, SBX_MKDIR_PARENTS);
        h.ops->file_remove(sb, &c, "d/etc/group", 0);
        h.ops->file_rename(sb, &c, "d/etc/passwd", "stolen", 0);
        h.ops->file_rename(sb, &c, "real/etc/mine", "d/etc/planted", 0);
        h.ops->file_rename(sb, &c, "real/etc/planted", "real/etc/mine", 0);
    }
    free(dh_sh(&h, sb, ": > stop"));
    pthread_join(t, NULL);
    cr_expect_eq(outside, 0, "%d ops saw /etc through the swapped link", outside);
    etc_untouched();
    char *m = dh_sh(&h, sb,
                    "ls -d /etc/sbx-made /etc/sbx-deep /etc/planted stolen 2>/dev/null; echo .");
    cr_expect_str_eq(m, ".\n");
    free(m);
    dh_call_free(&c);
}

/* 10000 entries with 200-byte names (2 MB of names): each is checked as it
 * arrives and nothing is kept, so the test process's peak RSS may grow by
 * far less than the listing's size. */
struct counted {
    size_t n, bad;
    unsigned char seen[10001];
};

static int count_entry(void *ctx, const struct sbx_file_info *fi)
{
    struct counted *k = ctx;
    char num[6] = {0};
    memcpy(num, fi->name + 1, strnlen(fi->name + 1, 5));
    int i = atoi(num);
    if (fi->type != SBX_FILE_REGULAR || strlen(fi->name) != 200 || i < 1 || i > 10000 ||
        k->seen[i]++)
        k->bad++;
    k->n++;
    return 0;
}

static long peak_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

Test(docker_file_ops, ten_thousand_entries_in_bounded_memory, .timeout = 240)
{
    free(dh_sh(&h, sb,
               "mkdir big; cd big; awk 'BEGIN { for (i = 1; i <= 10000; i++) "
               "printf \"f%05d%0194d\\n\", i, 0 }' | xargs touch"));
    struct sbx_call c;
    dh_call_init(&c);
    struct counted *k = calloc(1, sizeof *k);
    struct sbx_file_list_sink s = {sizeof s, k, count_entry};
    long before = peak_kb();
    double t0 = dh_now();
    cr_assert_eq(h.ops->file_list(sb, &c, "big", &s), SBX_OK, "%s", c.message);
    double ms = dh_now() - t0;
    long grew = peak_kb() - before;
    cr_expect_eq(k->n, 10000);
    cr_expect_eq(k->bad, 0);
    cr_expect_lt(grew, 1024, "peak RSS grew by %ld KiB listing 2 MB of names", grew);
    cr_log_info("listed 10000 entries in %.0f ms, peak RSS +%ld KiB", ms, grew);
    free(k);
    dh_call_free(&c);
}

Test(docker_file_ops, a_fifo_is_stated_and_listed_without_blocking)
{
    free(dh_sh(&h, sb, "mkdir q; mkfifo q/p"));
    struct sbx_call c;
    dh_call_init(&c);
    struct sbx_file_info fi;
    struct names nm;
    double t0 = dh_now();
    cr_assert_eq(do_stat("q/p", &fi, &c), SBX_OK, "%s", c.message);
    cr_expect_eq(fi.type, SBX_FILE_OTHER);
    cr_assert_eq(do_list("q", &nm, &c), SBX_OK);
    cr_expect(strstr(nm.text, "p:4:0:"), "%s", nm.text);
    cr_expect_eq(do_list("q/p", &nm, &c), SBX_E_INVALID);
    cr_expect_eq(h.ops->file_rename(sb, &c, "q/p", "q/p2", 0), SBX_OK);
    cr_expect_eq(h.ops->file_remove(sb, &c, "q/p2", 0), SBX_OK);
    cr_expect_lt(dh_now() - t0, 5000, "an op waited on the FIFO");
    dh_call_free(&c);
}

Test(docker_file_ops, recursive_remove_leaves_what_links_point_at)
{
    free(dh_sh(&h, sb,
               "mkdir -p t/a/b; : > t/a/b/f; ln -s / t/root; ln -s /etc t/a/etc;"
               "ln -s ../../../.. t/a/b/up; ls / > /tmp/root.before;"
               "md5sum /etc/passwd > /tmp/sum; ls /etc > /tmp/etc.before"));
    struct sbx_call c;
    dh_call_init(&c);
    cr_expect_eq(h.ops->file_remove(sb, &c, "t", 0), SBX_E_EXISTS);
    cr_assert_eq(h.ops->file_remove(sb, &c, "t", SBX_REMOVE_RECURSIVE), SBX_OK, "%s",
                 c.message);
    char *m = dh_sh(&h, sb, "ls / | cmp -s - /tmp/root.before && ls -d t 2>/dev/null; echo .");
    cr_expect_str_eq(m, ".\n", "/ changed or t is still there");
    free(m);
    etc_untouched();
    dh_call_free(&c);
}

Test(docker_file_ops, ops_act_as_the_calls_user)
{
    struct sbx_call c;
    dh_call_init(&c);
    struct sbx_user_spec u = {sizeof u, 0, "bob", NULL, NULL};
    cr_assert_eq(h.ops->user_add(sb, &c, &u), SBX_OK, "%s", c.message);
    free(dh_sh(&h, sb, "mkdir -m 755 rootonly; : > rootonly/f; chmod 1777 .; "
                       "mkdir -m 700 secret; : > secret/s"));
    c.user = "bob";
    struct sbx_file_info fi;
    struct names nm;
    cr_expect_eq(h.ops->file_mkdir(sb, &c, "rootonly/x", 0755, 0), SBX_E_DENIED, "%s",
                 c.message);
    cr_expect_eq(h.ops->file_remove(sb, &c, "rootonly/f", 0), SBX_E_DENIED);
    cr_expect_eq(h.ops->file_rename(sb, &c, "rootonly/f", "g", 0), SBX_E_DENIED);
    cr_expect_eq(do_list("secret", &nm, &c), SBX_E_DENIED);
    cr_expect_eq(do_stat("secret/s", &fi, &c), SBX_E_DENIED);
    cr_assert_eq(h.ops->file_mkdir(sb, &c, "bobs", 0700, 0), SBX_OK, "%s", c.message);
    char *m = dh_sh(&h, sb, "stat -c '%U %a' bobs");
    cr_expect_str_eq(m, "bob 700\n");
    free(m);
    c.user = NULL;
    cr_expect_eq(do_list("secret", &nm, &c), SBX_OK, "the default user (root) may");
    dh_call_free(&c);
}

TestSuite(docker_file_ops_fallback, .timeout = 120);

Test(docker_file_ops_fallback, without_the_agent_the_ops_are_unsupported)
{
    dh_require_daemon();
    struct dh hx;
    const char *extra[] = {"agent", "false", NULL};
    dh_open(&hx, NULL, extra);
    char k[64], hs[65], r[SBX_REF_MAX];
    dh_new_key(k, hs);
    sbx_sandbox *s = dh_create(&hx, k, r);
    struct sbx_call c;
    dh_call_init(&c);
    struct sbx_file_info fi = {.size = sizeof fi};
    cr_expect_eq(hx.ops->file_stat(s, &c, "", &fi), SBX_E_UNSUPPORTED);
    cr_expect(strstr(c.message, "without the sbx agent"), "%s", c.message);
    cr_expect_eq(hx.ops->file_mkdir(s, &c, "d", 0755, 0), SBX_E_UNSUPPORTED);
    cr_expect_eq(hx.ops->file_rename(s, &c, "a", "b", 0), SBX_E_UNSUPPORTED);
    dh_call_free(&c);
    hx.ops->release(s);
    dh_destroy(&hx, k, r);
    dh_close(&hx);
}
