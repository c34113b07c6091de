/*
 * install_dirs.h - where an installed libsbx finds its providers and its
 * system configuration (internal).
 *
 * An ordinary install uses the directories configured at build time. When
 * the installed tree was put somewhere else (`cmake --install --prefix DIR`,
 * or a moved tree), libsbx notices that it is not in the configured library
 * directory and derives both directories from where it lies, using the same
 * relative layout, so the `sbx` of DIR finds the providers of DIR.
 */
#ifndef SBX_HOST_INSTALL_DIRS_H
#define SBX_HOST_INSTALL_DIRS_H

/* The provider directory (never NULL; computed once, thread-safe). */
const char *sbxh_install_provider_dir(void);

/* The system configuration directory holding sbx.yaml and conf.d/. */
const char *sbxh_install_sysconf_dir(void);

#endif
