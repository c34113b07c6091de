/*
 * cases_memory.c - SBX_CAP_MEMORY, through the session manager as users
 * see it (a private SQLite session store per case): the mount holds the
 * store's heads before a command, a command's changes and deletions are
 * committed after it, a read-only attachment is not writable even by the
 * sandbox's root, a concurrent change is a conflict that overwrites
 * nothing, and a host process killed between a command and its writeback
 * loses nothing.
 */
#include "cf_internal.h"

#include <sbx/memory.h>
#include <sbx/session.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* One case's memory world: a session manager over a private store and a
 * store named after the case's token. */
struct cf_memory {
    struct cf_test *t;
    sbx_provider *p;
    sbx_sessions *m;
    char dir[256];
    char db[300];
    char slug[40];
};

static bool memory_open(struct cf_test *t, struct cf_memory *w)
{
    memset(w, 0, sizeof *w);
    w->t = t;
    const char *tmp = getenv("TMPDIR");
    snprintf(w->dir, sizeof w->dir, "%s/sbx-cf-memory-XXXXXX",
             tmp && *tmp == '/' && strlen(tmp) < 200 ? tmp : "/tmp");
    if (!mkdtemp(w->dir))
        return cf_fail(t, "internal: mkdtemp: %s", strerror(errno));
    snprintf(w->db, sizeof w->db, "%s/sessions.db", w->dir);
    snprintf(w->slug, sizeof w->slug, "cf-%.16s", t->token);
    if (!(w->p = cf_open(t)))
        return false;
    struct sbx_sessions_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.store_driver = "sqlite";
    o.store_target = w->db;
    o.ignore_environment = true;
    sbx_error err;
    int rc = sbx_sessions_open(cf_ctx_of(t, w->p), &o, &w->m, &err);
    if (!cf_expect_ok(t, rc, &err, "opening a session store"))
        return false;
    rc = sbx_memory_create(w->m, w->slug, NULL, &err);
    return cf_expect_ok(t, rc, &err, "sbx_memory_create");
}

static void memory_close(struct cf_memory *w)
{
    sbx_sessions_close(w->m);
    w->m = NULL;
    unlink(w->db);
    char side[320];
    snprintf(side, sizeof side, "%s-wal", w->db);
    unlink(side);
    snprintf(side, sizeof side, "%s-shm", w->db);
    unlink(side);
    rmdir(w->dir);
}

static bool put(struct cf_memory *w, const char *path, const char *text)
{
    struct sbx_memory_source ms = {text, strlen(text), 0};
    struct sbx_source src = sbx_memory_source(&ms);
    sbx_error err;
    int rc = sbx_memory_put(w->m, w->slug, path, &src, SBX_MEMORY_ANY_VERSION, NULL, &err);
    return cf_expect_ok(w->t, rc, &err, "sbx_memory_put");
}

/* The head content of path into buf; false (without failing) when absent. */
static bool cat(struct cf_memory *w, const char *path, char *buf, size_t cap)
{
    sbx_capture c;
    sbx_capture_init(&c, cap, 0);
    struct sbx_sink sink = sbx_capture_sink(&c);
    sbx_error err;
    int rc = sbx_memory_cat(w->m, w->slug, path, 0, &sink, &err);
    char *text = rc == SBX_OK ? sbx_capture_text(&c) : NULL;
    snprintf(buf, cap, "%s", text ? text : "");
    free(text);
    sbx_capture_free(&c);
    return rc == SBX_OK;
}

static bool expect_head(struct cf_memory *w, const char *path, const char *want,
                        const char *when)
{
    char got[256];
    bool found = cat(w, path, got, sizeof got);
    if (!want && found)
        return cf_fail(w->t, "%s: %s should be deleted in the store, its head is \"%s\"",
                       when, path, got);
    if (want && !found)
        return cf_fail(w->t, "%s: %s is not in the store; want \"%s\"", when, path, want);
    if (want && strcmp(got, want))
        return cf_fail(w->t, "%s: the store's %s is \"%s\"; want \"%s\"", when, path, got,
                       want);
    return true;
}

/* A session of its own with the store attached. */
static sbx_handle *session(struct cf_memory *w, const char *key, int access)
{
    struct sbx_memory_attachment a = {sizeof a, (uint32_t)access, w->slug};
    struct sbx_session_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.size = sizeof spec;
    spec.provider = w->t->provider;
    spec.memory = &a;
    spec.nmemory = 1;
    sbx_handle *h = NULL;
    sbx_error err;
    int rc = sbx_session_acquire(w->m, key, &spec, NULL, &h, NULL, &err);
    if (!cf_expect_ok(w->t, rc, &err, "sbx_session_acquire with a memory store"))
        return NULL;
    if (!cf_remember(w->t, key, sbx_handle_ref(h))) {
        sbx_release(h);
        return NULL;
    }
    return h;
}

