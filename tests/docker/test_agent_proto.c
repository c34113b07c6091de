/*
 * test_agent_proto.c - sbx-agent alone, on this host (no daemon needed):
 * the protocol as documented in shared/agent_proto/PROTOCOL.md, and what malformed or
 * hostile input does to it. The agent runs in a temp directory with
 * --trust-local-peers (compiled only with SBX_TEST_HOOKS), since a peer in
 * its own PID namespace is otherwise refused.
 *
 * Every malformed conversation must end with an AP_ERROR frame or a closed
 * connection, never a crash: after each one the agent still answers a
 * ping, and nothing was written outside the workspace.
 */
#include "agent_proto/proto.h"

#include <criterion/criterion.h>

#include <openssl/evp.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The conversations below are protocol 1's (no user field), which the
 * agent keeps serving; protocol 2's are in users_ below. */
#define V1 1u

static char dir[] = "/tmp/sbx-agent-test-XXXXXX";
static char sock[100], ws[100];
static pid_t agent = -1;

static int connect_agent(void)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert_geq(fd, 0);
    for (int i = 0; i < 200; i++) {
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0)
            return fd;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    cr_assert_fail("cannot connect to %s: %s", sock, strerror(errno));
    return -1;
}

static void send_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t k = send(fd, c, n, MSG_NOSIGNAL);
        if (k <= 0)
            return; /* the agent may close early: that is allowed */
        c += k;
        n -= (size_t)k;
    }
}

/* Read until the agent closes (within 5 s); returns the bytes read into buf. */
static size_t read_to_end(int fd, unsigned char *buf, size_t cap)
{
    size_t got = 0;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, 5000);
        cr_assert_gt(r, 0, "the agent neither answered nor closed within 5 s");
        ssize_t k = recv(fd, buf + got, cap - got, 0);
        if (k <= 0)
            return got;
        got += (size_t)k;
        if (got == cap)
            return got;
    }
}

/* Parse the answer after the agent's preamble; the type of its last frame
 * (0 when none) and, for AP_ERROR, the message. */
static int last_frame(const unsigned char *buf, size_t n, char *msg, size_t cap)
{
    size_t off = AP_PREAMBLE_LEN;
    int last = 0;
    msg[0] = '\0';
    while (off + AP_HDR_LEN <= n) {
        int type;
        uint32_t len;
        if (sbxs_ap_parse_header(buf + off, &type, &len) != 0 || off + AP_HDR_LEN + len > n)
            break;
        last = type;
        if (type == AP_ERROR) {
            struct ap_in in;
            sbxs_ap_in_begin(&in, buf + off + AP_HDR_LEN, len);
            sbxs_ap_get_u32(&in);
            free(sbxs_ap_get_str(&in));
            char *m = sbxs_ap_get_str(&in);
            snprintf(msg, cap, "%s", m ? m : "");
            free(m);
        }
        off += AP_HDR_LEN + len;
    }
    return last;
}

static void ping_ok(void)
{
    int fd = connect_agent();
    unsigned char out[AP_PREAMBLE_LEN + AP_HDR_LEN];
    sbxs_ap_preamble(out, V1);
    sbxs_ap_header(out + AP_PREAMBLE_LEN, AP_PING, 0);
    send_all(fd, out, sizeof out);
    unsigned char buf[512];
    size_t n = read_to_end(fd, buf, sizeof buf);
    close(fd);
    char msg[256];
    cr_assert_eq(last_frame(buf, n, msg, sizeof msg), AP_PONG, "no pong after fuzzing");
    int status;
    cr_assert_eq(waitpid(agent, &status, WNOHANG), 0, "the agent died");
}

static void start(void)
{
    char bin[1024];
    snprintf(bin, sizeof bin, "%s/sbx-agent", SBX_TEST_PROVIDER_DIR);
    cr_assert_not_null(mkdtemp(dir));
    snprintf(sock, sizeof sock, "%s/run.sock", dir);
    snprintf(ws, sizeof ws, "%s/ws", dir);
    cr_assert_eq(mkdir(ws, 0755), 0);
    agent = fork();
    if (agent == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 2);
        execl(bin, bin, "serve", "--socket", sock, "--root", ws, "--trust-local-peers",
              (char *)NULL);
        _exit(127);
    }
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
    int status;
    if (waitpid(agent, &status, WNOHANG) == agent)
        cr_skip_test("sbx-agent was built without SBX_TEST_HOOKS (no --trust-local-peers)");
}

