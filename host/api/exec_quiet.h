/*
 * exec_quiet.h - running a helper command in a sandbox for libsbx itself
 * (manifests, snapshots): success means exit status 0, and a failure's
 * message quotes the end of its standard error (internal to libsbx).
 */
#ifndef SBX_HOST_EXEC_QUIET_H
#define SBX_HOST_EXEC_QUIET_H

#include <sbx/sbx.h>

/*
 * Run argv in the workspace root with stdout into out (NULL: discarded)
 * and stdin from in (NULL: empty). SBX_OK when it exited 0. Otherwise
 * detail (cap bytes) says why - the exec's own error, or "exit N: <the
 * end of stderr>" / "killed by signal N: ..." - and the status is the
 * exec's error or SBX_E_IO.
 */
int sbxh_exec_quiet(sbx_handle *h, const char *const *argv, const struct sbx_sink *out,
                    const struct sbx_source *in, sbx_cancel *cancel, char *detail,
                    size_t cap);

#endif
