/*
 * test_frozen10_contract.c - the parts of the 1.0 contract a frozen
 * provider must keep that the conformance suite does not (yet) check,
 * driven through libsbx exactly as a host uses the provider (built once
 * per frozen provider, SBX_TEST_FROZEN_NAME: frozen10 from the frozen 1.0
 * header, frozen11 from the frozen 1.1 one): signal deaths, the child's
 * signal state, SIGPIPE, program and cwd errors, streaming, FIFOs, exact
 * modes, atomic writes and their failure paths, leftovers, destroy of
 * trees a command made read-only, and malformed references.
 */
#include <sbx/sbx.h>

#include <criterion/criterion.h>

#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef SBX_TEST_FROZEN_NAME
#error "define SBX_TEST_FROZEN_NAME (frozen10, frozen11)"
#endif

/* ---- fixture: one context, one sandbox --------------------------------- */

static struct {
    char dir[64];
    sbx_ctx *ctx;
    sbx_provider *p;
    char key[64];
    sbx_handle *h;
} F;

static void setup(void)
{
    memset(&F, 0, sizeof F);
    snprintf(F.dir, sizeof F.dir, "/tmp/sbx-" SBX_TEST_FROZEN_NAME "-XXXXXX");
    cr_assert_not_null(mkdtemp(F.dir));
    char cfg[128];
    snprintf(cfg, sizeof cfg, "%s/sbx.yaml", F.dir);
    FILE *f = fopen(cfg, "w");
    cr_assert_not_null(f);
    fprintf(f, "providers:\n  %s:\n    root: %s/ws\n", SBX_TEST_FROZEN_NAME, F.dir);
    cr_assert_eq(fclose(f), 0);

    struct sbx_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.config_path = cfg;
    o.plugin_path = SBX_TEST_FROZEN_PROVIDER_DIR;
    o.provider = SBX_TEST_FROZEN_NAME;
    o.ignore_environment = true;
    sbx_error err;
    cr_assert_eq(sbx_open(&o, &F.ctx, &err), SBX_OK, "%s", err.message);
    cr_assert_eq(sbx_provider_lookup(F.ctx, SBX_TEST_FROZEN_NAME, &F.p, &err), SBX_OK,
                 "%s", err.message);
    snprintf(F.key, sizeof F.key, "%s-contract-%ld", SBX_TEST_FROZEN_NAME,
             (long)getpid());
    cr_assert_eq(sbx_create(F.p, F.key, NULL, NULL, &F.h, &err), SBX_OK, "%s",
                 err.message);
}

