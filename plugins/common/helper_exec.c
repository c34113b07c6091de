/* helper_exec.c - a provider's own helper command (see helper_exec.h). */
#include "helper_exec.h"

#include <string.h>

void sbxp_helper_exec_init(struct sbxp_helper_exec *h, const char *const *argv,
                           const struct sbx_sink *out, int64_t timeout_ms, char *msg,
                           size_t cap)
{
    memset(h, 0, sizeof *h);
    sbxp_text_sink_init(&h->errs, msg, cap);
    h->args.size = sizeof h->args;
    h->args.argv = argv;
    h->args.timeout_ms = timeout_ms;
    h->args.out = out;
    h->args.err = cap ? &h->errs.sink : NULL;
    h->res.size = sizeof h->res;
}

int sbxp_helper_exec_code(const struct sbxp_helper_exec *h)
{
    return h->res.term_signal ? 128 + h->res.term_signal : h->res.exit_code;
}
