/*
 * test_manifest_parse.c - manifests validated before anything runs: every
 * malformed or dangerous manifest is refused with its file, line and
 * entry; sources are confined to the base directory or a grant.
 */
#include "config/manifest_internal.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char base[64];

static void setup(void)
{
    snprintf(base, sizeof base, "/tmp/sbx-manifest-XXXXXX");
    cr_assert_not_null(mkdtemp(base));
    char p[256];
    snprintf(p, sizeof p, "%s/src", base);
    cr_assert_eq(mkdir(p, 0755), 0);
    snprintf(p, sizeof p, "%s/src/a.txt", base);
    FILE *f = fopen(p, "w");
    cr_assert_not_null(f);
    fputs("a\n", f);
    fclose(f);
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(manifest, .init = setup, .fini = teardown);

static sbx_manifest *parse_ok(const char *text)
{
    sbx_manifest *m = NULL;
    sbx_error err = {0};
    int rc = sbx_manifest_parse(NULL, text, strlen(text), "m.yaml", base, &m, &err);
    cr_assert_eq(rc, SBX_OK, "%s", err.message);
    return m;
}

/* The message of a refused manifest. */
static const char *refused(const char *text)
{
    static sbx_error err;
    memset(&err, 0, sizeof err);
    sbx_manifest *m = NULL;
    int rc = sbx_manifest_parse(NULL, text, strlen(text), "m.yaml", base, &m, &err);
    cr_assert_eq(rc, SBX_E_INVALID, "accepted (%d): %s", rc, text);
    cr_assert_null(m);
    return err.message;
}

#define REFUSED(text, want)                                                   \
    do {                                                                      \
        const char *msg_ = refused(text);                                     \
        cr_assert(strstr(msg_, want), "expected \"%s\" in: %s", want, msg_);  \
    } while (0)

Test(manifest, a_complete_manifest_is_read)
{
    sbx_manifest *m = parse_ok("version: 1\n"
                               "environment: {A: one, B_2: two}\n"
                               "entries:\n"
                               "  - {path: notes/readme.md, type: file, content: \"hi\\n\", mode: 0600}\n"
                               "  - {path: bin, type: file, encoding: base64, content: AAH/}\n"
                               "  - {path: notes, type: dir}\n"
                               "  - {path: copy.txt, type: local_file, source: src/a.txt}\n"
                               "  - {path: tree, type: local_dir, source: src}\n"
                               "  - {path: repo, type: git_repo, url: https://example.org/r.git, ref: v1}\n");
    cr_assert_eq(m->nentries, 6);
    cr_assert_eq(m->entries[0].mode, 0600);
    cr_assert_eq(m->entries[0].content_len, 3);
    cr_assert_eq(m->entries[1].content_len, 3);
    cr_assert_eq(memcmp(m->entries[1].content, "\x00\x01\xff", 3), 0);
    char want[256];
    snprintf(want, sizeof want, "%s/src/a.txt", base);
    char real[4096];
    cr_assert_not_null(realpath(want, real));
    cr_assert_str_eq(m->entries[3].resolved, real);
    const char *const *env = sbx_manifest_environment(m);
    cr_assert_str_eq(env[0], "A=one");
    cr_assert_str_eq(env[1], "B_2=two");
    cr_assert_null(env[2]);
    cr_assert_eq(strlen(sbx_manifest_digest(m)), 64);
    cr_assert_not(sbx_manifest_has_users(m));
    sbx_manifest_free(m);
}

Test(manifest, json_is_read_too_and_the_digest_follows_the_content)
{
    const char *json = "{\"version\": 1, \"entries\": [{\"path\": \"a\", \"type\": \"file\", "
                       "\"content\": \"x\"}]}";
    sbx_manifest *a = parse_ok(json);
    sbx_manifest *b = parse_ok(json);
    sbx_manifest *c = parse_ok("{\"version\": 1, \"entries\": [{\"path\": \"a\", "
                               "\"type\": \"file\", \"content\": \"y\"}]}");
    cr_assert_str_eq(sbx_manifest_digest(a), sbx_manifest_digest(b));
    cr_assert_str_neq(sbx_manifest_digest(a), sbx_manifest_digest(c));
    sbx_manifest_free(a);
    sbx_manifest_free(b);
    sbx_manifest_free(c);
}

Test(manifest, paths_are_workspace_relative)
{
    REFUSED("version: 1\nentries:\n  - {path: /etc/x, type: dir}\n",
            "m.yaml:3: entry /etc/x: the path is absolute");
    REFUSED("version: 1\nentries:\n  - {path: a/../../x, type: dir}\n",
            "m.yaml:3: entry a/../../x: the path has a \"..\" component");
    REFUSED("version: 1\nentries:\n  - {path: 'a//b', type: dir}\n", "empty or \".\"");
    REFUSED("version: 1\nentries:\n  - {path: 'a/', type: dir}\n", "ends with '/'");
    REFUSED("version: 1\nentries:\n  - {path: \"a\\x01b\", type: dir}\n",
            "entry a\\x01b: the path holds a control character");
    REFUSED("version: 1\nentries:\n  - {path: '', type: dir}\n", "the path is empty");
}

Test(manifest, duplicates_and_overlaps_name_both_lines)
{
    REFUSED("version: 1\nentries:\n  - {path: a, type: dir}\n  - {path: a, type: dir}\n",
            "m.yaml:4: entry a: the path is given twice (also at line 3)");
    REFUSED("version: 1\nentries:\n"
            "  - {path: t, type: local_dir, source: src}\n"
            "  - {path: t/a.txt, type: file, content: x}\n",
            "m.yaml:4: entry t/a.txt: lies inside entry t (line 3), which is not a dir");
    /* Inside a dir is fine; a sibling with a longer name is not inside. */
    sbx_manifest *m = parse_ok("version: 1\nentries:\n"
                               "  - {path: d, type: dir}\n"
                               "  - {path: d/f, type: file, content: x}\n"
                               "  - {path: f, type: file, content: x}\n"
                               "  - {path: f-2, type: file, content: x}\n"
                               "  - {path: f.d/x, type: file, content: x}\n");
    sbx_manifest_free(m);
}

Test(manifest, sources_stay_under_the_base_or_a_grant)
{
    REFUSED("version: 1\nentries:\n  - {path: p, type: local_file, source: /etc/passwd}\n",
            "entry p: source \"/etc/passwd\" is outside");
    REFUSED("version: 1\nentries:\n  - {path: p, type: local_file, source: ../../etc/passwd}\n",
            "is outside");
    /* A symlink inside the base that leads out is judged by its target. */
    char link[256];
    snprintf(link, sizeof link, "%s/out", base);
    cr_assert_eq(symlink("/etc", link), 0);
    REFUSED("version: 1\nentries:\n  - {path: p, type: local_dir, source: out}\n",
            "is outside");
    REFUSED("version: 1\nentries:\n  - {path: p, type: local_file, source: src}\n",
            "source \"src\" is not a regular file");
    REFUSED("version: 1\nentries:\n  - {path: p, type: local_dir, source: nope}\n",
            "source \"nope\" cannot be read");
    REFUSED("version: 1\nentries:\n  - {path: r, type: git_repo, url: /etc}\n",
            "is outside");
    REFUSED("version: 1\nentries:\n  - {path: r, type: git_repo, url: x, ref: --upload-pack=sh}\n",
            "ref must be a branch");
    /* A grant (from trusted configuration) allows a directory outside. */
    const char *grants[] = {"/etc", NULL};
    struct sbx_manifest m = {.name = strdup("m.yaml")};
    const char *text = "version: 1\nentries:\n  - {path: p, type: local_file, source: /etc/hostname}\n";
    sbx_error err = {0};
    cr_assert_eq(sbxh_manifest_parse_text(&m, text, strlen(text), NULL, &err), SBX_OK);
    int rc = sbxh_manifest_check(&m, base, grants, &err);
    if (access("/etc/hostname", R_OK) == 0)
        cr_assert_eq(rc, SBX_OK, "%s", err.message);
    sbxh_manifest_clear(&m);
}

/* The OpenAI Agents SDK's shape: entries as a mapping of path: entry, src,
 * executable, permissions, a dir's children, git_repo as repo and host. */
Test(manifest, the_sdk_shape_is_read)
{
    sbx_manifest *m = parse_ok("version: 1\n"
                               "entries:\n"
                               "  run.sh: {type: file, content: \"#!/bin/sh\\n\", executable: true}\n"
                               "  copy.txt: {type: local_file, src: src/a.txt}\n"
                               "  tree: {type: local_dir, src: src, permissions: -rwxr-x---}\n"
                               "  out:\n"
                               "    type: dir\n"
                               "    permissions: {owner: 7, group: 5, other: 5, directory: true}\n"
                               "    children:\n"
                               "      notes.md: {type: file, content: hi, permissions: 384}\n"
                               "      deep: {type: dir, children: {x: {type: file, content: x}}}\n"
                               "  lib: {type: git_repo, repo: example/lib, ref: v1, description: d}\n"
                               "  lib2: {type: git_repo, host: git.example.org, repo: a/b}\n");
    cr_assert_eq(m->nentries, 9);
    struct {
        const char *path;
        int type, mode;
    } want[] = {{"run.sh", MF_FILE, 0755},      {"copy.txt", MF_LOCAL_FILE, -1},
                {"tree", MF_LOCAL_DIR, 0750},   {"out", MF_DIR, 0755},
                {"out/notes.md", MF_FILE, 0600}, {"out/deep", MF_DIR, -1},
                {"out/deep/x", MF_FILE, -1},    {"lib", MF_GIT_REPO, -1},
                {"lib2", MF_GIT_REPO, -1}};
    for (size_t i = 0; i < 9; i++) {
        const struct manifest_entry *e = NULL;
        for (size_t j = 0; j < m->nentries; j++)
            if (!strcmp(m->entries[j].path, want[i].path))
                e = &m->entries[j];
        cr_assert(e, "no entry %s", want[i].path);
        cr_expect_eq(e->type, want[i].type, "%s", want[i].path);
        cr_expect_eq(e->mode, want[i].mode, "%s: mode %o", want[i].path, e->mode);
        if (!strcmp(e->path, "lib"))
            cr_expect_str_eq(e->url, "https://github.com/example/lib");
        if (!strcmp(e->path, "lib2"))
            cr_expect_str_eq(e->url, "https://git.example.org/a/b");
        if (e->type == MF_LOCAL_FILE)
            cr_expect(e->resolved && strstr(e->resolved, "/src/a.txt"));
    }
    sbx_manifest_free(m);
}

/* One workspace written in both shapes, in another order, as JSON: one
 * digest. Any difference in what would be written: another. */
Test(manifest, equivalent_manifests_have_one_digest)
{
    const char *list = "version: 1\n"
                       "environment: {B: two, A: one}\n"
                       "entries:\n"
                       "  - {path: run.sh, type: file, content: \"echo hi\\n\", mode: 0755}\n"
                       "  - {path: out, type: dir}\n"
                       "  - {path: out/n.txt, type: file, content: n, mode: 0600}\n"
                       "  - {path: copy.txt, type: local_file, source: src/a.txt}\n"
                       "  - {path: lib, type: git_repo, url: https://github.com/example/lib}\n";
    const char *sdk = "# the SDK's shape\n"
                      "version: 1\n"
                      "entries:\n"
                      "  copy.txt: {type: local_file, src: src/a.txt}\n"
                      "  lib: {type: git_repo, repo: example/lib, description: a library}\n"
                      "  out: {type: dir, children: {n.txt: {type: file, content: n, "
                      "permissions: -rw-------}}}\n"
                      "  run.sh: {type: file, content: \"echo hi\\n\", executable: true}\n"
                      "environment: {A: one, B: two}\n";
    const char *json = "{\"version\":1,\"environment\":{\"A\":\"one\",\"B\":\"two\"},"
                       "\"entries\":{\"run.sh\":{\"type\":\"file\",\"content\":\"echo hi\\n\","
                       "\"permissions\":493},\"out\":{\"type\":\"dir\"},\"out/n.txt\":{\"type\":"
                       "\"file\",\"content\":\"n\",\"permissions\":{\"owner\":6}},\"copy.txt\":"
                       "{\"type\":\"local_file\",\"source\":\"src/a.txt\"},\"lib\":{\"type\":"
                       "\"git_repo\",\"url\":\"https://github.com/example/lib\"}}}";
    sbx_manifest *a = parse_ok(list), *b = parse_ok(sdk), *c = parse_ok(json);
    cr_expect_str_eq(sbx_manifest_digest(a), sbx_manifest_digest(b));
    cr_expect_str_eq(sbx_manifest_digest(a), sbx_manifest_digest(c));
    /* the text digests differ: only the meaning counts */
    cr_expect_str_neq(a->text_digest, b->text_digest);
    sbx_manifest_free(b);
    sbx_manifest_free(c);
    const char *differ[] = {
        /* a mode */
        "version: 1\nenvironment: {A: one, B: two}\nentries:\n"
        "  run.sh: {type: file, content: \"echo hi\\n\"}\n  out: {type: dir}\n"
        "  out/n.txt: {type: file, content: n, mode: 0600}\n"
        "  copy.txt: {type: local_file, src: src/a.txt}\n"
        "  lib: {type: git_repo, repo: example/lib}\n",
        /* an environment value */
        "version: 1\nenvironment: {A: one, B: three}\nentries:\n"
        "  run.sh: {type: file, content: \"echo hi\\n\", executable: true}\n  out: {type: dir}\n"
        "  out/n.txt: {type: file, content: n, mode: 0600}\n"
        "  copy.txt: {type: local_file, src: src/a.txt}\n"
        "  lib: {type: git_repo, repo: example/lib}\n",
        /* a ref */
        "version: 1\nenvironment: {A: one, B: two}\nentries:\n"
        "  run.sh: {type: file, content: \"echo hi\\n\", executable: true}\n  out: {type: dir}\n"
        "  out/n.txt: {type: file, content: n, mode: 0600}\n"
        "  copy.txt: {type: local_file, src: src/a.txt}\n"
        "  lib: {type: git_repo, repo: example/lib, ref: v2}\n",
        /* content */
        "version: 1\nenvironment: {A: one, B: two}\nentries:\n"
        "  run.sh: {type: file, content: \"echo ho\\n\", executable: true}\n  out: {type: dir}\n"
        "  out/n.txt: {type: file, content: n, mode: 0600}\n"
        "  copy.txt: {type: local_file, src: src/a.txt}\n"
        "  lib: {type: git_repo, repo: example/lib}\n",
    };
    for (size_t i = 0; i < sizeof differ / sizeof differ[0]; i++) {
        sbx_manifest *d = parse_ok(differ[i]);
        cr_expect_str_neq(sbx_manifest_digest(a), sbx_manifest_digest(d), "variant %zu", i);
        sbx_manifest_free(d);
    }
    sbx_manifest_free(a);
}

Test(manifest, sdk_shape_errors_name_the_line)
{
    REFUSED("version: 1\nentries:\n  a: {path: b, type: dir}\n",
            "m.yaml:3: entry a: path: an entry of a mapping is named by its key");
    REFUSED("version: 1\nentries:\n  a: {type: local_file, src: src/a.txt, source: src/a.txt}\n",
            "give source or src, not both");
    REFUSED("version: 1\nentries:\n  a: {type: file, content: x, mode: 0644, executable: true}\n",
            "give one of mode, permissions and executable");
    REFUSED("version: 1\nentries:\n  a: {type: dir, executable: true}\n",
            "executable is for files");
    REFUSED("version: 1\nentries:\n  a: {type: file, content: x, executable: yes}\n",
            "executable: expected true or false");
    REFUSED("version: 1\nentries:\n  a: {type: file, content: x, permissions: -rwsr-xr-x}\n",
            "set-id and sticky bits are not written");
    REFUSED("version: 1\nentries:\n  a: {type: file, content: x, permissions: 2541}\n",
            "has set-id or sticky bits");
    REFUSED("version: 1\nentries:\n  a: {type: file, content: x, permissions: {owner: 8}}\n",
            "owner: expected a number from 0 to 7");
    REFUSED("version: 1\nentries:\n  a: {type: file, content: x, permissions: {owner: 0}}\n",
            "permissions give mode 0");
    REFUSED("version: 1\nentries:\n  a: {type: file, content: x, permissions: {sticky: true}}\n",
            "sticky is not written");
    REFUSED("version: 1\nentries:\n  a: {type: file, content: x, ephemeral: true}\n",
            "ephemeral entries are not supported");
    REFUSED("version: 1\nentries:\n  a: {type: dir, children: {b/c: {type: dir}}}\n",
            "children: \"b/c\" is not a name");
    REFUSED("version: 1\nentries:\n  a: {type: dir, children: {..: {type: dir}}}\n",
            "is not a name");
    REFUSED("version: 1\nentries:\n  a: {type: dir, children: [x]}\n",
            "children: expected a mapping");
    REFUSED("version: 1\nentries:\n  a: {type: git_repo, repo: x/y, url: https://e.org/r}\n",
            "give url or repo, not both");
    REFUSED("version: 1\nentries:\n  a: {type: git_repo, repo: ../../etc}\n",
            "is not owner/name");
    REFUSED("version: 1\nentries:\n  a: {type: git_repo, repo: x/y, host: 'evil/x'}\n",
            "is not owner/name");
    REFUSED("version: 1\nentries:\n  a: {type: file, children: {}}\n",
            "unknown key \"children\" for type file");
    REFUSED("version: 1\nentries:\n  a: b\n", "m.yaml:3: entry a: expected a mapping with type");
    REFUSED("version: 1\nentries: x\n",
            "entries: expected a list of entries or a mapping of path: entry");
    /* the checks of the list shape apply: escaping paths, overlaps */
    REFUSED("version: 1\nentries:\n  ../x: {type: dir}\n", "m.yaml:3");
    REFUSED("version: 1\nentries:\n  a: {type: dir, children: {b: {type: dir}}}\n  a/b: {type: dir}\n",
            "a/b");
}

Test(manifest, shape_errors_name_the_line)
{
    REFUSED("entries: []\n", "version: missing");
    REFUSED("version: 2\n", "m.yaml:1: version");
    REFUSED("version: 1\nentries:\n  - {path: a, type: fifo}\n",
            "m.yaml:3: entry a: type must be file, dir");
    REFUSED("version: 1\nentries:\n  - {path: a, type: file}\n", "a file needs content");
    REFUSED("version: 1\nentries:\n  - {path: a, type: dir, content: x}\n",
            "unknown key \"content\" for type dir");
    REFUSED("version: 1\nentries:\n  - {path: a, type: file, content: x, mode: 0}\n",
            "mode: expected a number from 1 to 511");
    REFUSED("version: 1\nentries:\n  - {path: a, type: file, content: x, mode: 0999}\n",
            "mode");
    REFUSED("version: 1\nentries:\n  - {path: a, type: file, encoding: base64, content: '!!!'}\n",
            "content is not valid base64");
    REFUSED("version: 1\nentries:\n  - {path: a, type: dir, path: b}\n",
            "key \"path\" is given twice");
    REFUSED("version: 1\nenvironment: {'1X': y}\n", "is not a variable name");
    REFUSED("version: 1\nsurprise: true\n", "m.yaml:2: unknown key \"surprise\"");
    REFUSED("version: 1\nentries: [ {path: a\n", "m.yaml:");
    /* Aliases would let a small file expand into a huge manifest. */
    REFUSED("version: 1\nentries:\n  - &e {path: a, type: dir}\n  - *e\n",
            "aliases are not allowed");
}

Test(manifest, users_groups_and_run_as_are_checked)
{
    sbx_manifest *m = parse_ok("version: 1\n"
                               "groups: [{name: dev, gid: 2000}]\n"
                               "users: [{name: agent, uid: 1000, groups: [dev]}]\n"
                               "run_as: agent\n"
                               "entries:\n  - {path: a, type: file, content: x, group: dev}\n");
    cr_assert(sbx_manifest_has_users(m));
    sbx_manifest_free(m);
    REFUSED("version: 1\nrun_as: ghost\n", "run_as: user \"ghost\" is not declared");
    REFUSED("version: 1\nusers: [{name: a, groups: [nope]}]\n",
            "group \"nope\" is not declared");
    REFUSED("version: 1\nusers: [{name: root}]\n", "and not root");
    REFUSED("version: 1\nusers: [{name: a}, {name: a}]\n", "declared twice");
    REFUSED("version: 1\nentries:\n  - {path: a, type: dir, group: staff}\n",
            "its group is not declared");
}

/* ---- parsing cost: depth and node count are bounded while parsing ------ */

#include <sys/resource.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* 200 KB of "[[[..." kept libyaml's scanner busy for 25 s (quadratic in
 * the depth) before anything was looked at. */
