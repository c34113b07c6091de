/*
 * conf.c - configuration (section `opensandbox`), the API key from
 * OPEN_SANDBOX_API_KEY (never from the YAML, never logged), instance
 * setup and error reports. See osb.h.
 */
#include "osb.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY_VAR "OPEN_SANDBOX_API_KEY"
#define DOMAIN_VAR "OPEN_SANDBOX_DOMAIN"

static const char *get(const struct sbx_host *host, const char *key)
{
    return host->config_get ? host->config_get(host, key) : NULL;
}

static int int_key(const struct sbx_host *host, sbx_call *call, const char *key, int64_t def,
                   int64_t min, int64_t max, int64_t *out)
{
    const char *v = get(host, key);
    *out = def;
    if (!v)
        return SBX_OK;
    char *end;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (errno || end == v || *end || n < min || n > max)
        return host->set_error(host, call, SBX_E_CONFIG,
                               "providers.opensandbox.%s: want an integer from %lld to %lld",
                               key, (long long)min, (long long)max);
    *out = n;
    return SBX_OK;
}

static int dup_to(const struct sbx_host *host, sbx_call *call, const char *v, const char *def,
                  char **out)
{
    *out = strdup(v ? v : def);
    return *out ? SBX_OK : host->set_error(host, call, SBX_E_NOMEM, "out of memory");
}

static void conf_free(struct osb_conf *c)
{
    if (c->api_key) {
        volatile char *p = c->api_key; /* a credential: leave no copy behind */
        while (*p)
            *p++ = 0;
    }
    free(c->api_key);
    free(c->api_url);
    free(c->image);
    for (size_t i = 0; c->entrypoint[i]; i++)
        free(c->entrypoint[i]);
    free(c->cpu);
    free(c->memory);
    free(c->workspace);
    free(c->state_dir);
    memset(c, 0, sizeof *c);
}

/* api_url (scheme://host:port) or OPEN_SANDBOX_DOMAIN (host:port, http),
 * with /v1 appended. */
static int load_url(const struct sbx_host *host, sbx_call *call, struct osb_conf *c)
{
    const char *url = get(host, "api_url");
    const char *domain = getenv(DOMAIN_VAR);
    char buf[1024];
    if (url) {
        if (strncmp(url, "http://", 7) && strncmp(url, "https://", 8))
            return host->set_error(host, call, SBX_E_CONFIG,
                                   "providers.opensandbox.api_url: want http://host:port or "
                                   "https://host:port, got %s", url);
        snprintf(buf, sizeof buf, "%s", url);
    } else if (domain && *domain) {
        if (strstr(domain, "://"))
            snprintf(buf, sizeof buf, "%s", domain);
        else
            snprintf(buf, sizeof buf, "http://%s", domain);
    } else {
        return host->set_error(host, call, SBX_E_CONFIG,
                               "opensandbox: no server: set providers.opensandbox.api_url "
                               "or " DOMAIN_VAR);
    }
    size_t n = strlen(buf);
    while (n && buf[n - 1] == '/')
        buf[--n] = '\0';
    if (n < 3 || strcmp(buf + n - 3, "/v1") != 0) {
        if (n + 4 >= sizeof buf)
            return host->set_error(host, call, SBX_E_CONFIG,
                                   "providers.opensandbox.api_url is too long");
        strcat(buf, "/v1");
    }
    return dup_to(host, call, buf, NULL, &c->api_url);
}

