/*
 * test_proc_supervisor.c - the process supervisor (shared/proc_supervisor.h)
 * run in a child process on a listening unix socket, driven through the
 * provider-side client (plugins/common/proc_client.h): start, stdin, output
 * by cursor with loss counted exactly, PTY, signals, timeouts, errors.
 */
#include "agent_proto/proto.h"
#include "proc_client.h"
#include "proc_supervisor.h"

#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <pty.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

static char dir[32], sock[64], last_err[1024];

struct buf {
    char *p;
    size_t n;
};
static int last_status;
static pid_t sup = -1;
static struct sbxp_proc_client *cl;
static int64_t sup_hold_us; /* the supervisor's hold_us (0: its default) */

static void h_log(const struct sbx_host *h, int level, const char *fmt, ...)
{
    (void)h;
    (void)level;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_err, sizeof last_err, fmt, ap);
    va_end(ap);
}

static int h_set_error(const struct sbx_host *h, sbx_call *call, int status, const char *fmt,
                       ...)
{
    (void)h;
    (void)call;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_err, sizeof last_err, fmt, ap);
    va_end(ap);
    last_status = status;
    return status;
}

static const struct sbx_host host = {.size = sizeof host, .log = h_log,
                                     .set_error = h_set_error};
static int dummy_call;
#define CALL ((sbx_call *)&dummy_call)

static int open_chan(void *ctx, sbx_call *call, int64_t deadline, int *fd)
{
    (void)ctx;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof sa) != 0) {
        if (s >= 0)
            close(s);
        return h_set_error(&host, call, SBX_E_UNAVAILABLE, "connect: %s", strerror(errno));
    }
    char msg[256];
    if (sbxp_proc_handshake(s, deadline, msg, sizeof msg) != 0) {
        close(s);
        return h_set_error(&host, call, SBX_E_PROTOCOL, "%s", msg);
    }
    *fd = s;
    return SBX_OK;
}

static int auth_uid(void *ctx, int fd)
{
    (void)ctx;
    struct ucred cr;
    socklen_t len = sizeof cr;
    return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0 && cr.uid == getuid() ? 0
                                                                                         : -1;
}

/* Every buffer a test grew, freed at teardown (a test may stop anywhere). */
static char *pool[64];
static size_t npool;

static int buf_write(void *ctx, const void *p, size_t n)
{
    struct buf *b = ctx;
    char *old = b->p;
    b->p = realloc(b->p, b->n + n + 1);
    size_t i = 0;
    while (old && i < npool && pool[i] != old)
        i++;
    if (old && i < npool)
        pool[i] = b->p;
    else if (npool < 64)
        pool[npool++] = b->p;
    memcpy(b->p + b->n, p, n);
    b->n += n;
    b->p[b->n] = '\0';
    return 0;
}

static double mono_ms_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* "" is this process's user with the test directory as its home; any
 * other name is unknown. */
static int resolve_user(void *ctx, const char *spec, struct sbxs_psv_user *u, char *msg,
                        size_t cap)
{
    (void)ctx;
    if (spec[0]) {
        snprintf(msg, cap, "no user %s", spec);
        return -1;
    }
    memset(u, 0, sizeof *u);
    u->uid = getuid();
    u->gid = getgid();
    snprintf(u->home, sizeof u->home, "%s", dir);
    return 0;
}

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/sbx-psv-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(sock, sizeof sock, "%s/s", dir);
    char sub[64];
    snprintf(sub, sizeof sub, "%s/sub", dir);
    cr_assert_eq(mkdir(sub, 0755), 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock);
    int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert_eq(bind(lfd, (struct sockaddr *)&sa, sizeof sa), 0);
    cr_assert_eq(listen(lfd, 64), 0);
    sup = fork();
    cr_assert_neq(sup, -1);
    if (sup == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        prctl(PR_SET_CHILD_SUBREAPER, 1);
        int root = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        static char *base[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "BASE=1", "HOME=/base",
                               NULL};
        struct sbxs_psv_config cfg = {.listen_fd = lfd, .auth = auth_uid, .handoff_fd = -1,
                                      .root_fd = root, .base_env = base, .stop_fd = -1,
                                      .resolve_user = resolve_user, .hold_us = sup_hold_us};
        struct sbxs_psv *s = sbxs_psv_new(&cfg);
        sbxs_psv_run(s);
        sbxs_psv_free(s);
        _exit(0);
    }
    close(lfd);
    struct sbxp_proc_client_cfg cc = {.host = &host, .what = "test supervisor",
                                      .open = open_chan, .request_timeout_ms = 5000};
    cl = sbxp_proc_client_new(&cc);
    cr_assert_not_null(cl);
}

