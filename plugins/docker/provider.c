/*
 * provider.c - the `docker` provider's descriptor, ops table, init and fini.
 *
 * init reads the configuration and prepares the HTTP client; it does not
 * contact the daemon. The API version is negotiated on first use, so a
 * daemon that is down at start-up only fails the calls made while it is
 * down, with an error that names the endpoint.
 */
#include "docker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct sbx_config_key docker_keys[] = {
    SBX_CONFIG_KEY("host", SBX_CFG_STRING, "daemon endpoint: unix:///path or tcp://host:port (default: $DOCKER_HOST, "
     "else unix:///var/run/docker.sock)"),
    SBX_CONFIG_KEY("image", SBX_CFG_STRING, "image of new sandboxes (default debian:bookworm-slim)"),
    SBX_CONFIG_KEY("network", SBX_CFG_STRING, "network mode of new sandboxes (default none)"),
    SBX_CONFIG_KEY("memory", SBX_CFG_SIZE, "memory limit per sandbox (swap included)"),
    SBX_CONFIG_KEY("cpus", SBX_CFG_NUMBER, "CPU limit per sandbox, e.g. 1.5"),
    SBX_CONFIG_KEY("pids_limit", SBX_CFG_INT, "maximum number of processes per sandbox"),
    SBX_CONFIG_KEY("user", SBX_CFG_STRING, "user (name or uid[:gid]) commands run as"),
    SBX_CONFIG_KEY("read_only_rootfs", SBX_CFG_BOOL, "read-only root filesystem; the workspace and /tmp stay writable"),
    SBX_CONFIG_KEY("labels", SBX_CFG_MAP, "extra labels on every container (not sbx.*)"),
    SBX_CONFIG_KEY("resource_dir", SBX_CFG_STRING, "host directory for provider-owned resources (default /var/lib/sbx/docker)"),
    SBX_CONFIG_KEY("request_timeout", SBX_CFG_NUMBER, "seconds an Engine API call (or a stalled stream) may take before it fails (default 30)"),
    SBX_CONFIG_KEY("verify_writes", SBX_CFG_BOOL, "check the SHA-256 of written files in the container before publishing them (default true)"),
    SBX_CONFIG_KEY("kill_timeout", SBX_CFG_NUMBER, "seconds a timeout or cancellation may take to kill a command and drain its output (default 0.6)"),
    SBX_CONFIG_KEY("agent", SBX_CFG_BOOL, "run new containers under sbx-agent, the in-container init that serves exec and files over a unix socket (default true; false: the Engine API for everything)"),
    SBX_CONFIG_KEY("agent_path", SBX_CFG_STRING, "host path of the static sbx-agent binary bound into new containers (default: next to docker.so)"),
    SBX_CONFIG_KEY("process_buffer", SBX_CFG_SIZE, "replay buffer per output stream of a process started with buffer_bytes 0 (default 1 MiB, at most 64 MiB)"),
    SBX_CONFIG_KEY("publish_address", SBX_CFG_STRING, "host address declared ports are published on (default 127.0.0.1; another address exposes the sandbox's servers to whoever reaches it)"),
    SBX_CONFIG_KEY("pause_mode", SBX_CFG_STRING, "how pause works: freeze (the cgroup freezer: processes, their output and the workspace survive; default) or stop (the container is stopped and started on resume: processes end, the agent restarts)"),
    SBX_CONFIG_KEYS_END};

static int docker_init(const struct sbx_host *host, sbx_call *call, void **state)
{
    *state = NULL;
    struct docker_state *st = calloc(1, sizeof *st);
    if (!st)
        return host->set_error(host, call, SBX_E_NOMEM, "out of memory");
    st->host = host;
    int rc = docker_config_load(host, call, &st->cfg);
    if (rc != SBX_OK) {
        docker_config_free(&st->cfg);
        free(st);
        return rc;
    }
    sbxp_http_error err;
    rc = sbxp_http_new(st->cfg.host, &st->http, &err);
    if (rc != SBX_OK) {
        rc = host->set_error(host, call, rc, "docker: providers.docker.host: %s",
                             err.message);
        docker_config_free(&st->cfg);
        free(st);
        return rc;
    }
    pthread_mutex_init(&st->lock, NULL);
    snprintf(st->api_prefix, sizeof st->api_prefix, "/v1.%d", DOCKER_API_MAX_MINOR);
    *state = st;
    return SBX_OK;
}

static void docker_fini(void *state)
{
    struct docker_state *st = state;
    if (!st)
        return;
    sbxp_http_free(st->http);
    pthread_mutex_destroy(&st->lock);
    docker_config_free(&st->cfg);
    free(st);
}

/* Every op that reaches into the container resumes a paused one first
 * (pause.c: one stat(2) when it is not paused). The memory ops work on
 * the host's trees and need no running container. */
