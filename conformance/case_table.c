/*
 * case_table.c - every conformance case, in run order.
 *
 * A case declares the capabilities it needs; the runner skips it (with the
 * reason) when the provider's descriptor lacks one. Capability cases are
 * appended here by the changes that add each capability. Names are stable:
 * CI systems track them across runs.
 */
#include "cf_internal.h"

const struct cf_case cf_cases[] = {
    {"identity_two_instances",
     "one session key gives one reference, in one instance and across two",
     0, cf_case_identity_two_instances},
    {"create_idempotent_second_instance",
     "create from a second instance returns the same sandbox with the same files",
     0, cf_case_create_idempotent_second_instance},
    {"attach_after_restart",
     "after closing the instance, a new one attaches and sees the earlier files",
     0, cf_case_attach_after_restart},
    {"attach_other_key_denied",
     "attach with a different session key is refused with SBX_E_DENIED",
     0, cf_case_attach_other_key_denied},
    {"destroy_other_key_denied",
     "destroy with a different session key is refused and destroys nothing",
     0, cf_case_destroy_other_key_denied},
    {"destroy_twice",
     "destroying a sandbox twice, and again from a new instance, succeeds",
     0, cf_case_destroy_twice},
    {"attach_after_destroy",
     "attach after destroy is SBX_E_NOT_FOUND; a new create starts empty",
     0, cf_case_attach_after_destroy},
    {"attach_malformed_ref",
     "a reference this provider never writes (malformed) is SBX_E_INVALID for "
     "attach and destroy, not SBX_E_NOT_FOUND",
     0, cf_case_attach_malformed_ref},
    {"exec_exit_codes",
     "exit codes 0, 3 and 255 come back unchanged with SBX_OK",
     0, cf_case_exec_exit_codes},
    {"exec_killed_by_signal",
     "a command killed by SIGTERM or SIGKILL is reported as killed (exit code "
     "-1, term_signal set), never as an exit",
     0, cf_case_exec_killed_by_signal},
    {"exec_signals_default",
     "a command starts with an empty signal mask and every signal at its default "
     "disposition, whatever the host has",
     0, cf_case_exec_signals_default},
    {"exec_argv_no_shell",
     "argv reaches the program verbatim, without a shell",
     0, cf_case_exec_argv_no_shell},
    {"exec_missing_command",
     "a missing program is SBX_E_NO_COMMAND (or exit code 127)",
     0, cf_case_exec_missing_command},
    {"exec_stdout_stderr",
     "stdout and stderr are delivered apart and counted",
     0, cf_case_exec_stdout_stderr},
    {"exec_stdin",
     "stdin is streamed (1 MiB through cat, byte-exact), empty, or left unread",
     0, cf_case_exec_stdin},
    {"exec_stdin_left_open",
     "exec returns when the command exits although its stdin source stays open",
     0, cf_case_exec_stdin_left_open},
    {"exec_env",
     "the command sees the variables passed and none of the host's",
     0, cf_case_exec_env},
    {"exec_no_inherited_fds",
     "a command starts with only descriptors 0, 1 and 2: none of the provider's "
     "(a workspace directory, a socket, another session's files)",
     0, cf_case_exec_no_inherited_fds},
    {"exec_cwd",
     "cwd selects a workspace subdirectory; cwd outside the workspace is refused",
     0, cf_case_exec_cwd},
    {"exec_cwd_missing",
     "cwd must be an existing directory inside the workspace: missing or not a "
     "directory is SBX_E_INVALID (nothing runs)",
     0, cf_case_exec_cwd_missing},
    {"file_binary_roundtrip",
     "300 KiB of all byte values round-trip under a/b/c, also through cat",
     0, cf_case_file_binary_roundtrip},
    {"file_read_missing",
     "reading a missing file is SBX_E_NOT_FOUND",
     0, cf_case_file_read_missing},
    {"file_read_fifo",
     "a FIFO is SBX_E_INVALID (never block on a FIFO)",
     0, cf_case_file_read_fifo},
    {"file_mode",
     "write_file applies the mode: 0755 is executable, 0 is not",
     0, cf_case_file_mode},
    {"file_mode_invalid",
     "write_file: bits outside 0777 are SBX_E_INVALID, and nothing is written",
     0, cf_case_file_mode_invalid},
    {"write_file_atomic",
     "a concurrent read during write_file sees the whole old content; a write "
     "whose source fails leaves it intact",
     0, cf_case_write_file_atomic},
    {"path_escape_read",
     "reads of ../x, absolute paths and symlinks leading out are refused",
     0, cf_case_path_escape_read},
    {"path_escape_write",
     "writes to ../x, absolute paths and through symlinks leading out are "
     "refused and nothing lands outside",
     0, cf_case_path_escape_write},
    {"cancel_running",
     "cancelling sleep 30 returns SBX_E_CANCELLED within 1 s, no process left",
     0, cf_case_cancel_running},
    {"timeout_kills_children",
     "a 500 ms timeout sets timed_out and kills the command's children too",
     0, cf_case_timeout_kills_children},
    {"exec_leftovers_killed",
     "when the main command exits, processes it left behind (a background job, "
     "a setsid double fork) are killed before exec returns",
     0, cf_case_exec_leftovers_killed},
    {"destroy_kills_running",
     "destroy: commands still running in it (exec calls of other threads on "
     "other handles) are killed; those calls return promptly",
     0, cf_case_destroy_kills_running},
    {"output_bounded",
     "64 MiB of output is truncated, flagged and counted; memory stays bounded",
     0, cf_case_output_bounded},
    {"export_shell_and_files",
     "shell and file tools share /mnt/session/outputs; export publishes it and "
     "a second export replaces the first",
     SBX_CAP_OUTPUT_EXPORT, cf_case_export_shell_and_files},
    {"export_refuses_symlink",
     "an outputs symlink to /etc/passwd makes export fail naming it; the "
     "previous export stays and nothing is left beside it",
     SBX_CAP_OUTPUT_EXPORT, cf_case_export_refuses_symlink},
    {"mount_put_read_only",
     "a verified blob appears at /mnt/session/uploads, cannot be changed from "
     "inside, and a second put replaces it",
     SBX_CAP_FILE_MOUNTS, cf_case_mount_put_read_only},
    {"mount_put_verifies",
     "a blob with a wrong size or SHA-256, or an escaping path, is refused and "
     "never appears",
     SBX_CAP_FILE_MOUNTS, cf_case_mount_put_verifies},
    {"mount_remove_idempotent",
     "mount_remove removes, succeeds again and for absent paths, also after a "
     "restart",
     SBX_CAP_FILE_MOUNTS, cf_case_mount_remove_idempotent},
    {"skill_install_read_only",
     "a pinned bundle appears read-only at /workspace/skills/<name>/ and a new "
     "version replaces it whole",
     SBX_CAP_SKILLS, cf_case_skill_install_read_only},
    {"skill_install_verifies",
     "a wrong SHA-256, a symlink or .. entry, or a bad name is refused and "
     "nothing appears",
     SBX_CAP_SKILLS, cf_case_skill_install_verifies},
    {"skill_survives_restart",
     "an installed skill is still there, read-only, after attach from a new "
     "instance",
     SBX_CAP_SKILLS, cf_case_skill_survives_restart},
    {"egress_create_limited",
     "a sandbox created with a limited network denies by default and allows "
     "exactly its allowlist",
     SBX_CAP_EGRESS, cf_case_egress_create_limited},
    {"egress_set_exact",
     "egress_set leaves exactly the new allowlist (stale targets removed), and "
     "a new instance attaching still reads it",
     SBX_CAP_EGRESS, cf_case_egress_set_exact},
    {"memory_heads_and_commit",
     "a session's mount holds the store's heads before a command; changes, new "
     "files and deletions are committed as versions after it",
     SBX_CAP_MEMORY, cf_case_memory_heads_and_commit},
    {"memory_read_only",
     "a read-only attachment never changes: writes, even by the sandbox's root, "
     "are refused inside or reported (SBX_E_DENIED) and undone before the next "
     "command",
     SBX_CAP_MEMORY, cf_case_memory_read_only},
    {"memory_conflict",
     "a change to a path another writer committed during the command is refused "
     "as a conflict: nothing is overwritten, the change stays in the mount",
     SBX_CAP_MEMORY, cf_case_memory_conflict},
    {"memory_crash_before_writeback",
     "a change made by a command whose host process was killed before writeback "
     "is committed by the next reconcile",
     SBX_CAP_MEMORY, cf_case_memory_crash_before_writeback},
    {"users_exec_as_user",
     "a handle acting as a user made with user_add runs commands with its uid, "
     "its own primary group and its supplementary group; set back, as before",
     SBX_CAP_USERS, cf_case_users_exec_as_user},
    {"users_write_owned",
     "a file written as a user is owned by its uid and reads back",
     SBX_CAP_USERS, cf_case_users_write_owned},
    {"users_root_only_refused",
     "as a user, a root-only file cannot be read (SBX_E_DENIED, no byte) nor a "
     "root directory written, by the file ops or a command",
     SBX_CAP_USERS, cf_case_users_root_only_refused},
    {"users_add_idempotent",
     "group_add and user_add accept the same id (or none) again, refuse another "
     "with SBX_E_EXISTS and an unknown group with SBX_E_NOT_FOUND",
     SBX_CAP_USERS, cf_case_users_add_idempotent},
#define PROC SBX_CAP_PROCESSES
#define PTY (SBX_CAP_PROCESSES | SBX_CAP_PTY)
    {"proc_exit_and_streams",
     "a started process is read to eof: stdout and stderr apart, its exit code, "
     "cursors at the ends of the streams",
     PROC, cf_case_proc_exit_and_streams},
    {"proc_killed_by_signal",
     "a process killed by a signal ends with exit_code -1 and term_signal set",
     PROC, cf_case_proc_killed_by_signal},
    {"proc_stdin",
     "proc_write reaches stdin, SBX_PROC_WRITE_CLOSE ends it (cat exits), a write "
     "after the end is SBX_E_INVALID, 1 MiB arrives byte-exact",
     PROC, cf_case_proc_stdin},
    {"proc_cursor_continues",
     "reading 128 KiB in small pieces from each new cursor covers the output once, "
     "nothing repeated or skipped; an older cursor replays the same bytes",
     PROC, cf_case_proc_cursor_continues},
    {"proc_replay_bounded",
     "1 MiB into a 64 KiB replay buffer: read from 0 after the end, exactly 983040 "
     "bytes are counted lost and the last 64 KiB are intact",
     PROC, cf_case_proc_replay_bounded},
    {"proc_reattach",
     "after a restart a second instance lists the process under its id, writes to "
     "it and continues reading from the cursor",
     PROC, cf_case_proc_reattach},
    {"proc_wait_ms",
     "proc_read returns early on data and on the end, after about wait_ms when "
     "idle, at once with 0",
     PROC, cf_case_proc_wait_ms},
    {"proc_timeout",
     "timeout_ms kills the process tree: timed_out, SIGKILL, promptly",
     PROC, cf_case_proc_timeout},
    {"proc_signal",
     "proc_signal reaches the process group; an ended process is SBX_OK, signal 0 "
     "SBX_E_INVALID",
     PROC, cf_case_proc_signal},
    {"proc_list",
     "proc_list lists every process with distinct ids and their states",
     PROC, cf_case_proc_list},
    {"proc_foreign_id",
     "another session's process id is SBX_E_NOT_FOUND for read, write, signal and "
     "absent from its list; malformed ids are SBX_E_INVALID",
     PROC, cf_case_proc_foreign_id},
    {"proc_concurrent",
     "32 processes run at once in one sandbox (all listed running), each read to "
     "its own output",
     PROC, cf_case_proc_concurrent},
    {"proc_destroy_kills",
     "destroy kills every process: after a new create of the key none is listed, "
     "none runs, its id is SBX_E_NOT_FOUND",
     PROC, cf_case_proc_destroy_kills},
    {"proc_output_flood",
     "a process writing as fast as it can into a 1 MiB replay buffer, unread for a "
     "second, then read: bytes are dropped and counted, memory stays bounded",
     PROC, cf_case_proc_output_flood},
    {"pty_terminal",
     "on a PTY stdin, stdout and stderr are a terminal of the size asked for "
     "(24x80 by default), TERM is set, one output stream",
     PTY, cf_case_pty_terminal},
    {"pty_resize",
     "proc_resize changes the size the program sees (SIGWINCH, stty size); a "
     "process without a PTY is SBX_E_INVALID",
     PTY, cf_case_pty_resize},
    {"pty_ctrl_c",
     "^C written to the terminal interrupts the foreground job (SIGINT)",
     PTY, cf_case_pty_ctrl_c},
    {"pty_eof",
     "^D at the start of a line, and SBX_PROC_WRITE_CLOSE, end cat on a terminal",
     PTY, cf_case_pty_eof},
    {"pty_paste",
     "a 1 MiB paste through proc_write reaches a raw-mode terminal program whole",
     PTY, cf_case_pty_paste},
    {"fileops_list",
     "file_list reports the names, types, sizes, modes and mtimes of a prepared "
     "tree (file, directory, symlink, FIFO); missing SBX_E_NOT_FOUND, a file "
     "SBX_E_INVALID",
     SBX_CAP_FILE_OPS, cf_case_fileops_list},
    {"fileops_list_large",
     "file_list of a directory of 5000 entries gives each once",
     SBX_CAP_FILE_OPS, cf_case_fileops_list_large},
    {"fileops_stat",
     "file_stat of a file, a directory, the root and symlinks (reported as such, "
     "never followed); missing SBX_E_NOT_FOUND",
     SBX_CAP_FILE_OPS, cf_case_fileops_stat},
    {"fileops_mkdir",
     "file_mkdir applies its mode, refuses an existing path (SBX_E_EXISTS) and a "
     "missing parent (SBX_E_NOT_FOUND) unless SBX_MKDIR_PARENTS",
     SBX_CAP_FILE_OPS, cf_case_fileops_mkdir},
    {"fileops_remove",
     "file_remove of a file, a symlink (not its target), an empty directory; a "
     "non-empty one only with SBX_REMOVE_RECURSIVE",
     SBX_CAP_FILE_OPS, cf_case_fileops_remove},
    {"fileops_remove_symlink_out",
     "a recursive file_remove of a tree holding symlinks out of the workspace "
     "leaves their targets intact",
     SBX_CAP_FILE_OPS, cf_case_fileops_remove_symlink_out},
    {"fileops_rename",
     "file_rename moves and replaces, refuses an existing target with "
     "SBX_RENAME_NOREPLACE, renames a symlink as itself",
     SBX_CAP_FILE_OPS, cf_case_fileops_rename},
    {"fileops_escape",
     "'..', absolute paths and paths through a symlink out are SBX_E_INVALID for "
     "every file op; listing the symlink never shows the outside",
     SBX_CAP_FILE_OPS, cf_case_fileops_escape},
    {"ports_resolve",
     "a port declared at create resolves to a host, port and URL; an undeclared "
     "one is SBX_E_NOT_FOUND",
     SBX_CAP_PORTS, cf_case_ports_resolve},
    {"ports_reachable",
     "an HTTP server started in the sandbox answers at the endpoint's URL, and an "
     "endpoint on loopback answers on no other address of this machine",
     SBX_CAP_PORTS | SBX_CAP_PROCESSES, cf_case_ports_reachable},
    {"pause_idempotent_resume_idempotent",
     "pause of a paused sandbox and resume of a running one are SBX_OK; it runs "
     "commands after",
     SBX_CAP_PAUSE, cf_case_pause_idempotent},
    {"pause_freezes_processes",
     "a process appending a tick every 50 ms makes no progress while its sandbox "
     "is paused, and runs on after resume",
     SBX_CAP_PAUSE | SBX_CAP_PROCESSES, cf_case_pause_freezes_processes},
    {"pause_keeps_workspace",
     "files written before a pause read back after resume",
     SBX_CAP_PAUSE, cf_case_pause_keeps_workspace},
    {"exec_resumes_paused",
     "exec, read_file and write_file on a paused sandbox resume it and work, "
     "without an error",
     SBX_CAP_PAUSE, cf_case_exec_resumes_paused},
    {"attach_resumes_paused",
     "a sandbox paused through one handle is attached from a new instance and "
     "runs a command",
     SBX_CAP_PAUSE, cf_case_attach_resumes_paused},
    {"destroy_paused",
     "destroy of a paused sandbox succeeds (twice); attach is then "
     "SBX_E_NOT_FOUND and a new create of the key starts empty",
     SBX_CAP_PAUSE, cf_case_destroy_paused},
    {"pause_gone",
     "pause and resume of a destroyed sandbox are SBX_E_NOT_FOUND with a message",
     SBX_CAP_PAUSE, cf_case_pause_gone},
    {"pool_handover",
     "a sandbox made for key A is attached, used and destroyed under key B with "
     "A's key hash; nothing of A's text is in its environment or hostname",
     SBX_CAP_POOL, cf_case_pool_handover},
    {"fork_copies_workspace",
     "a fork's workspace has the source's directories, files and symlinks with "
     "their modes, link targets (never followed) and contents; the source is "
     "unchanged",
     SBX_CAP_FORK, cf_case_fork_copies_workspace},
    {"fork_own_identity",
     "a fork is attached and destroyed with its own key only (the source's key is "
     "SBX_E_DENIED, and the fork's key on the source), from a new instance; "
     "create with its key finds it",
     SBX_CAP_FORK, cf_case_fork_own_identity},
    {"fork_shares_nothing",
     "appends and new files on either side after a fork never show on the other; "
     "destroying the fork or the source leaves the other whole",
     SBX_CAP_FORK, cf_case_fork_shares_nothing},
    {"fork_source_keeps_running",
     "a process of the source runs on through a fork and is not listed in the fork",
     SBX_CAP_FORK | SBX_CAP_PROCESSES, cf_case_fork_source_keeps_running},
    {"fork_paused_source_stays_paused",
     "a fork of a paused sandbox leaves it paused: its tick loop adds nothing until "
     "the next command",
     SBX_CAP_FORK | SBX_CAP_PAUSE | SBX_CAP_PROCESSES,
     cf_case_fork_paused_source_stays_paused},
    {"fork_gone",
     "fork of a destroyed sandbox is SBX_E_NOT_FOUND with a message",
     SBX_CAP_FORK, cf_case_fork_gone},
#undef PROC
#undef PTY
};

const size_t cf_case_total = sizeof cf_cases / sizeof cf_cases[0];
