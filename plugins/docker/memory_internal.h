/*
 * memory_internal.h - what the memory files of the docker provider share
 * (memory.c: attachments, loads, the baseline file; memory_walk.c: tree
 * walks; memory_diff.c: diff, accept and the inotify watch).
 */
#ifndef SBX_DOCKER_MEMORY_INTERNAL_H
#define SBX_DOCKER_MEMORY_INTERNAL_H

#include "docker.h"
#include "path_list.h"

#include <sys/stat.h>

/* Deepest directory nesting walked: store paths are at most 1024 bytes,
 * so anything deeper cannot be committed and is refused by name. */
#define MEMORY_MAX_DEPTH 128

/* Lists of files (sorted by path where they are searched: path_list.h). */
void docker_list_free(struct docker_mem_list *l);
int docker_list_add(struct docker_mem_list *l, const char *path, const struct stat *s);
/* docker_list_add of a file as a list holds it. */
int docker_list_add_file(struct docker_mem_list *l, const struct docker_mem_file *f);
const struct docker_mem_file *docker_list_find(const struct docker_mem_list *l, const char *path);
int docker_same_stat(const struct docker_mem_file *a, const struct docker_mem_file *b);

/* What a walk does with each entry: regular files go to `files` (with
 * chmod first when `fix_modes`), everything else that is not a directory
 * to `on_other`. */
struct walk {
    struct docker_state *st;
    sbx_call *call;
    struct docker_mem_list files;
    int fix_modes; /* after a load of a read-write tree: 0666 files, 0777 dirs */
    int inotify_fd; /* >= 0: add a watch on every directory ... */
    struct docker_memory *watch_mem; /* ... recorded in its wd_paths */
    int watch_failed; /* a watch could not be added */
    int dirs_only;  /* skip the stat of entries readdir says are not
                       directories (arming a watch) */
    int (*on_other)(struct walk *w, int dirfd, const char *name, const char *path,
                    const struct stat *s);
    void *ud;
};

/* Record that watch descriptor wd watches the directory path[0..len).
 * -1 when out of memory. */
int docker_watch_map(struct docker_memory *mem, int wd, const char *path, size_t len);

/* Walk the directory dirfd whose tree-relative path is path[0..len)
 * (path has room for 4096 bytes). */
int docker_walk_dir(struct walk *w, int dirfd, char *path, size_t len, int depth);
/* Walk a whole tree; files sorted by path afterwards. */
int docker_walk_tree(struct walk *w, const char *tree);

/* The baseline file: written whole, or read (a missing one is empty). */
int docker_baseline_write(struct docker_state *st, sbx_call *call, struct docker_memory *mem,
                   const struct docker_mem_list *l);
/* Append records of changed files and removals (an accept after a diff
 * that saw only those). */
int docker_baseline_append(struct docker_state *st, sbx_call *call, struct docker_memory *mem,
                    const struct docker_mem_list *changed, char *const *removed,
                    size_t nremoved);
int docker_baseline_read(struct docker_state *st, sbx_call *call, const struct docker_memory *mem,
                  struct docker_mem_list *l);
/* Walk the tree and write it as the baseline (fix_modes: 0666/0777 first). */
int docker_record_baseline(struct docker_state *st, sbx_call *call, struct docker_memory *mem,
                    int fix_modes);

/* Test builds (SBX_TEST_HOOKS): do to the tree at this point what a
 * container could (memory_race.c); nothing in a shipped provider. name is
 * the entry of dirfd the code is at (NULL for the tree itself). */
void docker_memory_race_point(const char *step, const char *path, int dirfd, const char *name);

#endif
