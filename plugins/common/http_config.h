/*
 * http_config.h - the configuration keys of a remote provider's HTTP
 * calls, read the same way (defaults, ranges, retry policy) by every
 * provider that declares them.
 */
#ifndef SBXP_HTTP_CONFIG_H
#define SBXP_HTTP_CONFIG_H

#include "http_retry.h"

#include <sbx/provider.h>

#include <stdint.h>

/*
 * providers.<section>.request_timeout_ms (default 60000, 100 to 3600000),
 * connect_timeout_ms (default 10000, 100 to 600000) and retries (default
 * 4, 0 to 20: *retry makes retries + 1 attempts, backing off from 200 ms
 * up to 5 s), in that order. SBX_E_CONFIG on call for a value out of
 * range (provider_config.h).
 */
int sbxp_http_config(const struct sbx_host *host, sbx_call *call, const char *section,
                     int64_t *request_timeout_ms, int64_t *connect_timeout_ms,
                     struct sbxp_http_retry *retry);

#endif /* SBXP_HTTP_CONFIG_H */
