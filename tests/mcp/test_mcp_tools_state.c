/*
 * test_mcp_tools_state.c - snapshot, restore, port_url, snapshot_read and
 * snapshot_write through `sbx mcp`'s stdio: a round trip, hostile names,
 * a missing, corrupt, truncated or symlinked snapshot leaving the
 * workspace as it was, and uploads with gaps, overlaps, bad offsets, a
 * wrong digest.
 */
#include "tools_client.h"

#include <criterion/criterion.h>

#include <dirent.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static struct tc T;

static void setup(void)
{
    tc_start(&T, NULL);
}

static void teardown(void)
{
    tc_stop(&T);
}

TestSuite(mcp_state, .init = setup, .fini = teardown, .timeout = 120);

#define S "\"sandbox\":\"" TC_SANDBOX "\""

static void put(const char *path, const char *text)
{
    json_object *root;
    tc_ok(&T, &root, "write_file", "{" S ",\"path\":\"%s\",\"content\":\"%s\"}", path, text);
    json_object_put(root);
}

/* The file's content, or NULL when it does not exist. */
static char *get(const char *path)
{
    json_object *root;
    json_object *o = tc_ok(&T, &root, "stat", "{" S ",\"path\":\"%s\"}", path);
    bool exists = tc_bool(o, "exists");
    json_object_put(root);
    if (!exists)
        return NULL;
    o = tc_ok(&T, &root, "read_file", "{" S ",\"path\":\"%s\"}", path);
    char *s = strdup(tc_str(o, "content"));
    json_object_put(root);
    return s;
}

static void expect_content(const char *path, const char *want)
{
    char *got = get(path);
    if (!want)
        cr_expect_null(got, "%s exists: %s", path, got);
    else
        cr_expect(got && !strcmp(got, want), "%s: %s, not %s", path, got ? got : "(missing)",
                  want);
    free(got);
}

static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "%s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n + 1);
    cr_assert_eq(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return b;
}

