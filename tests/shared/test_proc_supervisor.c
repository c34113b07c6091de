/*
 * test_proc_supervisor.c - the process supervisor (shared/proc_supervisor.h)
 * run in a child process on a listening unix socket, driven through the
 * provider-side client (plugins/common/proc_client.h): start, stdin, output
 * by cursor with loss counted exactly, PTY, signals, timeouts, errors.
 */
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
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
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
        static char *base[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "BASE=1", NULL};
        struct sbxs_psv_config cfg = {.listen_fd = lfd, .auth = auth_uid, .handoff_fd = -1,
                                      .root_fd = root, .base_env = base, .stop_fd = -1};
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
