/* The bounded capture sink keeps head and tail and counts the rest. */
#include <criterion/criterion.h>
#include <sbx/sbx.h>

#include <stdlib.h>
#include <string.h>

static void feed(struct sbx_sink *s, const char *text)
{
    cr_assert_eq(s->write(s->ctx, text, strlen(text)), SBX_OK);
}

Test(capture, small_output_kept_whole)
{
    sbx_capture c;
    sbx_capture_init(&c, 8, 8);
    struct sbx_sink s = sbx_capture_sink(&c);
    feed(&s, "hello");
    feed(&s, " you");
    char *t = sbx_capture_text(&c);
    cr_assert_str_eq(t, "hello you");
    cr_assert_not(c.truncated);
    cr_assert_eq(c.total, 9);
    free(t);
    sbx_capture_free(&c);
}

Test(capture, fits_head_plus_tail_exactly_not_truncated)
{
    sbx_capture c;
    sbx_capture_init(&c, 4, 4);
    struct sbx_sink s = sbx_capture_sink(&c);
    feed(&s, "abcdefgh");
    char *t = sbx_capture_text(&c);
    cr_assert_str_eq(t, "abcdefgh");
    cr_assert_not(c.truncated);
    free(t);
    sbx_capture_free(&c);
}

Test(capture, overflow_keeps_head_and_tail_with_marker)
{
    sbx_capture c;
    sbx_capture_init(&c, 4, 4);
    struct sbx_sink s = sbx_capture_sink(&c);
    /* Written in odd chunks so the ring wraps mid-chunk. */
    feed(&s, "abc");
    feed(&s, "defghij");
    feed(&s, "kl");
    feed(&s, "mnopqrstu");
    char *t = sbx_capture_text(&c);
    cr_assert(c.truncated);
    cr_assert_eq(c.total, 21);
    cr_assert_str_eq(t, "abcd\n[... 13 bytes truncated ...]\nrstu");
    free(t);
    sbx_capture_free(&c);
}

Test(capture, memory_is_bounded_for_large_output)
{
    sbx_capture c;
    sbx_capture_init(&c, 1024, 1024);
    struct sbx_sink s = sbx_capture_sink(&c);
    char chunk[65536];
    memset(chunk, 'x', sizeof chunk);
    for (int i = 0; i < 1024; i++) /* 64 MiB */
        cr_assert_eq(s.write(s.ctx, chunk, sizeof chunk), SBX_OK);
    cr_assert_eq(c.total, (uint64_t)64 << 20);
    cr_assert_eq(c.head_len, 1024);
    cr_assert_eq(c.tail_len, 1024);
    cr_assert(c.truncated);
    sbx_capture_free(&c);
}

Test(capture, zero_tail_keeps_only_head)
{
    sbx_capture c;
    sbx_capture_init(&c, 3, 0);
    struct sbx_sink s = sbx_capture_sink(&c);
    feed(&s, "abcdef");
    char *t = sbx_capture_text(&c);
    cr_assert(c.truncated);
    cr_assert_str_eq(t, "abc\n[... 3 bytes truncated ...]\n");
    free(t);
    sbx_capture_free(&c);
}