static int remove_entry(const char *path, const struct stat *sb, int flag,
                        struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

static void teardown(void)
{
    if (F.h) {
        char ref[SBX_REF_MAX];
        snprintf(ref, sizeof ref, "%s", sbx_handle_ref(F.h));
        sbx_release(F.h);
        sbx_error err;
        sbx_destroy(F.p, F.key, ref, NULL, &err);
    }
    sbx_close(F.ctx);
    if (F.dir[0])
        nftw(F.dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(frozen10_contract, .init = setup, .fini = teardown, .timeout = 60);

/* ---- helpers ------------------------------------------------------------ */

struct ran {
    int status;
    sbx_error err;
    struct sbx_exec_result res;
    sbx_capture out, errout;
};

/* Run argv with env (NULL: none), cwd and stdin; capture both streams. */
static void run(struct ran *r, const char *const *argv, const char *const *env,
                const char *cwd, const struct sbx_source *in, int64_t timeout_ms)
{
    memset(r, 0, sizeof *r);
    sbx_capture_init(&r->out, 1 << 20, 0);
    sbx_capture_init(&r->errout, 1 << 20, 0);
    struct sbx_sink out = sbx_capture_sink(&r->out);
    struct sbx_sink err = sbx_capture_sink(&r->errout);
    struct sbx_exec_args a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.argv = argv;
    a.env = env;
    a.cwd = cwd;
    a.in = in;
    a.timeout_ms = timeout_ms;
    a.out = &out;
    a.err = &err;
    r->res.size = sizeof r->res;
    r->status = sbx_exec(F.h, &a, &r->res, NULL, &r->err);
}

static void ran_free(struct ran *r)
{
    sbx_capture_free(&r->out);
    sbx_capture_free(&r->errout);
}

/* stdout of `sh -c script`, which must succeed (caller frees). */
static char *sh(const char *script)
{
    const char *argv[] = {"sh", "-c", script, NULL};
    struct ran r;
    run(&r, argv, NULL, NULL, NULL, 20000);
    cr_assert_eq(r.status, SBX_OK, "sh -c '%s': %s", script, r.err.message);
    char *err = sbx_capture_text(&r.errout);
    cr_assert_eq(r.res.exit_code, 0, "sh -c '%s' exited %d: %s", script,
                 r.res.exit_code, err);
    free(err);
    char *text = sbx_capture_text(&r.out);
    ran_free(&r);
    return text;
}

static void write_text(const char *path, const char *text, unsigned mode)
{
    struct sbx_memory_source m = {text, strlen(text), 0};
    struct sbx_source src = sbx_memory_source(&m);
    sbx_error err;
    cr_assert_eq(sbx_write(F.h, path, &src, mode, NULL, &err), SBX_OK, "write %s: %s",
                 path, err.message);
}

/* The file's content (at most 1 MiB), or NULL with *status set. */
static char *read_text(const char *path, int *status)
{
    sbx_capture c;
    sbx_capture_init(&c, 1 << 20, 0);
    struct sbx_sink sink = sbx_capture_sink(&c);
    sbx_error err;
    *status = sbx_read(F.h, path, &sink, NULL, &err);
    char *text = *status == SBX_OK ? sbx_capture_text(&c) : NULL;
    sbx_capture_free(&c);
    return text;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- exec ---------------------------------------------------------------- */

Test(frozen10_contract, signal_death_is_exit_code_minus_one_and_the_signal)
{
    static const struct {
        const char *script;
        int sig;
    } cases[] = {{"kill -TERM $$", SIGTERM}, {"kill -KILL $$", SIGKILL},
                 {"kill -SEGV $$", SIGSEGV}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *argv[] = {"sh", "-c", cases[i].script, NULL};
        struct ran r;
        run(&r, argv, NULL, NULL, NULL, 20000);
        cr_expect_eq(r.status, SBX_OK, "%s: %s", cases[i].script, r.err.message);
        cr_expect_eq(r.res.exit_code, -1, "%s: exit_code %d", cases[i].script,
                     r.res.exit_code);
        cr_expect_eq(r.res.term_signal, cases[i].sig, "%s: term_signal %d",
                     cases[i].script, r.res.term_signal);
        cr_expect_eq(r.res.timed_out, 0);
        ran_free(&r);
    }
}

Test(frozen10_contract, timeout_reports_the_kill)
{
    const char *argv[] = {"sleep", "30", NULL};
    struct ran r;
    run(&r, argv, NULL, NULL, NULL, 300);
    cr_assert_eq(r.status, SBX_OK, "%s", r.err.message);
    cr_expect(r.res.timed_out);
    cr_expect_eq(r.res.exit_code, -1);
    cr_expect_eq(r.res.term_signal, SIGKILL);
    ran_free(&r);
}

/* The host ignores SIGPIPE and blocks signals in the calling thread; the
 * command must see neither. */
Test(frozen10_contract, child_starts_with_default_signals_and_empty_mask)
{
    struct sigaction ign = {.sa_handler = SIG_IGN}, old_pipe, old_int;
    sigemptyset(&ign.sa_mask);
    sigaction(SIGPIPE, &ign, &old_pipe);
    sigaction(SIGINT, &ign, &old_int);
    sigset_t block, old_mask;
    sigemptyset(&block);
    sigaddset(&block, SIGUSR1);
    sigaddset(&block, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &block, &old_mask);

    const char *argv[] = {"grep", "-E", "^Sig(Blk|Ign):", "/proc/self/status", NULL};
    struct ran r;
    run(&r, argv, NULL, NULL, NULL, 20000);

    pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
    sigaction(SIGPIPE, &old_pipe, NULL);
    sigaction(SIGINT, &old_int, NULL);

    cr_assert_eq(r.status, SBX_OK, "%s", r.err.message);
    char *out = sbx_capture_text(&r.out);
    cr_expect_str_eq(out, "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n");
    free(out);
    ran_free(&r);
}

/* With SIGPIPE at its default, a command that stops reading its stdin must
 * not take the host process down. */
Test(frozen10_contract, command_closing_stdin_does_not_raise_sigpipe_in_host)
{
    struct sigaction dfl = {.sa_handler = SIG_DFL}, old;
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGPIPE, &dfl, &old);
    size_t len = 8 << 20;
    char *data = malloc(len);
    cr_assert_not_null(data);
    memset(data, 'x', len);
    struct sbx_memory_source m = {data, len, 0};
    struct sbx_source src = sbx_memory_source(&m);
    const char *argv[] = {"head", "-c", "1", NULL};
    struct ran r;
    run(&r, argv, NULL, NULL, &src, 20000);
    sigaction(SIGPIPE, &old, NULL);
    free(data);
    cr_assert_eq(r.status, SBX_OK, "%s", r.err.message);
    cr_expect_eq(r.res.exit_code, 0);
    cr_expect_eq(r.out.total, 1);
    ran_free(&r);
}

Test(frozen10_contract, program_errors)
{
    write_text("noexec.sh", "#!/bin/sh\necho no\n", 0644);
    free(sh("mkdir -p adir"));
    static const struct {
        const char *prog;
        int want;
    } cases[] = {{"./noexec.sh", SBX_E_NOT_EXEC},
                 {"./adir", SBX_E_NOT_EXEC},
                 {"./missing", SBX_E_NO_COMMAND},
                 {"sbx-frozen10-no-such-program", SBX_E_NO_COMMAND}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *argv[] = {cases[i].prog, NULL};
        struct ran r;
        run(&r, argv, NULL, NULL, NULL, 20000);
        cr_expect_eq(r.status, cases[i].want, "%s: status %d (%s), want %d",
                     cases[i].prog, r.status, r.err.message, cases[i].want);
        cr_expect_neq(r.err.message[0], '\0', "%s: no message", cases[i].prog);
        ran_free(&r);
    }
}

Test(frozen10_contract, bad_cwd_is_invalid_and_runs_nothing)
{
    write_text("file", "f\n", 0);
    free(sh("ln -s / out && mkdir -p d"));
    static const char *const bad[] = {"missing", "file", "..", "d/../..", "/tmp",
                                      "out"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *argv[] = {"sh", "-c", "echo ran > ran.txt", NULL};
        struct ran r;
        run(&r, argv, NULL, bad[i], NULL, 20000);
        cr_expect_eq(r.status, SBX_E_INVALID, "cwd %s: status %d (%s)", bad[i],
                     r.status, r.err.message);
        ran_free(&r);
    }
    int st;
    free(read_text("ran.txt", &st));
    cr_expect_eq(st, SBX_E_NOT_FOUND, "a command ran despite a bad cwd");
}

Test(frozen10_contract, null_env_is_empty)
{
    const char *argv[] = {"env", NULL};
    struct ran r;
    run(&r, argv, NULL, NULL, NULL, 20000);
    cr_assert_eq(r.status, SBX_OK, "%s", r.err.message);
    cr_expect_eq(r.res.exit_code, 0);
    cr_expect_eq(r.out.total, 0, "env printed %llu bytes",
                 (unsigned long long)r.out.total);
    ran_free(&r);
}

/* A sink that notes when the first chunk arrived. */
struct first_chunk {
    double at;
};

static int note_first(void *ctx, const void *buf, size_t len)
{
    (void)buf;
    (void)len;
    struct first_chunk *f = ctx;
    if (f->at == 0)
        f->at = now();
    return SBX_OK;
}

Test(frozen10_contract, output_streams_while_the_command_runs)
{
    struct first_chunk first = {0};
    struct sbx_sink out = SBX_SINK_INIT(&first, note_first);
    const char *argv[] = {"sh", "-c", "echo early; sleep 2; echo late", NULL};
    struct sbx_exec_args a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.argv = argv;
    a.out = &out;
    a.timeout_ms = 20000;
    struct sbx_exec_result res;
    memset(&res, 0, sizeof res);
    res.size = sizeof res;
    sbx_error err;
    double start = now();
    cr_assert_eq(sbx_exec(F.h, &a, &res, NULL, &err), SBX_OK, "%s", err.message);
    double end = now();
    cr_assert_gt(first.at, 0);
    cr_expect_lt(first.at - start, 1.5, "first output after %.2f s",
                 first.at - start);
    cr_expect_gt(end - start, 1.9);
    cr_expect_eq(res.out_bytes, 11);
}

/* A daemon the command leaves behind is killed before exec returns. */
Test(frozen10_contract, leftovers_are_killed)
{
    char *out = sh("sleep 30 >/dev/null 2>&1 & echo $!");
    long pid = strtol(out, NULL, 10);
    free(out);
    cr_assert_gt(pid, 1);
    char path[64], stat_line[256];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    bool alive = true;
    for (int i = 0; i < 40 && alive; i++) {
        FILE *f = fopen(path, "r");
        alive = false;
        if (f) {
            /* a zombie is dead, merely not yet reaped by init */
            if (fgets(stat_line, sizeof stat_line, f)) {
                const char *paren = strrchr(stat_line, ')');
                alive = paren && paren[1] == ' ' && paren[2] != 'Z';
            }
            fclose(f);
        }
        if (alive)
            usleep(50000);
    }
    cr_expect(!alive, "the background sleep %ld survived exec", pid);
}

/* ---- files ---------------------------------------------------------------- */

Test(frozen10_contract, fifo_and_directory_reads_are_invalid_without_blocking)
{
    free(sh("mkfifo pipe && mkdir -p dir"));
    static const char *const paths[] = {"pipe", "dir", "."};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        double t0 = now();
        int st;
        free(read_text(paths[i], &st));
        cr_expect_eq(st, SBX_E_INVALID, "read %s: status %d", paths[i], st);
        cr_expect_lt(now() - t0, 2.0, "read %s blocked", paths[i]);
    }
}

Test(frozen10_contract, modes_are_exact_whatever_the_umask)
{
    mode_t old = umask(077);
    write_text("a", "a\n", 0);
    write_text("b", "b\n", 0755);
    write_text("c", "c\n", 0600);
    write_text("deep/er/d", "d\n", 0640);
    umask(old);
    char *out = sh("stat -c '%n %a' a b c deep deep/er deep/er/d");
    cr_expect_str_eq(out, "a 644\nb 755\nc 600\ndeep 755\ndeep/er 755\ndeep/er/d 640\n");
    free(out);

    struct sbx_memory_source m = {"x", 1, 0};
    struct sbx_source src = sbx_memory_source(&m);
    sbx_error err;
    cr_expect_eq(sbx_write(F.h, "e", &src, 01777, NULL, &err), SBX_E_INVALID,
                 "mode 01777: %s", err.message);
}

Test(frozen10_contract, writing_over_a_directory_is_invalid)
{
    free(sh("mkdir -p dir/sub"));
    struct sbx_memory_source m = {"x", 1, 0};
    struct sbx_source src = sbx_memory_source(&m);
    sbx_error err;
    cr_expect_eq(sbx_write(F.h, "dir", &src, 0, NULL, &err), SBX_E_INVALID, "%s",
                 err.message);
    m.pos = 0;
    cr_expect_eq(sbx_write(F.h, "dir/sub/", &src, 0, NULL, &err), SBX_E_INVALID, "%s",
                 err.message);
    char *out = sh("test -d dir/sub && ls -A dir");
    cr_expect_str_eq(out, "sub\n");
    free(out);
}

/* A source that gives `good` bytes of 'n', then fails. */
struct failing_source {
    size_t good, pos;
};

static long failing_read(void *ctx, void *buf, size_t cap)
{
    struct failing_source *f = ctx;
    if (f->pos >= f->good)
        return -1;
    size_t n = f->good - f->pos < cap ? f->good - f->pos : cap;
    memset(buf, 'n', n);
    f->pos += n;
    return (long)n;
}

Test(frozen10_contract, failed_write_keeps_old_file_and_no_temporary)
{
    write_text("sub/keep.txt", "old content\n", 0);
    struct failing_source fs = {200000, 0};
    struct sbx_source src = {sizeof src, &fs, failing_read, NULL, NULL};
    sbx_error err;
    cr_expect_neq(sbx_write(F.h, "sub/keep.txt", &src, 0, NULL, &err), SBX_OK);

    int st;
    char *text = read_text("sub/keep.txt", &st);
    cr_expect_eq(st, SBX_OK);
    cr_expect_str_eq(text ? text : "", "old content\n");
    free(text);
    char *out = sh("ls -A sub");
    cr_expect_str_eq(out, "keep.txt\n", "temporary files were left: %s", out);
    free(out);
}

struct canceller {
    sbx_cancel *cancel;
    long delay_us;
};

static void *fire_later(void *arg)
{
    struct canceller *c = arg;
    usleep((useconds_t)c->delay_us);
    sbx_cancel_fire(c->cancel);
    return NULL;
}

Test(frozen10_contract, write_cancelled_midway_leaves_no_temporary)
{
    write_text("keep.txt", "old\n", 0);
    int p[2];
    cr_assert_eq(pipe(p), 0);
    cr_assert_eq(write(p[1], "partial", 7), 7);
    struct sbx_source src = sbx_fd_source(&p[0]);
    struct canceller c = {NULL, 200000};
    cr_assert_eq(sbx_cancel_new(&c.cancel), SBX_OK);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, fire_later, &c), 0);
    sbx_error err;
    double t0 = now();
    int rc = sbx_write(F.h, "keep.txt", &src, 0, c.cancel, &err);
    double took = now() - t0;
    pthread_join(th, NULL);
    sbx_cancel_free(c.cancel);
    close(p[0]);
    close(p[1]);
    cr_expect_eq(rc, SBX_E_CANCELLED, "status %d: %s", rc, err.message);
    cr_expect_lt(took, 2.0, "cancellation took %.2f s", took);
    int st;
    char *text = read_text("keep.txt", &st);
    cr_expect_str_eq(text ? text : "", "old\n");
    free(text);
    char *out = sh("ls -A");
    cr_expect_str_eq(out, "keep.txt\n", "temporary files were left: %s", out);
    free(out);
}

