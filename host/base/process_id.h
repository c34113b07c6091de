/*
 * process_id.h - naming a process so that another process can tell, later,
 * whether it still runs (internal).
 *
 * Intent owners are recorded in the store and judged by other workers. A
 * hostname is no identity (two machines, or two containers, can share one)
 * and a pid alone is reused. A process is named instead by where its pid
 * means something — the boot (the kernel's random boot id) and the pid
 * namespace — plus the pid and the process's start time in clock ticks
 * since boot, which together never name two processes.
 */
#ifndef SBX_HOST_PROCESS_ID_H
#define SBX_HOST_PROCESS_ID_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* "<boot id>-<pid namespace inode>": where pids of this process are
 * comparable; "unknown" when /proc does not tell. */
void sbxh_process_realm(char *buf, size_t len);

/* The start time of pid (field 22 of /proc/<pid>/stat), or 0 when the
 * process does not exist or cannot be read. */
unsigned long long sbxh_process_start_time(pid_t pid);

/* Whether pid, started at start_time, is gone, judged from this realm:
 * true only when it is certain (no such process, or another process with
 * that pid). */
bool sbxh_process_gone(pid_t pid, unsigned long long start_time);

#endif
