/*
 * proc_yield.c - the agent-style process calls: start a command (or write
 * to a running one's stdin), collect its output for at most yield_ms and
 * at most max_bytes per stream, and return either its exit status or the
 * id and cursors a later call continues from.
 *
 * Built on the public sbx_proc_* calls only, so the cursor checks of
 * processes.c apply to every read, and every provider with
 * SBX_CAP_PROCESSES gets these calls without an op of its own. The cap
 * is kept by asking each read for no more than what is left of it: what
 * is not read stays in the process's replay buffer, and the returned
 * cursor points at it.
 */
#include "base/struct_size.h"
#include "clock.h"

#include <sbx/sbx.h>

#include <string.h>

/* Default max_bytes, per stream (the default of one proc_read). */
#define YIELD_DEFAULT_MAX ((uint64_t)64 << 10)

/* The largest max_bytes one proc_read accepts (processes.c caps it). */
#define YIELD_READ_MAX ((uint64_t)1 << 20)

static int collect(sbx_handle *h, const struct sbx_proc_yield_args *a,
                   struct sbx_proc_yield_result *r, sbx_cancel *cancel, sbx_error *err)
{
    uint64_t cap = a->max_bytes ? a->max_bytes : YIELD_DEFAULT_MAX;
    int64_t deadline = sbxs_now_ms() + a->yield_ms;
    r->out_cursor = a->out_cursor;
    r->err_cursor = a->err_cursor;
    for (;;) {
        uint64_t left_out = cap - r->out_bytes, left_err = cap - r->err_bytes;
        /* One read may take at most what is left of the smaller budget:
         * proc_read has one max_bytes for both streams. */
        uint64_t ask = left_out < left_err ? left_out : left_err;
        if (ask > YIELD_READ_MAX)
            ask = YIELD_READ_MAX;
        int64_t now = sbxs_now_ms();
        int64_t wait = deadline > now ? deadline - now : 0;
        struct sbx_proc_read_args ra;
        memset(&ra, 0, sizeof ra);
        ra.size = sizeof ra;
        ra.wait_ms = (uint32_t)wait;
        ra.out_cursor = r->out_cursor;
        ra.err_cursor = r->err_cursor;
        ra.max_bytes = ask;
        ra.out = a->out;
        ra.err = a->err;
        struct sbx_proc_read_result rr;
        memset(&rr, 0, sizeof rr);
        rr.size = sizeof rr;
        int rc = sbx_proc_read(h, r->id, &ra, &rr, cancel, err);
        if (rc != SBX_OK)
            return rc;
        /* processes.c checked: new cursor = old + lost + delivered. */
        r->out_bytes += rr.out_cursor - r->out_cursor - rr.out_lost;
        r->err_bytes += rr.err_cursor - r->err_cursor - rr.err_lost;
        r->out_lost += rr.out_lost;
        r->err_lost += rr.err_lost;
        r->out_cursor = rr.out_cursor;
        r->err_cursor = rr.err_cursor;
        r->state = rr.state;
        r->exit_code = rr.exit_code;
        r->term_signal = rr.term_signal;
        r->timed_out = rr.timed_out;
        r->eof = rr.eof;
        if (rr.eof)
            return SBX_OK;
        if (r->out_bytes >= cap || r->err_bytes >= cap) {
            r->truncated = 1;
            return SBX_OK;
        }
        if (sbxs_now_ms() >= deadline)
            return SBX_OK;
    }
}

/* The caller's args and result as full-size working copies. */
static int begin(const char *op, const struct sbx_proc_yield_args *args,
                 struct sbx_proc_yield_args *a, struct sbx_proc_yield_result *res,
                 struct sbx_proc_yield_result *r, sbx_error *err)
{
    memset(r, 0, sizeof *r);
    r->size = sizeof *r;
    if (!args || !res ||
        sbx_struct_size(res) < offsetof(struct sbx_proc_yield_result, truncated) +
                                   sizeof res->truncated ||
        !sbx_struct_in(a, sizeof *a, args,
                       offsetof(struct sbx_proc_yield_args, err) + sizeof a->err)) {
        sbx_error_clear(err);
        return sbx_error_set(err, SBX_E_INVALID,
                             "%s: struct sbx_proc_yield_args or sbx_proc_yield_result "
                             "missing, or its size is not set",
                             op);
    }
    return SBX_OK;
}

SBX_API int sbx_proc_exec_yield(sbx_handle *h, const struct sbx_proc_spec *spec,
                                const struct sbx_proc_yield_args *args,
                                struct sbx_proc_yield_result *res, sbx_cancel *cancel,
                                sbx_error *err)
{
    struct sbx_proc_yield_args a;
    struct sbx_proc_yield_result r;
    int rc = begin("proc_exec_yield", args, &a, res, &r, err);
    if (rc != SBX_OK)
        return rc;
    /* A new process's streams start at 0, whatever the caller passed. */
    a.out_cursor = a.err_cursor = 0;
    rc = sbx_proc_start(h, spec, r.id, cancel, err);
    if (rc == SBX_OK)
        rc = collect(h, &a, &r, cancel, err);
    else
        r.id[0] = '\0';
    sbx_struct_out(res, &r, sizeof r);
    return rc;
}

SBX_API int sbx_proc_send_yield(sbx_handle *h, const char *id, const void *data,
                                size_t len, uint32_t write_flags,
                                const struct sbx_proc_yield_args *args,
                                struct sbx_proc_yield_result *res, sbx_cancel *cancel,
                                sbx_error *err)
{
    struct sbx_proc_yield_args a;
    struct sbx_proc_yield_result r;
    int rc = begin("proc_send_yield", args, &a, res, &r, err);
    if (rc != SBX_OK)
        return rc;
    if (!id || strlen(id) >= sizeof r.id)
        return sbx_error_set(err, SBX_E_INVALID,
                             "proc_send_yield: \"%.40s\" is not a process id",
                             id ? id : "");
    memcpy(r.id, id, strlen(id) + 1);
    /* Nothing to write and no close: only the read (a poll for output). */
    if (len > 0 || write_flags)
        rc = sbx_proc_write(h, id, data, len, write_flags, cancel, err);
    if (rc == SBX_OK)
        rc = collect(h, &a, &r, cancel, err);
    sbx_struct_out(res, &r, sizeof r);
    return rc;
}
