/*
 * fixture_fork.h - cfproc's fork (fixture_fork.c): copying a workspace
 * tree for a fork, with the defects its break modes select, and the
 * record of each fork's source owner.
 */
#ifndef SBX_TEST_FIXTURE_FORK_H
#define SBX_TEST_FIXTURE_FORK_H

#include <sbx/provider.h>

#include <stdbool.h>
#include <stddef.h>

/* How a fork copies the tree (break modes of cfproc). */
enum fxf_copy {
    FXF_EXACT = 0,        /* modes, symlinks as links, contents */
    FXF_FOLLOWS_SYMLINKS, /* a link to a file becomes a copy of it */
    FXF_DROPS_MODES,      /* files 0644, directories 0755 */
    FXF_HARDLINKS         /* regular files hard-linked, not copied */
};

/* Copy the tree below from_root into the existing, empty to_root (regular
 * files, directories and symlinks; other kinds are skipped). Returns 0, or
 * -1 with the reason in why (cap bytes). */
int fxf_copy_tree(const char *from_root, const char *to_root, int mode, char *why,
                  size_t cap);

/* Whether the directory root holds no entry (a missing one is not empty). */
int fxf_empty(const char *root);

/* Remember that the sandbox of fork_owner was forked from source_owner's. */
void fxf_parent_record(const char *fork_owner, const char *source_owner);

/* Whether owner's sandbox is the one fork_owner's was forked from. */
bool fxf_is_parent(const char *fork_owner, const char *owner);

#endif
