/*
 * cf_internal.h - internals of the conformance suite shared by its files.
 *
 * A case is a function in the table of case_table.c. It gets a cf_test,
 * opens contexts and sandboxes through the fixture helpers (which remember
 * everything for cleanup), and records its verdict with cf_fail/cf_skip.
 * A case that returns without calling either passed. The runner releases
 * handles, destroys every sandbox the case created and closes its contexts
 * afterwards, whatever the outcome.
 */
#ifndef SBX_CF_INTERNAL_H
#define SBX_CF_INTERNAL_H

#include <sbx/conformance.h>
#include <sbx/sbx.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ------------------------------------------------------------------------ */
/* Cases                                                                      */
/* ------------------------------------------------------------------------ */

struct cf_test;

typedef void (*cf_case_fn)(struct cf_test *t);

/* One entry of the case table. */
struct cf_case {
    const char *name;        /* stable, [a-z0-9_] */
    const char *description; /* one line */
    uint64_t caps;           /* SBX_CAP_* the case needs; skipped otherwise */
    cf_case_fn run;
};

/* The table, in run order (case_table.c). */
extern const struct cf_case cf_cases[];
extern const size_t cf_case_total;

/* Case functions, one per contract (cases_*.c). */
void cf_case_identity_two_instances(struct cf_test *t);
void cf_case_create_idempotent_second_instance(struct cf_test *t);
void cf_case_attach_after_restart(struct cf_test *t);
void cf_case_attach_other_key_denied(struct cf_test *t);
void cf_case_destroy_other_key_denied(struct cf_test *t);
void cf_case_destroy_twice(struct cf_test *t);
void cf_case_attach_after_destroy(struct cf_test *t);
void cf_case_attach_malformed_ref(struct cf_test *t);
void cf_case_exec_exit_codes(struct cf_test *t);
void cf_case_exec_killed_by_signal(struct cf_test *t);
void cf_case_exec_signals_default(struct cf_test *t);
void cf_case_exec_argv_no_shell(struct cf_test *t);
void cf_case_exec_missing_command(struct cf_test *t);
void cf_case_exec_stdout_stderr(struct cf_test *t);
void cf_case_exec_stdin(struct cf_test *t);
void cf_case_exec_stdin_left_open(struct cf_test *t);
void cf_case_exec_env(struct cf_test *t);
void cf_case_exec_cwd(struct cf_test *t);
void cf_case_exec_cwd_missing(struct cf_test *t);
void cf_case_exec_no_inherited_fds(struct cf_test *t);
void cf_case_file_binary_roundtrip(struct cf_test *t);
void cf_case_file_read_missing(struct cf_test *t);
void cf_case_file_read_fifo(struct cf_test *t);
void cf_case_file_mode(struct cf_test *t);
void cf_case_file_mode_invalid(struct cf_test *t);
void cf_case_write_file_atomic(struct cf_test *t);
void cf_case_path_escape_read(struct cf_test *t);
void cf_case_path_escape_write(struct cf_test *t);
void cf_case_cancel_running(struct cf_test *t);
void cf_case_timeout_kills_children(struct cf_test *t);
void cf_case_exec_leftovers_killed(struct cf_test *t);
void cf_case_destroy_kills_running(struct cf_test *t);
void cf_case_output_bounded(struct cf_test *t);
void cf_case_export_shell_and_files(struct cf_test *t);
void cf_case_export_refuses_symlink(struct cf_test *t);
void cf_case_mount_put_read_only(struct cf_test *t);
void cf_case_mount_put_verifies(struct cf_test *t);
void cf_case_mount_remove_idempotent(struct cf_test *t);
void cf_case_skill_install_read_only(struct cf_test *t);
void cf_case_skill_install_verifies(struct cf_test *t);
void cf_case_skill_survives_restart(struct cf_test *t);
void cf_case_egress_create_limited(struct cf_test *t);
void cf_case_egress_set_exact(struct cf_test *t);
void cf_case_memory_heads_and_commit(struct cf_test *t);
void cf_case_memory_read_only(struct cf_test *t);
void cf_case_memory_conflict(struct cf_test *t);
void cf_case_memory_crash_before_writeback(struct cf_test *t);
void cf_case_users_exec_as_user(struct cf_test *t);
void cf_case_users_write_owned(struct cf_test *t);
void cf_case_users_root_only_refused(struct cf_test *t);
void cf_case_users_add_idempotent(struct cf_test *t);
void cf_case_proc_exit_and_streams(struct cf_test *t);
void cf_case_proc_killed_by_signal(struct cf_test *t);
void cf_case_proc_stdin(struct cf_test *t);
void cf_case_proc_cursor_continues(struct cf_test *t);
void cf_case_proc_replay_bounded(struct cf_test *t);
void cf_case_proc_reattach(struct cf_test *t);
void cf_case_proc_wait_ms(struct cf_test *t);
void cf_case_proc_timeout(struct cf_test *t);
void cf_case_proc_signal(struct cf_test *t);
void cf_case_proc_list(struct cf_test *t);
void cf_case_proc_foreign_id(struct cf_test *t);
void cf_case_proc_concurrent(struct cf_test *t);
void cf_case_proc_destroy_kills(struct cf_test *t);
void cf_case_proc_output_flood(struct cf_test *t);
void cf_case_pty_terminal(struct cf_test *t);
void cf_case_pty_resize(struct cf_test *t);
void cf_case_pty_ctrl_c(struct cf_test *t);
void cf_case_pty_eof(struct cf_test *t);
void cf_case_pty_paste(struct cf_test *t);
void cf_case_fileops_list(struct cf_test *t);
void cf_case_fileops_list_large(struct cf_test *t);
void cf_case_fileops_stat(struct cf_test *t);
void cf_case_fileops_mkdir(struct cf_test *t);
void cf_case_fileops_remove(struct cf_test *t);
void cf_case_fileops_remove_symlink_out(struct cf_test *t);
void cf_case_fileops_rename(struct cf_test *t);
void cf_case_fileops_escape(struct cf_test *t);
void cf_case_ports_resolve(struct cf_test *t);
void cf_case_ports_reachable(struct cf_test *t);
void cf_case_pause_idempotent(struct cf_test *t);
void cf_case_pause_freezes_processes(struct cf_test *t);
void cf_case_pause_keeps_workspace(struct cf_test *t);
void cf_case_exec_resumes_paused(struct cf_test *t);
void cf_case_attach_resumes_paused(struct cf_test *t);
void cf_case_destroy_paused(struct cf_test *t);
void cf_case_pause_gone(struct cf_test *t);
void cf_case_pool_handover(struct cf_test *t);
void cf_case_fork_copies_workspace(struct cf_test *t);
void cf_case_fork_own_identity(struct cf_test *t);
void cf_case_fork_shares_nothing(struct cf_test *t);
void cf_case_fork_source_keeps_running(struct cf_test *t);
void cf_case_fork_paused_source_stays_paused(struct cf_test *t);
void cf_case_fork_gone(struct cf_test *t);

