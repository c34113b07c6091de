/*
 * tools_files.c - read_file, write_file, list_files, stat, mkdir, move,
 * delete (docs/MCP.md).
 */
#include "mcp.h"

const struct sbxm_tool sbxm_tools_files[] = {{0}};
