/*
 * exec_quiet.c - a helper command run to success (exec_quiet.h), as the
 * sandbox's default user whatever the handle acts as.
 */
#include "api/exec_quiet.h"
#include "api/handle_user.h"

#include <stdio.h>
#include <string.h>

/* The first 512 bytes of stderr: enough for a tool's message. */
struct tail {
    char text[512];
    size_t len;
};

static int tail_write(void *ctx, const void *buf, size_t n)
{
    struct tail *t = ctx;
    size_t room = sizeof t->text - 1 - t->len;
    memcpy(t->text + t->len, buf, n < room ? n : room);
    t->len += n < room ? n : room;
    t->text[t->len] = '\0';
    return 0;
}

int sbxh_exec_quiet(sbx_handle *h, const char *const *argv, const struct sbx_sink *out,
                    const struct sbx_source *in, sbx_cancel *cancel, char *detail,
                    size_t cap)
{
    struct tail errs = {"", 0};
    struct sbx_sink err_sink = SBX_SINK_INIT(&errs, tail_write);
    struct sbx_exec_args args;
    memset(&args, 0, sizeof args);
    args.size = sizeof args;
    args.argv = argv;
    args.out = out;
    args.err = &err_sink;
    args.in = in;
    struct sbx_exec_result res;
    memset(&res, 0, sizeof res);
    res.size = sizeof res;
    sbx_error why;
    int rc = sbxh_exec_as(h, SBX_AS_DEFAULT, &args, &res, cancel, &why);
    if (rc != SBX_OK) {
        snprintf(detail, cap, "%s", why.message);
        return rc;
    }
    if (res.exit_code == 0 && !res.term_signal)
        return SBX_OK;
    while (errs.len && (errs.text[errs.len - 1] == '\n' || errs.text[errs.len - 1] == '\r'))
        errs.text[--errs.len] = '\0';
    if (res.term_signal)
        snprintf(detail, cap, "killed by signal %d: %s", res.term_signal,
                 errs.len ? errs.text : "no message");
    else
        snprintf(detail, cap, "exit %d: %s", res.exit_code,
                 errs.len ? errs.text : "no message");
    return SBX_E_IO;
}
