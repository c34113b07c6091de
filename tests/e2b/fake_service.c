/* fake_service.c - see fake_service.h. */
#include "fake_service.h"
#include "../support/fake_spawn.h"

#include <curl/curl.h>
#include <ftw.h>
#include <signal.h>
#include <sys/syscall.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

int fake_start(struct fake_service *f, const char *mode, const char *api_key)
{
    return fake_start_script(f, "tests/e2b/fake_e2b.py", mode, api_key);
}

int fake_start_script(struct fake_service *f, const char *script_rel, const char *mode,
                      const char *api_key)
{
    memset(f, 0, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/sbx-fake-XXXXXX");
    if (!mkdtemp(f->dir))
        return -1;
    char portfile[128], script[1024];
    snprintf(portfile, sizeof portfile, "%s/port", f->dir);
    snprintf(script, sizeof script, "%s/%s", SBX_TEST_SOURCE_DIR, script_rel);
    const char *argv[12];
    int n = 0;
    argv[n++] = "python3";
    argv[n++] = script;
    argv[n++] = "--port-file";
    argv[n++] = portfile;
    if (mode) {
        argv[n++] = "--mode";
        argv[n++] = mode;
    }
    argv[n++] = "--dir";
    argv[n++] = f->dir;
    if (api_key) {
        argv[n++] = "--api-key";
        argv[n++] = api_key;
    }
    argv[n] = NULL;
    f->pid = fake_spawn_python(argv);
    if (f->pid < 0) {
        f->pid = 0;
        fake_stop(f);
        return -1;
    }
    for (int i = 0; i < 200; i++) {
        FILE *pf = fopen(portfile, "r");
        if (pf) {
            int ok = fscanf(pf, "%d", &f->port) == 1;
            fclose(pf);
            if (ok) {
                snprintf(f->url, sizeof f->url, "http://127.0.0.1:%d", f->port);
                return 0;
            }
        }
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
    fake_stop(f);
    return -1;
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(p);
    return 0;
}

void fake_stop(struct fake_service *f)
{
    if (f->pid > 0) {
        kill(f->pid, SIGTERM);
        int st;
        for (int i = 0; i < 100; i++) {
            if (waitpid(f->pid, &st, WNOHANG) == f->pid) {
                f->pid = 0;
                break;
            }
            struct timespec ts = {0, 20 * 1000000L};
            nanosleep(&ts, NULL);
        }
        if (f->pid > 0) {
            kill(f->pid, SIGKILL);
            waitpid(f->pid, &st, 0);
        }
        f->pid = 0;
    }
    if (f->dir[0])
        nftw(f->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    f->dir[0] = '\0';
}

struct buf {
    char *p;
    size_t len;
};

static size_t on_data(char *d, size_t sz, size_t n, void *ctx)
{
    struct buf *b = ctx;
    char *np = realloc(b->p, b->len + sz * n + 1);
    if (!np)
        return 0;
    memcpy(np + b->len, d, sz * n);
    b->p = np;
    b->len += sz * n;
    b->p[b->len] = '\0';
    return sz * n;
}

char *fake_http(const struct fake_service *f, const char *method, const char *path,
                const char *body, const char *header, long *status)
{
    CURL *c = curl_easy_init();
    if (!c)
        return NULL;
    char url[512];
    snprintf(url, sizeof url, "%s%s", f->url, path);
    struct buf b = {calloc(1, 1), 0};
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    if (header)
        h = curl_slist_append(h, header);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    if (body)
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    CURLcode rc = curl_easy_perform(c);
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    if (status)
        *status = code;
    if (rc != CURLE_OK) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

int fake_faults(const struct fake_service *f, const char *json)
{
    long st = 0;
    char *r = fake_http(f, "POST", "/_fake/faults", json, NULL, &st);
    free(r);
    return r && st == 200 ? 0 : -1;
}

char *fake_stats(const struct fake_service *f)
{
    long st;
    char *s = fake_http(f, "GET", "/_fake/stats", NULL, NULL, &st);
    if (!s) {
        /* A test cannot go on without it (criterion reports the crash). */
        fprintf(stderr, "fake_stats: the fake does not answer /_fake/stats\n");
        abort();
    }
    return s;
}

void fake_reset(const struct fake_service *f)
{
    free(fake_http(f, "POST", "/_fake/reset", "", NULL, NULL));
}
