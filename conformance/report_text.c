/*
 * report_text.c - the progress stream: human-readable lines or TAP 13.
 *
 * Human:  "ok    NAME (0.12 s)", "FAIL  NAME (0.12 s): WHY",
 *         "skip  NAME: WHY", then "N passed, N failed, N skipped".
 * TAP 13: a plan, "ok N - NAME", "not ok N - NAME" with a YAML block
 *         carrying the message, "ok N - NAME # SKIP WHY".
 * Lines are flushed as each case ends so that a CI log shows progress.
 */
#include "cf_internal.h"

#include <stdio.h>
#include <string.h>

const char *cf_caps_text(uint64_t caps, char *buf, size_t cap)
{
    size_t w = 0;
    buf[0] = '\0';
    if (!caps) {
        snprintf(buf, cap, "none");
        return buf;
    }
    for (int i = 0; i < 64; i++) {
        uint64_t bit = UINT64_C(1) << i;
        if (!(caps & bit))
            continue;
        const char *name = sbx_cap_name(bit);
        int n = name ? snprintf(buf + w, cap - w, "%s%s", w ? "," : "", name)
                     : snprintf(buf + w, cap - w, "%sbit%d", w ? "," : "", i);
        if (n < 0 || (size_t)n >= cap - w)
            break;
        w += (size_t)n;
    }
    return buf;
}

/* Print s on one line: line breaks become spaces. */
static void one_line(FILE *out, const char *s)
{
    for (; *s; s++)
        fputc(*s == '\n' || *s == '\r' ? ' ' : *s, out);
}

/* A YAML double-quoted scalar. */
static void yaml_quoted(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p == '\n')
            fputs("\\n", out);
        else if (*p == '\t')
            fputs("\\t", out);
        else if (*p < 0x20 || *p == 0x7f)
            fprintf(out, "\\x%02x", *p);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

void cf_report_begin(FILE *out, int format, const struct cf_report_info *info)
{
    char caps[256];
    cf_caps_text(info->caps, caps, sizeof caps);
    if (format == SBX_CONFORMANCE_TAP) {
        fprintf(out, "TAP version 13\n");
        fprintf(out, "# sbx conformance: provider %s %s (%s), capabilities: %s\n",
                info->provider, info->version, info->path, caps);
        fprintf(out, "1..%u\n", info->total);
    } else {
        fprintf(out, "sbx conformance: provider %s %s (%s), capabilities: %s, "
                     "%u case%s\n",
                info->provider, info->version, info->path, caps, info->total,
                info->total == 1 ? "" : "s");
    }
    fflush(out);
}

void cf_report_case(FILE *out, int format, unsigned index, bool verbose,
                    const struct sbx_conformance_result *r)
{
    if (format == SBX_CONFORMANCE_TAP) {
        switch (r->outcome) {
        case SBX_CONFORMANCE_PASS:
            fprintf(out, "ok %u - %s\n", index, r->name);
            break;
        case SBX_CONFORMANCE_SKIP:
            fprintf(out, "ok %u - %s # SKIP ", index, r->name);
            one_line(out, r->message);
            fputc('\n', out);
            break;
        default:
            fprintf(out, "not ok %u - %s\n  ---\n  message: ", index, r->name);
            yaml_quoted(out, r->message);
            fprintf(out, "\n  description: ");
            yaml_quoted(out, r->description);
            fprintf(out, "\n  duration_ms: %.0f\n  ...\n", r->seconds * 1000.0);
            break;
        }
    } else {
        switch (r->outcome) {
        case SBX_CONFORMANCE_PASS:
            fprintf(out, "ok    %s (%.2f s)\n", r->name, r->seconds);
            break;
        case SBX_CONFORMANCE_SKIP:
            fprintf(out, "skip  %s: ", r->name);
            one_line(out, r->message);
            fputc('\n', out);
            break;
        default:
            fprintf(out, "FAIL  %s (%.2f s): ", r->name, r->seconds);
            one_line(out, r->message);
            fputc('\n', out);
            break;
        }
        if (verbose)
            fprintf(out, "      %s\n", r->description);
    }
    fflush(out);
}

void cf_report_end(FILE *out, int format, const struct sbx_conformance_summary *s)
{
    fprintf(out, "%s%u passed, %u failed, %u skipped\n",
            format == SBX_CONFORMANCE_TAP ? "# " : "", s->passed, s->failed,
            s->skipped);
    fflush(out);
}
