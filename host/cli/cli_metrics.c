/*
 * cli_metrics.c - the values `sbx reconcile --metrics` serves and their
 * Prometheus text exposition (format 0.0.4): counters of the reconcile
 * passes, gauges read from the store after each pass (sessions, intents,
 * pools), and the op latency histograms and error counters folded from the
 * spool. Every series set is capped, so a hostile spool cannot grow the
 * page without bound. The metric names are documented in
 * docs/OPERATIONS.md.
 */
#include "metrics.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Upper bounds of the latency buckets, seconds (then +Inf). */
static const double bucket_le[] = {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                   0.5,   1,     2.5,  5,     10,  30,  60, 300};
#define NBUCKETS (sizeof bucket_le / sizeof bucket_le[0])

#define OP_SERIES_MAX 512   /* (provider, op) pairs */
#define ERR_SERIES_MAX 1024 /* (provider, op, code) triples */
#define ROWS_MAX 4096       /* store rows per gauge */

static const char *const pool_states[] = {"creating", "ready", "checking", "claimed"};
#define NPOOL_STATES 4

struct op_series {
    char provider[24], op[16];
    uint64_t buckets[NBUCKETS]; /* per bucket, not cumulative */
    uint64_t count, sum_ns;
};

struct err_series {
    char provider[24], op[16];
    int status;
    uint64_t count;
};

struct session_row {
    char *provider;
    const char *state; /* static */
    uint64_t n;
};

struct intent_row {
    char *provider;
    uint64_t n;
    int64_t max_age_ms;
};

struct pool_row {
    char *pool, *provider;
    uint64_t size;
    bool configured;
    uint64_t members[NPOOL_STATES];
};

/* What the store said at the last collection. */
struct snapshot {
    struct session_row *sessions;
    size_t nsessions;
    struct intent_row *intents;
    size_t nintents;
    struct pool_row *pools;
    size_t npools;
};

