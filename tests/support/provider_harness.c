/* provider_harness.c - see provider_harness.h. */
#include "provider_harness.h"

#include <criterion/criterion.h>

#include <glob.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static bool names_file(const char *tmpl)
{
    size_t n = strlen(tmpl);
    return n >= 5 && strcmp(tmpl + n - 5, ".yaml") == 0;
}

void ph_write_config(char path[PH_PATH_MAX], const char *tmpl, const char *fmt, ...)
{
    FILE *f;
    if (path[0]) {
        f = fopen(path, "w");
    } else if (names_file(tmpl)) {
        snprintf(path, PH_PATH_MAX, "%s", tmpl);
        int fd = mkstemps(path, 5);
        cr_assert_geq(fd, 0, "mkstemps %s", tmpl);
        f = fdopen(fd, "w");
    } else {
        char dir[PH_PATH_MAX - 16];
        snprintf(dir, sizeof dir, "%s", tmpl);
        cr_assert_not_null(mkdtemp(dir), "mkdtemp %s", tmpl);
        snprintf(path, PH_PATH_MAX, "%s/sbx.yaml", dir);
        f = fopen(path, "w");
    }
    cr_assert_not_null(f, "cannot write %s", path);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    cr_assert_eq(fclose(f), 0, "cannot write %s", path);
}

void ph_remove_config(char path[PH_PATH_MAX])
{
    if (!path[0])
        return;
    unlink(path);
    char *slash = strrchr(path, '/');
    if (slash && strcmp(slash, "/sbx.yaml") == 0) {
        *slash = '\0';
        rmdir(path);
    }
    path[0] = '\0';
}

int ph_open(const char *path, const char *name, bool ready, sbx_ctx **ctx, sbx_provider **prov,
            sbx_error *err)
{
    struct sbx_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.config_path = path;
    o.plugin_path = SBX_TEST_PROVIDER_DIR;
    o.ignore_environment = true;
    sbx_error_clear(err);
    int rc = sbx_open(&o, ctx, err);
    if (rc != SBX_OK)
        return rc;
    rc = sbx_provider_lookup(*ctx, name, prov, err);
    if (rc != SBX_OK || !ready)
        return rc;
    return sbx_provider_ready(*prov, NULL, err);
}

void ph_open_ok(const char *path, const char *name, sbx_ctx **ctx, sbx_provider **prov)
{
    sbx_error err;
    int rc = ph_open(path, name, true, ctx, prov, &err);
    cr_assert_eq(rc, SBX_OK, "%s", err.message);
}

void ph_close(sbx_ctx **ctx, sbx_provider **prov)
{
    if (ctx && *ctx) {
        sbx_close(*ctx);
        *ctx = NULL;
    }
    if (prov)
        *prov = NULL;
}

int ph_try_create(sbx_provider *prov, const char *key, sbx_handle **h, sbx_error *err)
{
    *h = NULL;
    struct sbx_create_options co;
    memset(&co, 0, sizeof co);
    co.size = sizeof co;
    return sbx_create(prov, key, &co, NULL, h, err);
}

sbx_handle *ph_create_ports(sbx_provider *prov, const char *key, const uint16_t *ports)
{
    sbx_error err;
    sbx_handle *h = NULL;
    struct sbx_create_options co;
    memset(&co, 0, sizeof co);
    co.size = sizeof co;
    co.ports = ports;
    int rc = sbx_create(prov, key, &co, NULL, &h, &err);
    cr_assert_eq(rc, SBX_OK, "create: %s", err.message);
    return h;
}

sbx_handle *ph_create(sbx_provider *prov, const char *key)
{
    return ph_create_ports(prov, key, NULL);
}

void ph_destroy(sbx_provider *prov, const char *key, sbx_handle *h)
{
    sbx_error err;
    cr_expect_eq(sbx_destroy(prov, key, sbx_handle_ref(h), NULL, &err), SBX_OK, "%s",
                 err.message);
    sbx_release(h);
}

int ph_exec_argv(sbx_handle *h, const char *const *argv, struct sbx_exec_result *res,
                 sbx_capture *out, sbx_cancel *cancel, sbx_error *err)
{
    struct sbx_sink so;
    struct sbx_exec_args a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.argv = argv;
    if (out) {
        so = sbx_capture_sink(out);
        a.out = &so;
    }
    a.timeout_ms = 20000;
    memset(res, 0, sizeof *res);
    res->size = sizeof *res;
    return sbx_exec(h, &a, res, cancel, err);
}

int ph_exec_sh(sbx_handle *h, const char *script, struct sbx_exec_result *res, sbx_capture *out,
               sbx_error *err)
{
    return ph_exec_sh_cancel(h, script, res, out, NULL, err);
}

int ph_exec_sh_cancel(sbx_handle *h, const char *script, struct sbx_exec_result *res,
                      sbx_capture *out, sbx_cancel *cancel, sbx_error *err)
{
    const char *argv[] = {"sh", "-c", script, NULL};
    return ph_exec_argv(h, argv, res, out, cancel, err);
}

int ph_sh(sbx_handle *h, const char *script, sbx_error *err)
{
    struct sbx_exec_result res;
    int rc = ph_exec_sh(h, script, &res, NULL, err);
    if (rc == SBX_OK && res.exit_code != 0)
        return -res.exit_code;
    return rc;
}

int ph_health(sbx_provider *prov, struct sbx_health *h, sbx_error *err)
{
    memset(h, 0, sizeof *h);
    h->size = sizeof *h;
    return sbx_provider_health(prov, NULL, h, err);
}

int ph_origin(sbx_provider *prov, const char *key, const char **env, const char **value,
              bool *secret)
{
    const char *k, *e, *v;
    bool sec;
    int o;
    for (size_t i = 0; sbx_provider_config_origin(prov, i, &k, &e, &o, &v, &sec); i++)
        if (!strcmp(k, key)) {
            if (env)
                *env = e;
            if (value)
                *value = v;
            if (secret)
                *secret = sec;
            return o;
        }
    cr_assert_fail("no key %s", key);
    return -1;
}

int ph_count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

void ph_nap(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

const char *ph_sid(sbx_handle *h)
{
    return strchr(sbx_handle_ref(h), ':') + 1;
}

long ph_glob_size(const char *pattern)
{
    glob_t g;
    long n = -1;
    if (glob(pattern, 0, NULL, &g) == 0 && g.gl_pathc == 1) {
        struct stat st;
        if (stat(g.gl_pathv[0], &st) == 0)
            n = (long)st.st_size;
    }
    globfree(&g);
    return n;
}
