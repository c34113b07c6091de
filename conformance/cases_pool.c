/*
 * cases_pool.c - SBX_CAP_POOL (ABI 1.2): a sandbox made for one key (a
 * pool member's) is handed over to a session with another: attach and
 * destroy under the session's key with the first key's hash work, and
 * nothing of the first key's text is where the sandbox's commands see it.
 */
#include "cf_internal.h"

#include <stdlib.h>
#include <string.h>

void cf_case_pool_handover(struct cf_test *t)
{
    sbx_provider *p = cf_open(t);
    if (!p)
        return;
    char key_a[CF_KEY_MAX], key_b[CF_KEY_MAX], hash_a[SBX_KEY_HASH_LEN + 1];
    cf_new_key(t, key_a);
    cf_new_key(t, key_b);
    sbx_handle *h = cf_create(t, p, key_a);
    if (!h || !cf_write_text(t, h, "pooled.txt", "made ahead\n"))
        return;
    if (sbx_key_hash(key_a, hash_a) != SBX_OK)
        return (void)cf_fail(t, "sbx_key_hash failed");
    char ref[SBX_REF_MAX];
    snprintf(ref, sizeof ref, "%s", sbx_handle_ref(h));
    cf_release(t, h);

    sbx_error err;
    sbx_handle *hb = NULL;
    if (!cf_expect_ok(t, sbx_attach_pooled(p, key_b, hash_a, ref, NULL, &hb, &err), &err,
                      "attach under another session key with the pooled key's hash"))
        return;
    cf_track(t, p, hb);
    if (!cf_expect_file(t, hb, "pooled.txt", "made ahead\n"))
        return;
    char *out = cf_sh(t, hb, "env; hostname 2>/dev/null; cat /etc/hostname 2>/dev/null; "
                             "cat /proc/1/environ 2>/dev/null | tr '\\0' '\\n'; true");
    if (!out)
        return;
    /* the key's unique part is the case's token; its whole text too */
    bool leak = strstr(out, key_a) != NULL;
    free(out);
    if (leak)
        return (void)cf_fail(t, "the pooled key's text \"%s\" is in the environment or the "
                                "hostname the sandbox's commands see",
                             key_a);
    cf_release(t, hb);
    if (!cf_expect_ok(t, sbx_destroy_pooled(p, key_b, hash_a, ref, NULL, &err), &err,
                      "destroy under another session key with the pooled key's hash"))
        return;
    sbx_handle *again = NULL;
    int rc = sbx_attach_pooled(p, key_b, hash_a, ref, NULL, &again, &err);
    if (rc == SBX_OK)
        cf_track(t, p, again);
    cf_proc_expect_status(t, rc, &err, SBX_E_NOT_FOUND,
                          "attach after the pooled sandbox was destroyed");
}
