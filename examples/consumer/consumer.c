/*
 * consumer.c - a program that uses libsbx the way an agent runtime does:
 * open a host context and a session manager, get the session's sandbox
 * (created on first use), run one command with its output streamed to
 * ours, and release the handle (the sandbox stays for the next call).
 *
 *   consumer SESSION COMMAND [ARGS...]
 *
 * Configuration as for the sbx command ($SBX_CONFIG, the system sbx.yaml;
 * with none, the local provider). Build: make (pkg-config sbx).
 */
#include <sbx/session.h>

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int write_fd(void *ctx, const void *buf, size_t len)
{
    int fd = *(int *)ctx;
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s SESSION COMMAND [ARGS...]\n", argv[0]);
        return 2;
    }
    sbx_error err;
    sbx_ctx *ctx = NULL;
    if (sbx_open(NULL, &ctx, &err) != SBX_OK) {
        fprintf(stderr, "consumer: %s\n", err.message);
        return 1;
    }
    sbx_sessions *m = NULL;
    struct sbx_sessions_options so;
    memset(&so, 0, sizeof so);
    so.size = sizeof so;
    if (sbx_sessions_open(ctx, &so, &m, &err) != SBX_OK) {
        fprintf(stderr, "consumer: %s\n", err.message);
        sbx_close(ctx);
        return 1;
    }
    sbx_handle *h = NULL;
    int status = 1;
    if (sbx_session_acquire(m, argv[1], NULL, NULL, &h, NULL, &err) != SBX_OK) {
        fprintf(stderr, "consumer: %s\n", err.message);
    } else {
        int out_fd = 1, err_fd = 2;
        struct sbx_sink out = SBX_SINK_INIT(&out_fd, write_fd);
        struct sbx_sink errs = SBX_SINK_INIT(&err_fd, write_fd);
        struct sbx_exec_args args;
        memset(&args, 0, sizeof args);
        args.size = sizeof args;
        args.argv = (const char *const *)(argv + 2);
        args.out = &out;
        args.err = &errs;
        struct sbx_exec_result res;
        memset(&res, 0, sizeof res);
        res.size = sizeof res;
        if (sbx_exec(h, &args, &res, NULL, &err) != SBX_OK)
            fprintf(stderr, "consumer: %s\n", err.message);
        else
            status = res.term_signal ? 128 + res.term_signal : res.exit_code;
    }
    sbx_release(h);
    sbx_sessions_close(m);
    sbx_close(ctx);
    return status;
}
