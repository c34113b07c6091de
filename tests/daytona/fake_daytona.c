/* fake_daytona.c - see fake_daytona.h. */
#include "fake_daytona.h"

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
    /* The fake's commands stand for a fresh machine's: no signal of the
     * test process may stay ignored or blocked in them, glibc's own 32 and
     * 33 included, which only the raw system call can reset (as
     * tests/e2b/fake_service.c does). */
    f->pid = fork();
    if (f->pid < 0) {
        f->pid = 0;
        fake_stop(f);
        return -1;
    }
    if (f->pid == 0) {
        struct ksa {
            void (*handler)(int);
            unsigned long flags;
            void (*restorer)(void);
            unsigned long mask;
        } dfl = {SIG_DFL, 0, 0, 0};
        for (int s = 1; s <= 64; s++)
            if (s != SIGKILL && s != SIGSTOP)
                syscall(SYS_rt_sigaction, s, &dfl, NULL, sizeof dfl.mask);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execvp("python3", (char *const *)argv);
        _exit(127);
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
