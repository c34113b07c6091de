/*
 * host_table.c - the services libsbx offers to providers (struct sbx_host).
 *
 * Each enabled provider gets its own table whose ctx points back at its
 * record, so config lookups see only that provider's section and log lines
 * carry its name.
 */
#include "registry/call.h"
#include "base/cancel.h"
#include "registry/host_table.h"

#include <stdarg.h>
#include <stdio.h>

static const char *level_name(int level)
{
    switch (level) {
    case SBX_LOG_ERROR: return "error";
    case SBX_LOG_WARN: return "warning";
    case SBX_LOG_INFO: return "info";
    default: return "debug";
    }
}

static void host_log(const struct sbx_host *host, int level, const char *fmt, ...)
    SBX_PRINTF_LIKE(3, 4);
static void host_log(const struct sbx_host *host, int level, const char *fmt, ...)
{
    const struct sbx_provider *p = host->ctx;
    if (level > p->ctx->log_level)
        return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (p->ctx->log) {
        p->ctx->log(p->ctx->log_ctx, level, p->plugin.name, line);
        return;
    }
    /* One write per line so concurrent providers do not interleave. */
    fprintf(stderr, "sbx: %s: %s: %s\n", p->plugin.name, level_name(level), line);
}

static int host_set_error(const struct sbx_host *host, sbx_call *call, int status,
                          const char *fmt, ...) SBX_PRINTF_LIKE(4, 5);
static int host_set_error(const struct sbx_host *host, sbx_call *call, int status,
                          const char *fmt, ...)
{
    (void)host;
    if (!call)
        return status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(call->err->message, sizeof call->err->message, fmt, ap);
    va_end(ap);
    call->err->status = status;
    return status;
}

static const char *host_config_get(const struct sbx_host *host, const char *key)
{
    const struct sbx_provider *p = host->ctx;
    return sbxh_config_section_get(p->section, key);
}

static int host_config_entry(const struct sbx_host *host, const char *key,
                             size_t index, const char **name, const char **value)
{
    const struct sbx_provider *p = host->ctx;
    return sbxh_config_section_entry(p->section, key, index, name, value);
}

static int host_cancelled(const struct sbx_host *host, const sbx_call *call)
{
    (void)host;
    return call && sbx_cancel_fired(call->cancel);
}

static int host_cancel_fd(const struct sbx_host *host, const sbx_call *call)
{
    (void)host;
    return call && call->cancel ? call->cancel->fd : -1;
}

static const char *host_call_user(const struct sbx_host *host, const sbx_call *call)
{
    (void)host;
    return call ? call->user : NULL;
}

static void host_progress(const struct sbx_host *host, const sbx_call *call,
                          const char *what, uint64_t done, uint64_t total,
                          const char *detail)
{
    (void)host;
    if (!call || !call->cancel || !call->cancel->progress)
        return;
    /* kept to be repeated as the step's finished report when the op ends
     * (the call is the host's: only its progress members are written) */
    struct sbx_call *c = (struct sbx_call *)call;
    c->progressed = true;
    snprintf(c->progress_what, sizeof c->progress_what, "%s", what ? what : "");
    c->progress_done = done;
    c->progress_total = total;
    sbxh_progress(call->cancel, c->progress_what, "bytes", done, total, detail, false);
}

void sbxh_host_table_init(struct sbx_provider *p)
{
    p->host.size = sizeof p->host;
    p->host.abi_minor = SBX_ABI_MINOR;
    p->host.ctx = p;
    p->host.log = host_log;
    p->host.set_error = host_set_error;
    p->host.config_get = host_config_get;
    p->host.config_entry = host_config_entry;
    p->host.cancelled = host_cancelled;
    p->host.cancel_fd = host_cancel_fd;
    p->host.call_user = host_call_user;
    p->host.progress = host_progress;
}