static void stop(void)
{
    if (agent > 0) {
        kill(agent, SIGTERM);
        waitpid(agent, NULL, 0);
    }
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

TestSuite(agent_proto, .init = start, .fini = stop, .timeout = 120);

/* A conversation: raw bytes after (or instead of) the preamble. Returns the
 * last frame type and the error message. */
static int converse(const void *bytes, size_t n, int with_preamble, char *msg, size_t cap)
{
    int fd = connect_agent();
    if (with_preamble) {
        unsigned char pre[AP_PREAMBLE_LEN];
        sbxs_ap_preamble(pre, V1);
        send_all(fd, pre, sizeof pre);
    }
    send_all(fd, bytes, n);
    shutdown(fd, SHUT_WR);
    static unsigned char buf[1 << 20];
    size_t got = read_to_end(fd, buf, sizeof buf);
    close(fd);
    return last_frame(buf, got, msg, cap);
}

Test(agent_proto, version_mismatch_is_a_clear_error)
{
    unsigned char pre[AP_PREAMBLE_LEN];
    sbxs_ap_preamble(pre, AP_VERSION + 41);
    char msg[256];
    cr_assert_eq(converse(pre, sizeof pre, 0, msg, sizeof msg), AP_ERROR);
    char want[32], client[32];
    snprintf(want, sizeof want, "protocol %u", AP_VERSION);
    snprintf(client, sizeof client, "%u", AP_VERSION + 41);
    cr_expect(strstr(msg, want) && strstr(msg, client), "%s", msg);
    cr_assert_eq(converse("HTTP/1.1", 8, 0, msg, sizeof msg), AP_ERROR);
    cr_expect(strstr(msg, "bad magic"), "%s", msg);
    ping_ok();
}

Test(agent_proto, malformed_requests_get_an_error_and_a_close)
{
    unsigned char f[256];
    char msg[256];
    struct ap_out o;
    /* unknown type */
    sbxs_ap_header(f, 'V', 0);
    cr_expect_eq(converse(f, AP_HDR_LEN, 1, msg, sizeof msg), AP_ERROR);
    cr_expect(strstr(msg, "unknown request"), "%s", msg);
    /* a frame longer than the limit */
    sbxs_ap_header(f, AP_EXEC, AP_FRAME_MAX + 1);
    cr_expect_eq(converse(f, AP_HDR_LEN, 1, msg, sizeof msg), AP_ERROR);
    cr_expect(strstr(msg, "longer than"), "%s", msg);
    /* a string running past the end of its frame */
    sbxs_ap_out_begin(&o, f, sizeof f, AP_READ);
    sbxs_ap_put_u32(&o, 1000);
    size_t n = sbxs_ap_out_end(&o);
    cr_expect_eq(converse(f, n, 1, msg, sizeof msg), AP_ERROR);
    cr_expect(strstr(msg, "malformed"), "%s", msg);
    /* exec with zero arguments, then with a NUL in a string */
    sbxs_ap_out_begin(&o, f, sizeof f, AP_EXEC);
    sbxs_ap_put_u64(&o, 0);
    sbxs_ap_put_str(&o, "");
    sbxs_ap_put_u32(&o, 0);
    sbxs_ap_put_u32(&o, 0);
    n = sbxs_ap_out_end(&o);
    cr_expect_eq(converse(f, n, 1, msg, sizeof msg), AP_ERROR);
    sbxs_ap_out_begin(&o, f, sizeof f, AP_EXEC);
    sbxs_ap_put_u64(&o, 0);
    sbxs_ap_put_str(&o, "");
    sbxs_ap_put_u32(&o, 1);
    sbxs_ap_put_u32(&o, 3);
    sbxs_ap_put_bytes(&o, "a\0b", 3);
    sbxs_ap_put_u32(&o, 0);
    n = sbxs_ap_out_end(&o);
    cr_expect_eq(converse(f, n, 1, msg, sizeof msg), AP_ERROR);
    /* an env entry without '=' */
    sbxs_ap_out_begin(&o, f, sizeof f, AP_EXEC);
    sbxs_ap_put_u64(&o, 0);
    sbxs_ap_put_str(&o, "");
    sbxs_ap_put_u32(&o, 1);
    sbxs_ap_put_str(&o, "true");
    sbxs_ap_put_u32(&o, 1);
    sbxs_ap_put_str(&o, "NOEQUALS");
    n = sbxs_ap_out_end(&o);
    cr_expect_eq(converse(f, n, 1, msg, sizeof msg), AP_ERROR);
    /* a root the agent does not serve, an absolute path, an escape */
    sbxs_ap_out_begin(&o, f, sizeof f, AP_READ);
    sbxs_ap_put_str(&o, "/etc");
    sbxs_ap_put_str(&o, "passwd");
    n = sbxs_ap_out_end(&o);
    cr_expect_eq(converse(f, n, 1, msg, sizeof msg), AP_ERROR);
    cr_expect(strstr(msg, "not a root"), "%s", msg);
    sbxs_ap_out_begin(&o, f, sizeof f, AP_READ);
    sbxs_ap_put_str(&o, ws);
    sbxs_ap_put_str(&o, "../../../etc/passwd");
    n = sbxs_ap_out_end(&o);
    cr_expect_eq(converse(f, n, 1, msg, sizeof msg), AP_ERROR);
    cr_expect(strstr(msg, "leads out"), "%s", msg);
    ping_ok();
}

/* Random frames after the preamble: whatever they are, no crash. */
Test(agent_proto, random_frames_never_crash_the_agent)
{
    unsigned char f[4096];
    char msg[256];
    static const char types[] = "PXRWALMUijgcdtpoezZnaykfQ\0\xff";
    for (int i = 0; i < 300; i++) {
        size_t n = 0;
        unsigned char r[2];
        cr_assert_eq(getrandom(r, sizeof r, 0), 2);
        /* a plausible type with a random payload, or pure noise */
        if (r[0] & 1) {
            size_t len = r[1] % 200;
            sbxs_ap_header(f, types[(size_t)(r[0] >> 1) % (sizeof types - 1)], (uint32_t)len);
            cr_assert_eq(getrandom(f + AP_HDR_LEN, len, 0), (ssize_t)len);
            n = AP_HDR_LEN + len;
        } else {
            n = 1 + r[1] % 64;
            cr_assert_eq(getrandom(f, n, 0), (ssize_t)n);
        }
        int t = converse(f, n, 1, msg, sizeof msg);
        /* an error, a pong, an exec's or a file op's end, or just a close */
        cr_expect(t == 0 || t == AP_ERROR || t == AP_PONG || t == AP_EXIT || t == AP_OK ||
                      t == AP_END || t == AP_STATR,
                  "iteration %d: unexpected last frame 0x%02x", i, t);
    }
    ping_ok();
    /* nothing appeared beside the workspace */
    char cmd[600];
    snprintf(cmd, sizeof cmd, "test \"$(ls -A %s | sort | tr '\\n' ' ')\" = 'run.sock ws '", dir);
    cr_expect_eq(system(cmd), 0, "files appeared outside the workspace");
}

/* A write whose connection ends before the trailer, or whose trailer is
 * wrong, publishes nothing and leaves no temporary. */
Test(agent_proto, write_without_a_valid_trailer_publishes_nothing)
{
    char path[512];
    snprintf(path, sizeof path, "%s/f.txt", ws);
    FILE *old = fopen(path, "w");
    fputs("old\n", old);
    fclose(old);
    for (int variant = 0; variant < 3; variant++) {
        unsigned char f[512];
        struct ap_out o;
        sbxs_ap_out_begin(&o, f, sizeof f, AP_WRITE);
        sbxs_ap_put_str(&o, ws);
        sbxs_ap_put_str(&o, "f.txt");
        sbxs_ap_put_u32(&o, 0644);
        sbxs_ap_put_u32(&o, 0);
        size_t n = sbxs_ap_out_end(&o);
        sbxs_ap_header(f + n, AP_DATA, 3);
        memcpy(f + n + AP_HDR_LEN, "new", 3);
        n += AP_HDR_LEN + 3;
        if (variant > 0) { /* a trailer with a wrong length, or a wrong digest */
            sbxs_ap_out_begin(&o, f + n, sizeof f - n, AP_TRAILER);
            sbxs_ap_put_u64(&o, variant == 1 ? 4 : 3);
            unsigned char d[32] = {0};
            sbxs_ap_put_bytes(&o, d, 32);
            n += sbxs_ap_out_end(&o);
        }
        char msg[256];
        int t = converse(f, n, 1, msg, sizeof msg);
        if (variant > 0) {
            cr_expect_eq(t, AP_ERROR);
            cr_expect(strstr(msg, variant == 1 ? "announced" : "SHA-256"), "%s", msg);
        }
        char cmd[600];
        snprintf(cmd, sizeof cmd, "test \"$(cat %s/f.txt)\" = old && test \"$(ls -A %s)\" = f.txt",
                 ws, ws);
        cr_expect_eq(system(cmd), 0, "variant %d: published or left a temporary", variant);
    }
    /* and a good one does publish */
    unsigned char f[512];
    struct ap_out o;
    sbxs_ap_out_begin(&o, f, sizeof f, AP_WRITE);
    sbxs_ap_put_str(&o, ws);
    sbxs_ap_put_str(&o, "d/e/f.txt");
    sbxs_ap_put_u32(&o, 0600);
    sbxs_ap_put_u32(&o, AP_MKPARENTS);
    size_t n = sbxs_ap_out_end(&o);
    sbxs_ap_header(f + n, AP_DATA, 3);
    memcpy(f + n + AP_HDR_LEN, "new", 3);
    n += AP_HDR_LEN + 3;
    unsigned char d[32];
    EVP_Digest("new", 3, d, NULL, EVP_sha256(), NULL);
    sbxs_ap_out_begin(&o, f + n, sizeof f - n, AP_TRAILER);
    sbxs_ap_put_u64(&o, 3);
    sbxs_ap_put_bytes(&o, d, 32);
    n += sbxs_ap_out_end(&o);
    char msg[256];
    cr_expect_eq(converse(f, n, 1, msg, sizeof msg), AP_OK, "%s", msg);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "test \"$(cat %s/d/e/f.txt)\" = new && test \"$(stat -c %%a %s/d/e/f.txt)\" = 600",
             ws, ws);
    cr_expect_eq(system(cmd), 0);
}

