/*
 * test_files.c - read_file and write_file of the `local` provider: binary
 * round trips, atomic replacement, and refusal of every path that leads
 * out of the workspace (with nothing written outside).
 */
#include "harness.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

TestSuite(local_files, .init = harness_setup, .fini = harness_teardown);

static void ws_path(char *out, size_t cap, const char *rel)
{
    path_join(out, cap, H.ws, rel);
}

/* Number of entries (besides . and ..) in a host directory. */
static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "%s: %s", dir, strerror(errno));
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
            n++;
    closedir(d);
    return n;
}

Test(local_files, binary_file_round_trips_under_nested_dirs)
{
    const size_t len = 300 * 1024 + 17;
    unsigned char *data = malloc(len);
    cr_assert_not_null(data);
    for (size_t i = 0; i < len; i++)
        data[i] = (i % 5 == 0) ? 0 : (unsigned char)(i * 31 + 7);

    struct mem_source m = {.data = data, .len = len, .chunk = 10007,
                           .call = &H.call};
    struct sbx_source src = mem_source(&m);
    harness_call_init(&H.call);
    cr_assert_eq(H.ops->write_file(H.sb, &H.call, "a/b/c/data.bin", &src, 0),
                 SBX_OK, "%s", H.call.msg);

    char p[SBX_REF_MAX + 32];
    ws_path(p, sizeof p, "a/b/c/data.bin");
    struct stat st;
    cr_assert_eq(stat(p, &st), 0);
    cr_assert(S_ISREG(st.st_mode));
    cr_assert_eq(st.st_mode & 07777, 0644, "default mode is 0644");
    cr_assert_eq((size_t)st.st_size, len);

    struct buf_sink got = {0};
    cr_assert_eq(get_file("a/b/c/data.bin", &got), SBX_OK, "%s", H.call.msg);
    cr_assert_eq(got.len, len);
    cr_assert(memcmp(got.data, data, len) == 0, "content differs");
    cr_assert(got.calls >= 5, "read must stream in chunks (%zu calls)",
              got.calls);
    buf_sink_free(&got);

    /* No temporary files are left next to it. */
    ws_path(p, sizeof p, "a/b/c");
    cr_assert_eq(count_entries(p), 1);
    free(data);
}

Test(local_files, write_sets_the_mode_and_replaces_content)
{
    cr_assert_eq(put_file("f.txt", "first version, long", 19, 0600), SBX_OK);
    char p[SBX_REF_MAX + 32];
    ws_path(p, sizeof p, "f.txt");
    struct stat st;
    cr_assert_eq(stat(p, &st), 0);
    cr_assert_eq(st.st_mode & 07777, 0600);

    cr_assert_eq(put_file("f.txt", "second", 6, 0755), SBX_OK);
    struct buf_sink got = {0};
    cr_assert_eq(get_file("f.txt", &got), SBX_OK);
    cr_assert_str_eq(buf_sink_str(&got), "second");
    buf_sink_free(&got);
    cr_assert_eq(stat(p, &st), 0);
    cr_assert_eq(st.st_mode & 07777, 0755);

    cr_assert_eq(put_file("empty", "", 0, 0), SBX_OK);
    cr_assert_eq(get_file("empty", &got), SBX_OK);
    cr_assert_eq(got.len, 0);
    buf_sink_free(&got);

    cr_assert_eq(put_file("bad-mode", "x", 1, 04755), SBX_E_INVALID);
}

Test(local_files, failed_source_leaves_old_content_and_no_temporaries)
{
    cr_assert_eq(put_file("doc.txt", "old", 3, 0), SBX_OK);
    static unsigned char data[200000];
    struct mem_source m = {.data = data, .len = sizeof data, .chunk = 4096,
                           .fail_at = 100000, .call = &H.call};
    struct sbx_source src = mem_source(&m);
    harness_call_init(&H.call);
    cr_assert_eq(H.ops->write_file(H.sb, &H.call, "doc.txt", &src, 0),
                 SBX_E_IO);
    cr_assert_str_eq(H.call.msg, "test source failed");

    struct buf_sink got = {0};
    cr_assert_eq(get_file("doc.txt", &got), SBX_OK);
    cr_assert_str_eq(buf_sink_str(&got), "old");
    buf_sink_free(&got);
    cr_assert_eq(count_entries(H.ws), 1, "a temporary file was left");
}

