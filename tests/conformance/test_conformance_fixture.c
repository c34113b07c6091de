/*
 * test_conformance_fixture.c - the suite can fail: "cfixture" wraps the
 * local provider and breaks one contract at a time; exactly the cases
 * checking that contract must fail, with a message saying why, and the
 * reports must carry the failure (escaped: cfixture references contain
 * XML markup characters). The modes that kill or hang the host process
 * prove the case isolation: the run goes on, the summary and the JUnit
 * file are produced, and the failures name the signal and the sandbox
 * left (which the runner destroyed).
 */
#include "suite_runner.h"

#include <criterion/criterion.h>

#include <signal.h>
#include <stdlib.h>

#include <stdio.h>
#include <string.h>

/* The run of the current test; .fini removes its directory even when an
 * assertion ends the test early. */
static struct sr_run run;

static void cleanup(void)
{
    sr_free(&run);
}

static void run_fixture_with(struct sr_run *r, const char *mode, const char *filter,
                             const struct sr_options *extra)
{
    /* The broken modes sit just past the suite's bounds (a destroy that
     * waits out a 10 s timeout): stretched bounds would let them pass. */
    setenv("SBX_CONFORMANCE_TIME_SCALE", "1", 1);
    char yaml[1024];
    snprintf(yaml, sizeof yaml,
             "  cfixture:\n"
             "    root: @ROOT@\n"
             "    inner: %s/local.so\n"
             "    break: %s\n",
             SBX_TEST_PROVIDER_DIR, mode);
    cr_assert_eq(sr_run_suite_with(r, "cfixture", yaml,
                                   SBX_TEST_CF_FIXTURE_DIR ":" SBX_TEST_PROVIDER_DIR,
                                   SBX_CONFORMANCE_HUMAN, filter, extra),
                 0, "could not set up the run");
    cr_assert_eq(r->status, SBX_OK, "suite did not run: %s", r->err.message);
}

static void run_fixture(struct sr_run *r, const char *mode)
{
    run_fixture_with(r, mode, NULL, NULL);
    cr_assert_eq(r->nresults, sbx_conformance_case_count());
}

static bool listed(const char *const *names, const char *name)
{
    for (size_t i = 0; names[i]; i++)
        if (!strcmp(names[i], name))
            return true;
    return false;
}

/* Exactly the cases in `failing` failed; the rest passed (or were skipped
 * for capabilities). Reports agree. */
static void expect_failures(struct sr_run *r, const char *const *failing)
{
    unsigned nfail = 0;
    for (size_t i = 0; failing[i]; i++)
        nfail++;
    for (size_t i = 0; i < r->nresults; i++) {
        const struct sr_result *res = &r->results[i];
        if (listed(failing, res->name)) {
            cr_expect_eq(res->outcome, SBX_CONFORMANCE_FAIL,
                         "%s should fail against the broken fixture", res->name);
            cr_expect(res->message[0], "%s failed without a message", res->name);
        } else if (sbx_conformance_case_caps(i) == 0) {
            cr_expect_eq(res->outcome, SBX_CONFORMANCE_PASS, "%s: %s", res->name,
                         res->message);
        }
    }
    cr_assert_eq(r->summary.failed, nfail);
    cr_assert_eq(sbx_conformance_exit_code(r->status, &r->summary), nfail ? 1 : 0);
    char line[64];
    snprintf(line, sizeof line, " passed, %u failed, ", nfail);
    cr_assert(strstr(r->output, line), "summary line missing");
    for (size_t i = 0; failing[i]; i++) {
        char fail_line[128];
        snprintf(fail_line, sizeof fail_line, "\nFAIL  %s (", failing[i]);
        cr_assert(strstr(r->output, fail_line), "no FAIL line for %s", failing[i]);
    }
    cr_assert_eq(sr_xmllint(r->junit), 0, "JUnit report is not well-formed XML");
    cr_assert_eq(sr_count_in_file(r->junit, "<failure "), (int)nfail);
    cr_assert_eq(sr_count_in_file(r->junit, "<testcase "), (int)r->nresults);
    cr_assert_eq(sr_count_workspaces(r), 0, "workspaces were left behind");
}

