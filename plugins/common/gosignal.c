/* gosignal.c - Go's names of signals. See gosignal.h. */
#include "gosignal.h"

#include <stdlib.h>
#include <string.h>

int sbxp_go_signal_number(const char *status)
{
    static const struct {
        const char *name;
        int sig;
    } names[] = {
        {"hangup", 1}, {"interrupt", 2}, {"quit", 3}, {"illegal instruction", 4},
        {"trace/breakpoint trap", 5}, {"aborted", 6}, {"bus error", 7},
        {"floating point exception", 8}, {"killed", 9}, {"user defined signal 1", 10},
        {"segmentation fault", 11}, {"user defined signal 2", 12}, {"broken pipe", 13},
        {"alarm clock", 14}, {"terminated", 15},
    };
    const char *p = status ? strstr(status, "signal: ") : NULL;
    if (!p)
        return 0;
    p += strlen("signal: ");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strncmp(p, names[i].name, strlen(names[i].name)))
            return names[i].sig;
    if (!strncmp(p, "signal ", 7))
        return atoi(p + 7);
    return 0;
}