/* stat, list, mkdir, remove */
Test(agent_proto, stat_list_mkdir_remove)
{
    unsigned char f[512];
    struct ap_out o;
    char msg[256];
    sbxs_ap_out_begin(&o, f, sizeof f, AP_MKDIR);
    sbxs_ap_put_str(&o, ws);
    sbxs_ap_put_str(&o, "a/b/c");
    sbxs_ap_put_u32(&o, 0750);
    sbxs_ap_put_u32(&o, AP_MKPARENTS);
    cr_expect_eq(converse(f, sbxs_ap_out_end(&o), 1, msg, sizeof msg), AP_OK, "%s", msg);
    sbxs_ap_out_begin(&o, f, sizeof f, AP_STAT);
    sbxs_ap_put_str(&o, ws);
    sbxs_ap_put_str(&o, "a/b/c");
    int fd = connect_agent();
    unsigned char pre[AP_PREAMBLE_LEN];
    sbxs_ap_preamble(pre, V1);
    send_all(fd, pre, sizeof pre);
    send_all(fd, f, sbxs_ap_out_end(&o));
    unsigned char buf[256];
    size_t n = read_to_end(fd, buf, sizeof buf);
    close(fd);
    cr_assert_eq(last_frame(buf, n, msg, sizeof msg), AP_STATR);
    struct ap_in in;
    sbxs_ap_in_begin(&in, buf + AP_PREAMBLE_LEN + AP_HDR_LEN, n - AP_PREAMBLE_LEN - AP_HDR_LEN);
    cr_expect_eq(sbxs_ap_get_u32(&in), AP_KIND_DIR);
    cr_expect_eq(sbxs_ap_get_u32(&in), 0750);
    sbxs_ap_out_begin(&o, f, sizeof f, AP_LIST);
    sbxs_ap_put_str(&o, ws);
    sbxs_ap_put_str(&o, "a");
    cr_expect_eq(converse(f, sbxs_ap_out_end(&o), 1, msg, sizeof msg), AP_OK, "%s", msg);
    sbxs_ap_out_begin(&o, f, sizeof f, AP_REMOVE);
    sbxs_ap_put_str(&o, ws);
    sbxs_ap_put_str(&o, "a");
    sbxs_ap_put_u32(&o, 0);
    cr_expect_eq(converse(f, sbxs_ap_out_end(&o), 1, msg, sizeof msg), AP_ERROR);
    sbxs_ap_out_begin(&o, f, sizeof f, AP_REMOVE);
    sbxs_ap_put_str(&o, ws);
    sbxs_ap_put_str(&o, "a");
    sbxs_ap_put_u32(&o, AP_RECURSIVE);
    cr_expect_eq(converse(f, sbxs_ap_out_end(&o), 1, msg, sizeof msg), AP_OK, "%s", msg);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "test ! -e %s/a", ws);
    cr_expect_eq(system(cmd), 0);
}

