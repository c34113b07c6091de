/*
 * conf.c - configuration (section `k8s`), credentials and instance setup.
 *
 * The API server and its credentials come from one of:
 *  - a kubeconfig (providers.k8s.kubeconfig, else $KUBECONFIG's first file,
 *    else ~/.kube/config) and its context (providers.k8s.context, else
 *    current-context);
 *  - a service account's files (in_cluster: true): the token and CA below
 *    /var/run/secrets/kubernetes.io/serviceaccount, or token_file and
 *    ca_file, and the server from api_url or KUBERNETES_SERVICE_HOST/PORT.
 * Credentials never come from the YAML and never reach a message or log:
 * errors name the file they came from. A token file is read again when
 * the server answers 401 (projected tokens are rotated in place).
 */
#include "k8s.h"

#include "http_config.h"
#include "provider_config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"
#define TOKEN_MAX (64u * 1024u)
#define PEM_MAX (1024u * 1024u)

static void wipe_free(void *p, size_t n)
{
    if (p) {
        volatile unsigned char *v = p;
        for (size_t i = 0; i < n; i++)
            v[i] = 0;
    }
    free(p);
}

static void wipe_str(char *s)
{
    if (s)
        wipe_free(s, strlen(s));
}

static void conf_free(struct k8s_conf *c)
{
    free(c->api_url);
    wipe_str(c->token);
    free(c->token_file);
    free(c->token_source);
    free(c->ca_pem);
    free(c->cert_pem);
    wipe_free(c->key_pem, c->key_len);
    free(c->ns);
    free(c->pool);
    free(c->template_name);
    free(c->router_url);
    wipe_str(c->router_token);
    free(c->workspace);
    memset(c, 0, sizeof *c);
}

/* A token file's content without surrounding whitespace; NULL + errno. */
static char *read_token(const char *path)
{
    size_t len = 0;
    char *t = k8s_slurp(path, TOKEN_MAX, &len);
    if (!t)
        return NULL;
    size_t s = 0;
    while (s < len && (t[s] == ' ' || t[s] == '\n' || t[s] == '\r' || t[s] == '\t'))
        s++;
    while (len > s && (t[len - 1] == ' ' || t[len - 1] == '\n' || t[len - 1] == '\r' ||
                       t[len - 1] == '\t'))
        len--;
    memmove(t, t + s, len - s);
    t[len - s] = '\0';
    for (char *p = t; *p; p++)
        if ((unsigned char)*p < 0x21 || (unsigned char)*p > 0x7e) {
            wipe_str(t);
            errno = EINVAL; /* not a header-safe token */
            return NULL;
        }
    if (!*t) {
        free(t);
        errno = ENODATA;
        return NULL;
    }
    return t;
}

static int set_str(const struct sbx_host *host, sbx_call *call, char **dst, const char *v)
{
    free(*dst);
    *dst = v ? strdup(v) : NULL;
    if (v && !*dst)
        return host->set_error(host, call, SBX_E_NOMEM, "out of memory");
    return SBX_OK;
}

static int trim_url(const struct sbx_host *host, sbx_call *call, const char *key, char *url)
{
    if (strncmp(url, "http://", 7) && strncmp(url, "https://", 8))
        return host->set_error(host, call, SBX_E_CONFIG,
                               "providers.k8s.%s: want http(s)://host[:port], got \"%s\"", key,
                               url);
    size_t n = strlen(url);
    while (n && url[n - 1] == '/')
        url[--n] = '\0';
    return SBX_OK;
}

