/*
 * op_args.h - argument structs for tests that call provider ops directly
 * (without libsbx), with the key hash the host would compute.
 *
 *   H.ops->attach(st, call, TEST_ATTACH_ARGS(key, ref), &sb);
 *   H.ops->destroy(st, call, TEST_DESTROY_ARGS(key, ref));
 *
 * The compound literals live until the end of the enclosing block, which
 * covers the op call. Needs libcrypto (OpenSSL) for SHA-256.
 */
#ifndef SBX_TEST_OP_ARGS_H
#define SBX_TEST_OP_ARGS_H

#include <sbx/provider.h>

#include <openssl/evp.h>
#include <string.h>

struct test_op_args {
    char hash[SBX_KEY_HASH_LEN + 1];
    struct sbx_attach_args attach;
    struct sbx_destroy_args destroy;
};

/* Lowercase hex SHA-256 of key into out, as libsbx's sbx_key_hash does. */
static inline void test_key_hash(const char *key, char out[SBX_KEY_HASH_LEN + 1])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_Digest(key, strlen(key), md, &n, EVP_sha256(), NULL);
    for (unsigned int i = 0; i < n && 2 * i + 1 < SBX_KEY_HASH_LEN; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 0x0f];
    }
    out[SBX_KEY_HASH_LEN] = '\0';
}

static inline struct test_op_args *test_op_args_fill(struct test_op_args *t,
                                                     const char *key, const char *ref)
{
    if (key)
        test_key_hash(key, t->hash);
    t->attach.size = sizeof t->attach;
    t->attach.session_key = key;
    t->attach.key_hash = key ? t->hash : NULL;
    t->attach.ref = ref;
    t->destroy.size = sizeof t->destroy;
    t->destroy.session_key = key;
    t->destroy.key_hash = key ? t->hash : NULL;
    t->destroy.ref = ref;
    return t;
}

#define TEST_ATTACH_ARGS(key, ref) \
    (&test_op_args_fill(&(struct test_op_args){.hash = ""}, (key), (ref))->attach)
#define TEST_DESTROY_ARGS(key, ref) \
    (&test_op_args_fill(&(struct test_op_args){.hash = ""}, (key), (ref))->destroy)

#endif
