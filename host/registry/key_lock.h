/*
 * key_lock.h - serializing create, attach and destroy of one session key
 * (internal).
 *
 * The ABI promises providers that create, attach and destroy of one
 * session key never overlap within one host process. libsbx keeps that
 * promise here: a process-wide set of (provider name, key hash) pairs
 * currently in such a call; a second thread asking for a held pair waits.
 * Different keys never wait for each other. Across processes nothing is
 * serialized here: with the PostgreSQL store the session manager also
 * holds the key's advisory lock around its creates and destroys
 * (sessions/key_lock.c, which states the lock order); otherwise providers
 * make create idempotent and the session manager fences through the store.
 */
#ifndef SBX_HOST_KEY_LOCK_H
#define SBX_HOST_KEY_LOCK_H

#include <sbx/provider.h>

/* Wait until no other thread holds (provider, key_hash), then hold it.
 * Returns SBX_OK, or SBX_E_NOMEM (nothing held). */
int sbxh_key_lock(const char *provider, const char key_hash[SBX_KEY_HASH_LEN + 1]);

/* Release a pair held by sbxh_key_lock and wake its waiters. */
void sbxh_key_unlock(const char *provider, const char key_hash[SBX_KEY_HASH_LEN + 1]);

#endif
