/*
 * fake_service.h - start and stop tests/e2b/fake_e2b.py (the fake E2B
 * control plane + envd, or CubeAPI + CubeProxy) on loopback for a test.
 */
#ifndef SBX_TEST_FAKE_SERVICE_H
#define SBX_TEST_FAKE_SERVICE_H

#include <sys/types.h>

struct fake_service {
    pid_t pid;
    int port;
    char dir[64];     /* private temporary directory (sandboxes, port file) */
    char url[64];     /* http://127.0.0.1:<port> */
};

/* Start the fake in `mode` ("e2b" or "cube"); api_key may be NULL (no
 * auth). Returns 0, or -1 (python3 missing, no port within 10 s). */
int fake_start(struct fake_service *f, const char *mode, const char *api_key);

/* Start another fake of the same family (script relative to the source
 * tree, e.g. "tests/opensandbox/fake_opensandbox.py"); mode NULL passes
 * none. */
int fake_start_script(struct fake_service *f, const char *script_rel, const char *mode,
                      const char *api_key);

/* Stop it (SIGTERM, then SIGKILL) and remove its directory. */
void fake_stop(struct fake_service *f);

/*
 * One request to the fake's control endpoints or API with curl's easy
 * interface: method, path, JSON body (may be NULL), extra header line (may
 * be NULL). The response body is returned malloc'd (NUL-terminated) and
 * the status stored in *status. NULL on transport failure.
 */
char *fake_http(const struct fake_service *f, const char *method, const char *path,
                const char *body, const char *header, long *status);

/* Install faults: a JSON array as described in fake_e2b.py. 0 or -1. */
int fake_faults(const struct fake_service *f, const char *json);

/* GET /_fake/stats (the connection count and the request log), malloc'd;
 * aborts the test when the fake does not answer. */
char *fake_stats(const struct fake_service *f);

/* POST /_fake/reset: forget faults and the request log. */
void fake_reset(const struct fake_service *f);

#endif