/* Run `sh -c script` in the mount; *status receives sbx_exec's status,
 * *err its error. Returns stdout (caller frees). */
static char *in_mount(struct cf_memory *w, sbx_handle *h, const char *script, int *status,
                      int *exit_code, sbx_error *err)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cd /mnt/memory/%s && %s", w->slug, script);
    const char *argv[] = {"sh", "-c", cmd, NULL};
    struct cf_exec e;
    memset(&e, 0, sizeof e);
    e.argv = argv;
    e.timeout_ms = 60000;
    cf_exec(&e, h);
    *status = e.status;
    *exit_code = e.res.exit_code;
    if (err)
        *err = e.err;
    char *out = cf_capture_string(&e.out);
    cf_exec_free(&e);
    return out;
}

/* in_mount that must succeed with exit code 0. */
static char *in_mount_ok(struct cf_memory *w, sbx_handle *h, const char *script)
{
    int status, code;
    sbx_error err;
    char *out = in_mount(w, h, script, &status, &code, &err);
    if (status != SBX_OK || code != 0) {
        char shown[200];
        cf_fail(w->t, "`%s` in the mount: %s (exit %d): %s", script, cf_status_name(status),
                code, status != SBX_OK ? err.message : cf_quote(out, out ? strlen(out) : 0, shown, sizeof shown));
        free(out);
        return NULL;
    }
    return out;
}

static void end_session(struct cf_memory *w, sbx_handle *h, const char *key)
{
    sbx_release(h);
    sbx_error err;
    sbx_session_delete(w->m, key, NULL, &err);
}

/* The start of every case: a store holding a.md = "alpha\n" and a new
 * session (key written to key) attached to it with `access`. NULL after
 * failing the case; memory_end cleans up either way. */
static sbx_handle *memory_begin(struct cf_test *t, struct cf_memory *w, char *key, int access)
{
    cf_new_key(t, key);
    if (!memory_open(t, w) || !put(w, "a.md", "alpha\n"))
        return NULL;
    return session(w, key, access);
}

static void memory_end(struct cf_memory *w, sbx_handle *h, const char *key)
{
    if (h)
        end_session(w, h, key);
    memory_close(w);
}

void cf_case_memory_heads_and_commit(struct cf_test *t)
{
    struct cf_memory w;
    char key[CF_KEY_MAX];
    char *out = NULL;
    sbx_handle *h = memory_begin(t, &w, key, SBX_MEMORY_READ_WRITE);
    if (!h)
        goto done;
    if (!put(&w, "old.md", "old\n"))
        goto done;
    if (!(out = in_mount_ok(&w, h, "cat a.md; echo beta > b.md; echo gamma > a.md; "
                                   "rm old.md; mkdir -p d/e; echo deep > d/e/f.md")))
        goto done;
    if (strcmp(out, "alpha\n")) {
        cf_fail(t, "before the first command the mount's a.md is \"%s\"; want the "
                   "store's head \"alpha\\n\"", out);
        goto done;
    }
    if (!expect_head(&w, "a.md", "gamma\n", "after a command changed a.md") ||
        !expect_head(&w, "b.md", "beta\n", "after a command created b.md") ||
        !expect_head(&w, "d/e/f.md", "deep\n", "after a command created d/e/f.md") ||
        !expect_head(&w, "old.md", NULL, "after a command deleted old.md"))
        goto done;
    /* an external change shows in the next command */
    if (!put(&w, "a.md", "delta\n"))
        goto done;
    free(out);
    if (!(out = in_mount_ok(&w, h, "cat a.md; ls")))
        goto done;
    if (strcmp(out, "delta\na.md\nb.md\nd\n"))
        cf_fail(t, "after an external commit the mount holds \"%s\"; want a.md = "
                   "\"delta\" and the files a.md, b.md, d", out);
done:
    free(out);
    memory_end(&w, h, key);
}

