/*
 * test_memory.c - memory stores in the session store: versions, heads,
 * reads at a version, conflicts that write nothing, limits naming the
 * path, racing writers and a writer killed mid-commit. Compiled once per
 * driver like test_store.c (STORE_TEST_DRIVER).
 */
#include "store/memory_trees.h"
#include "scratch_db.h"

#include <criterion/criterion.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef STORE_TEST_DRIVER
#error "define STORE_TEST_DRIVER"
#endif

static struct scratch_db db;
static struct sbx_store *store;

static void teardown(void)
{
    sbxh_store_close(store);
    store = NULL;
    scratch_destroy(&db);
}

TestSuite(memory, .fini = teardown, .timeout = 120);

static void fresh_store(void)
{
    char why[512] = "";
    int rc = scratch_create(STORE_TEST_DRIVER, &db, why, sizeof why);
    if (rc == SCRATCH_SKIP)
        cr_skip_test("%s", why);
    cr_assert_eq(rc, SCRATCH_OK, "scratch database: %s", why);
    sbx_error err = {0};
    cr_assert_eq(sbxh_store_open(STORE_TEST_DRIVER, db.target, &store, &err), SBX_OK,
                 "%s", err.message);
}

/* A change list with inline contents. */
struct inline_change {
    const char *path;
    int64_t base;
    const char *content; /* NULL: a removal */
    size_t len;          /* 0: strlen(content) */
};

static int load_inline(void *ud, size_t i, const void **data, size_t *len, sbx_error *err)
{
    (void)err;
    const struct inline_change *c = (const struct inline_change *)ud + i;
    *data = c->content;
    *len = c->len ? c->len : strlen(c->content);
    return SBX_OK;
}

static int commit(struct sbx_store *s, const char *author, struct inline_change *ch,
                  size_t n, int64_t *version, sbx_error *err)
{
    struct sbx_mstore_change changes[16];
    cr_assert_leq(n, 16);
    for (size_t i = 0; i < n; i++)
        changes[i] = (struct sbx_mstore_change){ch[i].path, ch[i].base, !ch[i].content};
    struct sbx_mstore_commit c = {.slug = "notes", .author = author, .changes = changes,
                                  .nchanges = n, .load = load_inline, .ud = ch};
    return sbxh_mstore_commit(s, &c, version, NULL, NULL, err);
}

/* What a read gives, as a string (the test's contents hold no NUL except
 * where said). */
struct buf {
    char data[4096];
    size_t len;
};

