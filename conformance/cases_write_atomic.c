/*
 * cases_write_atomic.c - write_file publishes a file whole: while a write
 * is in progress a concurrent read sees the complete old content, and a
 * write whose source fails leaves the old content (and nothing else)
 * behind.
 *
 * The new content comes from a gated source: it delivers the first half,
 * then blocks until the case releases it, then delivers the rest or fails.
 * While it is blocked the provider holds half the new content; a provider
 * that writes the target in place has written that half by then, so a
 * read from another thread at that moment tells the two apart every time.
 */
#include "cf_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TARGET "atomic/target.bin"
/* Three contents of different lengths (a cut-short file is visible) and
 * seeds (they differ at every offset, so a prefix of one is never the
 * other). */
#define OLD_LEN (100 * 1024)
#define NEW_LEN (192 * 1024)
#define NEWER_LEN (160 * 1024)
#define SEED_OLD 31u
#define SEED_NEW 32u
#define SEED_NEWER 33u
/* How long the provider may take to read the first half. */
#define GATE_WAIT_S 20.0
/* The source releases itself after this long, so that a provider whose
 * read_file waits for the write to finish cannot deadlock the case. */
#define GATE_GUARD_S 10.0

struct gated_source {
    pthread_mutex_t mu;
    pthread_cond_t cond; /* CLOCK_MONOTONIC */
    uint64_t len, half, pos;
    uint32_t seed;
    bool fail;          /* read returns -1 once released */
    bool at_gate;       /* half delivered, waiting for the release */
    bool released;
    bool self_released; /* nobody released it within GATE_GUARD_S */
    bool writer_done;   /* write_file returned */
};

static struct timespec deadline_in(double s)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long long ns = (long long)ts.tv_nsec + (long long)((s - (double)(long long)s) * 1e9);
    ts.tv_sec += (time_t)s + (time_t)(ns / 1000000000LL);
    ts.tv_nsec = (long)(ns % 1000000000LL);
    return ts;
}

static long gated_read(void *ctx, void *buf, size_t cap)
{
    struct gated_source *g = ctx;
    pthread_mutex_lock(&g->mu);
    if (g->pos >= g->half && !g->released) {
        g->at_gate = true;
        pthread_cond_broadcast(&g->cond);
        struct timespec until = deadline_in(GATE_GUARD_S);
        while (!g->released)
            if (pthread_cond_timedwait(&g->cond, &g->mu, &until) == ETIMEDOUT)
                g->released = g->self_released = true;
    }
    long n;
    if (g->pos >= g->half && g->fail) {
        n = -1;
    } else {
        uint64_t end = g->pos < g->half ? g->half : g->len;
        size_t want = end - g->pos < cap ? (size_t)(end - g->pos) : cap;
        unsigned char *p = buf;
        for (size_t k = 0; k < want; k++)
            p[k] = cf_pattern_byte(g->pos + k, g->seed);
        g->pos += want;
        n = (long)want;
    }
    pthread_mutex_unlock(&g->mu);
    return n;
}

static int gated_init(struct gated_source *g, uint64_t len, uint32_t seed, bool fail)
{
    memset(g, 0, sizeof *g);
    g->len = len;
    g->half = len / 2;
    g->seed = seed;
    g->fail = fail;
    pthread_condattr_t attr;
    if (pthread_condattr_init(&attr) != 0)
        return -1;
    int rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    if (rc == 0)
        rc = pthread_cond_init(&g->cond, &attr);
    pthread_condattr_destroy(&attr);
    if (rc != 0)
        return -1;
    pthread_mutex_init(&g->mu, NULL);
    return 0;
}

static void gated_destroy(struct gated_source *g)
{
    pthread_cond_destroy(&g->cond);
    pthread_mutex_destroy(&g->mu);
}

/* The write_file in progress, on a thread of its own. */
struct writer {
    sbx_handle *h;
    struct gated_source *g;
    int status;
    sbx_error err;
};