void cf_case_memory_read_only(struct cf_test *t)
{
    struct cf_memory w;
    char key[CF_KEY_MAX];
    char *out = NULL;
    sbx_handle *h = memory_begin(t, &w, key, SBX_MEMORY_READ_ONLY);
    if (!h)
        goto done;
    int status, code;
    sbx_error err;
    /* every way of writing: change, create, delete, chmod */
    out = in_mount(&w, h,
                   "cat a.md; id -u; (echo x > a.md) 2>/dev/null && echo WROTE-A; "
                   "(echo x > n.md) 2>/dev/null && echo WROTE-N; "
                   "rm -f a.md 2>/dev/null; [ -e a.md ] || echo REMOVED; "
                   "chmod 600 a.md 2>/dev/null && echo CHMOD; true",
                   &status, &code, &err);
    if (status != SBX_OK && status != SBX_E_DENIED) {
        cf_fail(t, "exec in a read-only mount: %s: %s", cf_status_name(status), err.message);
        goto done;
    }
    if (!out || strncmp(out, "alpha\n", 6)) {
        cf_fail(t, "a read-only mount does not hold the store's head: \"%s\"", out ? out : "");
        goto done;
    }
    /* Either the sandbox refused every write (a read-only mount, as a
     * container provider has), or a sandbox whose root can write anything
     * had the change reported and undone. */
    bool wrote = false;
    for (const char *bad = "WROTE-A\0WROTE-N\0REMOVED\0CHMOD\0"; *bad; bad += strlen(bad) + 1)
        wrote |= strstr(out + 6, bad) != NULL;
    if (wrote && status != SBX_E_DENIED) {
        cf_fail(t, "a read-only attachment was written (%.*s) and the change was not "
                   "reported (exec gave %s; want SBX_E_DENIED naming the path)",
                (int)strcspn(out + 6, "\n"), out + 6, cf_status_name(status));
        goto done;
    }
    if (!expect_head(&w, "a.md", "alpha\n", "after writes to a read-only mount") ||
        !expect_head(&w, "n.md", NULL, "after writes to a read-only mount"))
        goto done;
    free(out);
    out = in_mount(&w, h, "cat a.md; ls", &status, &code, &err);
    if (status != SBX_OK || !out || strcmp(out, "alpha\na.md\n"))
        cf_fail(t, "the command after writes to a read-only mount sees \"%s\" (%s); want "
                   "the store's a.md = \"alpha\" and nothing else",
                out ? out : "", cf_status_name(status));
done:
    free(out);
    memory_end(&w, h, key);
}

/* `sh -c cmd` with stdout to out; sbx_exec's status. */
static int sh_to(sbx_handle *h, const char *cmd, const struct sbx_sink *out, int64_t timeout_ms,
                 sbx_error *err)
{
    const char *argv[] = {"sh", "-c", cmd, NULL};
    struct sbx_exec_args a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.argv = argv;
    a.timeout_ms = timeout_ms;
    a.out = out;
    struct sbx_exec_result r;
    memset(&r, 0, sizeof r);
    r.size = sizeof r;
    return sbx_exec(h, &a, &r, NULL, err);
}

/* A command that signals on its stdout when it has read the mount. */
struct slow_exec {
    struct cf_memory *w;
    sbx_handle *h;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool ready;
    int status;
    sbx_error err;
};

static int slow_out(void *ctx, const void *buf, size_t len)
{
    struct slow_exec *s = ctx;
    if (memchr(buf, '!', len)) {
        pthread_mutex_lock(&s->lock);
        s->ready = true;
        pthread_cond_signal(&s->cond);
        pthread_mutex_unlock(&s->lock);
    }
    return 0;
}

static void *slow_run(void *arg)
{
    struct slow_exec *s = arg;
    /* The other writer's commit (a local store write, milliseconds) lands
     * in the pause between the '!' and the write: a second, scaled like
     * the suite's other bounds for slow builds. */
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "cd /mnt/memory/%s && cat a.md >/dev/null && echo '!' && sleep %d && "
             "echo mine > a.md",
             s->w->slug, (int)cf_bound(1.0));
    struct sbx_sink out = SBX_SINK_INIT(s, slow_out);
    s->status = sh_to(s->h, cmd, &out, 60000, &s->err);
    pthread_mutex_lock(&s->lock);
    s->ready = true; /* also when it failed early */
    pthread_cond_signal(&s->cond);
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