Test(conformance_fixture, intact_fixture_passes, .fini = cleanup, .timeout = 600)
{
    run_fixture(&run, "none");
    const char *failing[] = {NULL};
    expect_failures(&run, failing);
}

Test(conformance_fixture, attach_ignoring_the_owner_fails_ownership, .fini = cleanup, .timeout = 600)
{
    run_fixture(&run, "attach_ignores_owner");
    const char *failing[] = {"attach_other_key_denied", NULL};
    expect_failures(&run, failing);
    const struct sr_result *res = sr_find(&run, "attach_other_key_denied");
    cr_assert(res && strstr(res->message, "returned SBX_OK; want SBX_E_DENIED"),
              "%s", res ? res->message : "missing");
    /* The message quotes the reference "fx<&>:...": escaped in the report. */
    cr_assert(strstr(res->message, "fx<&>:"), "%s", res->message);
    cr_assert_gt(sr_count_in_file(run.junit, "fx&lt;&amp;&gt;:"), 0);
    cr_assert_eq(sr_count_in_file(run.junit, "fx<&>"), 0);
}

Test(conformance_fixture, merged_streams_fail_stream_cases, .fini = cleanup, .timeout = 600)
{
    run_fixture(&run, "stderr_to_stdout");
    const char *failing[] = {"exec_stdout_stderr", "output_bounded", NULL};
    expect_failures(&run, failing);
}

Test(conformance_fixture, unconfined_reads_fail_escape_case, .fini = cleanup, .timeout = 600)
{
    run_fixture(&run, "read_unconfined");
    const char *failing[] = {"path_escape_read", NULL};
    expect_failures(&run, failing);
    const struct sr_result *res = sr_find(&run, "path_escape_read");
    cr_assert(res && strstr(res->message, "returned SBX_OK"), "%s",
              res ? res->message : "missing");
}

Test(conformance_fixture, buffered_output_fails_memory_bound, .fini = cleanup, .timeout = 600)
{
    run_fixture(&run, "hoard_output");
    const char *failing[] = {"output_bounded", NULL};
    expect_failures(&run, failing);
    const struct sr_result *res = sr_find(&run, "output_bounded");
    cr_assert(res && strstr(res->message, "peak RSS grew by"), "%s",
              res ? res->message : "missing");
}

Test(conformance_fixture, signal_death_reported_as_exit_fails_signal_case, .fini = cleanup,
     .timeout = 600)
{
    run_fixture(&run, "signal_as_exit");
    const char *failing[] = {"exec_killed_by_signal", NULL};
    expect_failures(&run, failing);
    const struct sr_result *res = sr_find(&run, "exec_killed_by_signal");
    cr_assert(res && strstr(res->message, "gave exit_code 0, term_signal 0") &&
                  strstr(res->message, "want -1, 15 (SIGTERM)"),
              "%s", res ? res->message : "missing");
}

Test(conformance_fixture, ignored_signal_fails_default_signals_case, .fini = cleanup,
     .timeout = 600)
{
    run_fixture(&run, "signal_ignored");
    const char *failing[] = {"exec_signals_default", NULL};
    expect_failures(&run, failing);
    const struct sr_result *res = sr_find(&run, "exec_signals_default");
    /* SIGPIPE is signal 13: bit 12 of SigIgn */
    cr_assert(res && strstr(res->message, "SigIgn:0000000000001000 SigBlk:"), "%s",
              res ? res->message : "missing");
}

Test(conformance_fixture, write_in_place_fails_atomic_write_case, .fini = cleanup,
     .timeout = 600)
{
    run_fixture(&run, "write_in_place");
    const char *failing[] = {"write_file_atomic", NULL};
    expect_failures(&run, failing);
    const struct sr_result *res = sr_find(&run, "write_file_atomic");
    /* The reader saw the half of the new content already written. */
    cr_assert(res && strstr(res->message, "while a write of new content was in "
                                          "progress gave 98304 bytes of the new "
                                          "content"),
              "%s", res ? res->message : "missing");
}

/* Every case that runs a command; with crash_in_exec and sigpipe_in_exec
 * each of them loses its process at its first exec. The others (lifecycle
 * and file cases without a command) pass in the same run. */
