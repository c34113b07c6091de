/*
 * cases_files.c - file operations: binary round trips under nested
 * directories, missing files, permission bits, and confinement of reads
 * and writes to the workspace (.., absolute paths, symlinks leading out).
 */
#include "cf_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CF_GUARD_MS 20000

static bool write_pattern(struct cf_test *t, sbx_handle *h, const char *path,
                          uint64_t len, uint32_t seed, unsigned mode)
{
    struct cf_pattern_source ps;
    struct sbx_source src = cf_pattern_source(&ps, len, seed);
    sbx_error err;
    sbx_error_clear(&err);
    int rc = sbx_write(h, path, &src, mode, NULL, &err);
    char what[300];
    snprintf(what, sizeof what, "write %s (%llu bytes)", path, (unsigned long long)len);
    if (!cf_expect_ok(t, rc, &err, what))
        return false;
    if (ps.pos != len)
        return cf_fail(t, "%s: the provider read %llu bytes of the source", what,
                       (unsigned long long)ps.pos);
    return true;
}

/* Check a stream that arrived in check against (len, seed). */
static bool check_pattern(struct cf_test *t, const struct cf_pattern_sink *check,
                          uint64_t len, const char *what)
{
    if (check->pos != len)
        return cf_fail(t, "%s gave %llu bytes; want %llu", what,
                       (unsigned long long)check->pos, (unsigned long long)len);
    if (check->mismatch != UINT64_MAX)
        return cf_fail(t, "%s differs from what was written at byte %llu", what,
                       (unsigned long long)check->mismatch);
    return true;
}

static bool read_pattern(struct cf_test *t, sbx_handle *h, const char *path,
                         uint64_t len, uint32_t seed)
{
    struct cf_pattern_sink check;
    struct sbx_sink sink = cf_pattern_sink(&check, seed);
    sbx_error err;
    sbx_error_clear(&err);
    char what[300];
    snprintf(what, sizeof what, "read %s", path);
    if (!cf_expect_ok(t, sbx_read(h, path, &sink, NULL, &err), &err, what))
        return false;
    return check_pattern(t, &check, len, what);
}

/* `cat path` in the sandbox must print the same bytes: the file tools and
 * the shell see the same root. */
static bool cat_pattern(struct cf_test *t, sbx_handle *h, const char *path,
                        uint64_t len, uint32_t seed)
{
    const char *argv[] = {"cat", path, NULL};
    struct cf_pattern_sink check;
    struct sbx_sink out = cf_pattern_sink(&check, seed);
    struct sbx_exec_args a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.argv = argv;
    a.timeout_ms = CF_GUARD_MS;
    a.out = &out;
    struct sbx_exec_result res;
    memset(&res, 0, sizeof res);
    res.size = sizeof res;
    sbx_error err;
    sbx_error_clear(&err);
    char what[300];
    snprintf(what, sizeof what, "cat %s in the sandbox", path);
    if (!cf_expect_ok(t, sbx_exec(h, &a, &res, NULL, &err), &err, what))
        return false;
    if (res.exit_code != 0)
        return cf_fail(t, "%s exited with %d", what, res.exit_code);
    return check_pattern(t, &check, len, what);
}

void cf_case_file_binary_roundtrip(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    if (!h)
        return;
    const uint64_t len = 300 * 1024; /* every byte value, NULs included */
    if (!write_pattern(t, h, "a/b/c/blob.bin", len, 5, 0) ||
        !read_pattern(t, h, "a/b/c/blob.bin", len, 5) ||
        !cat_pattern(t, h, "a/b/c/blob.bin", len, 5))
        return;
    /* Overwriting replaces the whole file, it does not patch it. */
    if (!write_pattern(t, h, "a/b/c/blob.bin", 1000, 9, 0) ||
        !read_pattern(t, h, "a/b/c/blob.bin", 1000, 9))
        return;
    if (!write_pattern(t, h, "a/b/empty", 0, 1, 0) ||
        !read_pattern(t, h, "a/b/empty", 0, 1))
        return;
}

