/*
 * provider.c - descriptor, configuration and instance lifecycle of the
 * `local` provider.
 *
 * The root directory comes from the `root` key; without it, from
 * $XDG_STATE_HOME/sbx/local or $HOME/.local/state/sbx/local (the environment
 * is read here, in init, and nowhere else). init touches no file: the root
 * is created by the first create.
 */
#include "local.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct sbx_config_key local_config_keys[] = {
    SBX_CONFIG_KEY("root", SBX_CFG_STRING, "directory holding one workspace per session "
     "(default $XDG_STATE_HOME/sbx/local or ~/.local/state/sbx/local)"),
    SBX_CONFIG_KEY("process_buffer", SBX_CFG_SIZE, "replay buffer of a process, per stream "
     "(default 1m; 4k to 64m)"),
    SBX_CONFIG_KEY("supervisor_idle_ms", SBX_CFG_INT, "a sandbox's process supervisor "
     "without processes exits after this many ms (default 600000)"),
    SBX_CONFIG_KEY("supervisor_timeout_ms", SBX_CFG_INT, "longest wait for an answer of "
     "the process supervisor, in ms (default 30000)"),
    SBX_CONFIG_KEY("supervisor_path", SBX_CFG_STRING, "the sbx-local-supervisor program "
     "(default: next to local.so)"),
    SBX_CONFIG_KEYS_END,
};

/*
 * Normalize an absolute directory path lexically: drop empty and "."
 * components and trailing slashes. ".." is refused because the ownership
 * check of attach compares paths as strings. Returns a malloc'd string,
 * or NULL with *why set.
 */
static char *normalize_root(const char *path, const char **why)
{
    if (path[0] != '/') {
        *why = "must be an absolute path";
        return NULL;
    }
    size_t len = strlen(path);
    char *out = malloc(len + 1);
    if (out == NULL) {
        *why = "out of memory";
        return NULL;
    }
    size_t o = 0;
    const char *p = path;
    while (*p != '\0') {
        while (*p == '/')
            p++;
        const char *start = p;
        while (*p != '\0' && *p != '/')
            p++;
        size_t n = (size_t)(p - start);
        if (n == 0 || (n == 1 && start[0] == '.'))
            continue;
        if (n == 2 && start[0] == '.' && start[1] == '.') {
            free(out);
            *why = "must not contain '..'";
            return NULL;
        }
        out[o++] = '/';
        memcpy(out + o, start, n);
        o += n;
    }
    out[o] = '\0';
    if (o == 0) {
        free(out);
        *why = "must not be '/'";
        return NULL;
    }
    return out;
}

/* The default root from the environment, malloc'd, or NULL. Relative
 * values of XDG_STATE_HOME are ignored, as the XDG spec asks. */
static char *default_root(void)
{
    const char *xdg = getenv("XDG_STATE_HOME");
    const char *base = NULL, *suffix = NULL;
    if (xdg != NULL && xdg[0] == '/') {
        base = xdg;
        suffix = "/sbx/local";
    } else {
        const char *home = getenv("HOME");
        if (home == NULL || home[0] != '/')
            return NULL;
        base = home;
        suffix = "/.local/state/sbx/local";
    }
    size_t n = strlen(base) + strlen(suffix) + 1;
    char *out = malloc(n);
    if (out != NULL)
        snprintf(out, n, "%s%s", base, suffix);
    return out;
}

/* Smallest and largest process_buffer. */
#define LOCAL_BUFFER_MIN (UINT64_C(4) << 10)
#define LOCAL_BUFFER_MAX (UINT64_C(64) << 20) /* the supervisor's largest */

/* The process keys; SBX_OK or SBX_E_CONFIG with the message set. */
static int process_config(const struct sbx_host *host, sbx_call *call,
                          struct local_state *st)
{
    const char *v = host->config_get != NULL ? host->config_get(host, "process_buffer") : NULL;
    char *end;
    st->process_buffer = SBX_PROC_BUFFER_DEFAULT;
    if (v != NULL) {
        unsigned long long n = strtoull(v, &end, 10);
        if (end == v || *end != '\0' || n < LOCAL_BUFFER_MIN || n > LOCAL_BUFFER_MAX)
            return host->set_error(host, call, SBX_E_CONFIG,
                                   "local: providers.local.process_buffer '%s' must be "
                                   "between 4k and 64m",
                                   v);
        st->process_buffer = n;
    }
    v = host->config_get != NULL ? host->config_get(host, "supervisor_idle_ms") : NULL;
    st->supervisor_idle_ms = LOCAL_SUP_IDLE_MS_DEFAULT;
    if (v != NULL) {
        long long n = strtoll(v, &end, 10);
        if (end == v || *end != '\0' || n < 100 || n > (INT64_C(1) << 40))
            return host->set_error(host, call, SBX_E_CONFIG,
                                   "local: providers.local.supervisor_idle_ms '%s' must be "
                                   "a number of ms, at least 100",
                                   v);
        st->supervisor_idle_ms = n;
    }
    v = host->config_get != NULL ? host->config_get(host, "supervisor_timeout_ms") : NULL;
    st->supervisor_timeout_ms = LOCAL_SUP_TIMEOUT_MS_DEFAULT;
    if (v != NULL) {
        long long n = strtoll(v, &end, 10);
        if (end == v || *end != '\0' || n < 10 || n > 3600 * 1000)
            return host->set_error(host, call, SBX_E_CONFIG,
                                   "local: providers.local.supervisor_timeout_ms '%s' must be "
                                   "a number of ms, 10 to 3600000",
                                   v);
        st->supervisor_timeout_ms = n;
    }
    v = host->config_get != NULL ? host->config_get(host, "supervisor_path") : NULL;
    if (v != NULL && v[0] != '/')
        return host->set_error(host, call, SBX_E_CONFIG,
                               "local: providers.local.supervisor_path '%s' must be an "
                               "absolute path",
                               v);
    if (v != NULL ? (st->supervisor_path = strdup(v)) == NULL
                  : local_sup_default_path(&st->supervisor_path) != 0)
        return host->set_error(host, call, SBX_E_NOMEM, "local: out of memory");
    return SBX_OK;
}