static const char *const exec_cases[] = {
    "create_idempotent_second_instance", "attach_after_restart",
    "attach_after_destroy", "exec_exit_codes", "exec_killed_by_signal",
    "exec_signals_default",
    "exec_argv_no_shell", "exec_missing_command", "exec_stdout_stderr",
    "exec_stdin", "exec_stdin_left_open", "exec_env", "exec_no_inherited_fds",
    "exec_cwd", "exec_cwd_missing", "file_binary_roundtrip", "file_read_fifo",
    "file_mode", "file_mode_invalid", "write_file_atomic",
    "path_escape_read", "path_escape_write", "cancel_running",
    "timeout_kills_children", "exec_leftovers_killed", "destroy_kills_running",
    "output_bounded", NULL};

/* Each failure names how the process died and the sandbox it left, which
 * the runner destroyed; the run went on to the summary and the report. */
static void expect_crashes(struct sr_run *r, const char *death)
{
    expect_failures(r, exec_cases);
    char want[160];
    snprintf(want, sizeof want, "case crashed: %s; sandbox left: provider "
                                "\"cfixture\" ref \"fx<&>:", death);
    for (size_t i = 0; exec_cases[i]; i++) {
        const struct sr_result *res = sr_find(r, exec_cases[i]);
        cr_assert(res, "%s missing", exec_cases[i]);
        cr_expect(!strncmp(res->message, want, strlen(want)), "%s: %s", res->name,
                  res->message);
        cr_expect(strstr(res->message, "(session key \"sbx-conformance/"),
                  "%s: %s", res->name, res->message);
        cr_expect(strstr(res->message, "), destroyed by the runner"), "%s: %s",
                  res->name, res->message);
    }
    const char *pass = sbx_conformance_case_name(0);
    cr_assert_eq(sr_find(r, pass)->outcome, SBX_CONFORMANCE_PASS, "%s", pass);
    /* The report has every case, the crash messages escaped. */
    char junit[160];
    snprintf(junit, sizeof junit, "message=\"case crashed: %s; sandbox left: "
                                  "provider &quot;cfixture&quot; ref "
                                  "&quot;fx&lt;&amp;&gt;:", death);
    size_t nexec = 0;
    while (exec_cases[nexec])
        nexec++;
    cr_assert_eq(sr_count_in_file(r->junit, junit), nexec, "%s", junit);
    /* The six cases without a command, and the two egress cases. */
    char summary[64];
    snprintf(summary, sizeof summary, "\n8 passed, %zu failed, ", nexec);
    cr_assert(strstr(r->output, summary), "%s", r->output);
}

Test(conformance_fixture, segfault_in_exec_fails_exec_cases_and_run_goes_on,
     .fini = cleanup, .timeout = 600)
{
    run_fixture(&run, "crash_in_exec");
    expect_crashes(&run, "killed by signal 11 (SIGSEGV)");
}

Test(conformance_fixture, sigpipe_in_exec_fails_exec_cases_and_run_goes_on,
     .fini = cleanup, .timeout = 600)
{
    run_fixture(&run, "sigpipe_in_exec");
    expect_crashes(&run, "killed by signal 13 (SIGPIPE)");
}

Test(conformance_fixture, case_past_its_deadline_is_killed, .fini = cleanup,
     .timeout = 120)
{
    /* exec sleeps 10 minutes: the 1 s deadline ends the case, the run goes
     * on with the next one. */
    struct sr_options extra = {.case_timeout_ms = 1000};
    run_fixture_with(&run, "hang_in_exec", "exec_exit_codes,destroy_twice", &extra);
    cr_assert_eq(run.nresults, 2);
    const struct sr_result *hung = sr_find(&run, "exec_exit_codes");
    cr_assert(hung);
    cr_assert_eq(hung->outcome, SBX_CONFORMANCE_FAIL);
    const char *want = "case timed out: killed after 1 s; sandbox left: provider "
                       "\"cfixture\" ref \"fx<&>:";
    cr_assert(!strncmp(hung->message, want, strlen(want)), "%s", hung->message);
    cr_assert(strstr(hung->message, "destroyed by the runner"), "%s", hung->message);
    cr_assert_eq(sr_find(&run, "destroy_twice")->outcome, SBX_CONFORMANCE_PASS);
    cr_assert_lt(run.summary.seconds, 30.0, "the deadline did not stop the case");
    cr_assert(strstr(run.output, "\n1 passed, 1 failed, 0 skipped\n"), "%s", run.output);
    cr_assert_eq(sr_xmllint(run.junit), 0);
    cr_assert_eq(sr_count_in_file(run.junit, "<failure "), 1);
    cr_assert_eq(sr_count_workspaces(&run), 0, "the hung case's sandbox was left");
}

