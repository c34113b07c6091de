/* http_config.c - a remote provider's HTTP keys (see http_config.h). */
#include "http_config.h"

#include "provider_config.h"

int sbxp_http_config(const struct sbx_host *host, sbx_call *call, const char *section,
                     int64_t *request_timeout_ms, int64_t *connect_timeout_ms,
                     struct sbxp_http_retry *retry)
{
    int64_t retries;
    int rc;
    if ((rc = sbxp_config_int(host, call, section, "request_timeout_ms", 60000, 100, 3600000,
                              request_timeout_ms)) ||
        (rc = sbxp_config_int(host, call, section, "connect_timeout_ms", 10000, 100, 600000,
                              connect_timeout_ms)) ||
        (rc = sbxp_config_int(host, call, section, "retries", 4, 0, 20, &retries)))
        return rc;
    retry->attempts = (int)retries + 1;
    retry->base_ms = 200;
    retry->cap_ms = 5000;
    return SBX_OK;
}
