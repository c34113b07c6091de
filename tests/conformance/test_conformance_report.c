/*
 * test_conformance_report.c - the suite's output formats on synthetic
 * results: human lines, TAP 13, JUnit XML with hostile messages (markup,
 * control characters, invalid UTF-8), plus option errors and exit codes.
 */
#include "cf_internal.h"
#include "suite_runner.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char hostile[] = "ref \"fx<&>'\" ]]> \x01\x1b tab\there\nnext \xff\xfe "
                              "caf\xc3\xa9 \xed\xa0\x80 \xef\xbf\xbf end";

static const struct sbx_conformance_result results[] = {
    {"alpha", "checks alpha", 0, SBX_CONFORMANCE_PASS, "", 0.0123},
    {"beta", "checks <beta> & more", 0, SBX_CONFORMANCE_FAIL, hostile, 1.5},
    {"gamma", "needs mounts", SBX_CAP_FILE_MOUNTS, SBX_CONFORMANCE_SKIP,
     "provider lacks capability file_mounts", 0.0},
};

static const struct cf_report_info info = {"demo", "1.2.3", "/x/demo.so",
                                           SBX_CAP_EGRESS, 3};

static const struct sbx_conformance_summary summary = {
    sizeof(struct sbx_conformance_summary), 3, 1, 1, 1, 1.51};

/* Render the progress stream of the three results in one format. */
static char *render(int format)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert(f);
    cf_report_begin(f, format, &info);
    for (unsigned i = 0; i < 3; i++)
        cf_report_case(f, format, i + 1, false, &results[i]);
    cf_report_end(f, format, &summary);
    fclose(f);
    return buf;
}

Test(conformance_report, human_lines)
{
    char *out = render(SBX_CONFORMANCE_HUMAN);
    const char *hdr = "sbx conformance: provider demo 1.2.3 (/x/demo.so), "
                      "capabilities: egress, 3 cases\n";
    cr_assert(!strncmp(out, hdr, strlen(hdr)), "%s", out);
    cr_assert(strstr(out, "\nok    alpha (0.01 s)\n"), "%s", out);
    cr_assert(strstr(out, "\nFAIL  beta (1.50 s): ref \"fx<&>'\""), "%s", out);
    /* One line per case: the message's line break is flattened. */
    cr_assert(strstr(out, "tab\there next"), "%s", out);
    cr_assert(strstr(out, "\nskip  gamma: provider lacks capability file_mounts\n"),
              "%s", out);
    size_t n = strlen(out);
    const char *last = "\n1 passed, 1 failed, 1 skipped\n";
    cr_assert(n > strlen(last) && !strcmp(out + n - strlen(last), last), "%s", out);
    free(out);
}

Test(conformance_report, tap13)
{
    char *out = render(SBX_CONFORMANCE_TAP);
    const char *hdr = "TAP version 13\n# sbx conformance: provider demo 1.2.3 "
                      "(/x/demo.so), capabilities: egress\n";
    cr_assert(!strncmp(out, hdr, strlen(hdr)), "%s", out);
    cr_assert(strstr(out, "\n1..3\nok 1 - alpha\nnot ok 2 - beta\n  ---\n  message: \""),
              "%s", out);
    /* The YAML scalar escapes quotes, control characters and line breaks. */
    cr_assert(strstr(out, "message: \"ref \\\"fx<&>'\\\" ]]> \\x01\\x1b tab\\there\\nnext"),
              "%s", out);
    cr_assert(strstr(out, "\n  duration_ms: 1500\n  ...\n"), "%s", out);
    cr_assert(strstr(out, "\nok 3 - gamma # SKIP provider lacks capability "
                          "file_mounts\n"),
              "%s", out);
    cr_assert(strstr(out, "\n# 1 passed, 1 failed, 1 skipped\n"), "%s", out);
    free(out);
}

