/*
 * test_op_samples.c - the writer of the op sample spool (shared/op_samples.h):
 * nothing written without a server, every sample written while one holds the
 * lock (files rotated at 4 MiB without losing any), a forked child writing
 * its own file, names and statuses that would make bad labels refused, the
 * record checks the server applies, and a spool others may write refused.
 */
#include "op_samples.h"

#include <criterion/criterion.h>

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char spool[64];
static int lockfd = -1;

static void setup(void)
{
    snprintf(spool, sizeof spool, "/tmp/sbx-op-samples-XXXXXX");
    cr_assert_not_null(mkdtemp(spool));
    setenv("SBX_METRICS_DIR", spool, 1);
    sbxs_op_sample_reset();
}

static void teardown(void)
{
    sbxs_op_sample_reset();
    if (lockfd >= 0)
        close(lockfd);
    lockfd = -1;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", spool);
    cr_assert_eq(system(cmd), 0);
    unsetenv("SBX_METRICS_DIR");
}

TestSuite(op_samples, .init = setup, .fini = teardown, .timeout = 30);

static void hold_server_lock(void)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", spool, SBXS_OP_SPOOL_SERVER);
    lockfd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    cr_assert_geq(lockfd, 0);
    cr_assert_eq(flock(lockfd, LOCK_EX | LOCK_NB), 0);
}

/* Sizes of the *.ops files: how many, total bytes, largest. */
static void spool_files(size_t *n, size_t *total, size_t *largest)
{
    *n = *total = *largest = 0;
    DIR *d = opendir(spool);
    cr_assert_not_null(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".ops"))
            continue;
        struct stat st;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", spool, e->d_name);
        cr_assert_eq(lstat(path, &st), 0);
        cr_assert(S_ISREG(st.st_mode));
        cr_assert_eq(st.st_mode & 0777, 0640);
        (*n)++;
        *total += (size_t)st.st_size;
        if ((size_t)st.st_size > *largest)
            *largest = (size_t)st.st_size;
    }
    closedir(d);
}

Test(op_samples, nothing_without_a_server)
{
    for (int i = 0; i < 100; i++)
        sbxs_op_sample_record("local", "exec", 0, 1000);
    size_t n, total, largest;
    spool_files(&n, &total, &largest);
    cr_assert_eq(n, 0);
}

Test(op_samples, every_sample_written_and_files_rotated)
{
    hold_server_lock();
    const size_t count = SBXS_OP_SPOOL_FILE_MAX / sizeof(struct sbxs_op_sample) + 1000;
    for (size_t i = 0; i < count; i++)
        sbxs_op_sample_record("local", "exec", (int)(i % 3), 1000 + i);
    sbxs_op_sample_reset();
    size_t n, total, largest;
    spool_files(&n, &total, &largest);
    cr_assert_eq(n, 2, "%zu files", n);
    cr_assert_eq(total, count * sizeof(struct sbxs_op_sample), "a sample was lost");
    cr_assert_leq(largest, SBXS_OP_SPOOL_FILE_MAX);
    /* and every record is one the server accepts */
    DIR *d = opendir(spool);
    struct dirent *e;
    size_t valid = 0;
    while ((e = readdir(d))) {
        if (!strstr(e->d_name, ".ops"))
            continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", spool, e->d_name);
        FILE *f = fopen(path, "rb");
        struct sbxs_op_sample s;
        while (fread(&s, sizeof s, 1, f) == 1) {
            cr_assert(sbxs_op_sample_valid(&s));
            cr_assert_str_eq(s.provider, "local");
            valid++;
        }
        fclose(f);
    }
    closedir(d);
    cr_assert_eq(valid, count);
}

Test(op_samples, a_forked_child_writes_its_own_file)
{
    hold_server_lock();
    sbxs_op_sample_record("local", "exec", 0, 1000);
    pid_t pid = fork();
    if (pid == 0) {
        sbxs_op_sample_record("local", "read", 0, 1000);
        _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    sbxs_op_sample_record("local", "exec", 0, 1000);
    sbxs_op_sample_reset();
    size_t n, total, largest;
    spool_files(&n, &total, &largest);
    cr_assert_eq(n, 2, "parent and child share a file (%zu files)", n);
    cr_assert_eq(total, 3 * sizeof(struct sbxs_op_sample));
}

Test(op_samples, bad_names_and_statuses_are_not_recorded)
{
    hold_server_lock();
    sbxs_op_sample_record("lo\"cal", "exec", 0, 1);
    sbxs_op_sample_record("local", "ex\nec", 0, 1);
    sbxs_op_sample_record("Local", "exec", 0, 1);
    sbxs_op_sample_record("", "exec", 0, 1);
    sbxs_op_sample_record("a-provider-name-too-long-for-it", "exec", 0, 1);
    sbxs_op_sample_record("local", "an_op_name_too_long", 0, 1);
    sbxs_op_sample_record("local", "exec", -1, 1);
    sbxs_op_sample_record("local", "exec", 256, 1);
    sbxs_op_sample_record(NULL, "exec", 0, 1);
    sbxs_op_sample_reset();
    size_t n, total, largest;
    spool_files(&n, &total, &largest);
    cr_assert_eq(total, 0);
}

Test(op_samples, record_checks)
{
    struct sbxs_op_sample s;
    memset(&s, 0, sizeof s);
    s.magic = SBXS_OP_SAMPLE_MAGIC;
    s.version = SBXS_OP_SAMPLE_VERSION;
    s.size = sizeof s;
    memcpy(s.provider, "docker", 6);
    memcpy(s.op, "exec", 4);
    cr_assert(sbxs_op_sample_valid(&s));
    struct sbxs_op_sample b = s;
    b.provider[10] = 'x'; /* garbage after the NUL */
    cr_assert_not(sbxs_op_sample_valid(&b));
    b = s;
    memset(b.op, 'a', sizeof b.op); /* no NUL */
    cr_assert_not(sbxs_op_sample_valid(&b));
    b = s;
    b.reserved = 1;
    cr_assert_not(sbxs_op_sample_valid(&b));
    b = s;
    b.status = 300;
    cr_assert_not(sbxs_op_sample_valid(&b));
    b = s;
    b.duration_ns = 86400ull * 1000000000ull;
    cr_assert_not(sbxs_op_sample_valid(&b));
    b = s;
    b.magic ^= 1;
    cr_assert_not(sbxs_op_sample_valid(&b));
}

Test(op_samples, a_spool_others_may_write_is_refused)
{
    cr_assert_eq(chmod(spool, 0777), 0);
    cr_assert_lt(sbxs_op_spool_open(spool), 0);
    hold_server_lock();
    sbxs_op_sample_record("local", "exec", 0, 1000);
    sbxs_op_sample_reset();
    size_t n, total, largest;
    spool_files(&n, &total, &largest);
    cr_assert_eq(n, 0);
    cr_assert_eq(chmod(spool, 0700), 0);
    char link[128];
    snprintf(link, sizeof link, "%s-link", spool);
    cr_assert_eq(symlink(spool, link), 0);
    cr_assert_lt(sbxs_op_spool_open(link), 0, "a symlinked spool was opened");
    unlink(link);
}
