/*
 * proto.c - frame and field encoding of the sbx-agent protocol (proto.h).
 * No I/O here: both sides move the bytes their own way (the agent with
 * plain blocking or non-blocking descriptors, the provider under its
 * deadlines and cancellation).
 */
#include "proto.h"

#include <stdlib.h>
#include <string.h>

static void put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static uint32_t get_be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

void sbxs_ap_header(unsigned char hdr[AP_HDR_LEN], int type, uint32_t len)
{
    put_be32(hdr, len);
    hdr[4] = (unsigned char)type;
}

int sbxs_ap_parse_header(const unsigned char hdr[AP_HDR_LEN], int *type, uint32_t *len)
{
    *len = get_be32(hdr);
    *type = hdr[4];
    return *len > AP_FRAME_MAX ? -1 : 0;
}

void sbxs_ap_preamble(unsigned char out[AP_PREAMBLE_LEN], uint32_t version)
{
    memcpy(out, AP_MAGIC, 4);
    put_be32(out + 4, version);
}

int sbxs_ap_parse_preamble(const unsigned char in[AP_PREAMBLE_LEN], uint32_t *version)
{
    if (memcmp(in, AP_MAGIC, 4) != 0)
        return -1;
    *version = get_be32(in + 4);
    return 0;
}

void sbxs_ap_out_begin(struct ap_out *o, unsigned char *buf, size_t cap, int type)
{
    o->buf = buf;
    o->cap = cap;
    o->len = AP_HDR_LEN;
    o->overflow = cap < AP_HDR_LEN;
    if (!o->overflow)
        buf[4] = (unsigned char)type;
}

void sbxs_ap_put_bytes(struct ap_out *o, const void *p, size_t n)
{
    if (o->overflow || n > o->cap - o->len || o->len - AP_HDR_LEN + n > AP_FRAME_MAX) {
        o->overflow = 1;
        return;
    }
    if (n)
        memcpy(o->buf + o->len, p, n);
    o->len += n;
}

void sbxs_ap_put_u32(struct ap_out *o, uint32_t v)
{
    unsigned char b[4];
    put_be32(b, v);
    sbxs_ap_put_bytes(o, b, 4);
}

void sbxs_ap_put_u64(struct ap_out *o, uint64_t v)
{
    sbxs_ap_put_u32(o, (uint32_t)(v >> 32));
    sbxs_ap_put_u32(o, (uint32_t)v);
}

void sbxs_ap_put_str(struct ap_out *o, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n > AP_STR_MAX) {
        o->overflow = 1;
        return;
    }
    sbxs_ap_put_u32(o, (uint32_t)n);
    sbxs_ap_put_bytes(o, s, n);
}

size_t sbxs_ap_out_end(struct ap_out *o)
{
    if (o->overflow)
        return 0;
    put_be32(o->buf, (uint32_t)(o->len - AP_HDR_LEN));
    return o->len;
}

void sbxs_ap_in_begin(struct ap_in *in, const void *payload, size_t len)
{
    in->p = payload;
    in->left = len;
    in->bad = 0;
}

void sbxs_ap_get_bytes(struct ap_in *in, void *out, size_t n)
{
    if (in->bad || n > in->left) {
        in->bad = 1;
        memset(out, 0, n);
        return;
    }
    memcpy(out, in->p, n);
    in->p += n;
    in->left -= n;
}

uint32_t sbxs_ap_get_u32(struct ap_in *in)
{
    unsigned char b[4];
    sbxs_ap_get_bytes(in, b, 4);
    return get_be32(b);
}

uint64_t sbxs_ap_get_u64(struct ap_in *in)
{
    uint64_t hi = sbxs_ap_get_u32(in);
    return hi << 32 | sbxs_ap_get_u32(in);
}

char *sbxs_ap_get_str(struct ap_in *in)
{
    uint32_t n = sbxs_ap_get_u32(in);
    if (in->bad || n > AP_STR_MAX || n > in->left || memchr(in->p, '\0', n)) {
        in->bad = 1;
        return NULL;
    }
    char *s = malloc((size_t)n + 1);
    if (!s) {
        in->bad = 1;
        return NULL;
    }
    memcpy(s, in->p, n);
    s[n] = '\0';
    in->p += n;
    in->left -= n;
    return s;
}

int sbxs_ap_in_done(const struct ap_in *in)
{
    return !in->bad && in->left == 0;
}
