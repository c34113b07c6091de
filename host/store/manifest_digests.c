/*
 * manifest_digests.c - the manifest digest each session was provisioned
 * with (table session_manifests), for `sbx state` and the check of `sbx
 * resume`, and the manifest's run_as user, which every later attach of
 * the session (in any process) makes its handle act as. Written by the
 * provisioning worker before create; the spec hash, published with the
 * binding, covers the digest (and so the run_as) too.
 */
#include "store/driver.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

int sbxh_store_set_manifest(struct sbx_store *s, const char *key, const char *digest,
                            const char *run_as, sbx_error *err)
{
    struct sbx_store_value p[] = {SBX_SV_T(key), SBX_SV_T(digest),
                                  SBX_SV_I(sbx_store_wall_ms()), SBX_SV_T(run_as)};
    pthread_mutex_lock(&s->lock);
    int rc = sbx_store_ready(s, err);
    if (rc == SBX_OK)
        rc = sbx_store_prims_of(s)->query(s,
                             "INSERT INTO session_manifests (session_key, "
                             "manifest_digest, updated_at, run_as) VALUES ($1, $2, $3, "
                             "$4) ON CONFLICT (session_key) DO UPDATE SET "
                             "manifest_digest = excluded.manifest_digest, "
                             "updated_at = excluded.updated_at, run_as = excluded.run_as",
                             p, 4, NULL, NULL, err);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int sbxh_store_get_manifest(struct sbx_store *s, const char *key, char digest[65],
                            char run_as[SBX_USER_NAME_MAX + 1], bool *found,
                            sbx_error *err)
{
    *found = false;
    digest[0] = '\0';
    if (run_as)
        run_as[0] = '\0';
    struct sbx_store_value p[] = {SBX_SV_T(key)};
    struct sbx_store_cursor *c = NULL;
    pthread_mutex_lock(&s->lock);
    int rc = sbx_store_ready(s, err);
    if (rc == SBX_OK)
        rc = sbx_store_prims_of(s)->query(s,
                             "SELECT manifest_digest, run_as FROM session_manifests "
                             "WHERE session_key = $1",
                             p, 1, &c, NULL, err);
    bool row = false;
    if (rc == SBX_OK)
        rc = c->next(c, &row, err);
    if (rc == SBX_OK && row) {
        const char *d = c->text(c, 0);
        snprintf(digest, 65, "%s", d ? d : "");
        *found = d != NULL;
        const char *u = c->text(c, 1);
        if (run_as)
            snprintf(run_as, SBX_USER_NAME_MAX + 1, "%s", u ? u : "");
    }
    if (c)
        sbx_store_prims_of(s)->query_end(s, c);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int sbxh_store_drop_manifest(struct sbx_store *s, const char *key, sbx_error *err)
{
    struct sbx_store_value p[] = {SBX_SV_T(key)};
    pthread_mutex_lock(&s->lock);
    int rc = sbx_store_ready(s, err);
    if (rc == SBX_OK)
        rc = sbx_store_prims_of(s)->query(s, "DELETE FROM session_manifests WHERE session_key = $1",
                             p, 1, NULL, NULL, err);
    pthread_mutex_unlock(&s->lock);
    return rc;
}