static int load(const struct sbx_host *host, sbx_call *call, struct osb_conf *c)
{
    int rc;
    const char *key = getenv(KEY_VAR);
    c->key_source = KEY_VAR;
    if (key && *key) {
        for (const char *p = key; *p; p++)
            if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f)
                return host->set_error(host, call, SBX_E_CONFIG,
                                       "opensandbox: " KEY_VAR
                                       " has spaces or control characters");
        if ((rc = dup_to(host, call, key, NULL, &c->api_key)))
            return rc;
    }
    if ((rc = load_url(host, call, c)) ||
        (rc = dup_to(host, call, get(host, "image"), "ubuntu:22.04", &c->image)) ||
        (rc = dup_to(host, call, get(host, "cpu"), "500m", &c->cpu)) ||
        (rc = dup_to(host, call, get(host, "memory"), "512Mi", &c->memory)) ||
        (rc = dup_to(host, call, get(host, "workspace"), "/workspace", &c->workspace)) ||
        (rc = sbx_rmem_state_dir(host, call, OSB_PROVIDER, get(host, "state_dir"),
                                 &c->state_dir)))
        return rc;
    if (!*c->image)
        return host->set_error(host, call, SBX_E_CONFIG, "providers.opensandbox.image is empty");
    size_t ne = 0;
    const char *name, *val;
    while (host->config_entry && ne < 7 && host->config_entry(host, "entrypoint", ne, &name, &val))
        if ((rc = dup_to(host, call, val, NULL, &c->entrypoint[ne++])))
            return rc;
    if (ne == 0) {
        static const char *const def[] = {"tail", "-f", "/dev/null"};
        for (; ne < 3; ne++)
            if ((rc = dup_to(host, call, def[ne], NULL, &c->entrypoint[ne])))
                return rc;
    }
    size_t wl = strlen(c->workspace);
    while (wl > 1 && c->workspace[wl - 1] == '/')
        c->workspace[--wl] = '\0';
    if (c->workspace[0] != '/' || wl < 2 || strstr(c->workspace, "/..") ||
        strchr(c->workspace, '\''))
        return host->set_error(host, call, SBX_E_CONFIG,
                               "providers.opensandbox.workspace: want an absolute path below /");
    int64_t retries;
    if ((rc = int_key(host, call, "lifetime", 3600, 60, 86400 * 30, &c->lifetime_s)) ||
        (rc = int_key(host, call, "ready_timeout_ms", 120000, 100, 3600000,
                      &c->ready_timeout_ms)) ||
        (rc = int_key(host, call, "request_timeout_ms", 60000, 100, 3600000,
                      &c->request_timeout_ms)) ||
        (rc = int_key(host, call, "connect_timeout_ms", 10000, 100, 600000,
                      &c->connect_timeout_ms)) ||
        (rc = int_key(host, call, "retries", 4, 0, 20, &retries)))
        return rc;
    c->retry.attempts = (int)retries + 1;
    c->retry.base_ms = 200;
    c->retry.cap_ms = 5000;
    const char *v = get(host, "use_server_proxy");
    c->use_server_proxy = v && !strcmp(v, "true");
    v = get(host, "internet");
    c->internet = v && !strcmp(v, "true");
    return SBX_OK;
}

int osb_init(const struct sbx_host *host, sbx_call *call, void **state)
{
    *state = NULL;
    struct osb_state *st = calloc(1, sizeof *st);
    if (!st)
        return host->set_error(host, call, SBX_E_NOMEM, "out of memory");
    st->host = host;
    int rc = load(host, call, &st->cfg);
    if (rc == SBX_OK && st->cfg.api_key &&
        snprintf(st->key_header, sizeof st->key_header, "OPEN-SANDBOX-API-KEY: %s",
                 st->cfg.api_key) >= (int)sizeof st->key_header)
        rc = host->set_error(host, call, SBX_E_CONFIG, "opensandbox: " KEY_VAR " is too long");
    if (rc == SBX_OK) {
        sbx_http_error err;
        if (sbx_http_new(st->cfg.api_url, &st->api, &err) != SBX_OK)
            rc = host->set_error(host, call, SBX_E_CONFIG, "providers.opensandbox.api_url: %s",
                                 err.message);
    }
    if (rc != SBX_OK) {
        osb_fini(st);
        return rc;
    }
    *state = st;
    return SBX_OK;
}

void osb_fini(void *state)
{
    struct osb_state *st = state;
    if (!st)
        return;
    sbx_http_free(st->api);
    conf_free(&st->cfg);
    volatile char *p = st->key_header;
    while (*p)
        *p++ = 0;
    free(st);
}

int osb_error(struct osb_state *st, sbx_call *call, int status, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (call)
        return st->host->set_error(st->host, call, status, "%s", msg);
    st->host->log(st->host, SBX_LOG_WARN, "%s", msg);
    return status;
}

int osb_report(struct osb_state *st, sbx_call *call, const sbx_http_error *err,
               const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (err->http_status == 401 || err->http_status == 403)
        return osb_error(st, call, SBX_E_CONFIG,
                         "opensandbox: %s: %s; the server refused the credentials: set %s "
                         "to a valid key", what, err->message, st->cfg.key_source);
    return osb_error(st, call, err->status, "opensandbox: %s: %s", what, err->message);
}
