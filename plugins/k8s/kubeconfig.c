/*
 * kubeconfig.c - the part of a kubeconfig file (clusters, contexts, users)
 * that names an API server and its credentials, read with libyaml's
 * document API. Supported: server, certificate-authority(-data),
 * client-certificate(-data), client-key(-data), token, tokenFile, the
 * context's namespace. Refused with a clear message: exec and
 * auth-provider plugins (they run programs), username/password, and
 * insecure-skip-tls-verify. Messages name the file and the entry, never a
 * credential.
 */
#include "k8s.h"

#include "base64.h"

#include <yaml.h>

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A kubeconfig or a file it names is small; bound what we read. */
#define KC_FILE_MAX (4u * 1024u * 1024u)

char *k8s_slurp(const char *path, size_t max, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return NULL;
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size > max) {
        close(fd);
        errno = EINVAL;
        return NULL;
    }
    char *buf = malloc((size_t)sb.st_size + 1);
    if (!buf) {
        close(fd);
        return NULL;
    }
    size_t got = 0;
    while (got < (size_t)sb.st_size) {
        ssize_t n = read(fd, buf + got, (size_t)sb.st_size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    buf[got] = '\0';
    if (len)
        *len = got;
    return buf;
}

/* ---- the YAML tree ------------------------------------------------------ */

static yaml_node_t *map_get(yaml_document_t *d, yaml_node_t *m, const char *key)
{
    if (!m || m->type != YAML_MAPPING_NODE)
        return NULL;
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = yaml_document_get_node(d, p->key);
        if (k && k->type == YAML_SCALAR_NODE && strlen(key) == k->data.scalar.length &&
            memcmp(k->data.scalar.value, key, k->data.scalar.length) == 0)
            return yaml_document_get_node(d, p->value);
    }
    return NULL;
}

/* A scalar member as a malloc'd string, NULL when absent or not a scalar. */
static char *map_str(yaml_document_t *d, yaml_node_t *m, const char *key)
{
    yaml_node_t *v = map_get(d, m, key);
    if (!v || v->type != YAML_SCALAR_NODE)
        return NULL;
    return strndup((const char *)v->data.scalar.value, v->data.scalar.length);
}

/* The `inner` mapping of the entry of list `list` whose name is name
 * (clusters: name + cluster, contexts: name + context, users: name + user). */
static yaml_node_t *named(yaml_document_t *d, yaml_node_t *root, const char *list,
                          const char *name, const char *inner)
{
    yaml_node_t *l = map_get(d, root, list);
    if (!l || l->type != YAML_SEQUENCE_NODE)
        return NULL;
    for (yaml_node_item_t *it = l->data.sequence.items.start; it < l->data.sequence.items.top;
         it++) {
        yaml_node_t *e = yaml_document_get_node(d, *it);
        yaml_node_t *n = map_get(d, e, "name");
        if (n && n->type == YAML_SCALAR_NODE && strlen(name) == n->data.scalar.length &&
            memcmp(n->data.scalar.value, name, n->data.scalar.length) == 0)
            return map_get(d, e, inner);
    }
    return NULL;
}

/* A relative file name in a kubeconfig is relative to the file's directory. */
static char *resolve_rel(const char *kcpath, const char *file)
{
    if (file[0] == '/')
        return strdup(file);
    char *dup = strdup(kcpath);
    if (!dup)
        return NULL;
    const char *dir = dirname(dup);
    size_t n = strlen(dir) + strlen(file) + 2;
    char *out = malloc(n);
    if (out)
        snprintf(out, n, "%s/%s", dir, file);
    free(dup);
    return out;
}

/* member "<what>-data" (base64) or "<what>" (a file): *out, *len. */
static int blob(yaml_document_t *d, yaml_node_t *m, const char *kcpath, const char *what,
                const char *entry, void **out, size_t *len, char *msg, size_t cap)
{
    char key[64];
    snprintf(key, sizeof key, "%s-data", what);
    char *data = map_str(d, m, key);
    if (data) {
        size_t n = strlen(data);
        unsigned char *dec = malloc(3 * (n / 4) + 4);
        long got = dec ? sbxp_b64_decode(data, n, dec) : -1;
        free(data);
        if (got < 0) {
            free(dec);
            snprintf(msg, cap, "%s: %s: %s is not valid base64", kcpath, entry, key);
            return SBX_E_CONFIG;
        }
        dec[got] = '\0';
        *out = dec;
        *len = (size_t)got;
        return SBX_OK;
    }
    char *file = map_str(d, m, what);
    if (!file)
        return SBX_OK;
    char *path = resolve_rel(kcpath, file);
    free(file);
    if (!path) {
        snprintf(msg, cap, "out of memory");
        return SBX_E_NOMEM;
    }
    *out = k8s_slurp(path, KC_FILE_MAX, len);
    if (!*out) {
        snprintf(msg, cap, "%s: %s: cannot read %s %s: %s", kcpath, entry, what, path,
                 strerror(errno));
        free(path);
        return SBX_E_CONFIG;
    }
    free(path);
    return SBX_OK;
}

void k8s_kubeconfig_free(struct k8s_kubeconfig *kc)
{
    free(kc->server);
    free(kc->ns);
    free(kc->user);
    if (kc->token)
        memset(kc->token, 0, strlen(kc->token));
    free(kc->token);
    free(kc->token_file);
    free(kc->ca_pem);
    free(kc->cert_pem);
    if (kc->key_pem)
        memset(kc->key_pem, 0, kc->key_len);
    free(kc->key_pem);
    memset(kc, 0, sizeof *kc);
}

