/*
 * files_agent.c - read_file and write_file through the container's
 * sbx-agent: one connection each, data streamed in frames of at most
 * AP_CHUNK bytes (never a whole file in memory).
 *
 * A write sends the data and then a trailer with its length and SHA-256
 * (computed here while it streams); the agent publishes the file (rename
 * of its temporary) only when both match. A cancelled write, a source
 * that fails or delivers other than it announced, or a death on either
 * side ends the connection without a trailer: the agent removes its
 * temporary and the old file stays.
 */
#include "docker.h"

#include "agent_proto/proto.h"

#include <openssl/evp.h>

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* The request frame of a file op into buf. */
static size_t file_request(unsigned char *buf, size_t cap, int type, const char *root,
                           const char *rel, uint32_t mode, uint32_t flags)
{
    struct ap_out o;
    sbxs_ap_out_begin(&o, buf, cap, type);
    sbxs_ap_put_str(&o, root);
    sbxs_ap_put_str(&o, rel);
    if (type == AP_WRITE)
        sbxs_ap_put_u32(&o, mode), sbxs_ap_put_u32(&o, flags);
    return sbxs_ap_out_end(&o);
}

int docker_agent_read(sbx_sandbox *sb, sbx_call *call, const char *root, const char *rel,
                      const struct sbx_sink *sink)
{
    struct docker_state *st = sb->st;
    unsigned char req[AP_HDR_LEN + 2 * 8192 + 64];
    size_t n = file_request(req, sizeof req, AP_READ, root, rel, 0, 0);
    if (!n)
        return docker_error(st, call, SBX_E_INVALID, "docker: read: path too long");
    struct docker_agent_conn c;
    /* the deadline of each wait: a stalled stream fails after request_timeout */
    int rc = docker_agent_open(sb, call, req, n, docker_now_ms() + st->cfg.request_timeout_ms,
                               &c);
    if (rc != SBX_OK)
        return rc;
    unsigned char *buf = malloc(AP_CHUNK + 64);
    if (!buf) {
        docker_agent_close(&c);
        return docker_error(st, call, SBX_E_NOMEM, "out of memory");
    }
    char what[300];
    snprintf(what, sizeof what, "reading %.200s", rel);
    uint64_t total = 0;
    for (;;) {
        int type;
        uint32_t len;
        c.deadline = docker_now_ms() + st->cfg.request_timeout_ms;
        rc = docker_agent_recv(&c, &type, buf, AP_CHUNK + 64, &len);
        if (rc != SBX_OK)
            break;
        if (type == AP_DATA) {
            total += len;
            int s = sink && sink->write ? sink->write(sink->ctx, buf, len) : 0;
            if (s) {
                rc = docker_error(st, call, s,
                                  "docker: reading %.200s: the sink stopped the transfer (%s)",
                                  rel, sbx_strerror((sbx_status)s));
                break;
            }
            continue;
        }
        if (type == AP_END && len == 8) {
            struct ap_in in;
            sbxs_ap_in_begin(&in, buf, len);
            uint64_t want = sbxs_ap_get_u64(&in);
            if (want != total)
                rc = docker_error(st, call, SBX_E_PROTOCOL,
                                  "docker: reading %.200s: the agent sent %llu bytes and "
                                  "announced %llu",
                                  rel, (unsigned long long)total, (unsigned long long)want);
            break;
        }
        rc = docker_agent_fail(&c, what, type, buf, len, NULL);
        if (rc == SBX_E_NOT_FOUND)
            rc = docker_error(st, call, SBX_E_NOT_FOUND,
                              "docker: no such file in the workspace: %.200s", rel);
        break;
    }
    free(buf);
    docker_agent_close(&c);
    return rc;
}

