/*
 * test_skills.c - SKILLS on the docker provider through the plugin ABI:
 * tar, tar.gz and zip bundles built here with libarchive; hostile bundles
 * refused with nothing published or left in staging; skills restored from
 * their kept bundles at attach when the published files are damaged or
 * missing, and removed (not served) when the bundle is damaged too.
 */
#include "harness.h"
#include "../support/op_args.h"

#include <archive.h>
#include <archive_entry.h>
#include <criterion/criterion.h>

#include <dirent.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

TestSuite(docker_skills, .init = setup, .fini = teardown, .timeout = 180);

/* ---- bundles ---------------------------------------------------------- */

struct bundle {
    unsigned char *data;
    size_t len, cap;
    char sha[65];
};

static la_ssize_t b_write(struct archive *a, void *ud, const void *buf, size_t n)
{
    struct bundle *b = ud;
    (void)a;
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2;
        b->data = realloc(b->data, b->cap);
    }
    memcpy(b->data + b->len, buf, n);
    b->len += n;
    return (la_ssize_t)n;
}

/* entries: name, content (NULL: directory; "->x": symlink to x), mode */
struct ent {
    const char *name, *content;
    unsigned mode;
};

static void build(struct bundle *b, const char *format, const struct ent *ents)
{
    memset(b, 0, sizeof *b);
    struct archive *a = archive_write_new();
    if (!strcmp(format, "zip")) {
        archive_write_set_format_zip(a);
    } else {
        archive_write_set_format_pax_restricted(a);
        if (!strcmp(format, "tar.gz"))
            archive_write_add_filter_gzip(a);
    }
    cr_assert_eq(archive_write_open(a, b, NULL, b_write, NULL), ARCHIVE_OK);
    for (const struct ent *e = ents; e->name; e++) {
        struct archive_entry *ae = archive_entry_new();
        archive_entry_set_pathname(ae, e->name);
        archive_entry_set_mtime(ae, 1700000000, 0);
        if (!e->content) {
            archive_entry_set_filetype(ae, AE_IFDIR);
            archive_entry_set_perm(ae, 0755);
        } else if (!strncmp(e->content, "->", 2)) {
            archive_entry_set_filetype(ae, AE_IFLNK);
            archive_entry_set_symlink(ae, e->content + 2);
            archive_entry_set_perm(ae, 0777);
        } else {
            archive_entry_set_filetype(ae, AE_IFREG);
            archive_entry_set_perm(ae, e->mode ? e->mode : 0644);
            archive_entry_set_size(ae, (la_int64_t)strlen(e->content));
        }
        cr_assert_eq(archive_write_header(a, ae), ARCHIVE_OK, "%s", archive_error_string(a));
        if (e->content && strncmp(e->content, "->", 2))
            archive_write_data(a, e->content, strlen(e->content));
        archive_entry_free(ae);
    }
    cr_assert_eq(archive_write_close(a), ARCHIVE_OK);
    archive_write_free(a);
    unsigned char md[32];
    unsigned mdlen = 0;
    EVP_Digest(b->data, b->len, md, &mdlen, EVP_sha256(), NULL);
    for (unsigned i = 0; i < 32; i++)
        snprintf(b->sha + 2 * i, 3, "%02x", md[i]);
}

static int install(const char *name, const struct bundle *b, const char *format,
                   struct sbx_call *c)
{
    struct dh_mem m = {(const char *)b->data, b->len, 0};
    struct sbx_source src = dh_mem_source(&m);
    struct sbx_blob blob = {sizeof blob, &src, b->len, b->sha, format};
    return h.ops->skill_install(sb, c, name, &blob);
}

static const struct ent good[] = {
    {"SKILL.md", "# demo\n", 0},
    {"lib", NULL, 0},
    {"lib/tool.sh", "#!/bin/sh\necho tool-ok\n", 0755},
    {NULL, NULL, 0},
};

static void host_path(char *out, size_t cap, const char *sub)
{
    snprintf(out, cap, "%s/sbx-%.32s/%s", h.resource_dir, hash, sub);
}

static int entries(const char *dir)
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