/* A reader that must only ever see one whole version of the file. */
struct reader {
    size_t len;
    volatile int stop;
    int bad_reads, reads;
};

static void *read_loop(void *arg)
{
    struct reader *rd = arg;
    while (!rd->stop) {
        int st;
        char *text = read_text("atomic.bin", &st);
        if (st == SBX_OK && text) {
            size_t n = strlen(text);
            bool whole = n == rd->len;
            for (size_t i = 1; whole && i < n; i++)
                whole = text[i] == text[0];
            if (!whole)
                rd->bad_reads++;
            rd->reads++;
        }
        free(text);
    }
    return NULL;
}

Test(frozen10_contract, concurrent_reader_sees_old_or_new_never_a_part)
{
    const size_t len = 256 * 1024;
    char *a = malloc(len), *b = malloc(len);
    cr_assert(a && b);
    memset(a, 'a', len);
    memset(b, 'b', len);
    struct sbx_memory_source m = {a, len, 0};
    struct sbx_source src = sbx_memory_source(&m);
    sbx_error err;
    cr_assert_eq(sbx_write(F.h, "atomic.bin", &src, 0, NULL, &err), SBX_OK);
    struct reader rd = {len, 0, 0, 0};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, read_loop, &rd), 0);
    for (int i = 0; i < 40; i++) {
        struct sbx_memory_source v = {i % 2 ? a : b, len, 0};
        struct sbx_source s = sbx_memory_source(&v);
        cr_expect_eq(sbx_write(F.h, "atomic.bin", &s, 0, NULL, &err), SBX_OK, "%s",
                     err.message);
    }
    rd.stop = 1;
    pthread_join(th, NULL);
    free(a);
    free(b);
    cr_expect_gt(rd.reads, 0);
    cr_expect_eq(rd.bad_reads, 0, "%d of %d reads saw a partial file", rd.bad_reads,
                 rd.reads);
}

