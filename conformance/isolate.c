/*
 * isolate.c - run one case in its own process, so that a provider that
 * crashes the host process (SIGSEGV, abort, SIGPIPE), calls exit or hangs
 * fails that case instead of ending the whole run.
 *
 * The child opens its own contexts (libsbx contexts and their threads are
 * never shared across fork), runs the case with its usual cleanup and
 * sends the result. While it runs it announces every sandbox it creates,
 * so that when it dies the runner still knows what it left behind, says so
 * in the failure and tries to destroy it.
 */
#include "cf_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What the child needs; it lives in the parent's memory, copied by fork. */
struct case_job {
    const struct cf_case *c;
    const struct sbx_options *open_opts;
    const char *provider;
};

/* What the parent learned from the child's records. */
struct case_report {
    struct cf_tracked_sandbox sandboxes[CF_MAX_SANDBOXES];
    size_t nsandboxes;
    char failure[CF_MESSAGE_MAX]; /* first failure, while the case ran */
    bool has_result;
    int outcome;
    char message[CF_MESSAGE_MAX];
};

static void case_child(void *arg, int report_fd)
{
    const struct case_job *j = arg;
    struct cf_test t;
    if (cf_test_init(&t, j->c, j->open_opts, j->provider) != SBX_OK) {
        char outcome[16];
        snprintf(outcome, sizeof outcome, "%d", SBX_CONFORMANCE_FAIL);
        cf_channel_send(report_fd, CF_REC_RESULT, outcome,
                        "could not get random bytes for session keys");
        return;
    }
    t.report_fd = report_fd;
    j->c->run(&t);
    cf_test_cleanup(&t);
    char outcome[16];
    snprintf(outcome, sizeof outcome, "%d", t.outcome);
    cf_channel_send(report_fd, CF_REC_RESULT, outcome, t.message);
}

static void remember(struct case_report *r, const char *key, const char *ref)
{
    for (size_t i = 0; i < r->nsandboxes; i++)
        if (!strcmp(r->sandboxes[i].key, key) && !strcmp(r->sandboxes[i].ref, ref))
            return;
    if (r->nsandboxes == CF_MAX_SANDBOXES)
        return; /* the case's own table has the same bound */
    struct cf_tracked_sandbox *s = &r->sandboxes[r->nsandboxes++];
    snprintf(s->key, sizeof s->key, "%s", key);
    snprintf(s->ref, sizeof s->ref, "%s", ref);
}

static void on_case_record(void *ud, const struct cf_record *rec)
{
    struct case_report *r = ud;
    switch (rec->type) {
    case CF_REC_SANDBOX:
        remember(r, rec->a, rec->b);
        break;
    case CF_REC_FAILURE:
        if (!r->failure[0])
            snprintf(r->failure, sizeof r->failure, "%s", rec->a);
        break;
    case CF_REC_RESULT: {
        int o = atoi(rec->a);
        r->has_result = true;
        r->outcome = o == SBX_CONFORMANCE_PASS || o == SBX_CONFORMANCE_SKIP
                         ? o : SBX_CONFORMANCE_FAIL;
        snprintf(r->message, sizeof r->message, "%s", rec->b);
        break;
    }
    default:
        break; /* not sent by a case */
    }
}

static const char *outcome_word(int outcome)
{
    return outcome == SBX_CONFORMANCE_PASS ? "pass"
           : outcome == SBX_CONFORMANCE_SKIP ? "skip" : "fail";
}

void cf_isolate_case(const struct cf_case *c, const struct sbx_options *open_opts,
                     const char *provider, double timeout_s, int *outcome,
                     char *message)
{
    struct case_job job = {c, open_opts, provider};
    struct case_report *rep = calloc(1, sizeof *rep);
    if (!rep) {
        *outcome = SBX_CONFORMANCE_FAIL;
        snprintf(message, CF_MESSAGE_MAX, "out of memory");
        return;
    }
    struct cf_child_end end;
    sbx_error err;
    sbx_error_clear(&err);
    if (cf_child_run(case_child, &job, timeout_s, on_case_record, rep, &end, &err) !=
        SBX_OK) {
        *outcome = SBX_CONFORMANCE_FAIL;
        message[0] = '\0';
        cf_appendf(message, CF_MESSAGE_MAX, "could not start the case's process: %s",
                   err.message);
        free(rep);
        return;
    }
    bool clean = end.exited && end.exit_status == 0 && !end.timed_out;
    if (rep->has_result && clean) {
        *outcome = rep->outcome;
        snprintf(message, CF_MESSAGE_MAX, "%s", rep->message);
        free(rep);
        return;
    }

    *outcome = SBX_CONFORMANCE_FAIL;
    char how[128];
    cf_child_end_text(&end, how, sizeof how);
    if (end.timed_out)
        snprintf(message, CF_MESSAGE_MAX, "case timed out: killed after %g s",
                 timeout_s);
    else if (rep->has_result)
        snprintf(message, CF_MESSAGE_MAX, "case process %s after the case ended",
                 how);
    else if (end.signal)
        snprintf(message, CF_MESSAGE_MAX, "case crashed: %s", how);
    else
        snprintf(message, CF_MESSAGE_MAX, "case process %s before reporting its "
                 "result", how);
    /* The child's own cleanup may have destroyed some of these already;
     * destroy is idempotent, so trying again is safe. */
    cf_leftovers_destroy(open_opts, provider, rep->sandboxes, rep->nsandboxes,
                         timeout_s, message, CF_MESSAGE_MAX);
    if (rep->has_result)
        cf_appendf(message, CF_MESSAGE_MAX, "; the case had reported %s%s%s",
                   outcome_word(rep->outcome), rep->message[0] ? ": " : "",
                   rep->message);
    else if (rep->failure[0])
        cf_appendf(message, CF_MESSAGE_MAX, "; before that the case had failed: %s",
                   rep->failure);
    free(rep);
}