static void teardown(void)
{
    while (npool)
        free(pool[--npool]);
    sbxp_proc_client_free(cl);
    if (sup > 0) {
        kill(sup, SIGKILL);
        waitpid(sup, NULL, 0);
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        cr_log_warn("cleanup failed");
}

TestSuite(proc_supervisor, .init = setup, .fini = teardown, .timeout = 30);


/* Read to the end: every byte of out and err, the sum of lost bytes. */
static struct sbx_proc_read_result read_all(const char *id, struct buf *out, struct buf *err,
                                            uint64_t *lost)
{
    struct sbx_sink so = {sizeof so, out, buf_write}, se = {sizeof se, err, buf_write};
    struct sbx_proc_read_args a = {.size = sizeof a, .wait_ms = 2000, .out = &so, .err = &se};
    struct sbx_proc_read_result r = {.size = sizeof r};
    if (lost)
        *lost = 0;
    for (int i = 0; i < 10000; i++) {
        int rc = sbxp_proc_read(cl, CALL, id, &a, &r);
        cr_assert_eq(rc, SBX_OK, "read: %s", last_err);
        if (lost)
            *lost += r.out_lost + r.err_lost;
        a.out_cursor = r.out_cursor;
        a.err_cursor = r.err_cursor;
        if (r.eof)
            return r;
    }
    cr_assert_fail("no end");
    return r;
}

static void start(char *id_out, const struct sbx_proc_spec *spec)
{
    int rc = sbxp_proc_start(cl, CALL, "", spec, id_out);
    cr_assert_eq(rc, SBX_OK, "start: %s", last_err);
}

Test(proc_supervisor, runs_a_command_and_reads_both_streams_to_the_end)
{
    const char *argv[] = {"sh", "-c", "echo out; echo err >&2; echo $BASE $X; exit 3", NULL};
    /* the user's HOME replaces the base environment's */
    const char *home[] = {"sh", "-c", "echo $HOME", NULL};
    struct sbx_proc_spec hs = {.size = sizeof hs, .argv = home};
    char hid[SBX_PROC_ID_MAX] = "";
    start(hid, &hs);
    struct buf ho = {0}, he = {0};
    read_all(hid, &ho, &he, NULL);
    char want[64];
    snprintf(want, sizeof want, "%s\n", dir);
    cr_assert_str_eq(ho.p, want);
    const char *env[] = {"X=2", NULL};
    struct sbx_proc_spec spec = {.size = sizeof spec, .argv = argv, .env = env};
    char id[SBX_PROC_ID_MAX] = "";
    start(id, &spec);
    cr_assert_eq(id[0], 'p');
    cr_assert_eq(strlen(id), 17);
    struct buf out = {0}, err = {0};
    struct sbx_proc_read_result r = read_all(id, &out, &err, NULL);
    cr_assert_str_eq(out.p, "out\n1 2\n");
    cr_assert_str_eq(err.p, "err\n");
    cr_assert_eq(r.state, SBX_PROC_EXITED);
    cr_assert_eq(r.exit_code, 3);
    cr_assert_eq(r.term_signal, 0);
    /* again from 0: the replay buffer still has it */
    struct buf again = {0};
    read_all(id, &again, &err, NULL);
    cr_assert_str_eq(again.p, "out\n1 2\n");
}

Test(proc_supervisor, stdin_is_written_and_closed)
{
    const char *argv[] = {"sh", "-c", "tr a-z A-Z; echo done", NULL};
    struct sbx_proc_spec spec = {.size = sizeof spec, .argv = argv};
    char id[SBX_PROC_ID_MAX] = "";
    start(id, &spec);
    cr_assert_eq(sbxp_proc_write(cl, CALL, id, "hello ", 6, 0), SBX_OK, "%s", last_err);
    cr_assert_eq(sbxp_proc_write(cl, CALL, id, "world", 5, SBX_PROC_WRITE_CLOSE), SBX_OK);
    struct buf out = {0}, err = {0};
    read_all(id, &out, &err, NULL);
    cr_assert_str_eq(out.p, "HELLO WORLDdone\n");
    /* after the end, a write is refused */
    cr_assert_eq(sbxp_proc_write(cl, CALL, id, "x", 1, 0), SBX_E_INVALID);
}

/* A write to a process this client runs is pipelined: it returns before
 * the supervisor answered. When that answer is an error (the process had
 * ended), the next write reports it, and so does every later one. */
Test(proc_supervisor, a_pipelined_write_that_failed_is_reported_by_the_next_write)
{
    const char *argv[] = {"true", NULL};
    struct sbx_proc_spec spec = {.size = sizeof spec, .argv = argv};
    char id[SBX_PROC_ID_MAX] = "";
    start(id, &spec);
    /* ended, and this client has not seen it end */
    struct timespec ts = {0, 300 * 1000 * 1000};
    nanosleep(&ts, NULL);
    uint64_t before = sbxp_proc_client_pipelined(cl);
    cr_assert_eq(sbxp_proc_write(cl, CALL, id, "x", 1, 0), SBX_OK, "%s", last_err);
    cr_assert_eq(sbxp_proc_client_pipelined(cl), before + 1);
    last_err[0] = '\0';
    cr_assert_eq(sbxp_proc_write(cl, CALL, id, "y", 1, 0), SBX_E_INVALID);
    cr_assert(strstr(last_err, "an earlier write to") && strstr(last_err, "has ended"), "%s",
              last_err);
    cr_assert_eq(sbxp_proc_write(cl, CALL, id, "z", 1, 0), SBX_E_INVALID);
    cr_assert_eq(sbxp_proc_write(cl, CALL, id, NULL, 0, SBX_PROC_WRITE_CLOSE), SBX_E_INVALID);
    /* a process seen ended by a read: refused at once, nothing pipelined */
    start(id, &spec);
    struct buf out = {0}, err = {0};
    read_all(id, &out, &err, NULL);
    before = sbxp_proc_client_pipelined(cl);
    cr_assert_eq(sbxp_proc_write(cl, CALL, id, "x", 1, 0), SBX_E_INVALID);
    cr_assert(strstr(last_err, "has ended"), "%s", last_err);
    cr_assert_eq(sbxp_proc_client_pipelined(cl), before);
}

/* Pipelined writes keep their order, hold at most one write in flight per
 * process (a process that does not read its stdin holds the writer), and
 * are delivered even when the client is released right after them. */
Test(proc_supervisor, pipelined_writes_keep_order_and_back_pressure_and_survive_release)
{
    enum { BIG = 200 * 1024 }; /* more than a pipe holds: queued in the supervisor */
    const char *argv[] = {"sh", "-c", "sleep 0.5; wc -c", NULL};
    struct sbx_proc_spec spec = {.size = sizeof spec, .argv = argv};
    char id[SBX_PROC_ID_MAX] = "";
    char *big = malloc(BIG);
    cr_assert_not_null(big);
    memset(big, 'b', BIG);
    char want[32];
    struct buf out = {0}, err = {0};
    /* released while its write is queued (the process sleeps): written */
    start(id, &spec);
    cr_assert_eq(sbxp_proc_write(cl, CALL, id, big, BIG, 0), SBX_OK, "%s", last_err);
    cr_assert_eq(sbxp_proc_client_pipelined(cl), 1u);
    sbxp_proc_client_free(cl);
    struct sbxp_proc_client_cfg cc = {.host = &host, .what = "test supervisor",
                                      .open = open_chan, .request_timeout_ms = 5000};
    cl = sbxp_proc_client_new(&cc);
    cr_assert_not_null(cl);
    cr_assert_eq(sbxp_proc_write(cl, CALL, id, NULL, 0, SBX_PROC_WRITE_CLOSE), SBX_OK, "%s",
                 last_err);
    read_all(id, &out, &err, NULL);
    snprintf(want, sizeof want, "%d\n", BIG);
    cr_assert(out.p && strstr(out.p, want), "wc -c said %s, want %s", out.p ? out.p : "",
              want);
    /* the second write waits for the first to be taken (after the sleep) */
    start(id, &spec);
    double t0 = mono_ms_now();
    cr_assert_eq(sbxp_proc_write(cl, CALL, id, big, BIG, 0), SBX_OK, "%s", last_err);
    double t1 = mono_ms_now();
    cr_assert_eq(sbxp_proc_write(cl, CALL, id, big, BIG, SBX_PROC_WRITE_CLOSE), SBX_OK, "%s",
                 last_err);
    double t2 = mono_ms_now();
    cr_assert_lt(t1 - t0, 300.0, "the first write waited %.0f ms", t1 - t0);
    cr_assert_gt(t2 - t0, 350.0, "the second write did not wait for the first (%.0f ms)",
                 t2 - t0);
    free(big);
    struct buf o1 = {0};
    read_all(id, &o1, &err, NULL);
    snprintf(want, sizeof want, "%d\n", 2 * BIG);
    cr_assert(o1.p && strstr(o1.p, want), "wc -c said %s, want %s", o1.p ? o1.p : "", want);
    /* and in order: a PTY-less cat echoes what it got, chunk after chunk */
    const char *cat[] = {"cat", NULL};
    struct sbx_proc_spec cs = {.size = sizeof cs, .argv = cat};
    start(id, &cs);
    char line[16];
    for (int i = 0; i < 200; i++) {
        snprintf(line, sizeof line, "%03d\n", i);
        cr_assert_eq(sbxp_proc_write(cl, CALL, id, line, 4, 0), SBX_OK, "%s", last_err);
    }
    cr_assert_eq(sbxp_proc_write(cl, CALL, id, NULL, 0, SBX_PROC_WRITE_CLOSE), SBX_OK);
    struct buf o2 = {0}, e2 = {0};
    read_all(id, &o2, &e2, NULL);
    cr_assert_eq(o2.n, 800u);
    for (int i = 0; i < 200; i++) {
        snprintf(line, sizeof line, "%03d\n", i);
        cr_assert(!memcmp(o2.p + 4 * i, line, 4), "line %d out of order", i);
    }
}

/* A start carries its first read (AP_PS_READ): the read from 0 of a
 * quick command is answered without asking the supervisor again. */
Test(proc_supervisor, a_start_carries_its_first_read)
{
    const char *argv[] = {"sh", "-c", "echo hi; echo oops >&2; exit 3", NULL};
    struct sbx_proc_spec spec = {.size = sizeof spec, .argv = argv};
    char id[SBX_PROC_ID_MAX] = "";
    start(id, &spec);
    uint64_t hits = sbxp_proc_client_first_hits(cl);
    struct buf out = {0}, err = {0};
    struct sbx_proc_read_result r = read_all(id, &out, &err, NULL);
    cr_assert_str_eq(out.p, "hi\n");
    cr_assert_str_eq(err.p, "oops\n");
    cr_assert_eq(r.exit_code, 3);
    cr_assert(r.eof);
    cr_assert_geq(sbxp_proc_client_first_hits(cl), hits + 1, "the first read was asked again");
    /* a max_bytes smaller than what came: the rest is read after it, exactly */
    const char *seq[] = {"sh", "-c", "echo 0123456789", NULL};
    spec.argv = seq;
    start(id, &spec);
    struct buf o2 = {0};
    struct sbx_sink so = {sizeof so, &o2, buf_write};
    struct sbx_proc_read_args a = {.size = sizeof a, .wait_ms = 2000, .max_bytes = 4,
                                   .out = &so};
    for (int i = 0; i < 100; i++) {
        cr_assert_eq(sbxp_proc_read(cl, CALL, id, &a, &r), SBX_OK, "%s", last_err);
        cr_assert_eq(r.out_cursor, o2.n);
        a.out_cursor = r.out_cursor;
        if (r.eof)
            break;
    }
    cr_assert(r.eof);
    cr_assert_str_eq(o2.p, "0123456789\n");
    /* a process that says nothing: the first read's "nothing yet" is not
     * an answer; the read waits for the output */
    const char *late[] = {"sh", "-c", "sleep 0.3; echo late", NULL};
    spec.argv = late;
    start(id, &spec);
    struct buf o3 = {0};
    so.ctx = &o3;
    a = (struct sbx_proc_read_args){.size = sizeof a, .wait_ms = 3000, .out = &so};
    cr_assert_eq(sbxp_proc_read(cl, CALL, id, &a, &r), SBX_OK, "%s", last_err);
    cr_assert_str_eq(o3.p ? o3.p : "", "late\n");
}

/* A supervisor that predates AP_PS_READ (and AP_OK read after the first
 * request): it refuses a start with flag 2 as malformed and closes the
 * channel. The client starts again without the flag and never asks it
 * again. */
static int old_lfd;
static int old_starts[2]; /* starts seen with and without AP_PS_READ */

static int read_n(int fd, void *b, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t k = read(fd, (char *)b + got, n - got);
        if (k <= 0)
            return -1;
        got += (size_t)k;
    }
    return 0;
}

