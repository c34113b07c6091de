/*
 * cases_lifecycle.c - identity, idempotent create, attach, ownership and
 * destroy: the contract that lets a restarted worker find its sandbox again
 * and never hand one session's workspace to another.
 */
#include "cf_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cf_sandbox, with the sandbox's key and reference copied into
 * key[CF_KEY_MAX] and ref[SBX_REF_MAX]: the reference is borrowed from the
 * handle, and these cases go on using both after releasing it. */
static sbx_handle *sandbox_with_id(struct cf_test *t, sbx_provider **p, char *key,
                                   char *ref)
{
    sbx_handle *h = cf_sandbox(t, p);
    if (h) {
        snprintf(key, CF_KEY_MAX, "%s", t->sandboxes[0].key);
        snprintf(ref, SBX_REF_MAX, "%s", sbx_handle_ref(h));
    }
    return h;
}

void cf_case_identity_two_instances(struct cf_test *t)
{
    sbx_provider *a = cf_open(t);
    sbx_provider *b = a ? cf_open(t) : NULL;
    if (!b)
        return;
    char key[CF_KEY_MAX], other[CF_KEY_MAX];
    cf_new_key(t, key);
    cf_new_key(t, other);

    sbx_handle *ha = cf_create(t, a, key);
    if (!ha)
        return;
    const char *root = sbx_handle_root(ha);
    if (!root || root[0] != '/')
        return (void)cf_fail(t, "root() is %s, want an absolute path",
                             root ? root : "NULL");
    sbx_handle *ha2 = cf_create(t, a, key);
    if (!ha2)
        return;
    if (strcmp(sbx_handle_ref(ha), sbx_handle_ref(ha2)) != 0)
        return (void)cf_fail(t, "create twice with one key in one instance gave "
                                "two references: %s and %s",
                             sbx_handle_ref(ha), sbx_handle_ref(ha2));
    sbx_handle *hb = cf_create(t, b, key);
    if (!hb)
        return;
    if (strcmp(sbx_handle_ref(ha), sbx_handle_ref(hb)) != 0)
        return (void)cf_fail(t, "the same key gave reference %s in one instance "
                                "and %s in another",
                             sbx_handle_ref(ha), sbx_handle_ref(hb));
    sbx_handle *ho = cf_create(t, a, other);
    if (!ho)
        return;
    if (strcmp(sbx_handle_ref(ha), sbx_handle_ref(ho)) == 0)
        return (void)cf_fail(t, "two different session keys got the same "
                                "reference %s", sbx_handle_ref(ha));
}

void cf_case_create_idempotent_second_instance(struct cf_test *t)
{
    sbx_provider *a = cf_open(t);
    sbx_provider *b = a ? cf_open(t) : NULL;
    if (!b)
        return;
    char key[CF_KEY_MAX];
    cf_new_key(t, key);
    sbx_handle *ha = cf_create(t, a, key);
    if (!ha)
        return;
    char first[128], second[128];
    snprintf(first, sizeof first, "written by the first instance %s\n", t->token);
    snprintf(second, sizeof second, "written by the second instance %s\n", t->token);
    if (!cf_write_text(t, ha, "shared/first.txt", first))
        return;

    sbx_handle *hb = cf_create(t, b, key);
    if (!hb)
        return;
    if (strcmp(sbx_handle_ref(ha), sbx_handle_ref(hb)) != 0)
        return (void)cf_fail(t, "second instance's create gave reference %s, "
                                "the first gave %s",
                             sbx_handle_ref(hb), sbx_handle_ref(ha));
    if (!cf_expect_file(t, hb, "shared/first.txt", first))
        return;
    if (!cf_write_text(t, hb, "shared/second.txt", second))
        return;
    if (!cf_expect_file(t, ha, "shared/second.txt", second))
        return;
    /* The shell of the second instance sees the first instance's file. */
    char *out = cf_sh(t, hb, "cat shared/first.txt");
    if (out && strcmp(out, first) != 0) {
        char q[200];
        cf_fail(t, "cat shared/first.txt in the second instance printed %s",
                cf_quote(out, strlen(out), q, sizeof q));
    }
    free(out);
}

