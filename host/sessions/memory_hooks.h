/*
 * memory_hooks.h - memory stores attached to sessions (internal to
 * libsbx; sessions/memory_hooks.c has the model).
 */
#ifndef SBX_HOST_SESSION_MEMORY_H
#define SBX_HOST_SESSION_MEMORY_H

#include "store/store.h"

#include <sbx/session.h>

#include <stdbool.h>

/* Admission of a spec's attachments: valid slugs and access, none twice,
 * every store existing (SBX_E_NOT_FOUND naming it). */
int sbxh_session_memory_admit(sbx_sessions *m, const struct sbx_session_spec *spec,
                              sbx_error *err);

/* Record a new session's attachments (none: forget any), never loaded. */
int sbxh_session_memory_record(sbx_sessions *m, const char *key,
                               const struct sbx_session_spec *spec, sbx_error *err);

/* Give a handle of the session the steps around its commands, when the
 * session has attachments. m must outlive h. */
int sbxh_session_memory_hook(sbx_sessions *m, const char *key, sbx_handle *h,
                             sbx_error *err);

/* Write back what a crash left in the session's read-write attachments
 * (waits for the session's running commands). */
int sbxh_session_memory_flush(sbx_sessions *m, const char *key, sbx_handle *h,
                              sbx_cancel *cancel, sbx_error *err);

/* The attachment `slug` of the session, into *out, when it is in conflict:
 * SBX_E_NOT_FOUND when the store is not attached to the session,
 * SBX_E_INVALID when it has no conflict to resolve. */
int sbxh_session_memory_conflict(sbx_sessions *m, const char *key, const char *slug,
                                 struct sbx_store_memory_row *out, sbx_error *err);

/* Resolve the conflict of that attachment (row, from
 * sbxh_session_memory_conflict) through h, a handle of the session the
 * caller attached (these hooks sit below sessions/acquire.c and do not
 * attach themselves): keep the session's version (it is committed over the
 * current heads) or take the store's (the mount is reloaded before the
 * next command). */
int sbxh_session_memory_resolve(sbx_sessions *m, const char *key, sbx_handle *h,
                                const struct sbx_store_memory_row *row, bool keep,
                                sbx_cancel *cancel, sbx_error *err);

#endif
