/*
 * config.c - the providers.docker section.
 *
 * Values arrive already type-checked by the host (SIZE in bytes, BOOL as
 * true/false); this file applies defaults and the checks only the provider
 * can make (endpoint scheme, label names, ranges).
 */
#include "docker.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *get(const struct sbx_host *host, const char *key)
{
    return host->config_get ? host->config_get(host, key) : NULL;
}

static int dup_or(const char *v, const char *def, char **out)
{
    *out = strdup(v ? v : def);
    return *out ? 0 : -1;
}

static int parse_i64(const char *v, int64_t *out)
{
    char *end;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (errno || end == v || *end)
        return -1;
    *out = n;
    return 0;
}

/* A NUMBER key in seconds (> 0, at most a day) into milliseconds; def_ms
 * when absent. -1 when unusable. */
static int seconds_key(const struct sbx_host *host, const char *key, int64_t def_ms,
                       int64_t *out_ms)
{
    const char *v = get(host, key);
    *out_ms = def_ms;
    if (!v)
        return 0;
    char *end;
    errno = 0;
    double sec = strtod(v, &end);
    if (errno || end == v || *end || !(sec > 0) || sec > 86400)
        return -1;
    *out_ms = (int64_t)(sec * 1000 + 0.5);
    if (*out_ms < 1)
        *out_ms = 1;
    return 0;
}

/* Network names as Docker accepts them. */
static int valid_name(const char *s)
{
    if (!*s || strlen(s) > 128)
        return 0;
    for (const char *p = s; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("_.-:", *p))
            return 0;
    return 1;
}

static int load_labels(const struct sbx_host *host, sbx_call *call,
                       struct docker_config *cfg)
{
    if (!host->config_entry)
        return SBX_OK;
    const char *name, *value;
    for (size_t i = 0; host->config_entry(host, "labels", i, &name, &value); i++) {
        if (!name || !*name || !value)
            return host->set_error(host, call, SBX_E_CONFIG,
                                   "providers.docker.labels: entry %zu is empty", i);
        if (strncmp(name, DOCKER_LABEL_PREFIX, strlen(DOCKER_LABEL_PREFIX)) == 0)
            return host->set_error(host, call, SBX_E_CONFIG,
                                   "providers.docker.labels.%s: the prefix \"%s\" "
                                   "is reserved for the provider's own labels",
                                   name, DOCKER_LABEL_PREFIX);
        struct docker_label *more =
            realloc(cfg->labels, (cfg->nlabels + 1) * sizeof *more);
        if (!more)
            return host->set_error(host, call, SBX_E_NOMEM, "out of memory");
        cfg->labels = more;
        more[cfg->nlabels].key = strdup(name);
        more[cfg->nlabels].value = strdup(value);
        cfg->nlabels++;
        if (!more[cfg->nlabels - 1].key || !more[cfg->nlabels - 1].value)
            return host->set_error(host, call, SBX_E_NOMEM, "out of memory");
    }
    return SBX_OK;
}