static int load_kubeconfig(const struct sbx_host *host, sbx_call *call, struct k8s_conf *c)
{
    const char *path = sbxp_config_get(host, "kubeconfig");
    char buf[4096];
    if (!path) {
        const char *env = getenv("KUBECONFIG");
        const char *home = getenv("HOME");
        if (env && *env) {
            size_t n = strcspn(env, ":");
            snprintf(buf, sizeof buf, "%.*s", (int)n, env);
        } else if (home && *home) {
            snprintf(buf, sizeof buf, "%s/.kube/config", home);
        } else {
            return host->set_error(host, call, SBX_E_CONFIG,
                                   "k8s: no kubeconfig: set providers.k8s.kubeconfig, "
                                   "KUBECONFIG or providers.k8s.in_cluster");
        }
        path = buf;
    }
    struct k8s_kubeconfig kc;
    char msg[1024];
    int rc = k8s_kubeconfig_load(path, sbxp_config_get(host, "context"), &kc, msg, sizeof msg);
    if (rc != SBX_OK)
        return host->set_error(host, call, rc, "k8s: %s", msg);
    char src[4400];
    snprintf(src, sizeof src, "the credentials of user \"%s\" in %s", kc.user ? kc.user : "?",
             path);
    c->api_url = kc.server;
    kc.server = NULL;
    if (!c->ns) {
        c->ns = kc.ns;
        kc.ns = NULL;
    }
    c->token = kc.token;
    kc.token = NULL;
    c->token_file = kc.token_file;
    kc.token_file = NULL;
    c->ca_pem = kc.ca_pem, c->ca_len = kc.ca_len;
    c->cert_pem = kc.cert_pem, c->cert_len = kc.cert_len;
    c->key_pem = kc.key_pem, c->key_len = kc.key_len;
    kc.ca_pem = kc.cert_pem = kc.key_pem = NULL;
    k8s_kubeconfig_free(&kc);
    if (c->token_file && !c->token) {
        c->token = read_token(c->token_file);
        if (!c->token)
            return host->set_error(host, call, SBX_E_CONFIG,
                                   "k8s: cannot read the tokenFile %s named in %s: %s",
                                   c->token_file, path, strerror(errno));
    }
    return set_str(host, call, &c->token_source, src);
}

static int load_in_cluster(const struct sbx_host *host, sbx_call *call, struct k8s_conf *c)
{
    const char *tf = sbxp_config_get(host, "token_file");
    const char *cf = sbxp_config_get(host, "ca_file");
    const char *url = sbxp_config_get(host, "api_url");
    char buf[512];
    if (!url) {
        const char *h = getenv("KUBERNETES_SERVICE_HOST");
        const char *p = getenv("KUBERNETES_SERVICE_PORT");
        if (!h || !*h)
            return host->set_error(host, call, SBX_E_CONFIG,
                                   "k8s: in_cluster without providers.k8s.api_url and "
                                   "without KUBERNETES_SERVICE_HOST (not in a pod?)");
        snprintf(buf, sizeof buf, strchr(h, ':') ? "https://[%s]:%s" : "https://%s:%s", h,
                 p && *p ? p : "443");
        url = buf;
    }
    int rc = set_str(host, call, &c->api_url, url);
    if (rc == SBX_OK)
        rc = set_str(host, call, &c->token_file, tf ? tf : SA_DIR "/token");
    if (rc != SBX_OK)
        return rc;
    c->token = read_token(c->token_file);
    if (!c->token)
        return host->set_error(host, call, SBX_E_CONFIG,
                               "k8s: cannot read the service account token %s: %s",
                               c->token_file, strerror(errno));
    char src[700];
    snprintf(src, sizeof src, "the token in %s", c->token_file);
    if ((rc = set_str(host, call, &c->token_source, src)) != SBX_OK)
        return rc;
    const char *ca = cf ? cf : SA_DIR "/ca.crt";
    if (strncmp(c->api_url, "https://", 8) == 0) {
        c->ca_pem = k8s_slurp(ca, PEM_MAX, &c->ca_len);
        if (!c->ca_pem)
            return host->set_error(host, call, SBX_E_CONFIG,
                                   "k8s: cannot read the cluster CA %s: %s", ca,
                                   strerror(errno));
    }
    if (!c->ns) {
        /* the namespace file beside the token (a pod's serviceaccount/) */
        char nsfile[4200];
        const char *slash = strrchr(c->token_file, '/');
        snprintf(nsfile, sizeof nsfile, "%.*s/namespace",
                 slash ? (int)(slash - c->token_file) : 1, slash ? c->token_file : ".");
        char *ns = k8s_slurp(nsfile, 256, NULL);
        if (ns) {
            ns[strcspn(ns, " \r\n\t")] = '\0';
            c->ns = ns;
        }
    }
    return SBX_OK;
}

/* A DNS-1123 label: what namespaces, pools and templates are named. */
static int dns_label(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 63 || s[0] == '-' || s[n - 1] == '-')
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
            return 0;
    return 1;
}