/* ------------------------------------------------------------------------ */
/* Fixture: per-case state and cleanup (fixture.c)                            */
/* ------------------------------------------------------------------------ */

#define CF_MAX_CTX 4
#define CF_MAX_HANDLES 8
#define CF_MAX_SANDBOXES 8
#define CF_KEY_MAX 160
#define CF_MESSAGE_MAX 1024

struct cf_tracked_handle {
    sbx_handle *h;
    int ctx; /* index into cf_test.ctx */
};

struct cf_tracked_sandbox {
    char key[CF_KEY_MAX];
    char ref[SBX_REF_MAX];
};

/* The state of one running case. */
struct cf_test {
    const struct cf_case *c;
    const struct sbx_options *open_opts; /* provider already filled in */
    const char *provider;                /* name under test */
    int outcome;                         /* enum sbx_conformance_outcome */
    char message[CF_MESSAGE_MAX];
    char token[33];   /* random hex, unique to this run of the case */
    unsigned keys;    /* session keys handed out so far */
    sbx_ctx *ctx[CF_MAX_CTX];
    sbx_provider *prov[CF_MAX_CTX];
    struct cf_tracked_handle handles[CF_MAX_HANDLES];
    struct cf_tracked_sandbox sandboxes[CF_MAX_SANDBOXES];
    size_t nsandboxes;
    /* The report pipe to the runner when the case runs in a child process
     * (isolate.c), else -1: every sandbox is announced on it as soon as it
     * is created, and the first failure as soon as it is recorded, so the
     * runner knows both even if the process dies. */
    int report_fd;
};

