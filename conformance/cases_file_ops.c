/*
 * cases_file_ops.c - SBX_CAP_FILE_OPS (ABI 1.2): list, stat, mkdir, remove
 * and rename in the workspace, confined like read and write, never
 * following the last component, and never led out of the workspace by a
 * symlink planted in it.
 *
 * Trees are prepared with sh (mkdir, ln -s, mkfifo, chmod); a directory
 * outside the workspace is made under /tmp of the sandbox, named after the
 * case's token, and checked and removed with sh as well.
 */
#include "cf_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NAMES_MAX 8

/* What a listing delivered (small directories), or only its count. */
struct listing {
    size_t n;
    struct {
        char name[64];
        struct sbx_file_info info;
    } e[NAMES_MAX];
    size_t bad_names; /* names outside "f<number>" in the large case */
    unsigned char *seen; /* large case: f0..f(nseen-1) */
    size_t nseen, dups;
};

static int list_entry(void *ctx, const struct sbx_file_info *info)
{
    struct listing *l = ctx;
    if (l->seen) {
        char *end = NULL;
        unsigned long i = info->name[0] == 'f' ? strtoul(info->name + 1, &end, 10) : 0;
        if (!end || *end || i >= l->nseen)
            l->bad_names++;
        else if (l->seen[i]++)
            l->dups++;
    } else if (l->n < NAMES_MAX) {
        snprintf(l->e[l->n].name, sizeof l->e[l->n].name, "%s", info->name);
        l->e[l->n].info = *info;
        l->e[l->n].info.name = NULL;
    }
    l->n++;
    return 0;
}

static int do_list(sbx_handle *h, const char *path, struct listing *l, sbx_error *err)
{
    struct sbx_file_list_sink sink = {sizeof sink, l, list_entry};
    return sbx_file_list(h, path, &sink, NULL, err);
}

static const struct sbx_file_info *entry(const struct listing *l, const char *name)
{
    for (size_t i = 0; i < l->n && i < NAMES_MAX; i++)
        if (!strcmp(l->e[i].name, name))
            return &l->e[i].info;
    return NULL;
}

static const char *type_name(uint32_t type)
{
    switch (type) {
    case SBX_FILE_REGULAR: return "regular";
    case SBX_FILE_DIR: return "directory";
    case SBX_FILE_SYMLINK: return "symlink";
    case SBX_FILE_OTHER: return "other";
    }
    return "?";
}

/* An entry of the given type, size (unless UINT64_MAX) and mode. */
static bool expect_info(struct cf_test *t, const char *what, const struct sbx_file_info *fi,
                        uint32_t type, uint64_t bytes, uint32_t mode)
{
    if (!fi)
        return cf_fail(t, "%s: missing", what);
    if (fi->type != type || (bytes != UINT64_MAX && fi->bytes != bytes) ||
        (mode && (fi->mode & 07777) != mode))
        return cf_fail(t, "%s: %s of %llu bytes, mode %04o; want %s%s, mode %04o", what,
                       type_name(fi->type), (unsigned long long)fi->bytes, fi->mode,
                       type_name(type), bytes == UINT64_MAX ? "" : " of that size", mode);
    /* a modification time of about now (within a day: clocks differ) */
    int64_t now = (int64_t)time(NULL) * 1000000000LL;
    if (fi->mtime_ns < now - 86400LL * 1000000000LL || fi->mtime_ns > now + 86400LL * 1000000000LL)
        return cf_fail(t, "%s: mtime_ns %lld is not about now", what, (long long)fi->mtime_ns);
    return true;
}

static int do_stat(sbx_handle *h, const char *path, struct sbx_file_info *fi, sbx_error *err)
{
    memset(fi, 0, sizeof *fi);
    fi->size = sizeof *fi;
    return sbx_file_stat(h, path, fi, NULL, err);
}

static bool expect_status(struct cf_test *t, int got, const sbx_error *err, int want,
                          const char *what, const char *path)
{
    char w[160];
    snprintf(w, sizeof w, "%s \"%s\"", what, path);
    return cf_proc_expect_status(t, got, err, want, w);
}

