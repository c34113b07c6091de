/* mhd_lazy.c - libmicrohttpd on first use; see mhd_lazy.h. */
#include "mhd_lazy.h"

#include "lazy_open.h"

#define SYM(field, name) {name, &m.field, sizeof m.field}

const struct cli_mhd *cli_mhd_load(void)
{
    static struct cli_mhd m;
    static int loaded;
    if (loaded)
        return &m;
    const struct cli_lazy_sym syms[] = {
        SYM(start_daemon, "MHD_start_daemon"),
        SYM(stop_daemon, "MHD_stop_daemon"),
        SYM(create_response_from_buffer, "MHD_create_response_from_buffer"),
        SYM(add_response_header, "MHD_add_response_header"),
        SYM(queue_response, "MHD_queue_response"),
        SYM(destroy_response, "MHD_destroy_response"),
    };
    if (cli_lazy_open("sbx reconcile --metrics", CLI_MHD_SONAME, "libmicrohttpd12", syms,
                      sizeof syms / sizeof syms[0]) != 0)
        return NULL;
    loaded = 1;
    return &m;
}