/* Attach from a new instance (a restarted process) and return its handle. */
static sbx_sandbox *reattach(struct dh *again)
{
    dh_open(again, NULL, NULL);
    struct sbx_call c;
    dh_call_init(&c);
    sbx_sandbox *s2 = NULL;
    cr_assert_eq(again->ops->attach(again->state, &c, TEST_ATTACH_ARGS(key, ref), &s2), SBX_OK, "%s",
                 c.message);
    dh_call_free(&c);
    return s2;
}

/* ---- tests ------------------------------------------------------------ */

Test(docker_skills, every_format_installs_read_only)
{
    const char *formats[] = {"tar", "tar.gz", "zip"};
    struct sbx_call c;
    dh_call_init(&c);
    for (int i = 0; i < 3; i++) {
        struct bundle b;
        build(&b, formats[i], good);
        char name[32];
        snprintf(name, sizeof name, "demo-%d", i);
        cr_assert_eq(install(name, &b, formats[i], &c), SBX_OK, "%s: %s", formats[i],
                     c.message);
        char script[300];
        snprintf(script, sizeof script,
                 "cd /workspace/skills/%s && cat SKILL.md && sh lib/tool.sh && "
                 "stat -c %%a SKILL.md lib/tool.sh lib",
                 name);
        char *out = dh_sh(&h, sb, script);
        /* A zip read as a stream has no Unix modes (they live in its central
         * directory, at the end): its files come out 0644. */
        cr_expect_str_eq(out,
                         i == 2 ? "# demo\ntool-ok\n644\n644\n755\n"
                                : "# demo\ntool-ok\n644\n755\n755\n",
                         "%s", formats[i]);
        free(out);
        free(b.data);
    }
    char *out = dh_sh(&h, sb, "echo x 2>&1 > /workspace/skills/demo-0/SKILL.md; "
                              "rm -r /workspace/skills/demo-1 2>&1; id -u; true");
    cr_expect(strstr(out, "Read-only file system") != NULL, "%s", out);
    free(out);
    char st[600];
    host_path(st, sizeof st, "staging");
    cr_expect_eq(entries(st), 0, "staging is not empty after installs");
    dh_call_free(&c);
}

Test(docker_skills, hostile_bundles_refused_nothing_published)
{
    static const struct ent link[] = {{"ok", "fine\n", 0}, {"pw", "->/etc/passwd", 0},
                                      {NULL, NULL, 0}};
    static const struct ent dotdot[] = {{"ok", "fine\n", 0}, {"../../x", "bad\n", 0},
                                        {NULL, NULL, 0}};
    static const struct ent abs[] = {{"/etc/evil", "bad\n", 0}, {NULL, NULL, 0}};
    static const struct ent dup[] = {{"a", "1\n", 0}, {"a", "2\n", 0}, {NULL, NULL, 0}};
    const struct ent *sets[] = {link, dotdot, abs, dup};
    const char *needles[] = {"symbolic link", "..", "absolute", "twice"};
    struct sbx_call c;
    dh_call_init(&c);
    for (int i = 0; i < 4; i++) {
        struct bundle b;
        build(&b, "tar", sets[i]);
        cr_expect_eq(install("bad", &b, "tar", &c), SBX_E_INVALID, "set %d: %s", i,
                     c.message);
        cr_expect(strstr(c.message, needles[i]) != NULL, "set %d: %s", i, c.message);
        free(b.data);
    }
    /* a bundle that is not what was pinned */
    struct bundle b;
    build(&b, "tar", good);
    b.sha[0] = b.sha[0] == '0' ? '1' : '0';
    cr_expect_eq(install("bad", &b, "tar", &c), SBX_E_INVALID);
    cr_expect(strstr(c.message, "SHA-256 mismatch") != NULL, "%s", c.message);
    free(b.data);
    build(&b, "tar", good);
    cr_expect_eq(install("bad", &b, "rar", &c), SBX_E_INVALID);
    cr_expect_eq(install(".hidden", &b, "tar", &c), SBX_E_INVALID);
    cr_expect_eq(install("a/b", &b, "tar", &c), SBX_E_INVALID);
    /* not a zip although pinned as one */
    cr_expect_eq(install("bad", &b, "zip", &c), SBX_E_INVALID, "%s", c.message);
    free(b.data);
    char *out = dh_sh(&h, sb, "ls -A /workspace/skills; ls / /workspace | grep -x x; true");
    cr_expect_str_eq(out, "");
    free(out);
    char st[600], state[600];
    host_path(st, sizeof st, "staging");
    host_path(state, sizeof state, "skill-state");
    cr_expect_eq(entries(st), 0, "refused bundles left staging entries");
    cr_expect_eq(entries(state), 0, "refused bundles left state");
    dh_call_free(&c);
}

