/*
 * test_fileops.c - file_list, file_stat, file_mkdir, file_remove and
 * file_rename of the `local` provider, and port_resolve: each op's
 * contract, and for every op a symlink planted in the workspace that
 * leads out of it (never followed, nothing outside touched).
 */
#include "harness.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

TestSuite(local_fileops, .init = harness_setup, .fini = harness_teardown);

static void ws_path(char *out, size_t cap, const char *rel)
{
    path_join(out, cap, H.ws, rel);
}

static void host_write(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s: %s", path, strerror(errno));
    fputs(text, f);
    fclose(f);
}

/* A listing collected by name (small directories only). */
struct listing {
    int n;
    char names[16][64];
    uint32_t types[16];
    uint64_t bytes[16];
};

static int collect(void *ctx, const struct sbx_file_info *info)
{
    struct listing *l = ctx;
    cr_assert_lt(l->n, 16);
    snprintf(l->names[l->n], sizeof l->names[0], "%s", info->name);
    l->types[l->n] = info->type;
    l->bytes[l->n] = info->bytes;
    l->n++;
    return 0;
}

static int find(const struct listing *l, const char *name)
{
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->names[i], name) == 0)
            return i;
    return -1;
}

static int list(const char *path, struct listing *l)
{
    memset(l, 0, sizeof *l);
    struct sbx_file_list_sink s = {sizeof s, l, collect};
    harness_call_init(&H.call);
    return H.ops->file_list(H.sb, &H.call, path, &s);
}

static int fstat_(const char *path, struct sbx_file_info *info)
{
    memset(info, 0, sizeof *info);
    info->size = sizeof *info;
    harness_call_init(&H.call);
    return H.ops->file_stat(H.sb, &H.call, path, info);
}

/* outside/secret and a directory outside/dir/keep, and the links
 * ws/out -> outside (absolute) and ws/rel -> ../../outside (relative). */
static void plant_links(void)
{
    char p[1024], q[1024];
    path_join(p, sizeof p, H.outside, "secret");
    host_write(p, "outside data");
    path_join(p, sizeof p, H.outside, "dir");
    cr_assert_eq(mkdir(p, 0755), 0);
    path_join(q, sizeof q, p, "keep");
    host_write(q, "keep me");
    ws_path(p, sizeof p, "out");
    cr_assert_eq(symlink(H.outside, p), 0);
    ws_path(p, sizeof p, "rel");
    cr_assert_eq(symlink("../../outside", p), 0);
}

static void assert_outside_intact(void)
{
    char p[1024], buf[64];
    path_join(p, sizeof p, H.outside, "secret");
    cr_assert_eq(slurp_small(p, buf, sizeof buf), 12, "outside/secret changed");
    cr_assert_str_eq(buf, "outside data");
    path_join(p, sizeof p, H.outside, "dir/keep");
    cr_assert_eq(slurp_small(p, buf, sizeof buf), 7, "outside/dir/keep changed");
    struct stat st;
    path_join(p, sizeof p, H.outside, "new");
    cr_assert_neq(stat(p, &st), 0, "something was created outside");
    path_join(p, sizeof p, H.outside, "moved");
    cr_assert_neq(stat(p, &st), 0, "something was moved outside");
}

Test(local_fileops, descriptor_declares_the_caps_with_their_ops)
{
    cr_assert(H.desc->caps & SBX_CAP_FILE_OPS);
    cr_assert(H.desc->caps & SBX_CAP_PORTS);
    cr_assert_geq(H.desc->ops_size, SBX_OPS_SIZE_PORTS_1_2);
    cr_assert_eq(H.desc->abi_minor, 2);
}