static void *old_supervisor(void *arg)
{
    (void)arg;
    for (;;) {
        int c = accept(old_lfd, NULL, NULL);
        if (c < 0)
            return NULL;
        unsigned char pre[AP_PREAMBLE_LEN], hdr[AP_HDR_LEN], body[4096];
        sbxs_ap_preamble(pre, 3);
        if (write(c, pre, sizeof pre) != (ssize_t)sizeof pre || read_n(c, pre, sizeof pre)) {
            close(c);
            continue;
        }
        int type;
        uint32_t len;
        while (read_n(c, hdr, sizeof hdr) == 0 && sbxs_ap_parse_header(hdr, &type, &len) == 0 &&
               len <= sizeof body && read_n(c, body, len) == 0) {
            unsigned char out[256];
            struct ap_out o;
            if (type == AP_PROC_CHANNEL) {
                sbxs_ap_out_begin(&o, out, sizeof out, AP_OK);
            } else if (type == AP_PROC_START) {
                struct ap_in in;
                sbxs_ap_in_begin(&in, body, len);
                free(sbxs_ap_get_str(&in));
                uint32_t flags = sbxs_ap_get_u32(&in);
                old_starts[(flags & AP_PS_READ) ? 0 : 1]++;
                if (flags & ~AP_PS_PTY) {
                    sbxs_ap_out_begin(&o, out, sizeof out, AP_ERROR);
                    sbxs_ap_put_u32(&o, EPROTO);
                    sbxs_ap_put_str(&o, "start");
                    sbxs_ap_put_str(&o, "malformed start request");
                    size_t n = sbxs_ap_out_end(&o);
                    if (write(c, out, n) < 0) {
                        /* closed below */
                    }
                    break;
                }
                sbxs_ap_out_begin(&o, out, sizeof out, AP_PROC_STARTED);
                sbxs_ap_put_str(&o, "p0123456789abcdef");
            } else {
                break;
            }
            size_t n = sbxs_ap_out_end(&o);
            if (write(c, out, n) != (ssize_t)n)
                break;
        }
        close(c);
    }
}

