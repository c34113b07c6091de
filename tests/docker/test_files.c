/*
 * test_files.c - read_file/write_file through the archive endpoints:
 * binary round trips, nested parents, overwrite, modes, not-found, and
 * refusal of every path that leaves the workspace; sources that announce
 * their length (streamed tar) and sources that lie about it.
 */
#include "harness.h"

#include <criterion/criterion.h>

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

TestSuite(docker_files, .init = setup, .fini = teardown, .timeout = 180);

Test(docker_files, binary_round_trip_with_nested_parents)
{
    size_t n = 5 * 1024 * 1024 + 3;
    unsigned char *data = malloc(n);
    for (size_t i = 0; i < n; i++)
        data[i] = (unsigned char)((i * 131) ^ (i >> 9));
    data[0] = 0;
    data[n - 1] = 0;
    struct sbx_call c;
    dh_call_init(&c);
    cr_assert_eq(dh_write(&h, sb, "deep/er/still/blob.bin", data, n, 0, &c), SBX_OK, "%s",
                 c.message);
    struct dh_buf out = {0};
    cr_assert_eq(dh_read(&h, sb, "deep/er/still/blob.bin", &out, &c), SBX_OK, "%s",
                 c.message);
    cr_expect_eq(out.len, n);
    cr_expect(out.len == n && memcmp(out.data, data, n) == 0, "content differs");
    dh_buf_free(&out);
    /* the shell sees the same file, with mode 0644 */
    char *sum = dh_sh(&h, sb, "stat -c '%s %a' deep/er/still/blob.bin; ls -a deep/er/still");
    char want[128];
    snprintf(want, sizeof want, "%zu 644\n.\n..\nblob.bin\n", n);
    cr_expect_str_eq(sum, want, "no temporary file may be left behind");
    free(sum);
    free(data);
    dh_call_free(&c);
}

Test(docker_files, overwrite_empty_and_modes)
{
    struct sbx_call c;
    dh_call_init(&c);
    cr_assert_eq(dh_write(&h, sb, "f.txt", "first version\n", 14, 0, &c), SBX_OK);
    cr_assert_eq(dh_write(&h, sb, "f.txt", "2\n", 2, 0755, &c), SBX_OK);
    struct dh_buf out = {0};
    cr_assert_eq(dh_read(&h, sb, "f.txt", &out, &c), SBX_OK);
    cr_expect_str_eq(out.data, "2\n");
    dh_buf_free(&out);
    char *m = dh_sh(&h, sb, "stat -c %a f.txt; ./f.txt; echo $?");
    cr_expect(strncmp(m, "755\n", 4) == 0, "%s", m);
    free(m);
    /* setuid, setgid and sticky bits are refused, as local does; the file
     * keeps its content and mode */
    const unsigned special[] = {04755, 02755, 01777};
    for (int i = 0; i < 3; i++)
        cr_expect_eq(dh_write(&h, sb, "f.txt", "x", 1, special[i], &c), SBX_E_INVALID,
                     "mode %o", special[i]);
    m = dh_sh(&h, sb, "stat -c %a f.txt; cat f.txt");
    cr_expect_str_eq(m, "755\n2\n");
    free(m);
    cr_assert_eq(dh_write(&h, sb, "empty", "", 0, 0, &c), SBX_OK);
    cr_assert_eq(dh_read(&h, sb, "empty", &out, &c), SBX_OK);
    cr_expect_eq(out.len, 0);
    /* a file written by a command is readable, one in a subdir too */
    free(dh_sh(&h, sb, "mkdir -p made && printf 'by shell' > made/x"));
    cr_assert_eq(dh_read(&h, sb, "./made//x", &out, &c), SBX_OK, "%s", c.message);
    cr_expect_str_eq(out.data, "by shell");
    dh_buf_free(&out);
    dh_call_free(&c);
}

Test(docker_files, missing_files_and_directories)
{
    struct sbx_call c;
    dh_call_init(&c);
    struct dh_buf out = {0};
    cr_expect_eq(dh_read(&h, sb, "nope.txt", &out, &c), SBX_E_NOT_FOUND, "%s", c.message);
    cr_expect(strstr(c.message, "nope.txt"), "%s", c.message);
    cr_expect_eq(dh_read(&h, sb, "no/such/dir/f", &out, &c), SBX_E_NOT_FOUND);
    free(dh_sh(&h, sb, "mkdir -p adir; echo x > plain"));
    cr_expect_eq(dh_read(&h, sb, "adir", &out, &c), SBX_E_INVALID, "%s", c.message);
    cr_expect_eq(dh_write(&h, sb, "adir", "x", 1, 0, &c), SBX_E_INVALID, "%s", c.message);
    cr_expect_eq(dh_write(&h, sb, "plain/sub", "x", 1, 0, &c), SBX_E_INVALID, "%s",
                 c.message);
    cr_expect_eq(dh_read(&h, sb, "", &out, &c), SBX_E_INVALID);
    cr_expect_eq(out.len, 0);
    dh_call_free(&c);
}

