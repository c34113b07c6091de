/*
 * archive_sink.c - a libarchive writer into an ABI sink (archive_sink.h).
 */
#include "archive_sink.h"

#include "archive_pax.h"

#include <archive.h>
#include <errno.h>

static la_ssize_t sink_write(struct archive *a, void *ud, const void *buf, size_t len)
{
    struct sbxp_archive_sink *t = ud;
    if (t->status == SBX_OK && t->sink && t->sink->write)
        t->status = t->sink->write(t->sink->ctx, buf, len);
    if (t->status != SBX_OK) {
        archive_set_error(a, EPIPE, "sink stopped");
        return -1;
    }
    return (la_ssize_t)len;
}

struct archive *sbxp_archive_sink_open(struct sbxp_archive_sink *out)
{
    struct archive *a = archive_write_new();
    if (a && sbxs_archive_write_pax_bytes(a) == ARCHIVE_OK &&
        archive_write_set_bytes_in_last_block(a, 1) == ARCHIVE_OK &&
        archive_write_open2(a, out, NULL, sink_write, NULL, NULL) == ARCHIVE_OK)
        return a;
    if (a)
        archive_write_free(a);
    return NULL;
}
