/*
 * processes.c - the consumer API of SBX_CAP_PROCESSES and SBX_CAP_PTY:
 * processes that outlive the call, their stdin, output by cursor,
 * signals, window size and listing.
 *
 * Besides the usual checks, libsbx holds the provider to the cursor
 * contract of proc_read: it counts the bytes the provider delivers and
 * refuses a new cursor that does not add up (a repeated or skipped byte
 * that was not counted as lost), so a caller never sees output twice.
 */
#include "api/cap_call.h"
#include "api/handle.h"
#include "api/handle_user.h"
#include "api/stream_guard.h"
#include "base/struct_size.h"
#include "registry/call.h"
#include "registry/provider.h"

#include <stdio.h>
#include <string.h>

/* Default and largest max_bytes of one proc_read, per stream. */
#define PROC_READ_DEFAULT ((uint64_t)64 << 10)

static bool proc_id_ok(const char *id)
{
    size_t n = id ? strlen(id) : 0;
    if (n == 0 || n >= SBX_PROC_ID_MAX)
        return false;
    return strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                      "0123456789._:-") == n;
}

static int check_id(const char *id, const char *op, sbx_error *err)
{
    if (proc_id_ok(id))
        return SBX_OK;
    return sbx_error_set(err, SBX_E_INVALID,
                         "%s: \"%.40s\" is not a process id (1 to 127 of A-Z, a-z, "
                         "0-9, '.', '_', ':', '-')",
                         op, id ? id : "");
}

/* The start of an op on one process (id) or on none (proc_list: has_id
 * false); a NULL id of an op that needs one is malformed, never passed on. */
static int proc_begin(sbx_handle *h, uint64_t cap, bool has_id, const char *id,
                      const char *op, sbx_cancel *cancel, sbx_error *err)
{
    int rc = sbxh_cap_call_begin(h, cap, cancel, err);
    if (rc == SBX_OK && has_id)
        rc = check_id(id, op, err);
    return rc;
}

SBX_API int sbx_proc_start(sbx_handle *h, const struct sbx_proc_spec *spec,
                           char id[SBX_PROC_ID_MAX], sbx_cancel *cancel, sbx_error *err)
{
    struct sbx_proc_spec s;
    if (!spec || !id ||
        !sbx_struct_in(&s, sizeof s, spec,
                       offsetof(struct sbx_proc_spec, argv) + sizeof s.argv)) {
        sbx_error_clear(err);
        return sbx_error_set(err, SBX_E_INVALID,
                             "proc_start: no struct sbx_proc_spec or id buffer, or the "
                             "spec's size is not set");
    }
    uint64_t cap = (s.flags & SBX_PROC_PTY) ? SBX_CAP_PTY : SBX_CAP_PROCESSES;
    int rc = sbxh_cap_call_begin(h, cap, cancel, err);
    if (rc == SBX_OK && cap == SBX_CAP_PTY)
        rc = sbx_provider_admit(h->provider, SBX_CAP_PROCESSES, err);
    if (rc != SBX_OK)
        return rc;
    if (!s.argv || !s.argv[0] || !s.argv[0][0])
        return sbx_error_set(err, SBX_E_INVALID, "proc_start: no command given");
    if (s.flags & ~SBX_PROC_PTY)
        return sbx_error_set(err, SBX_E_INVALID, "proc_start: unknown flags 0x%x",
                             (unsigned)(s.flags & ~SBX_PROC_PTY));
    if (s.timeout_ms < 0 || s.reserved != 0)
        return sbx_error_set(err, SBX_E_INVALID,
                             "proc_start: a negative timeout or a reserved member set");
    if (s.flags & SBX_PROC_PTY) {
        if (!s.rows)
            s.rows = 24;
        if (!s.cols)
            s.cols = 80;
    }
    char got[SBX_PROC_ID_MAX];
    memset(got, 0, sizeof got);
    struct sbx_call call;
    sbxh_call_begin(&call, err, cancel);
    call.user = sbxh_acting_user(h, SBX_AS_HANDLE);
    rc = SBX_PROVIDER_OP(h->provider, proc_start)(h->sb, &call, &s, got);
    rc = sbxh_call_end(&call, rc, h->provider->plugin.name, "proc_start");
    if (rc != SBX_OK)
        return rc;
    if (got[SBX_PROC_ID_MAX - 1] != '\0' || !proc_id_ok(got))
        return sbx_error_set(err, SBX_E_PROTOCOL,
                             "provider \"%s\": proc_start returned a malformed process id",
                             h->provider->plugin.name);
    memcpy(id, got, sizeof got);
    return SBX_OK;
}

