/*
 * tools_search.c - search and git_clone (docs/MCP.md).
 */
#include "mcp.h"

const struct sbxm_tool sbxm_tools_search[] = {{0}};
