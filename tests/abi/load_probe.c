/*
 * load_probe.c - run the host's handshake on one plugin, for the shell
 * tests of this directory that build providers at test time.
 *
 * usage: load_probe DIR NAME
 * Loads DIR/NAME.so with the loader of libsbx (nothing else of the host,
 * no configuration) and prints one line:
 *   ok NAME abi MAJOR.MINOR desc_size N ops_size N     (exit 0)
 *   refused STATUS: MESSAGE                            (exit 1)
 * Exit 2 on bad usage.
 */
#include "registry/loader.h"

#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s DIR NAME\n", argv[0]);
        return 2;
    }
    struct sbx_plugin p;
    sbx_error err;
    sbx_error_clear(&err);
    int rc = sbxh_plugin_load(argv[1], argv[2], &p, &err);
    if (rc != SBX_OK) {
        printf("refused %d: %s\n", rc, err.message);
        return 1;
    }
    printf("ok %s abi %u.%u desc_size %u ops_size %u\n", p.desc->name,
           p.desc->abi_major, p.desc->abi_minor, p.desc->desc_size,
           p.desc->ops_size);
    sbxh_plugin_clear(&p);
    return 0;
}
