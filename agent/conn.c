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

void agent_conn_serve(int fd)
{
    /* a command that closes its stdin must not kill its handler (the
     * command itself gets the default disposition back, exec.c) */
    signal(SIGPIPE, SIG_IGN);
    unsigned char pre[AP_PREAMBLE_LEN];
    sbxs_ap_preamble(pre, AP_VERSION);
    if (agent_wire_write_full(fd, pre, sizeof pre) != 0)
        return;
    uint32_t version;
    if (agent_wire_read_full(fd, pre, sizeof pre) != 0)
        return;
    if (sbxs_ap_parse_preamble(pre, &version) != 0) {
        agent_wire_error(fd, EPROTO, "preamble", "not an sbx-agent client (bad magic)");
        return;
    }
    if (version < AP_VERSION_MIN || version > AP_VERSION) {
        agent_wire_error(fd, EPROTONOSUPPORT, "preamble",
                   "the agent speaks protocol %u (and %u), the client %u", AP_VERSION,
                   AP_VERSION_MIN, version);
        return;
    }
    unsigned char *req = malloc(AP_FRAME_MAX);
    if (!req)
        return;
    int type;
    uint32_t len;
    int r = agent_wire_read_frame(fd, &type, req, AP_FRAME_MAX, &len);
    if (r == -2)
        agent_wire_error(fd, EPROTO, "frame", "frame longer than %u bytes", AP_FRAME_MAX);
    if (r != 0) {
        free(req);
        return;
    }
    /* protocol 2: the user the request acts as comes first */
    char *user = NULL;
    const unsigned char *body = req;
    if (version >= 2 && type != AP_PING) {
        struct ap_in in;
        sbxs_ap_in_begin(&in, req, len);
        user = sbxs_ap_get_str(&in);
        if (!user || (user[0] && (strlen(user) > 255 || strchr(user, '\n')))) {
            agent_wire_error(fd, EPROTO, "request", "malformed user field");
            free(user);
            free(req);
            return;
        }
        body = req + (len - in.left);
        len = (uint32_t)in.left;
    }
    agent_conn_version = version;
    switch (type) {
    case AP_PING: {
        unsigned char buf[128];
        struct ap_out o;
        sbxs_ap_out_begin(&o, buf, sizeof buf, AP_PONG);
        sbxs_ap_put_u32(&o, AP_VERSION);
        sbxs_ap_put_u32(&o, (uint32_t)getppid());
        sbxs_ap_put_str(&o, "sbx-agent " SBX_AGENT_BUILD);
        size_t n = sbxs_ap_out_end(&o);
        if (len != 0)
            agent_wire_error(fd, EPROTO, "ping", "malformed ping frame");
        else if (n)
            agent_wire_write_full(fd, buf, n);
        break;
    }
    case AP_EXEC:
        agent_exec_serve(fd, body, len, user ? user : "");
        break;
    case AP_READ:
    case AP_WRITE:
    case AP_STAT:
    case AP_LIST:
    case AP_MKDIR:
    case AP_REMOVE:
    case AP_RENAME: /* protocol 3 (files.c checks) */
        agent_files_serve(fd, type, body, len, user ? user : "");
        break;
    case AP_GROUP_ADD:
    case AP_USER_ADD:
        if (version >= 2)
            agent_accounts_serve(fd, type, body, len);
        else
            agent_wire_error(fd, EPROTO, "request", "request type 0x%02x needs protocol 2",
                       type);
        break;
    case AP_PROC_CHANNEL:
        if (version >= 3)
            agent_procs_serve(fd, len);
        else
            agent_wire_error(fd, EPROTO, "request", "request type 0x%02x needs protocol 3",
                             type);
        break;
    default:
        agent_wire_error(fd, EPROTO, "request", "unknown request type 0x%02x", type);
    }
    free(user);
    free(req);
}