Test(conformance_fixture, egress_set_that_merges_fails_exactness, .fini = cleanup, .timeout = 600)
{
    run_fixture_with(&run, "egress_merge", "egress_create_limited,egress_set_exact", NULL);
    const char *failing[] = {"egress_set_exact", NULL};
    expect_failures(&run, failing);
    const struct sr_result *res = sr_find(&run, "egress_set_exact");
    cr_assert(res && strstr(res->message, "after egress_set: the sandbox allows [a.example.com"),
              "%s", res ? res->message : "missing");
}

Test(conformance_fixture, egress_default_allow_fails_both, .fini = cleanup, .timeout = 600)
{
    run_fixture_with(&run, "egress_default_allow", "egress_create_limited,egress_set_exact", NULL);
    const char *failing[] = {"egress_create_limited", "egress_set_exact", NULL};
    expect_failures(&run, failing);
    const struct sr_result *res = sr_find(&run, "egress_create_limited");
    cr_assert(res && strstr(res->message, "want deny"), "%s", res ? res->message : "missing");
}

Test(conformance_fixture, egress_forgotten_on_attach_fails, .fini = cleanup, .timeout = 600)
{
    run_fixture_with(&run, "egress_forget", "egress_create_limited,egress_set_exact", NULL);
    const char *failing[] = {"egress_set_exact", NULL};
    expect_failures(&run, failing);
    const struct sr_result *res = sr_find(&run, "egress_set_exact");
    cr_assert(res && strstr(res->message, "after a restart and attach"), "%s",
              res ? res->message : "missing");
}

/* The cases of the rules provider.h states for exec, files and
 * references, with a case every break mode below leaves passing. */
static const char rule_cases[] = "attach_malformed_ref,exec_no_inherited_fds,exec_cwd_missing,"
                                 "file_read_fifo,file_mode_invalid,exec_leftovers_killed,"
                                 "destroy_kills_running,exec_exit_codes";

/* Run the rule cases against break mode `mode`: only `failing` fails, and
 * its message has `want`. */
static void expect_rule_failure(const char *mode, const char *filter, const char *failing,
                                const char *want)
{
    run_fixture_with(&run, mode, filter ? filter : rule_cases, NULL);
    const char *names[] = {failing, NULL};
    expect_failures(&run, names);
    const struct sr_result *res = sr_find(&run, failing);
    cr_assert(res && strstr(res->message, want), "%s", res ? res->message : "missing");
}

Test(conformance_fixture, blocking_fifo_read_fails_fifo_case, .fini = cleanup, .timeout = 120)
{
    expect_rule_failure("read_fifo_blocks", NULL, "file_read_fifo",
                        "read_file of a FIFO without a writer blocked");
}

Test(conformance_fixture, unchecked_mode_fails_mode_case, .fini = cleanup, .timeout = 120)
{
    expect_rule_failure("mode_unchecked", NULL, "file_mode_invalid",
                        "with mode 04755 returned SBX_OK");
}

Test(conformance_fixture, malformed_ref_not_found_fails_ref_case, .fini = cleanup,
     .timeout = 120)
{
    expect_rule_failure("ref_malformed_not_found", NULL, "attach_malformed_ref",
                        "returned SBX_E_NOT_FOUND");
}

Test(conformance_fixture, missing_cwd_run_in_root_fails_cwd_case, .fini = cleanup,
     .timeout = 120)
{
    expect_rule_failure("cwd_missing_root", NULL, "exec_cwd_missing",
                        "exec with cwd no/such/dir (a missing directory) returned SBX_OK");
}

Test(conformance_fixture, leaked_root_fd_fails_fd_case, .fini = cleanup, .timeout = 120)
{
    expect_rule_failure("fd_leak", NULL, "exec_no_inherited_fds",
                        "inherited descriptors beyond 0, 1 and 2: 9 -> /");
}

