/* fake_service.c - see fake_service.h. */
#include "fake_service.h"
#include "../support/fake_request.h"
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
    fake_reap(&f->pid, 2000);
    if (f->dir[0])
        nftw(f->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    f->dir[0] = '\0';
}

char *fake_http(const struct fake_service *f, const char *method, const char *path,
                const char *body, const char *header, long *status)
{
    return fake_request(f->url, method, path, body, header, NULL, 0, status);
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
