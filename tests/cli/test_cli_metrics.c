/*
 * test_cli_metrics.c - `sbx reconcile --watch --metrics ADDR`, scraped with
 * libcurl as Prometheus would: the page parsed as the text exposition
 * format (HELP and TYPE lines, metric and label syntax, histogram buckets
 * cumulative with +Inf equal to _count), values matching what other sbx
 * processes did (sessions created on the local provider, ops timed, a
 * failed op under its error code), hostile spool files skipped, nothing
 * recorded while no server runs, non-loopback addresses and a port in use
 * refused with clear errors.
 */
#include "cli_harness.h"
#include "op_samples.h"

#include <criterion/criterion.h>
#include <curl/curl.h>

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static struct cli_env env;
static pid_t running_server; /* a server a failed assertion left running */

static void setup(void)
{
    cli_env_init(&env);
    cli_env_local_config(&env);
}

static void teardown(void)
{
    if (running_server > 0 && !cli_pid_gone(running_server))
        kill(running_server, SIGKILL);
    running_server = 0;
    cli_env_fini(&env);
}

TestSuite(cli_metrics, .init = setup, .fini = teardown, .timeout = 60);

/* ---- scraping ---- */

struct buf {
    char *p;
    size_t n;
};

static size_t on_body(char *data, size_t size, size_t nmemb, void *ud)
{
    struct buf *b = ud;
    size_t k = size * nmemb;
    char *p = realloc(b->p, b->n + k + 1);
    cr_assert_not_null(p);
    memcpy(p + b->n, data, k);
    b->p = p;
    b->n += k;
    b->p[b->n] = '\0';
    return k;
}

/* GET (or `method`) url; returns the HTTP status, the body in *body (malloc'd)
 * and the content type in ctype. */
static long http(const char *url, const char *method, char **body, char *ctype, size_t ctlen)
{
    CURL *c = curl_easy_init();
    cr_assert_not_null(c);
    struct buf b = {NULL, 0};
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    if (method)
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    CURLcode rc = curl_easy_perform(c);
    cr_assert_eq(rc, CURLE_OK, "GET %s: %s", url, curl_easy_strerror(rc));
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    char *ct = NULL;
    curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
    if (ctype)
        snprintf(ctype, ctlen, "%s", ct ? ct : "");
    curl_easy_cleanup(c);
    *body = b.p ? b.p : strdup("");
    return status;
}

/* ---- a small parser of the text exposition format (0.0.4) ---- */

#define MAX_SAMPLES 4096

struct sample {
    char name[128];
    char labels[512]; /* canonical: k="v",k="v" in page order, without le */
    char le[256];     /* the le label of a _bucket, else "" */
    double value;
};

struct page {
    struct sample s[MAX_SAMPLES];
    size_t n;
    /* families: name and type */
    char fam[256][128];
    char type[256][16];
    size_t nfam;
};

static bool name_char(char c, bool first)
{
    return isalpha((unsigned char)c) || c == '_' || c == ':' ||
           (!first && isdigit((unsigned char)c));
}

static const char *family_type(const struct page *pg, const char *fam)
{
    for (size_t i = 0; i < pg->nfam; i++)
        if (!strcmp(pg->fam[i], fam))
            return pg->type[i];
    return NULL;
}

/* The family a sample belongs to: its name, or without _bucket/_sum/_count
 * for a histogram. */
static void family_of(const struct page *pg, const char *name, char *out, size_t len)
{
    static const char *const sfx[] = {"_bucket", "_sum", "_count"};
    for (size_t i = 0; i < 3; i++) {
        size_t n = strlen(name), k = strlen(sfx[i]);
        if (n > k && !strcmp(name + n - k, sfx[i])) {
            char base[128];
            snprintf(base, sizeof base, "%.*s", (int)(n - k), name);
            const char *t = family_type(pg, base);
            if (t && !strcmp(t, "histogram")) {
                snprintf(out, len, "%s", base);
                return;
            }
        }
    }
    snprintf(out, len, "%s", name);
}

