/*
 * test_archive_check.c - shared/archive_check.c against good and hostile
 * archives: links, devices, FIFOs, absolute and ".." names, names that are
 * not UTF-8, duplicates, files under files, oversized and sparse entries,
 * totals, entry counts; names of any bytes when the caller asks (snapshots).
 * Each refusal names the entry and nothing is written
 * outside the destination directory.
 */
#include "archive_check.h"

#include <archive.h>
#include <archive_entry.h>
#include <criterion/criterion.h>

#include <dirent.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* ---- building archives ------------------------------------------------ */

struct mem {
    unsigned char *data;
    size_t len, cap, pos;
};

static la_ssize_t mem_write(struct archive *a, void *ud, const void *buf, size_t n)
{
    struct mem *m = ud;
    (void)a;
    if (m->len + n > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 65536;
        while (cap < m->len + n)
            cap *= 2;
        m->data = realloc(m->data, cap);
        m->cap = cap;
    }
    memcpy(m->data + m->len, buf, n);
    m->len += n;
    return (la_ssize_t)n;
}

enum kind { REG, DIR_, SYMLINK, HARDLINK, FIFO, CHR, SPARSE };

struct ent {
    enum kind kind;
    const char *name;
    const char *data; /* for REG; NULL with size for zero-filled */
    int64_t size;
};

static struct archive *begin(struct mem *m, const char *format)
{
    memset(m, 0, sizeof *m);
    struct archive *a = archive_write_new();
    if (format && strcmp(format, "zip") == 0) {
        archive_write_set_format_zip(a);
    } else if (format && strcmp(format, "pax") == 0) {
        archive_write_set_format_pax_restricted(a); /* needed for sparse files */
    } else {
        /* ustar keeps names as raw bytes, hostile ones included */
        archive_write_set_format_ustar(a);
        if (format && strcmp(format, "tar.gz") == 0)
            archive_write_add_filter_gzip(a);
    }
    cr_assert_eq(archive_write_open(a, m, NULL, mem_write, NULL), ARCHIVE_OK);
    return a;
}

static void add(struct archive *a, const struct ent *x)
{
    struct archive_entry *e = archive_entry_new();
    archive_entry_copy_pathname(e, x->name);
    archive_entry_set_perm(e, 0644);
    int64_t size = x->data ? (int64_t)strlen(x->data) : x->size;
    switch (x->kind) {
    case REG:
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_size(e, size);
        break;
    case SPARSE:
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_size(e, size);
        archive_entry_sparse_add_entry(e, size - 4, 4);
        break;
    case DIR_: archive_entry_set_filetype(e, AE_IFDIR); break;
    case SYMLINK:
        archive_entry_set_filetype(e, AE_IFLNK);
        archive_entry_copy_symlink(e, "/etc/passwd");
        break;
    case HARDLINK:
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_copy_hardlink(e, "/etc/passwd");
        break;
    case FIFO: archive_entry_set_filetype(e, AE_IFIFO); break;
    case CHR:
        archive_entry_set_filetype(e, AE_IFCHR);
        archive_entry_set_rdev(e, makedev(1, 3));
        break;
    }
    cr_assert_eq(archive_write_header(a, e), ARCHIVE_OK, "%s: %s", x->name,
                 archive_error_string(a));
    if (x->kind == REG && x->data)
        archive_write_data(a, x->data, strlen(x->data));
    else if ((x->kind == REG || x->kind == SPARSE) && size > 0) {
        char zero[4096] = {0};
        int64_t left = x->kind == SPARSE ? 4 : size;
        while (left > 0) {
            size_t n = left > (int64_t)sizeof zero ? sizeof zero : (size_t)left;
            archive_write_data(a, zero, n);
            left -= (int64_t)n;
        }
    }
    archive_entry_free(e);
}

static void finish(struct archive *a)
{
    cr_assert_eq(archive_write_close(a), ARCHIVE_OK);
    archive_write_free(a);
}

static void build(struct mem *m, const char *format, const struct ent *ents, size_t n)
{
    struct archive *a = begin(m, format);
    for (size_t i = 0; i < n; i++)
        add(a, &ents[i]);
    finish(a);
}

static long mem_read(void *ctx, void *buf, size_t cap)
{
    struct mem *m = ctx;
    size_t n = m->len - m->pos;
    if (n > cap)
        n = cap;
    /* deliver in small pieces to exercise streaming */
    if (n > 1000)
        n = 1000;
    memcpy(buf, m->data + m->pos, n);
    m->pos += n;
    return (long)n;
}

/* ---- a scratch area: parent/dest, with a canary next to dest --------- */

static char parent[64], dest[128];

static void scratch(void)
{
    snprintf(parent, sizeof parent, "/tmp/sbx-archive-test-XXXXXX");
    cr_assert_not_null(mkdtemp(parent));
    snprintf(dest, sizeof dest, "%s/dest", parent);
    cr_assert_eq(mkdir(dest, 0755), 0);
}

