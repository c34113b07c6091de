/*
 * k8s_stack.h - start tests/k8s/fake/fake_k8s.py (the fake API server,
 * controller, sandbox-router and sandboxds; tests/k8s/fake/README.md) for a
 * test of the k8s provider, talk to its control endpoints, and write the
 * provider's configuration for it.
 */
#ifndef SBX_TEST_K8S_STACK_H
#define SBX_TEST_K8S_STACK_H

#include <stddef.h>
#include <sys/types.h>

struct k8s_stack {
    pid_t pid;
    char dir[64];          /* --dir: kubeconfig, certificate, pods/ */
    char api[128];         /* https://127.0.0.1:P */
    char router[128];      /* http://127.0.0.1:Q */
    char kubeconfig[256];
    char ca[256];
    char token[256];
};

/* Start it with --seed plus extra arguments (NULL-terminated, may be
 * NULL); 0, or -1 (python3, grpcio or openssl missing; not up in 20 s). */
int k8s_stack_start(struct k8s_stack *k, const char *const *extra);

/* SIGTERM, wait, remove the directory. */
void k8s_stack_stop(struct k8s_stack *k);

/* A request to the API server (its CA verified): method, path, JSON body
 * (may be NULL), with the stack's token when auth is nonzero. The body of
 * the answer, malloc'd, and *status; NULL on a transport failure. */
char *k8s_stack_http(const struct k8s_stack *k, const char *method, const char *path,
                     const char *body, int auth, long *status);

/* Arm fault rules (a JSON array, tests/k8s/fake/README.md "Faults"). */
int k8s_stack_faults(const struct k8s_stack *k, const char *json);

/* The number of SandboxClaims in namespace default (-1 on failure). */
int k8s_stack_claims(const struct k8s_stack *k);

/* The provider's YAML section ("  k8s:\n    ...") into buf, with extra
 * lines (each "    key: value\n") appended. */
void k8s_stack_yaml(const struct k8s_stack *k, const char *extra, char *buf, size_t cap);

#endif
