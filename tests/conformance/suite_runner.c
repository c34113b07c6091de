/* suite_runner.c - see suite_runner.h. */
#include "suite_runner.h"

#include <dirent.h>
#include <ftw.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void collect(void *ud, const struct sbx_conformance_result *res)
{
    struct sr_run *r = ud;
    if (r->nresults == SR_MAX_RESULTS)
        return;
    struct sr_result *o = &r->results[r->nresults++];
    snprintf(o->name, sizeof o->name, "%s", res->name);
    snprintf(o->message, sizeof o->message, "%s", res->message);
    o->outcome = res->outcome;
}

/* Write text with every "@ROOT@" replaced by root. */
static void put_replaced(FILE *f, const char *text, const char *root)
{
    const char *p = text;
    const char *m;
    while ((m = strstr(p, "@ROOT@"))) {
        fwrite(p, 1, (size_t)(m - p), f);
        fputs(root, f);
        p = m + strlen("@ROOT@");
    }
    fputs(p, f);
}

int sr_run_suite(struct sr_run *r, const char *provider, const char *provider_yaml,
                 const char *plugin_path, int format, const char *filter)
{
    return sr_run_suite_with(r, provider, provider_yaml, plugin_path, format, filter,
                             NULL);
}

int sr_run_suite_with(struct sr_run *r, const char *provider,
                      const char *provider_yaml, const char *plugin_path,
                      int format, const char *filter,
                      const struct sr_options *extra)
{
    memset(r, 0, sizeof *r);
    snprintf(r->dir, sizeof r->dir, "/tmp/sbx-conformance-test-XXXXXX");
    if (!mkdtemp(r->dir))
        return -1;
    snprintf(r->workspaces, sizeof r->workspaces, "%s/ws", r->dir);
    snprintf(r->config, sizeof r->config, "%s/sbx.yaml", r->dir);
    snprintf(r->junit, sizeof r->junit, "%s/junit.xml", r->dir);
    FILE *cfg = fopen(r->config, "w");
    if (!cfg)
        return -1;
    fputs("providers:\n", cfg);
    put_replaced(cfg, provider_yaml, r->workspaces);
    if (fclose(cfg) != 0)
        return -1;

    FILE *out = open_memstream(&r->output, &r->output_len);
    if (!out)
        return -1;
    struct sbx_options o;
    memset(&o, 0, sizeof o);
    o.size = sizeof o;
    o.config_path = r->config;
    o.plugin_path = plugin_path;
    o.ignore_environment = true;

    struct sbx_conformance_options co;
    memset(&co, 0, sizeof co);
    co.size = sizeof co;
    co.provider = provider;
    co.out = out;
    co.format = format;
    co.junit_path = r->junit;
    co.filter = filter;
    co.on_result = collect;
    co.on_result_ud = r;
    if (extra) {
        co.case_timeout_ms = extra->case_timeout_ms;
        if (extra->options_size)
            co.size = extra->options_size;
    }
    r->summary.size = sizeof r->summary;
    sbx_error_clear(&r->err);
    r->status = sbx_conformance_run(&o, &co, &r->summary, &r->err);
    fclose(out);
    /* Shown in the test log, so a failure explains itself. */
    fprintf(stderr, "--- conformance output (%s) ---\n%s--- end ---\n", provider,
            r->output ? r->output : "");
    if (r->status != SBX_OK)
        fprintf(stderr, "sbx_conformance_run: %d: %s\n", r->status, r->err.message);
    return 0;
}

const struct sr_result *sr_find(const struct sr_run *r, const char *name)
{
    for (size_t i = 0; i < r->nresults; i++)
        if (!strcmp(r->results[i].name, name))
            return &r->results[i];
    return NULL;
}

int sr_count_workspaces(const struct sr_run *r)
{
    DIR *d = opendir(r->workspaces);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            n++;
    closedir(d);
    return n;
}

int sr_xmllint(const char *path)
{
    char *argv[] = {"xmllint", "--noout", (char *)path, NULL};
    pid_t pid;
    extern char **environ;
    if (posix_spawnp(&pid, "xmllint", NULL, NULL, argv, environ) != 0)
        return 127;
    int st;
    if (waitpid(pid, &st, 0) < 0)
        return 127;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

int sr_count_in_file(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    /* Reports are small: read it whole. */
    char *buf = NULL;
    size_t cap = 0, len = 0;
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (len + n + 1 > cap) {
            cap = (len + n + 1) * 2;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return -1;
            }
            buf = nb;
        }
        memcpy(buf + len, chunk, n);
        len += n;
    }
    fclose(f);
    int count = 0;
    if (buf) {
        buf[len] = '\0';
        for (const char *p = buf; (p = strstr(p, needle)); p += strlen(needle))
            count++;
    }
    free(buf);
    return count;
}

static int remove_entry(const char *path, const struct stat *sb, int flag,
                        struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

void sr_free(struct sr_run *r)
{
    if (r->dir[0])
        nftw(r->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(r->output);
    r->output = NULL;
}

void sr_save_requests(const char *stats)
{
    const char *path = getenv("SBX_CF_REQUEST_LOG");
    if (!path || !*path)
        return;
    unlink(path);
    if (!stats)
        return;
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return;
    int ok = fputs(stats, f) >= 0;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0)
        unlink(tmp);
}