static void sha256_hex(const unsigned char *d, size_t n, char out[65])
{
    unsigned char md[32];
    unsigned int ml;
    EVP_Digest(d, n, md, &ml, EVP_sha256(), NULL);
    for (int i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

static char *b64(const unsigned char *d, size_t n)
{
    char *s = malloc(4 * ((n + 2) / 3) + 1);
    EVP_EncodeBlock((unsigned char *)s, d, (int)n);
    return s;
}

static int snapdir_entries(void)
{
    return cli_dir_entries(T.snapdir);
}

static void make_snapshot(const char *name, char sha[65])
{
    json_object *root;
    json_object *o = tc_ok(&T, &root, "snapshot", "{" S ",\"name\":\"%s\"}", name);
    cr_expect_str_eq(tc_str(o, "name"), name);
    snprintf(sha, 65, "%s", tc_str(o, "sha256"));
    char path[PATH_MAX + 80];
    snprintf(path, sizeof path, "%s/%s", T.snapdir, name);
    size_t n;
    unsigned char *d = slurp(path, &n);
    cr_expect_eq((size_t)tc_int(o, "bytes"), n);
    char want[65];
    sha256_hex(d, n, want);
    cr_expect_str_eq(sha, want);
    free(d);
    json_object_put(root);
}

Test(mcp_state, snapshot_and_restore_round_trip)
{
    put("keep.txt", "version one");
    put("dir/inner.txt", "inner");
    char sha[65];
    make_snapshot("snap1", sha);
    cr_expect_eq(snapdir_entries(), 1, "a temporary was left behind");
    put("keep.txt", "version two");
    put("new.txt", "made after");
    json_object *root;
    json_object_put((tc_ok(&T, &root, "delete", "{" S ",\"path\":\"dir\",\"recursive\":true}"),
                     root));
    json_object *o = tc_ok(&T, &root, "restore", "{" S ",\"name\":\"snap1\"}");
    cr_expect_str_eq(tc_str(o, "name"), "snap1");
    json_object_put(root);
    expect_content("keep.txt", "version one");
    expect_content("dir/inner.txt", "inner");
    expect_content("new.txt", NULL);
    /* saving again under the name replaces it */
    put("keep.txt", "version three");
    char sha2[65];
    make_snapshot("snap1", sha2);
    cr_expect_neq(strcmp(sha, sha2), 0);
    cr_expect_eq(snapdir_entries(), 1);
}

Test(mcp_state, hostile_snapshot_names_are_refused)
{
    static const char *const bad[] = {"a/b", "..", ".", "../x", "/etc/passwd", "caf\\u00e9", "",
                                      "~upload.x", "a b", "x\\ny",
                                      "0123456789012345678901234567890123456789012345678901234567890123"
                                      "4",
                                      NULL};
    for (size_t i = 0; bad[i]; i++) {
        char *e = tc_refused(&T, "snapshot", "{" S ",\"name\":\"%s\"}", bad[i]);
        cr_expect(strstr(e, "name"), "%s: %s", bad[i], e);
        free(e);
        e = tc_refused(&T, "restore", "{" S ",\"name\":\"%s\"}", bad[i]);
        free(e);
        e = tc_refused(&T, "snapshot_read", "{\"name\":\"%s\",\"offset\":0}", bad[i]);
        free(e);
        e = tc_refused(&T, "snapshot_write",
                       "{\"name\":\"%s\",\"offset\":0,\"content\":\"\",\"final\":true}", bad[i]);
        free(e);
    }
    cr_expect_leq(snapdir_entries(), 0, "something was written in the snapshot directory");
    /* 64 characters and dots are fine */
    char sha[65];
    make_snapshot("0123456789012345678901234567890123456789012345678901234567890123", sha);
    make_snapshot("...", sha);
}

Test(mcp_state, missing_corrupt_and_symlinked_snapshots_leave_the_workspace)
{
    put("keep.txt", "precious");
    char sha[65];
    make_snapshot("good", sha);
    put("after.txt", "also precious");

    char *e = tc_err(&T, "restore", "{" S ",\"name\":\"missing\"}");
    cr_expect(strstr(e, "missing") && strstr(e, "no such snapshot"), "%s", e);
    free(e);

    /* garbage, a truncated copy of a good one, a symlink, a FIFO */
    char path[PATH_MAX + 80], src[PATH_MAX + 80];
    snprintf(path, sizeof path, "%s/garbage", T.snapdir);
    FILE *f = fopen(path, "w");
    fputs("this is not an archive at all\n", f);
    fclose(f);
    snprintf(src, sizeof src, "%s/good", T.snapdir);
    size_t n;
    unsigned char *d = slurp(src, &n);
    snprintf(path, sizeof path, "%s/truncated", T.snapdir);
    f = fopen(path, "wb");
    fwrite(d, 1, n / 2, f);
    fclose(f);
    free(d);
    snprintf(path, sizeof path, "%s/link", T.snapdir);
    cr_assert_eq(symlink(src, path), 0);
    snprintf(path, sizeof path, "%s/fifo", T.snapdir);
    cr_assert_eq(mkfifo(path, 0600), 0);

    static const char *const names[] = {"garbage", "truncated", "link", "fifo", NULL};
    for (size_t i = 0; names[i]; i++) {
        e = tc_err(&T, "restore", "{" S ",\"name\":\"%s\"}", names[i]);
        cr_expect(strstr(e, names[i]), "%s: %s", names[i], e);
        cr_expect(!strstr(e, T.snapdir) && !strstr(e, "/proc/"), "a host path in: %s", e);
        free(e);
        expect_content("keep.txt", "precious");
        expect_content("after.txt", "also precious");
    }
    e = tc_err(&T, "snapshot_read", "{\"name\":\"link\",\"offset\":0}");
    free(e);
    /* the good one still restores */
    json_object *root;
    json_object_put((tc_ok(&T, &root, "restore", "{" S ",\"name\":\"good\"}"), root));
    expect_content("after.txt", NULL);
}

Test(mcp_state, snapshot_read_in_chunks_and_upload_back)
{
    put("a.txt", "alpha");
    for (int i = 0; i < 20; i++) {
        char p[32], v[64];
        snprintf(p, sizeof p, "d/f%d", i);
        snprintf(v, sizeof v, "file %d %08x", i, (unsigned)(i * 2654435761u));
        put(p, v);
    }
    char sha[65];
    make_snapshot("orig", sha);
    char src[PATH_MAX + 80];
    snprintf(src, sizeof src, "%s/orig", T.snapdir);
    size_t n;
    unsigned char *want = slurp(src, &n);

    /* read it back in chunks of 100 bytes */
    unsigned char *got = malloc(n + 1);
    size_t off = 0;
    for (int guard = 0; guard < 100000; guard++) {
        json_object *root;
        json_object *o = tc_ok(&T, &root, "snapshot_read",
                               "{\"name\":\"orig\",\"offset\":%zu,\"max_bytes\":100}", off);
        const char *c = tc_str(o, "content");
        unsigned char buf[200];
        int len = EVP_DecodeBlock(buf, (const unsigned char *)c, (int)strlen(c));
        len -= (int)(strlen(c) && c[strlen(c) - 1] == '=') + (int)(strlen(c) > 1 && c[strlen(c) - 2] == '=');
        cr_assert(len >= 0 && off + (size_t)len <= n);
        cr_expect_eq(tc_int(o, "bytes"), len);
        memcpy(got + off, buf, (size_t)len);
        off += (size_t)len;
        bool eof = tc_bool(o, "eof");
        cr_expect_eq(tc_int(o, "size"), (long long)n);
        json_object_put(root);
        if (eof)
            break;
    }
    cr_assert_eq(off, n);
    cr_expect_eq(memcmp(got, want, n), 0);
    free(got);

    /* upload it under another name in chunks of 1000, final with the digest */
    for (size_t o2 = 0; o2 < n; o2 += 1000) {
        size_t k = n - o2 < 1000 ? n - o2 : 1000;
        char *c = b64(want + o2, k);
        bool final = o2 + k == n;
        json_object *root;
        json_object *o = tc_ok(&T, &root, "snapshot_write",
                               "{\"name\":\"copy\",\"offset\":%zu,\"content\":\"%s\"%s%s%s}", o2,
                               c, final ? ",\"final\":true,\"sha256\":\"" : "",
                               final ? sha : "", final ? "\"" : "");
        cr_expect_eq((size_t)tc_int(o, "bytes"), o2 + k);
        if (final)
            cr_expect_str_eq(tc_str(o, "sha256"), sha);
        json_object_put(root);
        free(c);
    }
    free(want);
    put("a.txt", "changed");
    json_object *root;
    json_object_put((tc_ok(&T, &root, "restore", "{" S ",\"name\":\"copy\"}"), root));
    expect_content("a.txt", "alpha");
    char v7[64];
    snprintf(v7, sizeof v7, "file %d %08x", 7, (unsigned)(7 * 2654435761u));
    expect_content("d/f7", v7);
}

Test(mcp_state, hostile_uploads_are_refused)
{
    char sha[65];
    put("a.txt", "alpha");
    cr_assert_eq(tc_sh(&T, "head -c 8000 /dev/urandom > noise.bin", NULL), 0);
    make_snapshot("orig", sha);
    char src[PATH_MAX + 80];
    snprintf(src, sizeof src, "%s/orig", T.snapdir);
    size_t n;
    unsigned char *d = slurp(src, &n);
    cr_assert_gt(n, 600);
    char *c1 = b64(d, 300), *c2 = b64(d + 300, 300);
    json_object *root;

    /* no upload started: a chunk past 0 is refused */
    char *e = tc_err(&T, "snapshot_write", "{\"name\":\"up\",\"offset\":300,\"content\":\"%s\"}",
                     c2);
    cr_expect(strstr(e, "offset 0"), "%s", e);
    free(e);
    json_object_put((tc_ok(&T, &root, "snapshot_write",
                           "{\"name\":\"up\",\"offset\":0,\"content\":\"%s\"}", c1),
                     root));
    /* a gap, an overlap, a negative offset */
    e = tc_err(&T, "snapshot_write", "{\"name\":\"up\",\"offset\":600,\"content\":\"%s\"}", c2);
    cr_expect(strstr(e, "gaps"), "%s", e);
    free(e);
    e = tc_err(&T, "snapshot_write", "{\"name\":\"up\",\"offset\":100,\"content\":\"%s\"}", c2);
    cr_expect(strstr(e, "overlaps"), "%s", e);
    free(e);
    e = tc_refused(&T, "snapshot_write", "{\"name\":\"up\",\"offset\":-300,\"content\":\"%s\"}",
                   c2);
    free(e);
    e = tc_err(&T, "snapshot_write", "{\"name\":\"up\",\"offset\":300,\"content\":\"!!!\"}");
    cr_expect(strstr(e, "base64"), "%s", e);
    free(e);
    /* a wrong digest at the end: refused, not published, the upload dropped */
    e = tc_err(&T, "snapshot_write",
               "{\"name\":\"up\",\"offset\":300,\"content\":\"%s\",\"final\":true,"
               "\"sha256\":\"%064d\"}",
               c2, 0);
    cr_expect(strstr(e, "SHA-256"), "%s", e);
    free(e);
    e = tc_err(&T, "restore", "{" S ",\"name\":\"up\"}");
    free(e);
    e = tc_err(&T, "snapshot_write", "{\"name\":\"up\",\"offset\":600,\"content\":\"%s\"}", c2);
    free(e);
    /* not an archive: refused at final */
    e = tc_err(&T, "snapshot_write",
               "{\"name\":\"junk\",\"offset\":0,\"content\":\"aGVsbG8=\",\"final\":true}");
    cr_expect(strstr(e, "archive"), "%s", e);
    free(e);
    e = tc_err(&T, "restore", "{" S ",\"name\":\"junk\"}");
    free(e);
    /* a truncated archive published: restore refuses it, workspace intact */
    json_object_put((tc_ok(&T, &root, "snapshot_write",
                           "{\"name\":\"half\",\"offset\":0,\"content\":\"%s\",\"final\":true}",
                           c1),
                     root));
    put("a.txt", "beta");
    e = tc_err(&T, "restore", "{" S ",\"name\":\"half\"}");
    free(e);
    expect_content("a.txt", "beta");
    free(c1);
    free(c2);
    free(d);
    /* only the snapshots are left: no temporary of a failed upload */
    DIR *dir = opendir(T.snapdir);
    struct dirent *de;
    while ((de = readdir(dir)))
        cr_expect(de->d_name[0] == '.' || !strcmp(de->d_name, "orig") ||
                      !strcmp(de->d_name, "half"),
                  "left in the snapshot directory: %s", de->d_name);
    closedir(dir);
}

Test(mcp_state, port_url)
{
    if (T.docker) { /* no port declared there (tools_client.c) */
        char *e = tc_err(&T, "port_url", "{" S ",\"port\":18431}");
        cr_expect(strstr(e, "18431"), "%s", e);
        free(e);
        return;
    }
    json_object *root;
    json_object *o = tc_ok(&T, &root, "port_url", "{" S ",\"port\":18431}");
    cr_expect_neq(tc_str(o, "url"), NULL);
    cr_expect(strstr(tc_str(o, "url"), "http") == tc_str(o, "url"), "%s", tc_str(o, "url"));
    cr_expect_gt(tc_int(o, "port"), 0);
    cr_expect_neq(tc_str(o, "host"), NULL);
    json_object_put(root);
    char *e = tc_err(&T, "port_url", "{" S ",\"port\":18432}");
    cr_expect(strstr(e, "18432"), "%s", e);
    free(e);
    e = tc_refused(&T, "port_url", "{" S ",\"port\":70000}");
    free(e);
}
