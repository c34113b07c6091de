/* call_cancel.c - see call_cancel.h. */
#include "call_cancel.h"

#include <time.h>

static int cancel_check(void *ctx)
{
    struct sbxp_call_cancel *c = ctx;
    return c->call && c->host->cancelled && c->host->cancelled(c->host, c->call);
}

void sbxp_call_cancel_init(struct sbxp_call_cancel *c, const struct sbx_host *host,
                           sbx_call *call)
{
    c->host = host;
    c->call = call;
    c->c.fd = call && host->cancel_fd ? host->cancel_fd(host, call) : -1;
    c->c.check = cancel_check;
    c->c.ctx = c;
}

