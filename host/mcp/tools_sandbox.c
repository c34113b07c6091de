/*
 * tools_sandbox.c - create_sandbox, connect_sandbox, destroy_sandbox,
 * list_sandboxes (docs/MCP.md).
 */
#include "mcp.h"

const struct sbxm_tool sbxm_tools_sandbox[] = {{0}};