struct cli_metrics {
    pthread_mutex_t lock;
    struct cli_spool *spool;
    /* reconcile passes */
    uint64_t runs, failed_runs, item_failures, intents_cleaned, deletions;
    uint64_t pool_created, pool_replaced;
    uint64_t evict_paused, evict_destroyed, evict_in_use;
    double last_run_s, last_success_s, last_duration_s;
    /* the store */
    struct snapshot snap;
    uint64_t collect_failures;
    /* op samples */
    struct op_series *ops;
    size_t nops;
    struct err_series *errs;
    size_t nerrs;
    uint64_t samples_folded, samples_invalid, samples_dropped;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

struct cli_metrics *cli_metrics_new(void)
{
    struct cli_metrics *mx = calloc(1, sizeof *mx);
    if (!mx)
        return NULL;
    mx->ops = calloc(OP_SERIES_MAX, sizeof *mx->ops);
    mx->errs = calloc(ERR_SERIES_MAX, sizeof *mx->errs);
    if (!mx->ops || !mx->errs) {
        free(mx->ops);
        free(mx->errs);
        free(mx);
        return NULL;
    }
    pthread_mutex_init(&mx->lock, NULL);
    return mx;
}

static void snapshot_free(struct snapshot *s)
{
    for (size_t i = 0; i < s->nsessions; i++)
        free(s->sessions[i].provider);
    for (size_t i = 0; i < s->nintents; i++)
        free(s->intents[i].provider);
    for (size_t i = 0; i < s->npools; i++) {
        free(s->pools[i].pool);
        free(s->pools[i].provider);
    }
    free(s->sessions);
    free(s->intents);
    free(s->pools);
    memset(s, 0, sizeof *s);
}

void cli_metrics_free(struct cli_metrics *mx)
{
    if (!mx)
        return;
    snapshot_free(&mx->snap);
    pthread_mutex_destroy(&mx->lock);
    free(mx->ops);
    free(mx->errs);
    free(mx);
}

void cli_metrics_set_spool(struct cli_metrics *mx, struct cli_spool *spool)
{
    pthread_mutex_lock(&mx->lock);
    mx->spool = spool;
    pthread_mutex_unlock(&mx->lock);
}

void cli_metrics_pass(struct cli_metrics *mx, const struct sbx_reconcile_report *rep,
                      const struct sbx_pool_report *pools,
                      const struct sbx_evict_report *evict, bool ok, uint64_t duration_ns)
{
    pthread_mutex_lock(&mx->lock);
    mx->runs++;
    if (!ok)
        mx->failed_runs++;
    mx->item_failures += rep->failures + (pools ? pools->failures : 0);
    mx->intents_cleaned += rep->intents_cleaned;
    mx->deletions += rep->deletions_done;
    if (pools) {
        mx->pool_created += pools->created;
        mx->pool_replaced += pools->replaced;
    }
    if (evict) {
        mx->item_failures += evict->failures;
        mx->evict_paused += evict->paused;
        mx->evict_destroyed += evict->destroyed;
        mx->evict_in_use += evict->in_use;
    }
    mx->last_run_s = now_s();
    if (ok)
        mx->last_success_s = mx->last_run_s;
    mx->last_duration_s = duration_ns / 1e9;
    pthread_mutex_unlock(&mx->lock);
}

/* ---- collecting from the store ---- */

struct collect {
    struct snapshot s;
    bool failed;     /* out of memory or too many rows */
    char last[1025]; /* the last session key listed (store keys: <= 1024 bytes) */
};

static struct session_row *session_row(struct collect *c, const char *provider,
                                       const char *state)
{
    for (size_t i = 0; i < c->s.nsessions; i++)
        if (!strcmp(c->s.sessions[i].provider, provider) &&
            !strcmp(c->s.sessions[i].state, state))
            return &c->s.sessions[i];
    if (c->s.nsessions >= ROWS_MAX)
        return NULL;
    struct session_row *v = realloc(c->s.sessions, (c->s.nsessions + 1) * sizeof *v);
    if (!v)
        return NULL;
    c->s.sessions = v;
    struct session_row *r = &v[c->s.nsessions];
    if (!(r->provider = strdup(provider)))
        return NULL;
    r->state = state;
    r->n = 0;
    c->s.nsessions++;
    return r;
}

static int on_session(void *ud, const struct sbx_session_info *info)
{
    struct collect *c = ud;
    snprintf(c->last, sizeof c->last, "%s", info->session_key);
    struct session_row *r = session_row(c, info->provider,
                                        info->deleting ? "deleting"
                                        : info->paused ? "paused"
                                                       : "active");
    if (!r) {
        c->failed = true;
        return 1;
    }
    r->n++;
    return 0;
}

static int on_intent(void *ud, const struct sbx_intent_info *info)
{
    struct collect *c = ud;
    struct session_row *sr = session_row(c, info->provider, "provisioning");
    struct intent_row *r = NULL;
    for (size_t i = 0; i < c->s.nintents && !r; i++)
        if (!strcmp(c->s.intents[i].provider, info->provider))
            r = &c->s.intents[i];
    if (!r && c->s.nintents < ROWS_MAX) {
        struct intent_row *v = realloc(c->s.intents, (c->s.nintents + 1) * sizeof *v);
        if (v) {
            c->s.intents = v;
            r = &v[c->s.nintents];
            memset(r, 0, sizeof *r);
            if ((r->provider = strdup(info->provider)))
                c->s.nintents++;
            else
                r = NULL;
        }
    }
    if (!sr || !r) {
        c->failed = true;
        return 1;
    }
    sr->n++;
    r->n++;
    if (info->age_ms > r->max_age_ms)
        r->max_age_ms = info->age_ms;
    return 0;
}

static struct pool_row *pool_row(struct collect *c, const char *pool, const char *provider)
{
    for (size_t i = 0; i < c->s.npools; i++)
        if (!strcmp(c->s.pools[i].pool, pool))
            return &c->s.pools[i];
    if (c->s.npools >= ROWS_MAX)
        return NULL;
    struct pool_row *v = realloc(c->s.pools, (c->s.npools + 1) * sizeof *v);
    if (!v)
        return NULL;
    c->s.pools = v;
    struct pool_row *r = &v[c->s.npools];
    memset(r, 0, sizeof *r);
    r->pool = strdup(pool);
    r->provider = strdup(provider ? provider : "");
    if (!r->pool || !r->provider) {
        free(r->pool);
        free(r->provider);
        return NULL;
    }
    c->s.npools++;
    return r;
}

static int on_pool(void *ud, const struct sbx_pool_info *pool)
{
    struct collect *c = ud;
    struct pool_row *r = pool_row(c, pool->name, pool->provider);
    if (!r) {
        c->failed = true;
        return 1;
    }
    r->size = pool->size;
    r->configured = true;
    return 0;
}

static int on_member(void *ud, const struct sbx_pool_member_info *m)
{
    struct collect *c = ud;
    struct pool_row *r = pool_row(c, m->pool, m->provider);
    if (!r) {
        c->failed = true;
        return 1;
    }
    for (size_t i = 0; i < NPOOL_STATES; i++)
        if (m->state && !strcmp(m->state, pool_states[i]))
            r->members[i]++;
    return 0;
}

void cli_metrics_collect(struct cli_metrics *mx, sbx_sessions *m)
{
    struct collect c;
    memset(&c, 0, sizeof c);
    sbx_error err;
    bool ok = true;
    bool first = true;
    for (;;) {
        bool more = false;
        char after[sizeof c.last];
        snprintf(after, sizeof after, "%s", c.last);
        int rc = sbx_session_list(m, first ? NULL : after, 1000, on_session, &c, &more,
                                  &err);
        first = false;
        if (rc != SBX_OK || c.failed) {
            ok = false;
            break;
        }
        if (!more)
            break;
    }
    if (ok && (sbx_intent_list(m, on_intent, &c, &err) != SBX_OK || c.failed))
        ok = false;
    if (ok && (sbx_pools_list(m, on_pool, on_member, &c, &err) != SBX_OK || c.failed))
        ok = false;
    pthread_mutex_lock(&mx->lock);
    if (ok) {
        snapshot_free(&mx->snap);
        mx->snap = c.s;
    } else {
        mx->collect_failures++;
        snapshot_free(&c.s);
    }
    pthread_mutex_unlock(&mx->lock);
}

/* ---- op samples ---- */

void cli_metrics_sample(struct cli_metrics *mx, const char *provider, const char *op,
                        int status, uint64_t duration_ns)
{
    struct op_series *s = NULL;
    for (size_t i = 0; i < mx->nops && !s; i++)
        if (!strcmp(mx->ops[i].provider, provider) && !strcmp(mx->ops[i].op, op))
            s = &mx->ops[i];
    if (!s) {
        if (mx->nops >= OP_SERIES_MAX) {
            mx->samples_dropped++;
            return;
        }
        s = &mx->ops[mx->nops++];
        snprintf(s->provider, sizeof s->provider, "%s", provider);
        snprintf(s->op, sizeof s->op, "%s", op);
    }
    double secs = duration_ns / 1e9;
    size_t b = 0;
    while (b < NBUCKETS && secs > bucket_le[b])
        b++;
    if (b < NBUCKETS)
        s->buckets[b]++;
    s->count++;
    s->sum_ns += duration_ns;
    mx->samples_folded++;
    if (status == 0)
        return;
    struct err_series *e = NULL;
    for (size_t i = 0; i < mx->nerrs && !e; i++)
        if (mx->errs[i].status == status && !strcmp(mx->errs[i].provider, provider) &&
            !strcmp(mx->errs[i].op, op))
            e = &mx->errs[i];
    if (!e) {
        if (mx->nerrs >= ERR_SERIES_MAX) {
            mx->samples_dropped++;
            return;
        }
        e = &mx->errs[mx->nerrs++];
        snprintf(e->provider, sizeof e->provider, "%s", provider);
        snprintf(e->op, sizeof e->op, "%s", op);
        e->status = status;
    }
    e->count++;
}

void cli_metrics_samples_invalid(struct cli_metrics *mx, uint64_t n)
{
    mx->samples_invalid += n;
}

/* ---- exposition ---- */

/* The symbolic name of an sbx status (abi/sbx/types.h); later codes as
 * "SBX_E_<number>". */
static const char *code_name(int status, char buf[16])
{
    static const char *const names[] = {
        "SBX_OK",          "SBX_E_NOT_FOUND", "SBX_E_DENIED",   "SBX_E_UNSUPPORTED",
        "SBX_E_INVALID",   "SBX_E_TIMEOUT",   "SBX_E_CANCELLED", "SBX_E_UNAVAILABLE",
        "SBX_E_PROTOCOL",  "SBX_E_IO",        "SBX_E_NOMEM",    "SBX_E_EXISTS",
        "SBX_E_CONFIG",    "SBX_E_ABI",       "SBX_E_NOT_EXEC", "SBX_E_NO_COMMAND",
        "SBX_E_INTERNAL"};
    if (status >= 0 && (size_t)status < sizeof names / sizeof names[0])
        return names[status];
    snprintf(buf, 16, "SBX_E_%d", status);
    return buf;
}

/* A label value escaped as the text format wants: \\, \", \n. */
static void put_value(FILE *f, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\')
            fputs("\\\\", f);
        else if (*v == '"')
            fputs("\\\"", f);
        else if (*v == '\n')
            fputs("\\n", f);
        else
            fputc(*v, f);
    }
}

