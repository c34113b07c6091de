/*
 * runner.c - sbx_conformance_run: select cases, check the provider can be
 * initialized, run each case with its cleanup in a process of its own
 * (isolate.c), report as cases end, and write the JUnit file at the end.
 */
#include "cf_internal.h"

#include <fnmatch.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether name matches one of the comma-separated patterns. */
static bool filter_match(const char *filter, const char *name)
{
    if (!filter || !*filter)
        return true;
    const char *p = filter;
    while (*p) {
        while (*p == ',' || *p == ' ')
            p++;
        size_t n = strcspn(p, ",");
        while (n && p[n - 1] == ' ')
            n--;
        if (n) {
            char pat[256];
            snprintf(pat, sizeof pat, "%.*s", (int)n, p);
            if (fnmatch(pat, name, 0) == 0)
                return true;
        }
        p += strcspn(p, ",");
    }
    return false;
}

/* Everything known about the provider before the cases run. */
struct target {
    char name[128];
    char version[64];
    char path[4096];
    uint64_t caps;
};

/* Open one context, find the provider and run its init once, so that a
 * provider that cannot start fails the run with one clear error instead of
 * failing every case. The context is closed again before any case forks:
 * each case's process opens its own (and runs init again). */
static int probe(const struct sbx_options *o, const char *name, struct target *tg,
                 sbx_error *err)
{
    sbx_ctx *ctx = NULL;
    int rc = sbx_open(o, &ctx, err);
    if (rc != SBX_OK)
        return rc;
    sbx_provider *p = NULL;
    rc = sbx_provider_lookup(ctx, name, &p, err);
    if (rc == SBX_OK) {
        const sbx_provider_info *d = sbx_provider_get_info(p);
        const char *path = sbx_provider_path(p);
        const char *version = sbx_provider_info_version(d);
        snprintf(tg->name, sizeof tg->name, "%s", sbx_provider_info_name(d));
        snprintf(tg->version, sizeof tg->version, "%s", version ? version : "");
        snprintf(tg->path, sizeof tg->path, "%s", path ? path : "");
        tg->caps = sbx_provider_info_caps(d);
        rc = sbx_provider_ready(p, NULL, err);
    }
    sbx_close(ctx);
    return rc;
}

/* The skip reason for a case whose caps the provider lacks, or NULL. */
static const char *missing_caps(const struct cf_case *c, uint64_t have, char *buf,
                                size_t cap)
{
    uint64_t missing = c->caps & ~have;
    if (!missing)
        return NULL;
    char names[256];
    snprintf(buf, cap, "provider lacks capability %s",
             cf_caps_text(missing, names, sizeof names));
    return buf;
}

int sbx_conformance_run(const struct sbx_options *open_opts,
                        const struct sbx_conformance_options *opts_in,
                        struct sbx_conformance_summary *summary, sbx_error *err)
{
    sbx_error_clear(err);
    if (!opts_in || opts_in->size < offsetof(struct sbx_conformance_options, verbose))
        return sbx_error_set(err, SBX_E_INVALID,
                             "conformance options: size is not set");
    struct sbx_conformance_options opts;
    memset(&opts, 0, sizeof opts);
    memcpy(&opts, opts_in, opts_in->size < sizeof opts ? opts_in->size : sizeof opts);
    if (opts.format != SBX_CONFORMANCE_HUMAN && opts.format != SBX_CONFORMANCE_TAP)
        return sbx_error_set(err, SBX_E_INVALID,
                             "conformance options: unknown output format %d",
                             opts.format);
    if (opts.case_timeout_ms < 0)
        return sbx_error_set(err, SBX_E_INVALID,
                             "conformance options: negative case timeout %lld ms",
                             (long long)opts.case_timeout_ms);
    /* Members beyond the caller's size were zeroed above: the default. */
    double case_timeout_s =
        (double)(opts.case_timeout_ms ? opts.case_timeout_ms : CF_CASE_TIMEOUT_MS) /
        1000.0;
    FILE *out = opts.out ? opts.out : stdout;
    if (summary) {
        uint32_t size = summary->size;
        memset(summary, 0, sizeof *summary);
        summary->size = size;
    }