static void cleanup(void)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", parent);
    cr_expect_eq(system(cmd), 0);
}

TestSuite(archive_check, .init = scratch, .fini = cleanup, .timeout = 60);

static int extract(struct mem *m, const char *format,
                   const struct sbxs_archive_limits *lim, struct sbxs_error *err)
{
    struct sbx_source src = {.size = sizeof(struct sbx_source), .ctx = m, .read = mem_read};
    int fd = open(dest, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    cr_assert_geq(fd, 0);
    sbxs_error_clear(err);
    int rc = sbxs_archive_extract(&src, format, fd, lim, err);
    close(fd);
    return rc;
}

/* Entries directly in the scratch parent: only "dest" may be there. */
static int parent_entries(void)
{
    DIR *d = opendir(parent);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

static char *slurp(const char *rel)
{
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", dest, rel);
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = calloc(1, 1 << 16);
    size_t n = fread(buf, 1, (1 << 16) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

Test(archive_check, good_tar_extracts)
{
    const struct ent ents[] = {
        {DIR_, "./", NULL, 0},         {DIR_, "out/", NULL, 0},
        {REG, "out/a.txt", "alpha\n", 0}, {REG, "out//deep/b.txt", "beta", 0},
        {REG, "caf\xc3\xa9.txt", "utf8", 0}, {REG, "empty", NULL, 0},
        {DIR_, "out", NULL, 0}, /* a directory listed twice is fine */
    };
    struct mem m;
    build(&m, "tar", ents, sizeof ents / sizeof ents[0]);
    struct sbxs_error err;
    cr_assert_eq(extract(&m, "tar", NULL, &err), SBX_OK, "%s", err.message);
    char *a = slurp("out/a.txt"), *b = slurp("out/deep/b.txt"), *c = slurp("caf\xc3\xa9.txt");
    cr_expect_str_eq(a ? a : "(missing)", "alpha\n");
    cr_expect_str_eq(b ? b : "(missing)", "beta");
    cr_expect_str_eq(c ? c : "(missing)", "utf8");
    free(a);
    free(b);
    free(c);
    struct stat st;
    char p[256];
    snprintf(p, sizeof p, "%s/empty", dest);
    cr_expect_eq(stat(p, &st), 0);
    cr_expect_eq(st.st_size, 0);
    cr_expect_eq(st.st_mode & 07777, 0644);
    free(m.data);
}

Test(archive_check, good_tar_gz_and_zip_extract)
{
    const struct ent ents[] = {{REG, "z/one", "1", 0}, {REG, "two", "22", 0}};
    const char *formats[] = {"tar.gz", "zip"};
    for (int i = 0; i < 2; i++) {
        struct mem m;
        build(&m, formats[i], ents, 2);
        struct sbxs_error err;
        cr_assert_eq(extract(&m, formats[i], NULL, &err), SBX_OK, "%s: %s", formats[i],
                     err.message);
        char *one = slurp("z/one");
        cr_expect_str_eq(one ? one : "", "1");
        free(one);
        char cmd[256];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'/* ", dest);
        cr_assert_eq(system(cmd), 0);
        free(m.data);
    }
}

/* Build an archive holding one good file then `bad`, and expect a refusal
 * whose message contains `want`. */
static void refuse_as(const char *format, const struct ent *bad, const char *want,
                      const struct sbxs_archive_limits *lim)
{
    const struct ent ents[] = {{REG, "fine.txt", "ok", 0}, *bad};
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir '%s'", dest, dest);
    cr_assert_eq(system(cmd), 0);
    struct mem m;
    build(&m, format, ents, 2);
    struct sbxs_error err;
    int rc = extract(&m, "tar", lim, &err);
    cr_expect_eq(rc, SBX_E_INVALID, "%s: got %d (%s)", bad->name, rc, err.message);
    cr_expect(strstr(err.message, want), "%s: message \"%s\" lacks \"%s\"", bad->name,
              err.message, want);
    cr_expect_eq(parent_entries(), 1, "something was written outside the destination");
    free(m.data);
}

static void refuse(const struct ent *bad, const char *want,
                   const struct sbxs_archive_limits *lim)
{
    refuse_as("tar", bad, want, lim);
}

Test(archive_check, links_devices_and_fifos_are_refused)
{
    const struct ent sym = {SYMLINK, "passwd", NULL, 0};
    refuse(&sym, "symbolic link", NULL);
    const struct ent hard = {HARDLINK, "hl", NULL, 0};
    refuse(&hard, "hard link", NULL);
    const struct ent fifo = {FIFO, "pipe", NULL, 0};
    refuse(&fifo, "FIFO", NULL);
    const struct ent chr = {CHR, "null", NULL, 0};
    refuse(&chr, "character device", NULL);
    /* nothing of them was created */
    char p[256];
    struct stat st;
    snprintf(p, sizeof p, "%s/passwd", dest);
    cr_expect_neq(lstat(p, &st), 0);
    snprintf(p, sizeof p, "%s/pipe", dest);
    cr_expect_neq(lstat(p, &st), 0);
}

Test(archive_check, escaping_and_bad_names_are_refused)
{
    const struct ent abs = {REG, "/etc/evil", "x", 0};
    refuse(&abs, "absolute", NULL);
    const struct ent up = {REG, "../evil", "x", 0};
    refuse(&up, "..", NULL);
    const struct ent deep = {REG, "a/../../evil", "x", 0};
    refuse(&deep, "..", NULL);
    const struct ent latin1 = {REG, "caf\xe9.txt", "x", 0};
    refuse(&latin1, "not valid UTF-8", NULL);
    const struct ent overlong = {REG, "\xc0\xaf", "x", 0};
    refuse(&overlong, "UTF-8", NULL);
    const struct ent ctl = {REG, "bell\x07", "x", 0};
    refuse(&ctl, "control character", NULL);
    /* the message shows the hostile bytes escaped */
    const struct ent shown = {REG, "x\xff", "x", 0};
    refuse(&shown, "x\\xff", NULL);
}

Test(archive_check, duplicates_and_files_under_files_are_refused)
{
    const struct ent dup = {REG, "./fine.txt", "again", 0};
    refuse(&dup, "appears twice", NULL);
    const struct ent under = {REG, "fine.txt/inner", "x", 0};
    refuse(&under, "below an entry that is a file", NULL);
    char *f = slurp("fine.txt");
    cr_expect_str_eq(f ? f : "", "ok", "the first copy was replaced");
    free(f);
}

Test(archive_check, size_limits)
{
    struct sbxs_archive_limits lim = {1000, 1500, 0};
    const struct ent big = {REG, "big", NULL, 1001};
    refuse(&big, "over the limit of 1000 per file", &lim);
    /* a sparse file: 4 bytes stored, 1 MiB declared */
    const struct ent sparse = {SPARSE, "sparse", NULL, 1 << 20};
    refuse_as("pax", &sparse, "over the limit", &lim);
    /* each file under the per-file limit, together over the total */
    const struct ent ents[] = {{REG, "a", NULL, 900}, {REG, "b", NULL, 900}};
    struct mem m;
    build(&m, "tar", ents, 2);
    struct sbxs_error err;
    cr_expect_eq(extract(&m, "tar", &lim, &err), SBX_E_INVALID);
    cr_expect(strstr(err.message, "total limit"), "%s", err.message);
    free(m.data);
    struct sbxs_archive_limits few = {0, 0, 2};
    const struct ent three[] = {{REG, "1", "1", 0}, {REG, "2", "2", 0}, {REG, "3", "3", 0}};
    build(&m, "tar", three, 3);
    cr_expect_eq(extract(&m, "tar", &few, &err), SBX_E_INVALID);
    cr_expect(strstr(err.message, "more than 2 entries"), "%s", err.message);
    free(m.data);
}

Test(archive_check, garbage_and_truncation_are_refused)
{
    struct mem m = {0};
    m.data = (unsigned char *)strdup("this is not an archive at all, not even close........");
    m.len = strlen((char *)m.data);
    struct sbxs_error err;
    cr_expect_eq(extract(&m, "tar", NULL, &err), SBX_E_INVALID, "%s", err.message);
    free(m.data);
    const struct ent ents[] = {{REG, "f", NULL, 100000}};
    build(&m, "tar", ents, 1);
    m.len = 20000; /* cut in the middle of the data */
    cr_expect_eq(extract(&m, "tar", NULL, &err), SBX_E_INVALID, "%s", err.message);
    cr_expect_eq(parent_entries(), 1);
    free(m.data);
    cr_expect_eq(extract(&m, "rar", NULL, &err), SBX_E_INVALID);
}

Test(archive_check, existing_symlink_in_destination_is_not_followed)
{
    char link[256];
    snprintf(link, sizeof link, "%s/out", dest);
    cr_assert_eq(symlink(parent, link), 0);
    const struct ent ents[] = {{REG, "out/escaped", "x", 0}};
    struct mem m;
    build(&m, "tar", ents, 1);
    struct sbxs_error err;
    cr_expect_neq(extract(&m, "tar", NULL, &err), SBX_OK);
    cr_expect_eq(parent_entries(), 1, "a file was written through the symlink");
    free(m.data);
}

/* "d/d/.../d" of `levels` components (then "/" + leaf when given). */
static char *deep_name(int levels, const char *leaf)
{
    size_t cap = (size_t)levels * 2 + (leaf ? strlen(leaf) : 0) + 2;
    char *s = malloc(cap), *w = s;
    for (int i = 0; i < levels; i++)
        w += sprintf(w, i ? "/d" : "d");
    if (leaf)
        sprintf(w, "/%s", leaf);
    return s;
}

Test(archive_check, nesting_is_bounded)
{
    char *ok = deep_name(SBXS_ARCHIVE_MAX_DEPTH - 1, "f");
    char *bad = deep_name(SBXS_ARCHIVE_MAX_DEPTH, "f");
    const struct ent good = {REG, ok, "deep", 0};
    struct mem m;
    build(&m, "pax", &good, 1);
    struct sbxs_error err;
    cr_assert_eq(extract(&m, "tar", NULL, &err), SBX_OK, "%s", err.message);
    free(m.data);
    const struct ent too_deep = {REG, bad, "x", 0};
    refuse_as("pax", &too_deep, "is nested deeper than 256 levels", NULL);
    free(ok);
    free(bad);
}

Test(archive_check, many_files_deep_down_extract_with_the_cached_parent)
{
    /* 2000 files at depth 250 used to cost depth x entries lookups and
     * directory walks (36 s of CPU at depth 1000); every file and the order
     * of the entries must still come out right. */
    enum { FILES = 2000, LEVELS = 250 };
    struct ent *ents = calloc(FILES + LEVELS, sizeof *ents);
    char **names = calloc(FILES + LEVELS, sizeof *names);
    size_t n = 0;
    for (int l = 1; l <= LEVELS; l++) {
        names[n] = deep_name(l, NULL);
        ents[n] = (struct ent){DIR_, names[n], NULL, 0};
        n++;
    }
    for (int i = 0; i < FILES; i++) {
        char leaf[32];
        snprintf(leaf, sizeof leaf, "f%d", i);
        names[n] = deep_name(LEVELS, leaf);
        /* the file holds its own name (kept alive by names[n]) */
        ents[n] = (struct ent){REG, names[n], strrchr(names[n], '/') + 1, 0};
        n++;
    }
    struct mem m;
    build(&m, "pax", ents, n);
    struct sbxs_error err;
    cr_assert_eq(extract(&m, "tar", NULL, &err), SBX_OK, "%s", err.message);
    char *probe = deep_name(LEVELS, "f1999");
    char *got = slurp(probe);
    cr_assert_str_eq(got ? got : "(missing)", "f1999");
    free(got);
    free(probe);
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    free(ents);
    free(m.data);
}

/* Each entry of m through sbxs_archive_check_entry: the first refusal's
 * message, or NULL when every entry passed. any_bytes: names need not be
 * UTF-8 (snapshots). */
static char *check_all(struct mem *m, bool any_bytes)
{
    struct archive *r = archive_read_new();
    archive_read_support_format_tar(r);
    cr_assert_eq(archive_read_open_memory(r, m->data, m->len), ARCHIVE_OK);
    sbxs_archive_check *c = NULL;
    struct sbxs_error err;
    sbxs_error_clear(&err);
    cr_assert_eq(sbxs_archive_check_new(NULL, &c, &err), SBX_OK);
    if (any_bytes)
        sbxs_archive_check_any_bytes(c);
    char name[4096], *refused = NULL;
    struct archive_entry *e;
    while (!refused && archive_read_next_header(r, &e) == ARCHIVE_OK) {
        int is_dir;
        if (sbxs_archive_check_entry(c, e, name, sizeof name, &is_dir, &err) != SBX_OK)
            refused = strdup(err.message);
    }
    sbxs_archive_check_free(c);
    archive_read_free(r);
    return refused;
}

Test(archive_check, names_of_any_bytes_when_asked)
{
    const char *names[] = {"\xff", "x\xe9y", "caf\xc3\xa9", "\xe6\x97\xa5/\xe9"};
    struct mem m;
    struct archive *a = begin(&m, NULL);
    for (size_t i = 0; i < 4; i++) {
        const struct ent x = {REG, names[i], "x", 0};
        add(a, &x);
    }
    archive_write_close(a);
    archive_write_free(a);
    char *why = check_all(&m, false);
    cr_assert(why && strstr(why, "not valid UTF-8"), "%s", why ? why : "accepted");
    free(why);
    why = check_all(&m, true);
    cr_assert_null(why, "%s", why);
    free(m.data);
    /* the other rules still hold */
    const char *bad[] = {"\xff/../x", "\xff\x07", "/\xff"};
    for (size_t i = 0; i < 3; i++) {
        a = begin(&m, NULL);
        const struct ent x = {REG, bad[i], "x", 0};
        add(a, &x);
        archive_write_close(a);
        archive_write_free(a);
        why = check_all(&m, true);
        cr_assert_not_null(why, "entry %zu accepted", i);
        free(why);
        free(m.data);
    }
}
