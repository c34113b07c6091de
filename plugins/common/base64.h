/*
 * base64.h - standard base64 (RFC 4648) for the remote providers' wire
 * formats (bytes fields of JSON, basic auth headers).
 */
#ifndef SBXP_BASE64_H
#define SBXP_BASE64_H

#include <stddef.h>

/* Standard base64 with padding of len bytes into out, which must hold
 * sbxp_b64_len(len) bytes (NUL included). */
size_t sbxp_b64_len(size_t len);
void sbxp_b64_encode(const void *data, size_t len, char *out);

/* Decode standard or URL-safe base64, padding optional, into out (which
 * must hold 3 * (strlen(in) / 4) + 3 bytes). Returns the decoded length,
 * or -1 on a bad character. */
long sbxp_b64_decode(const char *in, size_t inlen, unsigned char *out);

#endif /* SBXP_BASE64_H */