/* The prepared tree, in t/ (the root may hold what the provider put there). */
static const char tree_script[] =
    "mkdir t && (cd t && printf hello > a && chmod 0640 a && mkdir d && chmod 0750 d && "
    "printf 12345678 > d/x && ln -s a l && mkfifo f)";

void cf_case_fileops_list(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    char *out;
    if (!h || !(out = cf_sh(t, h, tree_script)))
        return;
    free(out);
    struct listing l;
    memset(&l, 0, sizeof l);
    sbx_error err;
    int rc = do_list(h, "t", &l, &err);
    if (!cf_expect_ok(t, rc, &err, "file_list of t"))
        return;
    if (l.n != 4)
        return (void)cf_fail(t, "t holds a, d, l and f; file_list gave %zu entries", l.n);
    if (!expect_info(t, "entry a", entry(&l, "a"), SBX_FILE_REGULAR, 5, 0640) ||
        !expect_info(t, "entry d", entry(&l, "d"), SBX_FILE_DIR, UINT64_MAX, 0750) ||
        !expect_info(t, "entry l (a symlink to a)", entry(&l, "l"), SBX_FILE_SYMLINK,
                     UINT64_MAX, 0) ||
        !expect_info(t, "entry f (a FIFO)", entry(&l, "f"), SBX_FILE_OTHER, 0, 0))
        return;
    memset(&l, 0, sizeof l);
    rc = do_list(h, "t/d", &l, &err);
    if (cf_expect_ok(t, rc, &err, "file_list of t/d") &&
        (l.n != 1 || !expect_info(t, "t/d/x", entry(&l, "x"), SBX_FILE_REGULAR, 8, 0)))
        cf_fail(t, "t/d holds x alone; file_list gave %zu entries", l.n);
    memset(&l, 0, sizeof l);
    if (!cf_failed(t))
        expect_status(t, do_list(h, "nope", &l, &err), &err, SBX_E_NOT_FOUND, "file_list of",
                      "nope");
    if (!cf_failed(t))
        expect_status(t, do_list(h, "t/a", &l, &err), &err, SBX_E_INVALID,
                      "file_list of the file", "t/a");
    /* the root lists t among whatever else it holds */
    memset(&l, 0, sizeof l);
    if (!cf_failed(t) && cf_expect_ok(t, do_list(h, "", &l, &err), &err,
                                      "file_list of the root"))
        expect_info(t, "entry t of the root", entry(&l, "t"), SBX_FILE_DIR, UINT64_MAX, 0);
}

void cf_case_fileops_list_large(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    char *out;
    if (!h || !(out = cf_sh(t, h, "mkdir big && cd big && seq 0 4999 | sed 's/^/f/' | "
                                  "xargs touch")))
        return;
    free(out);
    struct listing l;
    memset(&l, 0, sizeof l);
    l.nseen = 5000;
    l.seen = calloc(l.nseen, 1);
    if (!l.seen)
        return (void)cf_fail(t, "out of memory");
    sbx_error err;
    int rc = do_list(h, "big", &l, &err);
    size_t missing = 0;
    for (size_t i = 0; i < l.nseen; i++)
        missing += !l.seen[i];
    if (cf_expect_ok(t, rc, &err, "file_list of a directory of 5000 files") &&
        (l.n != 5000 || missing || l.dups || l.bad_names))
        cf_fail(t, "file_list of 5000 files f0..f4999 gave %zu entries: %zu missing, %zu "
                   "twice, %zu unknown names",
                l.n, missing, l.dups, l.bad_names);
    free(l.seen);
}