static double parse_value(const char *v)
{
    if (!strcmp(v, "+Inf"))
        return INFINITY;
    if (!strcmp(v, "-Inf"))
        return -INFINITY;
    if (!strcmp(v, "NaN"))
        return NAN;
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    cr_assert(*v && !*end && !errno, "bad sample value '%s'", v);
    return d;
}

/* Parse and check the whole page. */
static void parse_page(const char *text, struct page *pg)
{
    memset(pg, 0, sizeof *pg);
    cr_assert(text[0] && text[strlen(text) - 1] == '\n', "page must end with a newline");
    char *copy = strdup(text), *save = NULL;
    char seen_samples[256][128];
    size_t nseen = 0;
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '#') {
            char kw[8], name[128], rest[512] = "";
            int k = sscanf(line, "# %7s %127s %511[^\n]", kw, name, rest);
            cr_assert(k >= 2, "bad comment line: %s", line);
            for (size_t i = 0; name[i]; i++)
                cr_assert(name_char(name[i], i == 0), "bad metric name in: %s", line);
            if (!strcmp(kw, "TYPE")) {
                cr_assert(!strcmp(rest, "counter") || !strcmp(rest, "gauge") ||
                              !strcmp(rest, "histogram") || !strcmp(rest, "summary") ||
                              !strcmp(rest, "untyped"),
                          "bad type: %s", line);
                cr_assert_null(family_type(pg, name), "second TYPE for %s", name);
                for (size_t i = 0; i < nseen; i++)
                    cr_assert(strcmp(seen_samples[i], name), "TYPE of %s after its samples",
                              name);
                cr_assert_lt(pg->nfam, 256);
                snprintf(pg->fam[pg->nfam], sizeof pg->fam[0], "%s", name);
                cr_assert_lt(strlen(rest), sizeof pg->type[0]);
                memcpy(pg->type[pg->nfam], rest, strlen(rest) + 1);
                pg->nfam++;
            } else {
                cr_assert_str_eq(kw, "HELP", "unknown comment: %s", line);
                cr_assert(rest[0], "empty HELP: %s", line);
            }
            continue;
        }
        cr_assert_lt(pg->n, MAX_SAMPLES);
        struct sample *s = &pg->s[pg->n];
        const char *p = line;
        size_t i = 0;
        while (name_char(*p, i == 0) && i + 1 < sizeof s->name)
            s->name[i++] = *p++;
        cr_assert(i > 0, "no metric name: %s", line);
        size_t ln = 0;
        if (*p == '{') {
            p++;
            while (*p != '}') {
                char lname[64];
                size_t j = 0;
                while (name_char(*p, j == 0) && *p != ':' && j + 1 < sizeof lname)
                    lname[j++] = *p++;
                lname[j] = '\0';
                cr_assert(j > 0 && *p == '=' && p[1] == '"', "bad label in: %s", line);
                p += 2;
                char val[256];
                size_t v = 0;
                while (*p != '"') {
                    cr_assert(*p && *p != '\n', "unterminated label value: %s", line);
                    if (*p == '\\') {
                        p++;
                        cr_assert(*p == '\\' || *p == '"' || *p == 'n', "bad escape: %s",
                                  line);
                    }
                    cr_assert_lt(v + 1, sizeof val);
                    val[v++] = *p++;
                }
                val[v] = '\0';
                p++;
                if (!strcmp(lname, "le"))
                    snprintf(s->le, sizeof s->le, "%s", val);
                else
                    ln += (size_t)snprintf(s->labels + ln, sizeof s->labels - ln, "%s%s=\"%s\"",
                                           ln ? "," : "", lname, val);
                if (*p == ',')
                    p++;
                else
                    cr_assert(*p == '}', "bad label list: %s", line);
            }
            p++;
        }
        cr_assert(*p == ' ', "no value separator: %s", line);
        p++;
        char val[64];
        cr_assert(sscanf(p, "%63s", val) == 1, "no value: %s", line);
        s->value = parse_value(val);
        char fam[128];
        family_of(pg, s->name, fam, sizeof fam);
        cr_assert_not_null(family_type(pg, fam), "sample %s before its TYPE", s->name);
        if (nseen < 256)
            snprintf(seen_samples[nseen++], sizeof seen_samples[0], "%s", fam);
        pg->n++;
    }
    free(copy);
    /* every family has a HELP too */
    for (size_t f = 0; f < pg->nfam; f++) {
        char help[160];
        snprintf(help, sizeof help, "# HELP %s ", pg->fam[f]);
        cr_assert_not_null(strstr(text, help), "no HELP for %s", pg->fam[f]);
    }
    /* histograms: per series, buckets with increasing le, counts
     * non-decreasing, the last +Inf, equal to _count; a _sum present */
    for (size_t f = 0; f < pg->nfam; f++) {
        if (strcmp(pg->type[f], "histogram"))
            continue;
        char bucket[160], count[160], sum[160];
        snprintf(bucket, sizeof bucket, "%s_bucket", pg->fam[f]);
        snprintf(count, sizeof count, "%s_count", pg->fam[f]);
        snprintf(sum, sizeof sum, "%s_sum", pg->fam[f]);
        for (size_t i = 0; i < pg->n; i++) {
            if (strcmp(pg->s[i].name, count))
                continue;
            const char *labels = pg->s[i].labels;
            double prev_le = -INFINITY, prev = 0;
            bool inf = false, has_sum = false;
            size_t nb = 0;
            for (size_t k = 0; k < pg->n; k++) {
                if (!strcmp(pg->s[k].name, sum) && !strcmp(pg->s[k].labels, labels))
                    has_sum = true;
                if (strcmp(pg->s[k].name, bucket) || strcmp(pg->s[k].labels, labels))
                    continue;
                cr_assert(!inf, "bucket after +Inf for %s{%s}", pg->fam[f], labels);
                double le = parse_value(pg->s[k].le);
                cr_assert_gt(le, prev_le, "le not increasing for %s{%s}", pg->fam[f], labels);
                cr_assert_geq(pg->s[k].value, prev, "buckets not cumulative: %s{%s} le=%s",
                              pg->fam[f], labels, pg->s[k].le);
                prev_le = le;
                prev = pg->s[k].value;
                inf = isinf(le);
                nb++;
            }
            cr_assert(nb > 1 && inf, "no +Inf bucket for %s{%s}", pg->fam[f], labels);
            cr_assert_eq(prev, pg->s[i].value, "+Inf %g != _count %g for %s{%s}", prev,
                         pg->s[i].value, pg->fam[f], labels);
            cr_assert(has_sum, "no _sum for %s{%s}", pg->fam[f], labels);
        }
    }
}

