/*
 * key_lock.c - the process-wide set of session keys in create, attach or
 * destroy (see key_lock.h).
 *
 * A short list under one mutex: it holds only the keys whose call is in
 * progress right now, so it stays as small as the number of concurrent
 * lifecycle calls.
 */
#include "registry/key_lock.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct held_key {
    struct held_key *next;
    char *provider;
    char hash[SBX_KEY_HASH_LEN + 1];
};

static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t held_changed = PTHREAD_COND_INITIALIZER;
static struct held_key *held;

static struct held_key *find(const char *provider, const char *hash)
{
    for (struct held_key *k = held; k; k = k->next)
        if (!strcmp(k->hash, hash) && !strcmp(k->provider, provider))
            return k;
    return NULL;
}

int sbxh_key_lock(const char *provider, const char key_hash[SBX_KEY_HASH_LEN + 1])
{
    struct held_key *mine = calloc(1, sizeof *mine);
    char *name = strdup(provider);
    if (!mine || !name) {
        free(mine);
        free(name);
        return SBX_E_NOMEM;
    }
    mine->provider = name;
    memcpy(mine->hash, key_hash, SBX_KEY_HASH_LEN);
    mine->hash[SBX_KEY_HASH_LEN] = '\0';

    pthread_mutex_lock(&held_lock);
    while (find(provider, mine->hash))
        pthread_cond_wait(&held_changed, &held_lock);
    mine->next = held;
    held = mine;
    pthread_mutex_unlock(&held_lock);
    return SBX_OK;
}

void sbxh_key_unlock(const char *provider, const char key_hash[SBX_KEY_HASH_LEN + 1])
{
    pthread_mutex_lock(&held_lock);
    for (struct held_key **p = &held; *p; p = &(*p)->next) {
        struct held_key *k = *p;
        if (strncmp(k->hash, key_hash, SBX_KEY_HASH_LEN) || strcmp(k->provider, provider))
            continue;
        *p = k->next;
        free(k->provider);
        free(k);
        break;
    }
    pthread_cond_broadcast(&held_changed);
    pthread_mutex_unlock(&held_lock);
}
