/*
 * archive_sink.h - a libarchive writer whose output goes to an ABI sink
 * (the tar archives providers stream to the host: memory diffs).
 */
#ifndef SBXP_ARCHIVE_SINK_H
#define SBXP_ARCHIVE_SINK_H

#include <sbx/provider.h>

struct archive;

/* The sink and the status it returned (SBX_OK while it accepts). */
struct sbxp_archive_sink {
    const struct sbx_sink *sink;
    int status;
};

/*
 * A new pax (restricted) tar writer into out->sink, with no padding of its
 * last block; out is borrowed until archive_write_free. NULL when out of
 * memory. When a write fails because the sink refused, out->status holds
 * the sink's status (its error already set); otherwise the archive's
 * error string tells why.
 */
struct archive *sbxp_archive_sink_open(struct sbxp_archive_sink *out);

#endif
