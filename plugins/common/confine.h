/*
 * confine.h - path confinement below a directory, for providers that keep a
 * workspace on the local file system.
 *
 * Every lookup goes through openat2(2) with RESOLVE_BENEATH and
 * RESOLVE_NO_MAGICLINKS relative to a directory fd, so "..", absolute paths
 * and symlinks (absolute or relative) that lead out of the directory fail
 * with EXDEV, race-free, instead of being resolved. Requires Linux >= 5.6;
 * on older kernels the functions fail with ENOSYS.
 *
 * Conventions: functions return 0 or a non-negative fd on success and
 * -errno on failure; they never print, never exit and touch no process-global
 * state. Every fd they open is O_CLOEXEC and owned by the caller.
 */
#ifndef SBXP_CONFINE_H
#define SBXP_CONFINE_H

#include <sys/types.h>

/*
 * sbxp_confine_open - open `path` relative to the directory `dirfd`, refusing to
 * resolve anything outside it.
 * flags/mode are as for openat(2); O_CLOEXEC is always added. Returns the new
 * fd or -errno: -EXDEV when the path (or a symlink on it) escapes dirfd,
 * -ELOOP for magic links or symlink loops, -ENOSYS without openat2.
 */
int sbxp_confine_open(int dirfd, const char *path, int flags, mode_t mode);

/*
 * sbxp_confine_open_strict - sbxp_confine_open that resolves no symlink at all
 * (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS): one anywhere on the path is
 * -ELOOP, one that stays inside dirfd as much as one that leads out; with
 * O_PATH | O_NOFOLLOW a trailing symlink is opened as itself. For trees a
 * sandbox can write, where a path names exactly the entries on it or
 * nothing.
 */
int sbxp_confine_open_strict(int dirfd, const char *path, int flags, mode_t mode);

/*
 * sbxp_confine_reopen - open the very file the descriptor fd (typically O_PATH,
 * whose type was checked with fstat) refers to, through /proc/self/fd:
 * never by a name that could have been swapped since. flags as for
 * open(2), O_CLOEXEC added. Returns the new fd or -errno.
 */
int sbxp_confine_reopen(int fd, int flags);

/*
 * sbxp_confine_fchmod - chmod the file fd refers to, also through an O_PATH
 * descriptor (fchmod(2) refuses those). -ELOOP for a symlink (its mode is
 * not changed, and it is never followed). 0 or -errno.
 */
int sbxp_confine_fchmod(int fd, mode_t mode);

/*
 * sbxp_confine_check_path - lexical pre-check of a path meant to stay below a
 * directory, done before touching the file system so that an escaping path
 * is refused even when its components do not exist (and no parent
 * directory gets created for it). Returns 0 when path is non-empty,
 * relative and no ".." climbs above its start; -EINVAL for NULL or ""; and
 * -EXDEV for an absolute or escaping path. Symlinks are not looked at: the
 * enforcement is sbxp_confine_open().
 */
int sbxp_confine_check_path(const char *path);

/*
 * sbxp_confine_mkdirs - make sure the directory `path` (relative to dirfd) exists,
 * creating missing components with `mode` (umask applies), each creation
 * done with mkdirat() in a parent that was itself opened confined.
 * Returns an O_PATH|O_DIRECTORY fd of the directory (owned by the caller) or
 * -errno (-EXDEV on escape, -ENOTDIR when a component is a file).
 * An empty path or "." returns a new fd for dirfd itself.
 */
int sbxp_confine_mkdirs(int dirfd, const char *path, mode_t mode);

/*
 * sbxp_confine_remove_tree - remove the entry `name` (one path component, no
 * slash) of the directory dirfd and, when it is a directory, everything
 * below it. Symlinks are removed, never followed; directories are opened
 * with O_NOFOLLOW and walked with fdopendir()/unlinkat(). Directories
 * without write or search permission for the owner are made accessible
 * first. Returns 0 (also when `name` does not exist) or -errno.
 * Uses one fd per directory level of the tree.
 */
int sbxp_confine_remove_tree(int dirfd, const char *name);

#endif /* SBXP_CONFINE_H */