/* ---- lifecycle ------------------------------------------------------------ */

Test(frozen10_contract, destroy_removes_read_only_trees_and_is_idempotent)
{
    /* A file next to the workspace root, reachable through a link. */
    char sentinel[128], script[512];
    snprintf(sentinel, sizeof sentinel, "%s/sentinel", F.dir);
    FILE *f = fopen(sentinel, "w");
    cr_assert_not_null(f);
    fclose(f);
    snprintf(script, sizeof script,
             "mkdir -p ro/inner && echo x > ro/inner/f && chmod 500 ro/inner ro && "
             "ln -s %s escape && mkdir -p none && chmod 000 none",
             F.dir);
    free(sh(script));
    char ref[SBX_REF_MAX];
    snprintf(ref, sizeof ref, "%s", sbx_handle_ref(F.h));
    sbx_release(F.h);
    F.h = NULL;
    sbx_error err;
    cr_assert_eq(sbx_destroy(F.p, F.key, ref, NULL, &err), SBX_OK, "%s", err.message);
    struct stat st;
    cr_expect_eq(lstat(ref, &st), -1, "%s still exists", ref);
    cr_expect_eq(lstat(sentinel, &st), 0, "destroy followed a link out of the workspace");
    cr_expect_eq(sbx_destroy(F.p, F.key, ref, NULL, &err), SBX_OK, "%s", err.message);
    sbx_handle *h = NULL;
    cr_expect_eq(sbx_attach(F.p, F.key, ref, NULL, &h, &err), SBX_E_NOT_FOUND);
    if (h)
        sbx_release(h);
}

