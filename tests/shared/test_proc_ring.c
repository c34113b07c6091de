/*
 * test_proc_ring.c - sbxs_ring: the bounded replay buffer read by cursor.
 */
#include "proc_ring.h"

#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

Test(proc_ring, reads_what_was_appended_from_a_cursor)
{
    struct sbxs_ring r;
    sbxs_ring_init(&r, 16);
    cr_assert_eq(sbxs_ring_append(&r, "hello world", 11), 0);
    char out[32];
    uint64_t cur = 0, lost = 9;
    size_t n = sbxs_ring_read(&r, &cur, out, 5, &lost);
    cr_assert_eq(n, 5);
    cr_assert_eq(lost, 0);
    cr_assert_eq(cur, 5);
    cr_assert_eq(memcmp(out, "hello", 5), 0);
    n = sbxs_ring_read(&r, &cur, out, sizeof out, &lost);
    cr_assert_eq(n, 6);
    cr_assert_eq(memcmp(out, " world", 6), 0);
    cr_assert_eq(cur, 11);
    /* at the end: nothing, never a repeat */
    cr_assert_eq(sbxs_ring_read(&r, &cur, out, sizeof out, &lost), 0);
    cr_assert_eq(cur, 11);
    sbxs_ring_free(&r);
}

Test(proc_ring, a_cursor_that_fell_behind_counts_the_lost_bytes_exactly)
{
    struct sbxs_ring r;
    sbxs_ring_init(&r, 8);
    cr_assert_eq(sbxs_ring_append(&r, "0123456789", 10), 0); /* keeps 23456789 */
    cr_assert_eq(sbxs_ring_start(&r), 2);
    char out[16];
    uint64_t cur = 0, lost;
    size_t n = sbxs_ring_read(&r, &cur, out, sizeof out, &lost);
    cr_assert_eq(lost, 2);
    cr_assert_eq(n, 8);
    cr_assert_eq(memcmp(out, "23456789", 8), 0);
    cr_assert_eq(cur, 10);
    /* wraps around the buffer's end */
    cr_assert_eq(sbxs_ring_append(&r, "abc", 3), 0);
    cur = 9;
    n = sbxs_ring_read(&r, &cur, out, sizeof out, &lost);
    cr_assert_eq(lost, 0);
    cr_assert_eq(n, 4);
    cr_assert_eq(memcmp(out, "9abc", 4), 0);
    sbxs_ring_free(&r);
}

Test(proc_ring, an_append_larger_than_the_ring_keeps_its_tail)
{
    struct sbxs_ring r;
    sbxs_ring_init(&r, 4);
    cr_assert_eq(sbxs_ring_append(&r, "xy", 2), 0);
    cr_assert_eq(sbxs_ring_append(&r, "abcdefghij", 10), 0);
    cr_assert_eq(sbxs_ring_end(&r), 12);
    char out[8];
    uint64_t cur = 1, lost;
    size_t n = sbxs_ring_read(&r, &cur, out, sizeof out, &lost);
    cr_assert_eq(lost, 7);
    cr_assert_eq(n, 4);
    cr_assert_eq(memcmp(out, "ghij", 4), 0);
    sbxs_ring_free(&r);
}

Test(proc_ring, a_cursor_past_the_end_and_a_null_out)
{
    struct sbxs_ring r;
    sbxs_ring_init(&r, 4);
    uint64_t cur = 100, lost;
    cr_assert_eq(sbxs_ring_read(&r, &cur, NULL, 10, &lost), 0);
    cr_assert_eq(cur, 0);
    cr_assert_eq(sbxs_ring_append(&r, "abcdef", 6), 0);
    cur = 0;
    cr_assert_eq(sbxs_ring_pending(&r, cur), 4);
    cr_assert_eq(sbxs_ring_read(&r, &cur, NULL, 3, &lost), 3);
    cr_assert_eq(lost, 2);
    cr_assert_eq(cur, 5);
    sbxs_ring_free(&r);
}

/* Random appends and reads against a model: the invariant new cursor =
 * old + lost + copied holds, and the bytes are the stream's. */
Test(proc_ring, random_against_a_model)
{
    struct sbxs_ring r;
    sbxs_ring_init(&r, 97);
    srand(7);
    uint64_t total = 0, cur = 0;
    unsigned char chunk[300], out[300];
    for (int i = 0; i < 20000; i++) {
        size_t n = (size_t)(rand() % 250);
        for (size_t k = 0; k < n; k++)
            chunk[k] = (unsigned char)((total + k) * 31 % 251);
        cr_assert_eq(sbxs_ring_append(&r, chunk, n), 0);
        total += n;
        uint64_t old = cur, lost;
        size_t m = sbxs_ring_read(&r, &cur, out, (size_t)(rand() % 200), &lost);
        cr_assert_eq(cur, old + lost + m);
        cr_assert(lost == 0 || old + lost == (total > 97 ? total - 97 : 0));
        for (size_t k = 0; k < m; k++)
            cr_assert_eq(out[k], (unsigned char)((cur - m + k) * 31 % 251));
    }
    sbxs_ring_free(&r);
}
