/*
 * helper_exec.h - the arguments of a provider's own helper command (a
 * short script a remote provider runs in the sandbox for itself: mkdir,
 * publishing a skill, a memory walk): argv, an optional stdout sink, a
 * timeout, and stderr kept as the message the caller reports when the
 * command fails.
 */
#ifndef SBXP_HELPER_EXEC_H
#define SBXP_HELPER_EXEC_H

#include "text_sink.h"

#include <sbx/provider.h>

#include <stddef.h>
#include <stdint.h>

struct sbxp_helper_exec {
    struct sbx_exec_args args;   /* pass &args to the provider's exec */
    struct sbx_exec_result res;  /* and &res for its result */
    struct sbxp_text_sink errs;  /* stderr into msg; do not copy the struct */
};

/*
 * Fill h for argv (NULL-terminated) with stdout to out (NULL discards),
 * timeout_ms and, when cap > 0, stderr kept in msg (msg becomes "" first;
 * cap 0 discards stderr).
 */
void sbxp_helper_exec_init(struct sbxp_helper_exec *h, const char *const *argv,
                           const struct sbx_sink *out, int64_t timeout_ms, char *msg,
                           size_t cap);

/* The command's exit code as a shell reports it: 128 + the signal that
 * ended it, else its exit status. */
int sbxp_helper_exec_code(const struct sbxp_helper_exec *h);

#endif /* SBXP_HELPER_EXEC_H */
