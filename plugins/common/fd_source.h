/*
 * fd_source.h - an ABI source (struct sbx_source) that reads a file
 * descriptor the provider owns: a verified bundle, a staged archive, a
 * file list it wrote.
 */
#ifndef SBXP_FD_SOURCE_H
#define SBXP_FD_SOURCE_H

#include <sbx/provider.h>

#include <stdint.h>

/* The source's state: keep it alive while the source is read. */
struct sbxp_fd_source {
    int fd;       /* borrowed: the caller closes it */
    int64_t left; /* bytes still to come, or -1 when not known */
};

/*
 * A source reading fd from its offset to its end (retrying EINTR); with
 * length >= 0 its length member tells the bytes still to come (uploads
 * send it as Content-Length), else it has none.
 */
struct sbx_source sbxp_fd_source(struct sbxp_fd_source *s, int fd, int64_t length);

#endif /* SBXP_FD_SOURCE_H */