Test(docker_files, escapes_are_refused_and_nothing_lands_outside)
{
    free(dh_sh(&h, sb, "ln -s / escape; ln -s /etc/passwd pw; ln -s .. up; "
                       "ln -s /tmp/outside-target victim; mkdir -p real; "
                       "echo inner > real/f; ln -s real inlink; ln -s /workspace/real abs"));
    struct sbx_call c;
    dh_call_init(&c);
    const char *reads[] = {"../etc/passwd", "/etc/passwd", "a/../../x", "escape/etc/passwd",
                           "pw", "up/etc/passwd", NULL};
    for (int i = 0; reads[i]; i++) {
        struct dh_buf out = {0};
        int rc = dh_read(&h, sb, reads[i], &out, &c);
        cr_expect_eq(rc, SBX_E_INVALID, "read %s gave %s: %s", reads[i],
                     sbx_strerror(rc), c.message);
        cr_expect_eq(out.len, 0, "read %s delivered bytes", reads[i]);
        dh_buf_free(&out);
    }
    const char *writes[] = {"../x", "/tmp/x", "escape/tmp/x", "up/x", "victim", NULL};
    for (int i = 0; writes[i]; i++) {
        int rc = dh_write(&h, sb, writes[i], "bad", 3, 0, &c);
        cr_expect_eq(rc, SBX_E_INVALID, "write %s gave %s: %s", writes[i],
                     sbx_strerror(rc), c.message);
    }
    char *found = dh_sh(&h, sb, "ls /tmp; ls -a / | grep -x x; true");
    cr_expect_str_eq(found, "", "files appeared outside the workspace: %s", found);
    free(found);
    /* links that stay inside are followed */
    struct dh_buf out = {0};
    cr_expect_eq(dh_read(&h, sb, "inlink/f", &out, &c), SBX_OK, "%s", c.message);
    cr_expect_str_eq(out.data ? out.data : "", "inner\n");
    dh_buf_free(&out);
    cr_expect_eq(dh_read(&h, sb, "abs/f", &out, &c), SBX_OK, "%s", c.message);
    dh_buf_free(&out);
    cr_expect_eq(dh_write(&h, sb, "inlink/g", "via link", 8, 0, &c), SBX_OK, "%s",
                 c.message);
    char *g = dh_sh(&h, sb, "cat real/g");
    cr_expect_str_eq(g, "via link");
    free(g);
    dh_call_free(&c);
}

Test(docker_files, outputs_directory_shared_and_confined)
{
    struct sbx_call c;
    dh_call_init(&c);
    cr_assert_eq(dh_write(&h, sb, "/mnt/session/outputs/r/report.txt", "tool\n", 5, 0,
                          &c),
                 SBX_OK, "%s", c.message);
    char *seen = dh_sh(&h, sb, "cat /mnt/session/outputs/r/report.txt; "
                               "echo shell > /mnt/session/outputs/s.txt; "
                               "ln -s /etc /mnt/session/outputs/etc; "
                               "ln -s /workspace /mnt/session/outputs/ws; "
                               "ln -s r /mnt/session/outputs/rr");
    cr_expect_str_eq(seen, "tool\n");
    free(seen);
    struct dh_buf out = {0};
    cr_expect_eq(dh_read(&h, sb, "/mnt/session/outputs/s.txt", &out, &c), SBX_OK, "%s",
                 c.message);
    cr_expect_str_eq(out.data ? out.data : "", "shell\n");
    dh_buf_free(&out);
    /* a link inside the outputs directory is followed */
    cr_expect_eq(dh_read(&h, sb, "/mnt/session/outputs/rr/report.txt", &out, &c), SBX_OK,
                 "%s", c.message);
    dh_buf_free(&out);
    /* leaving the outputs directory is refused, into the workspace too */
    const char *bad[] = {"/mnt/session/outputs/etc/passwd", "/mnt/session/outputs/ws/x",
                         "/mnt/session/outputs/../uploads/x",
                         "/mnt/session/outputsx/y", "/mnt/session/outputs", NULL};
    for (int i = 0; bad[i]; i++) {
        cr_expect_eq(dh_read(&h, sb, bad[i], &out, &c), SBX_E_INVALID, "read %s: %s",
                     bad[i], c.message);
        cr_expect_eq(out.len, 0);
        cr_expect_eq(dh_write(&h, sb, bad[i], "x", 1, 0, &c), SBX_E_INVALID,
                     "write %s: %s", bad[i], c.message);
    }
    char *found = dh_sh(&h, sb, "ls /etc | grep -x x; ls /workspace | grep -x x; true");
    cr_expect_str_eq(found, "");
    free(found);
    dh_call_free(&c);
}

