/*
 * test_conformance_child.c - the machinery of case isolation on its own:
 * records sent over the report pipe arrive whole and in order (also when
 * the sender dies right after), and every way a child can end (returning,
 * exit, a signal, a hang past the deadline) is told apart and described.
 */
#include "cf_internal.h"

#include <criterion/criterion.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_SEEN 16

struct seen {
    size_t n;
    int type[MAX_SEEN];
    char a[MAX_SEEN][CF_RECORD_MAX];
    char b[MAX_SEEN][CF_RECORD_MAX];
};

static struct seen seen;

static void collect(void *ud, const struct cf_record *rec)
{
    struct seen *s = ud;
    if (s->n == MAX_SEEN)
        return;
    s->type[s->n] = rec->type;
    snprintf(s->a[s->n], sizeof s->a[s->n], "%s", rec->a);
    snprintf(s->b[s->n], sizeof s->b[s->n], "%s", rec->b);
    s->n++;
}

/* What a child does, chosen by its argument. */
enum how { RETURN, EXIT_3, SEGV_AFTER_SEND, HANG, BIG_RECORDS };

static void body(void *arg, int fd)
{
    enum how h = *(const enum how *)arg;
    cf_channel_send(fd, CF_REC_SANDBOX, "key/1", "ref-1");
    cf_channel_send(fd, CF_REC_FAILURE, "first failure", "");
    switch (h) {
    case RETURN:
        cf_channel_send(fd, CF_REC_RESULT, "0", "");
        return;
    case EXIT_3:
        _exit(3); /* not exit(): the test framework's handlers stay out */
    case SEGV_AFTER_SEND:
        signal(SIGSEGV, SIG_DFL);
        raise(SIGSEGV);
        return;
    case HANG: {
        struct timespec ts = {60, 0};
        nanosleep(&ts, NULL);
        return;
    }
    case BIG_RECORDS: {
        /* Longer than a record can carry: truncated, never split. */
        static char big[3 * CF_RECORD_MAX];
        memset(big, 'x', sizeof big - 1);
        for (int i = 0; i < 5; i++)
            cf_channel_send(fd, CF_REC_SANDBOX, big, "tail");
        cf_channel_send(fd, CF_REC_RESULT, "1", big);
        return;
    }
    }
}

static void run(enum how h, double timeout_s, struct cf_child_end *end)
{
    memset(&seen, 0, sizeof seen);
    sbx_error err;
    sbx_error_clear(&err);
    cr_assert_eq(cf_child_run(body, &h, timeout_s, collect, &seen, end, &err), SBX_OK,
                 "%s", err.message);
}

static void expect_first_two(void)
{
    cr_assert_geq(seen.n, 2);
    cr_assert_eq(seen.type[0], CF_REC_SANDBOX);
    cr_assert_str_eq(seen.a[0], "key/1");
    cr_assert_str_eq(seen.b[0], "ref-1");
    cr_assert_eq(seen.type[1], CF_REC_FAILURE);
    cr_assert_str_eq(seen.a[1], "first failure");
}

Test(conformance_child, returning_child_exits_zero)
{
    struct cf_child_end end;
    run(RETURN, 10, &end);
    expect_first_two();
    cr_assert_eq(seen.n, 3);
    cr_assert_eq(seen.type[2], CF_REC_RESULT);
    cr_assert(end.exited && end.exit_status == 0 && !end.signal && !end.timed_out);
}

Test(conformance_child, exit_status_is_reported)
{
    struct cf_child_end end;
    run(EXIT_3, 10, &end);
    expect_first_two();
    cr_assert(end.exited);
    cr_assert_eq(end.exit_status, 3);
    char buf[128];
    cr_assert_str_eq(cf_child_end_text(&end, buf, sizeof buf), "exited with status 3");
}

Test(conformance_child, records_sent_before_a_crash_arrive)
{
    struct cf_child_end end;
    run(SEGV_AFTER_SEND, 10, &end);
    expect_first_two();
    cr_assert_eq(seen.n, 2);
    cr_assert(!end.exited && !end.timed_out);
    cr_assert_eq(end.signal, SIGSEGV);
    char buf[128];
    cr_assert(!strncmp(cf_child_end_text(&end, buf, sizeof buf),
                       "killed by signal 11 (SIGSEGV)", 29), "%s", buf);
}

Test(conformance_child, hung_child_is_killed_at_the_deadline)
{
    struct cf_child_end end;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    run(HANG, 0.3, &end);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double took = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    expect_first_two();
    cr_assert(end.timed_out);
    cr_assert_eq(end.signal, SIGKILL);
    cr_assert_geq(took, 0.3);
    cr_assert_lt(took, 5.0);
}

Test(conformance_child, long_strings_are_truncated_not_split)
{
    struct cf_child_end end;
    run(BIG_RECORDS, 10, &end);
    expect_first_two();
    cr_assert_eq(seen.n, 8, "%zu records", seen.n);
    for (size_t i = 2; i < 7; i++) {
        cr_assert_eq(seen.type[i], CF_REC_SANDBOX);
        cr_assert_eq(seen.b[i][0], '\0', "no room left for the second string");
        cr_assert_gt(strlen(seen.a[i]), (size_t)CF_RECORD_MAX - 16);
    }
    cr_assert_eq(seen.type[7], CF_REC_RESULT);
    cr_assert_str_eq(seen.a[7], "1");
}

Test(conformance_child, signal_names)
{
    char buf[32];
    cr_assert_str_eq(cf_signal_name(SIGSEGV, buf, sizeof buf), "SIGSEGV");
    cr_assert_str_eq(cf_signal_name(SIGPIPE, buf, sizeof buf), "SIGPIPE");
    cr_assert_str_eq(cf_signal_name(SIGABRT, buf, sizeof buf), "SIGABRT");
    cr_assert_str_eq(cf_signal_name(77, buf, sizeof buf), "signal 77");
}

Test(conformance_child, send_to_no_pipe_is_ignored)
{
    cf_channel_send(-1, CF_REC_RESULT, "0", "");
}
