/* connect.c - Connect envelopes: incremental decoding, encoding, error
 * codes. See e2bproto.h. */
#include "e2bproto.h"

#include <stdlib.h>
#include <string.h>

void e2b_frames_init(struct e2b_frames *f)
{
    memset(f, 0, sizeof *f);
}

void e2b_frames_free(struct e2b_frames *f)
{
    free(f->buf);
    memset(f, 0, sizeof *f);
}

int e2b_frames_partial(const struct e2b_frames *f)
{
    return f->hdr_got > 0;
}

json_object *e2b_json_parse(const char *payload, size_t len)
{
    if (len == 0)
        return json_object_new_object();
    json_tokener *tok = json_tokener_new();
    if (!tok)
        return NULL;
    json_object *msg = json_tokener_parse_ex(tok, payload, (int)len);
    if (msg && json_tokener_get_parse_end(tok) != len) {
        json_object_put(msg);
        msg = NULL;
    }
    json_tokener_free(tok);
    if (msg && !json_object_is_type(msg, json_type_object)) {
        json_object_put(msg);
        msg = NULL;
    }
    return msg;
}

/* Hand over one complete envelope, then reset for the next. */
static int deliver(struct e2b_frames *f, e2b_frame_fn fn, void *ctx)
{
    unsigned flags = f->hdr[0];
    size_t len = f->need;
    f->hdr_got = 0;
    f->len = f->need = 0;
    if (flags & E2B_FLAG_END)
        f->ended = 1;
    return fn ? fn(ctx, flags, (const char *)f->buf, len) : 0;
}

int e2b_frames_feed(struct e2b_frames *f, const void *data, size_t len,
                    e2b_frame_fn fn, void *ctx)
{
    const unsigned char *p = data;
    while (len > 0) {
        if (f->ended)
            return SBX_E_PROTOCOL;
        if (f->hdr_got < 5) {
            size_t take = 5 - f->hdr_got;
            if (take > len)
                take = len;
            memcpy(f->hdr + f->hdr_got, p, take);
            f->hdr_got += take;
            p += take;
            len -= take;
            if (f->hdr_got < 5)
                break;
            f->need = (size_t)f->hdr[1] << 24 | (size_t)f->hdr[2] << 16 |
                      (size_t)f->hdr[3] << 8 | (size_t)f->hdr[4];
            if (f->need > E2B_FRAME_MAX || (f->hdr[0] & E2B_FLAG_COMPRESSED))
                return SBX_E_PROTOCOL;
            f->len = 0;
            if (f->need > f->cap) {
                unsigned char *nb = realloc(f->buf, f->need);
                if (!nb)
                    return SBX_E_NOMEM;
                f->buf = nb;
                f->cap = f->need;
            }
        }
        size_t take = f->need - f->len;
        if (take > len)
            take = len;
        if (take) {
            memcpy(f->buf + f->len, p, take);
            f->len += take;
            p += take;
            len -= take;
        }
        if (f->len == f->need) {
            int rc = deliver(f, fn, ctx);
            if (rc != 0)
                return rc;
        }
    }
    /* A header whose payload is empty completes without more bytes. */
    if (f->hdr_got == 5 && f->need == 0 && !f->ended)
        return deliver(f, fn, ctx);
    return SBX_OK;
}

unsigned char *e2b_envelope(json_object *msg, unsigned flags, size_t *len)
{
    size_t n = 0;
    const char *s = json_object_to_json_string_length(msg, JSON_C_TO_STRING_PLAIN, &n);
    if (!s || n > UINT32_MAX)
        return NULL;
    unsigned char *b = malloc(n + 5);
    if (!b)
        return NULL;
    b[0] = (unsigned char)flags;
    b[1] = (unsigned char)(n >> 24);
    b[2] = (unsigned char)(n >> 16);
    b[3] = (unsigned char)(n >> 8);
    b[4] = (unsigned char)n;
    memcpy(b + 5, s, n);
    *len = n + 5;
    return b;
}

int e2b_code_status(const char *code)
{
    static const struct {
        const char *code;
        int status;
    } map[] = {
        {"canceled", SBX_E_CANCELLED},
        {"unknown", SBX_E_PROTOCOL},
        {"invalid_argument", SBX_E_INVALID},
        {"deadline_exceeded", SBX_E_TIMEOUT},
        {"not_found", SBX_E_NOT_FOUND},
        {"already_exists", SBX_E_EXISTS},
        {"permission_denied", SBX_E_DENIED},
        {"resource_exhausted", SBX_E_UNAVAILABLE},
        {"failed_precondition", SBX_E_INVALID},
        {"aborted", SBX_E_UNAVAILABLE},
        {"out_of_range", SBX_E_INVALID},
        {"unimplemented", SBX_E_UNSUPPORTED},
        {"internal", SBX_E_PROTOCOL},
        {"unavailable", SBX_E_UNAVAILABLE},
        {"data_loss", SBX_E_IO},
        {"unauthenticated", SBX_E_DENIED},
    };
    if (!code)
        return SBX_E_PROTOCOL;
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(code, map[i].code))
            return map[i].status;
    return SBX_E_PROTOCOL;
}
