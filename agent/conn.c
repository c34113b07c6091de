/*
 * conn.c - one connection: the preamble both ways, the version check, one
 * request, dispatch. A connection serves exactly one request (the host
 * opens one per operation: connecting to a local unix socket costs a few
 * microseconds), so a handler process never carries state between
 * operations.
 */
#include "agent.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void conn_serve(int fd)
{
    /* a command that closes its stdin must not kill its handler (the
     * command itself gets the default disposition back, exec.c) */
    signal(SIGPIPE, SIG_IGN);
    unsigned char pre[AP_PREAMBLE_LEN];
    ap_preamble(pre, AP_VERSION);
    if (wire_write_full(fd, pre, sizeof pre) != 0)
        return;
    uint32_t version;
    if (wire_read_full(fd, pre, sizeof pre) != 0)
        return;
    if (ap_parse_preamble(pre, &version) != 0) {
        wire_error(fd, EPROTO, "preamble", "not an sbx-agent client (bad magic)");
        return;
    }
    if (version != AP_VERSION) {
        wire_error(fd, EPROTONOSUPPORT, "preamble",
                   "the agent speaks protocol %u, the client %u", AP_VERSION, version);
        return;
    }
    unsigned char *req = malloc(AP_FRAME_MAX);
    if (!req)
        return;
    int type;
    uint32_t len;
    int r = wire_read_frame(fd, &type, req, AP_FRAME_MAX, &len);
    if (r == -2)
        wire_error(fd, EPROTO, "frame", "frame longer than %u bytes", AP_FRAME_MAX);
    if (r != 0) {
        free(req);
        return;
    }
    switch (type) {
    case AP_PING: {
        unsigned char buf[128];
        struct ap_out o;
        ap_out_begin(&o, buf, sizeof buf, AP_PONG);
        ap_put_u32(&o, AP_VERSION);
        ap_put_u32(&o, (uint32_t)getppid());
        ap_put_str(&o, "sbx-agent " SBX_AGENT_BUILD);
        size_t n = ap_out_end(&o);
        if (len != 0)
            wire_error(fd, EPROTO, "ping", "malformed ping frame");
        else if (n)
            wire_write_full(fd, buf, n);
        break;
    }
    case AP_EXEC:
        exec_serve(fd, req, len);
        break;
    case AP_READ:
    case AP_WRITE:
    case AP_STAT:
    case AP_LIST:
    case AP_MKDIR:
    case AP_REMOVE:
        files_serve(fd, type, req, len);
        break;
    default:
        wire_error(fd, EPROTO, "request", "unknown request type 0x%02x", type);
    }
    free(req);
}
