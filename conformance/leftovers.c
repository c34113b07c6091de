/*
 * leftovers.c - destroy the sandboxes a dead case process left behind and
 * say in the case's message whether that worked.
 *
 * The destroy runs in a child process of its own, through a fresh context:
 * the provider just crashed or hung a process, it may do it again, and the
 * runner must survive to write the report.
 */
#include "cf_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct destroy_job {
    const struct sbx_options *open_opts;
    const char *provider;
    const struct cf_tracked_sandbox *sb;
    size_t n;
};

/* What the cleanup child reported, per sandbox. */
struct destroy_report {
    size_t n;
    int status[CF_MAX_SANDBOXES];           /* -1: never reported */
    char message[CF_MAX_SANDBOXES][256];
};

static void destroy_child(void *arg, int report_fd)
{
    const struct destroy_job *j = arg;
    sbx_error err;
    sbx_error_clear(&err);
    sbx_ctx *ctx = NULL;
    sbx_provider *p = NULL;
    int rc = sbx_open(j->open_opts, &ctx, &err);
    if (rc == SBX_OK)
        rc = sbx_provider_lookup(ctx, j->provider, &p, &err);
    char opened[SBX_ERROR_MAX + 32] = "";
    cf_appendf(opened, sizeof opened, "opening a host context: %s", err.message);
    for (size_t i = 0; i < j->n; i++) {
        int st = rc;
        const char *why = opened;
        if (rc == SBX_OK) {
            sbx_error_clear(&err);
            st = sbx_destroy(p, j->sb[i].key, j->sb[i].ref, NULL, &err);
            why = err.message;
        }
        char head[48];
        snprintf(head, sizeof head, "%zu %d", i, st);
        cf_channel_send(report_fd, CF_REC_DESTROYED, head, st == SBX_OK ? "" : why);
    }
    sbx_close(ctx);
}

static void on_destroy_record(void *ud, const struct cf_record *rec)
{
    struct destroy_report *r = ud;
    if (rec->type != CF_REC_DESTROYED)
        return;
    size_t i;
    int st;
    if (sscanf(rec->a, "%zu %d", &i, &st) != 2 || i >= r->n)
        return;
    r->status[i] = st;
    snprintf(r->message[i], sizeof r->message[i], "%s", rec->b);
}

void cf_leftovers_destroy(const struct sbx_options *open_opts, const char *provider,
                          const struct cf_tracked_sandbox *sb, size_t n,
                          double timeout_s, char *msg, size_t cap)
{
    if (n == 0) {
        cf_appendf(msg, cap, "; it had created no sandbox");
        return;
    }
    if (n > CF_MAX_SANDBOXES)
        n = CF_MAX_SANDBOXES;
    struct destroy_report *rep = calloc(1, sizeof *rep);
    if (!rep) {
        cf_appendf(msg, cap, "; %zu sandboxes left, not destroyed: out of memory", n);
        return;
    }
    rep->n = n;
    for (size_t i = 0; i < n; i++)
        rep->status[i] = -1;
    struct destroy_job job = {open_opts, provider, sb, n};
    struct cf_child_end end;
    memset(&end, 0, sizeof end);
    sbx_error err;
    sbx_error_clear(&err);
    char why[SBX_ERROR_MAX + 64] = "";
    if (cf_child_run(destroy_child, &job, timeout_s, on_destroy_record, rep, &end,
                     &err) != SBX_OK) {
        cf_appendf(why, sizeof why, "cannot start the cleanup process: %s",
                   err.message);
    } else if (end.timed_out) {
        snprintf(why, sizeof why, "the cleanup process was killed after %g s",
                 timeout_s);
    } else {
        char how[128];
        snprintf(why, sizeof why, "the cleanup process %s",
                 cf_child_end_text(&end, how, sizeof how));
    }

    for (size_t i = 0; i < n; i++) {
        char ref[600], key[300];
        cf_appendf(msg, cap, "; sandbox left: provider \"%s\" ref %s (session key %s), ",
                   provider, cf_quote(sb[i].ref, strlen(sb[i].ref), ref, sizeof ref),
                   cf_quote(sb[i].key, strlen(sb[i].key), key, sizeof key));
        if (rep->status[i] == SBX_OK)
            cf_appendf(msg, cap, "destroyed by the runner");
        else if (rep->status[i] > 0)
            cf_appendf(msg, cap, "destroy by the runner failed: %s: %s",
                       cf_status_name(rep->status[i]), rep->message[i]);
        else
            cf_appendf(msg, cap, "not destroyed: %s", why);
    }
    free(rep);
}
