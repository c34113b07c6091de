/*
 * harness.h - drives the `local` provider directly through its ABI: the
 * plugin is dlopen'ed from the build tree and given a small host table
 * implemented here, so these tests depend on nothing but the plugin.
 */
#ifndef SBX_TEST_LOCAL_HARNESS_H
#define SBX_TEST_LOCAL_HARNESS_H

#include <sbx/provider.h>

#include <stddef.h>

/* The per-call context the test host gives the provider. */
struct sbx_call {
    int status;         /* last status passed to set_error */
    char msg[2048];     /* last message passed to set_error */
    int cancel_rd;      /* returned by cancel_fd() */
    int cancel_wr;      /* write a byte here to cancel through the fd */
    volatile int flag;  /* returned by cancelled() */
};

/* A host table with its configuration (providers.local.root). */
struct test_host {
    struct sbx_host host;
    const char *root; /* NULL: key absent */
    /* the process keys, NULL: absent */
    const char *process_buffer, *supervisor_idle_ms, *supervisor_path;
    const char *supervisor_timeout_ms;
};

/* Everything a test works with; filled by harness_setup(). */
struct harness {
    char tmp[256];     /* private temporary directory */
    char root[300];    /* tmp/root: the configured provider root */
    char outside[300]; /* tmp/outside: must never be written by the plugin */
    const struct sbx_provider_desc *desc;
    const struct sbx_provider_ops *ops;
    struct test_host th;
    void *state;       /* instance configured with root */
    sbx_call call;
    sbx_sandbox *sb;   /* workspace of H_KEY, created by setup */
    char ref[SBX_REF_MAX];    /* the key hash: the workspace's name */
    char ws[300 + 80];         /* the workspace: <root>/<key hash> */
};

#define H_KEY "session-one"

extern struct harness H;

/* Criterion init/fini: fresh tmp dir, plugin instance and workspace. */
void harness_setup(void);
void harness_teardown(void);

/* The plugin's descriptor (dlopen'ed once). */
const struct sbx_provider_desc *harness_desc(void);

/* A test host whose root key is `root` (NULL: no key). */
void harness_host_init(struct test_host *th, const char *root);

/* Reset a call context (keeps its cancel pipe, creating it once). */
void harness_call_init(sbx_call *call);
void harness_call_close(sbx_call *call);

/* Lowercase hex SHA-256 of key into out[65]. */
void harness_key_hash(const char *key, char out[SBX_KEY_HASH_LEN + 1]);

/* Create args for a session key (hash computed). */
struct create_args_buf {
    struct sbx_create_args args;
    char hash[SBX_KEY_HASH_LEN + 1];
};
const struct sbx_create_args *harness_create_args(struct create_args_buf *b,
                                                  const char *key);

/* A sink collecting everything into a growing buffer; when limit is
 * nonzero it returns fail_status once more than `limit` bytes arrived. */
struct buf_sink {
    unsigned char *data;
    size_t len, cap;
    size_t limit;
    int fail_status;
    size_t calls;
};
struct sbx_sink buf_sink(struct buf_sink *b);
void buf_sink_free(struct buf_sink *b);
/* NUL-terminated copy view (data is kept NUL-terminated). */
const char *buf_sink_str(const struct buf_sink *b);

/* A source over memory handing out at most `chunk` bytes per read; when
 * fail_at is nonzero, read fails (-1, setting the call error) once `pos`
 * reaches it. */
struct mem_source {
    const unsigned char *data;
    size_t len, pos, chunk, fail_at;
    sbx_call *call; /* for the error of a failing read */
};
struct sbx_source mem_source(struct mem_source *m);

/* Run argv in H.sb with optional env/cwd/stdin/timeout; output collected. */
struct run_result {
    int rc;
    struct sbx_exec_result res;
    struct buf_sink out, err;
    double seconds;
};
void run_cmd(struct run_result *r, const char *const *argv,
             const char *const *env, const char *cwd,
             const struct sbx_source *in, long long timeout_ms);
void run_result_free(struct run_result *r);

/* Write/read whole files through the plugin. */
int put_file(const char *path, const void *data, size_t len, unsigned mode);
int get_file(const char *path, struct buf_sink *out);

/* Paths: tmp-relative helpers. */
void path_join(char *out, size_t cap, const char *a, const char *b);

/* Nonzero when pid is gone or a zombie (dead but not reaped by its
 * parent), waiting up to 2 s for a SIGKILLed process to finish dying. */
int process_gone(int pid);

/* Monotonic seconds. */
double now_seconds(void);

/* Read a small host file (outside the plugin) into buf; -1 on error. */
long slurp_small(const char *path, char *buf, size_t cap);

#endif