static int load(const struct sbx_host *host, sbx_call *call, struct k8s_conf *c)
{
    int rc;
    const char *ns = sbxp_config_get(host, "namespace");
    if (ns && (rc = set_str(host, call, &c->ns, ns)) != SBX_OK)
        return rc;
    const char *ic = sbxp_config_get(host, "in_cluster");
    if (ic && strcmp(ic, "true") == 0) {
        rc = load_in_cluster(host, call, c);
    } else {
        if (sbxp_config_get(host, "token_file") || sbxp_config_get(host, "ca_file"))
            return host->set_error(host, call, SBX_E_CONFIG,
                                   "providers.k8s.token_file and ca_file go with in_cluster: "
                                   "true (a kubeconfig names its own)");
        rc = load_kubeconfig(host, call, c);
        const char *url = sbxp_config_get(host, "api_url");
        if (rc == SBX_OK && url)
            rc = set_str(host, call, &c->api_url, url);
    }
    if (rc != SBX_OK)
        return rc;
    if ((rc = trim_url(host, call, "api_url", c->api_url)) != SBX_OK)
        return rc;
    if (!c->ns && (rc = set_str(host, call, &c->ns, "default")) != SBX_OK)
        return rc;
    if (!dns_label(c->ns))
        return host->set_error(host, call, SBX_E_CONFIG,
                               "k8s: namespace \"%s\" is not a DNS-1123 label", c->ns);

    const char *pool = sbxp_config_get(host, "warm_pool");
    const char *tpl = sbxp_config_get(host, "template");
    if (pool && tpl)
        return host->set_error(host, call, SBX_E_CONFIG,
                               "providers.k8s: set warm_pool (claim mode) or template, not both");
    if (!pool && !tpl)
        return host->set_error(host, call, SBX_E_CONFIG,
                               "providers.k8s: set warm_pool (a SandboxWarmPool to claim from) "
                               "or template (a SandboxTemplate)");
    const char *which = pool ? pool : tpl;
    if (!dns_label(which))
        return host->set_error(host, call, SBX_E_CONFIG,
                               "providers.k8s.%s: \"%s\" is not a DNS-1123 label",
                               pool ? "warm_pool" : "template", which);
    c->kind = pool ? K8S_CLAIM : K8S_SANDBOX;
    if ((rc = set_str(host, call, pool ? &c->pool : &c->template_name, which)) != SBX_OK)
        return rc;

    const char *router = sbxp_config_get(host, "router_url");
    if (!router)
        return host->set_error(host, call, SBX_E_CONFIG,
                               "providers.k8s.router_url is not set (the sandbox-router's "
                               "address, e.g. http://sandbox-router-svc:8080)");
    if ((rc = set_str(host, call, &c->router_url, router)) != SBX_OK ||
        (rc = trim_url(host, call, "router_url", c->router_url)) != SBX_OK)
        return rc;
    const char *rtf = sbxp_config_get(host, "router_token_file");
    if (rtf) {
        c->router_token = read_token(rtf);
        if (!c->router_token)
            return host->set_error(host, call, SBX_E_CONFIG,
                                   "k8s: cannot read providers.k8s.router_token_file %s: %s",
                                   rtf, strerror(errno));
    }
    const char *ws = sbxp_config_get(host, "workspace");
    if (ws && ws[0] != '/')
        return host->set_error(host, call, SBX_E_CONFIG,
                               "providers.k8s.workspace must be absolute, got \"%s\"", ws);
    if (ws && (rc = set_str(host, call, &c->workspace, ws)) != SBX_OK)
        return rc;

    int64_t v;
    if ((rc = sbxp_config_int(host, call, "k8s", "grpc_port", 9090, 1, 65535, &v)) != SBX_OK)
        return rc;
    c->grpc_port = (int)v;
    if ((rc = sbxp_config_int(host, call, "k8s", "rest_port", 8080, 1, 65535, &v)) != SBX_OK)
        return rc;
    c->rest_port = (int)v;
    if ((rc = sbxp_config_int(host, call, "k8s", "shutdown_after", 86400, 0, 366 * 86400,
                              &c->shutdown_after_s)) != SBX_OK)
        return rc;
    if ((rc = sbxp_config_int(host, call, "k8s", "ready_timeout_ms", 120000, 100, 3600000,
                              &c->ready_timeout_ms)) != SBX_OK)
        return rc;
    if ((rc = sbxp_config_int(host, call, "k8s", "exec_grace_ms", 5000, 100, 600000,
                              &c->exec_grace_ms)) != SBX_OK)
        return rc;
    return sbxp_http_config(host, call, "k8s", &c->request_timeout_ms, &c->connect_timeout_ms,
                            &c->retry);
}

