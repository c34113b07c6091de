/*
 * plugin_elf.c - counting a provider's ELF constructors from its file.
 *
 * dlopen runs a shared object's constructors before the host can look at
 * its descriptor, so a provider with constructors runs code of its own even
 * under `sbx providers`. The handshake reads the dynamic section from the
 * file with pread (no mapping, bounded reads) and refuses such a provider
 * before dlopen (loader.c).
 */
#include "registry/plugin_elf.h"

#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

/* Bounds for a hostile file: program headers and dynamic entries read. */
#define PHDRS_MAX 256
#define DYN_MAX 4096

static int read_at(int fd, void *buf, size_t n, uint64_t off)
{
    size_t got = 0;
    while (got < n) {
        ssize_t k = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));
        if (k <= 0)
            return -1;
        got += (size_t)k;
    }
    return 0;
}

int sbxh_plugin_elf_constructors(int fd, size_t *count, const char **why)
{
    ElfW(Ehdr) eh;
    if (read_at(fd, &eh, sizeof eh, 0) != 0 || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) {
        *why = "not an ELF file";
        return -1;
    }
    if (eh.e_ident[EI_CLASS] != (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32) ||
        eh.e_phentsize != sizeof(ElfW(Phdr)) || eh.e_phnum > PHDRS_MAX) {
        *why = "not an ELF object of this machine's class";
        return -1;
    }
    ElfW(Phdr) dyn = {0};
    int found = 0;
    for (unsigned i = 0; i < eh.e_phnum; i++) {
        ElfW(Phdr) ph;
        if (read_at(fd, &ph, sizeof ph, eh.e_phoff + (uint64_t)i * sizeof ph) != 0) {
            *why = "truncated program headers";
            return -1;
        }
        if (ph.p_type == PT_DYNAMIC) {
            dyn = ph;
            found = 1;
            break;
        }
    }
    *count = 0;
    if (!found)
        return 0; /* no dynamic section: nothing the dynamic loader would run */
    uint64_t entries = dyn.p_filesz / sizeof(ElfW(Dyn));
    if (entries > DYN_MAX)
        entries = DYN_MAX;
    for (uint64_t i = 0; i < entries; i++) {
        ElfW(Dyn) d;
        if (read_at(fd, &d, sizeof d, dyn.p_offset + i * sizeof d) != 0) {
            *why = "truncated dynamic section";
            return -1;
        }
        if (d.d_tag == DT_NULL)
            break;
        if (d.d_tag == DT_INIT_ARRAYSZ || d.d_tag == DT_PREINIT_ARRAYSZ)
            *count += d.d_un.d_val / sizeof(void *);
    }
    return 0;
}