void cf_case_file_read_missing(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    if (!h)
        return;
    sbx_capture c;
    sbx_capture_init(&c, 256, 0);
    struct sbx_sink sink = sbx_capture_sink(&c);
    sbx_error err;
    sbx_error_clear(&err);
    int rc = sbx_read(h, "no/such/file.txt", &sink, NULL, &err);
    if (rc != SBX_E_NOT_FOUND)
        cf_fail(t, "reading a file that does not exist returned %s (%s); want "
                   "SBX_E_NOT_FOUND",
                cf_status_name(rc), err.message);
    else if (c.total != 0)
        cf_fail(t, "reading a file that does not exist delivered %llu bytes",
                (unsigned long long)c.total);
    else if (!err.message[0])
        cf_fail(t, "SBX_E_NOT_FOUND without a message");
    sbx_capture_free(&c);
}

void cf_case_file_mode(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    if (!h)
        return;
    const char *script = "#!/bin/sh\necho script-ran\n";
    struct sbx_memory_source m = {script, strlen(script), 0};
    struct sbx_source src = sbx_memory_source(&m);
    sbx_error err;
    sbx_error_clear(&err);
    if (!cf_expect_ok(t, sbx_write(h, "bin/run.sh", &src, 0755, NULL, &err), &err,
                      "write bin/run.sh with mode 0755"))
        return;
    if (!cf_write_text(t, h, "plain.txt", "plain\n"))
        return;
    char *out = cf_sh(t, h,
                      "./bin/run.sh && if test -x plain.txt; then "
                      "echo 'plain.txt is executable'; fi");
    if (out && strcmp(out, "script-ran\n") != 0) {
        char q[200];
        cf_fail(t, "running a file written with mode 0755 (and checking that "
                   "mode 0 gave a non-executable file) printed %s",
                cf_quote(out, strlen(out), q, sizeof q));
    }
    free(out);
}

/* Whether status is a refusal of a path. */
static bool refused(int status)
{
    return status == SBX_E_INVALID || status == SBX_E_DENIED;
}

void cf_case_path_escape_read(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    if (!h)
        return;
    if (!cf_write_text(t, h, "inside.txt", "inside\n") ||
        !cf_expect_file(t, h, "inside.txt", "inside\n"))
        return;
    /* Links made inside the sandbox that lead out of the workspace, and a
     * file next to the workspace so that "../" names something real. */
    char setup[512];
    snprintf(setup, sizeof setup,
             "ln -s / escape && ln -s /etc/passwd pw && ln -s .. up && "
             "mkdir -p a && { echo outside > ../cf-%s; } 2>/dev/null; exit 0",
             t->token);
    char *out = cf_sh(t, h, setup);
    free(out);
    if (!out)
        return;

    char dotdot[80], up[80], deep[80];
    snprintf(dotdot, sizeof dotdot, "../cf-%s", t->token);
    snprintf(up, sizeof up, "up/cf-%s", t->token);
    snprintf(deep, sizeof deep, "a/../../cf-%s", t->token);
    /* Existing targets first: a provider that follows them reads data. */
    const char *paths[] = {"escape/etc/passwd", "pw", "/etc/passwd", dotdot,
                           up, deep, "../x", NULL};
    for (size_t i = 0; paths[i] && !cf_failed(t); i++) {
        sbx_capture c;
        sbx_capture_init(&c, 256, 0);
        struct sbx_sink sink = sbx_capture_sink(&c);
        sbx_error err;
        sbx_error_clear(&err);
        int rc = sbx_read(h, paths[i], &sink, NULL, &err);
        if (!refused(rc))
            cf_fail(t, "read %s (outside the workspace) returned %s (%s); want "
                       "SBX_E_INVALID",
                    paths[i], cf_status_name(rc),
                    rc == SBX_OK ? "the file was read" : err.message);
        else if (c.total != 0)
            cf_fail(t, "read %s was refused but delivered %llu bytes first",
                    paths[i], (unsigned long long)c.total);
        sbx_capture_free(&c);
    }
    char cleanup[128];
    snprintf(cleanup, sizeof cleanup, "rm -f ../cf-%s 2>/dev/null; exit 0", t->token);
    free(cf_sh(t, h, cleanup));
}