/* One exec conversation: the request, then the frames the test sends, then
 * everything the agent answers until it closes. */
struct conv {
    int fd;
    unsigned char buf[1 << 16];
    size_t len;
};

static void exec_start(struct conv *cv, const char *script, uint64_t timeout_ms)
{
    cv->fd = connect_agent();
    cv->len = 0;
    unsigned char f[1024];
    struct ap_out o;
    sbxs_ap_preamble(f, V1);
    send_all(cv->fd, f, AP_PREAMBLE_LEN);
    sbxs_ap_out_begin(&o, f, sizeof f, AP_EXEC);
    sbxs_ap_put_u64(&o, timeout_ms);
    sbxs_ap_put_str(&o, "");
    sbxs_ap_put_u32(&o, 3);
    sbxs_ap_put_str(&o, "/bin/sh");
    sbxs_ap_put_str(&o, "-c");
    sbxs_ap_put_str(&o, script);
    sbxs_ap_put_u32(&o, 1);
    sbxs_ap_put_str(&o, "SBX_T=1");
    send_all(cv->fd, f, sbxs_ap_out_end(&o));
}

/* Read until the agent's output contains want (or it closes). */
static int wait_for(struct conv *cv, const char *want)
{
    for (;;) {
        if (memmem(cv->buf, cv->len, want, strlen(want)))
            return 1;
        struct pollfd p = {.fd = cv->fd, .events = POLLIN};
        if (poll(&p, 1, 5000) <= 0)
            return 0;
        ssize_t k = recv(cv->fd, cv->buf + cv->len, sizeof cv->buf - cv->len, 0);
        if (k <= 0)
            return memmem(cv->buf, cv->len, want, strlen(want)) != NULL;
        cv->len += (size_t)k;
    }
}

/* The AP_EXIT frame's fields, after reading to the end. */
static void exec_end(struct conv *cv, uint32_t *flags, uint32_t *code, uint32_t *sig)
{
    cv->len += read_to_end(cv->fd, cv->buf + cv->len, sizeof cv->buf - cv->len);
    close(cv->fd);
    char msg[256];
    cr_assert_eq(last_frame(cv->buf, cv->len, msg, sizeof msg), AP_EXIT, "%s", msg);
    /* the exit frame is the last 5 + 12 bytes */
    struct ap_in in;
    sbxs_ap_in_begin(&in, cv->buf + cv->len - 12, 12);
    *flags = sbxs_ap_get_u32(&in);
    *code = sbxs_ap_get_u32(&in);
    *sig = sbxs_ap_get_u32(&in);
}

static int alive(const char *pattern)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "pgrep -f '%s' >/dev/null", pattern);
    return system(cmd) == 0;
}