/* Prepare t for a case (random token, no report pipe) and run the cleanup
 * afterwards. A failing cleanup turns a pass into a failure. */
int cf_test_init(struct cf_test *t, const struct cf_case *c,
                 const struct sbx_options *open_opts, const char *provider);
void cf_test_cleanup(struct cf_test *t);

/* Record a failure (the first message is kept) and return false, so a case
 * can write `return (void)cf_fail(t, ...)` or `if (!x) return cf_fail(...)`. */
bool cf_fail(struct cf_test *t, const char *fmt, ...) SBX_PRINTF_LIKE(2, 3);

/* Mark the case skipped with a reason (unless it already failed). */
void cf_skip(struct cf_test *t, const char *fmt, ...) SBX_PRINTF_LIKE(2, 3);

/* Whether the case has failed so far. */
bool cf_failed(const struct cf_test *t);

/* When status is not SBX_OK, fail with "<what>: <STATUS>: <message>" and
 * return false. */
bool cf_expect_ok(struct cf_test *t, int status, const sbx_error *err,
                  const char *what);

/* The constant's name of a status ("SBX_E_DENIED"). */
const char *cf_status_name(int status);

/* Open a new host context (a new provider instance) and look the provider
 * up. Returns NULL after failing the case. */
sbx_provider *cf_open(struct cf_test *t);

/* Close the context p belongs to after releasing its tracked handles: a
 * restart. */
void cf_close(struct cf_test *t, sbx_provider *p);

/* Write a fresh session key for this case into key[CF_KEY_MAX]. */
void cf_new_key(struct cf_test *t, char *key);

/* sbx_create through p; tracks the handle and remembers (key, ref) for
 * cleanup. NULL after failing the case. */
sbx_handle *cf_create(struct cf_test *t, sbx_provider *p, const char *key);

/* cf_create with a limited network (ABI 1.1, SBX_CAP_EGRESS). */
sbx_handle *cf_create_egress(struct cf_test *t, sbx_provider *p, const char *key,
                             const struct sbx_egress_policy *egress);

/* cf_create with TCP ports to expose (ABI 1.2, SBX_CAP_PORTS; 0-terminated). */
sbx_handle *cf_create_ports(struct cf_test *t, sbx_provider *p, const char *key,
                            const uint16_t *ports);

/* Open a context, make a key and create its sandbox: the usual start of a
 * case. *pout (may be NULL) receives the provider. */
sbx_handle *cf_sandbox(struct cf_test *t, sbx_provider **pout);

/*
 * Simulate a worker restart: close p, the instance that created h (the
 * case's most recent sandbox; h is released with it), open a new instance
 * and attach the sandbox again. Returns the new (tracked) handle, or NULL
 * after failing the case.
 */
sbx_handle *cf_attach_after_restart(struct cf_test *t, sbx_provider *p, sbx_handle *h);

/* Track a handle obtained directly (e.g. from sbx_attach) so the cleanup
 * releases it. Releases it at once and fails the case when the table is
 * full. */
void cf_track(struct cf_test *t, sbx_provider *p, sbx_handle *h);

/* The context p belongs to (NULL when p is not the case's). */
sbx_ctx *cf_ctx_of(struct cf_test *t, const sbx_provider *p);

/* Remember a sandbox made other than by cf_create (the session manager's)
 * for the cleanup. false after failing the case. */
bool cf_remember(struct cf_test *t, const char *key, const char *ref);

/* Release a tracked handle now. */
void cf_release(struct cf_test *t, sbx_handle *h);

/* ------------------------------------------------------------------------ */
/* Running commands (exec_helpers.c)                                          */
/* ------------------------------------------------------------------------ */

/* Head and tail kept of each stream by cf_exec. */
#define CF_CAPTURE_MAX (64 * 1024)

/* One sbx_exec call: fill the inputs, call cf_exec, read the outputs, and
 * free with cf_exec_free. */
struct cf_exec {
    const char *const *argv;
    const char *const *env;
    const char *cwd;
    const struct sbx_source *in;
    int64_t timeout_ms;
    sbx_cancel *cancel;

    int status;
    sbx_error err;
    struct sbx_exec_result res;
    sbx_capture out, errout;
    double seconds; /* wall time of the call */
};

/* Run e on h, capturing both streams. */
void cf_exec(struct cf_exec *e, sbx_handle *h);
void cf_exec_free(struct cf_exec *e);