Test(conformance_fixture, group_only_kill_fails_leftovers_case, .fini = cleanup,
     .timeout = 120)
{
    /* exec runs without local here (no cwd check, host descriptors):
     * only cases that need neither run. */
    expect_rule_failure("leftovers_group_only",
                        "exec_leftovers_killed,timeout_kills_children,exec_exit_codes",
                        "exec_leftovers_killed", "still alive after exec returned");
    const struct sr_result *res = sr_find(&run, "exec_leftovers_killed");
    /* the background job was in the group and died; the setsid one lives
     * (and is killed here) */
    cr_assert(!strstr(res->message, "child="), "%s", res->message);
    const char *p = strstr(res->message, "pid=");
    cr_assert(p, "%s", res->message);
    long pid = strtol(p + 4, NULL, 10);
    cr_assert_gt(pid, 1);
    kill((pid_t)pid, SIGKILL);
}

Test(conformance_fixture, destroy_waiting_for_commands_fails_destroy_case, .fini = cleanup,
     .timeout = 120)
{
    expect_rule_failure("destroy_waits", NULL, "destroy_kills_running", "destroy took");
}

/* "cfusers" declares SBX_CAP_USERS, records its users and ignores who a
 * call acts as: every users case must fail, each saying why. */
Test(conformance_fixture, users_declared_but_not_honoured_fail, .fini = cleanup, .timeout = 600)
{
    char yaml[1024];
    snprintf(yaml, sizeof yaml,
             "  cfusers:\n"
             "    root: @ROOT@\n"
             "    inner: %s/local.so\n"
             "    break: none\n",
             SBX_TEST_PROVIDER_DIR);
    cr_assert_eq(sr_run_suite_with(&run, "cfusers", yaml,
                                   SBX_TEST_CF_FIXTURE_DIR ":" SBX_TEST_PROVIDER_DIR,
                                   SBX_CONFORMANCE_HUMAN,
                                   "users_exec_as_user,users_write_owned,"
                                   "users_root_only_refused,users_add_idempotent,"
                                   "exec_exit_codes",
                                   NULL),
                 0, "could not set up the run");
    cr_assert_eq(run.status, SBX_OK, "suite did not run: %s", run.err.message);
    const char *failing[] = {"users_exec_as_user", "users_write_owned",
                             "users_root_only_refused", "users_add_idempotent", NULL};
    expect_failures(&run, failing);
    const struct sr_result *res = sr_find(&run, "users_exec_as_user");
    cr_assert(res && strstr(res->message, "want uid 4141"), "%s",
              res ? res->message : "missing");
    res = sr_find(&run, "users_root_only_refused");
    cr_assert(res && strstr(res->message, "want SBX_E_DENIED"), "%s",
              res ? res->message : "missing");
    res = sr_find(&run, "exec_exit_codes");
    cr_assert(res && res->outcome == SBX_CONFORMANCE_PASS, "the fixture is broken beyond users");
}

/* ---- ABI 1.2: "cfproc" declares processes, PTY, file ops and ports ---- */

/* Every 1.2 case, and a core case every break mode leaves passing. */
static const char cases_1_2[] =
    "proc_exit_and_streams,proc_killed_by_signal,proc_stdin,proc_cursor_continues,"
    "proc_replay_bounded,proc_reattach,proc_wait_ms,proc_timeout,proc_signal,proc_list,"
    "proc_foreign_id,proc_concurrent,proc_destroy_kills,proc_output_flood,pty_terminal,"
    "pty_resize,pty_ctrl_c,"
    "pty_eof,pty_paste,fileops_list,fileops_list_large,fileops_stat,fileops_mkdir,"
    "fileops_remove,fileops_remove_symlink_out,fileops_rename,fileops_escape,ports_resolve,"
    "ports_reachable,exec_exit_codes,pause_idempotent_resume_idempotent,"
    "pause_freezes_processes,pause_keeps_workspace,exec_resumes_paused,"
    "attach_resumes_paused,destroy_paused,pause_gone,pool_handover,fork_copies_workspace,"
    "fork_own_identity,fork_shares_nothing,fork_source_keeps_running,"
    "fork_paused_source_stays_paused,fork_gone";