Test(agent_proto, exec_stdin_signal_cancel_and_timeout)
{
    struct conv cv;
    unsigned char f[64];
    uint32_t flags, code, sig;
    /* stdin streamed in, output and the environment out */
    exec_start(&cv, "read a; echo \"got $a $SBX_T\"; echo err >&2; exit 3", 0);
    sbxs_ap_header(f, AP_STDIN, 6);
    memcpy(f + AP_HDR_LEN, "hello\n", 6);
    send_all(cv.fd, f, AP_HDR_LEN + 6);
    sbxs_ap_header(f, AP_STDIN_END, 0);
    send_all(cv.fd, f, AP_HDR_LEN);
    exec_end(&cv, &flags, &code, &sig);
    cr_expect(memmem(cv.buf, cv.len, "got hello 1\n", 12), "no echo of stdin");
    cr_expect_eq(flags, 0);
    cr_expect_eq(code, 3);

    /* a signal frame reaches the leader */
    exec_start(&cv, "trap 'echo caught; exit 7' USR1; echo ready; while :; do sleep 0.05; done",
               0);
    sbxs_ap_header(f, AP_STDIN_END, 0);
    send_all(cv.fd, f, AP_HDR_LEN);
    cr_assert(wait_for(&cv, "ready"));
    struct ap_out o;
    sbxs_ap_out_begin(&o, f, sizeof f, AP_SIGNAL);
    sbxs_ap_put_u32(&o, SIGUSR1);
    send_all(cv.fd, f, sbxs_ap_out_end(&o));
    exec_end(&cv, &flags, &code, &sig);
    cr_expect(memmem(cv.buf, cv.len, "caught", 6));
    cr_expect_eq(code, 7);

    /* cancel: the whole tree, detached and scrubbed descendants included */
    exec_start(&cv, "setsid env -i /bin/sh -c 'sleep 4701 & sleep 4702' & echo ready; sleep 4703", 0);
    sbxs_ap_header(f, AP_STDIN_END, 0);
    send_all(cv.fd, f, AP_HDR_LEN);
    cr_assert(wait_for(&cv, "ready"));
    usleep(100000);
    cr_expect(alive("sleep 470[1]"), "the detached descendant did not start");
    sbxs_ap_header(f, AP_CANCEL, 0);
    send_all(cv.fd, f, AP_HDR_LEN);
    exec_end(&cv, &flags, &code, &sig);
    cr_expect(flags & AP_EXIT_CANCELLED);
    cr_expect(flags & AP_EXIT_SIGNALED);
    cr_expect_eq(sig, SIGKILL);
    cr_expect(!alive("sleep 470[123]"), "a descendant survived the cancel");

    /* the timeout, enforced by the agent */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    exec_start(&cv, "setsid sh -c 'sleep 4711 >/dev/null 2>&1 &' ; sleep 4712", 300);
    sbxs_ap_header(f, AP_STDIN_END, 0);
    send_all(cv.fd, f, AP_HDR_LEN);
    exec_end(&cv, &flags, &code, &sig);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
    cr_expect(flags & AP_EXIT_TIMED_OUT);
    cr_expect_lt(ms, 1300.0, "the timeout of 300 ms took %.0f ms", ms);
    cr_expect(!alive("sleep 471[12]"), "a descendant survived the timeout");
    ping_ok();
}

/* Protocol 2: a request acting as a user (here the host's nobody, as the
 * agent reads this host's /etc/passwd). Account requests are not sent:
 * this agent would edit the host's own /etc/passwd. */
static int converse_v2(const char *user, const unsigned char *frame, size_t n, char *msg,
                       size_t cap, unsigned char *out, size_t outcap, size_t *outlen)
{
    unsigned char head[AP_PREAMBLE_LEN + AP_HDR_LEN + 300];
    int type;
    uint32_t len;
    cr_assert_eq(sbxs_ap_parse_header(frame, &type, &len), 0);
    size_t ul = strlen(user);
    sbxs_ap_preamble(head, 2);
    sbxs_ap_header(head + AP_PREAMBLE_LEN, type, (uint32_t)(len + 4 + ul));
    unsigned char *u = head + AP_PREAMBLE_LEN + AP_HDR_LEN;
    u[0] = (unsigned char)(ul >> 24), u[1] = (unsigned char)(ul >> 16);
    u[2] = (unsigned char)(ul >> 8), u[3] = (unsigned char)ul;
    memcpy(u + 4, user, ul);
    int fd = connect_agent();
    send_all(fd, head, AP_PREAMBLE_LEN + AP_HDR_LEN + 4 + ul);
    send_all(fd, frame + AP_HDR_LEN, len);
    if (type == AP_EXEC) {
        unsigned char end[AP_HDR_LEN];
        sbxs_ap_header(end, AP_STDIN_END, 0);
        send_all(fd, end, sizeof end);
    }
    size_t got = read_to_end(fd, out, outcap);
    close(fd);
    if (outlen)
        *outlen = got;
    return last_frame(out, got, msg, cap);
}

