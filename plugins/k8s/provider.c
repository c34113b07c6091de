/*
 * provider.c - the `k8s` provider's descriptor, configuration keys and ops
 * table (docs/providers/k8s.md). See k8s.h.
 *
 * Capabilities: none beyond the core ops. sandboxd's process service ties a
 * process's output to the one Start stream that started it, so processes
 * that outlive a call and that another host process reads later
 * (SBX_CAP_PROCESSES, and SBX_CAP_PTY with it) are not declared; its REST
 * API has no mkdir, rename or stat and reports no symlinks
 * (SBX_CAP_FILE_OPS is not declared either).
 */
#include "k8s.h"

#include <stdio.h>
#include <string.h>

static const struct sbx_config_key k8s_keys[] = {
    SBX_CONFIG_KEY("kubeconfig", SBX_CFG_STRING,
                   "kubeconfig file (default: the first of $KUBECONFIG, else ~/.kube/config)"),
    SBX_CONFIG_KEY("context", SBX_CFG_STRING, "kubeconfig context (default: current-context)"),
    SBX_CONFIG_KEY("in_cluster", SBX_CFG_BOOL,
                   "use the pod's service account token and CA instead of a kubeconfig "
                   "(default false)"),
    SBX_CONFIG_KEY("api_url", SBX_CFG_STRING,
                   "API server URL (default: the kubeconfig's, or "
                   "https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT in a cluster)"),
    SBX_CONFIG_KEY("token_file", SBX_CFG_STRING,
                   "in_cluster: bearer token file, re-read on 401 (default "
                   "/var/run/secrets/kubernetes.io/serviceaccount/token)"),
    SBX_CONFIG_KEY("ca_file", SBX_CFG_STRING,
                   "in_cluster: CA bundle of the API server (default "
                   "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt)"),
    SBX_CONFIG_KEY("namespace", SBX_CFG_STRING,
                   "namespace of the claims (default: the context's, the pod's, else default)"),
    SBX_CONFIG_KEY("warm_pool", SBX_CFG_STRING,
                   "claim mode: the SandboxWarmPool each session claims from"),
    SBX_CONFIG_KEY("template", SBX_CFG_STRING,
                   "template mode: the SandboxTemplate whose pod template each Sandbox gets"),
    SBX_CONFIG_KEY("shutdown_after", SBX_CFG_INT,
                   "seconds after create at which the cluster deletes the sandbox "
                   "(shutdownTime; 0: never; default 86400)"),
    SBX_CONFIG_KEY("router_url", SBX_CFG_STRING,
                   "the sandbox-router, http(s)://host:port (required)"),
    SBX_CONFIG_KEY("router_token_file", SBX_CFG_STRING,
                   "bearer token file sent to the router (its tokenreview mode), or unset"),
    SBX_CONFIG_KEY("grpc_port", SBX_CFG_INT, "sandboxd's gRPC port in the pod (default 9090)"),
    SBX_CONFIG_KEY("rest_port", SBX_CFG_INT, "sandboxd's REST port in the pod (default 8080)"),
    SBX_CONFIG_KEY("workspace", SBX_CFG_STRING,
                   "sandboxd's --root-dir, reported as the root (default: asked of sandboxd, "
                   "else /workspace)"),
    SBX_CONFIG_KEY("ready_timeout_ms", SBX_CFG_INT,
                   "how long create waits for the claim to be Ready (default 120000)"),
    SBX_CONFIG_KEY("exec_grace_ms", SBX_CFG_INT,
                   "after killing a timed-out command, how long to wait for its exit "
                   "(default 5000)"),
    SBX_CONFIG_KEY("request_timeout_ms", SBX_CFG_INT, "timeout of one request (default 60000)"),
    SBX_CONFIG_KEY("connect_timeout_ms", SBX_CFG_INT, "TCP/TLS connect timeout (default 10000)"),
    SBX_CONFIG_KEY("retries", SBX_CFG_INT,
                   "backoff policy of retried calls: first 200 ms, up to 5 s (default 4)"),
    SBX_CONFIG_KEYS_END};

static const struct sbx_provider_ops k8s_ops = {
    .init = k8s_init,
    .fini = k8s_fini,
    .create = k8s_create,
    .attach = k8s_attach,
    .exec = k8s_exec,
    .read_file = k8s_read_file,
    .write_file = k8s_write_file,
    .root = k8s_root,
    .release = k8s_release,
    .destroy = k8s_destroy,
    .health = k8s_health,
};

SBX_PROVIDER_DEFINE("k8s", "0.1.0",
                    "Kubernetes agent-sandbox claims, commands and files through the "
                    "sandbox-router to sandboxd",
                    SBX_ISOLATION_CONTAINER, 0, &k8s_ops, k8s_keys)