static void run_cfproc(const char *mode, const char *filter)
{
    setenv("SBX_CONFORMANCE_TIME_SCALE", "1", 1);
    char yaml[1024];
    snprintf(yaml, sizeof yaml,
             "  cfproc:\n"
             "    root: @ROOT@\n"
             "    inner: %s/local.so\n"
             "    break: %s\n",
             SBX_TEST_PROVIDER_DIR, mode);
    cr_assert_eq(sr_run_suite_with(&run, "cfproc", yaml,
                                   SBX_TEST_CF_FIXTURE_DIR ":" SBX_TEST_PROVIDER_DIR,
                                   SBX_CONFORMANCE_HUMAN, filter ? filter : cases_1_2, NULL),
                 0, "could not set up the run");
    cr_assert_eq(run.status, SBX_OK, "suite did not run: %s", run.err.message);
}

/* Exactly `failing` fail among the 1.2 cases, besides those of `may`
 * (which depend on how the output happened to be read), every other one
 * passes (none is skipped: cfproc declares every capability they need),
 * and the message of the first has `want`. */
static void expect_cfproc_may(const char *mode, const char *filter,
                              const char *const *failing, const char *const *may,
                              const char *want)
{
    run_cfproc(mode, filter);
    size_t nfail = 0, nmay = 0;
    for (size_t i = 0; i < run.nresults; i++) {
        const struct sr_result *res = &run.results[i];
        if (listed(failing, res->name)) {
            cr_expect_eq(res->outcome, SBX_CONFORMANCE_FAIL,
                         "%s should fail against cfproc with break %s", res->name, mode);
            nfail++;
        } else if (may && listed(may, res->name)) {
            nmay += res->outcome == SBX_CONFORMANCE_FAIL;
        } else {
            cr_expect_eq(res->outcome, SBX_CONFORMANCE_PASS, "break %s: %s: %s", mode,
                         res->name, res->message);
        }
    }
    cr_assert_eq(run.summary.failed, nfail + nmay, "break %s:\n%s", mode, run.output);
    if (want) {
        const struct sr_result *res = sr_find(&run, failing[0]);
        cr_assert(res && strstr(res->message, want), "%s", res ? res->message : "missing");
    }
    cr_assert_eq(sr_count_workspaces(&run), 0, "workspaces were left behind");
}

static void expect_cfproc(const char *mode, const char *filter, const char *const *failing,
                          const char *want)
{
    expect_cfproc_may(mode, filter, failing, NULL, want);
}

/* The cases of each 1.2 contract (a break mode runs those of its own), with
 * a core case that must keep passing. */
static const char proc_cases[] =
    "proc_exit_and_streams,proc_killed_by_signal,proc_stdin,proc_cursor_continues,"
    "proc_replay_bounded,proc_reattach,proc_wait_ms,proc_timeout,proc_signal,proc_list,"
    "proc_foreign_id,proc_concurrent,proc_destroy_kills,proc_output_flood,exec_exit_codes";
static const char pty_cases[] =
    "pty_terminal,pty_resize,pty_ctrl_c,pty_eof,pty_paste,proc_exit_and_streams";
static const char fileops_cases[] =
    "fileops_list,fileops_list_large,fileops_stat,fileops_mkdir,fileops_remove,"
    "fileops_remove_symlink_out,fileops_rename,fileops_escape,exec_exit_codes";
static const char ports_cases[] = "ports_resolve,ports_reachable,proc_exit_and_streams";
static const char pause_cases[] =
    "pause_idempotent_resume_idempotent,pause_freezes_processes,pause_keeps_workspace,"
    "exec_resumes_paused,attach_resumes_paused,destroy_paused,pause_gone,pool_handover,"
    "exec_exit_codes";
static const char fork_cases[] =
    "fork_copies_workspace,fork_own_identity,fork_shares_nothing,fork_source_keeps_running,"
    "fork_paused_source_stays_paused,fork_gone,exec_exit_codes";

Test(conformance_fixture, cfproc_intact_passes_every_1_2_case, .fini = cleanup, .timeout = 600)
{
    const char *failing[] = {NULL};
    expect_cfproc("none", NULL, failing, NULL);
    cr_assert_eq(run.nresults, 44);
}

