/*
 * pause.c - pause and resume (SBX_CAP_PAUSE) through the lifecycle API
 * (sandbox-lifecycle.yml POST /sandboxes/{id}/pause and /resume, both 202
 * and asynchronous: Running -> Pausing -> Paused, Paused -> Resuming ->
 * Running, tracked with GET /sandboxes/{id}). The server keeps the
 * sandbox's state: its processes are frozen, not ended (the docker
 * runtime's `docker pause`), its files stay.
 *
 * Both ops act on the sandbox, not the handle, and are idempotent: each
 * posts its action, then polls until the state it wants, within
 * ready_timeout_ms. An action the server refuses is looked up: the state
 * asked for already (a second pause; the docker runtime answers 500 for
 * a container paused already, the spec 409) is SBX_OK, a transition under
 * way is waited for, one the other way (a resume racing this pause) is
 * waited out and the action posted again; a refusal of a sandbox in the
 * state the action starts from is reported. Gone (404, Stopping,
 * Terminated) is SBX_E_NOT_FOUND.
 *
 * Transparent resume: nothing of a paused sandbox answers (a request to
 * its frozen execd waits), so the sandbox is resumed before the request
 * is sent. Pause leaves a marker, `<state_dir>/<id>/paused`, a host file
 * the sandbox cannot write, that every host process using the same
 * state_dir sees; osb_wake (before every request to execd or the sidecar)
 * costs one lstat when it is absent and resumes when it is there. Pause
 * and resume hold an exclusive flock on `<state_dir>/<id>/pause.lock`, so
 * that the marker is there exactly when the sandbox was paused here. A
 * sandbox paused by a client that does not share state_dir is found when
 * a request fails (osb_service_report, osb_wake_after) or at attach.
 * See osb.h.
 */
#include "clock.h"
#include "mkdirs.h"
#include "osb.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define POLL_FIRST_MS 20
#define POLL_MAX_MS 250

/* ---- the marker ---------------------------------------------------------- */

/* The ids the control plane chose that are usable as a directory name
 * (as remote_memory.c's): no marker otherwise (only attach resumes). */
static int id_usable(const char *id)
{
    size_t n = 0;
    for (; id[n]; n++)
        if (!((id[n] >= 'a' && id[n] <= 'z') || (id[n] >= 'A' && id[n] <= 'Z') ||
              (id[n] >= '0' && id[n] <= '9') || id[n] == '-' || id[n] == '_'))
            return 0;
    return n > 0 && n < 128;
}

