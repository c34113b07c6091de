/*
 * memory_race.c - a test-only race point in the host's handling of a
 * memory tree (SBX_TEST_HOOKS builds; a shipped provider has an empty
 * function).
 *
 * A container process can change a read-write tree at any moment, also
 * between the host looking at an entry and acting on it. Such a race is
 * too narrow to hit from inside a container on demand, so the test build
 * makes it happen exactly there: at a named point of a walk, a diff or a
 * load, the host itself does to the tree what the container could have
 * done (below the very directory descriptor the code works with):
 *
 *   SBX_TEST_MEMORY_RACE="STEP:PATH:WHAT[:VICTIM];..."
 *
 * STEP is the point ("walk-entry": an entry of a walk was looked at,
 * before it is acted on; "diff-open": before a changed file is read;
 * "load-empty": a load is about to empty the tree; "load-published": the
 * loaded entries are in the tree, before the walk that records the
 * baseline), PATH the tree-relative path the code is at
 * ("" for the tree itself). VICTIM is the name, relative to the
 * directory the code holds, that is replaced (default: the entry
 * itself); what it was is moved aside to VICTIM.raced, and WHAT is put
 * in its place: "symlink=TARGET", "fifo" or "null" (a character device,
 * 1:3). Each spec fires once per process.
 */
#include "memory_internal.h"

#ifdef SBX_TEST_HOOKS
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define MAX_SPECS 8

static void race_act(int dirfd, const char *victim, const char *what)
{
    char aside[4200];
    snprintf(aside, sizeof aside, "%s.raced", victim);
    if (renameat(dirfd, victim, dirfd, aside) != 0 && errno != ENOENT)
        return;
    if (!strncmp(what, "symlink=", 8))
        (void)symlinkat(what + 8, dirfd, victim);
    else if (!strcmp(what, "fifo"))
        (void)mkfifoat(dirfd, victim, 0666);
    else if (!strcmp(what, "null"))
        (void)mknodat(dirfd, victim, S_IFCHR | 0666, makedev(1, 3));
}

void docker_memory_race_point(const char *step, const char *path, int dirfd, const char *name)
{
    static unsigned fired;
    const char *env = getenv("SBX_TEST_MEMORY_RACE");
    if (!env || !*env)
        return;
    char copy[4096];
    snprintf(copy, sizeof copy, "%s", env);
    unsigned i = 0;
    char *save = NULL;
    for (char *spec = strtok_r(copy, ";", &save); spec && i < MAX_SPECS;
         spec = strtok_r(NULL, ";", &save), i++) {
        char *f[4] = {spec, NULL, NULL, NULL};
        for (int k = 1; k < 4; k++) {
            char *c = f[k - 1] ? strchr(f[k - 1], ':') : NULL;
            if (c) {
                *c = '\0';
                f[k] = c + 1;
            }
        }
        if (!f[2] || (fired & (1u << i)) || strcmp(f[0], step) || strcmp(f[1], path))
            continue;
        const char *victim = f[3] && *f[3] ? f[3] : name;
        fired |= 1u << i;
        if (victim)
            race_act(dirfd, victim, f[2]);
    }
}
#else
void docker_memory_race_point(const char *step, const char *path, int dirfd, const char *name)
{
    (void)step;
    (void)path;
    (void)dirfd;
    (void)name;
}
#endif