static void head(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void labels2(FILE *f, const char *k1, const char *v1, const char *k2, const char *v2)
{
    fprintf(f, "{%s=\"", k1);
    put_value(f, v1);
    if (k2) {
        fprintf(f, "\",%s=\"", k2);
        put_value(f, v2);
    }
    fputs("\"}", f);
}

static void render_reconcile(FILE *f, const struct cli_metrics *mx)
{
    head(f, "sbx_reconcile_runs_total", "counter", "Reconcile passes run.");
    fprintf(f, "sbx_reconcile_runs_total %llu\n", (unsigned long long)mx->runs);
    head(f, "sbx_reconcile_failures_total", "counter",
         "Reconcile passes that failed (an item or the store; retried next pass).");
    fprintf(f, "sbx_reconcile_failures_total %llu\n", (unsigned long long)mx->failed_runs);
    head(f, "sbx_reconcile_item_failures_total", "counter",
         "Items (intents, deletions, pool members) a pass could not finish.");
    fprintf(f, "sbx_reconcile_item_failures_total %llu\n",
            (unsigned long long)mx->item_failures);
    head(f, "sbx_reconcile_intents_cleaned_total", "counter",
         "Provisioning intents of dead or expired workers cleaned up.");
    fprintf(f, "sbx_reconcile_intents_cleaned_total %llu\n",
            (unsigned long long)mx->intents_cleaned);
    head(f, "sbx_reconcile_deletions_total", "counter",
         "Interrupted session deletions finished.");
    fprintf(f, "sbx_reconcile_deletions_total %llu\n", (unsigned long long)mx->deletions);
    head(f, "sbx_pool_members_created_total", "counter", "Warm pool members made ready.");
    fprintf(f, "sbx_pool_members_created_total %llu\n",
            (unsigned long long)mx->pool_created);
    head(f, "sbx_pool_members_replaced_total", "counter",
         "Ready warm pool members destroyed after a failed health check.");
    fprintf(f, "sbx_pool_members_replaced_total %llu\n",
            (unsigned long long)mx->pool_replaced);
    head(f, "sbx_evictions_total", "counter",
         "Idle sessions paused (idle_pause) or deleted (idle_destroy) by eviction.");
    fprintf(f, "sbx_evictions_total{action=\"pause\"} %llu\n",
            (unsigned long long)mx->evict_paused);
    fprintf(f, "sbx_evictions_total{action=\"destroy\"} %llu\n",
            (unsigned long long)mx->evict_destroyed);
    head(f, "sbx_eviction_skipped_in_use_total", "counter",
         "Idle-limited sessions eviction left alone because a command was running.");
    fprintf(f, "sbx_eviction_skipped_in_use_total %llu\n",
            (unsigned long long)mx->evict_in_use);
    head(f, "sbx_reconcile_last_run_timestamp_seconds", "gauge",
         "When the last pass ended (0: none yet).");
    fprintf(f, "sbx_reconcile_last_run_timestamp_seconds %.3f\n", mx->last_run_s);
    head(f, "sbx_reconcile_last_success_timestamp_seconds", "gauge",
         "When the last pass that succeeded ended (0: none yet).");
    fprintf(f, "sbx_reconcile_last_success_timestamp_seconds %.3f\n", mx->last_success_s);
    head(f, "sbx_reconcile_last_duration_seconds", "gauge", "How long the last pass took.");
    fprintf(f, "sbx_reconcile_last_duration_seconds %.6f\n", mx->last_duration_s);
    head(f, "sbx_store_collect_failures_total", "counter",
         "Times reading sessions, intents or pools from the store failed.");
    fprintf(f, "sbx_store_collect_failures_total %llu\n",
            (unsigned long long)mx->collect_failures);
}

static void render_store(FILE *f, const struct snapshot *s)
{
    head(f, "sbx_sessions", "gauge",
         "Sessions by provider and state (active, deleting, provisioning), at the last "
         "pass.");
    for (size_t i = 0; i < s->nsessions; i++) {
        fputs("sbx_sessions", f);
        labels2(f, "provider", s->sessions[i].provider, "state", s->sessions[i].state);
        fprintf(f, " %llu\n", (unsigned long long)s->sessions[i].n);
    }
    head(f, "sbx_provisioning_intents", "gauge",
         "Provisioning intents (sessions whose sandbox is being made) by provider.");
    for (size_t i = 0; i < s->nintents; i++) {
        fputs("sbx_provisioning_intents", f);
        labels2(f, "provider", s->intents[i].provider, NULL, NULL);
        fprintf(f, " %llu\n", (unsigned long long)s->intents[i].n);
    }
    head(f, "sbx_provisioning_intent_max_age_seconds", "gauge",
         "Age of the provider's intent not updated for longest.");
    for (size_t i = 0; i < s->nintents; i++) {
        fputs("sbx_provisioning_intent_max_age_seconds", f);
        labels2(f, "provider", s->intents[i].provider, NULL, NULL);
        fprintf(f, " %.3f\n", s->intents[i].max_age_ms / 1e3);
    }
    head(f, "sbx_pool_size", "gauge",
         "Members a configured warm pool is kept at (0: a pool no longer configured).");
    for (size_t i = 0; i < s->npools; i++) {
        fputs("sbx_pool_size", f);
        labels2(f, "pool", s->pools[i].pool, "provider", s->pools[i].provider);
        fprintf(f, " %llu\n", (unsigned long long)(s->pools[i].configured ? s->pools[i].size : 0));
    }
    head(f, "sbx_pool_members", "gauge",
         "Warm pool members by state (creating, ready, checking, claimed).");
    for (size_t i = 0; i < s->npools; i++)
        for (size_t k = 0; k < NPOOL_STATES; k++) {
            fputs("sbx_pool_members{pool=\"", f);
            put_value(f, s->pools[i].pool);
            fputs("\",provider=\"", f);
            put_value(f, s->pools[i].provider);
            fprintf(f, "\",state=\"%s\"} %llu\n", pool_states[k],
                    (unsigned long long)s->pools[i].members[k]);
        }
}

static void render_ops(FILE *f, const struct cli_metrics *mx)
{
    head(f, "sbx_op_duration_seconds", "histogram",
         "Provider operation latency as the calling process saw it, by provider and op.");
    for (size_t i = 0; i < mx->nops; i++) {
        const struct op_series *s = &mx->ops[i];
        uint64_t cum = 0;
        for (size_t b = 0; b < NBUCKETS; b++) {
            cum += s->buckets[b];
            fprintf(f, "sbx_op_duration_seconds_bucket{provider=\"%s\",op=\"%s\",le=\"%g\"} %llu\n",
                    s->provider, s->op, bucket_le[b], (unsigned long long)cum);
        }
        fprintf(f, "sbx_op_duration_seconds_bucket{provider=\"%s\",op=\"%s\",le=\"+Inf\"} %llu\n",
                s->provider, s->op, (unsigned long long)s->count);
        fprintf(f, "sbx_op_duration_seconds_sum{provider=\"%s\",op=\"%s\"} %.9f\n", s->provider,
                s->op, s->sum_ns / 1e9);
        fprintf(f, "sbx_op_duration_seconds_count{provider=\"%s\",op=\"%s\"} %llu\n",
                s->provider, s->op, (unsigned long long)s->count);
    }
    head(f, "sbx_provider_errors_total", "counter",
         "Provider operations that failed, by provider, op and sbx status code.");
    for (size_t i = 0; i < mx->nerrs; i++) {
        char buf[16];
        fprintf(f, "sbx_provider_errors_total{provider=\"%s\",op=\"%s\",code=\"%s\"} %llu\n",
                mx->errs[i].provider, mx->errs[i].op, code_name(mx->errs[i].status, buf),
                (unsigned long long)mx->errs[i].count);
    }
    head(f, "sbx_op_samples_total", "counter",
         "Op samples read from the spool: folded, invalid (skipped), dropped (over the "
         "series limit).");
    fprintf(f, "sbx_op_samples_total{result=\"folded\"} %llu\n",
            (unsigned long long)mx->samples_folded);
    fprintf(f, "sbx_op_samples_total{result=\"invalid\"} %llu\n",
            (unsigned long long)mx->samples_invalid);
    fprintf(f, "sbx_op_samples_total{result=\"dropped\"} %llu\n",
            (unsigned long long)mx->samples_dropped);
}

char *cli_metrics_render(struct cli_metrics *mx, size_t *len)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (!f)
        return NULL;
    pthread_mutex_lock(&mx->lock);
    if (mx->spool)
        cli_spool_fold(mx->spool, mx);
    head(f, "sbx_build_info", "gauge", "The sbx version serving these metrics.");
    fprintf(f, "sbx_build_info{version=\"%s\"} 1\n", SBX_VERSION);
    render_reconcile(f, mx);
    render_store(f, &mx->snap);
    render_ops(f, mx);
    pthread_mutex_unlock(&mx->lock);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}
