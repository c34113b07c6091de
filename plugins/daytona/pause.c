/*
 * pause.c - pause and resume (SBX_CAP_PAUSE) as Daytona's stop and start
 * (openapi.yaml POST /sandbox/{id}/stop, /start): a stopped sandbox keeps
 * its filesystem (the workspace, the memory attachments' trees) and runs
 * nothing; its processes end (SIGTERM, as at destroy) and its toolbox is
 * unreachable until it is started again. Daytona's /pause is not used:
 * its spec says only "pause has been initiated", not what survives, and
 * start resumes a paused sandbox as well, so one someone else paused is
 * handled all the same.
 *
 * Both ops act on the sandbox and are idempotent: pause of a stopped one
 * and resume of a started one are SBX_OK. Every other op starts a stopped
 * sandbox first: daytona_wake before a toolbox request when this handle
 * stopped it; daytona_revive when a toolbox request failed and the API
 * says the sandbox is down (auto-stop, or stopped elsewhere). See
 * daytona.h.
 */
#include "daytona.h"

#include <stdio.h>
#include <string.h>

static void set_paused(sbx_sandbox *sb, int v)
{
    __atomic_store_n(&sb->paused, v, __ATOMIC_RELEASE);
}

int daytona_pause(sbx_sandbox *sb, sbx_call *call, uint32_t flags)
{
    struct daytona_state *st = sb->st;
    if (flags)
        return daytona_error(st, call, SBX_E_INVALID, DT ": pause: flags %#x are not defined",
                             (unsigned)flags);
    struct daytona_wait w;
    int rc = daytona_api_wait_stopped(st, call, sb->id, &w);
    if (rc != SBX_OK)
        return daytona_wait_report(st, call, &w);
    set_paused(sb, 1);
    return SBX_OK;
}

int daytona_resume(sbx_sandbox *sb, sbx_call *call)
{
    struct daytona_state *st = sb->st;
    struct daytona_wait w;
    int rc = daytona_api_wait_started_quiet(st, call, sb->id, NULL, &w);
    if (rc != SBX_OK)
        return daytona_wait_report(st, call, &w);
    set_paused(sb, 0);
    return SBX_OK;
}

/* Start the sandbox and wait; a failure is copied into err. */
static int start_quiet(sbx_sandbox *sb, sbx_call *call, sbxp_http_error *err)
{
    struct daytona_wait w;
    int rc = daytona_api_wait_started_quiet(sb->st, call, sb->id, NULL, &w);
    if (rc == SBX_OK) {
        set_paused(sb, 0);
        sb->st->host->log(sb->st->host, SBX_LOG_INFO, DT ": sandbox %s was stopped: started",
                          sb->id);
        return SBX_OK;
    }
    if (err) {
        long http = w.err.http_status;
        if (w.what[0])
            sbxp_http_fail(err, rc, "%s: %s", w.what, w.err.message);
        else
            sbxp_http_fail(err, rc, "%s", w.err.message);
        err->http_status = http;
    }
    return rc;
}

int daytona_wake(sbx_sandbox *sb, sbx_call *call, sbxp_http_error *err)
{
    if (!__atomic_load_n(&sb->paused, __ATOMIC_ACQUIRE))
        return SBX_OK;
    return start_quiet(sb, call, err);
}

int daytona_revive(sbx_sandbox *sb, sbx_call *call, const sbxp_http_error *err)
{
    /* What the proxy answers for a sandbox that does not run (the fake:
     * 400 "Sandbox is not running"; 409, a 5xx or no answer from a
     * runner that went away), never an answer the caller's sink saw. */
    if (err->from_callback || err->status == SBX_E_CANCELLED ||
        !(err->http_status == 400 || err->http_status == 409 || err->http_status >= 500 ||
          (err->http_status == 0 && err->status == SBX_E_UNAVAILABLE)))
        return SBX_E_UNAVAILABLE;
    json_object *doc = NULL;
    sbxp_http_error e2;
    int rc = daytona_api_get(sb->st, call, sb->id, &doc, &e2);
    const char *s = rc == SBX_OK ? sbxp_json_str(doc, "state") : NULL;
    int down = s && (!strcmp(s, "stopped") || !strcmp(s, "paused") || !strcmp(s, "archived") ||
                     !strcmp(s, "stopping") || !strcmp(s, "pausing") ||
                     !strcmp(s, "starting") || !strcmp(s, "resuming"));
    json_object_put(doc);
    if (!down)
        return SBX_E_UNAVAILABLE;
    return start_quiet(sb, call, NULL);
}
