/*
 * conf.c - the configuration keys both providers share and the API key.
 * The key comes from the environment variable or the file key_file names,
 * read once here (init), never from the YAML, never logged. See
 * e2b_core.h.
 */
#include "e2b_core.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


static int bool_key(const struct sbx_host *host, const char *key, int def)
{
    const char *v = sbxp_config_get(host, key);
    return v ? !strcmp(v, "true") : def;
}

/* Read a key file: the first line, trimmed. */
static int read_key_file(const struct sbx_host *host, sbx_call *call, const char *prov,
                         const char *path, char **out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return host->set_error(host, call, SBX_E_CONFIG, "providers.%s.key_file: %s: %s", prov,
                               path, strerror(errno));
    char buf[1024];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n < 0)
        return host->set_error(host, call, SBX_E_CONFIG, "providers.%s.key_file: %s: %s", prov,
                               path, strerror(errno));
    buf[n] = '\0';
    buf[strcspn(buf, "\r\n")] = '\0';
    char *s = buf;
    while (*s == ' ' || *s == '\t')
        s++;
    size_t l = strlen(s);
    while (l && (s[l - 1] == ' ' || s[l - 1] == '\t'))
        s[--l] = '\0';
    if (!l)
        return host->set_error(host, call, SBX_E_CONFIG, "providers.%s.key_file: %s is empty",
                               prov, path);
    *out = strdup(s);
    memset(buf, 0, sizeof buf);
    return *out ? SBX_OK : host->set_error(host, call, SBX_E_NOMEM, "out of memory");
}

/* Printable ASCII without spaces: a key that can travel in a header. */
static int header_safe(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f)
            return 0;
    return 1;
}

static int dup_key(const struct sbx_host *host, sbx_call *call, const char *v,
                   const char *def, char **out)
{
    *out = v ? strdup(v) : def ? strdup(def) : NULL;
    if ((v || def) && !*out)
        return host->set_error(host, call, SBX_E_NOMEM, "out of memory");
    return SBX_OK;
}

int e2b_conf_load(const struct sbx_host *host, sbx_call *call,
                  const struct e2b_conf_defaults *d, struct e2b_conf *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    const char *p = d->provider;
    cfg->provider = d->provider;
    cfg->key_var = d->key_var;
    cfg->key_source = d->key_var;
    cfg->missing_http = d->missing_http;
    cfg->resume_endpoint = d->resume_endpoint;
    cfg->snapshots = d->snapshots;
    int rc;
    /* Configuration first: a key_file wins over the variable. */
    const char *kf = sbxp_config_get(host, "key_file");
    const char *env = getenv(d->key_var);
    int from_env = 0;
    if (kf) {
        cfg->key_source = "the file providers.<name>.key_file names";
        rc = read_key_file(host, call, p, kf, &cfg->api_key);
    } else if (env && *env) {
        from_env = 1;
        rc = dup_key(host, call, env, NULL, &cfg->api_key);
    } else if (d->key_required) {
        return host->set_error(host, call, SBX_E_CONFIG,
                               "%s: no API key: set %s (or providers.%s.key_file)", p,
                               d->key_var, p);
    } else {
        rc = SBX_OK;
    }
    if (rc != SBX_OK)
        return rc;
    if (cfg->api_key && !header_safe(cfg->api_key))
        return host->set_error(host, call, SBX_E_CONFIG,
                               "%s: the API key in %s has spaces or control characters", p,
                               from_env ? d->key_var : "key_file");

    char name[128];
    const char *what;
    const char *domain = sbxp_config_env(host, p, "domain", d->domain_var, name, sizeof name,
                                         &what);
    if (domain && strpbrk(domain, "/ ?#@\t\r\n"))
        return host->set_error(host, call, SBX_E_CONFIG,
                               "%s: want a domain name such as e2b.app (no scheme or path)",
                               what);
    if ((rc = dup_key(host, call, domain, d->domain, &cfg->domain)) != SBX_OK)
        return rc;
    const char *api;
    if ((rc = sbxp_config_url_env(host, call, p, "api_url", d->api_url_var, &api)))
        return rc;
    if (api) {
        rc = dup_key(host, call, api, NULL, &cfg->api_url);
    } else if (cfg->domain && !d->api_url_required) {
        char url[512];
        snprintf(url, sizeof url, "https://api.%s", cfg->domain);
        rc = dup_key(host, call, url, NULL, &cfg->api_url);
    }
    if (rc != SBX_OK)
        return rc;
    if (!cfg->api_url)
        return host->set_error(host, call, SBX_E_CONFIG,
                               "providers.%s.api_url is required (or set %s)", p,
                               d->api_url_var);
    if (!cfg->domain)
        return host->set_error(host, call, SBX_E_CONFIG, "providers.%s.domain is required", p);
    const char *tmpl = sbxp_config_env(host, p, "template", d->template_var, name, sizeof name,
                                       NULL);
    if ((rc = dup_key(host, call, tmpl, d->template_id, &cfg->template_id)) != SBX_OK)
        return rc;
    if (!cfg->template_id || !*cfg->template_id)
        return host->set_error(host, call, SBX_E_CONFIG,
                               "providers.%s.template is required (or set %s)", p,
                               d->template_var);
    if ((rc = sbxp_config_seconds_env(host, call, p, "lifetime", d->lifetime_var, 3600, 2,
                                      86400 * 30, &cfg->lifetime_s)) ||
        (rc = sbxp_http_config(host, call, p, &cfg->request_timeout_ms, &cfg->connect_timeout_ms,
                               &cfg->retry)))
        return rc;
    /* Pausing writes a memory snapshot: longer than an ordinary request. */
    if ((rc = sbxp_config_int(host, call, p, "pause_timeout_ms", 120000, 100, 3600000,
                              &cfg->pause_timeout_ms)))
        return rc;
    if ((rc = sbxp_config_int(host, call, p, "process_buffer", 1 << 20, 1024, 1 << 30,
                              &cfg->proc_buffer)))
        return rc;
    cfg->auto_pause = bool_key(host, "auto_pause", 0);
    cfg->internet = bool_key(host, "internet", 0);
    cfg->envd_https = bool_key(host, "envd_tls", d->envd_tls);
    if ((rc = dup_key(host, call, sbxp_config_get(host, "user"), "user", &cfg->user)))
        return rc;
    const char *ws = sbxp_config_get(host, "workspace");
    if ((rc = dup_key(host, call, ws, "/home/user/workspace", &cfg->workspace)))
        return rc;
    size_t wl = strlen(cfg->workspace);
    while (wl > 1 && cfg->workspace[wl - 1] == '/')
        cfg->workspace[--wl] = '\0';
    if (cfg->workspace[0] != '/' || wl < 2 || strstr(cfg->workspace, "/.."))
        return host->set_error(host, call, SBX_E_CONFIG,
                               "providers.%s.workspace: want an absolute path below /", p);
    /* Per-sandbox state (memory attachments and baselines) lives on this
     * machine, out of the sandbox's reach. */
    if ((rc = sbxp_rmem_state_dir(host, call, p, sbxp_config_get(host, "state_dir"),
                                  &cfg->state_dir)))
        return rc;
    if (!*cfg->user || strchr(cfg->user, ':'))
        return host->set_error(host, call, SBX_E_CONFIG, "providers.%s.user: bad user name", p);
    return SBX_OK;
}