Test(agent_proto, protocol_2_requests_act_as_their_user)
{
    if (getuid() != 0)
        cr_skip_test("needs root (to become another user)");
    static unsigned char buf[1 << 16];
    unsigned char f[1024];
    char msg[256];
    size_t n;
    struct ap_out o;
    /* exec: id -u of nobody */
    sbxs_ap_out_begin(&o, f, sizeof f, AP_EXEC);
    sbxs_ap_put_u64(&o, 10000);
    sbxs_ap_put_str(&o, "");
    sbxs_ap_put_u32(&o, 3);
    sbxs_ap_put_str(&o, "/bin/sh");
    sbxs_ap_put_str(&o, "-c");
    sbxs_ap_put_str(&o, "printf '<%s %s>' \"$(id -u)\" \"$HOME\"");
    sbxs_ap_put_u32(&o, 0);
    cr_assert_eq(converse_v2("nobody", f, sbxs_ap_out_end(&o), msg, sizeof msg, buf, sizeof buf, &n),
                 AP_EXIT, "%s", msg);
    cr_expect(memmem(buf, n, "<65534 /nonexistent>", 20), "exec did not run as nobody");
    /* the same request without a user runs as the agent's (root) */
    cr_assert_eq(converse_v2("", f, sbxs_ap_out_end(&o), msg, sizeof msg, buf, sizeof buf, &n),
                 AP_EXIT, "%s", msg);
    cr_expect(memmem(buf, n, "<0 /root>", 9), "exec without a user did not run as root");
    /* read of a root-only file: EACCES */
    char path[200];
    snprintf(path, sizeof path, "%s/secret", ws);
    FILE *sf = fopen(path, "w");
    cr_assert_not_null(sf);
    fputs("secret\n", sf);
    fclose(sf);
    cr_assert_eq(chmod(path, 0600), 0);
    sbxs_ap_out_begin(&o, f, sizeof f, AP_READ);
    sbxs_ap_put_str(&o, ws);
    sbxs_ap_put_str(&o, "secret");
    cr_expect_eq(converse_v2("nobody", f, sbxs_ap_out_end(&o), msg, sizeof msg, buf, sizeof buf, NULL),
                 AP_ERROR);
    cr_expect(strstr(msg, "Permission denied"), "%s", msg);
    cr_expect_eq(converse_v2("", f, sbxs_ap_out_end(&o), msg, sizeof msg, buf, sizeof buf, NULL),
                 AP_END, "%s", msg);
    /* an unknown user: refused, naming it */
    cr_expect_eq(converse_v2("no-such-user-x", f, sbxs_ap_out_end(&o), msg, sizeof msg, buf,
                             sizeof buf, NULL),
                 AP_ERROR);
    cr_expect(strstr(msg, "no-such-user-x"), "%s", msg);
    /* account requests need protocol 2 */
    sbxs_ap_out_begin(&o, f, sizeof f, AP_GROUP_ADD);
    sbxs_ap_put_str(&o, "g");
    sbxs_ap_put_u32(&o, 0);
    cr_expect_eq(converse(f, sbxs_ap_out_end(&o), 1, msg, sizeof msg), AP_ERROR);
    cr_expect(strstr(msg, "needs protocol 2"), "%s", msg);
    /* a user field that runs past its frame */
    unsigned char bad[AP_PREAMBLE_LEN + AP_HDR_LEN + 4];
    sbxs_ap_preamble(bad, 2);
    sbxs_ap_header(bad + AP_PREAMBLE_LEN, AP_READ, 4);
    memcpy(bad + AP_PREAMBLE_LEN + AP_HDR_LEN, "\0\0\1\0", 4);
    cr_expect_eq(converse(bad, sizeof bad, 0, msg, sizeof msg), AP_ERROR);
    cr_expect(strstr(msg, "malformed user field"), "%s", msg);
    ping_ok();
}

/* Read one frame (blocking, within 5 s): its type, the payload into buf. */
static int read_frame(int fd, unsigned char *buf, size_t cap, uint32_t *len)
{
    unsigned char hdr[AP_HDR_LEN];
    size_t got = 0;
    while (got < sizeof hdr) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        cr_assert_gt(poll(&p, 1, 5000), 0, "no frame within 5 s");
        ssize_t k = recv(fd, hdr + got, sizeof hdr - got, 0);
        if (k <= 0)
            return -1;
        got += (size_t)k;
    }
    int type;
    cr_assert_eq(sbxs_ap_parse_header(hdr, &type, len), 0);
    cr_assert_leq(*len, cap);
    got = 0;
    while (got < *len) {
        ssize_t k = recv(fd, buf + got, *len - got, 0);
        cr_assert_gt(k, 0);
        got += (size_t)k;
    }
    return type;
}