static char *bearer(const char *token)
{
    if (!token)
        return NULL;
    size_t n = strlen(token) + 32;
    char *h = malloc(n);
    if (h)
        snprintf(h, n, "Authorization: Bearer %s", token);
    return h;
}

char *k8s_auth_header(struct k8s_state *st)
{
    pthread_mutex_lock(&st->lock);
    char *h = st->auth ? strdup(st->auth) : NULL;
    pthread_mutex_unlock(&st->lock);
    return h;
}

int k8s_auth_reload(struct k8s_state *st)
{
    if (!st->cfg.token_file)
        return 0;
    char *t = read_token(st->cfg.token_file);
    if (!t)
        return 0;
    int changed = 0;
    pthread_mutex_lock(&st->lock);
    if (!st->cfg.token || strcmp(t, st->cfg.token) != 0) {
        char *h = bearer(t);
        if (h) {
            wipe_str(st->auth);
            st->auth = h;
            wipe_str(st->cfg.token);
            st->cfg.token = t;
            t = NULL;
            changed = 1;
        }
    }
    pthread_mutex_unlock(&st->lock);
    wipe_str(t);
    return changed;
}

void k8s_fini(void *state)
{
    struct k8s_state *st = state;
    if (!st)
        return;
    sbxp_http_free(st->api);
    sbxp_http_free(st->grpc);
    sbxp_http_free(st->rest);
    wipe_str(st->auth);
    wipe_str(st->router_auth);
    conf_free(&st->cfg);
    pthread_mutex_destroy(&st->lock);
    free(st);
}

int k8s_init(const struct sbx_host *host, sbx_call *call, void **state)
{
    *state = NULL;
    struct k8s_state *st = calloc(1, sizeof *st);
    if (!st)
        return host->set_error(host, call, SBX_E_NOMEM, "out of memory");
    st->host = host;
    pthread_mutex_init(&st->lock, NULL);
    int rc = load(host, call, &st->cfg);
    sbxp_http_error err;
    if (rc == SBX_OK && sbxp_http_new(st->cfg.api_url, &st->api, &err) != SBX_OK)
        rc = host->set_error(host, call, SBX_E_CONFIG, "k8s: API server: %s", err.message);
    if (rc == SBX_OK) {
        struct sbxp_http_options o = {0};
        o.ca_pem = st->cfg.ca_pem, o.ca_pem_len = st->cfg.ca_len;
        o.cert_pem = st->cfg.cert_pem, o.cert_pem_len = st->cfg.cert_len;
        o.key_pem = st->cfg.key_pem, o.key_pem_len = st->cfg.key_len;
        if (sbxp_http_set_options(st->api, &o, &err) != SBX_OK)
            rc = host->set_error(host, call, err.status, "k8s: %s", err.message);
    }
    if (rc == SBX_OK && (sbxp_http_new(st->cfg.router_url, &st->grpc, &err) != SBX_OK ||
                         sbxp_http_new(st->cfg.router_url, &st->rest, &err) != SBX_OK))
        rc = host->set_error(host, call, SBX_E_CONFIG, "k8s: router: %s", err.message);
    if (rc == SBX_OK) {
        struct sbxp_http_options o = {0};
        o.http2 = 1;
        if (sbxp_http_set_options(st->grpc, &o, &err) != SBX_OK)
            rc = host->set_error(host, call, err.status, "k8s: %s", err.message);
    }
    if (rc == SBX_OK) {
        st->auth = bearer(st->cfg.token);
        st->router_auth = bearer(st->cfg.router_token);
        if ((st->cfg.token && !st->auth) || (st->cfg.router_token && !st->router_auth))
            rc = host->set_error(host, call, SBX_E_NOMEM, "out of memory");
    }
    if (rc != SBX_OK) {
        k8s_fini(st);
        return rc;
    }
    *state = st;
    return SBX_OK;
}
