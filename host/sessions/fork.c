/*
 * fork.c - a new session whose workspace starts as a copy of another's
 * (docs/SESSIONS.md, "Fork").
 *
 * The copy is the streamed snapshot and restore of the library
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
 */
#include "sessions/internal.h"
#include "store/store.h"

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

SBX_API int sbx_session_fork(sbx_sessions *m, const char *from, const char *to,
                             const struct sbx_session_spec *spec, sbx_cancel *cancel,
                             sbx_handle **out, sbx_error *err)
{
    sbx_error_clear(err);
    if (out)
        *out = NULL;
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
    sbx_handle *src;
    if ((rc = sbx_session_attach(m, from, cancel, &src, err)) != SBX_OK)
        return rc;
    int fd = -1;
    rc = save_unlinked(src, cancel, &fd, err);
    sbx_release(src);
    if (rc != SBX_OK)
        return rc;
    sbxh_session_crash_point(m, "fork-after-save");

    if (!spec) {
        memset(&copy, 0, sizeof copy);
        copy.size = sizeof copy;
    }
    /* same provider as the source unless the spec says otherwise */
    if (!copy.provider)
        copy.provider = st.provider;
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    copy.snapshot = path;
    struct sbx_acquire_info info;
    memset(&info, 0, sizeof info);
    info.size = sizeof info;
    sbx_handle *h = NULL;
    rc = sbx_session_acquire(m, to, &copy, cancel, &h, &info, err);
    close(fd);
    if (rc != SBX_OK)
        return rc;
    if (!info.created) {
        /* made by someone else between the check and the claim: theirs */
        sbx_release(h);
        char label[13];
        sbxh_session_label(to, label);
        return sbx_error_set(err, SBX_E_EXISTS,
                             "fork: session %s was created meanwhile by another worker; "
                             "it was left as it is",
                             label);
    }
    if (out)
        *out = h;
    else
        sbx_release(h);
    return SBX_OK;
}
