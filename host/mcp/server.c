/*
 * server.c - the serve loop of `sbx mcp` (docs/MCP.md).
 */
#include "mcp.h"

#include <stdio.h>

int sbxm_serve(const struct sbxm_options *opts, int in_fd, int out_fd)
{
    (void)opts;
    (void)in_fd;
    (void)out_fd;
    fputs("sbx mcp: not implemented yet\n", stderr);
    return 1;
}