int k8s_kubeconfig_load(const char *path, const char *context, struct k8s_kubeconfig *out,
                        char *msg, size_t cap)
{
    memset(out, 0, sizeof *out);
    size_t len = 0;
    char *text = k8s_slurp(path, KC_FILE_MAX, &len);
    if (!text) {
        snprintf(msg, cap, "cannot read the kubeconfig %s: %s", path, strerror(errno));
        return SBX_E_CONFIG;
    }
    yaml_parser_t p;
    yaml_document_t d;
    if (!yaml_parser_initialize(&p)) {
        free(text);
        snprintf(msg, cap, "out of memory");
        return SBX_E_NOMEM;
    }
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    int ok = yaml_parser_load(&p, &d);
    int rc = SBX_E_CONFIG;
    if (!ok) {
        snprintf(msg, cap, "the kubeconfig %s is not valid YAML (line %zu: %s)", path,
                 p.problem_mark.line + 1, p.problem ? p.problem : "?");
        yaml_parser_delete(&p);
        memset(text, 0, len);
        free(text);
        return SBX_E_CONFIG;
    }
    yaml_node_t *root = yaml_document_get_root_node(&d);
    char *ctxname = context && *context ? strdup(context) : map_str(&d, root, "current-context");
    yaml_node_t *ctx = NULL, *cluster = NULL, *user = NULL;
    char *cname = NULL;
    if (!root || root->type != YAML_MAPPING_NODE) {
        snprintf(msg, cap, "the kubeconfig %s is not a mapping", path);
        goto out;
    }
    if (!ctxname) {
        snprintf(msg, cap, "the kubeconfig %s has no current-context: set providers.k8s.context",
                 path);
        goto out;
    }
    ctx = named(&d, root, "contexts", ctxname, "context");
    if (!ctx) {
        snprintf(msg, cap, "the kubeconfig %s has no context \"%s\"", path, ctxname);
        goto out;
    }
    cname = map_str(&d, ctx, "cluster");
    out->user = map_str(&d, ctx, "user");
    out->ns = map_str(&d, ctx, "namespace");
    cluster = cname ? named(&d, root, "clusters", cname, "cluster") : NULL;
    if (!cluster) {
        snprintf(msg, cap, "the kubeconfig %s: context \"%s\" names no known cluster", path,
                 ctxname);
        goto out;
    }
    out->server = map_str(&d, cluster, "server");
    if (!out->server) {
        snprintf(msg, cap, "the kubeconfig %s: cluster \"%s\" has no server", path, cname);
        goto out;
    }
    char *insecure = map_str(&d, cluster, "insecure-skip-tls-verify");
    int skip = insecure && strcmp(insecure, "true") == 0;
    free(insecure);
    if (skip) {
        snprintf(msg, cap,
                 "the kubeconfig %s: cluster \"%s\" sets insecure-skip-tls-verify, which the "
                 "k8s provider refuses: give its certificate-authority instead",
                 path, cname);
        goto out;
    }
    char entry[300];
    snprintf(entry, sizeof entry, "cluster \"%s\"", cname);
    rc = blob(&d, cluster, path, "certificate-authority", entry, &out->ca_pem, &out->ca_len,
              msg, cap);
    if (rc != SBX_OK)
        goto out;
    rc = SBX_E_CONFIG;
    user = out->user ? named(&d, root, "users", out->user, "user") : NULL;
    if (user) {
        if (map_get(&d, user, "exec") || map_get(&d, user, "auth-provider")) {
            snprintf(msg, cap,
                     "the kubeconfig %s: user \"%s\" uses an exec or auth-provider plugin, "
                     "which the k8s provider does not run: use a token, a tokenFile or a "
                     "client certificate",
                     path, out->user);
            goto out;
        }
        if (map_get(&d, user, "username") || map_get(&d, user, "password")) {
            snprintf(msg, cap,
                     "the kubeconfig %s: user \"%s\" uses basic authentication, which the "
                     "k8s provider does not support",
                     path, out->user);
            goto out;
        }
        snprintf(entry, sizeof entry, "user \"%s\"", out->user);
        out->token = map_str(&d, user, "token");
        char *tf = map_str(&d, user, "tokenFile");
        if (tf) {
            out->token_file = resolve_rel(path, tf);
            free(tf);
        }
        rc = blob(&d, user, path, "client-certificate", entry, &out->cert_pem, &out->cert_len,
                  msg, cap);
        if (rc == SBX_OK)
            rc = blob(&d, user, path, "client-key", entry, &out->key_pem, &out->key_len, msg,
                      cap);
        if (rc != SBX_OK)
            goto out;
        rc = SBX_E_CONFIG;
        if (!out->cert_pem != !out->key_pem) {
            snprintf(msg, cap, "the kubeconfig %s: user \"%s\" has a client certificate "
                               "without its key, or a key without its certificate",
                     path, out->user);
            goto out;
        }
    }
    rc = SBX_OK;
out:
    if (rc != SBX_OK)
        k8s_kubeconfig_free(out);
    free(cname);
    free(ctxname);
    yaml_document_delete(&d);
    yaml_parser_delete(&p);
    memset(text, 0, len); /* it may hold tokens and keys */
    free(text);
    return rc;
}
