/*
 * provider.c - the `opensandbox` provider's descriptor, configuration keys
 * and ops table (docs/providers/opensandbox.md). See osb.h.
 */
#include "osb.h"

static const struct sbx_config_key osb_keys[] = {
    SBX_CONFIG_SECRET("api_key", "API key: only from OPEN_SANDBOX_API_KEY, never the configuration (optional)",
                      "OPEN_SANDBOX_API_KEY"),
    SBX_CONFIG_KEY_ENV("api_url", SBX_CFG_STRING,
                       "lifecycle server, scheme://host:port (/v1 is appended; default "
                       "$OPEN_SANDBOX_DOMAIN, host:port over http)",
                       "OPEN_SANDBOX_DOMAIN"),
    SBX_CONFIG_KEY_ENV("image", SBX_CFG_STRING,
                       "container image of new sandboxes (default $OPEN_SANDBOX_IMAGE, else ubuntu:22.04)",
                       "OPEN_SANDBOX_IMAGE"),
    SBX_CONFIG_KEY("entrypoint", SBX_CFG_LIST, "entry process (default tail -f /dev/null)"),
    SBX_CONFIG_KEY("cpu", SBX_CFG_STRING, "CPU limit, e.g. 500m (default 500m)"),
    SBX_CONFIG_KEY("memory", SBX_CFG_STRING, "memory limit, e.g. 512Mi (default 512Mi)"),
    SBX_CONFIG_KEY_ENV("use_server_proxy", SBX_CFG_BOOL,
                       "reach execd and the egress sidecar through the server's proxy (default "
                       "$OPEN_SANDBOX_USE_SERVER_PROXY, else false)",
                       "OPEN_SANDBOX_USE_SERVER_PROXY"),
    SBX_CONFIG_KEY("internet", SBX_CFG_BOOL,
                   "create sandboxes without a network policy, all egress allowed (default false)"),
    SBX_CONFIG_KEY("lifetime", SBX_CFG_INT,
                   "seconds a sandbox lives past its last use, renewed while in use (default 3600)"),
    SBX_CONFIG_KEY("ready_timeout_ms", SBX_CFG_INT,
                   "how long create, attach, pause and resume wait for the sandbox's state "
                   "(Running, Paused; default 120000)"),
    SBX_CONFIG_KEY("request_timeout_ms", SBX_CFG_INT, "timeout of one request (default 60000)"),
    SBX_CONFIG_KEY("connect_timeout_ms", SBX_CFG_INT, "TCP/TLS connect timeout (default 10000)"),
    SBX_CONFIG_KEY("retries", SBX_CFG_INT,
                   "retries of idempotent calls on transient failures (default 4)"),
    SBX_CONFIG_KEY("workspace", SBX_CFG_STRING, "workspace directory (default /workspace)"),
    SBX_CONFIG_KEY("state_dir", SBX_CFG_STRING,
                   "absolute host directory of memory attachments and baselines (default "
                   "$XDG_STATE_HOME/sbx/opensandbox)"),
    SBX_CONFIG_KEY("proc_dir", SBX_CFG_STRING,
                   "directory in the sandbox keeping the processes' output and state (default "
                   "/var/lib/sbx/procs)"),
    SBX_CONFIG_KEY("proc_buffer", SBX_CFG_SIZE,
                   "replay buffer of a process, per stream (default 1m)"),
    SBX_CONFIG_KEYS_END};

static const struct sbx_provider_ops osb_ops = {
    .init = osb_init,
    .fini = osb_fini,
    .create = osb_create,
    .attach = osb_attach,
    .exec = osb_exec,
    .read_file = osb_read_file,
    .write_file = osb_write_file,
    .root = osb_root,
    .release = osb_release,
    .destroy = osb_destroy,
    .export_outputs = osb_export_outputs,
    .egress_set = osb_egress_set,
    .egress_get = osb_egress_get,
    .memory_load = osb_memory_load,
    .memory_diff = osb_memory_diff,
    .memory_accept = osb_memory_accept,
    .proc_start = osb_proc_start,
    .proc_write = osb_proc_write,
    .proc_read = osb_proc_read,
    .proc_signal = osb_proc_signal,
    .proc_list = osb_proc_list,
    .file_list = osb_file_list,
    .file_stat = osb_file_stat,
    .file_mkdir = osb_file_mkdir,
    .file_remove = osb_file_remove,
    .file_rename = osb_file_rename,
    .port_resolve = osb_port_resolve,
    .pause = osb_pause,
    .resume = osb_resume,
    .health = osb_health,
};

SBX_PROVIDER_DEFINE("opensandbox", "0.1.0",
                    "OpenSandbox containers over the lifecycle API, execd and the egress sidecar",
                    SBX_ISOLATION_CONTAINER,
                    SBX_CAP_OUTPUT_EXPORT | SBX_CAP_EGRESS | SBX_CAP_PACKAGES | SBX_CAP_MEMORY |
                        SBX_CAP_PROCESSES | SBX_CAP_FILE_OPS | SBX_CAP_PORTS | SBX_CAP_PAUSE |
                        SBX_CAP_POOL,
                    &osb_ops,
                    osb_keys)