void cf_case_fileops_stat(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    char *out;
    char script[400];
    snprintf(script, sizeof script,
             "%s && mkdir -p /tmp/sbxcf-%.16s && ln -s /tmp/sbxcf-%.16s t/out", tree_script,
             t->token, t->token);
    if (!h || !(out = cf_sh(t, h, script)))
        return;
    free(out);
    struct sbx_file_info fi;
    sbx_error err;
    int rc = do_stat(h, "t/a", &fi, &err);
    if (cf_expect_ok(t, rc, &err, "file_stat t/a") &&
        expect_info(t, "file_stat t/a", &fi, SBX_FILE_REGULAR, 5, 0640) && fi.name)
        cf_fail(t, "file_stat gave a name");
    if (!cf_failed(t) && cf_expect_ok(t, do_stat(h, "t/d", &fi, &err), &err, "file_stat t/d"))
        expect_info(t, "file_stat t/d", &fi, SBX_FILE_DIR, UINT64_MAX, 0750);
    if (!cf_failed(t) &&
        cf_expect_ok(t, do_stat(h, "t/d/x", &fi, &err), &err, "file_stat t/d/x"))
        expect_info(t, "file_stat t/d/x", &fi, SBX_FILE_REGULAR, 8, 0);
    if (!cf_failed(t) && cf_expect_ok(t, do_stat(h, "t/l", &fi, &err), &err, "file_stat t/l"))
        expect_info(t, "file_stat of the symlink t/l (never followed)", &fi, SBX_FILE_SYMLINK,
                    UINT64_MAX, 0);
    if (!cf_failed(t) &&
        cf_expect_ok(t, do_stat(h, "t/out", &fi, &err), &err, "file_stat t/out"))
        expect_info(t, "file_stat of the symlink t/out (to a directory outside)", &fi,
                    SBX_FILE_SYMLINK, UINT64_MAX, 0);
    if (!cf_failed(t) && cf_expect_ok(t, do_stat(h, "", &fi, &err), &err, "file_stat root"))
        expect_info(t, "file_stat of the root", &fi, SBX_FILE_DIR, UINT64_MAX, 0);
    if (!cf_failed(t))
        expect_status(t, do_stat(h, "nope", &fi, &err), &err, SBX_E_NOT_FOUND, "file_stat",
                      "nope");
    snprintf(script, sizeof script, "rm -rf /tmp/sbxcf-%.16s", t->token);
    free(cf_sh_any(t, h, script));
}

void cf_case_fileops_mkdir(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    if (!h || !cf_write_text(t, h, "file", "x"))
        return;
    sbx_error err;
    struct sbx_file_info fi;
    int rc = sbx_file_mkdir(h, "m", 0, 0, NULL, &err);
    if (cf_expect_ok(t, rc, &err, "file_mkdir m") &&
        cf_expect_ok(t, do_stat(h, "m", &fi, &err), &err, "file_stat m"))
        expect_info(t, "m made with mode 0", &fi, SBX_FILE_DIR, UINT64_MAX, 0755);
    if (!cf_failed(t) &&
        cf_expect_ok(t, sbx_file_mkdir(h, "m700", 0700, 0, NULL, &err), &err, "mkdir m700") &&
        cf_expect_ok(t, do_stat(h, "m700", &fi, &err), &err, "file_stat m700"))
        expect_info(t, "m700 made with mode 0700", &fi, SBX_FILE_DIR, UINT64_MAX, 0700);
    if (!cf_failed(t))
        expect_status(t, sbx_file_mkdir(h, "m", 0, 0, NULL, &err), &err, SBX_E_EXISTS,
                      "file_mkdir of the existing directory", "m");
    if (!cf_failed(t))
        expect_status(t, sbx_file_mkdir(h, "m", 0, SBX_MKDIR_PARENTS, NULL, &err), &err,
                      SBX_OK, "file_mkdir with SBX_MKDIR_PARENTS of the existing", "m");
    if (!cf_failed(t))
        expect_status(t, sbx_file_mkdir(h, "file", 0, SBX_MKDIR_PARENTS, NULL, &err), &err,
                      SBX_E_EXISTS, "file_mkdir with SBX_MKDIR_PARENTS of the file", "file");
    if (!cf_failed(t))
        expect_status(t, sbx_file_mkdir(h, "p/q/r", 0, 0, NULL, &err), &err, SBX_E_NOT_FOUND,
                      "file_mkdir without SBX_MKDIR_PARENTS of", "p/q/r");
    if (!cf_failed(t) && do_stat(h, "p", &fi, &err) != SBX_E_NOT_FOUND)
        cf_fail(t, "a refused file_mkdir of p/q/r made p");
    if (!cf_failed(t) &&
        cf_expect_ok(t, sbx_file_mkdir(h, "p/q/r", 0, SBX_MKDIR_PARENTS, NULL, &err), &err,
                     "file_mkdir p/q/r with SBX_MKDIR_PARENTS") &&
        cf_expect_ok(t, do_stat(h, "p/q/r", &fi, &err), &err, "file_stat p/q/r"))
        expect_info(t, "p/q/r", &fi, SBX_FILE_DIR, UINT64_MAX, 0);
    if (!cf_failed(t))
        expect_status(t, sbx_file_mkdir(h, "bad", 04755, 0, NULL, &err), &err, SBX_E_INVALID,
                      "file_mkdir with mode 04755 of", "bad");
}