/* The kept bytes of a capture as a new NUL-terminated string (only
 * meaningful when not truncated). NULL when out of memory. */
char *cf_capture_string(const sbx_capture *c);

/*
 * Run `sh -c script` in the workspace root and require SBX_OK with exit
 * code 0. On success returns the captured stdout (caller frees; "" when
 * empty); otherwise fails the case (quoting stderr) and returns NULL.
 */
char *cf_sh(struct cf_test *t, sbx_handle *h, const char *script);

/*
 * Run `sh -c script` (with a 30 s timeout) and require only that the exec
 * call succeeded: the exit status is ignored. Returns the captured stdout
 * (caller frees), or NULL after failing the case (or out of memory).
 */
char *cf_sh_any(struct cf_test *t, sbx_handle *h, const char *script);

/* Render n bytes as a quoted C-style string for messages, truncated to fit
 * buf (at most cap bytes, NUL-terminated). Returns buf. */
const char *cf_quote(const void *data, size_t n, char *buf, size_t cap);

/* Append printf-style text to the NUL-terminated string in buf (cap bytes
 * in all), truncating what does not fit. */
void cf_appendf(char *buf, size_t cap, const char *fmt, ...) SBX_PRINTF_LIKE(3, 4);

/* Write a small string file; false after failing the case. */
bool cf_write_text(struct cf_test *t, sbx_handle *h, const char *path,
                   const char *text);

/* Read a file (of at most CF_CAPTURE_MAX bytes) and require it to equal
 * text; false after failing the case. */
bool cf_expect_file(struct cf_test *t, sbx_handle *h, const char *path,
                    const char *text);

/* Reset the peak RSS (VmHWM) of this process; false when the kernel does
 * not allow it (growth is then measured against the earlier peak). */
bool cf_peak_rss_reset(void);

/* A "Name:   N kB" line of /proc/self/status in KiB, or -1. */
long cf_status_kib(const char *name);

/* CLOCK_MONOTONIC in seconds, for measuring durations. */
double cf_now(void);

/* A time bound of the suite, in seconds, times SBX_CONFORMANCE_TIME_SCALE
 * (1 to 10, default 1): a slow build (sanitizers) or machine may stretch
 * the bounds, never shrink them. */
double cf_bound(double seconds);

/* Sleep ms milliseconds (whole, through interruptions). */
void cf_sleep_ms(long ms);

/*
 * After a command that wrote the pid files `pid` and `child` in the
 * workspace root: which of them are still alive after up to 3 s, looked at
 * every 0.1 s (every second where sleep takes whole seconds only) ("pid=N",
 * "child=N", space-separated; "" when all are gone; zombies count as
 * gone). *no_pids is set when a pid file is missing (the output then says
 * which: "no-<f>-file"). NULL when the check could not run (the case has
 * failed). The caller frees the result.
 */
char *cf_survivors(struct cf_test *t, sbx_handle *h, bool *no_pids);

/* ------------------------------------------------------------------------ */
/* Processes (proc_helpers.c; ABI 1.2)                                        */
/* ------------------------------------------------------------------------ */

/* Bytes of each stream a cf_proc keeps (more are counted, not kept). */
#define CF_PROC_KEEP (4u << 20)

/* One process and what was read of it so far. */
struct cf_proc {
    sbx_handle *h;
    char id[SBX_PROC_ID_MAX];
    uint64_t out_cursor, err_cursor; /* where the next read continues */
    uint64_t out_lost, err_lost;     /* summed over the reads */
    uint64_t out_seen, err_seen;     /* bytes delivered */
    char *out, *err;                 /* the first CF_PROC_KEEP of them, NUL-ended */
    size_t out_len, err_len, out_cap, err_cap;
    struct sbx_proc_read_result res; /* of the last read */
    unsigned reads;
    sbx_error err_msg;               /* of the last read */
};

/* Start spec on h into p (cleared first); false after failing the case. */
bool cf_proc_start(struct cf_test *t, sbx_handle *h, struct cf_proc *p,
                   const struct sbx_proc_spec *spec);

/* Start `sh -c script` with flags (SBX_PROC_PTY: 24x80). */
bool cf_proc_sh(struct cf_test *t, sbx_handle *h, struct cf_proc *p, const char *script,
                uint32_t flags);

