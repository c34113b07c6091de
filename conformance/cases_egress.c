/*
 * cases_egress.c - SBX_CAP_EGRESS: a limited network is deny by default
 * with exactly the allowlist it was given, egress_set replaces it whole,
 * and the policy belongs to the sandbox, not to the instance that set it.
 */
#include "cf_internal.h"

#include <string.h>

#define MAX_TARGETS 16

struct seen {
    size_t n;
    char target[MAX_TARGETS][128];
    bool overflow;
};

static int on_allow(void *ctx, const char *target)
{
    struct seen *s = ctx;
    if (s->n == MAX_TARGETS || strlen(target) >= sizeof s->target[0]) {
        s->overflow = true;
        return 0;
    }
    memcpy(s->target[s->n++], target, strlen(target) + 1);
    return 0;
}

/* Read the policy of h and require deny + exactly want[] (any order). */
static bool expect_policy(struct cf_test *t, sbx_handle *h, const char *const *want,
                          const char *when)
{
    struct seen s;
    memset(&s, 0, sizeof s);
    struct sbx_egress_report r;
    memset(&r, 0, sizeof r);
    r.size = sizeof r;
    r.default_action = 0xff;
    r.ctx = &s;
    r.allow = on_allow;
    sbx_error err;
    int rc = sbx_egress_get(h, &r, NULL, &err);
    if (!cf_expect_ok(t, rc, &err, "egress_get"))
        return false;
    if (r.default_action != SBX_EGRESS_DENY)
        return cf_fail(t, "%s: egress_get reports default action %u; want deny (%d)", when,
                       r.default_action, SBX_EGRESS_DENY);
    size_t nwant = 0;
    while (want[nwant])
        nwant++;
    char got[512] = "";
    for (size_t i = 0; i < s.n; i++)
        cf_appendf(got, sizeof got, "%s%s", i ? ", " : "", s.target[i]);
    if (s.overflow || s.n != nwant)
        return cf_fail(t, "%s: the sandbox allows [%s]; want %zu targets", when, got, nwant);
    for (size_t i = 0; i < nwant; i++) {
        bool found = false;
        for (size_t j = 0; j < s.n && !found; j++)
            found = !strcmp(s.target[j], want[i]);
        if (!found)
            return cf_fail(t, "%s: the sandbox allows [%s]; %s is missing", when, got, want[i]);
    }
    return true;
}

void cf_case_egress_create_limited(struct cf_test *t)
{
    sbx_provider *p = cf_open(t);
    if (!p)
        return;
    static const char *const allow[] = {"example.com", "*.pkg.example.org", NULL};
    struct sbx_egress_policy pol = {sizeof pol, SBX_EGRESS_DENY, allow};
    char key[CF_KEY_MAX];
    cf_new_key(t, key);
    sbx_handle *h = cf_create_egress(t, p, key, &pol);
    if (!h)
        return;
    expect_policy(t, h, allow, "after create");
}

void cf_case_egress_set_exact(struct cf_test *t)
{
    sbx_provider *p = cf_open(t);
    if (!p)
        return;
    static const char *const first[] = {"a.example.com", "b.example.com", NULL};
    static const char *const second[] = {"b.example.com", "c.example.net", NULL};
    struct sbx_egress_policy pol = {sizeof pol, SBX_EGRESS_DENY, first};
    char key[CF_KEY_MAX];
    cf_new_key(t, key);
    sbx_handle *h = cf_create_egress(t, p, key, &pol);
    if (!h)
        return;
    pol.allow = second;
    sbx_error err;
    int rc = sbx_egress_set(h, &pol, NULL, &err);
    if (!cf_expect_ok(t, rc, &err, "egress_set"))
        return;
    if (!expect_policy(t, h, second, "after egress_set"))
        return;
    sbx_handle *again = cf_attach_after_restart(t, p, h);
    if (!again)
        return;
    expect_policy(t, again, second, "after a restart and attach");
}
