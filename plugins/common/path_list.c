/* path_list.c - records sorted by path (see path_list.h). */
#include "path_list.h"

#include <stdlib.h>
#include <string.h>

/* A record's path: its first member (a pointer to a struct converts to a
 * pointer to its first member). */
static char *path_of(const void *rec)
{
    return *(char *const *)rec;
}

void *sbxp_path_list_append(void *v, size_t n, size_t *cap, size_t elem, const char *path)
{
    char *copy = strdup(path);
    if (!copy)
        return NULL;
    if (n >= *cap) {
        size_t c = *cap ? *cap * 2 : 64;
        void *nv = realloc(v, c * elem);
        if (!nv) {
            free(copy);
            return NULL;
        }
        *cap = c;
        v = nv;
    }
    char *rec = (char *)v + n * elem;
    memset(rec, 0, elem);
    memcpy(rec, &copy, sizeof copy);
    return v;
}

int sbxp_path_list_cmp(const void *a, const void *b)
{
    return strcmp(path_of(a), path_of(b));
}

void sbxp_path_list_sort(void *v, size_t n, size_t elem)
{
    if (n > 1)
        qsort(v, n, elem, sbxp_path_list_cmp);
}

void *sbxp_path_list_find(const void *v, size_t n, size_t elem, const char *path)
{
    /* The key is a char * standing for a record: the comparator reads
     * only the first member. */
    char *key = (char *)path;
    return n ? bsearch(&key, v, n, elem, sbxp_path_list_cmp) : NULL;
}

void sbxp_path_list_free(void *v, size_t n, size_t elem)
{
    for (size_t i = 0; i < n; i++)
        free(path_of((const char *)v + i * elem));
    free(v);
}