/* One proc_read after p's cursors (max 0: the default), appending to p;
 * returns its status (p->err_msg has the message). Fails the case when
 * the answer breaks the contract. */
int cf_proc_read(struct cf_test *t, struct cf_proc *p, uint32_t wait_ms, uint64_t max);

/* Read until eof (within seconds, scaled); false after failing the case. */
bool cf_proc_until_eof(struct cf_test *t, struct cf_proc *p, double seconds);

/* Read until stdout holds needle (carriage returns ignored). */
bool cf_proc_until_text(struct cf_test *t, struct cf_proc *p, const char *needle,
                        double seconds);

/* Whether stdout so far holds needle (carriage returns ignored). */
bool cf_proc_out_has(const struct cf_proc *p, const char *needle);

/* Fail unless got == want: "<what> returned X (message); want Y". */
bool cf_proc_expect_status(struct cf_test *t, int got, const sbx_error *err, int want,
                           const char *what);

/* Whether proc_list of h names id (its entry into *out, strings NULL);
 * false also after failing the case when proc_list failed. */
bool cf_proc_listed(struct cf_test *t, sbx_handle *h, const char *id,
                    struct sbx_proc_info *out);

void cf_proc_free(struct cf_proc *p);

/* ------------------------------------------------------------------------ */
/* Deterministic byte streams (pattern.c)                                     */
/* ------------------------------------------------------------------------ */

/* Byte i of the pattern with a given seed. Every aligned 256-byte block is
 * a permutation of all byte values (so NULs are everywhere). */
unsigned char cf_pattern_byte(uint64_t i, uint32_t seed);

/* A source producing `len` pattern bytes in irregular chunk sizes. */
struct cf_pattern_source {
    uint64_t len, pos;
    uint32_t seed;
    unsigned calls;
};
struct sbx_source cf_pattern_source(struct cf_pattern_source *s, uint64_t len,
                                    uint32_t seed);

/* A sink checking that what it receives is the pattern; records the first
 * mismatching offset. Never fails the provider's call. */
struct cf_pattern_sink {
    uint64_t pos;
    uint32_t seed;
    uint64_t mismatch; /* UINT64_MAX when none */
};
struct sbx_sink cf_pattern_sink(struct cf_pattern_sink *s, uint32_t seed);

/* ------------------------------------------------------------------------ */
/* The report pipe between a case's process and the runner (channel.c)        */
/* ------------------------------------------------------------------------ */

/* Record types. Each record carries two NUL-terminated strings. */
enum cf_record_type {
    CF_REC_SANDBOX = 'S',   /* a sandbox was created: session key, reference */
    CF_REC_FAILURE = 'F',   /* the case's first failure: message, "" */
    CF_REC_RESULT = 'R',    /* the case ended: outcome ("0".."2"), message */
    CF_REC_DESTROYED = 'D'  /* leftover i destroyed: "i status", message */
};

/* Largest record: below PIPE_BUF, so that one write(2) is atomic and
 * records of several threads never interleave. */
#define CF_RECORD_MAX 4000

struct cf_record {
    int type;      /* enum cf_record_type */
    const char *a; /* first string (borrowed for the callback) */
    const char *b; /* second string */
};

/* Send one record on fd with a single write(2); strings are truncated to
 * fit CF_RECORD_MAX. fd -1 sends nothing. Errors are ignored: the runner
 * notices a child that cannot report. Async-signal-unsafe (snprintf). */
void cf_channel_send(int fd, int type, const char *a, const char *b);

typedef void (*cf_record_fn)(void *ud, const struct cf_record *rec);

/* Reassembles records from the bytes read off the pipe. */
struct cf_channel_reader {
    unsigned char buf[2 * CF_RECORD_MAX];
    size_t len;
    bool malformed; /* a frame could not be decoded; the rest is dropped */
};

/* One read(2) from fd into r; calls fn for every complete record. Returns
 * the bytes read (> 0), 0 at end of file, -1 with errno on error (EAGAIN
 * for a non-blocking fd with nothing to read). */
long cf_channel_read(int fd, struct cf_channel_reader *r, cf_record_fn fn,
                     void *ud);

/* ------------------------------------------------------------------------ */
/* Child processes with a deadline (child.c)                                  */
/* ------------------------------------------------------------------------ */