/* Stream the source into the connection; SBX_OK once the trailer is sent. */
static int send_data(struct docker_agent_conn *c, const char *rel,
                     const struct sbx_source *src, unsigned char *buf)
{
    struct docker_state *st = c->sb->st;
    int64_t announced = src->size >= offsetof(struct sbx_source, length) + sizeof src->length &&
                                src->length
                            ? src->length(src->ctx)
                            : -1;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (!md || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(md);
        return docker_error(st, c->call, SBX_E_NOMEM, "out of memory");
    }
    uint64_t total = 0;
    int rc = SBX_OK;
    for (;;) {
        if (c->call && st->host->cancelled && st->host->cancelled(st->host, c->call)) {
            rc = docker_error(st, c->call, SBX_E_CANCELLED, "docker: write %.200s cancelled",
                              rel);
            break;
        }
        long n = src->read(src->ctx, buf + AP_HDR_LEN, AP_CHUNK);
        if (n < 0) {
            rc = SBX_E_IO; /* the source has said why */
            break;
        }
        if (n == 0)
            break;
        sbxs_ap_header(buf, AP_DATA, (uint32_t)n);
        EVP_DigestUpdate(md, buf + AP_HDR_LEN, (size_t)n);
        total += (uint64_t)n;
        if (announced >= 0 && total > (uint64_t)announced) {
            rc = docker_error(st, c->call, SBX_E_IO,
                              "docker: write %.200s: the source delivered more than the "
                              "%lld bytes it announced",
                              rel, (long long)announced);
            break;
        }
        c->deadline = docker_now_ms() + st->cfg.request_timeout_ms;
        rc = docker_agent_send(c, AP_DATA, buf + AP_HDR_LEN, (size_t)n);
        if (rc != SBX_OK)
            break;
    }
    if (rc == SBX_OK && announced >= 0 && total != (uint64_t)announced)
        rc = docker_error(st, c->call, SBX_E_IO,
                          "docker: write %.200s: the source ended after %llu of the %lld "
                          "bytes it announced",
                          rel, (unsigned long long)total, (long long)announced);
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int dlen = 0;
    if (EVP_DigestFinal_ex(md, digest, &dlen) != 1 || dlen != 32)
        rc = rc != SBX_OK ? rc : docker_error(st, c->call, SBX_E_INTERNAL, "docker: SHA-256 failed");
    EVP_MD_CTX_free(md);
    if (rc != SBX_OK)
        return rc;
    unsigned char tr[AP_HDR_LEN + 40];
    struct ap_out o;
    sbxs_ap_out_begin(&o, tr, sizeof tr, AP_TRAILER);
    sbxs_ap_put_u64(&o, total);
    sbxs_ap_put_bytes(&o, digest, 32);
    c->deadline = docker_now_ms() + st->cfg.request_timeout_ms;
    return docker_agent_send(c, AP_TRAILER, tr + AP_HDR_LEN, sbxs_ap_out_end(&o) - AP_HDR_LEN);
}

int docker_agent_write(sbx_sandbox *sb, sbx_call *call, const char *root, const char *rel,
                       const struct sbx_source *src, unsigned mode)
{
    struct docker_state *st = sb->st;
    unsigned char req[AP_HDR_LEN + 2 * 8192 + 64];
    size_t n = file_request(req, sizeof req, AP_WRITE, root, rel, mode, AP_MKPARENTS);
    if (!n)
        return docker_error(st, call, SBX_E_INVALID, "docker: write: path too long");
    struct docker_agent_conn c;
    int rc = docker_agent_open(sb, call, req, n, docker_now_ms() + st->cfg.request_timeout_ms,
                               &c);
    if (rc != SBX_OK)
        return rc;
    unsigned char *buf = malloc(AP_HDR_LEN + AP_CHUNK + 64);
    if (!buf) {
        docker_agent_close(&c);
        return docker_error(st, call, SBX_E_NOMEM, "out of memory");
    }
    char what[300];
    snprintf(what, sizeof what, "write %.200s", rel);
    rc = send_data(&c, rel, src, buf);
    /* the agent's answer: AP_OK once published, or why not (also after a
     * failed send: it may have refused the file early, e.g. a directory) */
    if (rc == SBX_OK || rc == SBX_E_UNAVAILABLE) {
        int type;
        uint32_t len;
        int sent = rc == SBX_OK;
        c.deadline = docker_now_ms() + st->cfg.request_timeout_ms;
        int r2 = docker_agent_recv(&c, &type, buf, AP_CHUNK + 64, &len);
        if (r2 == SBX_OK && type == AP_OK && sent)
            rc = SBX_OK;
        else if (r2 == SBX_OK && type != AP_OK)
            rc = docker_agent_fail(&c, what, type, buf, len, NULL);
        else if (sent)
            rc = r2;
    }
    if (rc != SBX_OK && c.fd >= 0) {
        /* no trailer went out: let the agent see the end and remove its
         * temporary before the caller looks (bounded: request_timeout) */
        shutdown(c.fd, SHUT_WR);
        struct pollfd p = {.fd = c.fd, .events = POLLIN};
        int64_t end = docker_now_ms() + st->cfg.request_timeout_ms;
        while (docker_now_ms() < end && poll(&p, 1, (int)(end - docker_now_ms())) > 0 &&
               recv(c.fd, buf, AP_CHUNK, 0) > 0)
            ;
    }
    free(buf);
    docker_agent_close(&c);
    return rc;
}
