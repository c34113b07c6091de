/*
 * key_hash.c - the SHA-256 name of a session key (OpenSSL libcrypto).
 */
#include "local.h"

#include <openssl/evp.h>
#include <string.h>

int local_key_hash(const char *key, char out[SBX_KEY_HASH_LEN + 1])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int md_len = 0;

    if (key == NULL ||
        EVP_Digest(key, strlen(key), md, &md_len, EVP_sha256(), NULL) != 1 ||
        md_len * 2 != SBX_KEY_HASH_LEN)
        return -1;
    for (unsigned int i = 0; i < md_len; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 0x0f];
    }
    out[SBX_KEY_HASH_LEN] = '\0';
    return 0;
}