Test(frozen10_contract, malformed_references_are_invalid)
{
    char root[SBX_REF_MAX];
    snprintf(root, sizeof root, "%s", sbx_handle_ref(F.h));
    *strrchr(root, '/') = '\0';
    const char *hash = strrchr(sbx_handle_ref(F.h), '/') + 1;
    char upper_hash[SBX_KEY_HASH_LEN + 1];
    for (int i = 0; i < SBX_KEY_HASH_LEN; i++)
        upper_hash[i] = 'A';
    upper_hash[SBX_KEY_HASH_LEN] = '\0';
    char shortref[SBX_REF_MAX + 8], upper[SBX_REF_MAX + 80], nested[SBX_REF_MAX + 80];
    snprintf(shortref, sizeof shortref, "%s/abc", root);
    snprintf(upper, sizeof upper, "%s/%s", root, upper_hash);
    snprintf(nested, sizeof nested, "%s/x/%s", root, hash);
    const char *refs[] = {"", "relative", "/elsewhere/0123", shortref, upper, nested};
    for (size_t i = 0; i < sizeof refs / sizeof refs[0]; i++) {
        sbx_handle *h = NULL;
        sbx_error err;
        int rc = sbx_attach(F.p, F.key, refs[i], NULL, &h, &err);
        if (h)
            sbx_release(h);
        /* the host may refuse some itself; it must never be SBX_OK */
        cr_expect(rc == SBX_E_INVALID, "attach %s: status %d (%s)", refs[i], rc,
                  err.message);
        rc = sbx_destroy(F.p, F.key, refs[i], NULL, &err);
        cr_expect(rc == SBX_E_INVALID, "destroy %s: status %d (%s)", refs[i], rc,
                  err.message);
    }
}
