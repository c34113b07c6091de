/*
 * e2b.c - the `e2b` provider: descriptor, configuration keys, init/fini.
 * Everything else is the shared E2B logic in plugins/e2bproto.
 *
 * init reads the configuration and E2B_API_KEY (or key_file) and prepares
 * the connection pools; it contacts nothing.
 */
#include "e2b_core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct sbx_config_key e2b_keys[] = {
    SBX_CONFIG_SECRET("api_key", "API key: only from E2B_API_KEY, never the configuration (or see key_file)", "E2B_API_KEY"),
    SBX_CONFIG_KEY_ENV("api_url", SBX_CFG_STRING, "control plane URL (default $E2B_API_URL, else https://api.<domain>)", "E2B_API_URL"),
    SBX_CONFIG_KEY_ENV("domain", SBX_CFG_STRING, "sandbox domain (default $E2B_DOMAIN, else e2b.app)", "E2B_DOMAIN"),
    SBX_CONFIG_KEY_ENV("template", SBX_CFG_STRING, "template of new sandboxes (default $E2B_TEMPLATE_ID, else base)", "E2B_TEMPLATE_ID"),
    SBX_CONFIG_KEY_ENV("lifetime", SBX_CFG_INT, "TTL in seconds (2 or more), renewed with use: a sandbox lives half of it to all of it past its last use (default $E2B_IDLE_TIMEOUT, else 3600)", "E2B_IDLE_TIMEOUT"),
    SBX_CONFIG_KEY("auto_pause", SBX_CFG_BOOL, "pause instead of kill when the lifetime ends (default false)"),
    SBX_CONFIG_KEY("internet", SBX_CFG_BOOL, "allow internet access from the sandbox (default false)"),
    SBX_CONFIG_KEY("request_timeout_ms", SBX_CFG_INT, "timeout of one API or envd request (default 60000)"),
    SBX_CONFIG_KEY("pause_timeout_ms", SBX_CFG_INT, "timeout of one pause or resume request (default 120000)"),
    SBX_CONFIG_KEY("connect_timeout_ms", SBX_CFG_INT, "TCP/TLS connect timeout (default 10000)"),
    SBX_CONFIG_KEY("retries", SBX_CFG_INT, "retries of idempotent calls on transient failures (default 4)"),
    SBX_CONFIG_KEY("key_file", SBX_CFG_STRING, "file holding the API key (wins over E2B_API_KEY)"),
    SBX_CONFIG_KEY("envd_url", SBX_CFG_STRING, "send envd traffic to this URL, routed by E2b-Sandbox-Id headers"),
    SBX_CONFIG_KEY("envd_tls", SBX_CFG_BOOL, "https to 49983-<id>.<domain> (default true)"),
    SBX_CONFIG_KEY("user", SBX_CFG_STRING, "sandbox user commands and files run as (default user)"),
    SBX_CONFIG_KEY("workspace", SBX_CFG_STRING, "workspace directory (default /home/user/workspace)"),
    SBX_CONFIG_KEY("state_dir", SBX_CFG_STRING, "host directory of per-sandbox state: memory attachments and baselines (default $XDG_STATE_HOME/sbx/<provider>, else ~/.local/state/sbx/<provider>)"),
    SBX_CONFIG_KEY("process_buffer", SBX_CFG_INT, "replay buffer per stream of a process that outlives its call, in bytes (default 1048576)"),
    SBX_CONFIG_KEYS_END};

static int e2b_init(const struct sbx_host *host, sbx_call *call, void **state)
{
    *state = NULL;
    static const struct e2b_conf_defaults d = {
        .provider = "e2b",
        .key_var = "E2B_API_KEY",
        .key_required = 1,
        .domain = "e2b.app",
        .template_id = "base",
        .missing_http = 502,
        .envd_tls = 1,
        .api_url_var = "E2B_API_URL",
        .domain_var = "E2B_DOMAIN",
        .template_var = "E2B_TEMPLATE_ID",
        .lifetime_var = "E2B_IDLE_TIMEOUT",
        .snapshots = 1,
    };
    struct e2b_conf cfg;
    int rc = e2b_conf_load(host, call, &d, &cfg);
    if (rc != SBX_OK) {
        e2b_conf_free(&cfg);
        return rc;
    }
    const char *envd = sbxp_config_get(host, "envd_url");
    if (envd) {
        cfg.route = E2B_ROUTE_HEADERS;
        cfg.envd_url = strdup(envd);
        if (!cfg.envd_url) {
            e2b_conf_free(&cfg);
            return host->set_error(host, call, SBX_E_NOMEM, "out of memory");
        }
    }
    struct e2b_state *st = NULL;
    rc = e2b_state_new(host, call, &cfg, &st);
    *state = st;
    return rc;
}

static const struct sbx_provider_ops e2b_ops = E2B_PROVIDER_OPS(e2b_init, e2b_fork);

SBX_PROVIDER_DEFINE("e2b", "0.1.0", "E2B sandboxes (Firecracker microVMs) over the E2B API and envd",
                    SBX_ISOLATION_VM, E2B_PROVIDER_CAPS_E2B, &e2b_ops, e2b_keys)