Test(conformance_fixture, pty_not_a_terminal_fails_pty_cases, .fini = cleanup, .timeout = 600)
{
    const char *failing[] = {"pty_terminal", "pty_resize", "pty_ctrl_c", "pty_eof", "pty_paste",
                             NULL};
    expect_cfproc("pty_not_terminal", pty_cases, failing, "are not all terminals");
}

Test(conformance_fixture, silently_dropping_buffer_fails_replay_case, .fini = cleanup,
     .timeout = 600)
{
    const char *failing[] = {"proc_replay_bounded", NULL};
    expect_cfproc("buffer_drops_silently", proc_cases, failing, "final cursor 65536, lost 0");
}

Test(conformance_fixture, repeating_cursor_fails_cursor_cases, .fini = cleanup, .timeout = 600)
{
    /* Every case that reads a stream again after a first piece sees the
     * repeat; those whose output may all be there at the first read may
     * pass. */
    const char *failing[] = {"proc_cursor_continues", "proc_stdin", "proc_reattach",
                             "pty_resize", "pty_eof", "pty_paste", NULL};
    const char *may[] = {"proc_exit_and_streams", "proc_killed_by_signal", "proc_concurrent",
                         "proc_wait_ms", "proc_signal", "pty_terminal", "pty_ctrl_c",
                         "ports_reachable", NULL};
    expect_cfproc_may("cursor_repeats", NULL, failing, may, "a repeated or skipped byte");
    const struct sr_result *res = sr_find(&run, "proc_stdin");
    cr_assert(res && strstr(res->message, "stdout of cat was \"hello\\nhello\""), "%s",
              res ? res->message : "missing");
}

Test(conformance_fixture, process_surviving_destroy_fails_destroy_case, .fini = cleanup,
     .timeout = 600)
{
    const char *failing[] = {"proc_destroy_kills", NULL};
    expect_cfproc("proc_survives_destroy", proc_cases, failing, "still lists process");
    /* The survivors are group leaders on this machine: end them here. */
    const struct sr_result *res = sr_find(&run, "proc_destroy_kills");
    const char *p = strstr(res->message, "pids=");
    cr_assert(p, "%s", res->message);
    char *end = NULL;
    long a = strtol(p + 5, &end, 10), b = end && *end == ',' ? strtol(end + 1, NULL, 10) : 0;
    cr_assert(a > 1 && b > 1, "%s", res->message);
    kill(-(pid_t)a, SIGKILL);
    kill(-(pid_t)b, SIGKILL);
}

Test(conformance_fixture, listing_following_symlink_fails_escape_case, .fini = cleanup,
     .timeout = 600)
{
    const char *failing[] = {"fileops_escape", NULL};
    expect_cfproc("list_follows_symlink", fileops_cases, failing,
                  "listed the directory outside");
}

Test(conformance_fixture, port_on_every_interface_fails_reachability, .fini = cleanup,
     .timeout = 600)
{
    const char *failing[] = {"ports_reachable", NULL};
    expect_cfproc("port_all_interfaces", ports_cases, failing, "it is bound on every interface");
}

Test(conformance_fixture, unchecked_process_ids_fail_foreign_id_case, .fini = cleanup,
     .timeout = 600)
{
    const char *failing[] = {"proc_foreign_id", NULL};
    expect_cfproc("proc_ids_unchecked", proc_cases, failing,
                  "proc_read of another session's process id returned SBX_OK");
}

Test(conformance_fixture, growing_buffer_fails_flood_case, .fini = cleanup, .timeout = 600)
{
    /* buffer_bytes is ignored: the 64 KiB of proc_replay_bounded too */
    const char *failing[] = {"proc_output_flood", "proc_replay_bounded", NULL};
    expect_cfproc("buffer_grows", proc_cases, failing, NULL);
    /* which shows first depends on how fast the writer is (sanitizers) */
    const struct sr_result *res = sr_find(&run, "proc_output_flood");
    cr_assert(res && (strstr(res->message, "peak RSS grew by") ||
                      strstr(res->message, "kept more than 1 MiB")),
              "%s", res ? res->message : "missing");
}