Test(local_fileops, list_and_stat_report_types_sizes_and_modes)
{
    cr_assert_eq(put_file("d/a.txt", "hello", 5, 0640), SBX_OK, "%s", H.call.msg);
    cr_assert_eq(put_file("d/sub/b", "", 0, 0), SBX_OK);
    char p[1024];
    ws_path(p, sizeof p, "d/link");
    cr_assert_eq(symlink("a.txt", p), 0);
    ws_path(p, sizeof p, "d/fifo");
    cr_assert_eq(mkfifo(p, 0600), 0);

    struct listing l;
    cr_assert_eq(list("d", &l), SBX_OK, "%s", H.call.msg);
    cr_assert_eq(l.n, 4, "entries: %d", l.n);
    int i = find(&l, "a.txt");
    cr_assert_geq(i, 0);
    cr_assert_eq(l.types[i], SBX_FILE_REGULAR);
    cr_assert_eq(l.bytes[i], 5);
    cr_assert_eq(l.types[find(&l, "sub")], SBX_FILE_DIR);
    cr_assert_eq(l.types[find(&l, "link")], SBX_FILE_SYMLINK);
    cr_assert_eq(l.types[find(&l, "fifo")], SBX_FILE_OTHER);

    struct sbx_file_info info;
    cr_assert_eq(fstat_("d/a.txt", &info), SBX_OK, "%s", H.call.msg);
    cr_assert_eq(info.type, SBX_FILE_REGULAR);
    cr_assert_eq(info.mode, 0640);
    cr_assert_eq(info.bytes, 5);
    cr_assert_null(info.name);
    cr_assert_gt(info.mtime_ns, (int64_t)1600000000 * 1000000000);
    cr_assert_eq(fstat_("d/link", &info), SBX_OK);
    cr_assert_eq(info.type, SBX_FILE_SYMLINK, "the last component is not followed");
    cr_assert_eq(fstat_("", &info), SBX_OK);
    cr_assert_eq(info.type, SBX_FILE_DIR);
    cr_assert_eq(fstat_(NULL, &info), SBX_OK);
    cr_assert_eq(fstat_(".", &info), SBX_OK);
    cr_assert_eq(list(".", &l), SBX_OK);
    cr_assert_eq(l.n, 1);
    cr_assert_str_eq(l.names[0], "d");

    cr_assert_eq(fstat_("nope", &info), SBX_E_NOT_FOUND);
    cr_assert_eq(list("nope", &l), SBX_E_NOT_FOUND);
    cr_assert_eq(list("d/a.txt", &l), SBX_E_INVALID);
    cr_assert(strstr(H.call.msg, "not a directory"), "%s", H.call.msg);
    cr_assert_eq(list("d/link", &l), SBX_E_INVALID, "a symlink is not listed through");
    cr_assert_eq(list("d/fifo", &l), SBX_E_INVALID, "a FIFO neither (and no hang)");
    cr_assert_eq(fstat_("../x", &info), SBX_E_INVALID);
    cr_assert_eq(fstat_("/etc/passwd", &info), SBX_E_INVALID);
}

/* Counts entries and records how far the heap grew while listing. */
struct wide {
    size_t n;
    size_t base, peak;
};

static int wide_entry(void *ctx, const struct sbx_file_info *info)
{
    struct wide *w = ctx;
    (void)info;
    w->n++;
    if (w->n % 512 == 0) {
        struct mallinfo2 mi = mallinfo2();
        if (mi.uordblks > w->peak)
            w->peak = mi.uordblks;
    }
    return 0;
}

Test(local_fileops, a_directory_of_20000_entries_is_listed_in_bounded_memory,
     .timeout = 60)
{
    char p[1024];
    ws_path(p, sizeof p, "wide");
    cr_assert_eq(mkdir(p, 0755), 0);
    int dfd = open(p, O_RDONLY | O_DIRECTORY);
    cr_assert_geq(dfd, 0);
    char name[160];
    for (int i = 0; i < 20000; i++) {
        /* long names: a listing that collected them would hold 3 MB */
        snprintf(name, sizeof name, "%05d-%0140d", i, 0);
        int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL, 0644);
        cr_assert_geq(fd, 0, "%s", strerror(errno));
        close(fd);
    }
    close(dfd);
    struct wide w = {0};
    w.base = mallinfo2().uordblks;
    w.peak = w.base;
    struct sbx_file_list_sink s = {sizeof s, &w, wide_entry};
    harness_call_init(&H.call);
    cr_assert_eq(H.ops->file_list(H.sb, &H.call, "wide", &s), SBX_OK, "%s", H.call.msg);
    cr_assert_eq(w.n, 20000);
    cr_assert_lt(w.peak - w.base, 256 * 1024, "the heap grew by %zu bytes while listing",
                 w.peak - w.base);
}

