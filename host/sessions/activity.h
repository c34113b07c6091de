/*
 * activity.h - a session's last use, paused mark and use lock (internal
 * to libsbx; sessions/activity.c).
 */
#ifndef SBX_HOST_SESSION_ACTIVITY_H
#define SBX_HOST_SESSION_ACTIVITY_H

#include "store/store.h"

#include <sbx/session.h>

/* How long a command waits for the idle evictor to finish with its
 * session (it holds the use lock exclusive only while it pauses or
 * destroys) before running without the lock. */
#define SBXH_SESSION_USE_WAIT_MS 30000

/* Give a handle of the session the steps around its commands (use lock,
 * last use), wrapping the steps it already has; records a use now. */
int sbxh_session_activity_hook(sbx_sessions *m, const char *key, sbx_handle *h,
                               sbx_error *err);

/* Pause the bound sandbox b (its provider declares SBX_CAP_PAUSE) and
 * mark it paused. */
int sbxh_session_pause_bound(sbx_sessions *m, const struct sbx_binding *b,
                             sbx_cancel *cancel, sbx_error *err);

/* The paused mark and last use of a session (created_at when none was
 * recorded). */
void sbxh_session_activity_of(sbx_sessions *m, const char *key, int64_t created_at,
                              bool *paused, int64_t *last_used_at);

/* The provider's max_sandboxes (providers.<name>.max_sandboxes), 0 when
 * unlimited (sessions/evict.c). */
int64_t sbxh_session_max_sandboxes(sbx_sessions *m, sbx_provider *p);

#endif
