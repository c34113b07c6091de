/*
 * handle_user.h - ops on a handle as a chosen user (SBX_CAP_USERS), and
 * the variants of exec, read and write that libsbx itself uses (internal).
 *
 * A handle may act as a user (sbx_handle_set_user): its exec, read and
 * write then pass that user to the provider (sbx_host.call_user). What
 * libsbx does for its own purposes - applying a manifest, snapshots - runs
 * as the sandbox's default user instead, whatever the handle acts as:
 * SBX_AS_DEFAULT.
 */
#ifndef SBX_HOST_HANDLE_USER_H
#define SBX_HOST_HANDLE_USER_H

#include <sbx/sbx.h>

#include <stdbool.h>

enum {
    SBX_AS_HANDLE = 0,  /* the user the handle acts as */
    SBX_AS_DEFAULT = 1  /* the sandbox's default user */
};

int sbxh_exec_as(sbx_handle *h, int as, const struct sbx_exec_args *args,
                 struct sbx_exec_result *res, sbx_cancel *cancel, sbx_error *err);
int sbxh_read_as(sbx_handle *h, int as, const char *path, const struct sbx_sink *sink,
                 sbx_cancel *cancel, sbx_error *err);
int sbxh_write_as(sbx_handle *h, int as, const char *path, const struct sbx_source *src,
                  unsigned mode, sbx_cancel *cancel, sbx_error *err);

/* A user or group name as the ABI allows it: 1 to 32 of [a-z0-9_-],
 * starting with a letter or '_'. */
bool sbxh_account_name_ok(const char *s);

#endif
