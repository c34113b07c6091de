/*
 * harness.h - drives the docker provider through the plugin ABI with a
 * small host table of its own (no libsbx), against the real daemon named by
 * SBX_TEST_DOCKER_HOST with the image SBX_TEST_DOCKER_IMAGE.
 */
#ifndef SBX_TEST_DOCKER_HARNESS_H
#define SBX_TEST_DOCKER_HARNESS_H

#include <sbx/provider.h>

#include <stddef.h>
#include <stdint.h>

/* The per-call context the provider sees as sbx_call. */
struct sbx_call {
    int status;
    char message[2048];
    volatile int cancelled;
    int cancel_pipe[2];
    const char *user; /* what host->call_user answers (NULL: the default) */
};

/* One provider instance with its configuration. */
struct dh {
    const struct sbx_provider_desc *desc;
    const struct sbx_provider_ops *ops;
    struct sbx_host host;
    void *state;
    char host_uri[512];
    char image[256];
    char resource_dir[256];
    const char *extra_keys[16]; /* key, value pairs, NULL-terminated */
};

/* Skip the calling test unless a daemon was provided. */
void dh_require_daemon(void);

/* Load docker.so (once) and init an instance for the test daemon, or the
 * daemon at host_uri when not NULL. extra: NULL-terminated key/value pairs
 * of further config. Fails the test on error. */
void dh_open(struct dh *h, const char *host_uri, const char *const *extra);
/* Like dh_open but returns init's status and message instead of failing. */
int dh_try_open(struct dh *h, const char *host_uri, const char *const *extra,
                char *msg, size_t cap);
void dh_close(struct dh *h);

void dh_call_init(struct sbx_call *c);
void dh_call_free(struct sbx_call *c);
void dh_call_cancel(struct sbx_call *c);

/* A fresh random session key and its hash. */
void dh_new_key(char key[64], char hash[SBX_KEY_HASH_LEN + 1]);
void dh_hash(const char *key, char hash[SBX_KEY_HASH_LEN + 1]);

/* create with a key and spec hash, asserting nothing: the status, *sb
 * (NULL on failure) and the call's message in msg[cap] (may be NULL). */
int dh_create_status(struct dh *h, const char *key, const char *spec_hash,
                     char ref[SBX_REF_MAX], sbx_sandbox **sb, char *msg, size_t cap);
/* create with a key; asserts success; ref receives the reference. */
sbx_sandbox *dh_create(struct dh *h, const char *key, char ref[SBX_REF_MAX]);
/* destroy, asserting success. */
void dh_destroy(struct dh *h, const char *key, const char *ref);

/* The per-test sandbox most suites use: skip without a daemon, open the
 * provider, create a sandbox under a fresh key (dh_sandbox_setup); release
 * and destroy it and close the provider (dh_sandbox_teardown, which
 * tolerates a setup that stopped early). */
void dh_sandbox_setup(struct dh *h, char key[64], char hash[SBX_KEY_HASH_LEN + 1],
                      char ref[SBX_REF_MAX], sbx_sandbox **sb);
void dh_sandbox_teardown(struct dh *h, const char *key, const char *ref,
                         sbx_sandbox *sb);

/* Growing buffer used as an output sink. */
struct dh_buf {
    char *data;
    size_t len, cap;
};
struct sbx_sink dh_buf_sink(struct dh_buf *b);
void dh_buf_free(struct dh_buf *b);

/* A memory source. */
struct dh_mem {
    const char *data;
    size_t len, pos;
};
struct sbx_source dh_mem_source(struct dh_mem *m);

/* Run argv; out/err collected; returns the op status. */
int dh_exec(struct dh *h, sbx_sandbox *sb, const char *const *argv,
            const char *stdin_text, int64_t timeout_ms, struct dh_buf *out,
            struct dh_buf *err, struct sbx_exec_result *res, struct sbx_call *call);
/* sh -c script: asserts status OK and exit 0; returns stdout (free it). */
char *dh_sh(struct dh *h, sbx_sandbox *sb, const char *script);

int dh_write(struct dh *h, sbx_sandbox *sb, const char *path, const void *data,
             size_t len, unsigned mode, struct sbx_call *call);
int dh_read(struct dh *h, sbx_sandbox *sb, const char *path, struct dh_buf *out,
            struct sbx_call *call);

/* Raw Engine API request against host_uri (for setup and inspection):
 * returns the HTTP status, body (may be NULL) receives the response. */
long dh_api(const char *host_uri, const char *method, const char *path,
            const char *json_body, struct dh_buf *body);

/* attach to (key, ref) on h; returns the status (message into msg). */
int dh_attach(struct dh *h, const char *key, const char *ref, sbx_sandbox **out,
              char *msg, size_t cap);

/* The processes of the sandbox whose command line matches the extended
 * regular expression `ere` (zombies excluded), as `ps -o pid,stat,args`
 * lines; "" when none. Asserts that the listing itself ran. Write the
 * pattern so that it does not match itself (e.g. "slee[p] 3601"). */
char *dh_procs(struct dh *h, sbx_sandbox *sb, const char *ere);

/* Milliseconds on the monotonic clock. */
double dh_now(void);

/* A time bound's slack (what a test allows beyond a deadline it set, or
 * for a cancel to be answered), in milliseconds, times
 * SBX_CONFORMANCE_TIME_SCALE (1 to 10, default 1), as the conformance
 * suite's bounds: a loaded machine or a sanitizer build stretches it,
 * never shrinks it. */
double dh_slack(double ms);

/* Run a shell command on the test host; returns its exit status. */
int dh_system(const char *fmt, ...) SBX_PRINTF_LIKE(1, 2);

#endif
