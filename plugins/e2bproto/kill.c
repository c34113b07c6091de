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
 * parent died before the scan is out of reach: only the sandbox's cgroup
 * knows it, and envd exposes no call for that. See e2b_core.h.
 */
#include "e2b_core.h"

#include <stdio.h>

/* $1: the command's pid. */
static const char kill_tree_sh[] =
    "p=$1; me=$$; t=\" $p \"; grew=1; "
    "while [ -n \"$grew\" ]; do grew=; "
    "for f in /proc/[0-9]*/stat; do q=${f#/proc/}; q=${q%/stat}; "
    "case \"$t\" in *\" $q \"*) continue;; esac; [ \"$q\" = \"$me\" ] && continue; "
    "read -r l < \"$f\" 2>/dev/null || continue; set -- ${l##*) }; "
    "if case \"$t\" in *\" $2 \"*) true;; *) false;; esac || "
    "[ \"$3\" = \"$p\" ] || [ \"$4\" = \"$p\" ]; "
    "then t=\"$t$q \"; grew=1; fi; done; "
    "kill -STOP $t 2>/dev/null; done; "
    "kill -KILL $t 2>/dev/null; true";

void e2b_kill_tree(sbx_sandbox *sb, uint32_t pid)
{
    char ps[16];
    snprintf(ps, sizeof ps, "%u", pid);
    const char *argv[] = {"sh", "-c", kill_tree_sh, "sh", ps, NULL};
    int code = -1;
    if (e2b_exec_helper_as(sb, NULL, "root", "/", argv, NULL, 10000, &code, NULL, 0) !=
            SBX_OK ||
        code != 0)
        sb->st->host->log(sb->st->host, SBX_LOG_WARN,
                          "%s: killing the process tree of %u in %s failed",
                          sb->st->cfg.provider, pid, sb->id);
}
