/*
 * mhd_lazy.h - libmicrohttpd, loaded by `sbx reconcile --metrics` only.
 *
 * Its GnuTLS chain (GnuTLS, Nettle, GMP, p11-kit, libtasn1, ...) was
 * loaded at every sbx start for a server only the metrics endpoint runs.
 * The package sbx depends on libmicrohttpd12 (cmake/Packaging.cmake).
 */
#ifndef SBX_CLI_MHD_LAZY_H
#define SBX_CLI_MHD_LAZY_H

#include <microhttpd.h>

/* The library's functions the metrics server calls (microhttpd.h). */
struct cli_mhd {
    struct MHD_Daemon *(*start_daemon)(unsigned int flags, uint16_t port,
                                       MHD_AcceptPolicyCallback apc, void *apc_cls,
                                       MHD_AccessHandlerCallback dh, void *dh_cls, ...);
    void (*stop_daemon)(struct MHD_Daemon *daemon);
    struct MHD_Response *(*create_response_from_buffer)(size_t size, void *buffer,
                                                        enum MHD_ResponseMemoryMode mode);
    enum MHD_Result (*add_response_header)(struct MHD_Response *response, const char *header,
                                           const char *content);
    enum MHD_Result (*queue_response)(struct MHD_Connection *connection,
                                      unsigned int status_code,
                                      struct MHD_Response *response);
    void (*destroy_response)(struct MHD_Response *response);
};

#define CLI_MHD_SONAME "libmicrohttpd.so.12"

/* Load the library (once) and resolve the functions: the table, or NULL
 * after printing an error naming the library and the package. */
const struct cli_mhd *cli_mhd_load(void);

#endif