/* How a child process ended. */
struct cf_child_end {
    bool exited;     /* it called exit/_exit: exit_status is valid */
    int exit_status;
    int signal;      /* the signal that killed it, or 0 */
    bool core;       /* it dumped core */
    bool timed_out;  /* the runner killed it at the deadline (signal is
                        SIGKILL) */
    bool unknown;    /* its status could not be collected (SIGCHLD ignored) */
};

/* The body of a child: runs in the new process with the write end of the
 * report pipe; the child _exits(0) when it returns. */
typedef void (*cf_child_fn)(void *arg, int report_fd);

/*
 * Run fn(arg) in a forked child. The parent reads the child's records as
 * they arrive (calling on_record) until the child has ended; a child still
 * running after timeout_s seconds is killed with SIGKILL. The child never
 * returns into the caller's code and never flushes the caller's stdio
 * buffers (it ends with _exit). Call from a process whose libsbx contexts
 * are all closed: the child opens its own.
 *
 * Returns SBX_OK with *end filled, or SBX_E_IO (pipe or fork failed) with
 * a message in err.
 */
int cf_child_run(cf_child_fn fn, void *arg, double timeout_s,
                 cf_record_fn on_record, void *ud, struct cf_child_end *end,
                 sbx_error *err);

/* "killed by signal 11 (SIGSEGV)", "exited with status 3", ... into buf. */
const char *cf_child_end_text(const struct cf_child_end *e, char *buf, size_t cap);

/* "SIGSEGV" for 11 and so on; "signal N" for one without a name here
 * (into buf). */
const char *cf_signal_name(int sig, char *buf, size_t cap);

/* ------------------------------------------------------------------------ */
/* Running a case in its own process (isolate.c, leftovers.c)                 */
/* ------------------------------------------------------------------------ */

/* Default deadline of one case, cleanup included. */
#define CF_CASE_TIMEOUT_MS 120000

/*
 * Run case c in a child process (opening its own contexts with open_opts)
 * and store its outcome and message (message holds CF_MESSAGE_MAX bytes).
 * A child that crashed, exited without a result or outlived timeout_s is a
 * failure naming what happened and the sandboxes it had created, which the
 * runner then tries to destroy (cf_leftovers_destroy).
 */
void cf_isolate_case(const struct cf_case *c, const struct sbx_options *open_opts,
                     const char *provider, double timeout_s, int *outcome,
                     char *message);

/*
 * Destroy the sandboxes sb[0..n) that a dead case process left, through a
 * fresh context opened in another child process (a provider that crashed
 * once may crash again, and must not take the runner with it), waiting at
 * most timeout_s. Appends "; sandbox left: provider "P" ref "R" (session
 * key "K"), destroyed by the runner" (or why not) for each to msg (cap
 * bytes, NUL-terminated), or "; it had created no sandbox".
 */
void cf_leftovers_destroy(const struct sbx_options *open_opts, const char *provider,
                          const struct cf_tracked_sandbox *sb, size_t n,
                          double timeout_s, char *msg, size_t cap);

/* ------------------------------------------------------------------------ */
/* Reports (report_text.c, report_junit.c)                                    */
/* ------------------------------------------------------------------------ */

/* What the reports say about the provider under test. */
struct cf_report_info {
    const char *provider;
    const char *version;
    const char *path;
    uint64_t caps;
    unsigned total; /* selected cases */
};

void cf_report_begin(FILE *out, int format, const struct cf_report_info *info);
void cf_report_case(FILE *out, int format, unsigned index, bool verbose,
                    const struct sbx_conformance_result *r);
void cf_report_end(FILE *out, int format,
                   const struct sbx_conformance_summary *s);

/* Write the JUnit XML report to path (via a temporary file in the same
 * directory, renamed into place). SBX_E_IO with the path on failure. */
int cf_junit_write(const char *path, const struct cf_report_info *info,
                   const struct sbx_conformance_result *results, size_t n,
                   const struct sbx_conformance_summary *s, sbx_error *err);

/* Write s to f with XML escaping: & < > " ' as entities, and bytes XML 1.0
 * cannot carry (control characters, invalid UTF-8) as "\xNN" text. */
void cf_xml_escape(FILE *f, const char *s);

/* Comma-separated capability names of caps, or "none" (into buf). */
const char *cf_caps_text(uint64_t caps, char *buf, size_t cap);

#endif /* SBX_CF_INTERNAL_H */
