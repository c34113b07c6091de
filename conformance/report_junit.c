/*
 * report_junit.c - the JUnit XML report.
 *
 * One <testsuite> named "sbx.conformance.<provider>" with a <testcase> per
 * selected case; failures carry <failure>, capability skips <skipped>.
 * The file is written next to its destination and renamed into place, so
 * a CI system never picks up half a report. Text is escaped for XML 1.0:
 * markup characters become entities, and bytes XML cannot carry (control
 * characters, invalid UTF-8) are written as "\xNN".
 */
#include "cf_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Length of the valid UTF-8 sequence XML allows at p, or 0. */
static size_t utf8_ok(const unsigned char *p)
{
    unsigned c = p[0];
    size_t n;
    unsigned lo = 0x80, hi = 0xbf; /* allowed range of the second byte */
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        if (c == 0xe0)
            lo = 0xa0;
        if (c == 0xed)
            hi = 0x9f; /* no UTF-16 surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        if (c == 0xf0)
            lo = 0x90;
        if (c == 0xf4)
            hi = 0x8f;
    } else {
        return 0;
    }
    if (p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xbf)
            return 0;
    /* U+FFFE and U+FFFF are not XML characters. */
    if (n == 3 && c == 0xef && p[1] == 0xbf && (p[2] == 0xbe || p[2] == 0xbf))
        return 0;
    return n;
}

void cf_xml_escape(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned c = *p;
        size_t n = 1;
        switch (c) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&apos;", f); break;
        /* Numeric references keep line breaks and tabs in attributes. */
        case '\n': fputs("&#10;", f); break;
        case '\r': fputs("&#13;", f); break;
        case '\t': fputs("&#9;", f); break;
        default:
            if (c < 0x20 || c == 0x7f) {
                fprintf(f, "\\x%02x", c);
            } else if (c < 0x80) {
                fputc((int)c, f);
            } else if ((n = utf8_ok(p)) != 0) {
                fwrite(p, 1, n, f);
            } else {
                fprintf(f, "\\x%02x", c);
                n = 1;
            }
        }
        p += n;
    }
}

/* Seconds as "S.mmm" independent of the locale. */
static void put_seconds(FILE *f, double seconds)
{
    if (seconds < 0)
        seconds = 0;
    unsigned long long ms = (unsigned long long)(seconds * 1000.0 + 0.5);
    fprintf(f, "%llu.%03llu", ms / 1000, ms % 1000);
}

static void write_report(FILE *f, const struct cf_report_info *info,
                         const struct sbx_conformance_result *results, size_t n,
                         const struct sbx_conformance_summary *s)
{
    char suite[256], caps[256], stamp[32];
    snprintf(suite, sizeof suite, "sbx.conformance.%s", info->provider);
    cf_caps_text(info->caps, caps, sizeof caps);
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);

    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    fprintf(f, "<testsuites name=\"sbx conformance\" tests=\"%u\" failures=\"%u\" "
               "errors=\"0\" skipped=\"%u\" time=\"",
            s->total, s->failed, s->skipped);
    put_seconds(f, s->seconds);
    fprintf(f, "\">\n  <testsuite name=\"");
    cf_xml_escape(f, suite);
    fprintf(f, "\" tests=\"%u\" failures=\"%u\" errors=\"0\" skipped=\"%u\" "
               "timestamp=\"%s\" time=\"",
            s->total, s->failed, s->skipped, stamp);
    put_seconds(f, s->seconds);
    fprintf(f, "\">\n    <properties>\n");
    const char *props[][2] = {{"provider", info->provider},
                              {"provider_version", info->version},
                              {"provider_path", info->path},
                              {"capabilities", caps}};
    for (size_t i = 0; i < sizeof props / sizeof props[0]; i++) {
        fprintf(f, "      <property name=\"%s\" value=\"", props[i][0]);
        cf_xml_escape(f, props[i][1] ? props[i][1] : "");
        fprintf(f, "\"/>\n");
    }
    fprintf(f, "    </properties>\n");
    for (size_t i = 0; i < n; i++) {
        const struct sbx_conformance_result *r = &results[i];
        fprintf(f, "    <testcase name=\"");
        cf_xml_escape(f, r->name);
        fprintf(f, "\" classname=\"");
        cf_xml_escape(f, suite);
        fprintf(f, "\" time=\"");
        put_seconds(f, r->seconds);
        if (r->outcome == SBX_CONFORMANCE_PASS) {
            fprintf(f, "\"/>\n");
            continue;
        }
        fprintf(f, "\">\n");
        if (r->outcome == SBX_CONFORMANCE_SKIP) {
            fprintf(f, "      <skipped message=\"");
            cf_xml_escape(f, r->message);
            fprintf(f, "\"/>\n");
        } else {
            fprintf(f, "      <failure type=\"conformance\" message=\"");
            cf_xml_escape(f, r->message);
            fprintf(f, "\">");
            cf_xml_escape(f, r->description);
            fprintf(f, ": ");
            cf_xml_escape(f, r->message);
            fprintf(f, "</failure>\n");
        }
        fprintf(f, "    </testcase>\n");
    }
    fprintf(f, "  </testsuite>\n</testsuites>\n");
}

int cf_junit_write(const char *path, const struct cf_report_info *info,
                   const struct sbx_conformance_result *results, size_t n,
                   const struct sbx_conformance_summary *s, sbx_error *err)
{
    size_t len = strlen(path);
    char *tmp = malloc(len + sizeof ".tmp.XXXXXX");
    if (!tmp)
        return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    memcpy(tmp, path, len);
    memcpy(tmp + len, ".tmp.XXXXXX", sizeof ".tmp.XXXXXX");
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        free(tmp);
        return sbx_error_set(err, SBX_E_IO, "cannot write JUnit report %s: %s",
                             path, strerror(e));
    }
    FILE *f = fdopen(fd, "w");
    if (!f) {
        int e = errno;
        close(fd);
        unlink(tmp);
        free(tmp);
        return sbx_error_set(err, SBX_E_IO, "cannot write JUnit report %s: %s",
                             path, strerror(e));
    }
    fchmod(fd, 0644); /* mkostemp makes it 0600; a report is not secret */
    write_report(f, info, results, n, s);
    int bad = ferror(f);
    int e = errno;
    if (fclose(f) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    if (!bad && rename(tmp, path) != 0) {
        bad = 1;
        e = errno;
    }
    if (bad) {
        unlink(tmp);
        free(tmp);
        return sbx_error_set(err, SBX_E_IO, "cannot write JUnit report %s: %s",
                             path, strerror(e));
    }
    free(tmp);
    return SBX_OK;
}