Test(local_fileops, mkdir_modes_parents_and_existing)
{
    harness_call_init(&H.call);
    cr_assert_eq(H.ops->file_mkdir(H.sb, &H.call, "m", 0710, 0), SBX_OK, "%s", H.call.msg);
    char p[1024];
    struct stat st;
    ws_path(p, sizeof p, "m");
    cr_assert_eq(stat(p, &st), 0);
    cr_assert_eq(st.st_mode & 07777, 0710, "the mode is set exactly: %o", st.st_mode);
    cr_assert_eq(H.ops->file_mkdir(H.sb, &H.call, "m", 0, 0), SBX_E_EXISTS);
    cr_assert_eq(H.ops->file_mkdir(H.sb, &H.call, "m", 0, SBX_MKDIR_PARENTS), SBX_OK);
    cr_assert_eq(H.ops->file_mkdir(H.sb, &H.call, "x/y/z", 0, 0), SBX_E_NOT_FOUND);
    cr_assert_eq(H.ops->file_mkdir(H.sb, &H.call, "x/y/z", 0, SBX_MKDIR_PARENTS), SBX_OK,
                 "%s", H.call.msg);
    ws_path(p, sizeof p, "x/y/z");
    cr_assert_eq(stat(p, &st), 0);
    cr_assert_eq(st.st_mode & 07777, 0755);
    cr_assert_eq(put_file("f", "1", 1, 0), SBX_OK);
    harness_call_init(&H.call);
    cr_assert_eq(H.ops->file_mkdir(H.sb, &H.call, "f", 0, SBX_MKDIR_PARENTS), SBX_E_EXISTS);
    cr_assert_eq(H.ops->file_mkdir(H.sb, &H.call, "f/g", 0, SBX_MKDIR_PARENTS),
                 SBX_E_INVALID, "a file as a parent");
    cr_assert_eq(H.ops->file_mkdir(H.sb, &H.call, "bad", 04755, 0), SBX_E_INVALID);
    cr_assert_eq(H.ops->file_mkdir(H.sb, &H.call, "", 0, 0), SBX_E_EXISTS);
    cr_assert_eq(H.ops->file_mkdir(H.sb, &H.call, "a/..", 0, 0), SBX_E_INVALID);
    /* a symlink to a directory is not a directory */
    ws_path(p, sizeof p, "ldir");
    cr_assert_eq(symlink("m", p), 0);
    cr_assert_eq(H.ops->file_mkdir(H.sb, &H.call, "ldir", 0, SBX_MKDIR_PARENTS),
                 SBX_E_EXISTS);
}

