/*
 * process_id.c - boot id, pid namespace and start time from /proc (see
 * process_id.h).
 */
#include "base/process_id.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void sbxh_process_realm(char *buf, size_t len)
{
    char boot[64] = "";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
    if (f) {
        if (!fgets(boot, sizeof boot, f))
            boot[0] = '\0';
        fclose(f);
    }
    boot[strcspn(boot, "\n")] = '\0';
    struct stat st;
    if (!boot[0] || stat("/proc/self/ns/pid", &st) != 0) {
        snprintf(buf, len, "unknown");
        return;
    }
    snprintf(buf, len, "%s-%llu", boot, (unsigned long long)st.st_ino);
}

unsigned long long sbxh_process_start_time(pid_t pid)
{
    char path[64], line[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, line, sizeof line - 1);
    close(fd);
    if (n <= 0)
        return 0;
    line[n] = '\0';
    /* the command name may hold spaces and parentheses: fields count from
     * the last ')' */
    char *p = strrchr(line, ')');
    if (!p)
        return 0;
    unsigned long long start = 0;
    /* after ") ": state is field 3; starttime is field 22 */
    if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d "
                      "%*d %*d %*d %llu",
               &start) != 1)
        return 0;
    return start;
}

bool sbxh_process_gone(pid_t pid, unsigned long long start_time)
{
    if (pid <= 0)
        return false;
    if (kill(pid, 0) != 0 && errno == ESRCH)
        return true;
    unsigned long long now = sbxh_process_start_time(pid);
    /* a process with that pid exists: it is the owner only if it started
     * when the owner did (0: unreadable, so not certain) */
    return now != 0 && start_time != 0 && now != start_time;
}
