/*
 * tools_state.c - snapshot, restore, snapshot_read, snapshot_write,
 * port_url (docs/MCP.md).
 */
#include "mcp.h"

const struct sbxm_tool sbxm_tools_state[] = {{0}};