static int local_init(const struct sbx_host *host, sbx_call *call,
                      void **state)
{
    const char *configured =
        host->config_get != NULL ? host->config_get(host, "root") : NULL;
    char *raw = NULL;
    if (configured != NULL) {
        if (configured[0] == '\0')
            return host->set_error(host, call, SBX_E_CONFIG,
                                   "local: providers.local.root is empty");
        raw = strdup(configured);
    } else {
        raw = default_root();
        if (raw == NULL)
            return host->set_error(
                host, call, SBX_E_CONFIG,
                "local: no root directory: set providers.local.root, or "
                "XDG_STATE_HOME or HOME to an absolute path");
    }
    if (raw == NULL)
        return host->set_error(host, call, SBX_E_NOMEM, "local: out of memory");

    const char *why = NULL;
    char *root = normalize_root(raw, &why);
    if (root == NULL) {
        int rc = host->set_error(host, call, SBX_E_CONFIG,
                                 "local: root '%s' %s", raw, why);
        free(raw);
        return rc;
    }
    free(raw);

    /* The persisted reference is "<root>/<64 hex>" and must fit. */
    size_t root_len = strlen(root);
    if (root_len + 1 + SBX_KEY_HASH_LEN + 1 > SBX_REF_MAX) {
        int rc = host->set_error(host, call, SBX_E_CONFIG,
                                 "local: root '%s' is too long (at most %d "
                                 "bytes)",
                                 root,
                                 SBX_REF_MAX - SBX_KEY_HASH_LEN - 2);
        free(root);
        return rc;
    }

    struct local_state *st = calloc(1, sizeof *st);
    if (st == NULL) {
        free(root);
        return host->set_error(host, call, SBX_E_NOMEM, "local: out of memory");
    }
    st->host = host;
    st->root = root;
    st->root_len = root_len;
    int rc = process_config(host, call, st);
    if (rc != SBX_OK) {
        free(st->supervisor_path);
        free(root);
        free(st);
        return rc;
    }
    *state = st;
    if (host->log != NULL)
        host->log(host, SBX_LOG_DEBUG, "local: workspaces under %s", root);
    return SBX_OK;
}

static void local_fini(void *state)
{
    struct local_state *st = state;
    if (st == NULL)
        return;
    free(st->root);
    free(st->supervisor_path);
    free(st);
}

static const struct sbx_provider_ops local_ops = {
    .init = local_init,
    .fini = local_fini,
    .create = local_create,
    .attach = local_attach,
    .exec = local_exec,
    .read_file = local_read_file,
    .write_file = local_write_file,
    .root = local_root,
    .release = local_release,
    .destroy = local_destroy,
    .proc_start = local_proc_start,
    .proc_write = local_proc_write,
    .proc_read = local_proc_read,
    .proc_signal = local_proc_signal,
    .proc_list = local_proc_list,
    .proc_resize = local_proc_resize,
    .file_list = local_file_list,
    .file_stat = local_file_stat,
    .file_mkdir = local_file_mkdir,
    .file_remove = local_file_remove,
    .file_rename = local_file_rename,
    .port_resolve = local_port_resolve,
};

/* File operations and ports; processes (supervisor.c); POOL: attach and
 * destroy check the key hash alone (workspace.c) and nothing of the key
 * reaches a command. No packages, egress, mounts, memory, users or pause. */
SBX_PROVIDER_DEFINE("local", "0.2.0",
                    "host processes in a workspace directory on this machine",
                    SBX_ISOLATION_NONE,
                    SBX_CAP_PROCESSES | SBX_CAP_PTY | SBX_CAP_FILE_OPS | SBX_CAP_PORTS |
                        SBX_CAP_POOL,
                    &local_ops,
                    local_config_keys)
