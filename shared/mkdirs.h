/*
 * mkdirs.h - mkdir -p of an absolute path.
 */
#ifndef SBXS_MKDIRS_H
#define SBXS_MKDIRS_H

#include <stddef.h>
#include <sys/types.h>

/*
 * Create every missing directory of the absolute path `path` with `mode`
 * (umask applies); existing components are kept as they are, whatever
 * their mode. Symlinks among existing components are followed (this is
 * for host directories an operator configures, not for paths inside a
 * workspace: those go through sbxp_confine_mkdirs). Returns 0, or -1 with errno
 * set (ENAMETOOLONG over 4095 bytes, EINVAL for a relative path) and, when
 * failed is not NULL, the component that could not be created copied into
 * failed[cap].
 */
int sbxs_mkdirs(const char *path, mode_t mode, char *failed, size_t cap);

#endif
