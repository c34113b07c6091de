/*
 * exec_helpers.c - running commands and small file operations for cases,
 * with messages that quote what the provider produced.
 */
#include "cf_internal.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void cf_exec(struct cf_exec *e, sbx_handle *h)
{
    sbx_capture_init(&e->out, CF_CAPTURE_MAX, CF_CAPTURE_MAX);
    sbx_capture_init(&e->errout, CF_CAPTURE_MAX, CF_CAPTURE_MAX);
    struct sbx_sink out = sbx_capture_sink(&e->out);
    struct sbx_sink err = sbx_capture_sink(&e->errout);
    struct sbx_exec_args a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.argv = e->argv;
    a.env = e->env;
    a.cwd = e->cwd;
    a.in = e->in;
    a.timeout_ms = e->timeout_ms;
    a.out = &out;
    a.err = &err;
    memset(&e->res, 0, sizeof e->res);
    e->res.size = sizeof e->res;
    sbx_error_clear(&e->err);
    double t0 = cf_now();
    e->status = sbx_exec(h, &a, &e->res, e->cancel, &e->err);
    e->seconds = cf_now() - t0;
}

void cf_exec_free(struct cf_exec *e)
{
    sbx_capture_free(&e->out);
    sbx_capture_free(&e->errout);
}

char *cf_capture_string(const sbx_capture *c)
{
    return sbx_capture_text(c);
}

const char *cf_quote(const void *data, size_t n, char *buf, size_t cap)
{
    const unsigned char *p = data;
    size_t w = 0;
    if (cap < 8) {
        if (cap)
            buf[0] = '\0';
        return buf;
    }
    buf[w++] = '"';
    for (size_t i = 0; i < n; i++) {
        char tmp[8];
        unsigned char ch = p[i];
        if (ch == '\n')
            snprintf(tmp, sizeof tmp, "\\n");
        else if (ch == '\t')
            snprintf(tmp, sizeof tmp, "\\t");
        else if (ch == '"' || ch == '\\')
            snprintf(tmp, sizeof tmp, "\\%c", ch);
        else if (ch < 0x20 || ch >= 0x7f)
            snprintf(tmp, sizeof tmp, "\\x%02x", ch);
        else
            snprintf(tmp, sizeof tmp, "%c", ch);
        size_t tl = strlen(tmp);
        if (w + tl + 5 > cap) { /* room for the ellipsis, quote and NUL */
            memcpy(buf + w, "...", 3);
            w += 3;
            break;
        }
        memcpy(buf + w, tmp, tl);
        w += tl;
    }
    buf[w++] = '"';
    buf[w] = '\0';
    return buf;
}

void cf_appendf(char *buf, size_t cap, const char *fmt, ...)
{
    size_t used = strnlen(buf, cap);
    if (used + 1 >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + used, cap - used, fmt, ap);
    va_end(ap);
}

/* Run `sh -c script` on h into e (free with cf_exec_free); timeout_ms 0
 * means none. */
static void exec_sh(struct cf_exec *e, sbx_handle *h, const char *script,
                    int64_t timeout_ms)
{
    const char *argv[] = {"sh", "-c", script, NULL};
    memset(e, 0, sizeof *e);
    e->argv = argv;
    e->timeout_ms = timeout_ms;
    cf_exec(e, h);
    e->argv = NULL; /* argv lives only as long as this call */
}

char *cf_sh(struct cf_test *t, sbx_handle *h, const char *script)
{
    struct cf_exec e;
    exec_sh(&e, h, script, 0);
    char *out = NULL;
    char q[200], eq[300];
    if (e.status != SBX_OK) {
        cf_fail(t, "exec sh -c %s: %s: %s", cf_quote(script, strlen(script), q, sizeof q),
                cf_status_name(e.status), e.err.message);
    } else if (e.res.exit_code != 0) {
        char *err = cf_capture_string(&e.errout);
        cf_fail(t, "sh -c %s exited with %d (signal %d), stderr %s",
                cf_quote(script, strlen(script), q, sizeof q), e.res.exit_code,
                e.res.term_signal, cf_quote(err ? err : "", err ? strlen(err) : 0, eq, sizeof eq));
        free(err);
    } else if (!(out = cf_capture_string(&e.out))) {
        cf_fail(t, "out of memory");
    }
    cf_exec_free(&e);
    return out;
}

char *cf_sh_any(struct cf_test *t, sbx_handle *h, const char *script)
{
    struct cf_exec e;
    exec_sh(&e, h, script, 30000);
    char *out = NULL;
    if (cf_expect_ok(t, e.status, &e.err, script))
        out = cf_capture_string(&e.out);
    cf_exec_free(&e);
    return out;
}

bool cf_write_text(struct cf_test *t, sbx_handle *h, const char *path,
                   const char *text)
{
    struct sbx_memory_source m = {text, strlen(text), 0};
    struct sbx_source src = sbx_memory_source(&m);
    sbx_error err;
    sbx_error_clear(&err);
    int rc = sbx_write(h, path, &src, 0, NULL, &err);
    if (rc == SBX_OK)
        return true;
    char what[300];
    snprintf(what, sizeof what, "write %s", path);
    return cf_expect_ok(t, rc, &err, what);
}

bool cf_expect_file(struct cf_test *t, sbx_handle *h, const char *path,
                    const char *text)
{
    sbx_capture c;
    sbx_capture_init(&c, CF_CAPTURE_MAX, 0);
    struct sbx_sink sink = sbx_capture_sink(&c);
    sbx_error err;
    sbx_error_clear(&err);
    int rc = sbx_read(h, path, &sink, NULL, &err);
    bool ok;
    if (rc != SBX_OK) {
        char what[300];
        snprintf(what, sizeof what, "read %s", path);
        ok = cf_expect_ok(t, rc, &err, what);
    } else if (c.total != strlen(text) || c.truncated ||
               (c.head_len && memcmp(c.head, text, c.head_len) != 0)) {
        char got[200], want[200];
        ok = cf_fail(t, "read %s gave %s (%llu bytes), want %s", path,
                     cf_quote(c.head, c.head_len, got, sizeof got),
                     (unsigned long long)c.total,
                     cf_quote(text, strlen(text), want, sizeof want));
    } else {
        ok = true;
    }
    sbx_capture_free(&c);
    return ok;
}

bool cf_peak_rss_reset(void)
{
    int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    bool ok = write(fd, "5", 1) == 1;
    close(fd);
    return ok;
}

long cf_status_kib(const char *name)
{
    FILE *f = fopen("/proc/self/status", "re");
    if (!f)
        return -1;
    char line[256];
    long v = -1;
    size_t nl = strlen(name);
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, name, nl) && line[nl] == ':') {
            v = strtol(line + nl + 1, NULL, 10);
            break;
        }
    }
    fclose(f);
    return v;
}