void cf_case_path_escape_write(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    if (!h)
        return;
    if (!cf_write_text(t, h, "inside.txt", "inside\n"))
        return;
    char setup[512];
    snprintf(setup, sizeof setup,
             "ln -s / escape && ln -s .. up && ln -s /tmp/cf-%s-target victim && "
             "mkdir -p a",
             t->token);
    char *out = cf_sh(t, h, setup);
    free(out);
    if (!out)
        return;

    char dotdot[80], deep[80], absolute[80], via_root[80], up[80];
    snprintf(dotdot, sizeof dotdot, "../cf-%s", t->token);
    snprintf(deep, sizeof deep, "a/../../cf-%s", t->token);
    snprintf(absolute, sizeof absolute, "/tmp/cf-%s", t->token);
    snprintf(via_root, sizeof via_root, "escape/tmp/cf-%s", t->token);
    snprintf(up, sizeof up, "up/cf-%s", t->token);
    const char *paths[] = {dotdot, deep, absolute, via_root, up, NULL};
    for (size_t i = 0; paths[i] && !cf_failed(t); i++) {
        struct sbx_memory_source m = {"escaped\n", 8, 0};
        struct sbx_source src = sbx_memory_source(&m);
        sbx_error err;
        sbx_error_clear(&err);
        int rc = sbx_write(h, paths[i], &src, 0, NULL, &err);
        if (!refused(rc))
            cf_fail(t, "write %s (outside the workspace) returned %s (%s); want "
                       "SBX_E_INVALID",
                    paths[i], cf_status_name(rc), err.message);
    }
    /* A write to a link that points out may be refused, or may replace the
     * link itself; it must never reach the link's target. */
    if (!cf_failed(t)) {
        struct sbx_memory_source m = {"escaped\n", 8, 0};
        struct sbx_source src = sbx_memory_source(&m);
        sbx_error err;
        sbx_error_clear(&err);
        int rc = sbx_write(h, "victim", &src, 0, NULL, &err);
        if (rc != SBX_OK && !refused(rc))
            cf_fail(t, "write through a link leading out returned %s (%s); want "
                       "SBX_E_INVALID (or replacing the link)",
                    cf_status_name(rc), err.message);
    }
    /* Look from inside the sandbox, where an escaped write would land, and
     * remove whatever is found. */
    char check[768];
    snprintf(check, sizeof check,
             "for f in ../cf-%1$s /tmp/cf-%1$s /tmp/cf-%1$s-target; do "
             "if test -e \"$f\"; then echo \"$f\"; rm -f \"$f\"; fi; done; exit 0",
             t->token);
    bool failed_before = cf_failed(t);
    out = cf_sh(t, h, check);
    if (out && *out) {
        char q[300];
        if (failed_before) {
            size_t used = strlen(t->message);
            snprintf(t->message + used, sizeof t->message - used,
                     "; files appeared outside the workspace: %s",
                     cf_quote(out, strlen(out), q, sizeof q));
        } else {
            cf_fail(t, "writes escaped the workspace: found %s",
                    cf_quote(out, strlen(out), q, sizeof q));
        }
    }
    free(out);
}

/* ---- file_read_fifo ------------------------------------------------------- */

struct fifo_reader {
    sbx_handle *h;
    int status;
    sbx_error err;
    uint64_t bytes;
    double returned_at;
    pthread_mutex_t lock;
    pthread_cond_t done_cv;
    bool done;
};

static void *read_fifo(void *arg)
{
    struct fifo_reader *r = arg;
    sbx_capture c;
    sbx_capture_init(&c, 256, 0);
    struct sbx_sink sink = sbx_capture_sink(&c);
    sbx_error_clear(&r->err);
    r->status = sbx_read(r->h, "fifo", &sink, NULL, &r->err);
    r->bytes = c.total;
    sbx_capture_free(&c);
    pthread_mutex_lock(&r->lock);
    r->returned_at = cf_now();
    r->done = true;
    pthread_cond_signal(&r->done_cv);
    pthread_mutex_unlock(&r->lock);
    return NULL;
}