int docker_config_load(const struct sbx_host *host, sbx_call *call,
                       struct docker_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    const char *v;

    /* host: the config key, then DOCKER_HOST, then the standard socket. The
     * environment is read, never written. */
    v = get(host, "host");
    if (!v || !*v)
        v = getenv("DOCKER_HOST");
    if (!v || !*v)
        v = "unix:///var/run/docker.sock";
    if (strncmp(v, "unix:///", 8) != 0 && strncmp(v, "tcp://", 6) != 0)
        return host->set_error(host, call, SBX_E_CONFIG,
                               "providers.docker.host: \"%s\" is not supported; "
                               "use unix:///path/to/docker.sock or tcp://host:port "
                               "(TLS endpoints are not supported)",
                               v);
    if (dup_or(v, NULL, &cfg->host))
        goto nomem;

    v = get(host, "image");
    if (v && !*v)
        return host->set_error(host, call, SBX_E_CONFIG,
                               "providers.docker.image: must not be empty");
    if (dup_or(v, "debian:bookworm-slim", &cfg->image))
        goto nomem;

    v = get(host, "network");
    if (v && !valid_name(v))
        return host->set_error(host, call, SBX_E_CONFIG,
                               "providers.docker.network: \"%s\" is not a valid "
                               "network name",
                               v);
    if (dup_or(v, "none", &cfg->network))
        goto nomem;

    if ((v = get(host, "memory"))) {
        if (parse_i64(v, &cfg->memory) || cfg->memory < 6 * 1024 * 1024)
            return host->set_error(host, call, SBX_E_CONFIG,
                                   "providers.docker.memory: \"%s\" is not a size "
                                   "of at least 6m (Docker's minimum)",
                                   v);
    }
    if ((v = get(host, "cpus"))) {
        char *end;
        errno = 0;
        double cpus = strtod(v, &end);
        if (errno || end == v || *end || !(cpus > 0) || cpus > 1024)
            return host->set_error(host, call, SBX_E_CONFIG,
                                   "providers.docker.cpus: \"%s\" is not a "
                                   "positive number of CPUs",
                                   v);
        cfg->nano_cpus = (int64_t)(cpus * 1e9 + 0.5);
    }
    if ((v = get(host, "pids_limit"))) {
        if (parse_i64(v, &cfg->pids_limit) || cfg->pids_limit < 1)
            return host->set_error(host, call, SBX_E_CONFIG,
                                   "providers.docker.pids_limit: \"%s\" is not a "
                                   "positive integer",
                                   v);
    }
    if ((v = get(host, "user")) && *v) {
        if (strlen(v) > 64 || strpbrk(v, " \t\n\"'\\"))
            return host->set_error(host, call, SBX_E_CONFIG,
                                   "providers.docker.user: \"%s\" is not a user "
                                   "name or uid[:gid]",
                                   v);
        if (dup_or(v, NULL, &cfg->user))
            goto nomem;
        char *end;
        errno = 0;
        long long u = strtoll(v, &end, 10);
        if (end != v && !errno && u >= 0 && (*end == '\0' || *end == ':')) {
            long long g = 0;
            int ok = 1;
            if (*end == ':') {
                const char *gs = end + 1;
                g = strtoll(gs, &end, 10);
                ok = end != gs && !errno && g >= 0 && *end == '\0';
            }
            if (ok) {
                cfg->user_numeric = 1;
                cfg->uid = u;
                cfg->gid = g;
            }
        }
    }
    if ((v = get(host, "read_only_rootfs")))
        cfg->read_only_rootfs = strcmp(v, "true") == 0;
    v = get(host, "verify_writes");
    cfg->verify_writes = !v || strcmp(v, "true") == 0;
    if ((v = get(host, "resource_dir")) && *v) {
        if (v[0] != '/')
            return host->set_error(host, call, SBX_E_CONFIG,
                                   "providers.docker.resource_dir: \"%s\" must be "
                                   "an absolute path",
                                   v);
        if (dup_or(v, NULL, &cfg->resource_dir))
            goto nomem;
    } else if (dup_or(NULL, "/var/lib/sbx/docker", &cfg->resource_dir)) {
        goto nomem;
    }
    if (seconds_key(host, "request_timeout", DOCKER_REQUEST_TIMEOUT_MS,
                    &cfg->request_timeout_ms))
        return host->set_error(host, call, SBX_E_CONFIG,
                               "providers.docker.request_timeout: \"%s\" is not a "
                               "positive number of seconds (at most 86400)",
                               get(host, "request_timeout"));
    if (seconds_key(host, "kill_timeout", DOCKER_KILL_TIMEOUT_MS, &cfg->kill_timeout_ms))
        return host->set_error(host, call, SBX_E_CONFIG,
                               "providers.docker.kill_timeout: \"%s\" is not a "
                               "positive number of seconds (at most 86400)",
                               get(host, "kill_timeout"));
    v = get(host, "agent");
    cfg->agent = !v || strcmp(v, "true") == 0;
    v = get(host, "pause_mode");
    if (v && strcmp(v, "freeze") != 0 && strcmp(v, "stop") != 0)
        return host->set_error(host, call, SBX_E_CONFIG,
                               "providers.docker.pause_mode: \"%s\" is not freeze or stop",
                               v);
    cfg->pause_stop = v && strcmp(v, "stop") == 0;
    if ((v = get(host, "process_buffer")) && *v) {
        char *end;
        unsigned long long n = strtoull(v, &end, 10);
        if (*end || n < 1 || n > (64ull << 20))
            return host->set_error(host, call, SBX_E_CONFIG,
                                   "providers.docker.process_buffer: \"%s\" is not a size "
                                   "from 1 byte to 64 MiB",
                                   v);
        cfg->process_buffer = n;
    }
    if ((v = get(host, "agent_path")) && *v) {
        if (v[0] != '/')
            return host->set_error(host, call, SBX_E_CONFIG,
                                   "providers.docker.agent_path: \"%s\" must be an "
                                   "absolute path",
                                   v);
        if (dup_or(v, NULL, &cfg->agent_path))
            goto nomem;
    } else if (cfg->agent && docker_agent_default_path(&cfg->agent_path) != 0) {
        goto nomem;
    }
    int rc = docker_ports_config(host, call, cfg);
    if (rc != SBX_OK)
        return rc;
    return load_labels(host, call, cfg);

nomem:
    return host->set_error(host, call, SBX_E_NOMEM, "out of memory");
}

const char *docker_upload_owner(const struct docker_config *cfg, int64_t *uid,
                                int64_t *gid)
{
    *uid = cfg->user_numeric ? cfg->uid : 0;
    *gid = cfg->user_numeric ? cfg->gid : 0;
    return cfg->user && !cfg->user_numeric ? "&copyUIDGID=true" : "";
}

void docker_config_free(struct docker_config *cfg)
{
    free(cfg->host);
    free(cfg->image);
    free(cfg->network);
    free(cfg->user);
    free(cfg->resource_dir);
    free(cfg->agent_path);
    free(cfg->publish_address);
    for (size_t i = 0; i < cfg->nlabels; i++) {
        free(cfg->labels[i].key);
        free(cfg->labels[i].value);
    }
    free(cfg->labels);
    memset(cfg, 0, sizeof *cfg);
}