static void *write_thread(void *arg)
{
    struct writer *w = arg;
    struct sbx_source src = SBX_SOURCE_INIT(w->g, gated_read);
    sbx_error_clear(&w->err);
    w->status = sbx_write(w->h, TARGET, &src, 0, NULL, &w->err);
    pthread_mutex_lock(&w->g->mu);
    w->g->writer_done = true;
    pthread_cond_broadcast(&w->g->cond);
    pthread_mutex_unlock(&w->g->mu);
    return NULL;
}

/* One read of TARGET, checked against the content it should have and the
 * one it must not show (also not a prefix of it). */
struct seen {
    int status;
    sbx_error err;
    struct cf_pattern_sink want, other;
};

struct twin_sink {
    struct sbx_sink a, b;
};

static int twin_write(void *ctx, const void *buf, size_t len)
{
    struct twin_sink *t = ctx;
    t->a.write(t->a.ctx, buf, len);
    t->b.write(t->b.ctx, buf, len);
    return SBX_OK;
}

static void read_target(sbx_handle *h, uint32_t want_seed, uint32_t other_seed,
                        struct seen *s)
{
    struct twin_sink twin = {cf_pattern_sink(&s->want, want_seed),
                             cf_pattern_sink(&s->other, other_seed)};
    struct sbx_sink sink = SBX_SINK_INIT(&twin, twin_write);
    sbx_error_clear(&s->err);
    s->status = sbx_read(h, TARGET, &sink, NULL, &s->err);
}

/* Fail unless s is exactly want_len bytes of the wanted content. */
static bool judge(struct cf_test *t, const struct seen *s, uint64_t want_len,
                  const char *wanted, const char *other, const char *when)
{
    if (s->status != SBX_OK)
        return cf_fail(t, "read %s %s: %s: %s", TARGET, when,
                       cf_status_name(s->status), s->err.message);
    if (s->want.pos == want_len && s->want.mismatch == UINT64_MAX)
        return true;
    if (s->other.pos > 0 && s->other.mismatch == UINT64_MAX)
        return cf_fail(t, "read %s %s gave %llu bytes of the %s content instead of "
                          "the %llu bytes of the %s content: write_file must "
                          "publish the file whole (write a temporary file and "
                          "rename it over the target)",
                       TARGET, when, (unsigned long long)s->other.pos, other,
                       (unsigned long long)want_len, wanted);
    if (s->want.mismatch == UINT64_MAX)
        return cf_fail(t, "read %s %s gave %llu bytes of the %s content; want all "
                          "%llu: the file was truncated or cut short",
                       TARGET, when, (unsigned long long)s->want.pos, wanted,
                       (unsigned long long)want_len);
    return cf_fail(t, "read %s %s gave %llu bytes that differ from the %s content "
                      "at byte %llu",
                   TARGET, when, (unsigned long long)s->want.pos, wanted,
                   (unsigned long long)s->want.mismatch);
}

static bool expect_target(struct cf_test *t, sbx_handle *h, uint64_t len,
                          uint32_t seed, uint32_t other_seed, const char *wanted,
                          const char *other, const char *when)
{
    struct seen s;
    read_target(h, seed, other_seed, &s);
    return judge(t, &s, len, wanted, other, when);
}

/*
 * Write (len, seed) to TARGET through a gated source while it holds
 * (old_len, old_seed), and read it from this thread while the source is
 * blocked halfway: both reads must give the old content. fail makes the
 * source fail once released. Stores the status of write_file in *status
 * and its message in err; false after failing the case.
 */