SBX_API int sbx_proc_write(sbx_handle *h, const char *id, const void *data, size_t len,
                           uint32_t flags, sbx_cancel *cancel, sbx_error *err)
{
    int rc = proc_begin(h, SBX_CAP_PROCESSES, true, id, "proc_write", cancel, err);
    if (rc != SBX_OK)
        return rc;
    if ((len && !data) || (flags & ~SBX_PROC_WRITE_CLOSE))
        return sbx_error_set(err, SBX_E_INVALID,
                             "proc_write: no data for %zu bytes, or unknown flags", len);
    struct sbx_call call;
    sbxh_call_begin(&call, err, cancel);
    call.user = sbxh_acting_user(h, SBX_AS_HANDLE);
    rc = SBX_PROVIDER_OP(h->provider, proc_write)(h->sb, &call, id, data ? data : "", len,
                                                  flags);
    return sbxh_call_end(&call, rc, h->provider->plugin.name, "proc_write");
}

/* Counts what the provider delivers to one stream, then passes it on
 * (or drops it when the caller gave no sink). */
struct counting_sink {
    struct sbx_sink sink;
    const struct sbx_sink *inner;
    uint64_t bytes;
};

static int counting_write(void *ctx, const void *buf, size_t len)
{
    struct counting_sink *c = ctx;
    c->bytes += len;
    return c->inner ? c->inner->write(c->inner->ctx, buf, len) : 0;
}

static void counting_init(struct counting_sink *c, const struct sbx_sink *inner)
{
    c->sink = (struct sbx_sink)SBX_SINK_INIT(c, counting_write);
    c->inner = inner;
    c->bytes = 0;
}

static int check_stream(const char *provider, const char *stream, uint64_t from,
                        uint64_t to, uint64_t lost, uint64_t delivered, uint64_t max,
                        sbx_error *err)
{
    if (delivered > max)
        return sbx_error_set(err, SBX_E_PROTOCOL,
                             "provider \"%s\": proc_read delivered %llu bytes of %s, "
                             "more than the %llu asked for",
                             provider, (unsigned long long)delivered, stream,
                             (unsigned long long)max);
    if (to != from + lost + delivered)
        return sbx_error_set(err, SBX_E_PROTOCOL,
                             "provider \"%s\": proc_read on %s moved the cursor from %llu "
                             "to %llu but delivered %llu bytes and counted %llu lost",
                             provider, stream, (unsigned long long)from,
                             (unsigned long long)to, (unsigned long long)delivered,
                             (unsigned long long)lost);
    return SBX_OK;
}

SBX_API int sbx_proc_read(sbx_handle *h, const char *id,
                          const struct sbx_proc_read_args *args,
                          struct sbx_proc_read_result *res, sbx_cancel *cancel,
                          sbx_error *err)
{
    int rc = proc_begin(h, SBX_CAP_PROCESSES, true, id, "proc_read", cancel, err);
    if (rc != SBX_OK)
        return rc;
    struct sbx_proc_read_args a;
    if (!args || !res ||
        sbx_struct_size(res) < offsetof(struct sbx_proc_read_result, eof) + sizeof res->eof ||
        !sbx_struct_in(&a, sizeof a, args, offsetof(struct sbx_proc_read_args, err) +
                                               sizeof a.err))
        return sbx_error_set(err, SBX_E_INVALID,
                             "proc_read: struct sbx_proc_read_args or "
                             "sbx_proc_read_result missing, or its size is not set");
    if (!a.max_bytes || a.max_bytes > PROC_READ_DEFAULT * 16)
        a.max_bytes = a.max_bytes ? PROC_READ_DEFAULT * 16 : PROC_READ_DEFAULT;
    struct sbx_stream_failure f = {0};
    struct sbx_guarded_sink gout, gerr;
    struct counting_sink cout, cerr;
    counting_init(&cout, sbxh_guard_sink(&gout, a.out, &f, "process stdout"));
    counting_init(&cerr, sbxh_guard_sink(&gerr, a.err, &f, "process stderr"));
    a.out = &cout.sink;
    a.err = &cerr.sink;
    struct sbx_proc_read_result r;
    memset(&r, 0, sizeof r);
    r.size = sizeof r;
    struct sbx_call call;
    sbxh_call_begin(&call, err, cancel);
    call.user = sbxh_acting_user(h, SBX_AS_HANDLE);
    rc = SBX_PROVIDER_OP(h->provider, proc_read)(h->sb, &call, id, &a, &r);
    rc = sbxh_call_end(&call, rc, h->provider->plugin.name, "proc_read");
    sbxh_guard_finish(&f, rc, call.err);
    if (rc != SBX_OK)
        return rc;
    const char *name = h->provider->plugin.name;
    if ((rc = check_stream(name, "stdout", a.out_cursor, r.out_cursor, r.out_lost,
                           cout.bytes, a.max_bytes, err)) != SBX_OK ||
        (rc = check_stream(name, "stderr", a.err_cursor, r.err_cursor, r.err_lost,
                           cerr.bytes, a.max_bytes, err)) != SBX_OK)
        return rc;
    if (r.state != SBX_PROC_RUNNING && r.state != SBX_PROC_EXITED)
        return sbx_error_set(err, SBX_E_PROTOCOL,
                             "provider \"%s\": proc_read reported state %u", name,
                             (unsigned)r.state);
    if (r.eof && r.state != SBX_PROC_EXITED)
        return sbx_error_set(err, SBX_E_PROTOCOL,
                             "provider \"%s\": proc_read reported the end of a process "
                             "that still runs",
                             name);
    sbx_struct_out(res, &r, sizeof r);
    return SBX_OK;
}