Test(local_fileops, remove_files_links_and_trees)
{
    cr_assert_eq(put_file("t/a/b/c.txt", "c", 1, 0), SBX_OK);
    cr_assert_eq(put_file("t/top", "t", 1, 0), SBX_OK);
    harness_call_init(&H.call);
    cr_assert_eq(H.ops->file_remove(H.sb, &H.call, "t", 0), SBX_E_EXISTS);
    cr_assert(strstr(H.call.msg, "not empty"), "%s", H.call.msg);
    cr_assert_eq(H.ops->file_remove(H.sb, &H.call, "t/top", 0), SBX_OK, "%s", H.call.msg);
    cr_assert_eq(H.ops->file_remove(H.sb, &H.call, "t/top", 0), SBX_E_NOT_FOUND);
    cr_assert_eq(H.ops->file_remove(H.sb, &H.call, "t", SBX_REMOVE_RECURSIVE), SBX_OK,
                 "%s", H.call.msg);
    struct sbx_file_info info;
    cr_assert_eq(fstat_("t", &info), SBX_E_NOT_FOUND);
    cr_assert_eq(H.ops->file_mkdir(H.sb, &H.call, "e", 0, 0), SBX_OK);
    cr_assert_eq(H.ops->file_remove(H.sb, &H.call, "e", 0), SBX_OK, "an empty directory");
    cr_assert_eq(H.ops->file_remove(H.sb, &H.call, "", SBX_REMOVE_RECURSIVE), SBX_E_INVALID);
    cr_assert_eq(H.ops->file_remove(H.sb, &H.call, ".", 0), SBX_E_INVALID);
    cr_assert_eq(H.ops->file_remove(H.sb, &H.call, "x/..", SBX_REMOVE_RECURSIVE),
                 SBX_E_INVALID);
    struct stat st;
    cr_assert_eq(stat(H.ws, &st), 0, "the workspace is still there");
}

Test(local_fileops, rename_replace_noreplace_and_missing)
{
    cr_assert_eq(put_file("a", "A", 1, 0), SBX_OK);
    cr_assert_eq(put_file("b", "B", 1, 0), SBX_OK);
    harness_call_init(&H.call);
    cr_assert_eq(H.ops->file_rename(H.sb, &H.call, "a", "b", SBX_RENAME_NOREPLACE),
                 SBX_E_EXISTS);
    cr_assert_eq(H.ops->file_rename(H.sb, &H.call, "a", "b", 0), SBX_OK, "%s", H.call.msg);
    struct buf_sink got = {0};
    cr_assert_eq(get_file("b", &got), SBX_OK);
    cr_assert_str_eq(buf_sink_str(&got), "A");
    buf_sink_free(&got);
    harness_call_init(&H.call);
    cr_assert_eq(H.ops->file_rename(H.sb, &H.call, "a", "c", 0), SBX_E_NOT_FOUND);
    cr_assert_eq(H.ops->file_rename(H.sb, &H.call, "b", "dir/c", 0), SBX_E_NOT_FOUND,
                 "a missing target directory");
    cr_assert_eq(H.ops->file_mkdir(H.sb, &H.call, "dir", 0, 0), SBX_OK);
    cr_assert_eq(H.ops->file_rename(H.sb, &H.call, "b", "dir/c", SBX_RENAME_NOREPLACE),
                 SBX_OK, "%s", H.call.msg);
    cr_assert_eq(H.ops->file_rename(H.sb, &H.call, "dir", "dir/sub", 0), SBX_E_INVALID);
    cr_assert_eq(H.ops->file_rename(H.sb, &H.call, "", "x", 0), SBX_E_INVALID);
    /* a symlink is renamed as itself */
    char p[1024];
    ws_path(p, sizeof p, "l");
    cr_assert_eq(symlink("dir", p), 0);
    cr_assert_eq(H.ops->file_rename(H.sb, &H.call, "l", "l2", 0), SBX_OK);
    struct sbx_file_info info;
    cr_assert_eq(fstat_("l2", &info), SBX_OK);
    cr_assert_eq(info.type, SBX_FILE_SYMLINK);
    cr_assert_eq(fstat_("dir/c", &info), SBX_OK, "the target was not moved");
}

