/*
 * tools_exec.c - exec_command and write_stdin (docs/MCP.md).
 */
#include "mcp.h"

const struct sbxm_tool sbxm_tools_exec[] = {{0}};