SBX_API int sbx_proc_signal(sbx_handle *h, const char *id, int signo, sbx_cancel *cancel,
                            sbx_error *err)
{
    int rc = proc_begin(h, SBX_CAP_PROCESSES, true, id, "proc_signal", cancel, err);
    if (rc != SBX_OK)
        return rc;
    if (signo < 1 || signo > 64)
        return sbx_error_set(err, SBX_E_INVALID,
                             "proc_signal: %d is not a signal number (1 to 64)", signo);
    struct sbx_call call;
    sbxh_call_begin(&call, err, cancel);
    call.user = sbxh_acting_user(h, SBX_AS_HANDLE);
    rc = SBX_PROVIDER_OP(h->provider, proc_signal)(h->sb, &call, id, signo);
    return sbxh_call_end(&call, rc, h->provider->plugin.name, "proc_signal");
}

SBX_API int sbx_proc_resize(sbx_handle *h, const char *id, unsigned rows, unsigned cols,
                            sbx_cancel *cancel, sbx_error *err)
{
    int rc = proc_begin(h, SBX_CAP_PTY, true, id, "proc_resize", cancel, err);
    if (rc != SBX_OK)
        return rc;
    if (rows < 1 || rows > 65535 || cols < 1 || cols > 65535)
        return sbx_error_set(err, SBX_E_INVALID,
                             "proc_resize: %ux%u is not a window size (1 to 65535 each)",
                             rows, cols);
    struct sbx_call call;
    sbxh_call_begin(&call, err, cancel);
    call.user = sbxh_acting_user(h, SBX_AS_HANDLE);
    rc = SBX_PROVIDER_OP(h->provider, proc_resize)(h->sb, &call, id, (uint16_t)rows,
                                                   (uint16_t)cols);
    return sbxh_call_end(&call, rc, h->provider->plugin.name, "proc_resize");
}

/* Checks each process the provider lists before the caller sees it. */
struct checked_procs {
    struct sbx_proc_list_sink sink;
    const struct sbx_proc_list_sink *inner;
    const char *provider;
    sbx_error *err;
};

static int checked_proc(void *ctx, const struct sbx_proc_info *info)
{
    struct checked_procs *c = ctx;
    if (!info || sbx_struct_size(info) < offsetof(struct sbx_proc_info, term_signal) +
                                             sizeof info->term_signal ||
        !proc_id_ok(info->id))
        return sbx_error_set(c->err, SBX_E_PROTOCOL,
                             "provider \"%s\": proc_list gave a malformed entry",
                             c->provider);
    return c->inner->entry(c->inner->ctx, info);
}

SBX_API int sbx_proc_list(sbx_handle *h, const struct sbx_proc_list_sink *sink,
                          sbx_cancel *cancel, sbx_error *err)
{
    int rc = proc_begin(h, SBX_CAP_PROCESSES, false, NULL, "proc_list", cancel, err);
    if (rc != SBX_OK)
        return rc;
    if (!sink || sbx_struct_size(sink) < offsetof(struct sbx_proc_list_sink, entry) +
                                             sizeof sink->entry ||
        !sink->entry)
        return sbx_error_set(err, SBX_E_INVALID,
                             "proc_list: no struct sbx_proc_list_sink, or its size or "
                             "entry is not set");
    struct sbx_call call;
    sbxh_call_begin(&call, err, cancel);
    call.user = sbxh_acting_user(h, SBX_AS_HANDLE);
    struct checked_procs c = {
        .sink = {sizeof c.sink, &c, checked_proc},
        .inner = sink,
        .provider = h->provider->plugin.name,
        .err = call.err,
    };
    rc = SBX_PROVIDER_OP(h->provider, proc_list)(h->sb, &call, &c.sink);
    return sbxh_call_end(&call, rc, h->provider->plugin.name, "proc_list");
}
