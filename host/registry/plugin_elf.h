/*
 * plugin_elf.h - what a provider file would run when dlopen maps it,
 * read from the file itself before it is mapped (internal).
 */
#ifndef SBX_HOST_PLUGIN_ELF_H
#define SBX_HOST_PLUGIN_ELF_H

#include <stddef.h>

/*
 * Count the load-time constructors of the ELF shared object open on fd:
 * the entries of DT_INIT_ARRAY and DT_PREINIT_ARRAY in its dynamic
 * section (the legacy DT_INIT function is the toolchain's and not
 * counted). Reads at most a bounded amount of the file with pread; never
 * maps or runs it.
 *
 * Returns 0 and sets *count, or -1 with *why set to a static description
 * when the file is not a readable ELF object of this machine's class (the
 * caller then lets dlopen report what it finds).
 */
int sbxh_plugin_elf_constructors(int fd, size_t *count, const char **why);

/* How many constructor entries a provider may have: the one a GNU
 * toolchain's crtbegin contributes (frame_dummy). */
#define SBX_PLUGIN_TOOLCHAIN_CONSTRUCTORS 1

/*
 * 0 in sanitizer and fuzzing builds (the top-level CMakeLists.txt): their
 * instrumentation gives every object file a module constructor, so the
 * count says nothing there and the loader does not refuse on it.
 */
#ifndef SBX_PLUGIN_CONSTRUCTOR_CHECK
#define SBX_PLUGIN_CONSTRUCTOR_CHECK 1
#endif

#endif