/* A source that delivers `good` bytes, then fails. */
struct failing {
    size_t good, pos;
    struct sbx_call *call;
};

static long failing_read(void *ctx, void *buf, size_t cap)
{
    struct failing *f = ctx;
    if (f->pos >= f->good) {
        snprintf(f->call->message, sizeof f->call->message, "test source broke");
        f->call->status = SBX_E_IO;
        return -1;
    }
    size_t n = f->good - f->pos < cap ? f->good - f->pos : cap;
    memset(buf, 'z', n);
    f->pos += n;
    return (long)n;
}

Test(docker_files, failing_source_publishes_nothing)
{
    struct sbx_call c;
    dh_call_init(&c);
    cr_assert_eq(dh_write(&h, sb, "keep/me.txt", "old\n", 4, 0, &c), SBX_OK, "%s",
                 c.message);
    /* small (read ahead whole) and large (streamed) sources */
    size_t sizes[] = {1000, 3 * 1024 * 1024};
    for (int i = 0; i < 2; i++) {
        struct failing f = {sizes[i], 0, &c};
        struct sbx_source src = {.size = sizeof(struct sbx_source), .ctx = &f, .read = failing_read};
        int rc = h.ops->write_file(sb, &c, "keep/me.txt", &src, 0);
        cr_expect_eq(rc, SBX_E_IO, "size %zu: %s", sizes[i], c.message);
        cr_expect_str_eq(c.message, "test source broke");
        char *out = dh_sh(&h, sb, "cat keep/me.txt; ls -A keep");
        cr_expect_str_eq(out, "old\nme.txt\n", "size %zu: a partial file was "
                                                 "published or left behind",
                         sizes[i]);
        free(out);
    }
    dh_call_free(&c);
}

static int stop_after_one(void *ctx, const void *p, size_t n)
{
    int *calls = ctx;
    (void)p;
    (void)n;
    return ++*calls >= 2 ? SBX_E_CANCELLED : 0;
}

Test(docker_files, sink_failure_stops_the_read)
{
    size_t n = 4 * 1024 * 1024;
    char *data = calloc(1, n);
    struct sbx_call c;
    dh_call_init(&c);
    cr_assert_eq(dh_write(&h, sb, "big", data, n, 0, &c), SBX_OK);
    int calls = 0;
    struct sbx_sink s = SBX_SINK_INIT(&calls, stop_after_one);
    cr_expect_eq(h.ops->read_file(sb, &c, "big", &s), SBX_E_CANCELLED, "%s", c.message);
    cr_expect_eq(calls, 2);
    free(data);
    dh_call_free(&c);
}

/* A memory source that announces `announced` bytes through length() and
 * delivers `len` (a lying source when they differ). It records whether the
 * provider asked for the length and read past the announced end. */
struct sized {
    const unsigned char *data;
    size_t len, pos;
    int64_t announced;
    int length_calls;
};

static long sized_read(void *ctx, void *buf, size_t cap)
{
    struct sized *s = ctx;
    size_t n = s->len - s->pos < cap ? s->len - s->pos : cap;
    memcpy(buf, s->data + s->pos, n);
    s->pos += n;
    return (long)n;
}

static int64_t sized_length(void *ctx)
{
    struct sized *s = ctx;
    s->length_calls++;
    return s->announced - (int64_t)s->pos;
}

/* Bytes with long runs of NULs and every byte value. */
static unsigned char *nul_heavy(size_t n)
{
    unsigned char *d = calloc(1, n);
    for (size_t i = 0; i < n; i++)
        if ((i / 4096) % 3 == 1)
            d[i] = (unsigned char)(i * 7 + (i >> 12));
    return d;
}

