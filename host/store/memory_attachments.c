/*
 * memory_attachments.c - the memory stores attached to each session and the
 * writeback state of each attachment (table session_memory): what a later
 * process needs to refresh, write back or recover a session's mounts.
 */
#include "store/driver.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int sbxh_store_memory_set(struct sbx_store *s, const char *key,
                          const struct sbx_store_memory_row *rows, size_t n,
                          sbx_error *err)
{
    struct sbx_store_value k[] = {SBX_SV_T(key)};
    pthread_mutex_lock(&s->lock);
    int rc = sbx_store_ready(s, err);
    if (rc == SBX_OK && (rc = sbx_store_prims_of(s)->begin(s, err)) == SBX_OK) {
        rc = sbx_store_prims_of(s)->query(s, "DELETE FROM session_memory WHERE session_key = $1", k, 1,
                             NULL, NULL, err);
        for (size_t i = 0; rc == SBX_OK && i < n; i++) {
            struct sbx_store_value p[] = {SBX_SV_T(key), SBX_SV_T(rows[i].slug),
                                          SBX_SV_I(rows[i].access), SBX_SV_I(-1),
                                          SBX_SV_I(SBX_STORE_MEMORY_CLEAN), SBX_SV_I(sbx_store_wall_ms())};
            rc = sbx_store_prims_of(s)->query(s,
                                 "INSERT INTO session_memory (session_key, slug, access, "
                                 "baseline, state, updated_at) VALUES ($1, $2, $3, $4, $5, $6)",
                                 p, 6, NULL, NULL, err);
        }
        rc = sbx_store_prims_of(s)->finish(s, rc, err);
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int sbxh_store_memory_get(struct sbx_store *s, const char *key,
                          struct sbx_store_memory_row **out, size_t *n, sbx_error *err)
{
    *out = NULL;
    *n = 0;
    struct sbx_store_value p[] = {SBX_SV_T(key)};
    struct sbx_store_cursor *c = NULL;
    pthread_mutex_lock(&s->lock);
    int rc = sbx_store_ready(s, err);
    if (rc == SBX_OK)
        rc = sbx_store_prims_of(s)->query(s,
                             "SELECT slug, access, baseline, state FROM session_memory "
                             "WHERE session_key = $1 ORDER BY slug",
                             p, 1, &c, NULL, err);
    bool row = false;
    size_t cap = 0;
    while (rc == SBX_OK && (rc = c->next(c, &row, err)) == SBX_OK && row) {
        if (*n == cap) {
            cap = cap ? cap * 2 : 4;
            struct sbx_store_memory_row *g = realloc(*out, cap * sizeof *g);
            if (!g) {
                rc = sbxh_store_nomem(s, err);
                break;
            }
            *out = g;
        }
        struct sbx_store_memory_row *r = &(*out)[(*n)++];
        const char *slug = c->text(c, 0);
        snprintf(r->slug, sizeof r->slug, "%s", slug ? slug : "");
        r->access = (int)c->integer(c, 1);
        r->baseline = c->integer(c, 2);
        r->state = (int)c->integer(c, 3);
    }
    if (c)
        sbx_store_prims_of(s)->query_end(s, c);
    pthread_mutex_unlock(&s->lock);
    if (rc != SBX_OK) {
        free(*out);
        *out = NULL;
        *n = 0;
    }
    return rc;
}

int sbxh_store_memory_update(struct sbx_store *s, const char *key, const char *slug,
                             int64_t baseline, int state, sbx_error *err)
{
    struct sbx_store_value p[] = {SBX_SV_T(key), SBX_SV_T(slug), SBX_SV_I(baseline),
                                  SBX_SV_I(state), SBX_SV_I(sbx_store_wall_ms())};
    pthread_mutex_lock(&s->lock);
    int rc = sbx_store_ready(s, err);
    if (rc == SBX_OK)
        rc = sbx_store_prims_of(s)->query(s,
                             "UPDATE session_memory SET baseline = $3, state = $4, "
                             "updated_at = $5 WHERE session_key = $1 AND slug = $2",
                             p, 5, NULL, NULL, err);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int sbxh_store_memory_drop(struct sbx_store *s, const char *key, sbx_error *err)
{
    struct sbx_store_value p[] = {SBX_SV_T(key)};
    pthread_mutex_lock(&s->lock);
    int rc = sbx_store_ready(s, err);
    if (rc == SBX_OK)
        rc = sbx_store_prims_of(s)->query(s, "DELETE FROM session_memory WHERE session_key = $1", p, 1,
                             NULL, NULL, err);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int sbxh_store_memory_unclean(struct sbx_store *s, int (*fn)(void *ud, const char *key),
                              void *ud, sbx_error *err)
{
    /* Collected first: fn may use the store. */
    char **keys = NULL;
    size_t n = 0, cap = 0;
    struct sbx_store_cursor *c = NULL;
    pthread_mutex_lock(&s->lock);
    int rc = sbx_store_ready(s, err);
    if (rc == SBX_OK)
        rc = sbx_store_prims_of(s)->query(s,
                             "SELECT DISTINCT session_key FROM session_memory "
                             "WHERE state <> 0 ORDER BY session_key",
                             NULL, 0, &c, NULL, err);
    bool row = false;
    while (rc == SBX_OK && (rc = c->next(c, &row, err)) == SBX_OK && row) {
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            char **g = realloc(keys, cap * sizeof *g);
            if (!g) {
                rc = sbxh_store_nomem(s, err);
                break;
            }
            keys = g;
        }
        const char *k = c->text(c, 0);
        if (!(keys[n] = strdup(k ? k : ""))) {
            rc = sbxh_store_nomem(s, err);
            break;
        }
        n++;
    }
    if (c)
        sbx_store_prims_of(s)->query_end(s, c);
    pthread_mutex_unlock(&s->lock);
    for (size_t i = 0; i < n; i++) {
        if (rc == SBX_OK)
            rc = fn(ud, keys[i]);
        free(keys[i]);
    }
    free(keys);
    return rc;
}