/* The value of name{labels} (labels without le, in page order), or -1. */
static double value_of(const struct page *pg, const char *name, const char *labels)
{
    for (size_t i = 0; i < pg->n; i++)
        if (!strcmp(pg->s[i].name, name) && !strcmp(pg->s[i].labels, labels))
            return pg->s[i].value;
    return -1;
}

/* ---- the server ---- */

struct server {
    struct cli_proc p;
    char url[256];
};

static void start_server(struct server *sv)
{
    cli_spawn(&env,
              (const char *[]){"reconcile", "--watch", "--interval", "100ms", "--metrics",
                               "127.0.0.1:0", NULL},
              CLI_STDIN_NULL, &sv->p);
    running_server = sv->p.pid;
    char line[256];
    cr_assert(cli_read_line(&sv->p, line, sizeof line, 10000), "no metrics line");
    cr_assert(!strncmp(line, "metrics: http://127.0.0.1:", 26), "%s", line);
    snprintf(sv->url, sizeof sv->url, "%s", line + 9);
}

static void stop_server(struct server *sv)
{
    kill(sv->p.pid, SIGTERM);
    cr_assert_eq(cli_wait(&sv->p, 10000), 0, "reconcile did not stop cleanly on SIGTERM");
    running_server = 0;
}

/* Scrape until `done` holds for the parsed page (the store gauges are read
 * after each 100 ms pass), at most 10 s. */