Test(local_fileops, a_symlink_leading_out_is_never_followed_by_any_op)
{
    plant_links();
    const char *links[] = {"out", "rel"};
    for (int k = 0; k < 2; k++) {
        const char *ln = links[k];
        char through[64], through_dir[64], through_new[64];
        snprintf(through, sizeof through, "%s/secret", ln);
        snprintf(through_dir, sizeof through_dir, "%s/dir", ln);
        snprintf(through_new, sizeof through_new, "%s/new", ln);
        struct listing l;
        struct sbx_file_info info;

        cr_assert_eq(list(ln, &l), SBX_E_INVALID, "list %s", ln);
        cr_assert_eq(l.n, 0, "nothing of outside was listed");
        cr_assert_eq(list(through_dir, &l), SBX_E_INVALID, "list %s: %s", through_dir,
                     H.call.msg);
        cr_assert(strstr(H.call.msg, "out of the workspace"), "%s", H.call.msg);
        cr_assert_eq(l.n, 0);

        cr_assert_eq(fstat_(ln, &info), SBX_OK, "stat %s", ln);
        cr_assert_eq(info.type, SBX_FILE_SYMLINK);
        cr_assert_eq(fstat_(through, &info), SBX_E_INVALID, "stat %s", through);

        harness_call_init(&H.call);
        cr_assert_eq(H.ops->file_mkdir(H.sb, &H.call, through_new, 0, 0), SBX_E_INVALID);
        cr_assert_eq(H.ops->file_mkdir(H.sb, &H.call, through_new, 0, SBX_MKDIR_PARENTS),
                     SBX_E_INVALID);
        char deep[64];
        snprintf(deep, sizeof deep, "%s/new/a/b", ln);
        cr_assert_eq(H.ops->file_mkdir(H.sb, &H.call, deep, 0, SBX_MKDIR_PARENTS),
                     SBX_E_INVALID);

        cr_assert_eq(H.ops->file_remove(H.sb, &H.call, through, 0), SBX_E_INVALID);
        cr_assert_eq(H.ops->file_remove(H.sb, &H.call, through_dir, SBX_REMOVE_RECURSIVE),
                     SBX_E_INVALID);

        cr_assert_eq(put_file("inside", "i", 1, 0), SBX_OK);
        harness_call_init(&H.call);
        char moved[64];
        snprintf(moved, sizeof moved, "%s/moved", ln);
        cr_assert_eq(H.ops->file_rename(H.sb, &H.call, "inside", moved, 0), SBX_E_INVALID);
        cr_assert_eq(H.ops->file_rename(H.sb, &H.call, through, "stolen", 0), SBX_E_INVALID);
        cr_assert_eq(fstat_("stolen", &info), SBX_E_NOT_FOUND);
        assert_outside_intact();
    }
    /* Renaming and removing the links themselves leaves their targets. */
    harness_call_init(&H.call);
    cr_assert_eq(H.ops->file_rename(H.sb, &H.call, "out", "out2", 0), SBX_OK, "%s",
                 H.call.msg);
    cr_assert_eq(H.ops->file_remove(H.sb, &H.call, "out2", SBX_REMOVE_RECURSIVE), SBX_OK);
    cr_assert_eq(H.ops->file_remove(H.sb, &H.call, "rel/", 0), SBX_OK,
                 "a trailing slash still names the link");
    assert_outside_intact();
}

Test(local_fileops, recursive_remove_leaves_a_linked_outside_directory_intact)
{
    cr_assert_eq(put_file("tree/a/b/f", "f", 1, 0), SBX_OK);
    char p[1024], target[1024];
    path_join(target, sizeof target, H.outside, "dir");
    cr_assert_eq(mkdir(target, 0755), 0);
    path_join(p, sizeof p, target, "keep");
    host_write(p, "keep me");
    ws_path(p, sizeof p, "tree/a/b/link");
    cr_assert_eq(symlink(target, p), 0);
    ws_path(p, sizeof p, "tree/rel");
    cr_assert_eq(symlink("../../../outside/dir", p), 0);
    harness_call_init(&H.call);
    cr_assert_eq(H.ops->file_remove(H.sb, &H.call, "tree", SBX_REMOVE_RECURSIVE), SBX_OK,
                 "%s", H.call.msg);
    struct stat st;
    ws_path(p, sizeof p, "tree");
    cr_assert_neq(lstat(p, &st), 0, "the tree is gone");
    path_join(p, sizeof p, target, "keep");
    char buf[32];
    cr_assert_eq(slurp_small(p, buf, sizeof buf), 7, "outside/dir/keep is intact");
}

