/*
 * pause.c - pause and resume (SBX_CAP_PAUSE), and the transparent resume
 * that every other op does first.
 *
 * pause_mode freeze (the default) is POST /containers/{id}/pause: the
 * cgroup freezer stops every process of the container where it is, so the
 * agent, its processes with their replay buffers and the workspace are all
 * there after POST /containers/{id}/unpause. pause_mode stop is POST
 * /containers/{id}/stop and, on resume, start: the container's init (the
 * agent) starts again, and the processes of the sandbox have ended.
 *
 * So that a paused container costs nothing to detect on the hot path, a
 * pause writes a marker file, "paused", in the session's resource
 * directory (<resource_dir>/sbx-<hash>/, which is not bound into the
 * container: nothing inside can make or remove it) before it asks the
 * daemon, and a resume removes it after the daemon has answered. Every op
 * checks the marker with one stat(2); only when it is there does it resume
 * (inspect, unpause or start). Pause and resume hold an exclusive flock on
 * "pause.lock" beside it, so that they are atomic with respect to each
 * other across processes: the marker is there whenever the container is
 * paused by this provider. A failed pause leaves the marker (unless the
 * container is gone): the request may have reached the daemon, and the next
 * op's resume then makes sure the container runs.
 */
#include "docker.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define PAUSE_MARKER "paused"
#define PAUSE_LOCK "pause.lock"

/* The session's resource directory: <resource_dir>/sbx-<32 hex>. */
static int session_dir(struct docker_state *st, const char *key_hash, char *buf, size_t cap)
{
    char name[40];
    snprintf(name, sizeof name, "sbx-%.32s", key_hash);
    return docker_res_dir(st, name, NULL, buf, cap);
}

/* Open the session directory and take the pause lock. *dfd and *lfd are
 * -1 when the directory does not exist (nothing was paused there: the
 * caller goes on without the lock). SBX_E_IO naming the path otherwise. */
static int lock_session(struct docker_state *st, sbx_call *call, const char *key_hash,
                        int *dfd, int *lfd)
{
    *dfd = *lfd = -1;
    char dir[4096];
    if (session_dir(st, key_hash, dir, sizeof dir) != 0)
        return docker_error(st, call, SBX_E_INVALID,
                            "docker: the resource directory path is too long");
    *dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (*dfd < 0) {
        if (errno == ENOENT)
            return SBX_OK;
        return docker_error(st, call, SBX_E_IO, "docker: cannot open %s: %s", dir,
                            strerror(errno));
    }
    *lfd = openat(*dfd, PAUSE_LOCK, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK,
                  0600);
    if (*lfd < 0 || flock(*lfd, LOCK_EX) != 0) {
        int e = errno;
        if (*lfd >= 0)
            close(*lfd);
        close(*dfd);
        *dfd = *lfd = -1;
        return docker_error(st, call, SBX_E_IO, "docker: cannot lock %s/%s: %s", dir,
                            PAUSE_LOCK, strerror(e));
    }
    return SBX_OK;
}

static void unlock_session(int dfd, int lfd)
{
    if (lfd >= 0)
        close(lfd); /* releases the flock */
    if (dfd >= 0)
        close(dfd);
}

static int marker_present(int dfd)
{
    struct stat sb;
    return dfd >= 0 && fstatat(dfd, PAUSE_MARKER, &sb, AT_SYMLINK_NOFOLLOW) == 0;
}

static void marker_remove(int dfd)
{
    if (dfd >= 0)
        unlinkat(dfd, PAUSE_MARKER, 0);
}

static int marker_write(struct docker_state *st, sbx_call *call, int dfd, const char *mode)
{
    int fd = openat(dfd, PAUSE_MARKER, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
                    0600);
    if (fd < 0)
        return docker_error(st, call, SBX_E_IO, "docker: cannot write the pause marker: %s",
                            strerror(errno));
    ssize_t n = write(fd, mode, strlen(mode));
    int e = errno;
    close(fd);
    if (n != (ssize_t)strlen(mode))
        return docker_error(st, call, SBX_E_IO, "docker: cannot write the pause marker: %s",
                            n < 0 ? strerror(e) : "short write");
    return SBX_OK;
}

static int gone(struct docker_state *st, sbx_call *call, const char *id, int dfd)
{
    marker_remove(dfd);
    return docker_error(st, call, SBX_E_NOT_FOUND,
                        "docker: container %.12s no longer exists (the sandbox was destroyed)",
                        id);
}

