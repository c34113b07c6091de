/*
 * test_mounts.c - FILE_MOUNTS on the docker provider through the plugin
 * ABI: a multi-MiB blob streamed and verified, read-only inside the
 * sandbox, staging files of crashed processes swept (and those of live ones
 * kept), and refusals that leave nothing behind.
 */
#include "harness.h"

#include <criterion/criterion.h>

#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

static struct dh h;
static char key[64], hash[65], ref[SBX_REF_MAX];
static sbx_sandbox *sb;

static void setup(void)
{
    dh_sandbox_setup(&h, key, hash, ref, &sb);
}

static void teardown(void)
{
    dh_sandbox_teardown(&h, key, ref, sb);
}

TestSuite(docker_mounts, .init = setup, .fini = teardown, .timeout = 180);

static void sha_hex(const void *data, size_t n, char out[65])
{
    unsigned char md[32];
    unsigned len = 0;
    EVP_Digest(data, n, md, &len, EVP_sha256(), NULL);
    for (unsigned i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

static int put(const char *path, const void *data, size_t n, uint64_t length,
               const char *sha, struct sbx_call *c)
{
    struct dh_mem m = {data, n, 0};
    struct sbx_source src = dh_mem_source(&m);
    struct sbx_blob b = {sizeof b, &src, length, sha, NULL};
    return h.ops->mount_put(sb, c, path, &b);
}

static void staging_path(char *out, size_t cap)
{
    snprintf(out, cap, "%s/sbx-%.32s/staging", h.resource_dir, hash);
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

Test(docker_mounts, big_blob_streamed_verified_read_only)
{
    size_t n = 6 * 1024 * 1024 + 5;
    unsigned char *data = malloc(n);
    for (size_t i = 0; i < n; i++)
        data[i] = (unsigned char)(i * 7 + (i >> 13));
    char sha[65];
    sha_hex(data, n, sha);
    struct sbx_call c;
    dh_call_init(&c);
    cr_assert_eq(put("models/weights.bin", data, n, n, sha, &c), SBX_OK, "%s", c.message);
    char *out = dh_sh(&h, sb, "sha256sum /mnt/session/uploads/models/weights.bin | "
                              "cut -d' ' -f1; stat -c %s "
                              "/mnt/session/uploads/models/weights.bin");
    char want[160];
    snprintf(want, sizeof want, "%s\n%zu\n", sha, n);
    cr_expect_str_eq(out, want);
    free(out);
    /* inside, the uploads are read-only, for root too */
    out = dh_sh(&h, sb, "echo x 2>&1 >> /mnt/session/uploads/models/weights.bin; "
                        "rm /mnt/session/uploads/models/weights.bin 2>&1; "
                        "mkdir /mnt/session/uploads/d 2>&1; id -u; true");
    cr_expect(strstr(out, "Read-only file system") != NULL, "%s", out);
    cr_expect(strstr(out, "\n0\n") != NULL || strncmp(out, "0\n", 2) == 0, "%s", out);
    free(out);
    out = dh_sh(&h, sb, "stat -c %s /mnt/session/uploads/models/weights.bin");
    snprintf(want, sizeof want, "%zu\n", n);
    cr_expect_str_eq(out, want);
    free(out);
    char sp[512];
    staging_path(sp, sizeof sp);
    cr_expect_eq(count_entries(sp), 0, "staging not empty after a put");
    free(data);
    dh_call_free(&c);
}

Test(docker_mounts, verification_failures_publish_nothing)
{
    const char *text = "payload";
    char sha[65];
    sha_hex(text, 7, sha);
    struct sbx_call c;
    dh_call_init(&c);
    /* wrong digest: the previous version stays */
    cr_assert_eq(put("f.txt", text, 7, 7, sha, &c), SBX_OK, "%s", c.message);
    char other[65];
    sha_hex("other!!", 7, other);
    cr_expect_eq(put("f.txt", "other!!", 7, 7, sha, &c), SBX_E_INVALID);
    cr_expect(strstr(c.message, "SHA-256 mismatch") != NULL, "%s", c.message);
    cr_expect_eq(put("g.txt", text, 7, 8, sha, &c), SBX_E_INVALID);
    cr_expect(strstr(c.message, "7 bytes; expected 8") != NULL, "%s", c.message);
    cr_expect_eq(put("g.txt", text, 7, 6, sha, &c), SBX_E_INVALID);
    cr_expect(strstr(c.message, "longer"), "%s", c.message);
    /* a directory in the way, a file as a parent */
    cr_assert_eq(put("dir/inner", text, 7, 7, sha, &c), SBX_OK, "%s", c.message);
    cr_expect_eq(put("dir", text, 7, 7, sha, &c), SBX_E_INVALID, "%s", c.message);
    cr_expect_eq(put("f.txt/below", text, 7, 7, sha, &c), SBX_E_INVALID, "%s",
                 c.message);
    char *out = dh_sh(&h, sb, "cd /mnt/session/uploads && find . | sort; cat f.txt");
    cr_expect_str_eq(out, ".\n./dir\n./dir/inner\n./f.txt\npayload");
    free(out);
    char sp[512];
    staging_path(sp, sizeof sp);
    cr_expect_eq(count_entries(sp), 0, "a refused blob left a staging file");
    (void)other;
    dh_call_free(&c);
}

Test(docker_mounts, crashed_staging_swept_live_staging_kept)
{
    char sp[512], dead[600], live[600], deaddir[600];
    staging_path(sp, sizeof sp);
    snprintf(dead, sizeof dead, "%s/upload-0123456789abcdef01234567", sp);
    snprintf(deaddir, sizeof deaddir, "%s/skill-0123456789abcdef01234567", sp);
    snprintf(live, sizeof live, "%s/upload-live0000000000000000000000", sp);
    /* what a process killed mid-put leaves: a staging file nobody locks */
    FILE *f = fopen(dead, "w");
    cr_assert_not_null(f);
    fputs("half a blob", f);
    fclose(f);
    cr_assert_eq(dh_system("mkdir -p %s/x/y && echo z > %s/x/y/z", deaddir, deaddir), 0);
    /* an operation in progress elsewhere holds its lock */
    int lfd = open(live, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    cr_assert_geq(lfd, 0);
    cr_assert_eq(flock(lfd, LOCK_EX), 0);
    struct sbx_call c;
    dh_call_init(&c);
    cr_expect_eq(h.ops->mount_remove(sb, &c, "never/put.txt"), SBX_OK, "%s", c.message);
    cr_expect_neq(access(dead, F_OK), 0, "the crashed staging file is still there");
    cr_expect_neq(access(deaddir, F_OK), 0, "the crashed staging dir is still there");
    cr_expect_eq(access(live, F_OK), 0, "a live staging file was removed");
    close(lfd);
    cr_expect_eq(h.ops->mount_remove(sb, &c, "never/put.txt"), SBX_OK, "%s", c.message);
    cr_expect_eq(count_entries(sp), 0);
    dh_call_free(&c);
}

Test(docker_mounts, remove_directory_and_confinement)
{
    char sha[65];
    sha_hex("abc", 3, sha);
    struct sbx_call c;
    dh_call_init(&c);
    cr_assert_eq(put("tree/a/b.txt", "abc", 3, 3, sha, &c), SBX_OK, "%s", c.message);
    cr_assert_eq(put("tree/c.txt", "abc", 3, 3, sha, &c), SBX_OK, "%s", c.message);
    cr_expect_eq(h.ops->mount_remove(sb, &c, "tree/c.txt/x"), SBX_OK, "%s", c.message);
    cr_expect_eq(h.ops->mount_remove(sb, &c, "../staging"), SBX_E_INVALID);
    cr_expect_eq(h.ops->mount_remove(sb, &c, "/etc/passwd"), SBX_E_INVALID);
    cr_expect_eq(h.ops->mount_remove(sb, &c, "tree"), SBX_OK, "%s", c.message);
    char *out = dh_sh(&h, sb, "ls -A /mnt/session/uploads");
    cr_expect_str_eq(out, "");
    free(out);
    dh_call_free(&c);
}
