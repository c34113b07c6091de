/* k8s_stack.c - see k8s_stack.h. */
#include "k8s_stack.h"
#include "../support/fake_request.h"
#include "../support/fake_spawn.h"

#include <curl/curl.h>
#include <json-c/json.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void copy(char *dst, size_t cap, json_object *o, const char *key)
{
    json_object *v;
    dst[0] = '\0';
    if (json_object_object_get_ex(o, key, &v))
        snprintf(dst, cap, "%s", json_object_get_string(v));
}

int k8s_stack_start(struct k8s_stack *k, const char *const *extra)
{
    memset(k, 0, sizeof *k);
    snprintf(k->dir, sizeof k->dir, "/tmp/sbx-k8s-XXXXXX");
    if (!mkdtemp(k->dir))
        return -1;
    char portfile[128], script[1024];
    snprintf(portfile, sizeof portfile, "%s/stack.json", k->dir);
    snprintf(script, sizeof script, "%s/tests/k8s/fake/fake_k8s.py", SBX_TEST_SOURCE_DIR);
    const char *argv[32] = {"python3", script, "--dir", k->dir, "--seed", "--port-file",
                            portfile};
    size_t n = 7;
    for (size_t i = 0; extra && extra[i] && n < 31; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    k->pid = fake_spawn_python(argv);
    if (k->pid < 0) {
        k->pid = 0;
        k8s_stack_stop(k);
        return -1;
    }
    for (int i = 0; i < 400; i++) {
        json_object *o = json_object_from_file(portfile);
        if (o) {
            copy(k->api, sizeof k->api, o, "api");
            copy(k->router, sizeof k->router, o, "router");
            copy(k->kubeconfig, sizeof k->kubeconfig, o, "kubeconfig");
            copy(k->ca, sizeof k->ca, o, "ca");
            copy(k->token, sizeof k->token, o, "token");
            json_object_put(o);
            if (k->api[0] && k->router[0])
                return 0;
        }
        int st;
        if (waitpid(k->pid, &st, WNOHANG) == k->pid) {
            k->pid = 0; /* it exited: grpcio or openssl missing */
            break;
        }
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
    k8s_stack_stop(k);
    return -1;
}

void k8s_stack_stop(struct k8s_stack *k)
{
    fake_reap(&k->pid, 5000);
    if (k->dir[0]) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", k->dir);
        if (system(cmd) != 0) {
            /* a leftover temporary directory is not a test failure */
        }
        k->dir[0] = '\0';
    }
}

char *k8s_stack_http(const struct k8s_stack *k, const char *method, const char *path,
                     const char *body, int auth, long *status)
{
    char hdr[400];
    snprintf(hdr, sizeof hdr, "Authorization: Bearer %s", k->token);
    return fake_request(k->api, method, path, body, auth ? hdr : NULL, k->ca, 20, status);
}

int k8s_stack_faults(const struct k8s_stack *k, const char *json)
{
    long st = 0;
    char *r = k8s_stack_http(k, "POST", "/_fake/faults", json, 0, &st);
    free(r);
    return r && st == 200 ? 0 : -1;
}

int k8s_stack_claims(const struct k8s_stack *k)
{
    long st = 0;
    char *r = k8s_stack_http(
        k, "GET", "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/default/sandboxclaims",
        NULL, 1, &st);
    if (!r || st != 200) {
        free(r);
        return -1;
    }
    json_object *o = json_tokener_parse(r), *items;
    free(r);
    int n = -1;
    if (o && json_object_object_get_ex(o, "items", &items))
        n = (int)json_object_array_length(items);
    json_object_put(o);
    return n;
}

void k8s_stack_yaml(const struct k8s_stack *k, const char *extra, char *buf, size_t cap)
{
    snprintf(buf, cap,
             "  k8s:\n    kubeconfig: \"%s\"\n    warm_pool: sandboxd-pool\n"
             "    router_url: \"%s\"\n    retries: 2\n%s",
             k->kubeconfig, k->router, extra ? extra : "");
}
