/*
 * memory_slug.h - the name (slug) of a memory store as the providers
 * accept it: it becomes a directory name (/mnt/memory/<slug>) and a
 * state file's name on the host.
 */
#ifndef SBXP_MEMORY_SLUG_H
#define SBXP_MEMORY_SLUG_H

/* Nonzero when s is 1 to 63 of a-z 0-9 -; NULL is not valid. */
int sbxp_memory_slug_valid(const char *s);

#endif /* SBXP_MEMORY_SLUG_H */