static void scrape_until(const struct server *sv, struct page *pg,
                         bool (*done)(const struct page *), char *ctype, size_t ctlen)
{
    long long deadline = cli_now_ms() + 10000;
    for (;;) {
        char *body;
        long st = http(sv->url, NULL, &body, ctype, ctlen);
        cr_assert_eq(st, 200, "%ld: %s", st, body);
        parse_page(body, pg);
        free(body);
        if (done(pg))
            return;
        cr_assert_lt(cli_now_ms(), deadline, "the metrics never showed what was done");
        usleep(100 * 1000);
    }
}

/* Prometheus's own linter on the page, when it is installed (Debian's
 * prometheus package has promtool; the test does not require it). */
static void promtool_lint(const char *body)
{
    if (access("/usr/bin/promtool", X_OK) != 0)
        return;
    char path[8192], cmd[8300];
    snprintf(path, sizeof path, "%s/page.txt", env.dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(body, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "/usr/bin/promtool check metrics <'%s' 2>&1", path);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    char out[4096];
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    cr_assert_eq(st, 0, "promtool check metrics: %s", out);
}

static void run_ok(const char *const *args)
{
    struct cli_result r;
    cli_run(&env, args, NULL, 30000, &r);
    cr_assert_eq(r.status, 0, "%s: %s%s", args[0], r.out, r.err);
    cli_result_free(&r);
}

static bool did_work(const struct page *pg)
{
    return value_of(pg, "sbx_sessions", "provider=\"local\",state=\"active\"") == 2 &&
           value_of(pg, "sbx_provider_errors_total",
                    "provider=\"local\",op=\"read\",code=\"SBX_E_NOT_FOUND\"") == 1 &&
           value_of(pg, "sbx_op_duration_seconds_count", "provider=\"local\",op=\"exec\"") == 2 &&
           value_of(pg, "sbx_reconcile_runs_total", "") >= 1;
}

Test(cli_metrics, a_scrape_shows_what_other_processes_did)
{
    struct server sv;
    start_server(&sv);
    run_ok((const char *[]){"create", "one", NULL});
    run_ok((const char *[]){"create", "two", NULL});
    run_ok((const char *[]){"exec", "one", "--", "true", NULL});
    struct cli_result r;
    cli_run(&env, (const char *[]){"exec", "two", "--", "sh", "-c", "exit 3", NULL}, NULL,
            30000, &r);
    cr_assert_eq(r.status, 3, "%s", r.err);
    cli_result_free(&r);
    cli_run(&env, (const char *[]){"read", "one", "no-such-file", NULL}, NULL, 30000, &r);
    cr_assert_neq(r.status, 0);
    cli_result_free(&r);

    static struct page pg;
    char ctype[128];
    scrape_until(&sv, &pg, did_work, ctype, sizeof ctype);
    cr_assert(strstr(ctype, "text/plain") && strstr(ctype, "version=0.0.4"), "%s", ctype);
    cr_assert_str_eq(family_type(&pg, "sbx_op_duration_seconds"), "histogram");
    cr_assert_str_eq(family_type(&pg, "sbx_provider_errors_total"), "counter");
    cr_assert_str_eq(family_type(&pg, "sbx_sessions"), "gauge");
    cr_assert_str_eq(family_type(&pg, "sbx_reconcile_runs_total"), "counter");
    cr_assert_eq(value_of(&pg, "sbx_reconcile_failures_total", ""), 0);
    /* two creates (each a `create` op), one failed read, nothing failed
     * otherwise: an exec whose command exits 3 is not a provider error */
    cr_assert_eq(value_of(&pg, "sbx_op_duration_seconds_count",
                          "provider=\"local\",op=\"create\""), 2);
    cr_assert_eq(value_of(&pg, "sbx_provider_errors_total",
                          "provider=\"local\",op=\"exec\",code=\"SBX_E_NOT_FOUND\""), -1);
    double sum = value_of(&pg, "sbx_op_duration_seconds_sum", "provider=\"local\",op=\"exec\"");
    cr_assert(sum > 0 && sum < 30, "exec latency sum %g", sum);
    cr_assert_eq(value_of(&pg, "sbx_op_samples_total", "result=\"invalid\""), 0);
    char *page;
    cr_assert_eq(http(sv.url, NULL, &page, NULL, 0), 200);
    promtool_lint(page);
    free(page);

    /* a session deleted shows up at the next pass */
    run_ok((const char *[]){"destroy", "two", NULL});
    long long deadline = cli_now_ms() + 10000;
    for (;;) {
        char *body;
        cr_assert_eq(http(sv.url, NULL, &body, NULL, 0), 200);
        parse_page(body, &pg);
        free(body);
        if (value_of(&pg, "sbx_sessions", "provider=\"local\",state=\"active\"") == 1)
            break;
        cr_assert_lt(cli_now_ms(), deadline);
        usleep(100 * 1000);
    }

    /* only GET /metrics */
    char url[160], *body;
    snprintf(url, sizeof url, "%.*s/other", (int)(strlen(sv.url) - strlen("/metrics")), sv.url);
    cr_assert_eq(http(url, NULL, &body, NULL, 0), 404);
    free(body);
    cr_assert_eq(http(sv.url, "POST", &body, NULL, 0), 405);
    free(body);
    stop_server(&sv);
}

static void start_server_with(struct server *sv, const char *config)
{
    cli_spawn(&env,
              (const char *[]){"reconcile", "--watch", "--interval", "100ms", "--config", config,
                               "--metrics", "127.0.0.1:0", NULL},
              CLI_STDIN_NULL, &sv->p);
    running_server = sv->p.pid;
    char line[256];
    cr_assert(cli_read_line(&sv->p, line, sizeof line, 10000), "no metrics line");
    cr_assert(!strncmp(line, "metrics: http://127.0.0.1:", 26), "%s", line);
    snprintf(sv->url, sizeof sv->url, "%s", line + 9);
}

static bool failing_seen(const struct page *pg)
{
    return value_of(pg, "sbx_reconcile_failures_total", "") >= 2 &&
           value_of(pg, "sbx_sessions", "provider=\"local\",state=\"deleting\"") == 1;
}

static bool repaired(const struct page *pg)
{
    return value_of(pg, "sbx_reconcile_intents_cleaned_total", "") == 1 &&
           value_of(pg, "sbx_reconcile_deletions_total", "") == 1 &&
           value_of(pg, "sbx_pool_members",
                    "pool=\"warm\",provider=\"local\",state=\"ready\"") == 2;
}

Test(cli_metrics, failing_passes_intents_deletions_and_pools)
{
    /* the workers' configuration: local, and a warm pool of 2 */
    cli_env_add_fixtures(&env);
    cli_env_write_config(&env, "default_provider: local\nproviders:\n  local:\n    root: @ROOT@\n"
                               "pools:\n  warm: { provider: local, size: 2 }\n");
    char good[8192];
    snprintf(good, sizeof good, "%s", env.config);
    run_ok((const char *[]){"create", "one", NULL});
    /* a deletion and a provisioning killed half-way */
    cli_env_setenv(&env, "SBX_TEST_CRASH_AT", "during-destroy");
    struct cli_result r;
    cli_run(&env, (const char *[]){"destroy", "one", NULL}, NULL, 30000, &r);
    cr_assert_eq(r.status, CLI_KILLED_BY + SIGKILL, "%d %s", r.status, r.err);
    cli_result_free(&r);
    cli_env_setenv(&env, "SBX_TEST_CRASH_AT", "after-create");
    cli_run(&env, (const char *[]){"create", "two", NULL}, NULL, 30000, &r);
    cr_assert_eq(r.status, CLI_KILLED_BY + SIGKILL, "%d %s", r.status, r.err);
    cli_result_free(&r);
    cli_env_setenv(&env, "SBX_TEST_CRASH_AT", "nowhere");

    /* a reconciler whose configuration lacks local: every pass fails */
    char bad[8192];
    snprintf(bad, sizeof bad, "%s/other.yaml", env.dir);
    FILE *f = fopen(bad, "w");
    cr_assert_not_null(f);
    fputs("default_provider: good\nproviders:\n  good: {}\n", f);
    fclose(f);
    struct server sv;
    start_server_with(&sv, bad);
    static struct page pg;
    scrape_until(&sv, &pg, failing_seen, NULL, 0);
    cr_assert_geq(value_of(&pg, "sbx_reconcile_item_failures_total", ""), 2);
    cr_assert_eq(value_of(&pg, "sbx_reconcile_last_success_timestamp_seconds", ""), 0);
    cr_assert_gt(value_of(&pg, "sbx_reconcile_last_run_timestamp_seconds", ""), 1e9);
    cr_assert_eq(value_of(&pg, "sbx_sessions", "provider=\"local\",state=\"provisioning\""), 1);
    cr_assert_eq(value_of(&pg, "sbx_provisioning_intents", "provider=\"local\""), 1);
    cr_assert_geq(value_of(&pg, "sbx_provisioning_intent_max_age_seconds",
                           "provider=\"local\""), 0);
    stop_server(&sv);

    /* the right configuration: the intent cleaned, the deletion finished,
     * the pool filled */
    start_server_with(&sv, good);
    scrape_until(&sv, &pg, repaired, NULL, 0);
    cr_assert_eq(value_of(&pg, "sbx_pool_size", "pool=\"warm\",provider=\"local\""), 2);
    cr_assert_eq(value_of(&pg, "sbx_pool_members",
                          "pool=\"warm\",provider=\"local\",state=\"creating\""), 0);
    cr_assert_geq(value_of(&pg, "sbx_pool_members_created_total", ""), 2);
    cr_assert_eq(value_of(&pg, "sbx_sessions", "provider=\"local\",state=\"deleting\""), -1);
    cr_assert_eq(value_of(&pg, "sbx_provisioning_intents", "provider=\"local\""), -1);
    cr_assert_gt(value_of(&pg, "sbx_reconcile_last_success_timestamp_seconds", ""), 1e9);
    stop_server(&sv);
}

static void spool_path(char *out, size_t len, const char *name)
{
    snprintf(out, len, "%s/sbx/metrics/%s", env.state, name);
}

static void put_record(FILE *f, const char *provider, const char *op, int status,
                       uint64_t ns)
{
    struct sbxs_op_sample s;
    memset(&s, 0, sizeof s);
    s.magic = SBXS_OP_SAMPLE_MAGIC;
    s.version = SBXS_OP_SAMPLE_VERSION;
    s.size = sizeof s;
    s.status = status;
    s.duration_ns = ns;
    memcpy(s.provider, provider, strlen(provider));
    memcpy(s.op, op, strlen(op));
    cr_assert_eq(fwrite(&s, sizeof s, 1, f), 1);
}

static bool hostile_folded(const struct page *pg)
{
    return value_of(pg, "sbx_op_duration_seconds_count", "provider=\"planted\",op=\"exec\"") == 1;
}

static bool evicted(const struct page *pg)
{
    return value_of(pg, "sbx_evictions_total", "action=\"destroy\"") == 1 &&
           value_of(pg, "sbx_sessions", "provider=\"local\",state=\"active\"") == -1;
}

Test(cli_metrics, idle_eviction_is_counted)
{
    cli_env_write_config(&env, "default_provider: local\nproviders:\n  local:\n"
                               "    root: @ROOT@\n    idle_destroy: 200ms\n");
    run_ok((const char *[]){"create", "idle", NULL});
    struct server sv;
    start_server_with(&sv, env.config);
    static struct page pg;
    scrape_until(&sv, &pg, evicted, NULL, 0);
    cr_assert_eq(value_of(&pg, "sbx_evictions_total", "action=\"pause\""), 0);
    cr_assert_eq(value_of(&pg, "sbx_reconcile_failures_total", ""), 0);
    stop_server(&sv);
}

Test(cli_metrics, hostile_spool_files_are_skipped)
{
    struct server sv;
    start_server(&sv);
    char path[8192], target[8192];
    /* a file of valid, garbage and malformed records and a truncated tail */
    spool_path(path, sizeof path, "4242-0.ops");
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    put_record(f, "planted", "exec", 7, 2000000); /* valid: 2 ms, SBX_E_UNAVAILABLE */
    char junk[64];
    memset(junk, 'A', sizeof junk);
    fwrite(junk, sizeof junk, 1, f);               /* no magic */
    put_record(f, "bad\"name", "exec", 0, 1000);   /* a quote in a label */
    put_record(f, "planted", "exec", 9999, 1000);  /* status out of range */
    put_record(f, "planted", "exec", 0, 1ull << 62); /* a duration over a day */
    fwrite(junk, 10, 1, f);                         /* truncated */
    fclose(f);
    /* a symlink planted under a spool name is never followed */
    snprintf(target, sizeof target, "%s/elsewhere.bin", env.dir);
    f = fopen(target, "w");
    cr_assert_not_null(f);
    put_record(f, "symlinked", "exec", 0, 1000);
    fclose(f);
    spool_path(path, sizeof path, "4343-0.ops");
    cr_assert_eq(symlink(target, path), 0);
    /* a directory and a fifo under spool names are left alone */
    spool_path(path, sizeof path, "4444-0.ops");
    cr_assert_eq(mkdir(path, 0700), 0);
    spool_path(path, sizeof path, "4545-0.ops");
    cr_assert_eq(mkfifo(path, 0600), 0);

    static struct page pg;
    scrape_until(&sv, &pg, hostile_folded, NULL, 0);
    cr_assert_eq(value_of(&pg, "sbx_provider_errors_total",
                          "provider=\"planted\",op=\"exec\",code=\"SBX_E_UNAVAILABLE\""), 1);
    cr_assert_eq(value_of(&pg, "sbx_op_duration_seconds_count",
                          "provider=\"symlinked\",op=\"exec\""), -1);
    cr_assert_geq(value_of(&pg, "sbx_op_samples_total", "result=\"invalid\""), 5);
    /* the 2 ms sample is in the 5 ms bucket, not the 1 ms one */
    for (size_t i = 0; i < pg.n; i++)
        if (!strcmp(pg.s[i].name, "sbx_op_duration_seconds_bucket") &&
            !strcmp(pg.s[i].labels, "provider=\"planted\",op=\"exec\"")) {
            if (!strcmp(pg.s[i].le, "0.001"))
                cr_assert_eq(pg.s[i].value, 0);
            if (!strcmp(pg.s[i].le, "0.005"))
                cr_assert_eq(pg.s[i].value, 1);
        }
    /* the finished file is removed; the symlink's target is untouched */
    spool_path(path, sizeof path, "4242-0.ops");
    cr_assert_neq(access(path, F_OK), 0, "a folded file was kept");
    struct stat st;
    cr_assert_eq(stat(target, &st), 0);
    cr_assert_eq(st.st_size, 64);
    stop_server(&sv);
}

Test(cli_metrics, nothing_is_recorded_without_a_server)
{
    char dir[8192];
    snprintf(dir, sizeof dir, "%s/sbx", env.state);
    mkdir(dir, 0700);
    snprintf(dir, sizeof dir, "%s/sbx/metrics", env.state);
    cr_assert_eq(mkdir(dir, 0700), 0);
    run_ok((const char *[]){"create", "one", NULL});
    run_ok((const char *[]){"exec", "one", "--", "true", NULL});
    cr_assert_eq(cli_dir_entries(dir), 0, "a sample file was written with no server");
    /* a server that stopped leaves its lock file, unlocked: still nothing */
    struct server sv;
    start_server(&sv);
    stop_server(&sv);
    int before = cli_dir_entries(dir);
    run_ok((const char *[]){"exec", "one", "--", "true", NULL});
    cr_assert_eq(cli_dir_entries(dir), before);
}

static void expect_refused(const char *addr, const char *needle)
{
    struct cli_result r;
    cli_run(&env, (const char *[]){"reconcile", "--watch", "--metrics", addr, NULL}, NULL,
            10000, &r);
    cr_assert_eq(r.status, 125, "%s: %d %s%s", addr, r.status, r.out, r.err);
    cr_assert(strstr(r.err, needle), "%s: %s", addr, r.err);
    cli_result_free(&r);
}

Test(cli_metrics, non_loopback_and_bad_addresses_are_refused)
{
    expect_refused("0.0.0.0:9464", "is not a loopback address");
    expect_refused("192.168.1.10:9464", "is not a loopback address");
    expect_refused("[::]:9464", "is not a loopback address");
    expect_refused("[2001:db8::1]:9464", "is not a loopback address");
    expect_refused("example.com:9464", "is not an IP address");
    expect_refused("127.0.0.1", "expected HOST:PORT");
    expect_refused("127.0.0.1:70000", "invalid port");
    expect_refused("[::1:9464", "expected [IPV6]:PORT");
    struct cli_result r;
    cli_run(&env, (const char *[]){"reconcile", "--metrics", "127.0.0.1:9464", NULL}, NULL,
            10000, &r);
    cr_assert_eq(r.status, 125);
    cr_assert(strstr(r.err, "--metrics needs --watch"), "%s", r.err);
    cli_result_free(&r);
}

Test(cli_metrics, ipv6_loopback_serves)
{
    int probe = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    if (probe < 0 || bind(probe, (struct sockaddr *)&a6, sizeof a6) != 0) {
        if (probe >= 0)
            close(probe);
        cr_skip_test("no IPv6 loopback here");
    }
    close(probe);
    struct cli_proc p;
    cli_spawn(&env,
              (const char *[]){"reconcile", "--watch", "--metrics", "[::1]:0", NULL},
              CLI_STDIN_NULL, &p);
    running_server = p.pid;
    char line[256];
    cr_assert(cli_read_line(&p, line, sizeof line, 10000));
    cr_assert(!strncmp(line, "metrics: http://[::1]:", 22), "%s", line);
    char *body;
    cr_assert_eq(http(line + 9, NULL, &body, NULL, 0), 200);
    static struct page pg;
    parse_page(body, &pg);
    free(body);
    kill(p.pid, SIGTERM);
    cr_assert_eq(cli_wait(&p, 10000), 0);
}

Test(cli_metrics, a_port_in_use_and_a_second_server_are_clear_errors)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    cr_assert_eq(listen(fd, 1), 0);
    socklen_t len = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &len);
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%u", ntohs(a.sin_port));
    expect_refused(addr, "Address already in use");
    close(fd);

    struct server sv;
    start_server(&sv);
    expect_refused("127.0.0.1:0", "another metrics server already uses the spool directory");
    stop_server(&sv);
}
