/* fd_source.c - an ABI source reading a descriptor (see fd_source.h). */
#include "fd_source.h"

#include <errno.h>
#include <unistd.h>

static long fd_source_read(void *ctx, void *buf, size_t cap)
{
    struct sbxp_fd_source *s = ctx;
    ssize_t n;
    do
        n = read(s->fd, buf, cap);
    while (n < 0 && errno == EINTR);
    if (n > 0 && s->left >= 0)
        s->left -= n;
    return n < 0 ? -1 : (long)n;
}

static int64_t fd_source_length(void *ctx)
{
    return ((struct sbxp_fd_source *)ctx)->left;
}

struct sbx_source sbxp_fd_source(struct sbxp_fd_source *s, int fd, int64_t length)
{
    s->fd = fd;
    s->left = length;
    struct sbx_source src = SBX_SOURCE_INIT(s, fd_source_read);
    if (length >= 0)
        src.length = fd_source_length;
    return src;
}