/* ---- ports ------------------------------------------------------------- */

Test(local_fileops, declared_ports_resolve_on_loopback_and_survive_attach)
{
    static const char key[] = "ports-session";
    struct create_args_buf cb;
    const struct sbx_create_args *ca = harness_create_args(&cb, key);
    static const uint16_t ports[] = {8080, 3000, 8080, 0};
    cb.args.ports = ports;
    char ref[SBX_REF_MAX];
    sbx_sandbox *sb = NULL;
    harness_call_init(&H.call);
    cr_assert_eq(H.ops->create(H.state, &H.call, ca, ref, &sb), SBX_OK, "%s", H.call.msg);
    struct sbx_port_endpoint ep = {.size = sizeof ep};
    cr_assert_eq(H.ops->port_resolve(sb, &H.call, 8080, &ep), SBX_OK, "%s", H.call.msg);
    cr_assert_eq(ep.port, 8080);
    cr_assert_eq(ep.tls, 0);
    cr_assert_str_eq(ep.host, "127.0.0.1");
    cr_assert_str_eq(ep.url, "http://127.0.0.1:8080");
    cr_assert_str_eq(ep.header, "");
    cr_assert_eq(H.ops->port_resolve(sb, &H.call, 9999, &ep), SBX_E_NOT_FOUND);
    cr_assert(strstr(H.call.msg, "not declared"), "%s", H.call.msg);
    H.ops->release(sb);

    /* a later process attaches: the record is in the state directory */
    struct sbx_attach_args aa = {sizeof aa, key, cb.hash, ref};
    sb = NULL;
    cr_assert_eq(H.ops->attach(H.state, &H.call, &aa, &sb), SBX_OK, "%s", H.call.msg);
    cr_assert_eq(H.ops->port_resolve(sb, &H.call, 3000, &ep), SBX_OK, "%s", H.call.msg);
    cr_assert_str_eq(ep.url, "http://127.0.0.1:3000");
    H.ops->release(sb);

    /* the record is outside the workspace, and destroy removes it */
    char p[1024];
    snprintf(p, sizeof p, "%s/%s.state/ports", H.root, cb.hash);
    char buf[64];
    cr_assert_eq(slurp_small(p, buf, sizeof buf), 10, "%s", buf);
    cr_assert_str_eq(buf, "8080\n3000\n");
    struct sbx_destroy_args da = {sizeof da, key, cb.hash, ref};
    cr_assert_eq(H.ops->destroy(H.state, &H.call, &da), SBX_OK, "%s", H.call.msg);
    snprintf(p, sizeof p, "%s/%s.state", H.root, cb.hash);
    struct stat st;
    cr_assert_neq(lstat(p, &st), 0, "the state directory is removed by destroy");

    /* the session of the harness declared none */
    cr_assert_eq(H.ops->port_resolve(H.sb, &H.call, 8080, &ep), SBX_E_NOT_FOUND);
}

Test(local_fileops, an_old_host_without_the_ports_member_declares_none)
{
    struct create_args_buf cb;
    const struct sbx_create_args *ca = harness_create_args(&cb, "old-host");
    static const uint16_t ports[] = {8080, 0};
    cb.args.ports = ports;
    cb.args.size = offsetof(struct sbx_create_args, ports); /* a 1.1 host */
    char ref[SBX_REF_MAX];
    sbx_sandbox *sb = NULL;
    harness_call_init(&H.call);
    cr_assert_eq(H.ops->create(H.state, &H.call, ca, ref, &sb), SBX_OK, "%s", H.call.msg);
    struct sbx_port_endpoint ep = {.size = sizeof ep};
    cr_assert_eq(H.ops->port_resolve(sb, &H.call, 8080, &ep), SBX_E_NOT_FOUND);
    H.ops->release(sb);
}