#define AWAKE_OP(op, params, args)                                   \
    static int awake_##op(sbx_sandbox *sb, sbx_call *call, params)   \
    {                                                                \
        int rc = docker_awake(sb, call);                             \
        return rc != SBX_OK ? rc : docker_##op(sb, call, args);      \
    }
#define P(...) __VA_ARGS__
AWAKE_OP(exec, P(const struct sbx_exec_args *args, struct sbx_exec_result *res), P(args, res))
AWAKE_OP(read_file, P(const char *path, const struct sbx_sink *sink), P(path, sink))
AWAKE_OP(write_file, P(const char *path, const struct sbx_source *src, unsigned mode), P(path, src, mode))
AWAKE_OP(mount_put, P(const char *path, const struct sbx_blob *blob), P(path, blob))
AWAKE_OP(mount_remove, P(const char *path), P(path))
AWAKE_OP(export_outputs, P(const struct sbx_sink *tar_sink), P(tar_sink))
AWAKE_OP(skill_install, P(const char *name, const struct sbx_blob *bundle), P(name, bundle))
AWAKE_OP(group_add, P(const struct sbx_group_spec *group), P(group))
AWAKE_OP(user_add, P(const struct sbx_user_spec *user), P(user))
AWAKE_OP(proc_start, P(const struct sbx_proc_spec *spec, char id[SBX_PROC_ID_MAX]), P(spec, id))
AWAKE_OP(proc_write, P(const char *id, const void *data, size_t len, uint32_t flags), P(id, data, len, flags))
AWAKE_OP(proc_read, P(const char *id, const struct sbx_proc_read_args *args, struct sbx_proc_read_result *res), P(id, args, res))
AWAKE_OP(proc_signal, P(const char *id, int signo), P(id, signo))
AWAKE_OP(proc_list, P(const struct sbx_proc_list_sink *sink), P(sink))
AWAKE_OP(proc_resize, P(const char *id, uint16_t rows, uint16_t cols), P(id, rows, cols))
AWAKE_OP(file_list, P(const char *path, const struct sbx_file_list_sink *sink), P(path, sink))
AWAKE_OP(file_stat, P(const char *path, struct sbx_file_info *out), P(path, out))
AWAKE_OP(file_mkdir, P(const char *path, unsigned mode, uint32_t flags), P(path, mode, flags))
AWAKE_OP(file_remove, P(const char *path, uint32_t flags), P(path, flags))
AWAKE_OP(file_rename, P(const char *from, const char *to, uint32_t flags), P(from, to, flags))
AWAKE_OP(port_resolve, P(uint16_t port, struct sbx_port_endpoint *out), P(port, out))
#undef P
#undef AWAKE_OP

static const struct sbx_provider_ops docker_ops = {
    .init = docker_init,
    .fini = docker_fini,
    .create = docker_create,
    .attach = docker_attach,
    .exec = awake_exec,
    .read_file = awake_read_file,
    .write_file = awake_write_file,
    .root = docker_root,
    .release = docker_release,
    .destroy = docker_destroy,
    .mount_put = awake_mount_put,
    .mount_remove = awake_mount_remove,
    .export_outputs = awake_export_outputs,
    .skill_install = awake_skill_install,
    .memory_load = docker_memory_load,
    .memory_diff = docker_memory_diff,
    .memory_accept = docker_memory_accept,
    .memory_watch = docker_memory_watch,
    .group_add = awake_group_add,
    .user_add = awake_user_add,
    .proc_start = awake_proc_start,
    .proc_write = awake_proc_write,
    .proc_read = awake_proc_read,
    .proc_signal = awake_proc_signal,
    .proc_list = awake_proc_list,
    .proc_resize = awake_proc_resize,
    .file_list = awake_file_list,
    .file_stat = awake_file_stat,
    .file_mkdir = awake_file_mkdir,
    .file_remove = awake_file_remove,
    .file_rename = awake_file_rename,
    .port_resolve = awake_port_resolve,
    .pause = docker_pause,
    .resume = docker_resume,
    .health = docker_health,
    .fork = docker_fork,
};

SBX_PROVIDER_DEFINE("docker", "0.1.0",
                    "Docker Engine containers over the Engine API",
                    SBX_ISOLATION_CONTAINER,
                    SBX_CAP_FILE_MOUNTS | SBX_CAP_OUTPUT_EXPORT | SBX_CAP_SKILLS |
                        SBX_CAP_PACKAGES | SBX_CAP_MEMORY | SBX_CAP_USERS |
                        SBX_CAP_PROCESSES | SBX_CAP_PTY | SBX_CAP_FILE_OPS | SBX_CAP_PORTS |
                        SBX_CAP_PAUSE | SBX_CAP_POOL | SBX_CAP_FORK,
                    &docker_ops, docker_keys)