Test(manifest, deep_nesting_is_refused_at_once_naming_the_limit)
{
    size_t n = 200 * 1024;
    char *text = malloc(n + 32);
    cr_assert_not_null(text);
    size_t k = (size_t)sprintf(text, "version: 1\nentries: ");
    memset(text + k, '[', n);
    text[k + n] = '\0';
    double t0 = now_s();
    const char *msg = refused(text);
    double took = now_s() - t0;
    cr_assert(strstr(msg, "m.yaml:2: nested deeper than 32 levels"), "%s", msg);
    cr_assert_lt(took, 0.5, "took %.2f s", took);
    free(text);
}

/* 16 MiB of "[]," took 1.2 GB before the entry limit was looked at. */
Test(manifest, a_huge_flat_sequence_is_refused_by_node_count_in_bounded_memory)
{
    size_t n = 16 * 1024 * 1024 - 64;
    char *text = malloc(n + 64);
    cr_assert_not_null(text);
    size_t k = (size_t)sprintf(text, "version: 1\nentries: [");
    while (k + 3 < n) {
        memcpy(text + k, "[],", 3);
        k += 3;
    }
    text[k++] = ']';
    text[k] = '\0';
    struct rusage before, after;
    getrusage(RUSAGE_SELF, &before);
    double t0 = now_s();
    sbx_error err = {0};
    sbx_manifest *m = NULL;
    int rc = sbx_manifest_parse(NULL, text, k, "m.yaml", base, &m, &err);
    double took = now_s() - t0;
    getrusage(RUSAGE_SELF, &after);
    cr_assert_eq(rc, SBX_E_INVALID, "%d: %s", rc, err.message);
    cr_assert(strstr(err.message, "more than 100000 YAML nodes"), "%s", err.message);
    cr_assert_lt(took, 2.0, "took %.2f s", took);
    /* ru_maxrss is in KiB: the text is 16 MiB; 100000 nodes are a few more */
    long grew = after.ru_maxrss - before.ru_maxrss;
    cr_assert_lt(grew, 200 * 1024, "the parse grew the process by %ld KiB", grew);
    free(text);
}