Test(proc_supervisor, a_supervisor_without_first_reads_still_starts)
{
    char path[48];
    snprintf(path, sizeof path, "%.32s/old", dir);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    old_lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert_eq(bind(old_lfd, (struct sockaddr *)&sa, sizeof sa), 0);
    cr_assert_eq(listen(old_lfd, 8), 0);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, old_supervisor, NULL), 0);
    snprintf(sock, sizeof sock, "%s", path); /* open_chan connects here now */
    struct sbxp_proc_client_cfg cc = {.host = &host, .what = "old supervisor",
                                      .open = open_chan, .request_timeout_ms = 5000};
    struct sbxp_proc_client *old = sbxp_proc_client_new(&cc);
    const char *argv[] = {"true", NULL};
    struct sbx_proc_spec spec = {.size = sizeof spec, .argv = argv};
    char id[SBX_PROC_ID_MAX] = "";
    cr_assert_eq(sbxp_proc_start(old, CALL, "", &spec, id), SBX_OK, "%s", last_err);
    cr_assert_str_eq(id, "p0123456789abcdef");
    cr_assert_eq(sbxp_proc_start(old, CALL, "", &spec, id), SBX_OK, "%s", last_err);
    cr_assert_eq(old_starts[0], 1, "%d starts asked for a first read", old_starts[0]);
    cr_assert_eq(old_starts[1], 2);
    sbxp_proc_client_free(old);
    shutdown(old_lfd, SHUT_RDWR);
    close(old_lfd);
    pthread_join(t, NULL);
    snprintf(sock, sizeof sock, "%s/s", dir);
}

/* A client that predates AP_PS_READ: a start without it is answered with
 * the id alone; the channel's next answer is the next request's. */
Test(proc_supervisor, a_start_without_first_read_is_answered_alone)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert_eq(connect(s, (struct sockaddr *)&sa, sizeof sa), 0);
    char msg[256];
    cr_assert_eq(sbxp_proc_handshake(s, 0, msg, sizeof msg), 0, "%s", msg);
    unsigned char hdr[AP_HDR_LEN], body[4096], req[256];
    int type;
    uint32_t len;
    cr_assert_eq(read_n(s, hdr, sizeof hdr), 0);
    cr_assert_eq(sbxs_ap_parse_header(hdr, &type, &len), 0);
    cr_assert_eq(type, AP_OK);
    struct ap_out o;
    sbxs_ap_out_begin(&o, req, sizeof req, AP_PROC_START);
    sbxs_ap_put_str(&o, "");
    sbxs_ap_put_u32(&o, 0);
    sbxs_ap_put_u64(&o, 0);
    sbxs_ap_put_u64(&o, 0);
    sbxs_ap_put_u32(&o, 0);
    sbxs_ap_put_u32(&o, 0);
    sbxs_ap_put_str(&o, "");
    sbxs_ap_put_u32(&o, 2);
    sbxs_ap_put_str(&o, "echo");
    sbxs_ap_put_str(&o, "hi");
    sbxs_ap_put_u32(&o, 0);
    size_t n = sbxs_ap_out_end(&o);
    cr_assert_eq(write(s, req, n), (ssize_t)n);
    cr_assert_eq(read_n(s, hdr, sizeof hdr), 0);
    cr_assert_eq(sbxs_ap_parse_header(hdr, &type, &len), 0);
    cr_assert_eq(type, AP_PROC_STARTED);
    cr_assert_eq(read_n(s, body, len), 0);
    usleep(200 * 1000); /* echo ended: a first read would have been sent */
    sbxs_ap_out_begin(&o, req, sizeof req, AP_PROC_LIST);
    n = sbxs_ap_out_end(&o);
    cr_assert_eq(write(s, req, n), (ssize_t)n);
    cr_assert_eq(read_n(s, hdr, sizeof hdr), 0);
    cr_assert_eq(sbxs_ap_parse_header(hdr, &type, &len), 0);
    cr_assert_eq(type, AP_PROC_ENTRY, "type 0x%02x after a start without a first read", type);
    close(s);
}

