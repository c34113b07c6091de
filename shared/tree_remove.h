/*
 * tree_remove.h - removing a directory tree at any depth (shared by the
 * host and the plugins; symbols prefixed sbxs_).
 *
 * The tree may be hostile: a sandboxed command built it, may be building it
 * still, and may have nested it thousands of levels deep. Removal never
 * follows a symbolic link, never leaves the tree (each step back up is
 * checked against the device and inode seen on the way down), and holds at
 * most two descriptors of its own whatever the depth, so a deep tree cannot
 * exhaust the process's descriptors (EMFILE).
 */
#ifndef SBXS_TREE_REMOVE_H
#define SBXS_TREE_REMOVE_H

/*
 * Remove the entry `name` of the directory dirfd: unlink a file or link,
 * or remove a directory with everything below it. `name` is one path
 * component. Returns 0 (also when it does not exist) or -errno: -EINVAL for
 * a bad name, -ENOTEMPTY or -EAGAIN when a concurrent writer kept changing
 * the tree through every retry, or the error of the step that failed. Cost
 * is linear in the number of entries (plus one directory reopen per
 * subdirectory); memory is one name per level of the path being removed.
 */
int sbxs_remove_tree(int dirfd, const char *name);

#endif