void cf_case_fileops_remove(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    char *out;
    if (!h || !(out = cf_sh(t, h, "printf x > f && mkdir e && mkdir -p full/sub && "
                                  "printf y > full/sub/z && ln -s f link")))
        return;
    free(out);
    sbx_error err;
    struct sbx_file_info fi;
    static const char *const gone[] = {"f", "e", "link"};
    if (cf_expect_ok(t, sbx_file_remove(h, "link", 0, NULL, &err), &err, "file_remove link"))
        cf_expect_ok(t, do_stat(h, "f", &fi, &err), &err,
                     "file_stat of the symlink's target after its removal");
    if (!cf_failed(t))
        cf_expect_ok(t, sbx_file_remove(h, "f", 0, NULL, &err), &err, "file_remove f");
    if (!cf_failed(t))
        cf_expect_ok(t, sbx_file_remove(h, "e", 0, NULL, &err), &err,
                     "file_remove of the empty directory e");
    for (size_t i = 0; i < 3 && !cf_failed(t); i++)
        if (do_stat(h, gone[i], &fi, &err) != SBX_E_NOT_FOUND)
            cf_fail(t, "%s is still there after file_remove", gone[i]);
    if (!cf_failed(t))
        expect_status(t, sbx_file_remove(h, "full", 0, NULL, &err), &err, SBX_E_EXISTS,
                      "file_remove without SBX_REMOVE_RECURSIVE of the non-empty", "full");
    if (!cf_failed(t) && do_stat(h, "full/sub/z", &fi, &err) != SBX_OK)
        cf_fail(t, "a refused file_remove of full removed some of it");
    if (!cf_failed(t) &&
        cf_expect_ok(t, sbx_file_remove(h, "full", SBX_REMOVE_RECURSIVE, NULL, &err), &err,
                     "file_remove full with SBX_REMOVE_RECURSIVE") &&
        do_stat(h, "full", &fi, &err) != SBX_E_NOT_FOUND)
        cf_fail(t, "full is still there after a recursive file_remove");
    if (!cf_failed(t))
        expect_status(t, sbx_file_remove(h, "nope", 0, NULL, &err), &err, SBX_E_NOT_FOUND,
                      "file_remove of", "nope");
    if (!cf_failed(t))
        expect_status(t, sbx_file_remove(h, "", SBX_REMOVE_RECURSIVE, NULL, &err), &err,
                      SBX_E_INVALID, "file_remove of the root", "");
}

