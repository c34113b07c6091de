/*
 * pause.c - pause and resume (SBX_CAP_PAUSE) through the control plane.
 *
 * E2B: POST /sandboxes/{id}/pause with a memory snapshot (openapi.yml
 * SandboxPauseRequest.memory, default true), so processes, open files and
 * the workspace survive; resume is connect ("If the sandbox is paused, it
 * will be resumed"; /resume is deprecated). Cube: the same pause route,
 * resume through POST /sandboxes/{id}/resume (cubesandbox openapi.yml, the
 * route it documents; 409 there means already running).
 *
 * Both ops act on the sandbox, not on this handle: a 409 on pause is
 * looked up (paused already is SBX_OK), and resume of a running sandbox is
 * SBX_OK. Every other op resumes a paused sandbox on its own: e2b_wake
 * before an envd request when this handle paused it, e2b_envd_resume when
 * envd's proxy answers for a sandbox it cannot reach (paused elsewhere).
 * See e2b_core.h.
 */
#include "clock.h"
#include "e2b_core.h"

#include <stdio.h>
#include <string.h>

static void set_paused(sbx_sandbox *sb, int paused)
{
    pthread_mutex_lock(&sb->lock);
    sb->paused = paused;
    if (!paused)
        sb->extended_ms = sbxs_now_ms(); /* resume sets the TTL */
    pthread_mutex_unlock(&sb->lock);
}

/* The control plane's state of the sandbox ("running", "paused") into
 * buf; SBX_E_NOT_FOUND when it is gone. */
static int sandbox_state(sbx_sandbox *sb, sbx_call *call, char *buf, size_t cap,
                         sbxp_http_error *err)
{
    json_object *doc = NULL;
    int rc = e2b_api_get(sb->st, call, sb->id, &doc, err);
    const char *s = rc == SBX_OK ? sbxp_json_str(doc, "state") : NULL;
    snprintf(buf, cap, "%s", s ? s : "");
    json_object_put(doc);
    return rc;
}

static int gone(sbx_sandbox *sb, sbx_call *call, const char *what)
{
    struct e2b_state *st = sb->st;
    return e2b_error(st, call, SBX_E_NOT_FOUND,
                     "%s: %s sandbox %s: it no longer exists (deleted, or expired)",
                     st->cfg.provider, what, sb->id);
}

int e2b_pause(sbx_sandbox *sb, sbx_call *call, uint32_t flags)
{
    struct e2b_state *st = sb->st;
    if (flags)
        return e2b_error(st, call, SBX_E_INVALID, "%s: pause: flags %#x are not defined",
                         st->cfg.provider, (unsigned)flags);
    sbxp_http_error err;
    int rc = e2b_api_pause(st, call, sb->id, &err);
    if (rc == SBX_E_NOT_FOUND)
        return gone(sb, call, "pausing");
    if (rc != SBX_OK && err.http_status == 409) {
        /* 409: it cannot be paused now; paused already is what was asked. */
        char state[32];
        sbxp_http_error e2;
        int g = sandbox_state(sb, call, state, sizeof state, &e2);
        if (g == SBX_E_NOT_FOUND)
            return gone(sb, call, "pausing");
        if (g == SBX_OK && !strcmp(state, "paused"))
            rc = SBX_OK;
    }
    if (rc != SBX_OK)
        return e2b_report(st, call, &err, "pausing sandbox %s", sb->id);
    set_paused(sb, 1);
    return SBX_OK;
}

/* The resume request; err says why it failed (a gone sandbox named). */
static int resume_call(sbx_sandbox *sb, sbx_call *call, sbxp_http_error *err)
{
    int rc = e2b_api_resume(sb->st, call, sb->id, NULL, err);
    if (rc == SBX_E_NOT_FOUND)
        return sbxp_http_fail(err, SBX_E_NOT_FOUND,
                              "sandbox %s no longer exists (deleted, or expired)", sb->id);
    if (rc == SBX_OK)
        set_paused(sb, 0);
    return rc;
}

int e2b_resume(sbx_sandbox *sb, sbx_call *call)
{
    sbxp_http_error err;
    int rc = resume_call(sb, call, &err);
    if (rc == SBX_E_NOT_FOUND)
        return gone(sb, call, "resuming");
    if (rc != SBX_OK)
        return e2b_report(sb->st, call, &err, "resuming sandbox %s", sb->id);
    return SBX_OK;
}

int e2b_resume_quiet(sbx_sandbox *sb, sbx_call *call, sbxp_http_error *err)
{
    return resume_call(sb, call, err);
}

int e2b_wake(sbx_sandbox *sb, sbx_call *call, sbxp_http_error *err)
{
    pthread_mutex_lock(&sb->lock);
    int paused = sb->paused;
    pthread_mutex_unlock(&sb->lock);
    if (!paused)
        return SBX_OK;
    int rc = resume_call(sb, call, err);
    if (rc == SBX_OK)
        sb->st->host->log(sb->st->host, SBX_LOG_INFO, "%s: sandbox %s was paused: resumed",
                          sb->st->cfg.provider, sb->id);
    return rc;
}
