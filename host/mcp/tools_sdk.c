/*
 * tools_sdk.c - the tools of --tools sdk: create_sandbox with a manifest,
 * apply_manifest, add_user (docs/MCP.md).
 */
#include "internal.h"

const struct sbxm_tool sbxm_tools_sdk[] = {{0}};