Test(agent_proto, protocol_3_process_channel)
{
    /* protocol 1 or 2: the channel needs 3 */
    unsigned char f[512];
    char msg[256];
    sbxs_ap_header(f, AP_PROC_CHANNEL, 0);
    cr_expect_eq(converse(f, AP_HDR_LEN, 1, msg, sizeof msg), AP_ERROR);
    cr_expect(strstr(msg, "needs protocol 3"), "%s", msg);
    /* protocol 3: preamble, channel, then several requests on it */
    int fd = connect_agent();
    struct ap_out o;
    sbxs_ap_preamble(f, 3);
    sbxs_ap_out_begin(&o, f + AP_PREAMBLE_LEN, sizeof f - AP_PREAMBLE_LEN, AP_PROC_CHANNEL);
    sbxs_ap_put_str(&o, "");
    send_all(fd, f, AP_PREAMBLE_LEN + sbxs_ap_out_end(&o));
    unsigned char pre[AP_PREAMBLE_LEN];
    cr_assert_eq(recv(fd, pre, sizeof pre, MSG_WAITALL), (ssize_t)sizeof pre);
    static unsigned char buf[AP_FRAME_MAX];
    uint32_t len;
    cr_assert_eq(read_frame(fd, buf, sizeof buf, &len), AP_OK);
    sbxs_ap_out_begin(&o, f, sizeof f, AP_PROC_START);
    sbxs_ap_put_str(&o, "");     /* user */
    sbxs_ap_put_u32(&o, 0);      /* flags */
    sbxs_ap_put_u64(&o, 0);      /* timeout */
    sbxs_ap_put_u64(&o, 0);      /* buffer */
    sbxs_ap_put_u32(&o, 0);
    sbxs_ap_put_u32(&o, 0);
    sbxs_ap_put_str(&o, "");     /* cwd */
    sbxs_ap_put_u32(&o, 3);
    sbxs_ap_put_str(&o, "sh");
    sbxs_ap_put_str(&o, "-c");
    sbxs_ap_put_str(&o, "echo hi; exit 3");
    sbxs_ap_put_u32(&o, 0);
    send_all(fd, f, sbxs_ap_out_end(&o));
    cr_assert_eq(read_frame(fd, buf, sizeof buf, &len), AP_PROC_STARTED);
    struct ap_in in;
    sbxs_ap_in_begin(&in, buf, len);
    char *id = sbxs_ap_get_str(&in);
    cr_assert(sbxs_ap_in_done(&in) && id && id[0] == 'p' && strlen(id) == 17);
    uint64_t cur = 0;
    char out[64] = "";
    size_t outn = 0;
    uint32_t flags = 0, code = 0;
    for (int i = 0; i < 20 && !(flags & AP_PR_EOF); i++) {
        sbxs_ap_out_begin(&o, f, sizeof f, AP_PROC_READ);
        sbxs_ap_put_str(&o, id);
        sbxs_ap_put_u64(&o, cur);
        sbxs_ap_put_u64(&o, 0);
        sbxs_ap_put_u32(&o, 0);
        sbxs_ap_put_u32(&o, 1000);
        send_all(fd, f, sbxs_ap_out_end(&o));
        cr_assert_eq(read_frame(fd, buf, sizeof buf, &len), AP_PROC_OUTPUT);
        sbxs_ap_in_begin(&in, buf, len);
        sbxs_ap_get_u32(&in);
        flags = sbxs_ap_get_u32(&in);
        code = sbxs_ap_get_u32(&in);
        sbxs_ap_get_u32(&in);
        cur = sbxs_ap_get_u64(&in);
        cr_assert_eq(sbxs_ap_get_u64(&in), 0);
        uint32_t n = sbxs_ap_get_u32(&in);
        cr_assert_leq(outn + n, sizeof out - 1);
        sbxs_ap_get_bytes(&in, out + outn, n);
        outn += n;
    }
    cr_assert_str_eq(out, "hi\n");
    cr_assert_eq(code, 3);
    /* an unknown id is an error, and the channel goes on */
    sbxs_ap_out_begin(&o, f, sizeof f, AP_PROC_SIGNAL);
    sbxs_ap_put_str(&o, "p0123456789abcdef");
    sbxs_ap_put_u32(&o, 9);
    send_all(fd, f, sbxs_ap_out_end(&o));
    cr_assert_eq(read_frame(fd, buf, sizeof buf, &len), AP_ERROR);
    sbxs_ap_out_begin(&o, f, sizeof f, AP_PROC_LIST);
    send_all(fd, f, sbxs_ap_out_end(&o));
    cr_assert_eq(read_frame(fd, buf, sizeof buf, &len), AP_PROC_ENTRY);
    cr_assert_eq(read_frame(fd, buf, sizeof buf, &len), AP_OK);
    /* a malformed request closes the channel */
    sbxs_ap_header(f, AP_PROC_SIGNAL, 2);
    f[5] = f[6] = 0xff;
    send_all(fd, f, AP_HDR_LEN + 2);
    cr_assert_eq(read_frame(fd, buf, sizeof buf, &len), AP_ERROR);
    cr_assert_eq(read_frame(fd, buf, sizeof buf, &len), -1);
    close(fd);
    free(id);
    ping_ok();
}

/* ---- protocol 3: files ---------------------------------------------------- */

/* One request in protocol 3 (the user field "" first); the answer after
 * the agent's preamble into out. The type of the last frame. */
static int converse_v3(const unsigned char *frame, size_t n, char *msg, size_t cap,
                       unsigned char *out, size_t outcap, size_t *outlen)
{
    unsigned char head[AP_PREAMBLE_LEN + AP_HDR_LEN + 4];
    int type;
    uint32_t len;
    cr_assert_eq(sbxs_ap_parse_header(frame, &type, &len), 0);
    cr_assert_eq(AP_HDR_LEN + (size_t)len, n);
    sbxs_ap_preamble(head, 3);
    sbxs_ap_header(head + AP_PREAMBLE_LEN, type, len + 4);
    memset(head + AP_PREAMBLE_LEN + AP_HDR_LEN, 0, 4);
    int fd = connect_agent();
    send_all(fd, head, sizeof head);
    send_all(fd, frame + AP_HDR_LEN, len);
    size_t got = read_to_end(fd, out, outcap);
    close(fd);
    if (outlen)
        *outlen = got;
    return last_frame(out, got, msg, cap);
}