Test(proc_supervisor, a_pty_has_its_size_a_term_and_takes_resize_and_ctrl_c)
{
    const char *argv[] = {"sh", "-c",
                          "test -t 0 && test -t 1 && echo tty; stty size; echo $TERM; "
                          "trap 'stty size; exit 7' WINCH; trap 'echo INT; exit 9' INT; "
                          "echo ready; while :; do sleep 0.05; done",
                          NULL};
    struct sbx_proc_spec spec = {.size = sizeof spec, .flags = SBX_PROC_PTY, .argv = argv,
                                 .rows = 30, .cols = 100};
    char id[SBX_PROC_ID_MAX] = "";
    start(id, &spec);
    struct buf out = {0};
    struct sbx_sink so = {sizeof so, &out, buf_write};
    struct sbx_proc_read_args a = {.size = sizeof a, .wait_ms = 500, .out = &so};
    struct sbx_proc_read_result r = {.size = sizeof r};
    for (int i = 0; i < 40 && !(out.p && strstr(out.p, "ready")); i++) {
        cr_assert_eq(sbxp_proc_read(cl, CALL, id, &a, &r), SBX_OK, "%s", last_err);
        a.out_cursor = r.out_cursor;
    }
    cr_assert(strstr(out.p, "tty\r\n30 100\r\nxterm-256color\r\n"), "%s", out.p);
    cr_assert_eq(sbxp_proc_resize(cl, CALL, id, 40, 120), SBX_OK, "%s", last_err);
    struct buf err = {0};
    r = read_all(id, &out, &err, NULL);
    cr_assert(strstr(out.p, "40 120"), "%s", out.p);
    cr_assert_eq(r.exit_code, 7);
    /* ^C through the line discipline */
    const char *argv2[] = {"sh", "-c", "trap 'echo INT; exit 9' INT; echo ready; "
                                       "while :; do sleep 0.05; done", NULL};
    spec.argv = argv2;
    start(id, &spec);
    struct buf o2 = {0};
    so.ctx = &o2;
    a.out_cursor = 0;
    for (int i = 0; i < 40 && !(o2.p && strstr(o2.p, "ready")); i++) {
        cr_assert_eq(sbxp_proc_read(cl, CALL, id, &a, &r), SBX_OK);
        a.out_cursor = r.out_cursor;
    }
    cr_assert_eq(sbxp_proc_write(cl, CALL, id, "\003", 1, 0), SBX_OK);
    r = read_all(id, &o2, &err, NULL);
    cr_assert(strstr(o2.p, "INT"), "%s", o2.p);
    cr_assert_eq(r.exit_code, 9);
    /* resize without a terminal */
    const char *argv3[] = {"true", NULL};
    struct sbx_proc_spec s3 = {.size = sizeof s3, .argv = argv3};
    start(id, &s3);
    cr_assert_eq(sbxp_proc_resize(cl, CALL, id, 10, 10), SBX_E_INVALID);
}

Test(proc_supervisor, eof_on_a_pty_ends_cat)
{
    const char *argv[] = {"cat", NULL};
    struct sbx_proc_spec spec = {.size = sizeof spec, .flags = SBX_PROC_PTY, .argv = argv};
    char id[SBX_PROC_ID_MAX] = "";
    start(id, &spec);
    cr_assert_eq(sbxp_proc_write(cl, CALL, id, "abc", 3, SBX_PROC_WRITE_CLOSE), SBX_OK, "%s",
                 last_err);
    struct buf out = {0}, err = {0};
    struct sbx_proc_read_result r = read_all(id, &out, &err, NULL);
    cr_assert_eq(r.exit_code, 0, "exit %d signal %d: %s", r.exit_code, r.term_signal,
                 out.p ? out.p : "");
    cr_assert(strstr(out.p, "abc"), "%s", out.p);
}

struct find_state {
    const char *id;
    int exited;
};

static int find_entry(void *ctx, const struct sbx_proc_info *info)
{
    struct find_state *f = ctx;
    if (strcmp(info->id, f->id) == 0)
        f->exited = info->state == SBX_PROC_EXITED;
    return 0;
}

static int ended(const char *id)
{
    struct find_state f = {id, 0};
    struct sbx_proc_list_sink ls = {sizeof ls, &f, find_entry};
    cr_assert_eq(sbxp_proc_list(cl, CALL, &ls), SBX_OK, "%s", last_err);
    return f.exited;
}

