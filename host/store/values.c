/*
 * values.c - what the store hands out and its callers release (bindings,
 * intents, claims and pages of them), and the helpers both drivers and the
 * shared operations use (key labels, strdup, owner tokens, the
 * out-of-memory message). Below every other file of store/: the front
 * (store.c) calls the drivers, the drivers call ops.c and rows.c, and all
 * of them call this.
 */
#include "base/process_id.h"
#include "store/driver.h"

#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Results                                                                    */
/* ------------------------------------------------------------------------ */

void sbxh_binding_clear(struct sbx_binding *b)
{
    if (!b)
        return;
    free(b->session_key);
    free(b->provider);
    free(b->external_id);
    free(b->spec_hash);
    memset(b, 0, sizeof *b);
}

void sbxh_intent_clear(struct sbx_intent *i)
{
    if (!i)
        return;
    free(i->session_key);
    free(i->provider);
    free(i->owner);
    free(i->spec_hash);
    free(i->external_id);
    free(i->step);
    memset(i, 0, sizeof *i);
}

void sbxh_claim_clear(struct sbx_claim *c)
{
    if (!c)
        return;
    sbxh_intent_clear(&c->intent);
    sbxh_binding_clear(&c->binding);
    c->outcome = 0;
}

void sbxh_binding_page_free(struct sbx_binding_page *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->count; i++)
        sbxh_binding_clear(&p->items[i]);
    free(p->items);
    memset(p, 0, sizeof *p);
}

void sbxh_intent_page_free(struct sbx_intent_page *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->count; i++)
        sbxh_intent_clear(&p->items[i]);
    free(p->items);
    memset(p, 0, sizeof *p);
}

void sbxh_key_page_free(struct sbx_key_page *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->count; i++)
        free(p->keys[i]);
    free(p->keys);
    memset(p, 0, sizeof *p);
}

/* ------------------------------------------------------------------------ */
/* Shared helpers                                                             */
/* ------------------------------------------------------------------------ */

void sbxh_store_key_label(const char *key, char out[13])
{
    char hash[SBX_KEY_HASH_LEN + 1];
    if (sbx_key_hash(key, hash) != SBX_OK)
        snprintf(hash, sizeof hash, "%s", "unhashable!!"); /* a label, never a name */
    memcpy(out, hash, 12);
    out[12] = '\0';
}

char *sbxh_store_strdup(const char *s, bool *failed)
{
    if (!s)
        return NULL;
    char *d = strdup(s);
    if (!d)
        *failed = true;
    return d;
}

void sbxh_store_owner_token(char *buf, size_t len)
{
    char realm[128];
    sbxh_process_realm(realm, sizeof realm);
    pid_t pid = getpid();
    unsigned long long start = sbxh_process_start_time(pid);
    unsigned char rnd[8] = {0};
    if (RAND_bytes(rnd, sizeof rnd) != 1) {
        /* Uniqueness still comes from realm, pid and start time; the random
         * part only separates two stores opened by one process. */
        uintptr_t a = (uintptr_t)&rnd;
        memcpy(rnd, &a, sizeof a < sizeof rnd ? sizeof a : sizeof rnd);
    }
    snprintf(buf, len, "%s:%ld:%llu:%02x%02x%02x%02x%02x%02x%02x%02x", realm, (long)pid,
             start, rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
}

int sbxh_store_nomem(struct sbx_store *s, sbx_error *err)
{
    return sbx_error_set(err, SBX_E_NOMEM, "%s: out of memory", s->label);
}
