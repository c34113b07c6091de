/*
 * host_table.h - the services libsbx offers each provider, struct sbx_host
 * of sbx/provider.h (internal; host_table.c).
 */
#ifndef SBX_HOST_REGISTRY_HOST_TABLE_H
#define SBX_HOST_REGISTRY_HOST_TABLE_H

#include "registry/provider.h"

/* Fill the host table of a provider record: its ctx points back at p, so
 * config lookups see only p's section and log lines carry p's name. */
void sbxh_host_table_init(struct sbx_provider *p);

#endif
