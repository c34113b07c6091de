/* fake_daytona.c - see fake_daytona.h. */
#include "fake_daytona.h"
#include "../support/fake_spawn.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

int fake_daytona_start(struct fake_service *f, const char *api_key)
{
    memset(f, 0, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/sbx-fake-XXXXXX");
    if (!mkdtemp(f->dir))
        return -1;
    char portfile[128], script[1024];
    snprintf(portfile, sizeof portfile, "%s/port", f->dir);
    snprintf(script, sizeof script, "%s/tests/daytona/fake_daytona.py", SBX_TEST_SOURCE_DIR);
    const char *argv[] = {"python3", script, "--port-file", portfile, "--dir", f->dir,
                          api_key ? "--api-key" : NULL, api_key, NULL};
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