Test(docker_files, known_length_streams_a_binary_file)
{
    size_t n = 6 * 1024 * 1024 + 517; /* not a multiple of the tar block */
    unsigned char *data = nul_heavy(n);
    struct sbx_call c;
    dh_call_init(&c);
    struct sized s = {data, n, 0, (int64_t)n, 0};
    struct sbx_source src = {.size = sizeof(struct sbx_source), .ctx = &s, .read = sized_read, .length = sized_length};
    cr_assert_eq(h.ops->write_file(sb, &c, "k/nested/blob.bin", &src, 0640), SBX_OK,
                 "%s", c.message);
    cr_expect_geq(s.length_calls, 1, "the provider did not use the announced length");
    cr_expect_eq(s.pos, n);
    struct dh_buf out = {0};
    cr_assert_eq(dh_read(&h, sb, "k/nested/blob.bin", &out, &c), SBX_OK, "%s", c.message);
    cr_expect_eq(out.len, n);
    cr_expect(out.len == n && memcmp(out.data, data, n) == 0, "content differs");
    dh_buf_free(&out);
    char *seen = dh_sh(&h, sb, "stat -c '%s %a' k/nested/blob.bin; ls -A k/nested");
    char want[128];
    snprintf(want, sizeof want, "%zu 640\nblob.bin\n", n);
    cr_expect_str_eq(seen, want, "wrong size or mode, or a temporary file was left");
    free(seen);

    /* an empty file and an overwrite, announced too */
    struct sized e = {data, 0, 0, 0, 0};
    struct sbx_source esrc = {.size = sizeof(struct sbx_source), .ctx = &e, .read = sized_read, .length = sized_length};
    cr_assert_eq(h.ops->write_file(sb, &c, "k/nested/blob.bin", &esrc, 0), SBX_OK, "%s",
                 c.message);
    seen = dh_sh(&h, sb, "stat -c '%s %a' k/nested/blob.bin; ls -A k/nested");
    cr_expect_str_eq(seen, "0 644\nblob.bin\n");
    free(seen);
    free(data);
    dh_call_free(&c);
}

Test(docker_files, lying_length_fails_and_leaves_nothing)
{
    size_t n = 3 * 1024 * 1024;
    unsigned char *data = nul_heavy(n + 4096);
    struct sbx_call c;
    dh_call_init(&c);
    cr_assert_eq(dh_write(&h, sb, "keep/me.txt", "old\n", 4, 0, &c), SBX_OK, "%s",
                 c.message);
    struct {
        size_t deliver;
        int64_t announce;
        const char *why;
    } cases[] = {
        {n - 1000, (int64_t)n, "ended after"},      /* fewer than announced */
        {0, (int64_t)n, "ended after 0 of"},        /* nothing at all */
        {n + 1, (int64_t)n, "more than"},            /* one byte more */
        {n, 1024, "more than"},                      /* far more */
        {10, 0, "more than"},                        /* announced empty */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct sized s = {data, cases[i].deliver, 0, cases[i].announce, 0};
        struct sbx_source src = {.size = sizeof(struct sbx_source), .ctx = &s, .read = sized_read, .length = sized_length};
        /* over an existing file, and into a directory that does not exist */
        int rc = h.ops->write_file(sb, &c, "keep/me.txt", &src, 0);
        cr_expect(rc == SBX_E_IO || rc == SBX_E_INVALID, "case %zu gave %s: %s", i,
                  sbx_strerror(rc), c.message);
        cr_expect(strstr(c.message, cases[i].why), "case %zu: %s", i, c.message);
        cr_expect(strstr(c.message, "keep/me.txt"), "case %zu: %s", i, c.message);
        struct sized s2 = {data, cases[i].deliver, 0, cases[i].announce, 0};
        struct sbx_source src2 = {.size = sizeof(struct sbx_source), .ctx = &s2, .read = sized_read, .length = sized_length};
        rc = h.ops->write_file(sb, &c, "fresh/dir/new.bin", &src2, 0);
        cr_expect(rc == SBX_E_IO || rc == SBX_E_INVALID, "case %zu gave %s: %s", i,
                  sbx_strerror(rc), c.message);
        char *out = dh_sh(&h, sb, "cat keep/me.txt; ls -A keep; "
                                  "ls -A fresh/dir 2>/dev/null; true");
        cr_expect_str_eq(out, "old\nme.txt\n",
                         "case %zu: a partial file was published or left behind", i);
        free(out);
    }
    free(data);
    dh_call_free(&c);
}

