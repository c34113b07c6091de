/*
 * kill.c - ending a command's whole process tree. envd's SendSignal and
 * its Connect-Timeout-Ms deadline reach the command's own process only
 * (start.go ends the process it started), and whether envd makes it a
 * process group leader is not part of its spec. So a root script inside
 * the sandbox finds the tree itself in /proc, while the command still
 * lives (exec's own timer fires before envd's deadline): every process
 * whose parent is in the tree, plus the members of a process group or
 * session whose id is the command's pid (that catches orphans whose parent
 * already died; such a group or session can only be the command's own,
 * since the kernel does not give a pid to a new process while a group or
 * session still has it as its id). The set is stopped (SIGSTOP, so nothing in
 * it forks meanwhile) and scanned again until it no longer grows, then
 * killed. A process that left both the group and the session and whose
 * parent died before the scan is out of reach of these: only the
 * sandbox's cgroup knows it, and envd exposes no call for that. So every
 * command exec starts also carries SBX_EXEC_TAG=<random token> in its
 * environment, which its descendants inherit (through setsid and double
 * forks), and the scan also takes every process whose initial environment
 * has it (one grep over /proc/<pid>/environ per round: a grep that reads
 * NUL bytes, as GNU grep does). After a command exits on its own, exec runs the same scan for
 * what it left behind (the ABI: leftovers are killed before exec
 * returns). A process that clears its environment and leaves the group,
 * the session and its parent escapes. See e2b_core.h.
 */
#include "e2b_core.h"

#include <stdio.h>

/* $1: the command's pid; $2: its SBX_EXEC_TAG token, or empty. */
static const char kill_tree_sh[] =
    "p=$1; tok=$2; me=$$; t=\" $p \"; grew=1; "
    "while [ -n \"$grew\" ]; do grew=; "
    "if [ -n \"$tok\" ]; then "
    "for e in $(grep -lsF -- \"SBX_EXEC_TAG=$tok\" /proc/[0-9]*/environ); do "
    "q=${e#/proc/}; q=${q%/environ}; [ \"$q\" = \"$me\" ] && continue; "
    "case \"$t\" in *\" $q \"*) ;; *) t=\"$t$q \"; grew=1;; esac; done; fi; "
    "for f in /proc/[0-9]*/stat; do q=${f#/proc/}; q=${q%/stat}; "
    "case \"$t\" in *\" $q \"*) continue;; esac; [ \"$q\" = \"$me\" ] && continue; "
    "read -r l < \"$f\" 2>/dev/null || continue; set -- ${l##*) }; "
    "if case \"$t\" in *\" $2 \"*) true;; *) false;; esac || "
    "[ \"$3\" = \"$p\" ] || [ \"$4\" = \"$p\" ]; "
    "then t=\"$t$q \"; grew=1; fi; done; "
    "kill -STOP $t 2>/dev/null; done; "
    "kill -KILL $t 2>/dev/null; true";

void e2b_kill_tree(sbx_sandbox *sb, uint32_t pid, const char *token)
{
    char ps[16];
    snprintf(ps, sizeof ps, "%u", pid);
    const char *argv[] = {"sh", "-c", kill_tree_sh, "sh", ps, token ? token : "", NULL};
    int code = -1;
    if (e2b_exec_helper_as(sb, NULL, "root", "/", argv, NULL, 10000, &code, NULL, 0) !=
            SBX_OK ||
        code != 0)
        sb->st->host->log(sb->st->host, SBX_LOG_WARN,
                          "%s: killing the process tree of %u in %s failed",
                          sb->st->cfg.provider, pid, sb->id);
}