    struct sbx_options o;
    memset(&o, 0, sizeof o);
    if (open_opts)
        memcpy(&o, open_opts, open_opts->size && open_opts->size < sizeof o
                                  ? open_opts->size : sizeof o);
    o.size = sizeof o;
    if (opts.provider)
        o.provider = opts.provider;

    bool *selected = calloc(cf_case_total, sizeof *selected);
    if (!selected)
        return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    unsigned nsel = 0;
    for (size_t i = 0; i < cf_case_total; i++) {
        selected[i] = filter_match(opts.filter, cf_cases[i].name);
        nsel += selected[i];
    }
    if (nsel == 0) {
        free(selected);
        return sbx_error_set(err, SBX_E_INVALID,
                             "conformance filter '%s' matches no case (see "
                             "--list)", opts.filter);
    }

    struct target tg;
    memset(&tg, 0, sizeof tg);
    int rc = probe(&o, opts.provider, &tg, err);
    if (rc != SBX_OK) {
        free(selected);
        return rc;
    }
    /* Every case looks the provider up by its real name, so that a default
     * chosen by the configuration cannot change in the middle of a run. */
    o.provider = tg.name;

    struct sbx_conformance_result *results = calloc(nsel, sizeof *results);
    char (*messages)[CF_MESSAGE_MAX] = calloc(nsel, sizeof *messages);
    if (!results || !messages) {
        free(selected);
        free(results);
        free(messages);
        return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    }
    struct cf_report_info info = {tg.name, tg.version, tg.path, tg.caps, nsel};
    struct sbx_conformance_summary s;
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    s.total = nsel;
    double start = cf_now();
    cf_report_begin(out, opts.format, &info);

    unsigned k = 0;
    for (size_t i = 0; i < cf_case_total; i++) {
        if (!selected[i])
            continue;
        const struct cf_case *c = &cf_cases[i];
        struct sbx_conformance_result *r = &results[k];
        r->name = c->name;
        r->description = c->description;
        r->caps = c->caps;
        r->message = messages[k];
        double t0 = cf_now();
        if (missing_caps(c, tg.caps, messages[k], CF_MESSAGE_MAX))
            r->outcome = SBX_CONFORMANCE_SKIP;
        else
            cf_isolate_case(c, &o, tg.name, case_timeout_s, &r->outcome,
                            messages[k]);
        r->seconds = cf_now() - t0;
        if (r->outcome == SBX_CONFORMANCE_PASS)
            s.passed++;
        else if (r->outcome == SBX_CONFORMANCE_FAIL)
            s.failed++;
        else
            s.skipped++;
        cf_report_case(out, opts.format, k + 1, opts.verbose, r);
        if (opts.on_result)
            opts.on_result(opts.on_result_ud, r);
        k++;
    }
    s.seconds = cf_now() - start;
    cf_report_end(out, opts.format, &s);
    if (summary) {
        uint32_t size = summary->size;
        *summary = s;
        summary->size = size;
    }
    rc = SBX_OK;
    if (opts.junit_path)
        rc = cf_junit_write(opts.junit_path, &info, results, nsel, &s, err);
    free(selected);
    free(results);
    free(messages);
    return rc;
}

int sbx_conformance_exit_code(int status,
                              const struct sbx_conformance_summary *summary)
{
    if (status != SBX_OK || !summary)
        return 125;
    return summary->failed ? 1 : 0;
}

size_t sbx_conformance_case_count(void)
{
    return cf_case_total;
}

const char *sbx_conformance_case_name(size_t i)
{
    return i < cf_case_total ? cf_cases[i].name : NULL;
}

const char *sbx_conformance_case_description(size_t i)
{
    return i < cf_case_total ? cf_cases[i].description : NULL;
}

uint64_t sbx_conformance_case_caps(size_t i)
{
    return i < cf_case_total ? cf_cases[i].caps : 0;
}