int docker_pause(sbx_sandbox *sb, sbx_call *call, uint32_t flags)
{
    struct docker_state *st = sb->st;
    if (flags != 0)
        return docker_error(st, call, SBX_E_INVALID,
                            "docker: pause: unknown flags 0x%x (none are defined)",
                            (unsigned)flags);
    int rc = docker_negotiate(st, call);
    if (rc != SBX_OK)
        return rc;
    int dfd, lfd;
    if ((rc = lock_session(st, call, sb->key_hash, &dfd, &lfd)) != SBX_OK)
        return rc;
    sbxp_http_error err;
    if (dfd < 0) {
        /* No resource directory: the sandbox was destroyed, or it was
         * wiped under a live container (which cannot be paused safely). */
        rc = docker_json(st, call, "GET", NULL, NULL, &err, "/containers/%s/json", sb->id);
        if (rc == SBX_E_NOT_FOUND)
            return gone(st, call, sb->id, -1);
        if (rc != SBX_OK)
            return docker_report(st, call, &err, "pausing container %.12s", sb->id);
        return docker_error(st, call, SBX_E_IO,
                            "docker: container %.12s has no resource directory under %s; "
                            "cannot record its pause",
                            sb->id, st->cfg.resource_dir);
    }
    const int stop = st->cfg.pause_stop;
    rc = marker_write(st, call, dfd, stop ? "stop\n" : "freeze\n");
    if (rc == SBX_OK) {
        if (stop) {
            int64_t t = (st->cfg.kill_timeout_ms + 999) / 1000;
            rc = docker_json(st, call, "POST", NULL, NULL, &err,
                             "/containers/%s/stop?t=%lld", sb->id, (long long)(t < 1 ? 1 : t));
            if (rc != SBX_OK && err.http_status == 304)
                rc = SBX_OK; /* already stopped */
        } else {
            rc = docker_json(st, call, "POST", NULL, NULL, &err, "/containers/%s/pause",
                             sb->id);
            /* 409: already paused (idempotent), or not running: then
             * nothing of it runs either, and resume starts it. "already
             * paused" from containerd comes as a 500: the daemon's own
             * Paused flag also follows containerd's events, which can
             * arrive after a racing unpause has answered */
            if (rc != SBX_OK &&
                ((err.http_status == 409 && strstr(err.message, "not running")) ||
                 strstr(err.message, "already paused")))
                rc = SBX_OK;
        }
        if (rc == SBX_E_NOT_FOUND || (rc != SBX_OK && err.http_status == 404))
            rc = gone(st, call, sb->id, dfd);
        else if (rc != SBX_OK)
            rc = docker_report(st, call, &err, "%s container %.12s",
                               stop ? "stopping (pause_mode stop)" : "pausing", sb->id);
    }
    unlock_session(dfd, lfd);
    return rc;
}

int docker_wake_container(struct docker_state *st, sbx_call *call, const char *id,
                          const char *key_hash, json_object *info, int *started)
{
    *started = 0;
    int dfd, lfd;
    int rc = lock_session(st, call, key_hash, &dfd, &lfd);
    if (rc != SBX_OK)
        return rc;
    json_object *state = sbxp_json_obj(info, "State");
    int need = !info || marker_present(dfd) || sbxp_json_bool(state, "Paused", 0) ||
               !sbxp_json_bool(state, "Running", 0);
    json_object *fresh = NULL;
    sbxp_http_error err;
    if (need) {
        /* under the lock: what another process did meanwhile counts */
        rc = docker_json(st, call, "GET", NULL, &fresh, &err, "/containers/%s/json", id);
        if (rc == SBX_E_NOT_FOUND) {
            rc = gone(st, call, id, dfd);
            goto out;
        }
        if (rc != SBX_OK) {
            rc = docker_report(st, call, &err, "resuming container %.12s", id);
            goto out;
        }
        state = sbxp_json_obj(fresh, "State");
        if (sbxp_json_bool(state, "Paused", 0)) {
            rc = docker_json(st, call, "POST", NULL, NULL, &err, "/containers/%s/unpause",
                             id);
            /* not paused: 409 from the daemon's flag, or a 500 from
             * containerd when that flag was stale (see docker_pause) */
            if (rc != SBX_OK && strstr(err.message, "not paused"))
                rc = SBX_OK;
            if (rc != SBX_OK) {
                rc = err.http_status == 404
                         ? gone(st, call, id, dfd)
                         : docker_report(st, call, &err, "unpausing container %.12s", id);
                goto out;
            }
        } else if (!sbxp_json_bool(state, "Running", 0)) {
            rc = docker_json(st, call, "POST", NULL, NULL, &err, "/containers/%s/start", id);
            if (rc != SBX_OK && err.http_status == 304)
                rc = SBX_OK;
            if (rc != SBX_OK) {
                rc = err.http_status == 404
                         ? gone(st, call, id, dfd)
                         : docker_report(st, call, &err, "starting container %.12s", id);
                goto out;
            }
            *started = 1;
        }
        marker_remove(dfd);
    }
out:
    json_object_put(fresh);
    unlock_session(dfd, lfd);
    return rc;
}

int docker_resume(sbx_sandbox *sb, sbx_call *call)
{
    struct docker_state *st = sb->st;
    int rc = docker_negotiate(st, call);
    if (rc != SBX_OK)
        return rc;
    int started = 0;
    rc = docker_wake_container(st, call, sb->id, sb->key_hash, NULL, &started);
    /* pause_mode stop: the agent is the container's init, started again */
    if (rc == SBX_OK && started)
        rc = docker_agent_up(st, call, sb);
    return rc;
}

int docker_awake(sbx_sandbox *sb, sbx_call *call)
{
    char dir[4096];
    struct stat s;
    if (session_dir(sb->st, sb->key_hash, dir, sizeof dir) != 0 ||
        strlen(dir) + sizeof "/" PAUSE_MARKER > sizeof dir)
        return SBX_OK;
    strcat(dir, "/" PAUSE_MARKER);
    if (lstat(dir, &s) != 0)
        return SBX_OK; /* the hot path: not paused */
    return docker_resume(sb, call);
}
