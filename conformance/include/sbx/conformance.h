/*
 * sbx/conformance.h - the provider conformance suite (libsbx-conformance).
 *
 * One implementation of the lifecycle contract of sbx/provider.h, run
 * against any provider through the libsbx consumer API: stable identity,
 * idempotent create, attach after a restart, ownership, destroy, exec
 * (exit codes, signals, streams, stdin, environment, cwd, cancellation,
 * timeouts, bounded output) and confined, atomic file access. `sbx
 * conformance` is a thin front end over sbx_conformance_run();
 * docs/CONFORMANCE.md describes the cases and how a backend author runs
 * them in CI. Build against it with `pkg-config --cflags --libs
 * sbx-conformance`.
 *
 * The suite opens its own host contexts with the caller's sbx_options:
 * "two provider instances" are two contexts opened with the same options
 * (each runs the provider's init), and a "restart" closes one context and
 * opens another. Every case uses fresh random session keys and destroys the
 * sandboxes it created, whether it passed or not. Commands run inside the
 * sandbox use only POSIX sh and busybox-level tools.
 *
 * Isolation: each case runs in a child process forked by
 * sbx_conformance_run(), which opens the case's contexts itself. A case
 * whose process is killed by a signal (a provider crashing the host
 * process: SIGSEGV, abort, SIGPIPE), exits without reporting, or outlives
 * the per-case deadline fails with a message saying so and naming the
 * sandboxes it had created; the runner then tries to destroy those from
 * yet another child process and says whether that worked. The run goes on
 * with the next case; the summary and the JUnit file are always produced.
 * Only the check before the cases (loading the provider and running its
 * init once) runs in the calling process.
 *
 * Processes and threads: sbx_conformance_run() forks. Call it from a
 * thread while no other thread of the process holds locks the child could
 * need (in practice: no other thread busy inside libsbx or a provider),
 * with SIGCHLD not ignored (the runner waits for its children). The
 * callback and all output run in the calling process. It is not reentrant
 * for the same FILE, and case processes start short-lived threads of their
 * own (to fire cancellation tokens, to read while a write is in progress).
 */
#ifndef SBX_CONFORMANCE_H
#define SBX_CONFORMANCE_H

#include <sbx/sbx.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the functions libsbx-conformance exports (it is built with hidden
 * visibility). */
#if defined(__GNUC__) || defined(__clang__)
#define SBX_CONFORMANCE_API __attribute__((visibility("default")))
#else
#define SBX_CONFORMANCE_API
#endif

/* Output format of the progress stream (opts->out). */
enum sbx_conformance_format {
    SBX_CONFORMANCE_HUMAN = 0, /* "ok   name (12 ms)" / "FAIL name: why" /
                                  "skip name: why", then
                                  "N passed, N failed, N skipped" */
    SBX_CONFORMANCE_TAP = 1    /* TAP version 13 with YAML diagnostics */
};

/* Outcome of one case. */
enum sbx_conformance_outcome {
    SBX_CONFORMANCE_PASS = 0,
    SBX_CONFORMANCE_FAIL = 1,
    SBX_CONFORMANCE_SKIP = 2
};

/* The result of one case, as passed to the on_result callback. All strings
 * are borrowed for the duration of the callback. A case whose process died
 * has outcome FAIL and a message starting "case crashed: killed by signal
 * N (SIGxxx)", "case timed out" or "case process exited", followed by
 * "; sandbox left: ..." for each sandbox it had created. */
struct sbx_conformance_result {
    const char *name;        /* stable case name, e.g. "attach_other_key_denied" */
    const char *description; /* one line: what the case checks */
    uint64_t caps;           /* SBX_CAP_* bits the case needs */
    int outcome;             /* enum sbx_conformance_outcome */
    const char *message;     /* why it failed or was skipped; "" on pass */
    double seconds;          /* wall time of the case, cleanup included */
};

/* How to run the suite. Zero-initialize, set size = sizeof, fill the rest.
 * Members are only ever appended: a caller built against an older header
 * passes a smaller size and gets the defaults of the members it lacks. */