Test(agent_proto, v3_rename_and_nanosecond_stat)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s/r && echo x > %s/r/a && touch -d '2020-01-02 03:04:05.123456789' "
             "%s/r/a && echo y > %s/r/b && ln -s /etc %s/r/out",
             ws, ws, ws, ws, ws);
    cr_assert_eq(system(cmd), 0);
    unsigned char f[512], out[4096];
    struct ap_out o;
    char msg[256];
    size_t n;
    /* stat: kind, mode, size, seconds, then (3) nanoseconds */
    sbxs_ap_out_begin(&o, f, sizeof f, AP_STAT);
    sbxs_ap_put_str(&o, ws);
    sbxs_ap_put_str(&o, "r/a");
    cr_assert_eq(converse_v3(f, sbxs_ap_out_end(&o), msg, sizeof msg, out, sizeof out, &n),
                 AP_STATR, "%s", msg);
    struct ap_in in;
    sbxs_ap_in_begin(&in, out + AP_PREAMBLE_LEN + AP_HDR_LEN,
                     n - AP_PREAMBLE_LEN - AP_HDR_LEN);
    cr_expect_eq(sbxs_ap_get_u32(&in), AP_KIND_FILE);
    sbxs_ap_get_u32(&in);
    cr_expect_eq(sbxs_ap_get_u64(&in), 2);
    uint64_t secs = sbxs_ap_get_u64(&in);
    uint64_t ns = sbxs_ap_get_u64(&in);
    cr_expect(sbxs_ap_in_done(&in));
    cr_expect_eq(ns % 1000000000u, 123456789u, "%llu", (unsigned long long)ns);
    cr_expect_eq(ns / 1000000000u, secs);
    /* stat of a link: the link itself */
    sbxs_ap_out_begin(&o, f, sizeof f, AP_STAT);
    sbxs_ap_put_str(&o, ws);
    sbxs_ap_put_str(&o, "r/out");
    cr_assert_eq(converse_v3(f, sbxs_ap_out_end(&o), msg, sizeof msg, out, sizeof out, &n),
                 AP_STATR, "%s", msg);
    sbxs_ap_in_begin(&in, out + AP_PREAMBLE_LEN + AP_HDR_LEN,
                     n - AP_PREAMBLE_LEN - AP_HDR_LEN);
    cr_expect_eq(sbxs_ap_get_u32(&in), AP_KIND_SYMLINK);

    /* rename: needs protocol 3 */
    sbxs_ap_out_begin(&o, f, sizeof f, AP_RENAME);
    sbxs_ap_put_str(&o, ws);
    sbxs_ap_put_str(&o, "r/a");
    sbxs_ap_put_str(&o, "r/b");
    sbxs_ap_put_u32(&o, AP_NOREPLACE);
    size_t fl = sbxs_ap_out_end(&o);
    cr_expect_eq(converse(f, fl, 1, msg, sizeof msg), AP_ERROR);
    cr_expect(strstr(msg, "needs protocol 3"), "%s", msg);
    /* no-replace: EEXIST; then replacing */
    cr_expect_eq(converse_v3(f, fl, msg, sizeof msg, out, sizeof out, NULL), AP_ERROR);
    cr_expect(strstr(msg, "exists"), "%s", msg);
    sbxs_ap_out_begin(&o, f, sizeof f, AP_RENAME);
    sbxs_ap_put_str(&o, ws);
    sbxs_ap_put_str(&o, "r/a");
    sbxs_ap_put_str(&o, "r/b");
    sbxs_ap_put_u32(&o, 0);
    cr_expect_eq(converse_v3(f, sbxs_ap_out_end(&o), msg, sizeof msg, out, sizeof out, NULL),
                 AP_OK, "%s", msg);
    snprintf(cmd, sizeof cmd, "test ! -e %s/r/a && test \"$(cat %s/r/b)\" = x", ws, ws);
    cr_expect_eq(system(cmd), 0);
    /* through a link out of the root: refused */
    sbxs_ap_out_begin(&o, f, sizeof f, AP_RENAME);
    sbxs_ap_put_str(&o, ws);
    sbxs_ap_put_str(&o, "r/out/passwd");
    sbxs_ap_put_str(&o, "r/stolen");
    sbxs_ap_put_u32(&o, 0);
    cr_expect_eq(converse_v3(f, sbxs_ap_out_end(&o), msg, sizeof msg, out, sizeof out, NULL),
                 AP_ERROR);
    cr_expect(strstr(msg, "leads out of its root"), "%s", msg);
    /* a malformed rename (an empty target) */
    sbxs_ap_out_begin(&o, f, sizeof f, AP_RENAME);
    sbxs_ap_put_str(&o, ws);
    sbxs_ap_put_str(&o, "r/b");
    sbxs_ap_put_str(&o, "");
    sbxs_ap_put_u32(&o, 0);
    cr_expect_eq(converse_v3(f, sbxs_ap_out_end(&o), msg, sizeof msg, out, sizeof out, NULL),
                 AP_ERROR);
    cr_expect(strstr(msg, "malformed"), "%s", msg);
}
