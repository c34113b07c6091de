/*
 * wire.c - frame I/O for the agent's connection handlers. Every read waits
 * at most AGENT_IDLE_MS for the next byte, so a host that went away
 * without closing does not keep a handler forever.
 */
#include "agent.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int agent_wire_read_full(int fd, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, AGENT_IDLE_MS);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            errno = r == 0 ? ETIMEDOUT : errno;
            return -1;
        }
        ssize_t k = read(fd, (char *)buf + got, n - got);
        if (k < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (k < 0)
            return -1;
        if (k == 0) {
            if (got == 0)
                return 1;
            errno = EPIPE;
            return -1;
        }
        got += (size_t)k;
    }
    return 0;
}

int agent_wire_write_full(int fd, const void *buf, size_t n)
{
    size_t off = 0;
    while (off < n) {
        ssize_t k = send(fd, (const char *)buf + off, n - off, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && errno == EAGAIN) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            if (poll(&p, 1, AGENT_IDLE_MS) <= 0)
                return -1;
            continue;
        }
        if (k < 0)
            return -1;
        off += (size_t)k;
    }
    return 0;
}

int agent_wire_read_frame(int fd, int *type, unsigned char *buf, size_t cap, uint32_t *len)
{
    unsigned char hdr[AP_HDR_LEN];
    int r = agent_wire_read_full(fd, hdr, sizeof hdr);
    if (r != 0)
        return r;
    if (sbxs_ap_parse_header(hdr, type, len) != 0 || *len > cap)
        return -2;
    if (*len && agent_wire_read_full(fd, buf, *len) != 0)
        return -1;
    return 0;
}

int agent_wire_send(int fd, int type, const void *payload, size_t len)
{
    unsigned char hdr[AP_HDR_LEN];
    sbxs_ap_header(hdr, type, (uint32_t)len);
    if (agent_wire_write_full(fd, hdr, sizeof hdr) != 0)
        return -1;
    return len ? agent_wire_write_full(fd, payload, len) : 0;
}

void agent_wire_error(int fd, int e, const char *stage, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    unsigned char buf[AP_HDR_LEN + 4 + 4 + 64 + 4 + sizeof msg];
    struct ap_out o;
    sbxs_ap_out_begin(&o, buf, sizeof buf, AP_ERROR);
    sbxs_ap_put_u32(&o, (uint32_t)e);
    sbxs_ap_put_str(&o, stage);
    sbxs_ap_put_str(&o, msg);
    size_t n = sbxs_ap_out_end(&o);
    if (n)
        agent_wire_write_full(fd, buf, n);
}