/* A source with a length that fails after `good` bytes. */
static int64_t failing_length(void *ctx)
{
    struct failing *f = ctx;
    return (int64_t)(2 * f->good) - (int64_t)f->pos;
}

Test(docker_files, failing_source_with_length_publishes_nothing)
{
    struct sbx_call c;
    dh_call_init(&c);
    cr_assert_eq(dh_write(&h, sb, "keep/me.txt", "old\n", 4, 0, &c), SBX_OK, "%s",
                 c.message);
    struct failing f = {2 * 1024 * 1024, 0, &c};
    struct sbx_source src = {.size = sizeof(struct sbx_source), .ctx = &f, .read = failing_read, .length = failing_length};
    cr_expect_eq(h.ops->write_file(sb, &c, "keep/me.txt", &src, 0), SBX_E_IO, "%s",
                 c.message);
    cr_expect_str_eq(c.message, "test source broke");
    char *out = dh_sh(&h, sb, "cat keep/me.txt; ls -A keep");
    cr_expect_str_eq(out, "old\nme.txt\n");
    free(out);
    dh_call_free(&c);
}

Test(docker_files, unknown_length_still_round_trips)
{
    /* no length(): read ahead, then through the exec (large) or from
     * memory (small) */
    size_t sizes[] = {1024 * 1024, 1024 * 1024 + 1, 3 * 1024 * 1024 + 7, 100};
    struct sbx_call c;
    dh_call_init(&c);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        unsigned char *data = nul_heavy(n);
        struct sized s = {data, n, 0, -1, 0};
        struct sbx_source src = {.size = sizeof(struct sbx_source), .ctx = &s, .read = sized_read};
        cr_assert_eq(h.ops->write_file(sb, &c, "u/blob.bin", &src, 0), SBX_OK, "%s",
                     c.message);
        struct dh_buf out = {0};
        cr_assert_eq(dh_read(&h, sb, "u/blob.bin", &out, &c), SBX_OK, "%s", c.message);
        cr_expect(out.len == n && memcmp(out.data, data, n) == 0,
                  "size %zu: content differs (%zu bytes back)", n, out.len);
        dh_buf_free(&out);
        char *seen = dh_sh(&h, sb, "ls -A u");
        cr_expect_str_eq(seen, "blob.bin\n", "size %zu", n);
        free(seen);
        /* a length() that does not know is the same as none */
        s.pos = 0;
        src.length = sized_length;
        cr_assert_eq(h.ops->write_file(sb, &c, "u/blob2.bin", &src, 0), SBX_OK, "%s",
                     c.message);
        cr_assert_eq(dh_read(&h, sb, "u/blob2.bin", &out, &c), SBX_OK, "%s", c.message);
        cr_expect(out.len == n && memcmp(out.data, data, n) == 0, "size %zu", n);
        dh_buf_free(&out);
        free(dh_sh(&h, sb, "rm u/blob2.bin"));
        free(data);
    }
    dh_call_free(&c);
}

Test(docker_files, writes_without_the_digest_check_still_round_trip)
{
    struct dh h2;
    static const char *const extra[] = {"verify_writes", "false", NULL};
    dh_open(&h2, NULL, extra);
    sbx_sandbox *s2 = NULL;
    char msg[2048];
    cr_assert_eq(dh_attach(&h2, key, ref, &s2, msg, sizeof msg), SBX_OK, "%s", msg);
    size_t n = 2 * 1024 * 1024 + 11;
    unsigned char *data = nul_heavy(n);
    struct sbx_call c;
    dh_call_init(&c);
    struct sized s = {data, n, 0, -1, 0};
    struct sbx_source src = {.size = sizeof(struct sbx_source), .ctx = &s, .read = sized_read};
    cr_assert_eq(h2.ops->write_file(s2, &c, "nv/blob.bin", &src, 0600), SBX_OK, "%s",
                 c.message);
    struct dh_buf out = {0};
    cr_assert_eq(dh_read(&h, sb, "nv/blob.bin", &out, &c), SBX_OK, "%s", c.message);
    cr_expect(out.len == n && memcmp(out.data, data, n) == 0, "content differs");
    dh_buf_free(&out);
    char *seen = dh_sh(&h, sb, "stat -c %a nv/blob.bin; ls -A nv");
    cr_expect_str_eq(seen, "600\nblob.bin\n");
    free(seen);
    free(data);
    h2.ops->release(s2);
    dh_close(&h2);
    dh_call_free(&c);
}
