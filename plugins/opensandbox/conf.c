/*
 * conf.c - configuration (section `opensandbox`), the API key from
 * OPEN_SANDBOX_API_KEY (never from the YAML, never logged), instance
 * setup and error reports. See osb.h.
 */
#include "osb.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEY_VAR "OPEN_SANDBOX_API_KEY"
#define DOMAIN_VAR "OPEN_SANDBOX_DOMAIN"
#define IMAGE_VAR "OPEN_SANDBOX_IMAGE"
#define PROXY_VAR "OPEN_SANDBOX_USE_SERVER_PROXY"

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
    free(c->proc_dir);
    memset(c, 0, sizeof *c);
}

/* api_url (scheme://host:port), else OPEN_SANDBOX_DOMAIN (host:port over
 * http, or a URL as the SDKs also accept), with /v1 appended. */
static int load_url(const struct sbx_host *host, sbx_call *call, struct osb_conf *c)
{
    const char *url = sbxp_config_get(host, "api_url");
    const char *domain = getenv(DOMAIN_VAR);
    char buf[1024];
    if (url) {
        if (strncmp(url, "http://", 7) && strncmp(url, "https://", 8))
            return host->set_error(host, call, SBX_E_CONFIG,
                                   "providers.opensandbox.api_url: want http://host:port or "
                                   "https://host:port");
        snprintf(buf, sizeof buf, "%s", url);
    } else if (domain && *domain) {
        if (strstr(domain, "://") && strncmp(domain, "http://", 7) &&
            strncmp(domain, "https://", 8))
            return host->set_error(host, call, SBX_E_CONFIG,
                                   DOMAIN_VAR ": want host:port, http://host:port or "
                                   "https://host:port");
        if (strstr(domain, "://"))
            snprintf(buf, sizeof buf, "%s", domain);
        else
            snprintf(buf, sizeof buf, "http://%s", domain);
    } else {
        return host->set_error(host, call, SBX_E_CONFIG,
                               "opensandbox: no server: set providers.opensandbox.api_url "
                               "or " DOMAIN_VAR);
    }
    const char *what = url ? "providers.opensandbox.api_url" : DOMAIN_VAR;
    const char *hostpart = strstr(buf, "://") + 3;
    if (!*hostpart || *hostpart == '/' || strpbrk(buf, " \t\r\n"))
        return host->set_error(host, call, SBX_E_CONFIG,
                               "%s: want a host (and port) after the scheme, no spaces", what);
    size_t n = strlen(buf);
    while (n && buf[n - 1] == '/')
        buf[--n] = '\0';
    if (n < 3 || strcmp(buf + n - 3, "/v1") != 0) {
        if (n + 4 >= sizeof buf)
            return host->set_error(host, call, SBX_E_CONFIG, "%s is too long", what);
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
        (rc = dup_to(host, call,
                     sbxp_config_env(host, OSB_PROVIDER, "image", IMAGE_VAR, NULL, 0, NULL),
                     "ubuntu:22.04", &c->image)) ||
        (rc = dup_to(host, call, sbxp_config_get(host, "cpu"), "500m", &c->cpu)) ||
        (rc = dup_to(host, call, sbxp_config_get(host, "memory"), "512Mi", &c->memory)) ||
        (rc = dup_to(host, call, sbxp_config_get(host, "workspace"), "/workspace",
                     &c->workspace)) ||
        (rc = sbxp_rmem_state_dir(host, call, OSB_PROVIDER, sbxp_config_get(host, "state_dir"),
                                  &c->state_dir)) ||
        (rc = dup_to(host, call, sbxp_config_get(host, "proc_dir"), "/var/lib/sbx/procs",
                     &c->proc_dir)))
        return rc;
    /* The directory is spliced into shell text: a plain absolute path. */
    size_t pl = strlen(c->proc_dir);
    if (c->proc_dir[0] != '/' || pl < 2 || pl > 200 || strstr(c->proc_dir, "..") ||
        strspn(c->proc_dir, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-") !=
            pl)
        return host->set_error(host, call, SBX_E_CONFIG,
                               "providers.opensandbox.proc_dir: want an absolute path of "
                               "letters, digits, '/', '.', '_' and '-'");
    while (pl > 1 && c->proc_dir[pl - 1] == '/')
        c->proc_dir[--pl] = '\0';
    const char *pb = sbxp_config_get(host, "proc_buffer");
    c->proc_buffer = SBX_PROC_BUFFER_DEFAULT;
    if (pb) {
        char *end;
        unsigned long long v = strtoull(pb, &end, 10);
        if (*end || v < 4096 || v > (1ull << 32))
            return host->set_error(host, call, SBX_E_CONFIG,
                                   "providers.opensandbox.proc_buffer: want 4k to 4g, got %s", pb);
        c->proc_buffer = v;
    }
    if (!*c->image)
        return host->set_error(host, call, SBX_E_CONFIG, "providers.opensandbox.image is empty");
    if (strpbrk(c->image, " \t\r\n"))
        return host->set_error(host, call, SBX_E_CONFIG, "%s: an image reference has no spaces",
                               sbxp_config_get(host, "image") ? "providers.opensandbox.image"
                                                              : IMAGE_VAR);
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
    if ((rc = sbxp_config_int(host, call, OSB_PROVIDER, "lifetime", 3600, 60, 86400 * 30,
                              &c->lifetime_s)) ||
        (rc = sbxp_config_int(host, call, OSB_PROVIDER, "ready_timeout_ms", 120000, 100, 3600000,
                              &c->ready_timeout_ms)) ||
        (rc = sbxp_http_config(host, call, OSB_PROVIDER, &c->request_timeout_ms,
                               &c->connect_timeout_ms, &c->retry)))
        return rc;
    if ((rc = sbxp_config_bool_env(host, call, OSB_PROVIDER, "use_server_proxy", PROXY_VAR, 0,
                                   &c->use_server_proxy)))
        return rc;
    const char *v = sbxp_config_get(host, "internet");
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
        sbxp_http_error err;
        if (sbxp_http_new(st->cfg.api_url, &st->api, &err) != SBX_OK)
            rc = host->set_error(host, call, SBX_E_CONFIG, "providers.opensandbox.api_url: %s",
                                 err.message);
    }
    if (rc != SBX_OK) {
        osb_fini(st);
        return rc;
    }
    st->ctl = (struct sbxp_api){st->api, host, st->key_header[0] ? st->key_header : NULL,
                                st->cfg.request_timeout_ms, st->cfg.connect_timeout_ms,
                                &st->cfg.retry};
    st->report = (struct sbxp_reporter){.who = OSB_PROVIDER, .service = "server",
                                        .key = st->cfg.key_source, .key_noun = "key"};
    *state = st;
    return SBX_OK;
}

void osb_fini(void *state)
{
    struct osb_state *st = state;
    if (!st)
        return;
    sbxp_http_free(st->api);
    conf_free(&st->cfg);
    volatile char *p = st->key_header;
    while (*p)
        *p++ = 0;
    free(st);
}