/* A source that kills its process after `at` bytes: the writer dies
 * mid-write, as a host process killed with SIGKILL does. */
struct killing_source {
    size_t pos, at;
};

static long killing_read(void *ctx, void *buf, size_t cap)
{
    struct killing_source *k = ctx;
    if (k->pos >= k->at)
        raise(SIGKILL);
    size_t n = cap < 4096 ? cap : 4096;
    memset(buf, 'x', n);
    k->pos += n;
    return (long)n;
}

Test(local_files, writer_killed_midway_leaves_old_content_and_nothing_else)
{
    cr_assert_eq(put_file("doc.txt", "old", 3, 0), SBX_OK);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        struct killing_source k = {.at = 256 * 1024};
        struct sbx_source src = {.size = sizeof src, .ctx = &k, .read = killing_read};
        harness_call_init(&H.call);
        (void)H.ops->write_file(H.sb, &H.call, "doc.txt", &src, 0);
        _exit(0); /* not reached: the source kills the process */
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "the writer died midway");
    struct buf_sink got = {0};
    cr_assert_eq(get_file("doc.txt", &got), SBX_OK);
    cr_assert_str_eq(buf_sink_str(&got), "old");
    buf_sink_free(&got);
    cr_assert_eq(count_entries(H.ws), 1, "the dead writer left a temporary file");
}

Test(local_files, missing_file_is_not_found)
{
    struct buf_sink got = {0};
    cr_assert_eq(get_file("nope.txt", &got), SBX_E_NOT_FOUND);
    cr_assert(strstr(H.call.msg, "nope.txt") != NULL, "%s", H.call.msg);
    buf_sink_free(&got);
}

Test(local_files, directories_and_fifos_are_not_files)
{
    cr_assert_eq(put_file("d/x", "x", 1, 0), SBX_OK);
    struct buf_sink got = {0};
    cr_assert_eq(get_file("d", &got), SBX_E_INVALID);
    cr_assert_eq(put_file("d", "x", 1, 0), SBX_E_INVALID);
    cr_assert_eq(put_file("d/", "x", 1, 0), SBX_E_INVALID);
    cr_assert_eq(put_file("d/..", "x", 1, 0), SBX_E_INVALID);

    char fifo[SBX_REF_MAX + 32];
    ws_path(fifo, sizeof fifo, "pipe");
    cr_assert_eq(mkfifo(fifo, 0644), 0);
    /* Must not block waiting for a writer. */
    cr_assert_eq(get_file("pipe", &got), SBX_E_INVALID);
    buf_sink_free(&got);
}

/* Paths the plugin must refuse for both read and write. */
static void assert_refused(const char *path)
{
    struct buf_sink got = {0};
    int rc = get_file(path, &got);
    cr_assert_eq(rc, SBX_E_INVALID, "read '%s': %d %s", path, rc,
                 H.call.msg);
    cr_assert(strstr(H.call.msg, path) != NULL, "message lacks the path: %s",
              H.call.msg);
    cr_assert_eq(got.len, 0, "read '%s' delivered data", path);
    buf_sink_free(&got);

    rc = put_file(path, "PWNED", 5, 0);
    cr_assert_eq(rc, SBX_E_INVALID, "write '%s': %d %s", path, rc,
                 H.call.msg);
    cr_assert(strstr(H.call.msg, path) != NULL, "message lacks the path: %s",
              H.call.msg);
}

