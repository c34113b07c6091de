/*
 * users.c - SBX_CAP_USERS for docker: group_add and user_add through the
 * container's sbx-agent (protocol 2: it edits /etc/group and /etc/passwd
 * atomically and makes the home directory, agent/accounts.c), and the
 * user a call acts as (sbx_host.call_user), which exec, read_file and
 * write_file pass to the agent.
 *
 * A container without the agent (`agent: false`, or one made before the
 * agent) cannot do either: the Engine API's archive endpoints write as
 * root and cannot check a user's permissions, so such calls are refused
 * with SBX_E_UNSUPPORTED rather than half honoured.
 */
#include "docker.h"

#include "agent_proto/proto.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *docker_call_user(const struct docker_state *st, sbx_call *call)
{
    const struct sbx_host *h = st->host;
    if (!call || h->size < SBX_HOST_SIZE_USERS_1_1 || !h->call_user)
        return NULL;
    const char *u = h->call_user(h, call);
    return u && *u ? u : NULL;
}

int docker_users_need_agent(sbx_sandbox *sb, sbx_call *call, const char *what)
{
    return docker_error(sb->st, call, SBX_E_UNSUPPORTED,
                        "docker: %s: container %.12s runs without the sbx agent "
                        "(providers.docker.agent: false, or made before it), which "
                        "users need; recreate it with the agent",
                        what, sb->id);
}

/* EEXIST: another id; ENOENT: an unknown group. */
static int account_status(uint32_t e, const char *stage)
{
    (void)stage;
    switch (e) {
    case EEXIST:
        return SBX_E_EXISTS;
    case ENOENT:
        return SBX_E_NOT_FOUND;
    case EACCES:
    case EPERM:
    case EROFS:
        return SBX_E_DENIED;
    case EPROTO:
    case EPROTONOSUPPORT:
        return SBX_E_PROTOCOL;
    case ENOMEM:
        return SBX_E_NOMEM;
    default:
        return SBX_E_IO;
    }
}

/* Send a request, expect AP_OK. */
static int one_shot(sbx_sandbox *sb, sbx_call *call, const unsigned char *req, size_t n,
                    const char *what)
{
    struct docker_state *st = sb->st;
    struct docker_agent_conn c;
    int rc = docker_agent_open(sb, call, req, n,
                               docker_now_ms() + st->cfg.request_timeout_ms, &c);
    if (rc != SBX_OK)
        return rc;
    unsigned char buf[4096];
    int type;
    uint32_t len;
    rc = docker_agent_recv(&c, &type, buf, sizeof buf, &len);
    if (rc == SBX_OK && type != AP_OK)
        rc = docker_agent_fail(&c, what, type, buf, len, account_status);
    docker_agent_close(&c);
    return rc;
}

int docker_group_add(sbx_sandbox *sb, sbx_call *call, const struct sbx_group_spec *group)
{
    if (!sb->agent_sock)
        return docker_users_need_agent(sb, call, "group_add");
    unsigned char req[AP_HDR_LEN + 128];
    struct ap_out o;
    sbxs_ap_out_begin(&o, req, sizeof req, AP_GROUP_ADD);
    sbxs_ap_put_str(&o, group->name);
    sbxs_ap_put_u32(&o, group->gid);
    size_t n = sbxs_ap_out_end(&o);
    if (!n)
        return docker_error(sb->st, call, SBX_E_INVALID, "docker: group_add: name too long");
    char what[80];
    snprintf(what, sizeof what, "group_add %.40s", group->name);
    return one_shot(sb, call, req, n, what);
}

int docker_user_add(sbx_sandbox *sb, sbx_call *call, const struct sbx_user_spec *user)
{
    if (!sb->agent_sock)
        return docker_users_need_agent(sb, call, "user_add");
    size_t ng = 0;
    while (user->groups && user->groups[ng])
        ng++;
    size_t cap = AP_HDR_LEN + 128 + ng * 40;
    unsigned char *req = malloc(cap);
    if (!req)
        return docker_error(sb->st, call, SBX_E_NOMEM, "out of memory");
    struct ap_out o;
    sbxs_ap_out_begin(&o, req, cap, AP_USER_ADD);
    sbxs_ap_put_str(&o, user->name);
    sbxs_ap_put_u32(&o, user->uid);
    sbxs_ap_put_str(&o, user->group ? user->group : "");
    sbxs_ap_put_u32(&o, (uint32_t)ng);
    for (size_t i = 0; i < ng; i++)
        sbxs_ap_put_str(&o, user->groups[i]);
    size_t n = sbxs_ap_out_end(&o);
    char what[80];
    snprintf(what, sizeof what, "user_add %.40s", user->name);
    int rc = n ? one_shot(sb, call, req, n, what)
               : docker_error(sb->st, call, SBX_E_INVALID, "docker: user_add: too long");
    free(req);
    return rc;
}