void cf_case_attach_after_restart(struct cf_test *t)
{
    sbx_provider *a = NULL;
    char key[CF_KEY_MAX], ref[SBX_REF_MAX], root[SBX_REF_MAX];
    sbx_handle *h = sandbox_with_id(t, &a, key, ref);
    if (!h)
        return;
    snprintf(root, sizeof root, "%s", sbx_handle_root(h));

    struct cf_pattern_source ps;
    struct sbx_source src = cf_pattern_source(&ps, 65536 + 17, 7);
    sbx_error err;
    sbx_error_clear(&err);
    if (!cf_expect_ok(t, sbx_write(h, "kept/data.bin", &src, 0, NULL, &err), &err,
                      "write kept/data.bin"))
        return;
    free(cf_sh(t, h, "echo made-by-shell > kept/by-shell"));
    if (cf_failed(t))
        return;

    cf_close(t, a); /* the restart: the first instance is gone */

    sbx_provider *b = cf_open(t);
    if (!b)
        return;
    sbx_handle *h2 = NULL;
    int rc = sbx_attach(b, key, ref, NULL, &h2, &err);
    if (!cf_expect_ok(t, rc, &err, "attach after restart"))
        return;
    cf_track(t, b, h2);
    if (strcmp(sbx_handle_ref(h2), ref) != 0)
        return (void)cf_fail(t, "attach returned reference %s for %s",
                             sbx_handle_ref(h2), ref);
    if (strcmp(sbx_handle_root(h2), root) != 0)
        return (void)cf_fail(t, "root changed across attach: %s, was %s",
                             sbx_handle_root(h2), root);
    struct cf_pattern_sink check;
    struct sbx_sink sink = cf_pattern_sink(&check, 7);
    if (!cf_expect_ok(t, sbx_read(h2, "kept/data.bin", &sink, NULL, &err), &err,
                      "read kept/data.bin after attach"))
        return;
    if (check.mismatch != UINT64_MAX || check.pos != 65536 + 17)
        return (void)cf_fail(t, "kept/data.bin differs after attach (%llu bytes, "
                                "first difference at %lld)",
                             (unsigned long long)check.pos,
                             check.mismatch == UINT64_MAX ? -1LL
                                                          : (long long)check.mismatch);
    if (!cf_expect_file(t, h2, "kept/by-shell", "made-by-shell\n"))
        return;
}

/* Attach with the wrong key: must be SBX_E_DENIED; a handle it returned
 * anyway is released. */
static bool expect_attach_denied(struct cf_test *t, sbx_provider *p,
                                 const char *key, const char *ref,
                                 const char *where)
{
    sbx_handle *h = NULL;
    sbx_error err;
    sbx_error_clear(&err);
    int rc = sbx_attach(p, key, ref, NULL, &h, &err);
    if (rc == SBX_OK) {
        cf_track(t, p, h);
        return cf_fail(t, "attach %s of reference \"%s\" with another session "
                          "key returned SBX_OK; want SBX_E_DENIED",
                       where, ref);
    }
    if (rc != SBX_E_DENIED)
        return cf_fail(t, "attach %s with another session key returned %s (%s); "
                          "want SBX_E_DENIED",
                       where, cf_status_name(rc), err.message);
    return true;
}

void cf_case_attach_other_key_denied(struct cf_test *t)
{
    sbx_provider *a = NULL;
    char key[CF_KEY_MAX], other[CF_KEY_MAX], ref[SBX_REF_MAX];
    sbx_handle *h = sandbox_with_id(t, &a, key, ref);
    if (!h)
        return;
    cf_new_key(t, other);
    if (!cf_write_text(t, h, "owner.txt", "owned\n"))
        return;
    if (!expect_attach_denied(t, a, other, ref, "in the same instance"))
        return;
    sbx_provider *b = cf_open(t);
    if (!b || !expect_attach_denied(t, b, other, ref, "from a new instance"))
        return;
    /* The owner still gets in, and the refusal changed nothing. */
    sbx_handle *h2 = NULL;
    sbx_error err;
    sbx_error_clear(&err);
    if (!cf_expect_ok(t, sbx_attach(b, key, ref, NULL, &h2, &err), &err,
                      "attach by the owner after a refused attach"))
        return;
    cf_track(t, b, h2);
    cf_expect_file(t, h2, "owner.txt", "owned\n");
}

void cf_case_destroy_other_key_denied(struct cf_test *t)
{
    sbx_provider *a = NULL;
    char key[CF_KEY_MAX], other[CF_KEY_MAX], ref[SBX_REF_MAX];
    sbx_handle *h = sandbox_with_id(t, &a, key, ref);
    if (!h)
        return;
    cf_new_key(t, other);
    if (!cf_write_text(t, h, "owner.txt", "owned\n"))
        return;
    cf_release(t, h);
    sbx_error err;
    sbx_error_clear(&err);
    int rc = sbx_destroy(a, other, ref, NULL, &err);
    if (rc != SBX_E_DENIED)
        cf_fail(t, "destroy with another session key returned %s (%s); want "
                   "SBX_E_DENIED",
                cf_status_name(rc), err.message);
    /* Whatever it returned, the owner's sandbox must still be there. */
    sbx_handle *h2 = NULL;
    rc = sbx_attach(a, key, ref, NULL, &h2, &err);
    if (rc != SBX_OK)
        return (void)cf_fail(t, "after destroy with another key, the owner's "
                                "attach failed: %s: %s",
                             cf_status_name(rc), err.message);
    cf_track(t, a, h2);
    cf_expect_file(t, h2, "owner.txt", "owned\n");
}