static int marker_path(const struct osb_state *st, const char *id, const char *leaf, char *buf,
                       size_t cap)
{
    if (!id_usable(id))
        return -1;
    int n = snprintf(buf, cap, "%s/%s%s%s", st->cfg.state_dir, id, leaf ? "/" : "",
                     leaf ? leaf : "");
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

int osb_marker_present(const struct osb_state *st, const char *id)
{
    char p[4400];
    struct stat s;
    return marker_path(st, id, "paused", p, sizeof p) == 0 && lstat(p, &s) == 0 &&
           S_ISREG(s.st_mode);
}

void osb_marker_clear(const struct osb_state *st, const char *id)
{
    char p[4400];
    if (marker_path(st, id, "paused", p, sizeof p) == 0 && unlink(p) != 0 && errno != ENOENT)
        st->host->log(st->host, SBX_LOG_WARN, "opensandbox: cannot remove %s: %s", p,
                      strerror(errno));
}

static int marker_set(struct osb_state *st, const char *id, sbxp_http_error *e)
{
    char p[4400];
    if (marker_path(st, id, "paused", p, sizeof p) != 0)
        return SBX_OK;
    int fd = open(p, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600);
    if (fd < 0)
        return sbxp_http_fail(e, SBX_E_IO, "cannot write %s: %s", p, strerror(errno));
    close(fd);
    return SBX_OK;
}

/* Take the exclusive lock of the sandbox's pause state (*fd -1 when it has
 * no directory: then nothing to serialize with on this machine). */
static int lock_take(struct osb_state *st, sbx_call *call, const char *id, int *fd,
                     sbxp_http_error *e)
{
    char dir[4400], p[4400], failed[4400];
    *fd = -1;
    if (marker_path(st, id, NULL, dir, sizeof dir) != 0 ||
        marker_path(st, id, "pause.lock", p, sizeof p) != 0)
        return SBX_OK;
    if (sbxs_mkdirs(dir, 0700, failed, sizeof failed) != 0)
        return sbxp_http_fail(e, SBX_E_IO, "cannot make %s: %s", failed, strerror(errno));
    *fd = open(p, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600);
    if (*fd < 0)
        return sbxp_http_fail(e, SBX_E_IO, "cannot open %s: %s", p, strerror(errno));
    struct stat s;
    if (fstat(*fd, &s) != 0 || !S_ISREG(s.st_mode)) {
        close(*fd);
        *fd = -1;
        return sbxp_http_fail(e, SBX_E_IO, "%s is not a regular file", p);
    }
    /* Bounded like every other wait here; the holder ends within its own
     * deadline. */
    int64_t deadline = sbxs_now_ms() + st->cfg.ready_timeout_ms;
    while (flock(*fd, LOCK_EX | LOCK_NB) != 0) {
        int rc = SBX_OK;
        if (sbxs_now_ms() >= deadline)
            rc = sbxp_http_fail(e, SBX_E_TIMEOUT, "%s stayed locked by another process for %lld ms",
                                p, (long long)st->cfg.ready_timeout_ms);
        else if (osb_sleep_ms(st, call, POLL_FIRST_MS) != SBX_OK)
            rc = sbxp_http_fail(e, SBX_E_CANCELLED, "cancelled");
        if (rc != SBX_OK) {
            close(*fd);
            *fd = -1;
            return rc;
        }
    }
    return SBX_OK;
}

static void lock_drop(int fd)
{
    if (fd >= 0)
        close(fd); /* releases the flock */
}

/* ---- settling a transition ------------------------------------------------ */

struct transition {
    const char *action; /* "pause", "resume" */
    const char *verb;   /* "pausing", "resuming" */
    const char *want;   /* the state that ends it */
    const char *from;   /* the state the action starts from */
};

static const struct transition PAUSE = {"pause", "pausing", "Paused", "Running"};
static const struct transition RESUME = {"resume", "resuming", "Running", "Paused"};

static int post_action(struct osb_state *st, sbx_call *call, const char *id,
                       const struct transition *t, sbxp_http_error *post)
{
    memset(post, 0, sizeof *post);
    return osb_api_action(st, call, id, t->action, post);
}

/* Post the action and poll the state until it is t->want; *e says why
 * not (an HTTP failure as it came), last (32 bytes) the state last seen
 * ("" when none). */
static int settle(struct osb_state *st, sbx_call *call, const char *id,
                  const struct transition *t, sbxp_http_error *e, char *last)
{
    int64_t deadline = sbxs_now_ms() + st->cfg.ready_timeout_ms;
    int poll_ms = POLL_FIRST_MS;
    sbxp_http_error post;
    int post_rc = post_action(st, call, id, t, &post);
    int64_t posted_at = sbxs_now_ms();
    last[0] = '\0';
    for (;;) {
        if (post_rc == SBX_E_NOT_FOUND)
            return sbxp_http_fail(e, SBX_E_NOT_FOUND, "it no longer exists (deleted, or expired)");
        if (post_rc == SBX_E_CANCELLED || post_rc == SBX_E_CONFIG || post_rc == SBX_E_DENIED ||
            post.http_status == 401 || post.http_status == 403) {
            *e = post;
            return post_rc;
        }
        json_object *doc = NULL;
        int rc = osb_api_get(st, call, id, &doc, e);
        if (rc == SBX_E_NOT_FOUND)
            return sbxp_http_fail(e, SBX_E_NOT_FOUND, "it no longer exists (deleted, or expired)");
        if (rc != SBX_OK)
            return rc;
        snprintf(last, 32, "%s", osb_state_of(doc));
        const char *msg = sbxp_json_str(sbxp_json_obj(doc, "status"), "message");
        char why[160];
        snprintf(why, sizeof why, "%s", msg ? msg : "");
        json_object_put(doc);
        if (!strcmp(last, t->want))
            return SBX_OK;
        if (!strcmp(last, "Stopping") || !strcmp(last, "Terminated"))
            return sbxp_http_fail(e, SBX_E_NOT_FOUND, "it is %s: it no longer exists", last);
        if (!strcmp(last, "Failed"))
            return sbxp_http_fail(e, SBX_E_UNAVAILABLE, "it is Failed%s%s", why[0] ? ": " : "",
                                  why);
        if (!strcmp(last, t->from)) {
            /* Still where the action starts. Refused for another reason
             * than the state (a 5xx past the retries): that is the answer.
             * Refused as a conflict (someone went the other way, or the
             * server's own transition was under way), or accepted a while
             * ago and not started: post it again. */
            if (post_rc != SBX_OK && post.http_status != 409) {
                *e = post;
                return post_rc;
            }
            if (post_rc != SBX_OK || sbxs_now_ms() - posted_at >= 1000) {
                post_rc = post_action(st, call, id, t, &post);
                posted_at = sbxs_now_ms();
                if (post_rc == SBX_OK || post.http_status == 409)
                    continue; /* look again at once */
            }
        }
        /* Pausing, Resuming, Pending or a state not known here: the
         * server is on its way. */
        if (sbxs_now_ms() >= deadline)
            return sbxp_http_fail(e, SBX_E_TIMEOUT,
                                  "it did not reach %s within %lld ms (last state %s; "
                                  "ready_timeout_ms bounds the wait)",
                                  t->want, (long long)st->cfg.ready_timeout_ms,
                                  last[0] ? last : "unknown");
        if (osb_sleep_ms(st, call, poll_ms) != SBX_OK)
            return sbxp_http_fail(e, SBX_E_CANCELLED, "cancelled");
        poll_ms = poll_ms * 2 > POLL_MAX_MS ? POLL_MAX_MS : poll_ms * 2;
    }
}

/* ---- the ops ------------------------------------------------------------------ */

int osb_pause(sbx_sandbox *sb, sbx_call *call, uint32_t flags)
{
    struct osb_state *st = sb->st;
    if (flags)
        return osb_error(st, call, SBX_E_INVALID, "opensandbox: pause: flags %#x are not defined",
                         (unsigned)flags);
    sbxp_http_error e;
    int fd, rc = lock_take(st, call, sb->id, &fd, &e);
    if (rc != SBX_OK)
        return osb_report(st, call, &e, "pausing sandbox %s", sb->id);
    /* The marker first: once the request is out the sandbox may be
     * paused, and every op of this machine must know to resume it. */
    char last[32] = "";
    rc = marker_set(st, sb->id, &e);
    if (rc == SBX_OK)
        rc = settle(st, call, sb->id, &PAUSE, &e, last);
    if (rc == SBX_OK) {
        /* Paused, its lifetime counts on: a whole one from the pause. */
        sbxp_http_error err;
        if (osb_api_renew(st, call, sb->id, &err) != SBX_OK)
            st->host->log(st->host, SBX_LOG_WARN, "opensandbox: renewing sandbox %s: %s",
                          sb->id, err.message);
        pthread_mutex_lock(&sb->lock);
        sb->renewed_ms = sbxs_now_ms();
        pthread_mutex_unlock(&sb->lock);
    } else if (rc == SBX_E_NOT_FOUND || !strcmp(last, "Running")) {
        /* Gone, or refused and seen running: not paused. (Otherwise, a
         * timeout, a cancellation or no answer, it may be pausing: the
         * marker stays and the next op resumes, which costs a request or
         * two on a running sandbox.) */
        osb_marker_clear(st, sb->id);
    }
    lock_drop(fd);
    if (rc != SBX_OK)
        return osb_report(st, call, &e, "pausing sandbox %s", sb->id);
    return SBX_OK;
}

/* Resume under the lock (only_marked: only when the marker is still there
 * once the lock is held: another thread or process resumed meanwhile);
 * the marker goes once the sandbox runs. */
static int resume_locked(sbx_sandbox *sb, sbx_call *call, int only_marked, sbxp_http_error *e)
{
    struct osb_state *st = sb->st;
    int fd, rc = lock_take(st, call, sb->id, &fd, e);
    if (rc != SBX_OK)
        return rc;
    if (only_marked && fd >= 0 && !osb_marker_present(st, sb->id)) {
        lock_drop(fd);
        return SBX_OK;
    }
    char last[32];
    rc = settle(st, call, sb->id, &RESUME, e, last);
    if (rc == SBX_OK || rc == SBX_E_NOT_FOUND)
        osb_marker_clear(st, sb->id);
    lock_drop(fd);
    if (rc == SBX_OK)
        osb_keep_alive(sb, call);
    return rc;
}

int osb_resume(sbx_sandbox *sb, sbx_call *call)
{
    sbxp_http_error e;
    int rc = resume_locked(sb, call, 0, &e);
    if (rc != SBX_OK)
        return osb_report(sb->st, call, &e, "resuming sandbox %s", sb->id);
    return SBX_OK;
}

int osb_wake(sbx_sandbox *sb, sbx_call *call, sbxp_http_error *err)
{
    if (!osb_marker_present(sb->st, sb->id))
        return SBX_OK;
    sbxp_http_error e;
    int rc = resume_locked(sb, call, 1, &e);
    if (rc == SBX_OK)
        sb->st->host->log(sb->st->host, SBX_LOG_INFO,
                          "opensandbox: sandbox %s was paused: resumed", sb->id);
    else if (err) {
        long http = e.http_status;
        sbxp_http_fail(err, rc, "resuming the paused sandbox %s: %s", sb->id, e.message);
        err->http_status = http;
    }
    return rc;
}

int osb_wake_after(sbx_sandbox *sb, sbx_call *call, const char *state)
{
    if (strcmp(state, "Paused") && strcmp(state, "Pausing") && strcmp(state, "Resuming"))
        return SBX_E_UNAVAILABLE;
    sbxp_http_error e;
    int rc = resume_locked(sb, call, 0, &e);
    if (rc == SBX_OK)
        sb->st->host->log(sb->st->host, SBX_LOG_INFO,
                          "opensandbox: sandbox %s was %s (paused elsewhere): resumed", sb->id,
                          state);
    else
        sb->st->host->log(sb->st->host, SBX_LOG_WARN,
                          "opensandbox: sandbox %s is %s: resuming it: %s", sb->id, state,
                          e.message);
    return rc;
}