Test(docker_skills, damaged_or_missing_files_restored_at_attach)
{
    struct bundle b;
    build(&b, "tar.gz", good);
    struct sbx_call c;
    dh_call_init(&c);
    cr_assert_eq(install("demo", &b, "tar.gz", &c), SBX_OK, "%s", c.message);
    cr_assert_eq(install("other", &b, "tar.gz", &c), SBX_OK, "%s", c.message);
    char skills[600];
    host_path(skills, sizeof skills, "skills");
    /* damage on the host: changed content, a lost file, a lost skill, and
     * an unknown directory nobody installed */
    cr_assert_eq(dh_system("echo tampered > %s/demo/SKILL.md && rm %s/demo/lib/tool.sh "
                           "&& rm -r %s/other && mkdir %s/stray",
                           skills, skills, skills, skills),
                 0);
    h.ops->release(sb);
    struct dh again;
    sb = reattach(&again);
    char *out = dh_sh(&again, sb, "cd /workspace/skills && ls && cat demo/SKILL.md && "
                                  "demo/lib/tool.sh && other/lib/tool.sh");
    cr_expect_str_eq(out, "demo\nother\n# demo\ntool-ok\ntool-ok\n");
    free(out);
    again.ops->release(sb);
    sb = NULL;
    dh_close(&again);
    dh_call_free(&c);
    free(b.data);
    /* the teardown's destroy is done here (sb belonged to `again`) */
    struct sbx_call c2;
    dh_call_init(&c2);
    cr_expect_eq(h.ops->destroy(h.state, &c2, TEST_DESTROY_ARGS(key, ref)), SBX_OK, "%s", c2.message);
    dh_call_free(&c2);
}

Test(docker_skills, damaged_bundle_removes_the_skill)
{
    struct bundle b;
    build(&b, "tar", good);
    struct sbx_call c;
    dh_call_init(&c);
    cr_assert_eq(install("demo", &b, "tar", &c), SBX_OK, "%s", c.message);
    char skills[600], state[600];
    host_path(skills, sizeof skills, "skills");
    host_path(state, sizeof state, "skill-state");
    cr_assert_eq(dh_system("echo tampered > %s/demo/SKILL.md && "
                           "printf 'garbage' | dd of=%s/demo/bundle bs=1 seek=600 "
                           "conv=notrunc 2>/dev/null",
                           skills, state),
                 0);
    h.ops->release(sb);
    struct dh again;
    sb = reattach(&again);
    char *out = dh_sh(&again, sb, "ls -A /workspace/skills");
    cr_expect_str_eq(out, "", "a damaged skill is still served");
    free(out);
    cr_expect_eq(entries(state), 0);
    /* installing it again works */
    struct dh_mem m = {(const char *)b.data, b.len, 0};
    struct sbx_source src = dh_mem_source(&m);
    struct sbx_blob blob = {sizeof blob, &src, b.len, b.sha, "tar"};
    cr_expect_eq(again.ops->skill_install(sb, &c, "demo", &blob), SBX_OK, "%s", c.message);
    out = dh_sh(&again, sb, "cat /workspace/skills/demo/SKILL.md");
    cr_expect_str_eq(out, "# demo\n");
    free(out);
    again.ops->release(sb);
    sb = NULL;
    dh_close(&again);
    cr_expect_eq(h.ops->destroy(h.state, &c, TEST_DESTROY_ARGS(key, ref)), SBX_OK, "%s", c.message);
    dh_call_free(&c);
    free(b.data);
}
