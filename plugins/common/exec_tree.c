/* exec_tree.c - see exec_tree.h. */
#include "exec_tree.h"

const char sbxp_exec_tree_kill_sh[] =
    "tok=$1; me=$$; t=' '; grew=1; [ -n \"$tok\" ] || exit 0; want=\"" SBXP_EXEC_TAG_VAR "=$tok\"; "
    /* a grep that reads past NUL bytes does it in one go; else (busybox)
     * one tr | grep per process */
    "fast=; printf 'x\\000y\\n' | grep -qF y 2>/dev/null && fast=1; "
    "while [ -n \"$grew\" ]; do grew=; "
    "if [ -n \"$fast\" ]; then l=$(grep -lsF -- \"$want\" /proc/[0-9]*/environ); "
    "else l=; for e in /proc/[0-9]*/environ; do "
    "tr '\\000' '\\n' < \"$e\" 2>/dev/null | grep -qxF -- \"$want\" && l=\"$l $e\"; done; fi; "
    "for e in $l; do "
    "q=${e#/proc/}; q=${q%/environ}; [ \"$q\" = \"$me\" ] && continue; "
    "case \"$t\" in *\" $q \"*) ;; *) t=\"$t$q \"; grew=1;; esac; done; "
    "[ -n \"$grew\" ] && kill -STOP $t 2>/dev/null; done; "
    "[ \"$t\" = ' ' ] || kill -KILL $t 2>/dev/null; exit 0";