struct sbx_conformance_options {
    uint32_t size;
    /* Provider to test; NULL means the context's default provider. A name
     * given here is selected and enabled even without a config section
     * (like sbx_options.provider). */
    const char *provider;
    /* Progress and summary output; NULL means stdout. */
    FILE *out;
    /* enum sbx_conformance_format. */
    int format;
    /* Write a JUnit XML report here (replaced atomically when the run
     * ends); NULL for none. */
    const char *junit_path;
    /* Comma-separated shell patterns (fnmatch) selecting cases by name;
     * NULL or "" runs every case. A filter matching no case is an error. */
    const char *filter;
    /* Also print each case's description (human format). */
    bool verbose;
    /* Called after each case, in order, in the calling process; may be
     * NULL. */
    void (*on_result)(void *ud, const struct sbx_conformance_result *r);
    void *on_result_ud;
    /* Deadline of one case, its cleanup included, in milliseconds; 0 means
     * 120000 (2 minutes). A case still running then is killed and fails
     * with "case timed out". Negative is SBX_E_INVALID. (Appended after
     * the first release: callers with a smaller size get the default.) */
    int64_t case_timeout_ms;
};

/* Totals of a run. */
struct sbx_conformance_summary {
    uint32_t size;     /* set by the caller to sizeof */
    unsigned total;    /* cases selected by the filter */
    unsigned passed;
    unsigned failed;
    unsigned skipped;  /* provider lacks a capability the case needs */
    double seconds;    /* wall time of the whole run */
};

/*
 * sbx_conformance_run - run the suite against one provider.
 *
 * open_opts are the options every context of the run is opened with (the
 * suite opens several); opts->provider, when set, overrides
 * open_opts->provider. Progress goes to opts->out as each case ends;
 * summary (may be NULL) receives the totals.
 *
 * Ownership: everything passed in is borrowed for the call; opts->out is
 * written to and flushed, never closed. The JUnit file (when asked for) is
 * written beside its destination and renamed into place at the end.
 *
 * Returns SBX_OK when the suite ran to the end, whatever the cases'
 * outcomes (look at summary->failed); a case that crashed or timed out is
 * such an outcome. Otherwise nothing was run, or the report could not be
 * written, and err names why:
 *   SBX_E_INVALID      bad options (size, format, a filter matching
 *                      nothing, a negative case timeout)
 *   SBX_E_CONFIG, SBX_E_ABI, SBX_E_NOT_FOUND
 *                      the context could not be opened or the provider is
 *                      not available (from sbx_open/sbx_provider_lookup)
 *   any status         the provider's init failed (message names it)
 *   SBX_E_IO           the JUnit file could not be written (the cases ran
 *                      and summary is filled)
 *   SBX_E_NOMEM        out of memory
 */
SBX_CONFORMANCE_API int
sbx_conformance_run(const struct sbx_options *open_opts,
                    const struct sbx_conformance_options *opts,
                    struct sbx_conformance_summary *summary, sbx_error *err);

/*
 * sbx_conformance_exit_code - the process exit status for a run, so every
 * front end agrees: 125 when status is not SBX_OK (the suite could not run
 * or its report could not be written), else 1 when at least one case
 * failed, else 0 (skipped cases do not fail a run). summary may be NULL
 * only when status is not SBX_OK.
 */
SBX_CONFORMANCE_API int
sbx_conformance_exit_code(int status, const struct sbx_conformance_summary *summary);

/* The cases, in run order: for `--list` and documentation. The name,
 * description and caps of index i >= sbx_conformance_case_count() are
 * NULL, NULL and 0; strings are static (never freed). */
SBX_CONFORMANCE_API size_t sbx_conformance_case_count(void);
SBX_CONFORMANCE_API const char *sbx_conformance_case_name(size_t i);
SBX_CONFORMANCE_API const char *sbx_conformance_case_description(size_t i);
SBX_CONFORMANCE_API uint64_t sbx_conformance_case_caps(size_t i);

#ifdef __cplusplus
}
#endif

#endif /* SBX_CONFORMANCE_H */
