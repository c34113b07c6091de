/*
 * fork.c - a new session whose workspace starts as a copy of another's
 * (docs/SESSIONS.md, "Fork").
 *
 * Native first: when the fork stays on the source's provider and that
 * provider declares SBX_CAP_FORK, the new session is provisioned like any
 * (intent first) but its sandbox is made by the provider's fork op from
 * the source's (sbxh_session_acquire_fork). A provider that declines the
 * source (SBX_E_UNSUPPORTED: nothing made, the intent dropped) and every
 * other case take the streamed path.
 *
 * The streamed copy is the snapshot and restore of the library
 * (sbx_snapshot_save, then acquire with spec.snapshot), so it is checked
 * entry by entry like any restore: a hostile workspace (symlinks out,
 * FIFOs, devices) is refused or kept inside the new workspace, never
 * followed on the host. The archive passes through a file in a private
 * directory (0700) that is unlinked as soon as it is written: the restore
 * reads it through /proc/self/fd, so nothing named is left behind, even
 * by a kill, past the save itself. The new session is provisioned like
 * any other (intent first), so a fork killed midway leaves an intent the
 * reconciler destroys, never a half-made session.
 *
 * Nothing is shared: the fork has its own key, sandbox and spec; the
 * source's manifest, memory attachments, packages and ports are not
 * carried over (the caller's spec says what the fork gets).
 *
 * A paused source is paused again once the copy is made: attaching to it
 * resumes it on providers that wake a sandbox at attach (docker), and the
 * streamed copy runs tar in it, so it runs for the copy and no longer.
 */
#include "sessions/internal.h"
#include "store/store.h"
#include "base/struct_size.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* SBX_E_EXISTS when `to` already has a session (a binding, or an intent
 * someone is provisioning). */
static int check_new(sbx_sessions *m, const char *to, sbx_error *err)
{
    char label[13];
    sbxh_session_label(to, label);
    struct sbx_binding b = {0};
    int rc = sbxh_store_get_binding(m->store, to, &b, err);
    sbxh_binding_clear(&b);
    if (rc == SBX_OK)
        return sbx_error_set(err, SBX_E_EXISTS,
                             "fork: session %s already exists; a fork needs a new "
                             "session key",
                             label);
    if (rc != SBX_E_NOT_FOUND)
        return rc;
    struct sbx_intent in = {0};
    rc = sbxh_store_get_intent(m->store, to, &in, err);
    sbxh_intent_clear(&in);
    if (rc == SBX_OK)
        return sbx_error_set(err, SBX_E_EXISTS,
                             "fork: session %s is being provisioned; a fork needs a "
                             "new session key",
                             label);
    if (rc != SBX_E_NOT_FOUND)
        return rc;
    sbx_error_clear(err);
    return SBX_OK;
}

