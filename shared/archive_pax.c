/* archive_pax.c - see archive_pax.h. */
#include "archive_pax.h"

#include <archive.h>

int sbxs_archive_write_pax_bytes(struct archive *w)
{
    int r = archive_write_set_format_pax_restricted(w);
    if (r == ARCHIVE_OK)
        r = archive_write_set_format_option(w, "pax", "hdrcharset", "BINARY");
    return r;
}
