/*
 * cases_export.c - OUTPUT_EXPORT: a writable /mnt/session/outputs that the
 * shell and the file operations share, exported into a host directory
 * (sbx_export_to_dir) repeatably, with hostile entries refused and nothing
 * published or left behind when they are.
 */
#include "cf_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define OUT "/mnt/session/outputs"

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

#define HOST_DIR_MAX 512
#define TARGET_MAX (HOST_DIR_MAX + 8)

/* A private host directory for the export targets of one case, into
 * dir[HOST_DIR_MAX], and the (not yet existing) target <dir>/out into
 * target[TARGET_MAX]. */
static bool host_tmpdir(struct cf_test *t, char *dir, char *target)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, HOST_DIR_MAX, "%s/sbx-cf-export-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir))
        return cf_fail(t, "cannot create a host directory for the export: %s",
                       strerror(errno));
    snprintf(target, TARGET_MAX, "%s/out", dir);
    return true;
}

static void host_rmdir(const char *dir)
{
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* The content of a host file (at most cap-1 bytes) or NULL. */
static char *host_read(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

static bool expect_host_file(struct cf_test *t, const char *dir, const char *rel,
                             const char *want)
{
    char path[4096], buf[4096], q[200];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    if (!host_read(path, buf, sizeof buf))
        return cf_fail(t, "after the export, %s is missing: %s", path, strerror(errno));
    if (strcmp(buf, want) != 0)
        return cf_fail(t, "after the export, %s holds %s", path,
                       cf_quote(buf, strlen(buf), q, sizeof q));
    return true;
}

/* The names in dir, sorted, joined by spaces (into out). */
static const char *listing(const char *dir, char *out, size_t cap)
{
    struct dirent **names = NULL;
    int n = scandir(dir, &names, NULL, alphasort);
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (strcmp(names[i]->d_name, ".") && strcmp(names[i]->d_name, "..") &&
            used < cap)
            used += (size_t)snprintf(out + used, cap - used, "%s%s", used ? " " : "",
                                     names[i]->d_name);
        free(names[i]);
    }
    free(names);
    return n < 0 ? "(unreadable)" : out;
}

void cf_case_export_shell_and_files(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    if (!h)
        return;
    /* The shell writes, the file tools read; and the other way round. */
    char *o = cf_sh(t, h,
                    "mkdir -p " OUT "/sub && printf 'from the shell\\n' > " OUT
                    "/report.txt && printf 'nested\\n' > " OUT "/sub/data.txt");
    free(o);
    if (!o)
        return;
    if (!cf_expect_file(t, h, OUT "/report.txt", "from the shell\n") ||
        !cf_write_text(t, h, OUT "/tool/written.txt", "from the file tools\n"))
        return;
    o = cf_sh(t, h, "cat " OUT "/tool/written.txt");
    if (o && strcmp(o, "from the file tools\n") != 0)
        cf_fail(t, "the shell sees %s in a file written through the file tools", o);
    free(o);
    if (!o || cf_failed(t))
        return;

    char dir[HOST_DIR_MAX], target[TARGET_MAX];
    if (!host_tmpdir(t, dir, target))
        return;
    sbx_error err;
    sbx_error_clear(&err);
    if (cf_expect_ok(t, sbx_export_to_dir(h, target, NULL, NULL, &err), &err,
                     "export into a new directory") &&
        expect_host_file(t, target, "report.txt", "from the shell\n") &&
        expect_host_file(t, target, "sub/data.txt", "nested\n") &&
        expect_host_file(t, target, "tool/written.txt", "from the file tools\n")) {
        /* Export again after changes: the target is replaced, not merged. */
        o = cf_sh(t, h, "rm " OUT "/report.txt && echo second > " OUT "/new.txt");
        free(o);
        char names[512];
        if (o && cf_expect_ok(t, sbx_export_to_dir(h, target, NULL, NULL, &err), &err,
                              "export again into the same directory") &&
            expect_host_file(t, target, "new.txt", "second\n")) {
            listing(target, names, sizeof names);
            if (strcmp(names, "new.txt sub tool") != 0)
                cf_fail(t, "after the second export the target holds [%s]; want "
                           "[new.txt sub tool]",
                        names);
            listing(dir, names, sizeof names);
            if (strcmp(names, ".out.sbx-export out") != 0)
                cf_fail(t, "beside the target there is [%s]; want only the target "
                           "and its marker",
                        names);
        }
    }
    host_rmdir(dir);
}

void cf_case_export_refuses_symlink(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    if (!h)
        return;
    char *o = cf_sh(t, h, "echo good > " OUT "/good.txt");
    free(o);
    if (!o)
        return;
    char dir[HOST_DIR_MAX], target[TARGET_MAX];
    if (!host_tmpdir(t, dir, target))
        return;
    sbx_error err;
    sbx_error_clear(&err);
    if (cf_expect_ok(t, sbx_export_to_dir(h, target, NULL, NULL, &err), &err,
                     "export of a clean outputs directory")) {
        o = cf_sh(t, h, "ln -s /etc/passwd " OUT "/passwd && echo changed > " OUT
                        "/good.txt");
        free(o);
        int rc = o ? sbx_export_to_dir(h, target, NULL, NULL, &err) : SBX_OK;
        char names[512];
        if (!o) {
            /* cf_sh failed the case */
        } else if (rc != SBX_E_INVALID) {
            cf_fail(t, "export of an outputs directory holding a symlink to "
                       "/etc/passwd returned %s (%s); want SBX_E_INVALID",
                    cf_status_name(rc), err.message);
        } else if (!strstr(err.message, "passwd")) {
            cf_fail(t, "the refusal does not name the entry: %s", err.message);
        } else if (expect_host_file(t, target, "good.txt", "good\n")) {
            if (strcmp(listing(target, names, sizeof names), "good.txt") != 0)
                cf_fail(t, "after the refused export the target holds [%s]", names);
            else if (strcmp(listing(dir, names, sizeof names), ".out.sbx-export out"))
                cf_fail(t, "the refused export left [%s] beside the target", names);
        }
    }
    host_rmdir(dir);
}
