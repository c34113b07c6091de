/*
 * cases_skills.c - SKILLS: a pinned bundle (size + SHA-256) published
 * read-only at <root>/skills/<name>/ (/workspace/skills/<name>/ where the
 * workspace root is /workspace), replaced whole by a new version, refused
 * (and never visible) when its digest is wrong or an entry is hostile, and
 * still there after attach from a restarted instance.
 */
#include "cf_internal.h"

#include "skill_bundles.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The skills directory: "skills" below the handle's workspace root. */
static const char *skills_dir(sbx_handle *h, char *buf, size_t cap)
{
    const char *root = sbx_handle_root(h);
    snprintf(buf, cap, "%s/skills", root && strcmp(root, "/") != 0 ? root : "");
    return buf;
}

static int install(sbx_handle *h, const char *name, const unsigned char *data,
                   size_t len, const char *sha, sbx_error *err)
{
    struct sbx_memory_source m = {data, len, 0};
    struct sbx_source src = sbx_memory_source(&m);
    struct sbx_blob b;
    memset(&b, 0, sizeof b);
    b.size = sizeof b;
    b.src = &src;
    b.length = len;
    b.sha256 = sha;
    b.format = "tar.gz";
    sbx_error_clear(err);
    return sbx_skill_install(h, name, &b, NULL, err);
}

/* Run tmpl with every "{SK}" in it replaced by the skills directory. */
static bool expect_sh(struct cf_test *t, sbx_handle *h, const char *tmpl,
                      const char *want, const char *what)
{
    char sk[512], script[4096];
    size_t skl = strlen(skills_dir(h, sk, sizeof sk)), n = 0;
    for (const char *p = tmpl; *p && n + skl + 1 < sizeof script;) {
        if (!strncmp(p, "{SK}", 4)) {
            memcpy(script + n, sk, skl);
            n += skl;
            p += 4;
        } else {
            script[n++] = *p++;
        }
    }
    script[n] = '\0';
    char *o = cf_sh_any(t, h, script);
    char q[300];
    if (o && strcmp(o, want) != 0)
        cf_fail(t, "%s: the sandbox printed %s", what, cf_quote(o, strlen(o), q, sizeof q));
    bool ok = o && !cf_failed(t);
    free(o);
    return ok;
}

/* A new sandbox with version 1 of the "hello" skill installed; NULL after
 * failing the case. *p (may be NULL) receives the provider. */
static sbx_handle *sandbox_with_hello(struct cf_test *t, sbx_provider **p)
{
    sbx_handle *h = cf_sandbox(t, p);
    if (!h)
        return NULL;
    sbx_error err;
    if (!cf_expect_ok(t, install(h, "hello", BUNDLE_V1, sizeof BUNDLE_V1, BUNDLE_V1_SHA,
                                 &err),
                      &err, "skill_install hello"))
        return NULL;
    return h;
}

void cf_case_skill_install_read_only(struct cf_test *t)
{
    sbx_handle *h = sandbox_with_hello(t, NULL);
    if (!h)
        return;
    sbx_error err;
    if (!expect_sh(t, h, "cat {SK}/hello/SKILL.md; {SK}/hello/bin/run.sh",
                   "# hello skill\nskill-ran\n", "reading and running the skill"))
        return;
    if (!expect_sh(t, h,
                   "echo x > {SK}/hello/SKILL.md 2>/dev/null && echo wrote; "
                   "touch {SK}/hello/new 2>/dev/null && echo created; "
                   "mkdir {SK}/other 2>/dev/null && echo made-dir; "
                   "rm -rf {SK}/hello/bin 2>/dev/null; cat {SK}/hello/SKILL.md; "
                   "ls {SK}/hello",
                   "# hello skill\nSKILL.md\nbin\n", "writing into the skill from inside"))
        return;
    /* a new version replaces the old one whole */
    if (!cf_expect_ok(t, install(h, "hello", BUNDLE_V2, sizeof BUNDLE_V2, BUNDLE_V2_SHA,
                                 &err),
                      &err, "skill_install hello (v2)"))
        return;
    expect_sh(t, h, "cat {SK}/hello/SKILL.md; ls {SK}/hello", "# hello v2\nSKILL.md\n",
              "after installing v2");
}

void cf_case_skill_install_verifies(struct cf_test *t)
{
    sbx_handle *h = cf_sandbox(t, NULL);
    if (!h)
        return;
    sbx_error err;
    struct {
        const char *what, *name;
        const unsigned char *data;
        size_t len;
        const char *sha;
        const char *needle; /* in the message */
    } bad[] = {
        {"a wrong SHA-256", "wrongsum", BUNDLE_V1, sizeof BUNDLE_V1, BUNDLE_V2_SHA, "SHA"},
        {"a symlink to /etc/passwd", "evil", BUNDLE_EVIL, sizeof BUNDLE_EVIL,
         BUNDLE_EVIL_SHA, "passwd"},
        {"an entry named ../escaped.txt", "dotdot", BUNDLE_DOTDOT, sizeof BUNDLE_DOTDOT,
         BUNDLE_DOTDOT_SHA, "escaped.txt"},
        {"a name with a slash", "../up", BUNDLE_V1, sizeof BUNDLE_V1, BUNDLE_V1_SHA, "up"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = install(h, bad[i].name, bad[i].data, bad[i].len, bad[i].sha, &err);
        if (rc != SBX_E_INVALID)
            return (void)cf_fail(t, "skill_install with %s returned %s (%s); want "
                                    "SBX_E_INVALID",
                                 bad[i].what, cf_status_name(rc), err.message);
        if (!strstr(err.message, bad[i].needle))
            return (void)cf_fail(t, "skill_install with %s: the message does not name "
                                    "\"%s\": %s",
                                 bad[i].what, bad[i].needle, err.message);
    }
    expect_sh(t, h, "ls -A {SK}; ls / {SK}/.. | grep -x escaped.txt; true", "",
              "after refused bundles");
}

void cf_case_skill_survives_restart(struct cf_test *t)
{
    sbx_provider *p = NULL;
    sbx_handle *h = sandbox_with_hello(t, &p);
    if (!h)
        return;
    sbx_handle *h2 = cf_attach_after_restart(t, p, h);
    if (!h2)
        return;
    if (!expect_sh(t, h2, "cat {SK}/hello/SKILL.md; {SK}/hello/bin/run.sh",
                   "# hello skill\nskill-ran\n", "the skill after a restart"))
        return;
    expect_sh(t, h2, "touch {SK}/hello/x 2>/dev/null && echo wrote; true", "",
              "writing into the skill after a restart");
}
