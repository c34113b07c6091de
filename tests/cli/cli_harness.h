/*
 * cli_harness.h - run the built `sbx` binary from tests with a controlled
 * environment and collect its output and exit status.
 *
 * Every test gets a private temporary directory holding HOME, the
 * XDG_STATE_HOME, an optional sbx.yaml and a workspace root for the local
 * provider. The child sees only the variables set here (plus ASAN_OPTIONS /
 * UBSAN_OPTIONS), so neither the developer's environment nor the system
 * configuration leaks into a test.
 */
#ifndef SBX_TEST_CLI_HARNESS_H
#define SBX_TEST_CLI_HARNESS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* The binary under test. */
#define CLI_SBX_BIN SBX_TEST_BUILD_DIR "/bin/sbx"
/* Fixture plugins built by tests/loader (good, major, initfail, ...). */
#define CLI_FIXTURE_DIR SBX_TEST_BUILD_DIR "/fixture-plugins"

struct cli_env {
    char dir[PATH_MAX];     /* the private temporary directory */
    char home[PATH_MAX];    /* $HOME */
    char state[PATH_MAX];   /* $XDG_STATE_HOME */
    char ws_root[PATH_MAX]; /* providers.local.root in the written config */
    char config[PATH_MAX];  /* the config file, "" when SBX_CONFIG is unset */
    char plugin_path[2 * PATH_MAX]; /* $SBX_PLUGIN_PATH */
    char extra[4][PATH_MAX];        /* more "NAME=value" (cli_env_setenv) */
    size_t nextra;
};

/* Create the temporary directory; SBX_PLUGIN_PATH is the build-tree
 * provider directory and SBX_CONFIG is unset until a config is written. */
void cli_env_init(struct cli_env *e);

/* Write `yaml` to <dir>/sbx.yaml and point SBX_CONFIG at it. The text may
 * contain "@ROOT@", replaced by ws_root. */
void cli_env_write_config(struct cli_env *e, const char *yaml);

/* The usual configuration: only the local provider, rooted at ws_root. */
void cli_env_local_config(struct cli_env *e);

/* Append the fixture plugin directory to SBX_PLUGIN_PATH. */
void cli_env_add_fixtures(struct cli_env *e);

/* Skip the calling test unless SBX_TEST_DOCKER_HOST is set; else write a
 * configuration with `head` (top-level YAML, may be NULL) and the docker
 * provider as the default, on that daemon and SBX_TEST_DOCKER_IMAGE
 * (default sbx-test:busybox), resource_dir under the private directory.
 * cli_env_init must have run. */
void cli_env_docker_config(struct cli_env *e, const char *head);

/* Give the child one more variable (at most 4; setting a name again
 * replaces it). */
void cli_env_setenv(struct cli_env *e, const char *name, const char *value);

/* Remove the temporary directory and everything in it. */
void cli_env_fini(struct cli_env *e);

/* Number of entries in a directory (-1 when it cannot be opened). */
int cli_dir_entries(const char *path);

/* A running sbx. Pipes are non-blocking read ends; in_fd is the write end
 * of its stdin pipe, or -1 when stdin is /dev/null. */
struct cli_proc {
    pid_t pid;
    int out_fd, err_fd, in_fd;
};

enum cli_stdin {
    CLI_STDIN_NULL = 0, /* /dev/null */
    CLI_STDIN_PIPE = 1  /* a pipe the test writes (in_fd) */
};

/* Start `sbx args...` (args NULL-terminated, without argv[0]). */
void cli_spawn(const struct cli_env *e, const char *const *args,
               enum cli_stdin in, struct cli_proc *p);

/* Read one line (without the newline) from the child's stdout within
 * timeout_ms. Returns false on timeout or EOF. */
bool cli_read_line(struct cli_proc *p, char *buf, size_t len, int timeout_ms);

/* Read the child's stderr until its end, at most cap - 1 bytes or
 * timeout_ms, into buf (NUL-terminated). */
void cli_read_err(struct cli_proc *p, char *buf, size_t cap, int timeout_ms);

/* Status of an sbx killed by signal N: CLI_KILLED_BY + N, so that it cannot
 * be mistaken for sbx exiting 128+N by itself. */
#define CLI_KILLED_BY 256

/* Wait up to timeout_ms for the child to exit; returns its exit code, or
 * CLI_KILLED_BY+N when killed by signal N, or -1 on timeout (the child is
 * then killed). */
int cli_wait(struct cli_proc *p, int timeout_ms);

/* The outcome of a complete run. */
struct cli_result {
    int status;  /* exit code, CLI_KILLED_BY+N for signal N, -1 when it hung */
    char *out;   /* stdout, NUL-terminated */
    char *err;   /* stderr, NUL-terminated */
};

/* Run `sbx args...` to completion (at most timeout_ms), feeding `input`
 * (may be NULL: /dev/null) on stdin. */
void cli_run(const struct cli_env *e, const char *const *args, const char *input,
             int timeout_ms, struct cli_result *r);

/* The same with stdin, stdout and stderr on a pseudo-terminal (120x24) that
 * is sbx's controlling terminal: r->out is everything the terminal showed
 * (stdout and stderr together), r->err is empty. */
void cli_run_pty(const struct cli_env *e, const char *const *args, int timeout_ms,
                 struct cli_result *r);

void cli_result_free(struct cli_result *r);

/* Milliseconds on the monotonic clock. */
long long cli_now_ms(void);

/* Whether a process is gone (no such pid, or a zombie). */
bool cli_pid_gone(pid_t pid);

#endif