void cf_case_fileops_remove_symlink_out(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    if (!h)
        return;
    char outside[64], script[600];
    snprintf(outside, sizeof outside, "/tmp/sbxcf-%.16s", t->token);
    snprintf(script, sizeof script,
             "mkdir -p %s/keep && printf precious > %s/keep/file && "
             "mkdir -p tree/sub && printf y > tree/sub/z && ln -s %s tree/sub/dirlink && "
             "ln -s %s/keep/file tree/filelink",
             outside, outside, outside, outside);
    char *out = cf_sh(t, h, script);
    if (!out)
        return;
    free(out);
    sbx_error err;
    struct sbx_file_info fi;
    if (cf_expect_ok(t, sbx_file_remove(h, "tree", SBX_REMOVE_RECURSIVE, NULL, &err), &err,
                     "recursive file_remove of a tree holding symlinks out") &&
        do_stat(h, "tree", &fi, &err) != SBX_E_NOT_FOUND)
        cf_fail(t, "tree is still there after a recursive file_remove");
    snprintf(script, sizeof script, "cat %s/keep/file; ls -a %s/keep | wc -l; rm -rf %s",
             outside, outside, outside);
    out = cf_sh_any(t, h, script);
    if (out && !cf_failed(t) && strncmp(out, "precious", 8)) {
        char q[200];
        cf_fail(t, "a recursive file_remove of a tree with a symlink to %s followed it: "
                   "outside the workspace is now %s",
                outside, cf_quote(out, strlen(out), q, sizeof q));
    } else if (out && !cf_failed(t) && strtol(out + 8, NULL, 10) != 3) {
        cf_fail(t, "a recursive file_remove changed %s/keep (ls -a counts %ld entries)",
                outside, strtol(out + 8, NULL, 10));
    }
    free(out);
}

void cf_case_fileops_rename(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    if (!h || !cf_write_text(t, h, "a", "one") || !cf_write_text(t, h, "b", "two"))
        return;
    sbx_error err;
    struct sbx_file_info fi;
    char *out = cf_sh(t, h, "ln -s a link");
    free(out);
    if (!out)
        return;
    if (!expect_status(t, sbx_file_rename(h, "a", "b", SBX_RENAME_NOREPLACE, NULL, &err), &err,
                       SBX_E_EXISTS, "file_rename with SBX_RENAME_NOREPLACE onto the existing",
                       "b") ||
        !cf_expect_file(t, h, "a", "one") || !cf_expect_file(t, h, "b", "two"))
        return;
    if (!cf_expect_ok(t, sbx_file_rename(h, "a", "c", SBX_RENAME_NOREPLACE, NULL, &err), &err,
                      "file_rename a c with SBX_RENAME_NOREPLACE") ||
        !cf_expect_file(t, h, "c", "one"))
        return;
    if (do_stat(h, "a", &fi, &err) != SBX_E_NOT_FOUND)
        return (void)cf_fail(t, "a is still there after file_rename a c");
    if (!cf_expect_ok(t, sbx_file_rename(h, "c", "b", 0, NULL, &err), &err,
                      "file_rename c b (replacing b)") ||
        !cf_expect_file(t, h, "b", "one"))
        return;
    /* a symlink is renamed as itself */
    if (cf_expect_ok(t, sbx_file_rename(h, "link", "link2", 0, NULL, &err), &err,
                     "file_rename of a symlink") &&
        cf_expect_ok(t, do_stat(h, "link2", &fi, &err), &err, "file_stat link2"))
        expect_info(t, "the renamed symlink", &fi, SBX_FILE_SYMLINK, UINT64_MAX, 0);
    if (!cf_failed(t))
        expect_status(t, sbx_file_rename(h, "nope", "x", 0, NULL, &err), &err, SBX_E_NOT_FOUND,
                      "file_rename of", "nope");
}

/* The escaping paths: through "..", absolute, and through a symlink that
 * the workspace holds and that leads out. */
static const char *const escapes[] = {"../x", "a/../../x", "/etc/passwd", "/tmp",
                                      "out/x", "out/in/y", NULL};