void cf_case_memory_conflict(struct cf_test *t)
{
    struct cf_memory w;
    char key[CF_KEY_MAX];
    char *out = NULL;
    sbx_handle *h = memory_begin(t, &w, key, SBX_MEMORY_READ_WRITE);
    if (!h)
        goto done;
    struct slow_exec s = {.w = &w, .h = h};
    pthread_mutex_init(&s.lock, NULL);
    pthread_cond_init(&s.cond, NULL);
    pthread_t th;
    if (pthread_create(&th, NULL, slow_run, &s) != 0) {
        cf_fail(t, "internal: pthread_create");
        goto done;
    }
    pthread_mutex_lock(&s.lock);
    while (!s.ready)
        pthread_cond_wait(&s.cond, &s.lock);
    pthread_mutex_unlock(&s.lock);
    /* another writer commits a.md while the command runs */
    bool theirs = put(&w, "a.md", "theirs\n");
    pthread_join(th, NULL);
    pthread_mutex_destroy(&s.lock);
    pthread_cond_destroy(&s.cond);
    if (!theirs)
        goto done;
    if (s.status != SBX_E_EXISTS || !strstr(s.err.message, "a.md")) {
        cf_fail(t, "writing back a path another writer committed during the command: "
                   "%s (%s); want SBX_E_EXISTS naming a.md",
                cf_status_name(s.status), s.err.message);
        goto done;
    }
    if (!expect_head(&w, "a.md", "theirs\n", "after the conflict"))
        goto done;
    int status, code;
    out = in_mount(&w, h, "cat a.md", &status, &code, NULL);
    if (!out || strcmp(out, "mine\n"))
        cf_fail(t, "after the conflict the mount's a.md is \"%s\"; want the session's "
                   "own \"mine\" kept for it to resolve", out ? out : "");
    else
        expect_head(&w, "a.md", "theirs\n", "after a command in the conflicted mount");
done:
    free(out);
    if (h) {
        sbx_error err;
        sbx_memory_resolve(w.m, key, w.slug, false, &err);
    }
    memory_end(&w, h, key);
}

/* The killed process: attach, change a file, say so, wait to be killed. */
static void crash_child(const struct cf_test *t, const char *db, const char *slug,
                        const char *key, int out_fd)
{
    sbx_ctx *ctx;
    sbx_error err;
    if (sbx_open(t->open_opts, &ctx, &err) != SBX_OK)
        _exit(2);
    struct sbx_sessions_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.store_driver = "sqlite";
    o.store_target = db;
    o.ignore_environment = true;
    sbx_sessions *m;
    sbx_handle *h;
    if (sbx_sessions_open(ctx, &o, &m, &err) != SBX_OK ||
        sbx_session_attach(m, key, NULL, &h, &err) != SBX_OK)
        _exit(3);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "cd /mnt/memory/%s && echo crashed > a.md && echo '!' && "
                              "sleep 5", slug);
    struct sbx_sink out = sbx_fd_sink(&out_fd);
    sh_to(h, cmd, &out, 90000, &err);
    _exit(4);
}

void cf_case_memory_crash_before_writeback(struct cf_test *t)
{
    struct cf_memory w;
    char key[CF_KEY_MAX];
    char *out = NULL;
    sbx_handle *h = memory_begin(t, &w, key, SBX_MEMORY_READ_WRITE);
    if (!h)
        goto done;
    if (!(out = in_mount_ok(&w, h, "cat a.md")))
        goto done;
    int fds[2];
    if (pipe(fds) != 0) {
        cf_fail(t, "internal: pipe: %s", strerror(errno));
        goto done;
    }
    pid_t pid = fork();
    if (pid < 0) {
        cf_fail(t, "internal: fork: %s", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        goto done;
    }
    if (pid == 0) {
        close(fds[0]);
        crash_child(t, w.db, w.slug, key, fds[1]);
    }
    close(fds[1]);
    char c = 0;
    ssize_t n;
    while ((n = read(fds[0], &c, 1)) == 1 && c != '!')
        ;
    close(fds[0]);
    kill(pid, SIGKILL);
    int st;
    waitpid(pid, &st, 0);
    if (n != 1) {
        cf_fail(t, "the command in the process to be killed never ran (exit status %d)",
                WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        goto done;
    }
    /* the command's process tree goes with the host process or is left to
     * the provider; either way the change is in the mount */
    if (!expect_head(&w, "a.md", "alpha\n", "right after the host process was killed"))
        goto done;
    struct sbx_reconcile_report rep;
    sbx_error err;
    int rc = sbx_sessions_reconcile(w.m, 0, NULL, &rep, &err);
    if (!cf_expect_ok(t, rc, &err, "sbx_sessions_reconcile"))
        goto done;
    expect_head(&w, "a.md", "crashed\n",
                "after reconcile (the change of the killed process's command)");
done:
    free(out);
    memory_end(&w, h, key);
}
