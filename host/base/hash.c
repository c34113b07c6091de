/* hash.c - the fixed-length form of a session key (SHA-256, hex). */
#include <sbx/sbx.h>

#include "hex.h"

#include <openssl/evp.h>
#include <string.h>

SBX_API int sbx_key_hash(const char *key, char out[SBX_KEY_HASH_LEN + 1])
{
    if (!key || !out)
        return SBX_E_INVALID;
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (!EVP_Digest(key, strlen(key), md, &len, EVP_sha256(), NULL) ||
        len * 2 != SBX_KEY_HASH_LEN) {
        out[0] = '\0'; /* never a hash two keys could share */
        return SBX_E_INTERNAL;
    }
    sbxs_hex(md, len, out);
    return SBX_OK;
}
