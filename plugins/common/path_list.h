/*
 * path_list.h - arrays of records sorted by a path: the file lists of the
 * memory stores (docker/memory.c, remote_memory.c). A record type is any
 * struct whose FIRST member is `char *path` (malloc'd, owned by the
 * array); these functions know nothing else of it, so each caller keeps
 * its own typed array and passes its element size.
 */
#ifndef SBXP_PATH_LIST_H
#define SBXP_PATH_LIST_H

#include <stddef.h>

/*
 * Append a record for a copy of path to v (n records of elem bytes, *cap
 * allocated; grown 64 records first, then doubling): returns the array,
 * perhaps moved, whose record n has that path and zeros elsewhere (the
 * caller fills the rest and counts it), or NULL when out of memory (v is
 * then unchanged and still the caller's).
 */
void *sbxp_path_list_append(void *v, size_t n, size_t *cap, size_t elem, const char *path);

/* qsort/bsearch comparator of two records by path (strcmp order). */
int sbxp_path_list_cmp(const void *a, const void *b);

/* Sort n records by path. */
void sbxp_path_list_sort(void *v, size_t n, size_t elem);

/* The record of path in v, sorted by sbxp_path_list_sort, or NULL. */
void *sbxp_path_list_find(const void *v, size_t n, size_t elem, const char *path);

/* Free each record's path, then v itself. */
void sbxp_path_list_free(void *v, size_t n, size_t elem);

#endif /* SBXP_PATH_LIST_H */
