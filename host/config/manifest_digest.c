/*
 * manifest_digest.c - the digest of a manifest's meaning: SHA-256 of a
 * canonical encoding of what it declares, so that two manifests that
 * declare the same workspace (the list shape and the SDK's mapping shape,
 * `src` for `source`, `executable: true` for `mode: 0755`, another key
 * order, comments, JSON or YAML) have one digest, and any difference in
 * what would be written gives another.
 *
 * The encoding: a version tag, then every field as a one-byte tag, an
 * 8-byte little-endian length and the bytes. Entries are taken in path
 * order (the order they are applied in), environment variables by name;
 * users and groups in the order given (it decides who is made first).
 */
#include "config/manifest_internal.h"

#include <openssl/evp.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DIGEST_VERSION "sbx-manifest-digest-1"

static int put(EVP_MD_CTX *md, char tag, const void *data, size_t len)
{
    unsigned char head[9];
    head[0] = (unsigned char)tag;
    for (int i = 0; i < 8; i++)
        head[1 + i] = (unsigned char)((uint64_t)len >> (8 * i));
    return EVP_DigestUpdate(md, head, sizeof head) == 1 &&
           (len == 0 || EVP_DigestUpdate(md, data, len) == 1);
}

static int put_str(EVP_MD_CTX *md, char tag, const char *s)
{
    /* absent and empty differ: absent is tag '-' */
    return s ? put(md, tag, s, strlen(s)) : put(md, '-', &tag, 1);
}

static int put_long(EVP_MD_CTX *md, char tag, long v)
{
    char text[32];
    int n = snprintf(text, sizeof text, "%ld", v);
    return put(md, tag, text, (size_t)n);
}

static int by_path(const void *a, const void *b)
{
    const struct manifest_entry *x = *(const struct manifest_entry *const *)a;
    const struct manifest_entry *y = *(const struct manifest_entry *const *)b;
    return strcmp(x->path, y->path);
}

static int by_string(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int put_entry(EVP_MD_CTX *md, const struct manifest_entry *e)
{
    return put_long(md, 't', e->type) && put_str(md, 'p', e->path) &&
           put_long(md, 'm', e->mode) && put_str(md, 'g', e->group) &&
           (e->type != MF_FILE || put(md, 'c', e->content, e->content_len)) &&
           put_str(md, 's', e->source) && put_str(md, 'u', e->url) &&
           put_str(md, 'r', e->ref);
}

int sbxh_manifest_digest_compute(struct sbx_manifest *m, sbx_error *err)
{
    const struct manifest_entry **entries = calloc(m->nentries + 1, sizeof *entries);
    const char **env = calloc(m->nenv + 1, sizeof *env);
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    int ok = entries && env && md && EVP_DigestInit_ex(md, EVP_sha256(), NULL) == 1 &&
             put_str(md, 'V', DIGEST_VERSION);
    for (size_t i = 0; ok && i < m->nentries; i++)
        entries[i] = &m->entries[i];
    for (size_t i = 0; ok && i < m->nenv; i++)
        env[i] = m->env[i];
    if (ok) {
        qsort(entries, m->nentries, sizeof *entries, by_path);
        qsort(env, m->nenv, sizeof *env, by_string);
    }
    ok = ok && put_long(md, 'E', (long)m->nentries);
    for (size_t i = 0; ok && i < m->nentries; i++)
        ok = put_entry(md, entries[i]);
    ok = ok && put_long(md, 'N', (long)m->nenv);
    for (size_t i = 0; ok && i < m->nenv; i++)
        ok = put_str(md, 'e', env[i]);
    ok = ok && put_long(md, 'U', (long)m->nusers);
    for (size_t i = 0; ok && i < m->nusers; i++) {
        const struct manifest_user *u = &m->users[i];
        ok = put_str(md, 'n', u->name) && put_long(md, 'i', u->uid) &&
             put_long(md, 'G', (long)u->ngroups);
        for (size_t j = 0; ok && j < u->ngroups; j++)
            ok = put_str(md, 'g', u->groups[j]);
    }
    ok = ok && put_long(md, 'R', (long)m->ngroups);
    for (size_t i = 0; ok && i < m->ngroups; i++)
        ok = put_str(md, 'n', m->groups[i].name) && put_long(md, 'i', m->groups[i].gid);
    ok = ok && put_str(md, 'a', m->run_as);
    unsigned char out[32];
    unsigned int len = 0;
    ok = ok && EVP_DigestFinal_ex(md, out, &len) == 1 && len == sizeof out;
    EVP_MD_CTX_free(md);
    free(entries);
    free(env);
    if (!ok)
        return sbx_error_set(err, SBX_E_NOMEM, "%s: computing the manifest's digest failed",
                             m->name);
    for (size_t i = 0; i < sizeof out; i++)
        snprintf(m->digest + 2 * i, 3, "%02x", out[i]);
    return SBX_OK;
}