/* Wait until r is done or `seconds` passed; whether it is done. */
static bool fifo_wait(struct fifo_reader *r, double seconds)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)seconds;
    until.tv_nsec += (long)((seconds - (double)(time_t)seconds) * 1e9);
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&r->lock);
    while (!r->done && pthread_cond_timedwait(&r->done_cv, &r->lock, &until) == 0)
        ;
    bool done = r->done;
    pthread_mutex_unlock(&r->lock);
    return done;
}

/*
 * A FIFO made by a command with no writer: a read that opens it blocking
 * waits for a writer forever. The read runs in a thread; if it is still
 * running after 2 s a command opens the FIFO for writing (which releases a
 * blocked open) so that the case can end and say so.
 */
void cf_case_file_read_fifo(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    if (!h)
        return;
    char *out = cf_sh(t, h, "mkfifo fifo && test -p fifo");
    free(out);
    if (!out)
        return;
    struct fifo_reader r;
    memset(&r, 0, sizeof r);
    r.h = h;
    pthread_mutex_init(&r.lock, NULL);
    pthread_cond_init(&r.done_cv, NULL);
    pthread_t th;
    if (pthread_create(&th, NULL, read_fifo, &r) != 0) {
        pthread_cond_destroy(&r.done_cv);
        pthread_mutex_destroy(&r.lock);
        return (void)cf_fail(t, "could not start a thread");
    }
    double started = cf_now();
    bool blocked = !fifo_wait(&r, 2.0);
    if (blocked) {
        /* Release the reader: a writer opens the FIFO and closes it. */
        const char *argv[] = {"sh", "-c", "exec 3>fifo; sleep 0.2", NULL};
        struct cf_exec e;
        memset(&e, 0, sizeof e);
        e.argv = argv;
        e.timeout_ms = 5000;
        cf_exec(&e, h);
        cf_exec_free(&e);
    }
    pthread_join(th, NULL);
    double took = r.returned_at - started;
    if (blocked)
        cf_fail(t, "read_file of a FIFO without a writer blocked (over 2 s, until "
                   "a command opened it for writing; then %s); want SBX_E_INVALID "
                   "at once",
                cf_status_name(r.status));
    else if (r.status != SBX_E_INVALID)
        cf_fail(t, "read_file of a FIFO returned %s (%s) after %.2f s; want "
                   "SBX_E_INVALID",
                cf_status_name(r.status), r.err.message, took);
    else if (r.bytes)
        cf_fail(t, "read_file of a FIFO delivered %llu bytes before refusing",
                (unsigned long long)r.bytes);
    pthread_cond_destroy(&r.done_cv);
    pthread_mutex_destroy(&r.lock);
}

/* ---- file_mode_invalid ---------------------------------------------------- */

/* Mode bits outside 0777 (set-user-id, set-group-id, sticky, a file type)
 * are refused by the op itself, whoever calls it, and nothing is written. */
void cf_case_file_mode_invalid(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    if (!h)
        return;
    static const unsigned bad[] = {04755, 02755, 01777, 0100644, 010000};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char path[64];
        snprintf(path, sizeof path, "mode-%o.txt", bad[i]);
        const char *text = "must not be written\n";
        struct sbx_memory_source m = {text, strlen(text), 0};
        struct sbx_source src = sbx_memory_source(&m);
        sbx_error err;
        sbx_error_clear(&err);
        int rc = sbx_write(h, path, &src, bad[i], NULL, &err);
        if (rc != SBX_E_INVALID)
            return (void)cf_fail(t, "write_file with mode %#o returned %s (%s); "
                                    "want SBX_E_INVALID (bits outside 0777)",
                                 bad[i], cf_status_name(rc), err.message);
        char script[256];
        snprintf(script, sizeof script, "if test -e '%s'; then ls -l '%s'; fi", path,
                 path);
        char *out = cf_sh(t, h, script);
        if (!out)
            return;
        if (*out) {
            char q[200];
            cf_fail(t, "write_file with mode %#o was refused but left the file: %s",
                    bad[i], cf_quote(out, strlen(out), q, sizeof q));
        }
        free(out);
        if (cf_failed(t))
            return;
    }
}