void cf_case_fileops_escape(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    if (!h)
        return;
    char outside[64], script[600];
    snprintf(outside, sizeof outside, "/tmp/sbxcf-%.16s", t->token);
    snprintf(script, sizeof script,
             "mkdir -p a %s/in && printf x > %s/x && printf secret > %s/outside-%.8s && "
             "ln -s %s out",
             outside, outside, outside, t->token, outside);
    char *out = cf_sh(t, h, script);
    if (!out)
        return;
    free(out);
    sbx_error err;
    struct sbx_file_info fi;
    struct listing l;
    for (size_t i = 0; escapes[i] && !cf_failed(t); i++) {
        const char *p = escapes[i];
        memset(&l, 0, sizeof l);
        expect_status(t, do_list(h, p, &l, &err), &err, SBX_E_INVALID, "file_list of", p);
        if (!cf_failed(t))
            expect_status(t, do_stat(h, p, &fi, &err), &err, SBX_E_INVALID, "file_stat of", p);
        if (!cf_failed(t))
            expect_status(t, sbx_file_mkdir(h, p, 0, SBX_MKDIR_PARENTS, NULL, &err), &err,
                          SBX_E_INVALID, "file_mkdir of", p);
        if (!cf_failed(t))
            expect_status(t, sbx_file_remove(h, p, SBX_REMOVE_RECURSIVE, NULL, &err), &err,
                          SBX_E_INVALID, "file_remove of", p);
        if (!cf_failed(t))
            expect_status(t, sbx_file_rename(h, p, "moved", 0, NULL, &err), &err,
                          SBX_E_INVALID, "file_rename from", p);
        if (!cf_failed(t))
            expect_status(t, sbx_file_rename(h, "a", p, 0, NULL, &err), &err, SBX_E_INVALID,
                          "file_rename to", p);
    }
    /* "out/." and "out/": refused as leading through the link, or cleaned to
     * the link itself; never the directory outside. */
    static const char *const through[] = {"out/.", "out/", NULL};
    for (size_t i = 0; through[i] && !cf_failed(t); i++) {
        int rc = do_stat(h, through[i], &fi, &err);
        if (rc == SBX_OK && fi.type != SBX_FILE_SYMLINK)
            cf_fail(t, "file_stat of \"%s\" (out is a symlink to %s) described a %s: it "
                       "followed the link out of the workspace",
                    through[i], outside, type_name(fi.type));
        else if (rc != SBX_OK && rc != SBX_E_INVALID)
            cf_fail(t, "file_stat of \"%s\" returned %s (%s); want SBX_E_INVALID or the "
                       "link itself",
                    through[i], cf_status_name(rc), err.message);
    }
    /* The symlink itself: listed as itself or refused, never the outside. */
    static const char *const links[] = {"out", "out/.", "out/", NULL};
    for (size_t i = 0; links[i] && !cf_failed(t); i++) {
        memset(&l, 0, sizeof l);
        int rc = do_list(h, links[i], &l, &err);
        char secret[32];
        snprintf(secret, sizeof secret, "outside-%.8s", t->token);
        if (rc == SBX_OK && (entry(&l, secret) || entry(&l, "x") || entry(&l, "in")))
            cf_fail(t, "file_list of \"%s\" (out is a symlink to %s) listed the directory "
                       "outside the workspace (%zu entries, %s among them)",
                    links[i], outside, l.n, secret);
        else if (rc != SBX_OK && rc != SBX_E_INVALID)
            cf_fail(t, "file_list of \"%s\" (out is a symlink) returned %s (%s); want "
                       "SBX_E_INVALID or the link itself",
                    links[i], cf_status_name(rc), err.message);
    }
    /* Nothing changed outside. */
    snprintf(script, sizeof script, "cd %s && ls -a | sort | tr '\\n' ' '; cat x; rm -rf %s",
             outside, outside);
    out = cf_sh_any(t, h, script);
    char want[96];
    snprintf(want, sizeof want, ". .. in outside-%.8s x x", t->token);
    if (out && !cf_failed(t) && strcmp(out, want)) {
        char q[200];
        cf_fail(t, "after the refused ops, %s holds %s; want %s", outside,
                cf_quote(out, strlen(out), q, sizeof q), want);
    }
    free(out);
}
