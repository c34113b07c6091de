/*
 * handle.h - the host-side sandbox handle, struct sbx_handle (internal;
 * sandbox.c).
 *
 * What a handle is: the provider and its opaque sandbox, the persisted
 * reference and workspace root, the session manager's hooks and the user
 * it acts as. The context keeps its live handles in a list, so that
 * sbx_close can release them.
 */
#ifndef SBX_HOST_API_HANDLE_H
#define SBX_HOST_API_HANDLE_H

#include "api/handle_hooks.h"

#include <sbx/provider.h>
#include <sbx/sbx.h>

struct sbx_handle {
    struct sbx_exec_hooks hooks; /* from the session manager; zero when none */
    sbx_provider *provider; /* NULL once its context was closed */
    sbx_sandbox *sb;
    char ref[SBX_REF_MAX];
    const char *root;
    /* The user exec, read and write act as (SBX_CAP_USERS), "" for the
     * sandbox's default user. Set before the handle is shared. */
    char user[SBX_USER_NAME_MAX + 1];
    struct sbx_handle *prev, *next; /* the context's live handles */
};

/* Release the provider side of every live handle of ctx and mark them
 * closed: later ops on them are refused, sbx_release frees them. */
void sbxh_handles_close_all(sbx_ctx *ctx);

#endif
