/*
 * hash.c - SHA-256 in lowercase hex (OpenSSL libcrypto).
 */
#include "docker.h"

#include <openssl/evp.h>

int docker_sha256_hex(const void *data, size_t len, char out[65])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int md_len = 0;
    if (EVP_Digest(data, len, md, &md_len, EVP_sha256(), NULL) != 1 || md_len != 32)
        return -1;
    for (unsigned i = 0; i < md_len; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 0x0f];
    }
    out[64] = '\0';
    return 0;
}