static int buf_write(void *ctx, const void *p, size_t n)
{
    struct buf *b = ctx;
    cr_assert_leq(b->len + n, sizeof b->data);
    memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

static int read_at(const char *path, int64_t at, struct buf *b, int64_t *version)
{
    memset(b, 0, sizeof *b);
    struct sbx_sink sink = SBX_SINK_INIT(b, buf_write);
    sbx_error err = {0};
    return sbxh_mstore_read(store, "notes", path, at, &sink, version, &err);
}

/* "path@version " for every head. */
static int collect(void *ud, const struct sbx_mstore_file *f, sbx_error *err)
{
    (void)err;
    char *out = ud;
    size_t l = strlen(out);
    snprintf(out + l, 1024 - l, "%s@%lld%s ", f->path, (long long)f->version,
             f->deleted ? "-" : "");
    return SBX_OK;
}

static const char *heads_at(int64_t at)
{
    static char out[1024];
    out[0] = '\0';
    sbx_error err = {0};
    cr_assert_eq(sbxh_mstore_heads(store, "notes", at, collect, out, &err), SBX_OK, "%s",
                 err.message);
    return out;
}

Test(memory, create_list_info_delete)
{
    fresh_store();
    sbx_error err = {0};
    cr_assert_eq(sbxh_mstore_create(store, "notes", NULL, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(sbxh_mstore_create(store, "notes", NULL, &err), SBX_E_EXISTS);
    cr_assert(strstr(err.message, "memory store 'notes' exists"), "%s", err.message);
    cr_assert_eq(sbxh_mstore_create(store, "Notes", NULL, &err), SBX_E_INVALID);
    cr_assert_eq(sbxh_mstore_create(store, "", NULL, &err), SBX_E_INVALID);
    char longslug[80];
    memset(longslug, 'a', 64);
    longslug[64] = '\0';
    cr_assert_eq(sbxh_mstore_create(store, longslug, NULL, &err), SBX_E_INVALID);
    struct sbx_mstore_info m;
    cr_assert_eq(sbxh_mstore_info(store, "notes", &m, &err), SBX_OK);
    cr_assert_eq(m.version, 0);
    cr_assert_eq(m.limits.max_file_bytes, SBX_MSTORE_DEFAULT_FILE_BYTES);
    cr_assert_eq(sbxh_mstore_delete(store, "notes", &err), SBX_OK, "%s", err.message);
    cr_assert_eq(sbxh_mstore_info(store, "notes", &m, &err), SBX_E_NOT_FOUND);
    cr_assert_eq(sbxh_mstore_delete(store, "notes", &err), SBX_E_NOT_FOUND);
}

Test(memory, commits_make_versions_and_heads)
{
    fresh_store();
    sbx_error err = {0};
    cr_assert_eq(sbxh_mstore_create(store, "notes", NULL, &err), SBX_OK);
    static const char binary[] = "a\0b\xff\n";
    struct inline_change c1[] = {{"a.md", 0, "first", 0},
                                 {"dir/b.bin", 0, binary, sizeof binary - 1}};
    int64_t v = 0;
    cr_assert_eq(commit(store, "session 1", c1, 2, &v, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(v, 1);
    cr_assert_str_eq(heads_at(0), "a.md@1 dir/b.bin@1 ");
    struct buf b;
    int64_t got = 0;
    cr_assert_eq(read_at("dir/b.bin", 0, &b, &got), SBX_OK);
    cr_assert_eq(b.len, sizeof binary - 1);
    cr_assert_eq(memcmp(b.data, binary, b.len), 0, "binary content changed");
    cr_assert_eq(got, 1);

    struct inline_change c2[] = {{"a.md", 1, "second", 0}, {"dir/b.bin", 1, NULL, 0}};
    cr_assert_eq(commit(store, "session 2", c2, 2, &v, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(v, 2);
    cr_assert_str_eq(heads_at(0), "a.md@2 ");
    cr_assert_str_eq(heads_at(1), "a.md@1 dir/b.bin@1 ");
    cr_assert_eq(read_at("a.md", 0, &b, NULL), SBX_OK);
    cr_assert_eq(b.len, 6);
    cr_assert_eq(memcmp(b.data, "second", 6), 0);
    cr_assert_eq(read_at("a.md", 1, &b, NULL), SBX_OK);
    cr_assert_eq(memcmp(b.data, "first", 5), 0);
    cr_assert_eq(read_at("dir/b.bin", 0, &b, NULL), SBX_E_NOT_FOUND);
    cr_assert_eq(read_at("dir/b.bin", 1, &b, NULL), SBX_OK);
    cr_assert_eq(read_at("a.md", 3, &b, NULL), SBX_E_NOT_FOUND);

    struct sbx_mstore_info m;
    cr_assert_eq(sbxh_mstore_info(store, "notes", &m, &err), SBX_OK);
    cr_assert_eq(m.files, 1);
    cr_assert_eq(m.bytes, 6);

    char log[1024] = "";
    cr_assert_eq(sbxh_mstore_log(store, "notes", NULL, collect, log, &err), SBX_OK);
    cr_assert_str_eq(log, "a.md@2 dir/b.bin@2- a.md@1 dir/b.bin@1 ");
    log[0] = '\0';
    cr_assert_eq(sbxh_mstore_log(store, "notes", "a.md", collect, log, &err), SBX_OK);
    cr_assert_str_eq(log, "a.md@2 a.md@1 ");

    /* Removing what is not there is refused. */
    struct inline_change c3[] = {{"nope", SBX_MSTORE_ANY_BASE, NULL, 0}};
    cr_assert_eq(commit(store, "x", c3, 1, &v, &err), SBX_E_NOT_FOUND);
    cr_assert(strstr(err.message, "no file \"nope\" to remove"), "%s", err.message);
}

Test(memory, a_conflict_writes_nothing_and_names_the_paths)
{
    fresh_store();
    sbx_error err = {0};
    cr_assert_eq(sbxh_mstore_create(store, "notes", NULL, &err), SBX_OK);
    struct inline_change c1[] = {{"shared.md", 0, "base", 0}};
    cr_assert_eq(commit(store, "s1", c1, 1, NULL, &err), SBX_OK);
    /* Two sessions start from version 1; the first commit wins. */
    struct inline_change win[] = {{"shared.md", 1, "winner", 0}};
    cr_assert_eq(commit(store, "s1", win, 1, NULL, &err), SBX_OK);
    struct inline_change lose[] = {{"other.md", 0, "would be new", 0},
                                   {"shared.md", 1, "loser", 0}};
    struct sbx_mstore_change changes[2] = {{"other.md", 0, false}, {"shared.md", 1, false}};
    struct sbx_mstore_commit c = {.slug = "notes", .author = "s2", .changes = changes,
                                  .nchanges = 2, .load = load_inline, .ud = lose};
    size_t *bad = NULL, nbad = 0;
    int64_t v = 0;
    cr_assert_eq(sbxh_mstore_commit(store, &c, &v, &bad, &nbad, &err), SBX_E_EXISTS);
    cr_assert(strstr(err.message, "conflict: \"shared.md\" changed"), "%s", err.message);
    cr_assert_eq(nbad, 1);
    cr_assert_eq(bad[0], 1);
    free(bad);
    struct buf b;
    cr_assert_eq(read_at("shared.md", 0, &b, NULL), SBX_OK);
    cr_assert_eq(memcmp(b.data, "winner", 6), 0, "a conflicting commit overwrote");
    cr_assert_eq(read_at("other.md", 0, &b, NULL), SBX_E_NOT_FOUND,
                 "part of a refused commit was written");
    struct sbx_mstore_info m;
    cr_assert_eq(sbxh_mstore_info(store, "notes", &m, &err), SBX_OK);
    cr_assert_eq(m.version, 2, "a refused commit used a version");
    /* A create races the same way: base 0 on a path that exists now. */
    struct inline_change late[] = {{"shared.md", 0, "late", 0}};
    cr_assert_eq(commit(store, "s3", late, 1, NULL, &err), SBX_E_EXISTS);
}

Test(memory, limits_name_the_path_and_removals_free_space)
{
    fresh_store();
    sbx_error err = {0};
    struct sbx_mstore_limits lim = {.max_file_bytes = 8, .max_files = 2,
                                    .max_total_bytes = 12};
    cr_assert_eq(sbxh_mstore_create(store, "notes", &lim, &err), SBX_OK);
    struct inline_change big[] = {{"big.txt", 0, "123456789", 0}};
    cr_assert_eq(commit(store, "s", big, 1, NULL, &err), SBX_E_INVALID);
    cr_assert(strstr(err.message, "\"big.txt\": the file is too large (limit 8)"), "%s",
              err.message);
    struct inline_change two[] = {{"a", 0, "12345678", 0}, {"b", 0, "1234", 0}};
    cr_assert_eq(commit(store, "s", two, 2, NULL, &err), SBX_OK, "%s", err.message);
    struct inline_change third[] = {{"c", 0, "1", 0}};
    cr_assert_eq(commit(store, "s", third, 1, NULL, &err), SBX_E_INVALID);
    cr_assert(strstr(err.message, "\"c\": one file too many"), "%s", err.message);
    struct inline_change grow[] = {{"b", 1, "12345", 0}};
    cr_assert_eq(commit(store, "s", grow, 1, NULL, &err), SBX_E_INVALID);
    cr_assert(strstr(err.message, "\"b\": the store would grow"), "%s", err.message);
    /* Removing a in the same commit makes room for c. */
    struct inline_change swap[] = {{"c", 0, "12345678", 0}, {"a", 1, NULL, 0}};
    cr_assert_eq(commit(store, "s", swap, 2, NULL, &err), SBX_OK, "%s", err.message);
    cr_assert_str_eq(heads_at(0), "b@1 c@2 ");
}

Test(memory, bad_paths_are_refused_by_name)
{
    static const char *const bad[] = {"", "/abs", "a//b", "a/../b", "..", "./x", "a/",
                                      "bad\xff" "utf8", "ctl\x01", "over\xc0\xaf"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        sbx_error err = {0};
        cr_assert_eq(sbxh_mstore_check_path(bad[i], &err), SBX_E_INVALID, "accepted %s",
                     bad[i]);
        cr_assert(strstr(err.message, "memory path"), "%s", err.message);
        cr_assert_null(strchr(err.message, '\x01'), "raw control byte echoed");
    }
    sbx_error err = {0};
    cr_assert_eq(sbxh_mstore_check_path("notes/ü-日本.md", &err), SBX_OK, "%s",
                 err.message);
    cr_assert_eq(sbxh_mstore_check_path("a", &err), SBX_OK);
}

#define RACERS 6

Test(memory, racing_writers_make_exactly_one_winner)
{
    fresh_store();
    sbx_error err = {0};
    cr_assert_eq(sbxh_mstore_create(store, "notes", NULL, &err), SBX_OK);
    int go[2];
    cr_assert_eq(pipe(go), 0);
    pid_t pids[RACERS];
    for (int i = 0; i < RACERS; i++) {
        pids[i] = fork();
        cr_assert_neq(pids[i], -1);
        if (pids[i] == 0) {
            close(go[1]);
            char ch;
            while (read(go[0], &ch, 1) > 0)
                ;
            struct sbx_store *s = NULL;
            sbx_error e = {0};
            if (sbxh_store_open(STORE_TEST_DRIVER, db.target, &s, &e) != SBX_OK)
                _exit(3);
            char content[32];
            snprintf(content, sizeof content, "racer %d", i);
            struct inline_change c[] = {{"same.md", 0, content, 0}};
            int rc;
            /* A busy store is transient: try again, as a worker would. */
            do
                rc = commit(s, content, c, 1, NULL, &e);
            while (rc == SBX_E_UNAVAILABLE);
            sbxh_store_close(s);
            _exit(rc == SBX_OK ? 0 : rc == SBX_E_EXISTS ? 1 : 2);
        }
    }
    close(go[0]);
    close(go[1]);
    int won = 0, lost = 0;
    for (int i = 0; i < RACERS; i++) {
        int st = 0;
        cr_assert_eq(waitpid(pids[i], &st, 0), pids[i]);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) <= 1, "racer %d: status %d", i, st);
        won += WEXITSTATUS(st) == 0;
        lost += WEXITSTATUS(st) == 1;
    }
    cr_assert_eq(won, 1, "%d winners", won);
    cr_assert_eq(lost, RACERS - 1);
    cr_assert_str_eq(heads_at(0), "same.md@1 ");
}

/* A loader that announces itself, then hangs: the writer is killed there. */
static int load_then_hang(void *ud, size_t i, const void **data, size_t *len,
                          sbx_error *err)
{
    (void)err;
    int fd = *(int *)ud;
    if (i == 1) {
        ssize_t w = write(fd, "x", 1);
        (void)w;
        pause();
    }
    *data = "content";
    *len = 7;
    return SBX_OK;
}

Test(memory, a_writer_killed_mid_commit_leaves_no_trace)
{
    fresh_store();
    sbx_error err = {0};
    cr_assert_eq(sbxh_mstore_create(store, "notes", NULL, &err), SBX_OK);
    int ready[2];
    cr_assert_eq(pipe(ready), 0);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        close(ready[0]);
        struct sbx_store *s = NULL;
        sbx_error e = {0};
        if (sbxh_store_open(STORE_TEST_DRIVER, db.target, &s, &e) != SBX_OK)
            _exit(3);
        struct sbx_mstore_change ch[2] = {{"one", 0, false}, {"two", 0, false}};
        struct sbx_mstore_commit c = {.slug = "notes", .author = "doomed", .changes = ch,
                                      .nchanges = 2, .load = load_then_hang,
                                      .ud = &ready[1]};
        sbxh_mstore_commit(s, &c, NULL, NULL, NULL, &e);
        _exit(4);
    }
    close(ready[1]);
    char c;
    cr_assert_eq(read(ready[0], &c, 1), 1, "the writer never reached its second file");
    /* The first file's version is written inside the open transaction. */
    kill(pid, SIGKILL);
    int st;
    waitpid(pid, &st, 0);
    close(ready[0]);
    struct sbx_mstore_info m;
    int rc;
    do /* PostgreSQL notices the dead connection and rolls back */
        rc = sbxh_mstore_info(store, "notes", &m, &err);
    while (rc == SBX_E_UNAVAILABLE);
    cr_assert_eq(rc, SBX_OK, "%s", err.message);
    cr_assert_eq(m.version, 0, "a killed commit left its version");
    cr_assert_str_eq(heads_at(0), "");
    /* And the store takes the next commit. */
    struct inline_change next[] = {{"one", 0, "after", 0}};
    do
        rc = commit(store, "next", next, 1, NULL, &err);
    while (rc == SBX_E_UNAVAILABLE);
    cr_assert_eq(rc, SBX_OK, "%s", err.message);
}