/* Parsing checks its cancellation token. */
Test(manifest, a_fired_cancel_stops_the_parse)
{
    size_t n = 100000;
    char *text = malloc(n * 2 + 64);
    cr_assert_not_null(text);
    size_t k = (size_t)sprintf(text, "version: 1\nx: [");
    for (size_t i = 0; i < n / 3; i++)
        k += (size_t)sprintf(text + k, "a,");
    sprintf(text + k, "a]\n");
    sbx_cancel *c;
    cr_assert_eq(sbx_cancel_new(&c), SBX_OK);
    sbx_cancel_fire(c);
    struct sbx_manifest m = {.name = strdup("m.yaml")};
    sbx_error err = {0};
    cr_assert_eq(sbxh_manifest_parse_text(&m, text, strlen(text), c, &err), SBX_E_CANCELLED,
                 "%s", err.message);
    cr_assert(strstr(err.message, "cancelled"), "%s", err.message);
    sbxh_manifest_clear(&m);
    sbx_cancel_free(c);
    free(text);
}

Test(manifest, base64_padding_only_at_the_end)
{
    REFUSED("version: 1\nentries:\n  - {path: bin, type: file, encoding: base64, "
            "content: 'QQ==QQ=='}\n",
            "m.yaml:3: entry bin: content is not valid base64");
    REFUSED("version: 1\nentries:\n  - {path: bin, type: file, encoding: base64, "
            "content: 'QUJD=EFC'}\n",
            "entry bin: content is not valid base64");
    REFUSED("version: 1\nentries:\n  - {path: bin, type: file, encoding: base64, "
            "content: 'QU=D'}\n",
            "entry bin: content is not valid base64");
    sbx_manifest *m = parse_ok("version: 1\nentries:\n  - {path: bin, type: file, encoding: "
                               "base64, content: 'QUJDRA=='}\n");
    cr_assert_eq(m->entries[0].content_len, 4);
    cr_assert_eq(memcmp(m->entries[0].content, "ABCD", 4), 0);
    sbx_manifest_free(m);
}