Test(proc_supervisor, output_far_larger_than_the_buffer_loses_exactly_what_was_dropped)
{
    /* 1..200000, one per line: 1288895 bytes through a 64 KiB buffer */
    const char *argv[] = {"seq", "1", "200000", NULL};
    struct sbx_proc_spec spec = {.size = sizeof spec, .argv = argv, .buffer_bytes = 65536};
    char id[SBX_PROC_ID_MAX] = "";
    start(id, &spec);
    /* let it finish before reading (the list reads nothing): most is dropped */
    for (int i = 0; i < 200 && !ended(id); i++) {
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    struct buf out = {0}, err = {0};
    uint64_t lost;
    struct sbx_proc_read_result r = read_all(id, &out, &err, &lost);
    size_t total = 0;
    char line[16];
    for (int i = 1; i <= 200000; i++)
        total += (size_t)snprintf(line, sizeof line, "%d\n", i);
    cr_assert_eq(r.out_cursor, total);
    cr_assert_eq(lost + out.n, total);
    cr_assert_eq(out.n, 65536);
    /* the bytes are the stream's last ones, none repeated */
    char *all = malloc(total + 1);
    size_t at = 0;
    for (int i = 1; i <= 200000; i++)
        at += (size_t)snprintf(all + at, total + 1 - at, "%d\n", i);
    cr_assert_eq(memcmp(all + total - out.n, out.p, out.n), 0);
    free(all);
}

Test(proc_supervisor, signals_timeouts_and_list)
{
    const char *argv[] = {"sleep", "100", NULL};
    struct sbx_proc_spec spec = {.size = sizeof spec, .argv = argv};
    char a[SBX_PROC_ID_MAX] = "", b[SBX_PROC_ID_MAX] = "";
    start(a, &spec);
    spec.timeout_ms = 200;
    start(b, &spec);
    cr_assert_eq(sbxp_proc_signal(cl, CALL, a, 15), SBX_OK, "%s", last_err);
    struct buf out = {0}, err = {0};
    struct sbx_proc_read_result r = read_all(a, &out, &err, NULL);
    cr_assert_eq(r.exit_code, -1);
    cr_assert_eq(r.term_signal, 15);
    cr_assert_eq(r.timed_out, 0);
    r = read_all(b, &out, &err, NULL);
    cr_assert_eq(r.term_signal, 9);
    cr_assert(r.timed_out);
    /* an ended process: nothing is sent, SBX_OK; a bad signal number */
    cr_assert_eq(sbxp_proc_signal(cl, CALL, a, 15), SBX_OK);
    cr_assert_eq(sbxp_proc_signal(cl, CALL, a, 65), SBX_E_INVALID);
}

static int count_entry(void *ctx, const struct sbx_proc_info *info)
{
    int *n = ctx;
    cr_assert(info->id && info->command);
    (*n)++;
    return 0;
}

Test(proc_supervisor, errors_map_to_statuses)
{
    char id[SBX_PROC_ID_MAX] = "";
    const char *missing[] = {"no-such-program-xyz", NULL};
    struct sbx_proc_spec spec = {.size = sizeof spec, .argv = missing};
    cr_assert_eq(sbxp_proc_start(cl, CALL, "", &spec, id), SBX_E_NO_COMMAND);
    const char *argv[] = {"true", NULL};
    spec.argv = argv;
    spec.cwd = "../";
    cr_assert_eq(sbxp_proc_start(cl, CALL, "", &spec, id), SBX_E_INVALID);
    cr_assert(strstr(last_err, "leads out"), "%s", last_err);
    spec.cwd = "nope";
    cr_assert_eq(sbxp_proc_start(cl, CALL, "", &spec, id), SBX_E_INVALID);
    spec.cwd = "sub";
    cr_assert_eq(sbxp_proc_start(cl, CALL, "", &spec, id), SBX_OK, "%s", last_err);
    cr_assert_eq(sbxp_proc_start(cl, CALL, "someone", &spec, id), SBX_E_INVALID);
    struct buf out = {0}, err = {0};
    struct sbx_proc_read_args ra = {.size = sizeof ra};
    struct sbx_proc_read_result r = {.size = sizeof r};
    cr_assert_eq(sbxp_proc_read(cl, CALL, "p0000000000000000", &ra, &r), SBX_E_NOT_FOUND);
    cr_assert_eq(sbxp_proc_write(cl, CALL, "other-session", "x", 1, 0), SBX_E_NOT_FOUND);
    cr_assert_eq(sbxp_proc_signal(cl, CALL, "p1", 9), SBX_E_NOT_FOUND);
    /* a cursor past the end of the stream */
    ra.out_cursor = 1000;
    cr_assert_eq(sbxp_proc_read(cl, CALL, id, &ra, &r), SBX_E_INVALID);
    cr_assert(strstr(last_err, "past the end"), "%s", last_err);
    ra.out_cursor = 0;
    /* the channel still works after errors */
    read_all(id, &out, &err, NULL);
    int n = 0;
    struct sbx_proc_list_sink ls = {sizeof ls, &n, count_entry};
    cr_assert_eq(sbxp_proc_list(cl, CALL, &ls), SBX_OK, "%s", last_err);
    cr_assert_eq(n, 1);
}

Test(proc_supervisor, the_supervisor_gone_is_an_error_not_a_hang)
{
    const char *argv[] = {"sleep", "100", NULL};
    struct sbx_proc_spec spec = {.size = sizeof spec, .argv = argv};
    char id[SBX_PROC_ID_MAX] = "";
    start(id, &spec);
    kill(sup, SIGKILL);
    waitpid(sup, NULL, 0);
    sup = -1;
    struct sbx_proc_read_args ra = {.size = sizeof ra, .wait_ms = 10000};
    struct sbx_proc_read_result r = {.size = sizeof r};
    int rc = sbxp_proc_read(cl, CALL, id, &ra, &r);
    cr_assert(rc == SBX_E_UNAVAILABLE, "rc %d: %s", rc, last_err);
}

static double mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static double median_of(double *v, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return v[n / 2];
}

/* A keystroke through the supervisor (a 1-byte write, the read of its
 * echo) against the same through a raw PTY: measured and printed. */
Test(proc_supervisor, keystroke_latency)
{
    enum { N = 300 };
    static double t[N];
    const char *argv[] = {"sh", "-c", "stty raw -echo; echo ready; exec cat", NULL};
    struct sbx_proc_spec spec = {.size = sizeof spec, .flags = SBX_PROC_PTY, .argv = argv};
    char id[SBX_PROC_ID_MAX] = "";
    start(id, &spec);
    struct buf out = {0};
    struct sbx_sink so = {sizeof so, &out, buf_write};
    struct sbx_proc_read_args a = {.size = sizeof a, .wait_ms = 500, .out = &so};
    struct sbx_proc_read_result r = {.size = sizeof r};
    for (int i = 0; i < 40 && !(out.p && strstr(out.p, "ready\r\n")); i++) {
        cr_assert_eq(sbxp_proc_read(cl, CALL, id, &a, &r), SBX_OK);
        a.out_cursor = r.out_cursor;
    }
    for (int i = 0; i < N; i++) {
        double t0 = mono_ms();
        cr_assert_eq(sbxp_proc_write(cl, CALL, id, "k", 1, 0), SBX_OK);
        size_t want = out.n + 1;
        while (out.n < want) {
            cr_assert_eq(sbxp_proc_read(cl, CALL, id, &a, &r), SBX_OK);
            a.out_cursor = r.out_cursor;
        }
        t[i] = mono_ms() - t0;
    }
    double via = median_of(t, N);
    uint64_t hits = sbxp_proc_client_echo_hits(cl);
    /* every keystroke's write was pipelined (the read of its echo is the
     * one round trip) */
    uint64_t piped = sbxp_proc_client_pipelined(cl);
    cr_expect_geq(piped, (uint64_t)N, "%llu of %d writes were pipelined",
                  (unsigned long long)piped, N);
    int m, sl;
    cr_assert_eq(openpty(&m, &sl, NULL, NULL, NULL), 0);
    /* raw before cat starts: no echo by the line discipline, only cat's */
    struct termios tio;
    tcgetattr(sl, &tio);
    cfmakeraw(&tio);
    tcsetattr(sl, TCSANOW, &tio);
    pid_t pid = fork();
    if (pid == 0) {
        setsid();
        dup2(sl, 0);
        dup2(sl, 1);
        close(m);
        execlp("cat", "cat", (char *)NULL);
        _exit(127);
    }
    close(sl);
    char c;
    for (int i = 0; i < N; i++) {
        double t0 = mono_ms();
        cr_assert_eq(write(m, "k", 1), 1);
        cr_assert_eq(read(m, &c, 1), 1);
        t[i] = mono_ms() - t0;
    }
    double raw = median_of(t, N);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    close(m);
    fprintf(stderr, "[measured] keystroke round trip (median of %d): supervisor %.3f ms, raw "
                    "PTY %.3f ms (%.1fx); %llu writes pipelined, %llu echoes came with their "
                    "write\n",
            N, via, raw, via / raw, (unsigned long long)piped, (unsigned long long)hits);
}

Test(proc_supervisor, kill_all_ends_every_process)
{
    const char *argv[] = {"sh", "-c", "sleep 100 & sleep 100", NULL};
    struct sbx_proc_spec spec = {.size = sizeof spec, .argv = argv};
    char a[SBX_PROC_ID_MAX] = "", b[SBX_PROC_ID_MAX] = "";
    start(a, &spec);
    spec.flags = SBX_PROC_PTY;
    start(b, &spec);
    cr_assert_eq(sbxp_proc_kill_all(cl, CALL), SBX_OK, "%s", last_err);
    struct buf out = {0}, err = {0};
    struct sbx_proc_read_result r = read_all(a, &out, &err, NULL);
    cr_assert_eq(r.term_signal, 9);
    r = read_all(b, &out, &err, NULL);
    cr_assert_eq(r.term_signal, 9);
}

/* ---- coalescing: a flood's reads carry large chunks, an echo is not held */

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

struct flood_stats {
    size_t median_chunk; /* of the answers that carried bytes */
    size_t answers;
    double tail_ms;      /* the marker after the flood: from the flood's last byte */
    double echo_median_ms, echo_max_ms;
};

/* 8 MiB of terminal output read with 256 KiB reads, as fast as this
 * process can (so that a reader that keeps up gets what the supervisor
 * answers with), then a marker, then keystrokes echoed by cat after 50 ms
 * of quiet. */
static void flood_then_keys(struct flood_stats *st)
{
    enum { FLOOD = 8 << 20, KEYS = 20, MAXA = 8192 };
    const char *argv[] = {"sh", "-c",
                          "stty raw -echo; head -c 8388608 /dev/zero; printf M; exec cat",
                          NULL};
    struct sbx_proc_spec spec = {.size = sizeof spec, .flags = SBX_PROC_PTY, .argv = argv};
    char id[SBX_PROC_ID_MAX] = "";
    start(id, &spec);
    struct buf out = {0};
    struct sbx_sink so = {sizeof so, &out, buf_write};
    struct sbx_proc_read_args a = {.size = sizeof a, .wait_ms = 5000, .max_bytes = 256 << 10,
                                   .out = &so};
    struct sbx_proc_read_result r = {.size = sizeof r};
    static size_t sizes[MAXA];
    size_t n = 0;
    uint64_t lost = 0;
    double last_flood = 0;
    /* the flood: only the sizes are kept (out is reset at each answer) */
    while (a.out_cursor < FLOOD) {
        out.n = 0;
        cr_assert_eq(sbxp_proc_read(cl, CALL, id, &a, &r), SBX_OK, "%s", last_err);
        cr_assert(r.state == SBX_PROC_RUNNING, "the flood ended early at %llu",
                  (unsigned long long)r.out_cursor);
        lost += r.out_lost;
        size_t got = (size_t)(r.out_cursor - a.out_cursor - r.out_lost);
        if (got && n < MAXA && r.out_cursor <= FLOOD - 1)
            sizes[n++] = got; /* not the last, which may carry the marker */
        a.out_cursor = r.out_cursor;
        last_flood = mono_ms_now();
    }
    /* the marker (it may have come with the flood's last bytes) */
    while (!(out.n && out.p[out.n - 1] == 'M')) {
        out.n = 0;
        cr_assert_eq(sbxp_proc_read(cl, CALL, id, &a, &r), SBX_OK, "%s", last_err);
        a.out_cursor = r.out_cursor;
    }
    st->tail_ms = mono_ms_now() - last_flood;
    cr_assert_eq(a.out_cursor, (uint64_t)FLOOD + 1, "cursor %llu, lost %llu",
                 (unsigned long long)a.out_cursor, (unsigned long long)lost);
    cr_assert_gt(n, 0);
    qsort(sizes, n, sizeof *sizes, cmp_size);
    st->median_chunk = sizes[n / 2];
    st->answers = n;
    /* quiet, then keystrokes: each echo is answered when it comes */
    struct timespec q = {0, 50 * 1000 * 1000};
    nanosleep(&q, NULL);
    static double t[KEYS];
    st->echo_max_ms = 0;
    for (int i = 0; i < KEYS; i++) {
        double t0 = mono_ms_now();
        cr_assert_eq(sbxp_proc_write(cl, CALL, id, "k", 1, 0), SBX_OK, "%s", last_err);
        uint64_t want = a.out_cursor + 1;
        while (a.out_cursor < want) {
            cr_assert_eq(sbxp_proc_read(cl, CALL, id, &a, &r), SBX_OK, "%s", last_err);
            a.out_cursor = r.out_cursor;
        }
        t[i] = mono_ms_now() - t0;
        if (t[i] > st->echo_max_ms)
            st->echo_max_ms = t[i];
    }
    st->echo_median_ms = median_of(t, KEYS);
    cr_assert_eq(sbxp_proc_signal(cl, CALL, id, SIGKILL), SBX_OK, "%s", last_err);
    fprintf(stderr,
            "[measured] flood of 8 MiB: %zu answers, median %zu bytes, lost %llu; marker "
            "%.2f ms after the flood; echo after quiet: median %.2f ms, max %.2f ms\n",
            n, st->median_chunk, (unsigned long long)lost, st->tail_ms, st->echo_median_ms,
            st->echo_max_ms);
}

/* A reader that keeps up with a flood gets answers of tens of KiB, not
 * one terminal read's worth (4 KiB at most, 1 to 2 KiB mostly): the
 * supervisor holds a read of a flooding stream until max_bytes are there
 * or for 4 ms. A keystroke's echo after the flood is answered at
 * once (its stream is quiet: nothing is held). */
Test(proc_supervisor, a_flood_is_read_in_large_chunks_and_an_echo_is_not_held)
{
    struct flood_stats st;
    flood_then_keys(&st);
    cr_expect_geq(st.median_chunk, 32u << 10, "median answer %zu bytes over %zu answers",
                  st.median_chunk, st.answers);
    cr_expect_lt(st.echo_median_ms, 20.0, "echo median %.2f ms", st.echo_median_ms);
}

/* With a hold far longer than anything else in the test (500 ms), what
 * ends a hold is unmistakable: a flood's reads are answered when
 * max_bytes (256 KiB) are there, so every answer but the last carries
 * exactly that (the old rule answered one terminal read, 4 KiB at most);
 * the last is answered when the process ends, not at the hold; and a
 * keystroke's echo on a terminal that flooded 50 ms before is not held (a
 * rule that held it would make it wait the 500 ms). */
static void long_hold(void)
{
    sup_hold_us = 500 * 1000;
    setup();
}

static void long_hold_fini(void)
{
    teardown();
    sup_hold_us = 0;
}

TestSuite(proc_coalesce, .init = long_hold, .fini = long_hold_fini, .timeout = 30);

Test(proc_coalesce, a_held_read_ends_at_max_bytes_or_the_end_and_never_holds_an_echo)
{
    enum { FLOOD = 8 << 20, MAXA = 4096 };
    const char *argv[] = {"sh", "-c", "stty raw -echo; exec head -c 8388608 /dev/zero", NULL};
    struct sbx_proc_spec spec = {.size = sizeof spec, .flags = SBX_PROC_PTY, .argv = argv};
    char id[SBX_PROC_ID_MAX] = "";
    start(id, &spec);
    struct buf out = {0};
    struct sbx_sink so = {sizeof so, &out, buf_write};
    struct sbx_proc_read_args a = {.size = sizeof a, .wait_ms = 5000, .max_bytes = 256 << 10,
                                   .out = &so};
    struct sbx_proc_read_result r = {.size = sizeof r};
    static size_t sizes[MAXA];
    size_t n = 0, full = 0;
    uint64_t lost = 0;
    double last_ms = 0;
    do {
        out.n = 0;
        double t0 = mono_ms_now();
        cr_assert_eq(sbxp_proc_read(cl, CALL, id, &a, &r), SBX_OK, "%s", last_err);
        last_ms = mono_ms_now() - t0;
        lost += r.out_lost;
        size_t got = (size_t)(r.out_cursor - a.out_cursor - r.out_lost);
        if (got && n < MAXA)
            sizes[n++] = got;
        full += got == 256u << 10;
        a.out_cursor = r.out_cursor;
    } while (!r.eof);
    cr_assert_eq(a.out_cursor, (uint64_t)FLOOD);
    cr_assert_gt(n, 1);
    n--; /* not the last */
    qsort(sizes, n, sizeof *sizes, cmp_size);
    /* the process's end answers the last read, not the 500 ms hold */
    fprintf(stderr,
            "[measured] hold 500 ms, 8 MiB flood: %zu answers before the last, %zu of 256 "
            "KiB, median %zu bytes, lost %llu; the last read %.2f ms\n",
            n, full, sizes[n / 2], (unsigned long long)lost, last_ms);
    /* a flood, then keystrokes on the same terminal: their echoes are
     * not held (a few bytes) */
    struct flood_stats st;
    flood_then_keys(&st);
    cr_expect_eq(sizes[n / 2], 256u << 10, "median answer %zu bytes over %zu answers",
                 sizes[n / 2], n);
    cr_expect_lt(last_ms, 300.0, "the last read took %.2f ms", last_ms);
    cr_expect_lt(st.echo_median_ms, 50.0, "echo median %.2f ms", st.echo_median_ms);
    cr_expect_lt(st.echo_max_ms, 300.0, "echo max %.2f ms", st.echo_max_ms);
}
