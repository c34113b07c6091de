/*
 * test_tree_remove.c - sbxs_remove_tree on trees a hostile command could
 * build: thousands of levels deep under a low descriptor limit, wide
 * directories, symlinks leading out, directories without permissions.
 */
#include "tree_remove.h"

#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char root[] = "/tmp/sbx-tree-remove-XXXXXX";
static int rootfd = -1;

static void setup(void)
{
    strcpy(root, "/tmp/sbx-tree-remove-XXXXXX");
    cr_assert_not_null(mkdtemp(root));
    rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    cr_assert(rootfd >= 0);
}

static void teardown(void)
{
    if (rootfd >= 0) {
        sbxs_remove_tree(rootfd, "t");
        sbxs_remove_tree(rootfd, "outside");
        close(rootfd);
    }
    rmdir(root);
}

TestSuite(tree_remove, .init = setup, .fini = teardown, .timeout = 120);

/* A chain t/d/d/d/... `depth` levels below rootfd, with a file at the end. */
static void make_chain(int depth)
{
    cr_assert_eq(mkdirat(rootfd, "t", 0755), 0);
    int fd = openat(rootfd, "t", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    for (int i = 0; i < depth; i++) {
        cr_assert_eq(mkdirat(fd, "d", 0755), 0, "level %d: %s", i, strerror(errno));
        int next = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        cr_assert(next >= 0);
        close(fd);
        fd = next;
    }
    int f = openat(fd, "leaf", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    cr_assert(f >= 0);
    close(f);
    close(fd);
}

Test(tree_remove, thousands_of_levels_with_few_descriptors)
{
    make_chain(3000);
    /* one descriptor per level would need 3000: allow 16 in all */
    struct rlimit old, low = {16, 16};
    getrlimit(RLIMIT_NOFILE, &old);
    low.rlim_max = old.rlim_max;
    cr_assert_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
    int rc = sbxs_remove_tree(rootfd, "t");
    setrlimit(RLIMIT_NOFILE, &old);
    cr_assert_eq(rc, 0, "%s", strerror(-rc));
    cr_assert_eq(faccessat(rootfd, "t", F_OK, AT_SYMLINK_NOFOLLOW), -1);
}

Test(tree_remove, wide_directories_and_files_in_every_level)
{
    cr_assert_eq(mkdirat(rootfd, "t", 0755), 0);
    int t = openat(rootfd, "t", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    char name[32];
    for (int i = 0; i < 3000; i++) {
        snprintf(name, sizeof name, "f%d", i);
        int f = openat(t, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        cr_assert(f >= 0);
        close(f);
    }
    for (int i = 0; i < 200; i++) {
        snprintf(name, sizeof name, "d%d", i);
        cr_assert_eq(mkdirat(t, name, 0755), 0);
        int d = openat(t, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        for (int j = 0; j < 5; j++) {
            snprintf(name, sizeof name, "g%d", j);
            int f = openat(d, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
            close(f);
        }
        close(d);
    }
    close(t);
    cr_assert_eq(sbxs_remove_tree(rootfd, "t"), 0);
    cr_assert_eq(faccessat(rootfd, "t", F_OK, AT_SYMLINK_NOFOLLOW), -1);
}

Test(tree_remove, symlinks_are_removed_not_followed)
{
    cr_assert_eq(mkdirat(rootfd, "outside", 0755), 0);
    int o = openat(rootfd, "outside", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int f = openat(o, "keep", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    close(f);
    close(o);
    cr_assert_eq(mkdirat(rootfd, "t", 0755), 0);
    char target[4096];
    snprintf(target, sizeof target, "%s/outside", root);
    int t = openat(rootfd, "t", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    cr_assert_eq(symlinkat(target, t, "link-to-dir"), 0);
    close(t);
    cr_assert_eq(sbxs_remove_tree(rootfd, "t"), 0);
    cr_assert_eq(faccessat(rootfd, "outside/keep", F_OK, 0), 0, "followed a symlink");
    /* a symlink as the top entry is unlinked itself */
    cr_assert_eq(symlinkat(target, rootfd, "t"), 0);
    cr_assert_eq(sbxs_remove_tree(rootfd, "t"), 0);
    cr_assert_eq(faccessat(rootfd, "outside/keep", F_OK, 0), 0);
}

Test(tree_remove, directories_without_permissions)
{
    make_chain(5);
    cr_assert_eq(fchmodat(rootfd, "t/d/d", 0, 0), 0);
    cr_assert_eq(fchmodat(rootfd, "t/d", 0, 0), 0);
    cr_assert_eq(sbxs_remove_tree(rootfd, "t"), 0);
    cr_assert_eq(faccessat(rootfd, "t", F_OK, AT_SYMLINK_NOFOLLOW), -1);
}

Test(tree_remove, names_and_absence)
{
    cr_assert_eq(sbxs_remove_tree(rootfd, ""), -EINVAL);
    cr_assert_eq(sbxs_remove_tree(rootfd, ".."), -EINVAL);
    cr_assert_eq(sbxs_remove_tree(rootfd, "a/b"), -EINVAL);
    cr_assert_eq(sbxs_remove_tree(rootfd, NULL), -EINVAL);
    cr_assert_eq(sbxs_remove_tree(rootfd, "absent"), 0);
}