Test(conformance_report, junit_is_well_formed_and_escaped)
{
    char dir[] = "/tmp/sbx-cf-report-XXXXXX";
    cr_assert(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/report.xml", dir);
    sbx_error err;
    sbx_error_clear(&err);
    cr_assert_eq(cf_junit_write(path, &info, results, 3, &summary, &err), SBX_OK,
                 "%s", err.message);
    cr_assert_eq(sr_xmllint(path), 0, "not well-formed XML");
    cr_assert_eq(sr_count_in_file(path, "<testcase "), 3);
    cr_assert_eq(sr_count_in_file(path, "<failure "), 1);
    cr_assert_eq(sr_count_in_file(path, "<skipped "), 1);
    cr_assert_eq(sr_count_in_file(path,
                                  "tests=\"3\" failures=\"1\" errors=\"0\" skipped=\"1\""),
                 2);
    cr_assert_gt(sr_count_in_file(path, "ref &quot;fx&lt;&amp;&gt;&apos;&quot; ]]&gt; "
                                        "\\x01\\x1b tab&#9;here&#10;next \\xff\\xfe "
                                        "caf\xc3\xa9 \\xed\\xa0\\x80 \\xef\\xbf\\xbf end"),
                 0, "escaping differs");
    cr_assert_gt(sr_count_in_file(path, "checks &lt;beta&gt; &amp; more: "), 0);
    cr_assert_eq(sr_count_in_file(path, "time=\"1.500\""), 1);
    cr_assert_eq(sr_count_in_file(path, "<property name=\"capabilities\" value=\"egress\"/>"),
                 1);
    /* Replaced atomically: no temporary file stays behind. */
    char cmd[300];
    snprintf(cmd, sizeof cmd, "test \"$(ls -A %s)\" = report.xml", dir);
    cr_assert_eq(system(cmd), 0, "temporary files left in %s", dir);
    unlink(path);
    rmdir(dir);
}

Test(conformance_report, junit_unwritable_is_an_io_error)
{
    sbx_error err;
    sbx_error_clear(&err);
    int rc = cf_junit_write("/nonexistent-dir/report.xml", &info, results, 3,
                            &summary, &err);
    cr_assert_eq(rc, SBX_E_IO);
    cr_assert(strstr(err.message, "/nonexistent-dir/report.xml"), "%s", err.message);
}

Test(conformance_report, option_errors)
{
    struct sbx_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    struct sbx_conformance_options co;
    memset(&co, 0, sizeof co);
    sbx_error err;
    sbx_error_clear(&err);
    cr_assert_eq(sbx_conformance_run(&o, &co, NULL, &err), SBX_E_INVALID,
                 "size not set");
    co.size = sizeof co;
    co.format = 7;
    cr_assert_eq(sbx_conformance_run(&o, &co, NULL, &err), SBX_E_INVALID);
    cr_assert(strstr(err.message, "format"), "%s", err.message);
    co.format = SBX_CONFORMANCE_HUMAN;
    co.filter = "no_such_case*";
    cr_assert_eq(sbx_conformance_run(&o, &co, NULL, &err), SBX_E_INVALID);
    cr_assert(strstr(err.message, "no_such_case*"), "%s", err.message);
    co.filter = NULL;
    co.case_timeout_ms = -1;
    cr_assert_eq(sbx_conformance_run(&o, &co, NULL, &err), SBX_E_INVALID);
    cr_assert(strstr(err.message, "timeout"), "%s", err.message);
}

Test(conformance_report, exit_codes_and_case_table)
{
    struct sbx_conformance_summary s;
    memset(&s, 0, sizeof s);
    cr_assert_eq(sbx_conformance_exit_code(SBX_OK, &s), 0);
    s.skipped = 2;
    cr_assert_eq(sbx_conformance_exit_code(SBX_OK, &s), 0);
    s.failed = 1;
    cr_assert_eq(sbx_conformance_exit_code(SBX_OK, &s), 1);
    cr_assert_eq(sbx_conformance_exit_code(SBX_E_IO, &s), 125);
    cr_assert_eq(sbx_conformance_exit_code(SBX_E_CONFIG, NULL), 125);

    /* Names are unique and stable in form; descriptions are one line. */
    size_t n = sbx_conformance_case_count();
    cr_assert_geq(n, 20);
    for (size_t i = 0; i < n; i++) {
        const char *name = sbx_conformance_case_name(i);
        cr_assert(name && *name);
        cr_assert_eq(strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_"),
                     strlen(name), "%s", name);
        const char *d = sbx_conformance_case_description(i);
        cr_assert(d && *d && !strchr(d, '\n'), "%s", name);
        for (size_t j = 0; j < i; j++)
            cr_assert_str_neq(name, sbx_conformance_case_name(j));
    }
    cr_assert_null(sbx_conformance_case_name(n));
}