Test(local_files, dot_dot_is_refused)
{
    assert_refused("../x");
    assert_refused("a/../../x");
    assert_refused("..");
    char p[400];
    path_join(p, sizeof p, H.root, "x");
    cr_assert(access(p, F_OK) != 0, "something was written next to the "
                                    "workspace");
    cr_assert_eq(count_entries(H.root), 1);
}

Test(local_files, absolute_paths_are_refused)
{
    struct stat before, after;
    cr_assert_eq(stat("/etc/passwd", &before), 0);
    assert_refused("/etc/passwd");
    cr_assert_eq(stat("/etc/passwd", &after), 0);
    cr_assert_eq(before.st_size, after.st_size);
    cr_assert_eq(before.st_mtim.tv_sec, after.st_mtim.tv_sec);
    cr_assert_eq(before.st_mtim.tv_nsec, after.st_mtim.tv_nsec);
    cr_assert_eq(before.st_ino, after.st_ino);

    char p[400];
    path_join(p, sizeof p, H.outside, "abs");
    assert_refused(p);
    cr_assert(access(p, F_OK) != 0);
}

Test(local_files, symlinks_leading_out_are_refused)
{
    /* Outside: a directory with a secret file. */
    char secret[400];
    path_join(secret, sizeof secret, H.outside, "secret");
    FILE *f = fopen(secret, "w");
    cr_assert_not_null(f);
    fputs("top secret", f);
    fclose(f);

    char l[SBX_REF_MAX + 32], rel_target[600];
    ws_path(l, sizeof l, "dir-link");
    cr_assert_eq(symlink(H.outside, l), 0);
    ws_path(l, sizeof l, "file-link");
    cr_assert_eq(symlink(secret, l), 0);
    /* Relative: <root>/<hash>/rel-link -> ../../outside */
    ws_path(l, sizeof l, "rel-link");
    snprintf(rel_target, sizeof rel_target, "../../outside");
    cr_assert_eq(symlink(rel_target, l), 0);
    ws_path(l, sizeof l, "sub");
    cr_assert_eq(mkdir(l, 0755), 0);
    ws_path(l, sizeof l, "sub/up");
    cr_assert_eq(symlink("../..", l), 0);

    assert_refused("dir-link/secret");
    assert_refused("dir-link/new-file");
    assert_refused("file-link");
    assert_refused("rel-link/secret");
    assert_refused("rel-link/deeper/new-file");
    assert_refused("sub/up/x");

    /* Outside is untouched: still one file with its content. */
    cr_assert_eq(count_entries(H.outside), 1);
    char buf[64];
    cr_assert_eq(slurp_small(secret, buf, sizeof buf), 10);
    cr_assert_str_eq(buf, "top secret");
    struct stat st;
    cr_assert_eq(lstat(l, &st), 0);
    cr_assert(S_ISLNK(st.st_mode), "the link itself must not be replaced");
}

Test(local_files, symlinks_inside_the_workspace_work)
{
    cr_assert_eq(put_file("real/target.txt", "inside", 6, 0), SBX_OK);
    char l[SBX_REF_MAX + 32];
    ws_path(l, sizeof l, "alias");
    cr_assert_eq(symlink("real", l), 0);
    struct buf_sink got = {0};
    cr_assert_eq(get_file("alias/target.txt", &got), SBX_OK, "%s",
                 H.call.msg);
    cr_assert_str_eq(buf_sink_str(&got), "inside");
    buf_sink_free(&got);
    cr_assert_eq(put_file("alias/new.txt", "new", 3, 0), SBX_OK, "%s",
                 H.call.msg);
    cr_assert_eq(get_file("real/new.txt", &got), SBX_OK);
    cr_assert_str_eq(buf_sink_str(&got), "new");
    buf_sink_free(&got);
}

Test(local_files, empty_path_is_invalid)
{
    struct buf_sink got = {0};
    cr_assert_eq(get_file("", &got), SBX_E_INVALID);
    cr_assert_eq(put_file("", "x", 1, 0), SBX_E_INVALID);
    buf_sink_free(&got);
}
