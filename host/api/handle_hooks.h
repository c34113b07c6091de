/*
 * handle_hooks.h - what the session manager adds to the handles it hands
 * out (internal to libsbx): steps around every command (the memory stores'
 * refresh and writeback), and the memory ops of a handle's provider.
 */
#ifndef SBX_HOST_HANDLE_HOOKS_H
#define SBX_HOST_HANDLE_HOOKS_H

#include <sbx/sbx.h>

struct sbx_exec_hooks {
    /* Before a command: SBX_OK lets it run, with *token passed to after;
     * an error refuses it (err set). */
    int (*before)(void *ctx, sbx_handle *h, int *token, sbx_cancel *cancel, sbx_error *err);
    /* After it (whatever its result): an error is returned by sbx_exec in
     * place of SBX_OK, with the command's result still filled. */
    int (*after)(void *ctx, sbx_handle *h, int token, sbx_cancel *cancel, sbx_error *err);
    void (*free)(void *ctx);
    void *ctx;
};

/* Give h its hooks (copied; h owns ctx from now on: freed at release). */
void sbxh_handle_set_hooks(sbx_handle *h, const struct sbx_exec_hooks *hooks);

/* The provider's memory ops on h (SBX_CAP_MEMORY): SBX_E_UNSUPPORTED
 * without the capability. memory_watch is a no-op when the provider has
 * none. */
int sbxh_handle_memory_load(sbx_handle *h, const char *slug, const struct sbx_source *tar,
                            sbx_cancel *cancel, sbx_error *err);
int sbxh_handle_memory_diff(sbx_handle *h, const char *slug, uint32_t flags,
                            const struct sbx_memory_changes *out, sbx_cancel *cancel,
                            sbx_error *err);
int sbxh_handle_memory_accept(sbx_handle *h, const char *slug, sbx_cancel *cancel,
                              sbx_error *err);
int sbxh_handle_memory_watch(sbx_handle *h, const char *slug, sbx_cancel *cancel,
                             sbx_error *err);

#endif
