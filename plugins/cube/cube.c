/*
 * cube.c - the `cube` provider: descriptor, configuration keys, init/fini.
 * CubeSandbox serves E2B's control plane paths and runs E2B's envd in its
 * sandboxes, so everything but the configuration is the shared E2B logic
 * in plugins/e2bproto. The differences (specs README section 2): the API
 * URL and template are required, the key is optional (CubeAPI has no auth
 * unless started with an auth callback), there is no envd access token,
 * CubeProxy routes by the Host header only (proxy_address/proxy_port let a
 * client without wildcard DNS reach it), and CubeProxy answers 500 (not
 * 502) for a sandbox it does not know.
 */
#include "e2b_core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct sbx_config_key cube_keys[] = {
    SBX_CONFIG_SECRET("api_key", "API key: only from CUBE_API_KEY, never the configuration (or see key_file; optional)", "CUBE_API_KEY"),
    SBX_CONFIG_KEY_ENV("api_url", SBX_CFG_STRING, "CubeAPI URL, e.g. http://cube-api:3000 (required: here or $CUBE_API_URL)", "CUBE_API_URL"),
    SBX_CONFIG_KEY_ENV("template", SBX_CFG_STRING, "Cube template id of new sandboxes (required: here or $CUBE_TEMPLATE_ID)", "CUBE_TEMPLATE_ID"),
    SBX_CONFIG_KEY_ENV("domain", SBX_CFG_STRING, "sandbox domain, CubeAPI's CUBE_API_SANDBOX_DOMAIN (default $CUBE_SANDBOX_DOMAIN, else cube.app)", "CUBE_SANDBOX_DOMAIN"),
    SBX_CONFIG_KEY_ENV("proxy_address", SBX_CFG_STRING, "CubeProxy host or IP: connect there, route by Host (default $CUBE_PROXY_HOST, else DNS of 49983-<id>.<domain>)", "CUBE_PROXY_HOST"),
    SBX_CONFIG_KEY_ENV("proxy_port", SBX_CFG_INT, "CubeProxy port (default $CUBE_PROXY_PORT, else 80)", "CUBE_PROXY_PORT"),
    SBX_CONFIG_KEY_ENV("lifetime", SBX_CFG_INT, "TTL in seconds (2 or more), renewed with use: a sandbox lives half of it to all of it past its last use (default $CUBE_IDLE_TIMEOUT, else 3600)", "CUBE_IDLE_TIMEOUT"),
    SBX_CONFIG_KEY("auto_pause", SBX_CFG_BOOL, "pause instead of kill when the lifetime ends (default false)"),
    SBX_CONFIG_KEY("internet", SBX_CFG_BOOL, "allow internet access from the sandbox (default false)"),
    SBX_CONFIG_KEY("request_timeout_ms", SBX_CFG_INT, "timeout of one API or envd request (default 60000)"),
    SBX_CONFIG_KEY("pause_timeout_ms", SBX_CFG_INT, "timeout of one pause or resume request (default 120000)"),
    SBX_CONFIG_KEY("connect_timeout_ms", SBX_CFG_INT, "TCP/TLS connect timeout (default 10000)"),
    SBX_CONFIG_KEY("retries", SBX_CFG_INT, "retries of idempotent calls on transient failures (default 4)"),
    SBX_CONFIG_KEY("key_file", SBX_CFG_STRING, "file holding an API key (wins over CUBE_API_KEY; optional)"),
    SBX_CONFIG_KEY("envd_tls", SBX_CFG_BOOL, "https to 49983-<id>.<domain> without a proxy address (default false)"),
    SBX_CONFIG_KEY("user", SBX_CFG_STRING, "sandbox user commands and files run as (default user)"),
    SBX_CONFIG_KEY("workspace", SBX_CFG_STRING, "workspace directory (default /home/user/workspace)"),
    SBX_CONFIG_KEY("state_dir", SBX_CFG_STRING, "host directory of per-sandbox state: memory attachments and baselines (default $XDG_STATE_HOME/sbx/<provider>, else ~/.local/state/sbx/<provider>)"),
    SBX_CONFIG_KEY("process_buffer", SBX_CFG_INT, "replay buffer per stream of a process that outlives its call, in bytes (default 1048576)"),
    SBX_CONFIG_KEYS_END};

static int cube_init(const struct sbx_host *host, sbx_call *call, void **state)
{
    *state = NULL;
    static const struct e2b_conf_defaults d = {
        .provider = "cube",
        .key_var = "CUBE_API_KEY",
        .key_required = 0,
        .domain = "cube.app",
        .template_id = NULL,
        .missing_http = 500,
        .api_url_required = 1,
        .envd_tls = 0,
        .resume_endpoint = 1,
        .api_url_var = "CUBE_API_URL",
        .domain_var = "CUBE_SANDBOX_DOMAIN",
        .template_var = "CUBE_TEMPLATE_ID",
        .lifetime_var = "CUBE_IDLE_TIMEOUT",
    };
    struct e2b_conf cfg;
    int rc = e2b_conf_load(host, call, &d, &cfg);
    if (rc != SBX_OK) {
        e2b_conf_free(&cfg);
        return rc;
    }
    char an[64], pn[64];
    const char *addr_from, *port_from;
    const char *addr = sbxp_config_env(host, "cube", "proxy_address", "CUBE_PROXY_HOST", an,
                                       sizeof an, &addr_from);
    const char *port = sbxp_config_env(host, "cube", "proxy_port", "CUBE_PROXY_PORT", pn,
                                       sizeof pn, &port_from);
    if (port && !addr) {
        e2b_conf_free(&cfg);
        return host->set_error(host, call, SBX_E_CONFIG,
                               "%s needs providers.cube.proxy_address (or CUBE_PROXY_HOST)",
                               port_from);
    }
    if (addr) {
        char *end = NULL;
        long p = port ? strtol(port, &end, 10) : 80;
        if (p < 1 || p > 65535 || (end && *end)) {
            e2b_conf_free(&cfg);
            return host->set_error(host, call, SBX_E_CONFIG, "%s: want a port from 1 to 65535",
                                   port_from);
        }
        if (!*addr || strpbrk(addr, "/ ?#@\t\r\n")) {
            e2b_conf_free(&cfg);
            return host->set_error(host, call, SBX_E_CONFIG,
                                   "%s: want a host name or IP address", addr_from);
        }
        size_t len = strlen(addr) + 32;
        cfg.envd_url = malloc(len);
        if (!cfg.envd_url) {
            e2b_conf_free(&cfg);
            return host->set_error(host, call, SBX_E_NOMEM, "out of memory");
        }
        /* A bare IPv6 address needs brackets in a URL. */
        int v6 = strchr(addr, ':') && addr[0] != '[';
        snprintf(cfg.envd_url, len, "http://%s%s%s:%ld", v6 ? "[" : "", addr, v6 ? "]" : "", p);
        cfg.route = E2B_ROUTE_PROXY;
    }
    struct e2b_state *st = NULL;
    rc = e2b_state_new(host, call, &cfg, &st);
    *state = st;
    return rc;
}

static const struct sbx_provider_ops cube_ops = E2B_PROVIDER_OPS(cube_init, NULL);

SBX_PROVIDER_DEFINE("cube", "0.1.0",
                    "Tencent CubeSandbox microVMs over CubeAPI and CubeProxy (E2B-compatible)",
                    SBX_ISOLATION_VM, E2B_PROVIDER_CAPS, &cube_ops, cube_keys)
