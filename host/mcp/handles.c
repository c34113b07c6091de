/*
 * handles.c - the open handles of the server: one per (session key, user),
 * opened with sbx_session_attach on first use and kept until
 * destroy_sandbox or the end, so a tool call costs one operation.
 *
 * A call borrows an entry (a reference count) for its duration; an entry
 * dropped by destroy_sandbox while another call still uses it is released
 * by the last borrower. Opening happens outside the table's mutex (an
 * attach talks to the provider); two calls racing to open the same key
 * keep the first handle and release the other.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

struct sbxm_handle_ref {
    struct sbxm_handle_ref *next;
    char *key;
    char *user; /* NULL: the session's own user */
    sbx_handle *h;
    unsigned refs;
    bool dropped; /* out of the table: released by the last put */
};

/* Entries kept open at most; past it a handle serves its call alone. */
#define HANDLES_MAX 1024

struct sbxm_handles {
    sbx_sessions *m;
    pthread_mutex_t mu;
    struct sbxm_handle_ref *list;
    size_t count;
};

int sbxm_handles_new(sbx_sessions *m, struct sbxm_handles **out)
{
    struct sbxm_handles *t = calloc(1, sizeof *t);
    if (!t)
        return SBX_E_NOMEM;
    t->m = m;
    pthread_mutex_init(&t->mu, NULL);
    *out = t;
    return SBX_OK;
}

static void entry_free(struct sbxm_handle_ref *e)
{
    sbx_release(e->h);
    free(e->key);
    free(e->user);
    free(e);
}

void sbxm_handles_free(struct sbxm_handles *t)
{
    if (!t)
        return;
    for (struct sbxm_handle_ref *e = t->list, *n; e; e = n) {
        n = e->next;
        entry_free(e);
    }
    pthread_mutex_destroy(&t->mu);
    free(t);
}

static bool same_user(const char *a, const char *b)
{
    return (!a && !b) || (a && b && !strcmp(a, b));
}

static struct sbxm_handle_ref *find(struct sbxm_handles *t, const char *key,
                                    const char *user)
{
    for (struct sbxm_handle_ref *e = t->list; e; e = e->next)
        if (!strcmp(e->key, key) && same_user(e->user, user))
            return e;
    return NULL;
}

int sbxm_handles_get(struct sbxm_handles *t, const char *key, const char *user,
                     sbx_cancel *cancel, sbx_handle **out, struct sbxm_handle_ref **ref,
                     sbx_error *err)
{
    pthread_mutex_lock(&t->mu);
    struct sbxm_handle_ref *e = find(t, key, user);
    if (e) {
        e->refs++;
        pthread_mutex_unlock(&t->mu);
        *out = e->h;
        *ref = e;
        return SBX_OK;
    }
    pthread_mutex_unlock(&t->mu);

    sbx_handle *h = NULL;
    int rc = sbx_session_attach(t->m, key, cancel, &h, err);
    if (rc != SBX_OK)
        return rc;
    /* A user of the call's own: this handle acts as it for good (it is set
     * before the handle is shared, as sbx_handle_set_user requires). */
    if (user && (rc = sbx_handle_set_user(h, user, err)) != SBX_OK) {
        sbx_release(h);
        return rc;
    }
    struct sbxm_handle_ref *n = calloc(1, sizeof *n);
    if (n) {
        n->key = strdup(key);
        n->user = user ? strdup(user) : NULL;
    }
    if (!n || !n->key || (user && !n->user)) {
        if (n) {
            free(n->key);
            free(n->user);
            free(n);
        }
        sbx_release(h);
        return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    }
    n->h = h;
    pthread_mutex_lock(&t->mu);
    e = find(t, key, user);
    if (e) {
        /* another call opened it meanwhile: use that one */
        e->refs++;
        pthread_mutex_unlock(&t->mu);
        entry_free(n);
        *out = e->h;
        *ref = e;
        return SBX_OK;
    }
    n->refs = 1;
    if (t->count < HANDLES_MAX) {
        n->next = t->list;
        t->list = n;
        t->count++;
    } else {
        n->dropped = true; /* released by the call's put */
    }
    pthread_mutex_unlock(&t->mu);
    *out = n->h;
    *ref = n;
    return SBX_OK;
}

void sbxm_handles_put(struct sbxm_handles *t, struct sbxm_handle_ref *ref)
{
    if (!ref)
        return;
    pthread_mutex_lock(&t->mu);
    bool last = --ref->refs == 0 && ref->dropped;
    pthread_mutex_unlock(&t->mu);
    if (last)
        entry_free(ref);
}

void sbxm_handles_drop(struct sbxm_handles *t, const char *key)
{
    struct sbxm_handle_ref *gone = NULL;
    pthread_mutex_lock(&t->mu);
    for (struct sbxm_handle_ref **p = &t->list; *p;) {
        struct sbxm_handle_ref *e = *p;
        if (strcmp(e->key, key)) {
            p = &e->next;
            continue;
        }
        *p = e->next;
        t->count--;
        e->dropped = true;
        if (e->refs == 0) {
            e->next = gone;
            gone = e;
        }
    }
    pthread_mutex_unlock(&t->mu);
    for (struct sbxm_handle_ref *e = gone, *n; e; e = n) {
        n = e->next;
        entry_free(e);
    }
}

void sbxm_handles_adopt(struct sbxm_handles *t, const char *key, sbx_handle *h,
                        struct sbxm_handle_ref **ref)
{
    *ref = NULL;
    struct sbxm_handle_ref *n = calloc(1, sizeof *n);
    if (n && !(n->key = strdup(key))) {
        free(n);
        n = NULL;
    }
    pthread_mutex_lock(&t->mu);
    struct sbxm_handle_ref *e = find(t, key, NULL);
    if (e || !n || t->count >= HANDLES_MAX) {
        if (e)
            e->refs++;
        pthread_mutex_unlock(&t->mu);
        if (n)
            free(n->key);
        free(n);
        sbx_release(h);
        *ref = e;
        return;
    }
    n->h = h;
    n->refs = 1;
    n->next = t->list;
    t->list = n;
    t->count++;
    pthread_mutex_unlock(&t->mu);
    *ref = n;
}