/* Save the workspace of h into an unlinked file; *fd reads it. */
static int save_unlinked(sbx_handle *h, sbx_cancel *cancel, int *fd, sbx_error *err)
{
    const char *tmp = getenv("TMPDIR");
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/sbx-fork-XXXXXX", tmp && tmp[0] == '/' ? tmp : "/tmp");
    if (!mkdtemp(dir))
        return sbx_error_set(err, SBX_E_IO, "fork: cannot make a private directory in %s: %s",
                             tmp && tmp[0] == '/' ? tmp : "/tmp", strerror(errno));
    char file[PATH_MAX + 16];
    snprintf(file, sizeof file, "%s/workspace.tar", dir);
    int rc = sbx_snapshot_save(h, file, NULL, cancel, err);
    *fd = -1;
    if (rc == SBX_OK) {
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        *fd = dfd < 0 ? -1
                      : openat(dfd, "workspace.tar", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (dfd >= 0)
            close(dfd);
        if (*fd < 0)
            rc = sbx_error_set(err, SBX_E_IO, "fork: cannot reopen the snapshot: %s",
                               strerror(errno));
    }
    unlink(file);
    rmdir(dir);
    return rc;
}

/* The provider a fork of st's session to spec goes to: the spec's, else
 * the source's. *native says whether it may fork natively; why says why
 * not. */
static int fork_target(sbx_sessions *m, const struct sbx_session_state *st,
                       const struct sbx_session_spec *spec, bool *native, char *why,
                       size_t why_cap, sbx_error *err)
{
    *native = false;
    const char *to = spec && spec->provider ? spec->provider : st->provider;
    if (strcmp(to, st->provider) != 0) {
        snprintf(why, why_cap, "the fork goes to provider %s, the source is on %s", to,
                 st->provider);
        return SBX_OK;
    }
    sbx_provider *p;
    int rc = sbx_provider_lookup(m->ctx, to, &p, err);
    if (rc != SBX_OK)
        return rc;
    if (!(sbx_provider_info_caps(sbx_provider_get_info(p)) & SBX_CAP_FORK)) {
        snprintf(why, why_cap, "provider %s does not declare fork", to);
        return SBX_OK;
    }
    *native = true;
    return SBX_OK;
}

static void info_out(struct sbx_fork_info *info, bool native, const char *why)
{
    if (!info)
        return;
    struct sbx_fork_info full;
    memset(&full, 0, sizeof full);
    full.size = sizeof full;
    full.native = native;
    if (!native)
        snprintf(full.streamed_why, sizeof full.streamed_why, "%s", why);
    sbx_struct_out(info, &full, sizeof full);
}

/* Put a source that was paused before the fork back to sleep. A failure
 * leaves it running and unmarked, as any use of a paused session does
 * (the reconciler's idle_pause pauses it again); the fork's own outcome
 * is what the caller gets. */
static void repause(sbx_sessions *m, const char *from, bool was_paused)
{
    if (!was_paused)
        return;
    sbx_error err;
    (void)sbx_session_pause(m, from, NULL, &err);
}

/* The new session was created meanwhile by someone else: theirs. */
static int made_meanwhile(const char *to, sbx_handle *h, sbx_error *err)
{
    sbx_release(h);
    char label[13];
    sbxh_session_label(to, label);
    return sbx_error_set(err, SBX_E_EXISTS,
                         "fork: session %s was created meanwhile by another worker; "
                         "it was left as it is",
                         label);
}

SBX_API int sbx_session_fork(sbx_sessions *m, const char *from, const char *to,
                             const struct sbx_session_spec *spec, sbx_cancel *cancel,
                             sbx_handle **out, sbx_error *err)
{
    return sbx_session_fork_info(m, from, to, spec, cancel, out, NULL, err);
}

SBX_API int sbx_session_fork_info(sbx_sessions *m, const char *from, const char *to,
                                  const struct sbx_session_spec *spec, sbx_cancel *cancel,
                                  sbx_handle **out, struct sbx_fork_info *info,
                                  sbx_error *err)
{
    sbx_error_clear(err);
    if (out)
        *out = NULL;
    if (info && sbx_struct_size(info) < sizeof(uint32_t))
        return sbx_error_set(err, SBX_E_INVALID, "fork info: size is not set");
    if (!m || !from || !*from || !to || !*to)
        return sbx_error_set(err, SBX_E_INVALID, "fork: a manager and two session keys "
                                                 "are needed");
    if (!strcmp(from, to))
        return sbx_error_set(err, SBX_E_INVALID, "fork: the new session key is the "
                                                 "source's");
    struct sbx_session_spec copy;
    int rc = sbxh_session_spec_in(&copy, &spec, err);
    if (rc != SBX_OK)
        return rc;
    if (spec && spec->snapshot)
        return sbx_error_set(err, SBX_E_INVALID,
                             "fork: the spec names a snapshot; a fork's workspace is "
                             "the source's");
    if ((rc = check_new(m, to, err)) != SBX_OK)
        return rc;

    struct sbx_session_state st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    if ((rc = sbx_session_state(m, from, &st, err)) != SBX_OK)
        return rc;
    if (!spec) {
        memset(&copy, 0, sizeof copy);
        copy.size = sizeof copy;
    }
    /* same provider as the source unless the spec says otherwise */
    if (!copy.provider)
        copy.provider = st.provider;
    bool native;
    char why[256] = "";
    if ((rc = fork_target(m, &st, &copy, &native, why, sizeof why, err)) != SBX_OK)
        return rc;
    sbx_handle *src;
    if ((rc = sbx_session_attach(m, from, cancel, &src, err)) != SBX_OK)
        return rc;
    struct sbx_acquire_info ainfo;
    memset(&ainfo, 0, sizeof ainfo);
    ainfo.size = sizeof ainfo;
    sbx_handle *h = NULL;
    if (native) {
        rc = sbxh_session_acquire_fork(m, to, &copy, src, cancel, &h, &ainfo, err);
        if (rc != SBX_E_UNSUPPORTED) {
            sbx_release(src);
            repause(m, from, st.paused);
            if (rc != SBX_OK)
                return rc;
            if (!ainfo.created)
                return made_meanwhile(to, h, err);
            info_out(info, true, NULL);
            if (out)
                *out = h;
            else
                sbx_release(h);
            return SBX_OK;
        }
        /* declined: nothing was made; the provider said why */
        snprintf(why, sizeof why, "%.200s", err ? err->message : "the provider declined");
        sbx_error_clear(err);
        sbxh_session_crash_point(m, "fork-native-declined");
    }
    int fd = -1;
    rc = save_unlinked(src, cancel, &fd, err);
    sbx_release(src);
    repause(m, from, st.paused);
    if (rc != SBX_OK)
        return rc;
    sbxh_session_crash_point(m, "fork-after-save");

    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    copy.snapshot = path;
    rc = sbx_session_acquire(m, to, &copy, cancel, &h, &ainfo, err);
    close(fd);
    if (rc != SBX_OK)
        return rc;
    if (!ainfo.created)
        return made_meanwhile(to, h, err);
    info_out(info, false, why);
    if (out)
        *out = h;
    else
        sbx_release(h);
    return SBX_OK;
}