/* SBX_CAP_PAUSE and SBX_CAP_POOL: each broken promise fails its case. */
Test(conformance_fixture, pause_that_stops_nothing_fails_the_freeze_case, .fini = cleanup,
     .timeout = 600)
{
    const char *failing[] = {"pause_freezes_processes", NULL};
    expect_cfproc("pause_keeps_running", pause_cases, failing, NULL);
}

Test(conformance_fixture, resume_that_loses_files_fails_the_workspace_cases, .fini = cleanup,
     .timeout = 600)
{
    /* every case that reads back a file written before the pause */
    const char *failing[] = {"pause_keeps_workspace", NULL};
    const char *may[] = {"exec_resumes_paused", "attach_resumes_paused", "destroy_paused",
                         "pause_freezes_processes", NULL};
    expect_cfproc_may("pause_loses_workspace", pause_cases, failing, may, NULL);
}

Test(conformance_fixture, ops_refused_while_paused_fail_the_resume_cases, .fini = cleanup,
     .timeout = 600)
{
    const char *failing[] = {"exec_resumes_paused", "attach_resumes_paused", NULL};
    const char *may[] = {"pause_freezes_processes", "pause_keeps_workspace", "destroy_paused",
                         NULL};
    expect_cfproc_may("resume_not_transparent", pause_cases, failing, may, NULL);
}

Test(conformance_fixture, pause_twice_refused_fails_the_idempotence_case, .fini = cleanup,
     .timeout = 600)
{
    const char *failing[] = {"pause_idempotent_resume_idempotent", NULL};
    expect_cfproc("pause_not_idempotent", pause_cases, failing, NULL);
}

Test(conformance_fixture, ownership_by_session_key_fails_the_handover, .fini = cleanup,
     .timeout = 600)
{
    const char *failing[] = {"pool_handover", NULL};
    expect_cfproc("pool_checks_session_key", pause_cases, failing,
                  "attach under another session key");
}

Test(conformance_fixture, fork_following_symlinks_fails_the_copy_case, .fini = cleanup,
     .timeout = 600)
{
    const char *failing[] = {"fork_copies_workspace", NULL};
    expect_cfproc("fork_follows_symlinks", fork_cases, failing,
                  "the fork's workspace is not the source's");
}

Test(conformance_fixture, fork_dropping_modes_fails_the_copy_case, .fini = cleanup,
     .timeout = 600)
{
    const char *failing[] = {"fork_copies_workspace", NULL};
    expect_cfproc("fork_drops_modes", fork_cases, failing, "source \"d 750 directory");
}

Test(conformance_fixture, fork_sharing_inodes_fails_shares_nothing, .fini = cleanup,
     .timeout = 600)
{
    const char *failing[] = {"fork_shares_nothing", NULL};
    expect_cfproc("fork_hardlinks", fork_cases, failing, "after writes on both sides");
}

Test(conformance_fixture, fork_open_to_the_old_key_fails_identity, .fini = cleanup,
     .timeout = 600)
{
    const char *failing[] = {"fork_own_identity", NULL};
    expect_cfproc("fork_keeps_old_key", fork_cases, failing,
                  "attach of the fork with the source's key returned SBX_OK");
}

Test(conformance_fixture, fork_killing_the_source_fails_keeps_running, .fini = cleanup,
     .timeout = 600)
{
    const char *failing[] = {"fork_source_keeps_running", NULL};
    /* the paused case's tick loop dies too, so it never ticks on */
    const char *may[] = {"fork_paused_source_stays_paused", NULL};
    expect_cfproc_may("fork_stops_source", fork_cases, failing, may,
                      "the source's process");
}

Test(conformance_fixture, fork_resuming_the_source_fails_stays_paused, .fini = cleanup,
     .timeout = 600)
{
    const char *failing[] = {"fork_paused_source_stays_paused", NULL};
    expect_cfproc("fork_resumes_source", fork_cases, failing,
                  "the paused source ran on after the fork");
}

Test(conformance_fixture, fork_of_a_destroyed_sandbox_fails_fork_gone, .fini = cleanup,
     .timeout = 600)
{
    const char *failing[] = {"fork_gone", NULL};
    expect_cfproc("fork_gone_unchecked", fork_cases, failing, "returned SBX_OK");
}
