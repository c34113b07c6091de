/*
 * cases_users.c - SBX_CAP_USERS: a user made with user_add is who a
 * handle's commands run as (its uid, primary group, supplementary
 * groups), whose files a write makes, and whose permissions a read or a
 * write is checked against; group_add and user_add accept what exists
 * with the same id and refuse another id.
 *
 * Each case makes its own user and group in its own sandbox, named after
 * the case's token, with ids in 4100..4199: a fresh sandbox's image is not
 * expected to use them.
 */
#include "cf_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UID 4141u
#define GID_DEV 4142u

struct names {
    char user[24], group[24];
};

static void names_of(const struct cf_test *t, struct names *n)
{
    snprintf(n->user, sizeof n->user, "sbxcf-%.8s", t->token);
    snprintf(n->group, sizeof n->group, "sbxcfg-%.8s", t->token);
}

static bool group_add(struct cf_test *t, sbx_handle *h, const char *name, uint32_t gid,
                      int want)
{
    struct sbx_group_spec g = {sizeof g, gid, name};
    sbx_error err;
    int rc = sbx_group_add(h, &g, NULL, &err);
    if (rc == want)
        return true;
    return cf_fail(t, "group_add %s (gid %u) gave %s (%s); want %s", name, gid,
                   cf_status_name(rc), rc ? err.message : "no error", cf_status_name(want));
}

static bool user_add(struct cf_test *t, sbx_handle *h, const char *name, uint32_t uid,
                     const char *const *groups, int want)
{
    struct sbx_user_spec u = {sizeof u, uid, name, NULL, groups};
    sbx_error err;
    int rc = sbx_user_add(h, &u, NULL, &err);
    if (rc == want)
        return true;
    return cf_fail(t, "user_add %s (uid %u) gave %s (%s); want %s", name, uid,
                   cf_status_name(rc), rc ? err.message : "no error", cf_status_name(want));
}

/* A sandbox with the case's group (GID_DEV) and user (UID, in it). */
static sbx_handle *with_user(struct cf_test *t, struct names *n)
{
    names_of(t, n);
    sbx_handle *h = cf_sandbox(t, NULL);
    if (!h)
        return NULL;
    const char *groups[] = {n->group, NULL};
    if (!group_add(t, h, n->group, GID_DEV, SBX_OK) ||
        !user_add(t, h, n->user, UID, groups, SBX_OK))
        return NULL;
    return h;
}

static bool act_as(struct cf_test *t, sbx_handle *h, const char *user)
{
    sbx_error err;
    return cf_expect_ok(t, sbx_handle_set_user(h, user, &err), &err, "sbx_handle_set_user");
}

void cf_case_users_exec_as_user(struct cf_test *t)
{
    struct names n;
    sbx_handle *h = with_user(t, &n);
    if (!h || !act_as(t, h, n.user))
        return;
    char *out = cf_sh(t, h, "id -u; id -un; id -gn; id -G");
    if (!out)
        return;
    char want_head[96];
    snprintf(want_head, sizeof want_head, "%u\n%s\n%s\n", UID, n.user, n.user);
    char dev[16];
    snprintf(dev, sizeof dev, "%u", GID_DEV);
    char q[300];
    /* the last line: every group id, the supplementary one among them */
    const char *groups = strncmp(out, want_head, strlen(want_head)) == 0
                             ? out + strlen(want_head)
                             : NULL;
    bool has_dev = false;
    char line[256];
    snprintf(line, sizeof line, "%s", groups ? groups : "");
    for (char *tok = strtok(line, " \n"); tok; tok = strtok(NULL, " \n"))
        has_dev |= !strcmp(tok, dev);
    if (!groups || !has_dev)
        cf_fail(t, "as user %s, `id -u; id -un; id -gn; id -G` printed %s; want uid %u, the "
                   "user's own primary group and supplementary group %u",
                n.user, cf_quote(out, strlen(out), q, sizeof q), UID, GID_DEV);
    free(out);
    /* back to the default user */
    if (!act_as(t, h, NULL) || !(out = cf_sh(t, h, "id -u")))
        return;
    if ((unsigned)strtoul(out, NULL, 10) == UID)
        cf_fail(t, "after sbx_handle_set_user(NULL) commands still run as uid %u", UID);
    free(out);
}

