/*
 * test_export.c - OUTPUT_EXPORT on the docker provider through libsbx
 * (sbx_export_to_dir) against the test daemon: hostile outputs (a symlink
 * to /etc/passwd, a FIFO, a hard link, a sparse file over the size limit, a
 * name that is not UTF-8) are refused naming the entry, the previous export
 * stays as it was and nothing is left beside it; a container made without
 * the outputs (and uploads) mounts fails closed; targets that export must not replace are
 * refused; destroy removes the session's resource directory.
 */
#include "harness.h"

#include <sbx/sbx.h>

#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char dir[256], target[300], resdir[300];
static sbx_ctx *ctx;
static sbx_provider *prov;
static sbx_handle *hd;
static char key[64], keyhash[65];

static void setup(void)
{
    dh_require_daemon();
    snprintf(dir, sizeof dir, "/tmp/sbx-docker-export-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(target, sizeof target, "%s/out", dir);
    snprintf(resdir, sizeof resdir, "%s/res", dir);
    char cfg[300];
    snprintf(cfg, sizeof cfg, "%s/sbx.yaml", dir);
    FILE *f = fopen(cfg, "w");
    cr_assert_not_null(f);
    const char *img = getenv("SBX_TEST_DOCKER_IMAGE");
    fprintf(f, "providers:\n  docker:\n    host: \"%s\"\n    image: \"%s\"\n"
               "    resource_dir: \"%s\"\n",
            getenv("SBX_TEST_DOCKER_HOST"), img && *img ? img : "sbx-test:busybox",
            resdir);
    fclose(f);
    struct sbx_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.config_path = cfg;
    o.plugin_path = SBX_TEST_PROVIDER_DIR;
    o.ignore_environment = true;
    sbx_error err;
    cr_assert_eq(sbx_open(&o, &ctx, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(sbx_provider_lookup(ctx, "docker", &prov, &err), SBX_OK, "%s",
                 err.message);
    dh_new_key(key, keyhash);
    struct sbx_create_options co;
    memset(&co, 0, sizeof co);
    co.size = sizeof co;
    co.caps_required = SBX_CAP_OUTPUT_EXPORT;
    cr_assert_eq(sbx_create(prov, key, &co, NULL, &hd, &err), SBX_OK, "%s", err.message);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void teardown(void)
{
    if (hd) {
        char ref[SBX_REF_MAX];
        snprintf(ref, sizeof ref, "%s", sbx_handle_ref(hd));
        sbx_release(hd);
        hd = NULL;
        sbx_error err;
        cr_expect_eq(sbx_destroy(prov, key, ref, NULL, &err), SBX_OK, "%s", err.message);
    }
    sbx_close(ctx);
    ctx = NULL;
    if (dir[0])
        nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(docker_export, .init = setup, .fini = teardown, .timeout = 240);

/* sh -c script in the sandbox; asserts exit 0. */
static void sh(const char *script)
{
    const char *argv[] = {"sh", "-c", script, NULL};
    struct sbx_exec_args a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.argv = argv;
    a.timeout_ms = 60000;
    sbx_capture c;
    sbx_capture_init(&c, 4096, 0);
    struct sbx_sink s = sbx_capture_sink(&c);
    a.err = &s;
    struct sbx_exec_result res;
    memset(&res, 0, sizeof res);
    res.size = sizeof res;
    sbx_error err;
    cr_assert_eq(sbx_exec(hd, &a, &res, NULL, &err), SBX_OK, "%s", err.message);
    char *text = sbx_capture_text(&c);
    cr_assert_eq(res.exit_code, 0, "sh -c '%s': exit %d: %s", script, res.exit_code,
                 text);
    free(text);
    sbx_capture_free(&c);
}

/* Sorted names in a host directory, space-separated. */
static char *listing(const char *path)
{
    static char out[2048];
    struct dirent **names = NULL;
    int n = scandir(path, &names, NULL, alphasort);
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (strcmp(names[i]->d_name, ".") && strcmp(names[i]->d_name, ".."))
            used += (size_t)snprintf(out + used, sizeof out - used, "%s%s",
                                     used ? " " : "", names[i]->d_name);
        free(names[i]);
    }
    free(names);
    return n < 0 ? "(missing)" : out;
}

static void expect_good_export_intact(void)
{
    cr_expect_str_eq(listing(target), "good.txt", "the previous export changed");
    char path[400], buf[64] = "";
    snprintf(path, sizeof path, "%s/good.txt", target);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s: %s", path, strerror(errno));
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    cr_expect_str_eq(buf, "good\n");
    /* nothing beside the target but the target and its marker (res/ is the
     * provider's resource directory, sbx.yaml the configuration) */
    cr_expect_str_eq(listing(dir), ".out.sbx-export out res sbx.yaml");
}

/* A clean export first, then the hostile content: export must refuse it
 * with a message containing `needle`, within `max_seconds`. */
static void hostile(const char *script, const char *needle,
                    const struct sbx_export_limits *lim, double max_seconds)
{
    sh("echo good > /mnt/session/outputs/good.txt");
    sbx_error err;
    cr_assert_eq(sbx_export_to_dir(hd, target, lim, NULL, &err), SBX_OK, "%s",
                 err.message);
    sh(script);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = sbx_export_to_dir(hd, target, lim, NULL, &err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    cr_expect_eq(rc, SBX_E_INVALID, "export returned %s: %s", sbx_strerror(rc),
                 err.message);
    cr_expect(strstr(err.message, needle) != NULL, "message \"%s\" lacks \"%s\"",
              err.message, needle);
    cr_expect(secs < max_seconds, "the refusal took %.1f s", secs);
    expect_good_export_intact();
}

Test(docker_export, symlink_to_etc_passwd_refused)
{
    struct stat before, after;
    cr_assert_eq(stat("/etc/passwd", &before), 0);
    hostile("ln -s /etc/passwd /mnt/session/outputs/passwd", "passwd\" is a symbolic link",
            NULL, 60);
    cr_assert_eq(stat("/etc/passwd", &after), 0);
    cr_expect_eq(before.st_mtime, after.st_mtime, "the host's /etc/passwd was touched");
    cr_expect_eq(before.st_size, after.st_size);
}

Test(docker_export, nesting_deeper_than_the_bound_refused_without_leftovers)
{
    /* 300 levels: refused as too deep, and the staging directory (which
     * holds the 256 levels extracted before the refusal) removed, with the
     * previous export intact; expect_good_export_intact checks that nothing
     * but the target and its marker is left. */
    hostile("cd /mnt/session/outputs && i=0; while [ $i -lt 300 ]; do mkdir d && "
            "cd d || exit 1; i=$((i+1)); done; echo x > f",
            "is nested deeper than 256 levels", NULL, 60);
}

Test(docker_export, a_deep_wide_tree_exports_and_is_replaced)
{
    /* 2000 files at depth 200 (such trees once cost depth x entries
     * operations: 36 s of CPU at depth 1000). */
    sh("cd /mnt/session/outputs && i=0; while [ $i -lt 200 ]; do mkdir d && cd d || "
       "exit 1; i=$((i+1)); done; i=0; while [ $i -lt 2000 ]; do : > f$i; "
       "i=$((i+1)); done");
    sbx_error err;
    cr_assert_eq(sbx_export_to_dir(hd, target, NULL, NULL, &err), SBX_OK, "%s",
                 err.message);
    /* and a re-export replaces it, removing the old deep tree */
    cr_assert_eq(sbx_export_to_dir(hd, target, NULL, NULL, &err), SBX_OK, "%s",
                 err.message);
    cr_expect_str_eq(listing(dir), ".out.sbx-export out res sbx.yaml");
}

Test(docker_export, fifo_refused)
{
    hostile("mkfifo /mnt/session/outputs/pipe", "pipe\" is a FIFO", NULL, 60);
}

Test(docker_export, hardlink_refused)
{
    hostile("echo data > /mnt/session/outputs/a && ln /mnt/session/outputs/a "
            "/mnt/session/outputs/b",
            "is a hard link", NULL, 60);
}

Test(docker_export, sparse_file_over_limit_refused_before_its_data)
{
    /* 4 GiB declared, nothing stored: the limit must stop it from the header,
     * not after streaming 4 GiB of zeros. */
    struct sbx_export_limits lim = {sizeof lim, 1024 * 1024, 0, 0};
    hostile("dd if=/dev/zero of=/mnt/session/outputs/sparse bs=1 count=0 seek=4G "
            "2>/dev/null",
            "over the limit", &lim, 10);
}

Test(docker_export, name_not_utf8_refused)
{
    hostile("touch \"/mnt/session/outputs/bad$(printf '\\377')name\"", "UTF-8", NULL, 60);
}

Test(docker_export, total_limit_refused)
{
    struct sbx_export_limits lim = {sizeof lim, 0, 100 * 1024, 0};
    hostile("dd if=/dev/zero of=/mnt/session/outputs/big bs=1024 count=200 2>/dev/null",
            "total limit", &lim, 60);
}

Test(docker_export, empty_outputs_and_nested_dirs)
{
    sbx_error err;
    cr_assert_eq(sbx_export_to_dir(hd, target, NULL, NULL, &err), SBX_OK, "%s",
                 err.message);
    cr_expect_str_eq(listing(target), "");
    sh("mkdir -p /mnt/session/outputs/a/b/c && echo x > /mnt/session/outputs/a/b/c/f");
    cr_assert_eq(sbx_export_to_dir(hd, target, NULL, NULL, &err), SBX_OK, "%s",
                 err.message);
    char path[400];
    snprintf(path, sizeof path, "%s/a/b/c", target);
    cr_expect_str_eq(listing(path), "f");
    cr_expect_str_eq(listing(dir), ".out.sbx-export out res sbx.yaml");
}

Test(docker_export, targets_export_must_not_replace)
{
    sbx_error err;
    /* a directory that an export did not create, with content */
    char foreign[400];
    snprintf(foreign, sizeof foreign, "%s/mine", dir);
    cr_assert_eq(mkdir(foreign, 0755), 0);
    char file[500];
    snprintf(file, sizeof file, "%s/keep.txt", foreign);
    FILE *f = fopen(file, "w");
    cr_assert_not_null(f);
    fputs("keep\n", f);
    fclose(f);
    int rc = sbx_export_to_dir(hd, foreign, NULL, NULL, &err);
    cr_expect_eq(rc, SBX_E_EXISTS, "%s", err.message);
    cr_expect_str_eq(listing(foreign), "keep.txt");
    /* a file */
    rc = sbx_export_to_dir(hd, file, NULL, NULL, &err);
    cr_expect_eq(rc, SBX_E_INVALID, "%s", err.message);
    cr_expect(strstr(err.message, "not a directory") != NULL, "%s", err.message);
    /* a missing parent */
    char deep[500];
    snprintf(deep, sizeof deep, "%s/no/such/dir", dir);
    rc = sbx_export_to_dir(hd, deep, NULL, NULL, &err);
    cr_expect_eq(rc, SBX_E_NOT_FOUND, "%s", err.message);
    cr_expect_str_eq(listing(dir), "mine res sbx.yaml");
}

Test(docker_export, container_without_outputs_mount_fails_closed)
{
    /* A container that looks like ours but was made without the binds (an
     * older provider, or by hand): attach accepts it (its mounts are as
     * recorded), export and file ops on the outputs path refuse. */
    char k2[64], h2[65];
    dh_new_key(k2, h2);
    char body[2048];
    snprintf(body, sizeof body,
             "{\"Image\":\"%s\",\"Entrypoint\":[\"sleep\",\"infinity\"],"
             "\"WorkingDir\":\"/workspace\",\"Labels\":{\"sbx.managed\":\"true\","
             "\"sbx.owner\":\"%s\",\"sbx.spec\":\"\",\"sbx.network\":\"none\","
             "\"sbx.mounts\":\"\"},\"HostConfig\":{\"NetworkMode\":\"none\","
             "\"Init\":true}}",
             getenv("SBX_TEST_DOCKER_IMAGE") ? getenv("SBX_TEST_DOCKER_IMAGE")
                                             : "sbx-test:busybox",
             h2);
    struct dh_buf out = {0};
    long st = dh_api(getenv("SBX_TEST_DOCKER_HOST"), "POST", "/v1.41/containers/create",
                     body, &out);
    cr_assert_eq(st, 201, "%s", out.data);
    char id[65];
    const char *p = strstr(out.data, "\"Id\":\"");
    cr_assert_not_null(p);
    snprintf(id, sizeof id, "%.64s", p + 6);
    dh_buf_free(&out);
    sbx_handle *h2d = NULL;
    sbx_error err;
    cr_assert_eq(sbx_attach(prov, k2, id, NULL, &h2d, &err), SBX_OK, "%s", err.message);
    char t2[400];
    snprintf(t2, sizeof t2, "%s/out2", dir);
    int rc = sbx_export_to_dir(h2d, t2, NULL, NULL, &err);
    cr_expect_eq(rc, SBX_E_UNSUPPORTED, "%s", err.message);
    cr_expect(strstr(err.message, "without the /mnt/session/outputs mount") != NULL, "%s",
              err.message);
    struct dh_mem m = {"x", 1, 0};
    struct sbx_source src = dh_mem_source(&m);
    rc = sbx_write(h2d, "/mnt/session/outputs/x", &src, 0, NULL, &err);
    cr_expect_eq(rc, SBX_E_UNSUPPORTED, "%s", err.message);
    cr_expect_str_eq(listing(dir), "res sbx.yaml", "a failed export left something");
    /* the uploads bind is missing too: mount_put fails closed */
    struct dh_mem m2 = {"x", 1, 0};
    struct sbx_source src2 = dh_mem_source(&m2);
    struct sbx_blob blob = {sizeof blob, &src2, 1,
                            "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881",
                            NULL};
    rc = sbx_mount_put(h2d, "x", &blob, NULL, &err);
    cr_expect_eq(rc, SBX_E_UNSUPPORTED, "%s", err.message);
    cr_expect(strstr(err.message, "without") != NULL, "%s", err.message);
    sbx_release(h2d);
    cr_expect_eq(sbx_destroy(prov, k2, id, NULL, &err), SBX_OK, "%s", err.message);
}

Test(docker_export, destroy_removes_resource_directory)
{
    char path[600];
    snprintf(path, sizeof path, "%s/sbx-%.32s", resdir, keyhash);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0, "%s: %s", path, strerror(errno));
    char ref[SBX_REF_MAX];
    snprintf(ref, sizeof ref, "%s", sbx_handle_ref(hd));
    sbx_release(hd);
    hd = NULL;
    sbx_error err;
    cr_assert_eq(sbx_destroy(prov, key, ref, NULL, &err), SBX_OK, "%s", err.message);
    cr_expect_neq(stat(path, &st), 0, "%s is still there", path);
    cr_expect_eq(sbx_destroy(prov, key, ref, NULL, &err), SBX_OK, "%s", err.message);
}
