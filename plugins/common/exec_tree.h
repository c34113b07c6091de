/*
 * exec_tree.h - killing what a command of a remote sandbox left behind.
 *
 * The ABI: when the main command exits, the processes it left behind are
 * killed before exec returns. Remote services end a command's process
 * group at most, and only on request; a background job that outlives the
 * command, or one that left the group with setsid or a double fork, is
 * out of their reach. So a provider starts each command with
 * SBX_EXEC_TAG=<random token> in its environment (inherited by every
 * descendant that does not clear its environment) and, once the command
 * has ended, runs sbxp_exec_tree_kill_sh in the sandbox with the token as
 * $1: it stops every process whose initial environment
 * (/proc/<pid>/environ) has the token, scans again until the set no
 * longer grows (so nothing in it forks meanwhile), then kills them all.
 * One grep over every environ where grep reads past NUL bytes (GNU),
 * else one tr | grep per process (busybox).
 */
#ifndef SBXP_EXEC_TAG_H
#define SBXP_EXEC_TAG_H

#define SBXP_EXEC_TAG_VAR "SBX_EXEC_TAG"

/* The sh script; $1 is the token (sbxs_random_hex(tok, 16)). Exits 0. */
extern const char sbxp_exec_tree_kill_sh[];

#endif