void cf_case_users_write_owned(struct cf_test *t)
{
    struct names n;
    sbx_handle *h = with_user(t, &n);
    if (!h)
        return;
    char script[200];
    snprintf(script, sizeof script, "mkdir -p mine && chown %s mine", n.user);
    char *out = cf_sh(t, h, script);
    if (!out)
        return;
    free(out);
    if (!act_as(t, h, n.user) || !cf_write_text(t, h, "mine/f.txt", "made by the user\n") ||
        !cf_expect_file(t, h, "mine/f.txt", "made by the user\n") || !act_as(t, h, NULL))
        return;
    if (!(out = cf_sh(t, h, "stat -c '%u %a' mine/f.txt")))
        return;
    char want[64];
    char q[200];
    snprintf(want, sizeof want, "%u ", UID);
    if (strncmp(out, want, strlen(want)) != 0 || strcmp(out + strlen(want), "644\n") != 0)
        cf_fail(t, "a file written as user %s (uid %u) has owner, group and mode %s; want "
                   "owner %u, mode 644",
                n.user, UID, cf_quote(out, strlen(out), q, sizeof q), UID);
    free(out);
}

void cf_case_users_root_only_refused(struct cf_test *t)
{
    struct names n;
    sbx_handle *h = with_user(t, &n);
    if (!h)
        return;
    /* a file and a directory only root may touch */
    char *out = cf_sh(t, h, "echo secret > secret.txt && chmod 600 secret.txt && "
                            "mkdir closed && chmod 755 closed");
    if (!out)
        return;
    free(out);
    if (!act_as(t, h, n.user))
        return;
    sbx_capture c;
    sbx_capture_init(&c, 1024, 0);
    struct sbx_sink sink = sbx_capture_sink(&c);
    sbx_error err;
    int rc = sbx_read(h, "secret.txt", &sink, NULL, &err);
    if (rc != SBX_E_DENIED)
        cf_fail(t, "as user %s, read of a root-only 0600 file gave %s (%s); want "
                   "SBX_E_DENIED",
                n.user, cf_status_name(rc), rc ? err.message : "its content");
    else if (c.total)
        cf_fail(t, "a refused read delivered %llu bytes of the root-only file",
                (unsigned long long)c.total);
    sbx_capture_free(&c);
    if (cf_failed(t))
        return;
    struct sbx_memory_source m = {"x\n", 2, 0};
    struct sbx_source src = sbx_memory_source(&m);
    rc = sbx_write(h, "closed/new.txt", &src, 0, NULL, &err);
    if (rc != SBX_E_DENIED)
        return (void)cf_fail(t, "as user %s, a write into root's 0755 directory gave %s "
                                "(%s); want SBX_E_DENIED",
                             n.user, cf_status_name(rc), rc ? err.message : "no error");
    if (!(out = cf_sh_any(t, h, "cat secret.txt; echo \"exit $?\"")))
        return;
    if (strstr(out, "secret\n") || !strstr(out, "exit 1"))
        cf_fail(t, "as user %s, `cat` of the root-only file printed %s", n.user, out);
    free(out);
    /* nothing was made, and root still reads the file */
    if (act_as(t, h, NULL) && (out = cf_sh(t, h, "test ! -e closed/new.txt && cat secret.txt"))) {
        if (strcmp(out, "secret\n") != 0)
            cf_fail(t, "the root-only file reads %s afterwards", out);
        free(out);
    }
}

void cf_case_users_add_idempotent(struct cf_test *t)
{
    struct names n;
    sbx_handle *h = with_user(t, &n);
    if (!h)
        return;
    const char *groups[] = {n.group, NULL};
    const char *unknown[] = {"sbxcf-no-such-group", NULL};
    if (!group_add(t, h, n.group, GID_DEV, SBX_OK) || /* again, the same gid */
        !group_add(t, h, n.group, 0, SBX_OK) ||       /* any gid */
        !group_add(t, h, n.group, GID_DEV + 1, SBX_E_EXISTS) ||
        !user_add(t, h, n.user, UID, groups, SBX_OK) ||
        !user_add(t, h, n.user, 0, groups, SBX_OK) ||
        !user_add(t, h, n.user, UID + 2, groups, SBX_E_EXISTS))
        return;
    char other[32];
    snprintf(other, sizeof other, "sbxcfo-%.8s", t->token);
    if (!user_add(t, h, other, UID + 3, unknown, SBX_E_NOT_FOUND))
        return;
    /* the refused calls changed nothing */
    char script[200];
    snprintf(script, sizeof script, "id -u %s; id %s >/dev/null 2>&1 || echo none", n.user,
             other);
    char *out = cf_sh_any(t, h, script);
    if (!out)
        return;
    char want[32];
    snprintf(want, sizeof want, "%u\nnone\n", UID);
    char q[200], qw[64];
    if (strcmp(out, want) != 0)
        cf_fail(t, "after the refused calls, `%s` printed %s; want %s", script,
                cf_quote(out, strlen(out), q, sizeof q),
                cf_quote(want, strlen(want), qw, sizeof qw));
    free(out);
}