/* ---- git_repo: a host repository may not make git read another one ----- */

static void sh_in_base(const char *cmd)
{
    char full[2048];
    snprintf(full, sizeof full, "cd '%s' && %s", base, cmd);
    cr_assert_eq(system(full), 0, "%s", full);
}

/* "other" is a repository outside what the manifest may read; "r" one
 * the manifest ships, changed by `how`. */
static void crafted_repo(const char *how)
{
    sh_in_base("git init -q --bare r && mkdir -p other && git init -q other/victim");
    sh_in_base(how);
}

#define REPO_REFUSED(how, want)                                                \
    do {                                                                       \
        crafted_repo(how);                                                     \
        REFUSED("version: 1\nentries:\n  - {path: r, type: git_repo, url: r}\n", want); \
        sh_in_base("rm -rf r other");                                          \
    } while (0)

Test(manifest, a_host_repository_that_points_elsewhere_is_refused_naming_the_file)
{
    REPO_REFUSED("printf '/etc/victim/.git\\n' > r/commondir",
                 "entry r: git repository r: commondir names another repository");
    REPO_REFUSED("printf '/etc/victim/.git/objects\\n' > r/objects/info/alternates",
                 "objects/info/alternates names another repository");
    REPO_REFUSED("mkdir -p r/info && : > r/info/grafts", "info/grafts names another");
    REPO_REFUSED("printf '[include]\\n\\tpath = /etc/gitconfig\\n' >> r/config",
                 "git repository r: config mentions \"include\"");
    REPO_REFUSED("printf '[extensions]\\n\\tpartialClone = o\\n' >> r/config",
                 "config mentions \"partialclone\"");
    REPO_REFUSED("ln -s /etc/passwd r/objects/pack/pack-1.pack",
                 "objects/pack/pack-1.pack is a symlink");
    REPO_REFUSED("rm -rf r/refs && ln -s ../other/victim/.git/refs r/refs",
                 "git repository r: refs is a symlink");
    /* a work tree whose .git is a gitfile or a symlink */
    REPO_REFUSED("rm -rf r && mkdir r && printf 'gitdir: %s\\n' \"$PWD/other/victim/.git\" > r/.git",
                 "git repository r: .git is not a directory (a gitfile");
    REPO_REFUSED("rm -rf r && mkdir r && ln -s ../other/victim/.git r/.git",
                 "git repository r: .git is a symlink");
    REPO_REFUSED("rm -rf r && mkdir r", "is not a git directory");
    /* a plain repository, bare or not, is fine */
    sh_in_base("git init -q --bare r && git init -q w");
    sbx_manifest *m = parse_ok("version: 1\nentries:\n  - {path: r, type: git_repo, url: r}\n"
                               "  - {path: w, type: git_repo, url: w}\n");
    sbx_manifest_free(m);
}
