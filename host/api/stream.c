/* stream.c - ready-made sources and sinks over fds and memory. */
#include <sbx/sbx.h>

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static long fd_read(void *ctx, void *buf, size_t cap)
{
    int fd = *(int *)ctx;
    for (;;) {
        ssize_t n = read(fd, buf, cap);
        if (n >= 0)
            return (long)n;
        if (errno != EINTR) {
            sbx_stream_error("reading descriptor %d: %s", fd, strerror(errno));
            return -1;
        }
    }
}

static int fd_poll_fd(void *ctx)
{
    return *(int *)ctx;
}

/* Known only for a regular file: what is left from the current offset. */
static int64_t fd_length(void *ctx)
{
    int fd = *(int *)ctx;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        return -1;
    off_t pos = lseek(fd, 0, SEEK_CUR);
    if (pos < 0 || pos > st.st_size)
        return -1;
    return (int64_t)(st.st_size - pos);
}

SBX_API struct sbx_source sbx_fd_source(int *fd)
{
    struct sbx_source s = {.size = sizeof(struct sbx_source), .ctx = fd, .read = fd_read, .poll_fd = fd_poll_fd,
                           .length = fd_length};
    return s;
}

static long memory_read(void *ctx, void *buf, size_t cap)
{
    struct sbx_memory_source *m = ctx;
    size_t n = m->len - m->pos;
    if (n > cap)
        n = cap;
    memcpy(buf, (const char *)m->data + m->pos, n);
    m->pos += n;
    return (long)n;
}

static int64_t memory_length(void *ctx)
{
    const struct sbx_memory_source *m = ctx;
    return (int64_t)(m->len - m->pos);
}

SBX_API struct sbx_source sbx_memory_source(struct sbx_memory_source *m)
{
    struct sbx_source s = {.size = sizeof(struct sbx_source), .ctx = m, .read = memory_read, .length = memory_length};
    return s;
}

static int fd_write(void *ctx, const void *buf, size_t len)
{
    int fd = *(int *)ctx;
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            sbx_stream_error("writing descriptor %d: %s", fd, strerror(errno));
            return SBX_E_IO;
        }
        p += n;
        len -= (size_t)n;
    }
    return SBX_OK;
}

SBX_API struct sbx_sink sbx_fd_sink(int *fd)
{
    struct sbx_sink s = SBX_SINK_INIT(fd, fd_write);
    return s;
}
