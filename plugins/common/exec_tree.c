/* exec_tree.c - see exec_tree.h. */
#include "exec_tree.h"

const char sbx_exec_tree_kill_sh[] =
    "tok=$1; me=$$; t=' '; grew=1; [ -n \"$tok\" ] || exit 0; "
    "while [ -n \"$grew\" ]; do grew=; "
    "for e in $(grep -lsF -- \"" SBX_EXEC_TREE_VAR "=$tok\" /proc/[0-9]*/environ); do "
    "q=${e#/proc/}; q=${q%/environ}; [ \"$q\" = \"$me\" ] && continue; "
    "case \"$t\" in *\" $q \"*) ;; *) t=\"$t$q \"; grew=1;; esac; done; "
    "[ -n \"$grew\" ] && kill -STOP $t 2>/dev/null; done; "
    "[ \"$t\" = ' ' ] || kill -KILL $t 2>/dev/null; exit 0";