static bool gated_write(struct cf_test *t, sbx_handle *h, uint64_t len, uint32_t seed,
                        bool fail, uint64_t old_len, uint32_t old_seed,
                        const char *what, int *status, sbx_error *err)
{
    struct gated_source g;
    if (gated_init(&g, len, seed, fail) != 0)
        return cf_fail(t, "could not set up a condition variable");
    struct writer w = {h, &g, SBX_OK, {0}};
    pthread_t th;
    if (pthread_create(&th, NULL, write_thread, &w) != 0) {
        gated_destroy(&g);
        return cf_fail(t, "could not start a thread");
    }

    pthread_mutex_lock(&g.mu);
    struct timespec until = deadline_in(GATE_WAIT_S);
    while (!g.at_gate && !g.writer_done)
        if (pthread_cond_timedwait(&g.cond, &g.mu, &until) == ETIMEDOUT)
            break;
    bool at_gate = g.at_gate;
    uint64_t got = g.pos;
    pthread_mutex_unlock(&g.mu);

    struct seen during[2];
    int reads = 0;
    if (at_gate) {
        /* Twice: at once, and after the provider had time for a write it
         * might do in the background. */
        read_target(h, old_seed, seed, &during[reads++]);
        cf_sleep_ms(100);
        read_target(h, old_seed, seed, &during[reads++]);
    }

    pthread_mutex_lock(&g.mu);
    bool waited = g.self_released;
    g.released = true;
    pthread_cond_broadcast(&g.cond);
    pthread_mutex_unlock(&g.mu);
    pthread_join(th, NULL);
    gated_destroy(&g);
    *status = w.status;
    *err = w.err;

    char when[160];
    snprintf(when, sizeof when, "while %s was in progress", what);
    if (!at_gate && !g.writer_done)
        return cf_fail(t, "%s: the provider read %llu of the first %llu bytes of "
                          "the source in %.0f s, then stopped reading",
                       what, (unsigned long long)got, (unsigned long long)g.half,
                       GATE_WAIT_S);
    if (!at_gate)
        return cf_fail(t, "%s returned %s (%s) after reading %llu of %llu bytes "
                          "of a source that had not failed",
                       what, cf_status_name(w.status), w.err.message,
                       (unsigned long long)got, (unsigned long long)len);
    if (waited)
        return cf_fail(t, "read %s %s waited %.0f s for the write to finish; a "
                          "concurrent read must see the old content at once",
                       TARGET, when, GATE_GUARD_S);
    for (int i = 0; i < reads; i++)
        if (!judge(t, &during[i], old_len, "old", "new", when))
            return false;
    return true;
}

/* After a failed write the directory holds the target and nothing else:
 * no temporary file stays behind. */
static void expect_no_leftovers(struct cf_test *t, sbx_handle *h)
{
    char *out = cf_sh(t, h,
                      "cd atomic && for f in .* *; do case $f in .|..) ;; *) "
                      "if test -e \"$f\" || test -L \"$f\"; then echo \"$f\"; fi;; "
                      "esac; done");
    if (!out)
        return;
    char q[300];
    if (strcmp(out, "target.bin\n") != 0)
        cf_fail(t, "after a write whose source failed, atomic/ holds %s; want "
                   "only target.bin (an interrupted write leaves no temporary "
                   "file behind)",
                cf_quote(out, strlen(out), q, sizeof q));
    free(out);
}

void cf_case_write_file_atomic(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    if (!h)
        return;
    struct cf_pattern_source ps;
    struct sbx_source src = cf_pattern_source(&ps, OLD_LEN, SEED_OLD);
    sbx_error err;
    sbx_error_clear(&err);
    if (!cf_expect_ok(t, sbx_write(h, TARGET, &src, 0, NULL, &err), &err,
                      "write " TARGET))
        return;
    if (!expect_target(t, h, OLD_LEN, SEED_OLD, SEED_NEW, "old", "new",
                       "before the write"))
        return;

    int status;
    if (!gated_write(t, h, NEW_LEN, SEED_NEW, false, OLD_LEN, SEED_OLD,
                     "a write of new content", &status, &err))
        return;
    if (status != SBX_OK)
        return (void)cf_fail(t, "write of %s through a source that paused "
                                "halfway: %s: %s",
                             TARGET, cf_status_name(status), err.message);
    if (!expect_target(t, h, NEW_LEN, SEED_NEW, SEED_OLD, "new", "old",
                       "after the write"))
        return;

    if (!gated_write(t, h, NEWER_LEN, SEED_NEWER, true, NEW_LEN, SEED_NEW,
                     "a write whose source then failed", &status, &err))
        return;
    if (status == SBX_OK)
        return (void)cf_fail(t, "a write of %s whose source failed (read "
                                "returned -1) returned SBX_OK; want an error",
                             TARGET);
    if (!expect_target(t, h, NEW_LEN, SEED_NEW, SEED_NEWER, "previous", "failed",
                       "after a write whose source failed"))
        return;
    expect_no_leftovers(t, h);
}