void cf_case_destroy_twice(struct cf_test *t)
{
    sbx_provider *a = NULL;
    char key[CF_KEY_MAX], ref[SBX_REF_MAX];
    sbx_handle *h = sandbox_with_id(t, &a, key, ref);
    if (!h)
        return;
    cf_release(t, h);
    sbx_error err;
    sbx_error_clear(&err);
    if (!cf_expect_ok(t, sbx_destroy(a, key, ref, NULL, &err), &err, "first destroy"))
        return;
    if (!cf_expect_ok(t, sbx_destroy(a, key, ref, NULL, &err), &err,
                      "second destroy in the same instance"))
        return;
    sbx_provider *b = cf_open(t);
    if (!b)
        return;
    cf_expect_ok(t, sbx_destroy(b, key, ref, NULL, &err), &err,
                 "third destroy from a new instance");
}

void cf_case_attach_after_destroy(struct cf_test *t)
{
    sbx_provider *a = NULL;
    char key[CF_KEY_MAX], ref[SBX_REF_MAX];
    sbx_handle *h = sandbox_with_id(t, &a, key, ref);
    if (!h)
        return;
    if (!cf_write_text(t, h, "marker.txt", "before destroy\n"))
        return;
    cf_release(t, h);
    sbx_error err;
    sbx_error_clear(&err);
    if (!cf_expect_ok(t, sbx_destroy(a, key, ref, NULL, &err), &err, "destroy"))
        return;

    sbx_provider *b = cf_open(t);
    if (!b)
        return;
    sbx_provider *inst[2] = {a, b};
    const char *where[2] = {"in the same instance", "from a new instance"};
    for (int i = 0; i < 2; i++) {
        sbx_handle *h2 = NULL;
        int rc = sbx_attach(inst[i], key, ref, NULL, &h2, &err);
        if (rc == SBX_OK) {
            cf_track(t, inst[i], h2);
            return (void)cf_fail(t, "attach %s after destroy returned SBX_OK; "
                                    "want SBX_E_NOT_FOUND (a lost sandbox must "
                                    "never be replaced silently)",
                                 where[i]);
        }
        if (rc != SBX_E_NOT_FOUND)
            return (void)cf_fail(t, "attach %s after destroy returned %s (%s); "
                                    "want SBX_E_NOT_FOUND",
                                 where[i], cf_status_name(rc), err.message);
    }
    /* A new create for the key starts from nothing. */
    sbx_handle *h3 = cf_create(t, b, key);
    if (!h3)
        return;
    char *out = cf_sh(t, h3, "if test -e marker.txt; then echo present; fi");
    if (out && *out)
        cf_fail(t, "a file written before destroy is still there after a new "
                   "create with the same key");
    free(out);
}

/*
 * References no provider writes: empty, with control characters, a path
 * leading out, and a very long one. attach must say SBX_E_INVALID (the
 * caller's record is wrong), never SBX_E_NOT_FOUND (which tells the caller
 * the workspace is gone, so a session manager would drop it); destroy of
 * such a reference is SBX_E_INVALID too, and destroys nothing.
 */
void cf_case_attach_malformed_ref(struct cf_test *t)
{
    sbx_provider *p = NULL;
    char key[CF_KEY_MAX], ref[SBX_REF_MAX];
    sbx_handle *h = sandbox_with_id(t, &p, key, ref);
    if (!h)
        return;
    if (!cf_write_text(t, h, "marker.txt", "still here\n"))
        return;
    char longref[SBX_REF_MAX];
    memset(longref, '%', sizeof longref - 1);
    longref[sizeof longref - 1] = '\0';
    const char *const bad[] = {"", "not a reference\n\x01", "../../../../etc/passwd",
                               longref};
    const char *what[] = {"an empty reference", "a reference with control characters",
                          "a path leading out", "a reference of SBX_REF_MAX - 1 '%'"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sbx_handle *h2 = NULL;
        sbx_error err;
        sbx_error_clear(&err);
        int rc = sbx_attach(p, key, bad[i], NULL, &h2, &err);
        if (rc == SBX_OK)
            cf_track(t, p, h2);
        if (rc != SBX_E_INVALID)
            return (void)cf_fail(t, "attach of %s returned %s (%s); want SBX_E_INVALID "
                                    "(SBX_E_NOT_FOUND says the workspace is gone)",
                                 what[i], cf_status_name(rc), err.message);
        sbx_error_clear(&err);
        rc = sbx_destroy(p, key, bad[i], NULL, &err);
        if (rc != SBX_E_INVALID)
            return (void)cf_fail(t, "destroy of %s returned %s (%s); want SBX_E_INVALID",
                                 what[i], cf_status_name(rc), err.message);
    }
    (void)cf_expect_file(t, h, "marker.txt", "still here\n");
}
